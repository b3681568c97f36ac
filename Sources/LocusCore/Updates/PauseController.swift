/// The receiver's schedule while the device stands still (CLLocationUpdate's automatic pause):
/// asleep in its lowest-power mode, woken for a periodic probe, and back to its tier's plan when
/// a probe shows movement or a motion input fires.
///
/// Pure bookkeeping: the agent feeds it what happened and carries out the action it returns with
/// the receiver's commands. Times are the agent's clock in nanoseconds.
///
/// - Becoming stationary puts the receiver to sleep for `probeIntervalMs`.
/// - A probe wakes it and lasts until `probeFixes` accepted fixes (enough for the stationary
///   detector to confirm movement, which takes two fixes outside the stay) or `probeTimeoutMs`
///   without them (no sky: try again later); still stationary, it sleeps again.
/// - A motion input (ignition, accelerometer) wakes it at once and keeps it awake for
///   `motionHoldMs`, so the fixes that show the movement come at the tier's rate.
/// - Movement confirmed (`resumed`): the receiver stays awake; the pause is over.
/// - Kept awake (`keepAwake(true, ...)`: a client's stream with the pause off): it never sleeps
///   until let go.
public struct PauseController: Equatable, Sendable {
    public enum Action: Equatable, Sendable {
        case none
        /// Put the receiver into its lowest-power mode for this long (it may wake later: the
        /// controller wakes it explicitly when the probe is due).
        case sleep(durationMs: Int64)
        /// Wake the receiver and restore its tier's plan.
        case wake
    }

    public enum Phase: Equatable, Sendable {
        /// Tracking at the tier's plan (moving, or not yet known to be stationary).
        case active
        case asleep(untilNs: Int64)
        case probing(sinceNs: Int64, fixes: Int)
        /// Awake after a motion input, at least until this time.
        case held(untilNs: Int64)
        /// Awake for single location requests (`locate`), at least until this time: their
        /// latest deadline, or the moment the last of them was answered.
        case requested(untilNs: Int64)
    }

    public let probeIntervalMs: Int64
    public let probeTimeoutMs: Int64
    public let probeFixes: Int
    public let motionHoldMs: Int64
    public private(set) var phase = Phase.active
    /// Probes made since start, and wake-ups by the motion input (for `locus status`).
    public private(set) var probes = 0
    public private(set) var motionWakes = 0
    /// Wake-ups for location requests (one per wake, however many requests shared it).
    public private(set) var requestWakes = 0
    /// A stream that does not pause is open: the receiver is never put to sleep.
    public private(set) var keptAwake = false

    public init(probeIntervalMs: Int64, probeTimeoutMs: Int64 = 30_000, probeFixes: Int = 3, motionHoldMs: Int64) {
        precondition(probeIntervalMs > 0 && probeTimeoutMs > 0 && probeFixes >= 1 && motionHoldMs >= 0)
        self.probeIntervalMs = probeIntervalMs
        self.probeTimeoutMs = probeTimeoutMs
        self.probeFixes = probeFixes
        self.motionHoldMs = motionHoldMs
    }

    /// The schedule for a preset and tier: probes a little more often than the tier's slowest
    /// interval (so movement is seen within it, confirmation fixes included), never more often
    /// than every 10 s; a motion input holds the receiver awake for one stationary window.
    public init(_ configuration: LiveConfiguration, _ tier: TierPolicy) {
        self.init(probeIntervalMs: max(10_000, tier.maximumIntervalMs - 5_000), motionHoldMs: configuration.stationaryWindowMs)
    }

    public var isPaused: Bool { phase != .active }

    /// The pause itself keeps the receiver awake now (a probe, a motion hold, a location request):
    /// every fix counts, whatever boundary-aware sampling would skip.
    public var keepsReceiverAwake: Bool {
        switch phase {
        case .probing, .held, .requested: return true
        case .active, .asleep: return false
        }
    }

    /// The updater's stationary state changed.
    @_noAllocation
    public mutating func stationaryChanged(_ isStationary: Bool, nowNs: Int64) -> Action {
        switch (isStationary, phase) {
        case (true, .active), (true, .probing):
            return sleep(nowNs)
        case (true, .held(let untilNs)) where nowNs >= untilNs, (true, .requested(let untilNs)) where nowNs >= untilNs:
            return sleep(nowNs)
        case (false, .asleep):
            phase = .active
            return .wake
        case (false, _):
            phase = .active
            return .none
        default:
            return .none
        }
    }

    /// The updater accepted a fix (`isStationary` after it).
    @_noAllocation
    public mutating func fixAccepted(isStationary: Bool, nowNs: Int64) -> Action {
        guard case .probing(let sinceNs, let fixes) = phase else { return .none }
        guard isStationary else {
            phase = .active
            return .none
        }
        if fixes + 1 >= probeFixes { return sleep(nowNs) }
        phase = .probing(sinceNs: sinceNs, fixes: fixes + 1)
        return .none
    }

