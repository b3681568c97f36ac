/// A reading of the monotonic clock (CLOCK_MONOTONIC, nanoseconds from an arbitrary start; it
/// never jumps). The agent's deadlines, retries, backoffs and timers are monotonic instants; what
/// happened in the world (fixes, events, log records) carries a `UTCTime`. They are different
/// types so that one cannot be compared with, or stored as, the other: `AgentTime` holds both
/// readings of one moment and converts between them.
///
/// Durations stay plain integers with their unit last (`retryNs`, `timeoutMs`).
public struct MonotonicInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public let nanoseconds: Int64

    @inline(__always)
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    @inline(__always)
    public static func < (a: MonotonicInstant, b: MonotonicInstant) -> Bool { a.nanoseconds < b.nanoseconds }

    /// This instant plus a duration (nanoseconds, may be negative).
    @inline(__always)
    public static func + (instant: MonotonicInstant, durationNs: Int64) -> MonotonicInstant {
        MonotonicInstant(nanoseconds: instant.nanoseconds &+ durationNs)
    }

    /// Nanoseconds from `earlier` to this instant (negative when `earlier` is later).
    @inline(__always)
    public func nanoseconds(since earlier: MonotonicInstant) -> Int64 { nanoseconds &- earlier.nanoseconds }

    public var description: String { "monotonic \(nanoseconds) ns" }
}

/// One moment on both of the agent's clocks: the turn's `now`, read once per turn (and again
/// after a fix has moved the UTC clock). Handlers take it; none reads a clock itself.
public struct AgentTime: Sendable {
    public let monotonic: MonotonicInstant
    /// The agent's UTC clock (`AgentClock`: CLOCK_REALTIME until GNSS time, then GNSS time).
    public let utc: UTCTime

    @inline(__always)
    public init(monotonic: MonotonicInstant, utc: UTCTime) {
        self.monotonic = monotonic
        self.utc = utc
    }

    /// The monotonic instant at which the UTC clock will read `time`; now for a time already past.
    @inline(__always)
    public func monotonic(at time: UTCTime) -> MonotonicInstant {
        monotonic + max(0, time.totalNanoseconds &- utc.totalNanoseconds)
    }
}

/// The earliest deadline of the loop's components, on the monotonic clock. A component states
/// its deadlines in the clock they belong to; UTC ones (the engine's timeouts, the updaters'
/// batch ages) are converted with the turn's `now`.
public struct NextDeadline: Sendable {
    public let now: AgentTime
    /// nil: nothing is due until input arrives.
    public private(set) var earliest: MonotonicInstant? = nil

    public init(now: AgentTime) { self.now = now }

    @inline(__always)
    public mutating func consider(_ instant: MonotonicInstant?) {
        guard let instant else { return }
        if let current = earliest, current <= instant { return }
        earliest = instant
    }

    @inline(__always)
    public mutating func consider(_ time: UTCTime?) {
        guard let time else { return }
        consider(now.monotonic(at: time))
    }
}
