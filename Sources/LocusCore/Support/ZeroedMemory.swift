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

/// Several tables in one zeroed block: one allocation instead of one per table. musl's malloc
/// writes the first and the last page of every block it maps (its header and the block's size), so
/// each separate table sized for 10,000 conditions costs 8 KiB resident even when it is never
/// used; in one block, the tables that stay empty cost nothing.
///
///     var layout = TableBlock()
///     let a = layout.reserve(Int32.self, count: n)     // offsets, aligned
///     let block = layout.allocate()                      // calloc: zeros, not written
///     let table: UnsafeMutableBufferPointer<Int32> = TableBlock.table(block, a, count: n)
struct TableBlock {
    private(set) var size = 0

    /// Room for `count` values of `T` (at least one); returns its offset in the block.
    mutating func reserve<T>(_: T.Type, count: Int) -> Int {
        let alignment = MemoryLayout<T>.alignment
        precondition(alignment <= 16, "calloc's alignment holds the table")
        let offset = (size + alignment - 1) / alignment * alignment
        size = offset + max(1, count) * MemoryLayout<T>.stride
        return offset
    }

    /// The block, zero-filled (free it with `deallocate`).
    func allocate() -> UnsafeMutableRawPointer {
        UnsafeMutableRawPointer(ZeroedMemory.allocate(UInt8.self, capacity: size).baseAddress!)
    }

    /// The table reserved at `offset`, its memory bound to `T` (zeros: initialize values as they are used).
    static func table<T>(_ block: UnsafeMutableRawPointer, _ offset: Int, count: Int) -> UnsafeMutableBufferPointer<T> {
        UnsafeMutableBufferPointer(start: (block + offset).bindMemory(to: T.self, capacity: max(1, count)), count: max(1, count))
    }

    static func deallocate(_ block: UnsafeMutableRawPointer) { block.deallocate() }
}
