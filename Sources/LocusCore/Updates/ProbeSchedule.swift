/// How long a stationary receiver may sleep before its next probe: "sampling that knows what it
/// is waiting for". A fence transition needs movement, and from the last fix the device cannot
/// reach the nearest edge sooner than `clearance / top speed`; woken then plus the tier's
/// lateness budget, less the receiver's hot start and one fix interval, it sees the transition at
/// most `lateBudgetMs` late even if it left right after the last fix.
///
/// - Without a motion input the sleep is also capped at the preset's stationary window, so a
///   departure far from every fence is seen about as soon as a stop was (and never sooner than
///   the budget allows: the floor is the budget itself).
/// - With a motion input the input wakes the receiver when it moves; probes are only a safety
///   net: at least `motionFloorMs` apart (longer when the edges are further), at most
///   `motionCeilingMs`.
///
/// Pure arithmetic on integers and one division: allocation-free, no state.
public struct ProbeSchedule: Equatable, Sendable {
    /// A fence transition is seen at most this late: the tier's longest interval, at least 10 s.
    public let lateBudgetMs: Int64
    /// The receiver's fix interval: slack for the first fix after the hot start.
    public let fixIntervalMs: Int64
    public let maximumSpeedMps: Double
    /// Without a motion input, the longest sleep (the preset's stationary window).
    public let longestSleepMs: Int64
    /// A motion input wakes the receiver: probes are a safety net.
    public let motionInput: Bool

    /// With a motion input: probes at least this far apart (10 min) ...
    public static let motionFloorMs: Int64 = 600_000
    /// ... and at most this far (1 h), however far the edges.
    public static let motionCeilingMs: Int64 = 3_600_000

    public init(lateBudgetMs: Int64, fixIntervalMs: Int64, maximumSpeedMps: Double, longestSleepMs: Int64, motionInput: Bool) {
        precondition(lateBudgetMs > 0 && fixIntervalMs > 0 && maximumSpeedMps > 0 && longestSleepMs > 0)
        self.lateBudgetMs = lateBudgetMs
        self.fixIntervalMs = fixIntervalMs
        self.maximumSpeedMps = maximumSpeedMps
        self.longestSleepMs = longestSleepMs
        self.motionInput = motionInput
    }

    public init(_ configuration: LiveConfiguration, _ tier: TierPolicy, motionInput: Bool) {
        self.init(lateBudgetMs: max(10_000, tier.maximumIntervalMs), fixIntervalMs: configuration.fixIntervalMs,
                  maximumSpeedMps: configuration.maximumSpeedMps, longestSleepMs: configuration.stationaryWindowMs,
                  motionInput: motionInput)
    }

    /// The sleep after a fix whose distance to the nearest fence edge less its accuracy is
    /// `clearanceM` (nil: no fence), with the receiver's hot start `hotStartMs`. Under
    /// `PauseController.minimumSleepMs` means: too near an edge to sleep.
    @_noAllocation
    public func sleepMs(clearanceM: Double?, hotStartMs: Int64) -> Int64 {
        // Ten days: "no edge within reach" without overflowing the sums below.
        let farMs: Int64 = 864_000_000
        var reachMs = farMs
        if let clearanceM {
            if !(clearanceM > 0) {
                reachMs = 0
            } else {
                let seconds = clearanceM / maximumSpeedMps
                reachMs = seconds >= Double(farMs) / 1_000 ? farMs : Int64(seconds * 1_000)
            }
        }
        let fenceMs = reachMs + lateBudgetMs - max(0, hotStartMs) - fixIntervalMs
        if motionInput { return min(max(fenceMs, ProbeSchedule.motionFloorMs), ProbeSchedule.motionCeilingMs) }
        return min(fenceMs, max(longestSleepMs, lateBudgetMs))
    }
}
