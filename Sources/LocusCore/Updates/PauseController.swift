/// The receiver's schedule while the device stands still (CLLocationUpdate's automatic pause):
/// asleep in its lowest-power mode, woken for a periodic probe, and back to its tier's plan when
/// a probe shows movement or a motion input fires.
///
/// Pure bookkeeping: the agent feeds it what happened and carries out the action it returns with
/// the receiver's commands. Times are the agent's clock in nanoseconds.
///
/// - Becoming stationary puts the receiver to sleep: for `probeIntervalMs`, or, with a
///   `ProbeSchedule` ("sampling that knows what it is waiting for"), for as long as the nearest
///   fence edge, the preset's top speed, the tier's lateness budget and the receiver's measured
///   hot start allow (much longer with a motion input: probes are then only a safety net).
/// - A probe wakes it. One good fix inside the stop (the stationary detector's) ends it at once;
///   a fix outside the stop keeps it awake for the detector's confirmation (two fixes outside)
///   or until a fix lands inside again; `probeTimeoutMs` without fixes (no sky) gives up. Without
///   the inside/outside answer (`fixAccepted(isStationary:nowNs:)`), `probeFixes` fixes end it.
/// - Too near a fence edge to sleep at all (the schedule allows less than `minimumSleepMs`), the
///   receiver stays awake (`nearEdge`) and every fix decides again.
/// - Every wake is timed to the first fix after it: `hotStartMs` is the running figure the
///   schedule uses.
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
        /// Stationary, but a fence edge is too near to sleep (the schedule allows less than
        /// `minimumSleepMs`): awake, and every fix decides again.
        case nearEdge(sinceNs: Int64)
    }

    public let probeIntervalMs: Int64
    public let probeTimeoutMs: Int64
    public let probeFixes: Int
    public let motionHoldMs: Int64
    /// Sleeps derived from the nearest fence edge (nil: every sleep is `probeIntervalMs`).
    public let schedule: ProbeSchedule?
    public private(set) var phase = Phase.active
    /// The receiver's time from a wake to its first fix, a running figure (ms), and how many
    /// wakes it is made of (0: still the initial guess).
    public private(set) var hotStartMs: Int64
    public private(set) var hotStartSamples = 0
    /// A wake whose first fix has not come yet.
    private var wokeAtNs: Int64? = nil
    /// The last probe fix's clearance from the nearest fence edge (distance less accuracy), m;
    /// nil: no fence, or not known.
    public private(set) var clearanceM: Double? = nil
    /// A sleep shorter than this costs more (backup, hot start) than it saves.
    public static let minimumSleepMs: Int64 = 5_000
    /// Before the first measured wake: u-blox M8 hot start is about 1 s ([M8] data sheet).
    public static let initialHotStartMs: Int64 = 2_000
    /// Probes made since start, and wake-ups by the motion input (for `locus status`).
    public private(set) var probes = 0
    public private(set) var motionWakes = 0
    /// Wake-ups for location requests (one per wake, however many requests shared it).
    public private(set) var requestWakes = 0
    /// A stream that does not pause is open: the receiver is never put to sleep.
    public private(set) var keptAwake = false

    public init(probeIntervalMs: Int64, probeTimeoutMs: Int64 = 30_000, probeFixes: Int = 3, motionHoldMs: Int64,
                schedule: ProbeSchedule? = nil, hotStartMs: Int64 = PauseController.initialHotStartMs) {
        precondition(probeIntervalMs > 0 && probeTimeoutMs > 0 && probeFixes >= 1 && motionHoldMs >= 0 && hotStartMs >= 0)
        self.probeIntervalMs = probeIntervalMs
        self.probeTimeoutMs = probeTimeoutMs
        self.probeFixes = probeFixes
        self.motionHoldMs = motionHoldMs
        self.schedule = schedule
        self.hotStartMs = hotStartMs
    }

    /// The schedule for a preset and tier: sleeps derived from the nearest fence edge so that a
    /// transition is seen within the tier's budget (`ProbeSchedule`), much longer with a motion
    /// input; a motion input holds the receiver awake for one stationary window.
    /// `probeIntervalMs` (a little inside the tier's slowest interval, never under 10 s) is kept
    /// for status and for controllers built without a schedule.
    public init(_ configuration: LiveConfiguration, _ tier: TierPolicy, motionInput: Bool = false) {
        self.init(probeIntervalMs: max(10_000, tier.maximumIntervalMs - 5_000), motionHoldMs: configuration.stationaryWindowMs,
                  schedule: ProbeSchedule(configuration, tier, motionInput: motionInput))
    }

    public var isPaused: Bool { phase != .active }

    /// The pause itself keeps the receiver awake now (a probe, a motion hold, a location request):
    /// every fix counts, whatever boundary-aware sampling would skip.
    public var keepsReceiverAwake: Bool {
        switch phase {
        case .probing, .held, .requested, .nearEdge: return true
        case .active, .asleep: return false
        }
    }

    /// The updater's stationary state changed.
    @_noAllocation
    public mutating func stationaryChanged(_ isStationary: Bool, nowNs: Int64) -> Action {
        switch (isStationary, phase) {
        case (true, .active), (true, .probing), (true, .nearEdge):
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

    /// The updater accepted a fix (`isStationary` after it), without saying where it lies: a
    /// probe ends after `probeFixes` of them.
    @_noAllocation
    public mutating func fixAccepted(isStationary: Bool, nowNs: Int64) -> Action {
        fixAccepted(isStationary: isStationary, insideStop: nil, nowNs: nowNs)
    }

    /// The updater accepted a fix (`isStationary` after it). `insideStop`: whether it lies in the
    /// stationary detector's stop (a good fix within the stop's radius of its centre); nil when
    /// not known (then `probeFixes` fixes end a probe). Inside, a probe sleeps at once; outside,
    /// it stays awake for the detector to confirm movement or see the stop again.
    @_noAllocation
    public mutating func fixAccepted(isStationary: Bool, insideStop: Bool?, nowNs: Int64) -> Action {
        switch phase {
        case .probing(let sinceNs, let fixes):
            guard isStationary else {
                phase = .active
                return .none
            }
            if let insideStop {
                if insideStop { return sleep(nowNs) }
                phase = .probing(sinceNs: sinceNs, fixes: fixes + 1)
                return .none
            }
            if fixes + 1 >= probeFixes { return sleep(nowNs) }
            phase = .probing(sinceNs: sinceNs, fixes: fixes + 1)
            return .none
        case .nearEdge:
            guard isStationary else {
                phase = .active
                return .none
            }
            // Every fix decides again: the edge may be far enough now (a better accuracy).
            return insideStop == false ? .none : sleep(nowNs)
        default:
            return .none
        }
    }

    /// After the updater took a fix: its stationary state changed (`stationaryChanged`), or the
    /// fix was accepted by its filters (`fixAccepted`), or neither. The agent and the power
    /// report both drive the pause through here. `insideStop` as `fixAccepted`; `clearanceM`,
    /// the fix's distance to the nearest fence edge less its accuracy (nil: no fence), sets the
    /// next sleep with a `ProbeSchedule`.
    @_noAllocation
    public mutating func observed(wasStationary: Bool, isStationary: Bool, accepted: Bool, insideStop: Bool? = nil,
                                  clearanceM: Double? = nil, nowNs: Int64) -> Action {
        if accepted {
            measureHotStart(nowNs)
            self.clearanceM = clearanceM
        }
        if isStationary != wasStationary { return stationaryChanged(isStationary, nowNs: nowNs) }
        return accepted ? fixAccepted(isStationary: isStationary, insideStop: insideStop, nowNs: nowNs) : .none
    }

    /// The agent woke the receiver itself (a boundary-aware sample): time it to its first fix.
    @_noAllocation
    public mutating func receiverWoken(nowNs: Int64) { wokeAtNs = nowNs }

    /// The first fix after a wake: the running hot-start figure moves a quarter of the way to
    /// this wake's (the first measurement replaces the initial guess). A wake that took longer
    /// than a probe's timeout is not a hot start (no sky) and is left out.
    @_noAllocation
    private mutating func measureHotStart(_ nowNs: Int64) {
        guard let since = wokeAtNs else { return }
        wokeAtNs = nil
        let measuredMs = (nowNs - since) / 1_000_000
        guard measuredMs >= 0, measuredMs <= probeTimeoutMs else { return }
        hotStartMs = hotStartSamples == 0 ? measuredMs : (3 * hotStartMs + measuredMs + 2) / 4
        hotStartSamples += 1
    }

    /// Time passed: a probe falls due, a probe without fixes gives up, a hold ends.
    @_noAllocation
    public mutating func tick(isStationary: Bool, nowNs: Int64) -> Action {
        switch phase {
        case .asleep(let untilNs) where nowNs >= untilNs:
            phase = .probing(sinceNs: nowNs, fixes: 0)
            probes += 1
            wokeAtNs = nowNs
            return .wake
        case .probing(let sinceNs, _) where nowNs - sinceNs >= probeTimeoutMs * 1_000_000,
             .nearEdge(let sinceNs) where nowNs - sinceNs >= probeTimeoutMs * 1_000_000:
            // No fix for a probe's timeout: no sky, or the fixes are poor; try again later.
            wokeAtNs = nil
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
        if wasAsleep { wokeAtNs = nowNs }
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
            wokeAtNs = nowNs
            return .wake
        case .held(let heldNs), .requested(let heldNs):
            phase = .requested(untilNs: max(heldNs, untilNs))
            return .none
        case .probing(let sinceNs, _):
            phase = .requested(untilNs: max(sinceNs + probeTimeoutMs * 1_000_000, untilNs))
            return .none
        case .active, .nearEdge:
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
        case .probing(let sinceNs, _), .nearEdge(let sinceNs): return sinceNs + probeTimeoutMs * 1_000_000
        }
    }

    /// How long the receiver would sleep now: the schedule's figure from the last fix's
    /// clearance and the measured hot start, or `probeIntervalMs` without a schedule.
    public var nextSleepMs: Int64 {
        guard let schedule else { return probeIntervalMs }
        return schedule.sleepMs(clearanceM: clearanceM, hotStartMs: hotStartMs)
    }

    private mutating func sleep(_ nowNs: Int64) -> Action {
        if keptAwake { return activate() }
        let durationMs = nextSleepMs
        guard durationMs >= PauseController.minimumSleepMs else {
            // Too near an edge to sleep: awake, and each fix decides again (a probe's timeout
            // after the last decision if no fix comes).
            phase = .nearEdge(sinceNs: nowNs)
            return .none
        }
        phase = .asleep(untilNs: nowNs + durationMs * 1_000_000)
        return .sleep(durationMs: durationMs)
    }

    private mutating func activate() -> Action {
        phase = .active
        return .none
    }
}
