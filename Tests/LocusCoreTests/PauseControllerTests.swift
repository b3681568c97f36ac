import AllocCounter
import Testing
@testable import LocusCore

/// The receiver's pause while stationary: the schedule on its own, then closed loop with the
/// updater and a simulated receiver that gives fixes only while awake.
@Suite struct PauseControllerTests {
    static let second: Int64 = 1_000_000_000

    /// A stream without the automatic pause keeps the receiver awake: a sleeping one is woken,
    /// standing still and probes put it to sleep no more; let go while stationary, it sleeps.
    @Test func keptAwakeItNeverSleepsUntilLetGo() {
        var pause = PauseController(probeIntervalMs: 25_000, probeTimeoutMs: 30_000, probeFixes: 3, motionHoldMs: 120_000)
        #expect(pause.stationaryChanged(true, nowNs: 0) == .sleep(durationMs: 25_000))
        #expect(pause.keepAwake(true, isStationary: true, nowNs: Self.second) == .wake)
        #expect(pause.phase == .active && pause.keptAwake && !pause.isPaused)
        #expect(pause.keepAwake(true, isStationary: true, nowNs: Self.second) == .none, "already kept")
        #expect(pause.stationaryChanged(true, nowNs: 2 * Self.second) == .none)
        #expect(pause.tick(isStationary: true, nowNs: 60 * Self.second) == .none && pause.phase == .active)
        #expect(pause.motion(nowNs: 61 * Self.second) == .none && pause.phase == .active)
        #expect(pause.keepAwake(false, isStationary: true, nowNs: 62 * Self.second) == .sleep(durationMs: 25_000))
        #expect(pause.keepAwake(true, isStationary: false, nowNs: 63 * Self.second) == .wake)
        #expect(pause.keepAwake(false, isStationary: false, nowNs: 64 * Self.second) == .none && pause.phase == .active)
    }

    @Test func sleepsProbesAndWakes() {
        var pause = PauseController(probeIntervalMs: 25_000, probeTimeoutMs: 30_000, probeFixes: 3, motionHoldMs: 120_000)
        #expect(pause.stationaryChanged(true, nowNs: 0) == .sleep(durationMs: 25_000))
        #expect(pause.nextDeadlineNs == 25 * Self.second)
        #expect(pause.tick(isStationary: true, nowNs: 24 * Self.second) == .none)
        #expect(pause.tick(isStationary: true, nowNs: 25 * Self.second) == .wake)
        #expect(pause.probes == 1)
        // Two stationary fixes keep the probe going, the third ends it.
        #expect(pause.fixAccepted(isStationary: true, nowNs: 26 * Self.second) == .none)
        #expect(pause.fixAccepted(isStationary: true, nowNs: 27 * Self.second) == .none)
        #expect(pause.fixAccepted(isStationary: true, nowNs: 28 * Self.second) == .sleep(durationMs: 25_000))
        // A probe that gets no fix gives up after its timeout.
        #expect(pause.tick(isStationary: true, nowNs: 53 * Self.second) == .wake)
        #expect(pause.tick(isStationary: true, nowNs: 82 * Self.second) == .none)
        #expect(pause.tick(isStationary: true, nowNs: 83 * Self.second) == .sleep(durationMs: 25_000))
        // The motion input wakes it and holds it awake; movement ends the pause.
        #expect(pause.motion(nowNs: 90 * Self.second) == .wake)
        #expect(pause.phase == .held(untilNs: 210 * Self.second) && pause.motionWakes == 1)
        #expect(pause.fixAccepted(isStationary: true, nowNs: 91 * Self.second) == .none, "held: fixes do not end it")
        #expect(pause.stationaryChanged(false, nowNs: 100 * Self.second) == .none)
        #expect(pause.phase == .active && !pause.isPaused && pause.nextDeadlineNs == nil)
        // A motion input while moving changes nothing.
        #expect(pause.motion(nowNs: 101 * Self.second) == .none && pause.phase == .active)
        // A hold that sees no movement goes back to sleep.
        _ = pause.stationaryChanged(true, nowNs: 200 * Self.second)
        #expect(pause.motion(nowNs: 201 * Self.second) == .wake)
        #expect(pause.tick(isStationary: true, nowNs: 321 * Self.second) == .sleep(durationMs: 25_000))
    }