    /// After the updater took a fix: its stationary state changed (`stationaryChanged`), or the
    /// fix was accepted by its filters (`fixAccepted`), or neither. The agent and the power
    /// report both drive the pause through here.
    @_noAllocation
    public mutating func observed(wasStationary: Bool, isStationary: Bool, accepted: Bool, nowNs: Int64) -> Action {
        if isStationary != wasStationary { return stationaryChanged(isStationary, nowNs: nowNs) }
        return accepted ? fixAccepted(isStationary: isStationary, nowNs: nowNs) : .none
    }

    /// Time passed: a probe falls due, a probe without fixes gives up, a hold ends.
    @_noAllocation
    public mutating func tick(isStationary: Bool, nowNs: Int64) -> Action {
        switch phase {
        case .asleep(let untilNs) where nowNs >= untilNs:
            phase = .probing(sinceNs: nowNs, fixes: 0)
            probes += 1
            return .wake
        case .probing(let sinceNs, _) where nowNs - sinceNs >= probeTimeoutMs * 1_000_000:
            return isStationary ? sleep(nowNs) : activate()
        case .held(let untilNs) where nowNs >= untilNs, .requested(let untilNs) where nowNs >= untilNs:
            return isStationary ? sleep(nowNs) : activate()
        default:
            return .none
        }
    }

    /// The motion input fired.
    @_noAllocation
    public mutating func motion(nowNs: Int64) -> Action {
        motionWakes += 1
        let wasAsleep: Bool
        if case .asleep = phase { wasAsleep = true } else { wasAsleep = false }
        guard phase != .active else { return .none }
        let holdNs = nowNs + motionHoldMs * 1_000_000
        // A waiting location request keeps its own (possibly later) end.
        if case .requested(let untilNs) = phase {
            phase = .requested(untilNs: max(untilNs, holdNs))
            return .none
        }
        phase = .held(untilNs: holdNs)
        return wasAsleep ? .wake : .none
    }

    // MARK: location requests

    /// Location requests are waiting until `untilNs` (their latest deadline): the receiver is
    /// kept awake until then, and woken now if it sleeps. Whatever the phase was, it becomes
    /// `requested` (a motion hold's end is kept if later), so a stop noticed meanwhile does not
    /// put it to sleep under a waiting request. Several requests share one wake.
    @_noAllocation
    public mutating func requested(untilNs: Int64, nowNs: Int64) -> Action {
        switch phase {
        case .asleep:
            phase = .requested(untilNs: untilNs)
            requestWakes += 1
            return .wake
        case .held(let heldNs), .requested(let heldNs):
            phase = .requested(untilNs: max(heldNs, untilNs))
            return .none
        case .probing(let sinceNs, _):
            phase = .requested(untilNs: max(sinceNs + probeTimeoutMs * 1_000_000, untilNs))
            return .none
        case .active:
            phase = .requested(untilNs: untilNs)
            return .none
        }
    }

    /// The last waiting request was answered: the next `tick` puts the receiver back where the
    /// updater's state says (asleep while stationary, tracking otherwise).
    @_noAllocation
    public mutating func requestsAnswered(nowNs: Int64) {
        if case .requested(let untilNs) = phase, untilNs > nowNs { phase = .requested(untilNs: nowNs) }
    }

    /// The receiver restarted by itself (it is awake and tracking): a sleep in progress is over,
    /// and the next probe decides again.
    public mutating func receiverRestarted(nowNs: Int64) {
        if case .asleep = phase { phase = .probing(sinceNs: nowNs, fixes: 0) }
    }

    /// A stream without the automatic pause opened (`on`) or the last one closed: kept awake, a
    /// sleeping receiver is woken and the pause is over; let go, a stationary device's receiver
    /// goes to sleep at once.
    public mutating func keepAwake(_ on: Bool, isStationary: Bool, nowNs: Int64) -> Action {
        guard on != keptAwake else { return .none }
        keptAwake = on
        if on {
            let wasAsleep: Bool
            if case .asleep = phase { wasAsleep = true } else { wasAsleep = false }
            if case .requested = phase { return .none }
            phase = .active
            return wasAsleep ? .wake : .none
        }
        guard isStationary, phase == .active else { return .none }
        return sleep(nowNs)
    }

    /// When `tick` next has something to do.
    public var nextDeadlineNs: Int64? {
        switch phase {
        case .active: return nil
        case .asleep(let untilNs), .held(let untilNs), .requested(let untilNs): return untilNs
        case .probing(let sinceNs, _): return sinceNs + probeTimeoutMs * 1_000_000
        }
    }

    private mutating func sleep(_ nowNs: Int64) -> Action {
        if keptAwake { return activate() }
        phase = .asleep(untilNs: nowNs + probeIntervalMs * 1_000_000)
        return .sleep(durationMs: probeIntervalMs)
    }

    private mutating func activate() -> Action {
        phase = .active
        return .none
    }
}
