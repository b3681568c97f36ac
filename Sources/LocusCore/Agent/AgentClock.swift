/// The agent's UTC clock.
///
/// Gateways often have no real-time clock: until NTP answers (and in the field it may never),
/// CLOCK_REALTIME can be off by years. A GNSS fix carries UTC, so once fixes arrive the clock
/// follows them: UTC = the newest fix's time + the monotonic time elapsed since it arrived.
/// Before the first fix it is CLOCK_REALTIME. Fixes, sightings and timers are then all decided on
/// one time line, the receiver's.
///
/// It never runs backwards by a little: a fix a few seconds older than the clock (the receiver's
/// output lagging) leaves the clock where it is. A large step back (a receiver reset to a stale
/// almanac time, a recording started over) is taken, and reported by `anchor`'s return value.
public struct AgentClock: Sendable {
    /// A fix this much older than the clock re-anchors it backwards; less is output lag.
    public static let stepBackThresholdNs: Int64 = 60_000_000_000

    private var anchorUTCNs: Int64? = nil
    private var anchorMonotonicNs: Int64 = 0
    private var latestNs: Int64 = Int64.min

    public init() {}

    /// Whether a fix has set the clock.
    public var followsGNSS: Bool { anchorUTCNs != nil }

    public mutating func now(monotonicNs: Int64, realtimeNs: Int64) -> UTCTime {
        var value = realtimeNs
        if let anchor = anchorUTCNs { value = anchor &+ (monotonicNs &- anchorMonotonicNs) }
        if value < latestNs { value = latestNs }
        latestNs = value
        return UTCTime(nanoseconds: value)
    }

    /// A step of the clock larger than this is a jump, not the receiver's time running ahead of
    /// the monotonic clock by a little: the engine's remembered times move with it.
    public static let stepThresholdNs: Int64 = 2_000_000_000

    /// A fix with UTC time `fixNs` arrived at `monotonicNs`. Returns the step the clock took
    /// (nanoseconds; negative backwards) when it is a jump to report and to shift the engine's
    /// remembered times by, or nil.
    public mutating func anchor(fixNs: Int64, monotonicNs: Int64, realtimeNs: Int64) -> Int64? {
        let following = anchorUTCNs != nil
        let current = anchorUTCNs.map { $0 &+ (monotonicNs &- anchorMonotonicNs) } ?? max(realtimeNs, latestNs)
        let step = fixNs &- current
        if following && step < 0 && -step < AgentClock.stepBackThresholdNs { return nil }
        anchorUTCNs = fixNs
        anchorMonotonicNs = monotonicNs
        if fixNs < latestNs { latestNs = fixNs }
        return !following || step > AgentClock.stepThresholdNs || step < 0 ? (step == 0 ? nil : step) : nil
    }
}
