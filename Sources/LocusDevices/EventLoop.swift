import CLocus

/// The descriptors one turn of the agent's loop waits on, rebuilt every turn (a dozen entries).
public struct PollSet: ~Copyable {
    public static let capacity = 64
    private let descriptors: UnsafeMutableBufferPointer<Int32>
    private let events: UnsafeMutableBufferPointer<Int16>
    private let returned: UnsafeMutableBufferPointer<Int16>
    public private(set) var count = 0

    public init() {
        descriptors = .allocate(capacity: PollSet.capacity)
        events = .allocate(capacity: PollSet.capacity)
        returned = .allocate(capacity: PollSet.capacity)
    }

    deinit {
        descriptors.deallocate()
        events.deallocate()
        returned.deallocate()
    }

    public mutating func removeAll() { count = 0 }

    /// Adds a descriptor; returns its index for `ready`, or -1 (negative descriptor, or full).
    public mutating func add(_ descriptor: Int32, write: Bool = false) -> Int {
        guard descriptor >= 0, count < PollSet.capacity else { return -1 }
        descriptors[count] = descriptor
        events[count] = Int16(LOCUS_POLLIN) | (write ? Int16(LOCUS_POLLOUT) : 0)
        returned[count] = 0
        count += 1
        return count - 1
    }

    /// Waits until a descriptor is ready (-1: no timeout). Returns the ready count or -errno.
    public func wait(timeoutMs: Int32) -> Int32 {
        locus_poll(descriptors.baseAddress, events.baseAddress, returned.baseAddress, Int32(count), timeoutMs)
    }

    /// Readable, or hung up / in error (a read will say which).
    public func readable(_ index: Int) -> Bool {
        index >= 0 && returned[index] & Int16(LOCUS_POLLIN | LOCUS_POLLHUP | LOCUS_POLLERR) != 0
    }

    public func writable(_ index: Int) -> Bool { index >= 0 && returned[index] & Int16(LOCUS_POLLOUT) != 0 }
}

/// A CLOCK_MONOTONIC timerfd armed for the loop's next deadline: with nothing arriving the agent
/// sleeps in poll(2) until exactly then.
public struct DeadlineTimer: ~Copyable {
    public let descriptor: Int32
    public private(set) var armedAtNs: Int64? = nil

    public init() throws(SystemError) {
        let fd = locus_timerfd_create()
        if fd < 0 { throw SystemError(code: -fd) }
        descriptor = fd
    }

    deinit { _ = locus_close(descriptor) }

    /// Arms for monotonic time `deadlineNs` (nil disarms). Re-arming for the same time is free.
    public mutating func arm(at deadlineNs: Int64?, now: Int64) {
        guard deadlineNs != armedAtNs else { return }
        armedAtNs = deadlineNs
        guard let deadlineNs else {
            _ = locus_timerfd_arm(descriptor, 0)
            return
        }
        _ = locus_timerfd_arm(descriptor, max(1, deadlineNs - now))
    }

    /// Consumes the expiry count after the timer fired.
    public mutating func acknowledge() {
        var expirations: UInt64 = 0
        _ = withUnsafeMutableBytes(of: &expirations) { locus_read(descriptor, $0.baseAddress, 8) }
        armedAtNs = nil
    }
}

/// SIGTERM, SIGINT and SIGHUP as a readable descriptor (they are blocked for normal delivery).
public struct SignalSource: ~Copyable {
    public enum Signal: Equatable { case terminate, interrupt, hangUp }
    public let descriptor: Int32

    public init() throws(SystemError) {
        let fd = locus_signalfd_create()
        if fd < 0 { throw SystemError(code: -fd) }
        descriptor = fd
    }

    deinit { _ = locus_close(descriptor) }

    /// The next pending signal, or nil.
    public func next() -> Signal? {
        switch locus_signalfd_read(descriptor) {
        case Int32(LOCUS_SIGTERM): return .terminate
        case Int32(LOCUS_SIGINT): return .interrupt
        case Int32(LOCUS_SIGHUP): return .hangUp
        default: return nil
        }
    }
}

/// sd_notify(3) without libsystemd: one datagram to $NOTIFY_SOCKET per state change. Silent
/// (and free) when the agent was not started by systemd with Type=notify.
public struct ServiceNotifier {
    public let socketPath: String?
    /// Half of systemd's WatchdogSec (from $WATCHDOG_USEC), or nil when no watchdog is set.
    public let watchdogIntervalNs: Int64?

    public init() {
        socketPath = Process.environment("NOTIFY_SOCKET").flatMap { $0.isEmpty ? nil : $0 }
        var interval: Int64? = nil
        if let text = Process.environment("WATCHDOG_USEC"), let microseconds = Int64(text), microseconds > 0 {
            // WATCHDOG_PID, when set, names the process the watchdog is meant for.
            let pid = Process.environment("WATCHDOG_PID").flatMap { Int32($0) }
            if pid == nil || pid == Process.id { interval = microseconds * 1_000 / 2 }
        }
        watchdogIntervalNs = interval
    }

    /// Sends "READY=1", "WATCHDOG=1", "STOPPING=1", "RELOADING=1", "STATUS=..." (newline-separated).
    @discardableResult
    public func notify(_ state: String) -> SystemError? {
        guard let socketPath else { return nil }
        var copy = state
        let result = copy.withUTF8 { locus_unix_send_datagram(socketPath, $0.baseAddress, $0.count) }
        return result < 0 ? SystemError(code: -result) : nil
    }
}
