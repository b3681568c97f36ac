import CLocus
import LocusCore

/// An open file descriptor: a small type of its own, so "no descriptor" is `nil`, not `-1`.
public struct Descriptor: Equatable, Hashable, Sendable {
    public let rawValue: Int32

    /// nil for a negative value (a closed slot, a failed open).
    @inline(__always)
    public init?(_ rawValue: Int32) {
        guard rawValue >= 0 else { return nil }
        self.rawValue = rawValue
    }
}

/// The descriptors one turn of the agent's loop waits on, rebuilt every turn. Its capacity is
/// the sum of what the loop's components can register (`maximumDescriptors` each), fixed at
/// start; `add` never grows it.
///
/// Invariant: `0 <= count <= capacity`. A descriptor that does not fit is not added: `add`
/// returns nil and `overflows` counts it (the loop logs it); a poll set sized from its
/// components never overflows.
public struct PollSet: ~Copyable {
    /// A position in this turn's set, for `readable` and `writable`.
    public struct Index: Equatable, Sendable {
        fileprivate let rawValue: Int
    }

    public let capacity: Int
    private let descriptors: UnsafeMutableBufferPointer<Int32>
    private let events: UnsafeMutableBufferPointer<Int16>
    private let returned: UnsafeMutableBufferPointer<Int16>
    public private(set) var count = 0
    /// Descriptors refused because the set was full, since start.
    public private(set) var overflows = 0

    public init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
        descriptors = .allocate(capacity: capacity)
        events = .allocate(capacity: capacity)
        returned = .allocate(capacity: capacity)
    }

    deinit {
        descriptors.deallocate()
        events.deallocate()
        returned.deallocate()
    }

    @_noAllocation
    public mutating func removeAll() { count = 0 }

    /// Adds a descriptor to wait on (readable, and writable when `write`); nil for no descriptor,
    /// or when the set is full (counted in `overflows`).
    @_noAllocation
    public mutating func add(_ descriptor: Descriptor?, write: Bool = false) -> Index? {
        guard let descriptor else { return nil }
        guard count < capacity else {
            overflows += 1
            return nil
        }
        descriptors[count] = descriptor.rawValue
        events[count] = Int16(LOCUS_POLLIN) | (write ? Int16(LOCUS_POLLOUT) : 0)
        returned[count] = 0
        count += 1
        return Index(rawValue: count - 1)
    }

    /// Waits until a descriptor is ready (-1: no timeout). Returns the ready count or -errno.
    public func wait(timeoutMs: Int32) -> Int32 {
        locus_poll(descriptors.baseAddress, events.baseAddress, returned.baseAddress, Int32(count), timeoutMs)
    }

    /// Readable, or hung up / in error (a read will say which).
    @_noAllocation
    public func readable(_ index: Index?) -> Bool {
        guard let index else { return false }
        return returned[index.rawValue] & Int16(LOCUS_POLLIN | LOCUS_POLLHUP | LOCUS_POLLERR) != 0
    }

    @_noAllocation
    public func writable(_ index: Index?) -> Bool {
        guard let index else { return false }
        return returned[index.rawValue] & Int16(LOCUS_POLLOUT) != 0
    }
}

/// A CLOCK_MONOTONIC timerfd armed for the loop's next deadline: with nothing arriving the agent
/// sleeps in poll(2) until exactly then.
public struct DeadlineTimer: ~Copyable {
    public let descriptor: Descriptor
    public private(set) var armedAt: MonotonicInstant? = nil

    public init() throws(SystemError) {
        let fd = locus_timerfd_create()
        guard let descriptor = Descriptor(fd) else { throw SystemError(code: -fd) }
        self.descriptor = descriptor
    }

    deinit { _ = locus_close(descriptor.rawValue) }

    /// Arms for `deadline` (nil disarms). Re-arming for the same time is free. (Not
    /// `@_noAllocation`: the allocation check cannot see into the C call; it allocates nothing.)
    public mutating func arm(at deadline: MonotonicInstant?, now: MonotonicInstant) {
        guard deadline != armedAt else { return }
        armedAt = deadline
        guard let deadline else {
            _ = locus_timerfd_arm(descriptor.rawValue, 0)
            return
        }
        _ = locus_timerfd_arm(descriptor.rawValue, max(1, deadline.nanoseconds(since: now)))
    }

    /// Consumes the expiry count after the timer fired.
    public mutating func acknowledge() {
        var expirations: UInt64 = 0
        _ = withUnsafeMutableBytes(of: &expirations) { locus_read(descriptor.rawValue, $0.baseAddress, 8) }
        armedAt = nil
    }
}

/// SIGTERM, SIGINT and SIGHUP as a readable descriptor (they are blocked for normal delivery).
public struct SignalSource: ~Copyable {
    public enum Signal: Equatable { case terminate, interrupt, hangUp }
    public let descriptor: Descriptor

    public init() throws(SystemError) {
        let fd = locus_signalfd_create()
        guard let descriptor = Descriptor(fd) else { throw SystemError(code: -fd) }
        self.descriptor = descriptor
    }

    deinit { _ = locus_close(descriptor.rawValue) }

    /// The next pending signal, or nil.
    public func next() -> Signal? {
        switch locus_signalfd_read(descriptor.rawValue) {
        case Int32(LOCUS_SIGTERM): return .terminate
        case Int32(LOCUS_SIGINT): return .interrupt
        case Int32(LOCUS_SIGHUP): return .hangUp
        default: return nil
        }
    }
}
