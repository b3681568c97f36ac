import CLocus

/// Standard output and error, written whole (short writes and EINTR retried in the shim).
public enum Console {
    public static func out(_ text: String) { write(1, text) }
    public static func error(_ text: String) { write(2, text) }

    /// A line rendered by a `JSONWriter` (its `bytes`), written as it is.
    public static func out(_ bytes: UnsafeRawBufferPointer) { write(1, bytes) }
    public static func error(_ bytes: UnsafeRawBufferPointer) { write(2, bytes) }

    public static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        _ = locus_write_all(fd, base, bytes.count)
    }

    public static func write(_ fd: Int32, _ text: String) {
        var copy = text
        copy.withUTF8 { buffer in
            _ = locus_write_all(fd, buffer.baseAddress, buffer.count)
        }
    }
}

/// Bulk output (the log export, `locus events`): lines are gathered in a buffer allocated once and
/// written out when the next one does not fit and at `flush()`, so a million records take a few
/// thousand writes instead of a million. Callers flush before anything else writes (standard
/// error, a pause in --follow) so that the order people see stays the order of the calls.
public struct BufferedOutput: ~Copyable {
    private let descriptor: Int32
    private let storage: UnsafeMutableRawBufferPointer
    private var count = 0

    public init(descriptor: Int32 = 1, capacity: Int = 64 * 1024) {
        precondition(capacity > 0)
        self.descriptor = descriptor
        storage = .allocate(byteCount: capacity, alignment: 1)
    }

    deinit {
        Console.write(descriptor, UnsafeRawBufferPointer(rebasing: storage[0..<count]))
        storage.deallocate()
    }

    public mutating func write(_ bytes: UnsafeRawBufferPointer) {
        if bytes.count > storage.count - count { flush() }
        guard bytes.count <= storage.count else { return Console.write(descriptor, bytes) }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        (storage.baseAddress! + count).copyMemory(from: base, byteCount: bytes.count)
        count += bytes.count
    }

    public mutating func flush() {
        Console.write(descriptor, UnsafeRawBufferPointer(rebasing: storage[0..<count]))
        count = 0
    }
}
