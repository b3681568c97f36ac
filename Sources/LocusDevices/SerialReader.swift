import CLocus
import LocusCore

/// A GNSS receiver's UART: opened raw (8N1, no flow control, non-blocking) at the board's baud
/// rate, read into one fixed buffer, and reopened with backoff when the device goes away (a USB
/// receiver unplugged, a pseudo-terminal whose writer closed: EIO, ENXIO, ENODEV, or end of file).
///
/// It never blocks: reads stop at EAGAIN, and a closed port waits for its reopen time, which the
/// poll loop turns into a timeout.
public struct SerialReader: ~Copyable {
    /// What happened to the port, for the agent to log. At most one per call.
    public enum Event: Equatable {
        case opened
        /// The device failed or vanished; the reader closed it and will retry.
        case lost(SystemError?)
        /// An open attempt failed; the next is due after `retryInMs`.
        case openFailed(SystemError, retryInMs: Int64)
    }

    public static let initialBackoffNs: Int64 = 250_000_000
    public static let maximumBackoffNs: Int64 = 10_000_000_000
    /// Reads per `read` call: bounds the time one busy port can hold the loop.
    public static let maximumReadsPerTurn = 8
    /// The buffer one read fills, unless a reader is given another size.
    public static let defaultBufferSize = 4096

    public let path: String
    public let baud: Int
    private var fd: Int32 = -1
    private var nextAttemptNs: Int64 = 0
    private var backoffNs: Int64 = SerialReader.initialBackoffNs
    private let buffer: UnsafeMutableRawBufferPointer
    /// Bytes read since start, and how often the device was lost.
    public private(set) var bytesRead: Int64 = 0
    public private(set) var losses = 0

    public init(path: String, baud: Int, bufferSize: Int = SerialReader.defaultBufferSize) {
        self.path = path
        self.baud = baud
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
    }

    deinit {
        if fd >= 0 { _ = locus_close(fd) }
        buffer.deallocate()
    }

    /// The size of the buffer each read fills: a caller sizes what one `read` can produce
    /// from it (at most `maximumReadsPerTurn` fills).
    public var bufferSize: Int { buffer.count }

    /// The port while it is open.
    public var descriptor: Descriptor? { Descriptor(fd) }

    public var isOpen: Bool { fd >= 0 }

    /// When closed: the monotonic time of the next open attempt.
    public var nextAttemptAtNs: Int64? { isOpen ? nil : nextAttemptNs }

    /// Opens the port if it is closed and its retry time has come.
    public mutating func openIfDue(now: Int64) -> Event? {
        guard !isOpen, now >= nextAttemptNs else { return nil }
        let result = locus_uart_open(path, Int32(baud))
        if result >= 0 {
            fd = result
            backoffNs = SerialReader.initialBackoffNs
            return .opened
        }
        let error = SystemError(code: -result)
        nextAttemptNs = now + backoffNs
        let waited = backoffNs
        backoffNs = min(backoffNs * 2, SerialReader.maximumBackoffNs)
        return .openFailed(error, retryInMs: waited / 1_000_000)
    }

    /// Reads what is available, at most `maximumReads` buffers (`maximumReadsPerTurn` unless
    /// told), handing each chunk to `body`. On a device error or end of file the port is closed
    /// and a reopen is scheduled.
    public mutating func read(now: Int64, maximumReads: Int = SerialReader.maximumReadsPerTurn,
                              _ body: (UnsafeRawBufferPointer) -> Void) -> Event? {
        guard isOpen else { return nil }
        for _ in 0..<maximumReads {
            let count = locus_read(fd, buffer.baseAddress, buffer.count)
            if count > 0 {
                bytesRead += Int64(count)
                body(UnsafeRawBufferPointer(rebasing: buffer[0..<Int(count)]))
                if count < buffer.count { return nil }
                continue
            }
            if count == 0 { return lose(nil, now: now) }
            let error = SystemError(code: Int32(truncatingIfNeeded: -count))
            if error == .wouldBlock { return nil }
            return lose(error, now: now)
        }
        return nil
    }

    /// Writes a receiver command (UBX or PMTK). Short writes are finished; a full output buffer
    /// (EAGAIN) is reported to the caller, which retries on its next turn.
    public func write(_ bytes: UnsafeRawBufferPointer) -> SystemError? {
        guard let descriptor else { return .noDevice }
        return SerialReader.write(bytes, to: descriptor)
    }

    /// The same on the port's descriptor, for a caller that holds only that (the write closure
    /// of `ReceiverControl.service`, while the reader itself is borrowed elsewhere).
    public static func write(_ bytes: UnsafeRawBufferPointer, to port: Descriptor) -> SystemError? {
        var offset = 0
        var attempts = 0
        while offset < bytes.count && attempts < 16 {
            let count = locus_write(port.rawValue, bytes.baseAddress! + offset, bytes.count - offset)
            if count < 0 { return SystemError(code: Int32(truncatingIfNeeded: -count)) }
            offset += Int(count)
            attempts += 1
        }
        return offset == bytes.count ? nil : .wouldBlock
    }

    private mutating func lose(_ error: SystemError?, now: Int64) -> Event {
        _ = locus_close(fd)
        fd = -1
        losses += 1
        nextAttemptNs = now + backoffNs
        return .lost(error)
    }

    /// Closes the port (shutdown); no reopen is scheduled before `openIfDue` is called again.
    public mutating func close() {
        if fd >= 0 { _ = locus_close(fd) }
        fd = -1
    }
}

extension ReceiverControl {
    /// `service(now:write:)` with a port write that reports a `SystemError`: EAGAIN is a full
    /// buffer, anything else a failing port.
    public mutating func service(now: MonotonicInstant, write: (UnsafeRawBufferPointer) -> SystemError?) -> Bool {
        service(now: now) { bytes in
            guard let error = write(bytes) else { return .written }
            return error == .wouldBlock ? .full : .failed
        }
    }
}
