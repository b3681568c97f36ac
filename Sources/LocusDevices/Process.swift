import CLocus
import LocusCore

/// The running process: arguments, environment, exit. Both build modes read arguments from the
/// C shim (Embedded Swift has no `CommandLine`).
public enum Process {
    /// Arguments after the program name.
    public static var arguments: [String] {
        var result: [String] = []
        let count = Int(locus_argc())
        var index = 1
        while index < count {
            if let pointer = locus_argv(Int32(index)) { result.append(String(cString: pointer)) }
            index += 1
        }
        return result
    }

    public static func environment(_ name: String) -> String? {
        guard let value = locus_getenv(name) else { return nil }
        return String(cString: value)
    }

    public static var id: Int32 { locus_getpid() }

    /// Gives the heap pages start-up freed back to the kernel, so the resident size is what the
    /// agent keeps, not what parsing the config once needed.
    public static func releaseFreeMemory() { locus_release_free_memory() }

    /// Fixed-capacity tables are large blocks of which only the used part is ever touched:
    /// mapped on their own, the untouched rest costs no memory.
    public static func mapLargeBlocks() { locus_map_large_blocks() }

    /// Heap bytes in use (including large mapped blocks) and free within the heap.
    public static var heapUsage: (inUse: Int64, free: Int64) {
        var inUse: Int64 = 0
        var free: Int64 = 0
        locus_heap_usage(&inUse, &free)
        return (inUse, free)
    }

    public static func exit(_ status: Int32) -> Never {
        locus_exit(status)
    }
}

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

/// The agent's diagnostic log on standard error. Under systemd (standard error not a terminal)
/// every line starts with its syslog priority, `<3>` to `<7>`, which journald reads as the level;
/// on a terminal the prefix is left out.
public enum AgentLog {
    public enum Priority: Int32 { case error = 3, warning = 4, notice = 5, info = 6, debug = 7 }

    public static let prefixed = locus_isatty(2) != 1

    /// The least severe priority written (`locus replay` keeps warnings and errors only).
    nonisolated(unsafe) public static var threshold = Priority.debug
    /// Nothing is written (the simulator runs thousands of agents; it prints its own findings).
    nonisolated(unsafe) public static var muted = false
    /// Whether the line `begin` started is written.
    nonisolated(unsafe) private static var begunLineShown = true

    public static func write(_ priority: Priority, _ text: String) {
        guard !muted, priority.rawValue <= threshold.rawValue else { return }
        Console.error(prefixed ? "<\(priority.rawValue)>\(text)\n" : "\(text)\n")
    }

    /// Starts a line in `line` (reset first) with its priority prefix when there is one; the
    /// caller writes the text and hands it to `finish`. For lines written on the loop's hot path:
    /// no String is made.
    public static func begin(_ priority: Priority, into line: inout JSONWriter) {
        line.reset()
        begunLineShown = !muted && priority.rawValue <= threshold.rawValue
        guard prefixed else { return }
        line.text("<")
        line.text(Int(priority.rawValue))
        line.text(">")
    }

    /// Ends the line `begin` started and writes it to standard error.
    public static func finish(_ line: inout JSONWriter) {
        guard begunLineShown else { return }
        line.newline()
        let bytes = line.bytes
        _ = locus_write_all(2, bytes.baseAddress, bytes.count)
    }

    public static func error(_ text: String) { write(.error, text) }
    public static func warning(_ text: String) { write(.warning, text) }
    public static func notice(_ text: String) { write(.notice, text) }
    public static func info(_ text: String) { write(.info, text) }
    public static func debug(_ text: String) { write(.debug, text) }
}