    @Test func tiersProbeWithinTheirInterval() {
        for tier in [AccuracyTier.best, .nearestTenMeters, .hundredMeters, .kilometer, .threeKilometers] {
            let policy = TierPolicy(tier: tier)
            let pause = PauseController(LiveConfiguration(preset: .default), policy)
            #expect(pause.probeIntervalMs >= 10_000)
            #expect(pause.probeIntervalMs <= max(10_000, policy.maximumIntervalMs), "\(tier)")
        }
    }

    struct Run {
        var awakeBeforeMove = 0
        var resumeLatencyS: Int? = nil
        var falseMovements = 0
    }

    /// Parked with multipath drift until `moveAt` s, then north at 10 m/s; a fix a second while
    /// the receiver is awake. Returns the receiver's on-time while parked, how long after the
    /// movement began the first moving update came, and how many times it resumed while parked.
    static func closedLoop(moveAt: Int, seed: UInt64) -> Run {
        let settings = LiveUpdateSettings(preset: .default, tier: .hundredMeters)
        let updater = LiveUpdater(settings: settings)
        var pause = PauseController(settings.configuration, settings.tier)
        var drift = Drift(state: seed)
        var awake = true
        var run = Run()
        for second in 0..<(moveAt + 120) {
            let timeNs = Int64(1_710_496_800 + second) * Self.second
            if awake {
                if second < moveAt { run.awakeBeforeMove += 1 }
                let moved = Double(max(0, second - moveAt)) * 10
                let (latitude, longitude) = drift.around(45.0 + moved / 111_132, 7.0, radiusM: 8)
                let fix = liveFix(second, latitude, longitude, hdop: 1.2)
                let wasStationary = updater.isStationary
                updater.observe(fix, now: fix.time!)
                while let output = updater.nextOutput() {
                    if case .update(let update) = output, !update.isStationary, second >= moveAt, run.resumeLatencyS == nil {
                        run.resumeLatencyS = second - moveAt
                    }
                }
                if wasStationary && !updater.isStationary && second < moveAt { run.falseMovements += 1 }
                let action = pause.observed(wasStationary: wasStationary, isStationary: updater.isStationary, accepted: true, nowNs: timeNs)
                if case .sleep = action { awake = false }
            }
            switch pause.tick(isStationary: updater.isStationary, nowNs: timeNs) {
            case .wake: awake = true
            case .sleep: awake = false
            case .none: break
            }
        }
        return run
    }

    /// The bar, on the agent's own schedule: parked most of the time, the hundredMeters
    /// receiver is on at most 20 % of the time, never resumes falsely, and sees real movement
    /// within 30 s wherever in the probe cycle it starts.
    @Test func parkedTheReceiverSleepsAndMovementIsSeenWithin30Seconds() {
        var worstLatency = 0
        var worstOnPercent = 0.0
        for offset in 0..<28 {
            let moveAt = 3_000 + offset
            let run = Self.closedLoop(moveAt: moveAt, seed: UInt64(offset + 1))
            #expect(run.falseMovements == 0, "offset \(offset)")
            let latency = run.resumeLatencyS ?? Int.max
            worstLatency = max(worstLatency, latency)
            worstOnPercent = max(worstOnPercent, 100 * Double(run.awakeBeforeMove) / Double(moveAt))
        }
        #expect(worstLatency <= 30, "resume latency \(worstLatency) s")
        #expect(worstOnPercent <= 20, "receiver on \(worstOnPercent) % while parked")
        print("pause: parked 50 min, hundredMeters: receiver on at most \(Int(worstOnPercent.rounded())) % of the time, movement seen within \(worstLatency) s")
    }

    /// A day of schedule decisions, outside the closure (a debug build's captured `var`s and
    /// enum comparisons would be counted against the controller).
    static func day(_ pause: inout PauseController) -> Int {
        var actions = 0
        // An Int range: a debug build iterates an Int64 range through an allocating generic path.
        for second in 0..<1_000 {
            let nowNs = Int64(second) * Self.second
            if case .sleep = pause.stationaryChanged(second % 100 < 50, nowNs: nowNs) { actions += 1 }
            if case .sleep = pause.fixAccepted(isStationary: true, nowNs: nowNs) { actions += 1 }
            if case .wake = pause.tick(isStationary: true, nowNs: nowNs) { actions += 1 }
            if second % 333 == 0, case .wake = pause.motion(nowNs: nowNs) { actions += 1 }
        }
        return actions
    }

    @Test func theScheduleAllocatesNothing() {
        var pause = PauseController(probeIntervalMs: 25_000, motionHoldMs: 60_000)
        var actions = 0
        let count = allocations { actions = Self.day(&pause) }
        #expect(count == 0)
        #expect(actions > 10)
    }
}
