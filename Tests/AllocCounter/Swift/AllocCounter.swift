import CAllocCounter

/// Counts the heap allocations `body` makes on the current thread.
///
/// The counter replaces the process's malloc (see CAllocCounter), so it sees allocations made
/// by the Swift runtime as well as by C code. It traps if the interposer is not in effect, so a
/// zero can never come from a counter that was not counting.
public func allocationCount<T>(_ body: () throws -> T) rethrows -> (result: T, allocations: Int) {
    precondition(alloc_counter_is_active() == 1, "malloc interposer is not linked into this binary")
    alloc_counter_begin()
    let result = try body()
    let allocations = Int(alloc_counter_end())
    return (result, allocations)
}

/// Number of allocations `body` made; the helper tests use for "this allocated 0 times".
public func allocations(_ body: () throws -> Void) rethrows -> Int {
    try allocationCount(body).allocations
}
