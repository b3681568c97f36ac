// Zero-filled tables from the C library's calloc, declared by symbol as LibM declares libm (pointer
// and size arguments travel in the same registers under the Swift and C conventions on x86_64 and
// aarch64).
//
// Why not `allocate` + `initialize(repeating: 0)`: a table sized for a capacity (a hash table at
// most half full, 10,000 conditions' worth) is written whole by `initialize`, so every page of it
// is resident from the start, used or not. calloc hands out memory that is known to be zero
// without writing it: a large block comes straight from mmap (glibc and musl both skip the
// clearing then), so the pages that are never written cost nothing. A table whose empty entries
// are zero (a slot number stored + 1, for example) is then free until it fills.

@_silgen_name("calloc") private func c_calloc(_ count: Int, _ size: Int) -> UnsafeMutableRawPointer?

enum ZeroedMemory {
    /// `capacity` zeros of an integer type (at least one element). Give it back with `deallocate`.
    static func allocate<T: FixedWidthInteger>(_: T.Type, capacity: Int) -> UnsafeMutableBufferPointer<T> {
        let count = max(1, capacity)
        guard let raw = c_calloc(count, MemoryLayout<T>.stride) else { fatalError("out of memory") }
        return UnsafeMutableBufferPointer(start: raw.bindMemory(to: T.self, capacity: count), count: count)
    }

    /// The runtime's deallocation is the C library's free in both builds (for the default
    /// alignment, which calloc's memory has).
    static func deallocate<T>(_ buffer: UnsafeMutableBufferPointer<T>) {
        UnsafeMutableRawPointer(buffer.baseAddress!).deallocate()
    }
}
