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
        /// How long after the device crossed the fence edge a fix beyond it was taken.
        var edgeLatencyS: Int? = nil
        var probes = 0
    }

    /// Parked with multipath drift until `moveAt` s, then north at 10 m/s; a fix a second while
    /// the receiver is awake, `hotStartS` after each wake. A fence edge lies `edgeM` north of the
    /// parked spot (the pause's schedule sleeps by its clearance). Returns the receiver's on-time
    /// while parked, how long after the movement began the first moving update came, how long
    /// after the crossing the first fix beyond the edge came, and false movements while parked.
    static func closedLoop(moveAt: Int, seed: UInt64, edgeM: Double = 150, hotStartS: Int = 1, motionInput: Bool = false) -> Run {
        let settings = LiveUpdateSettings(preset: .default, tier: .hundredMeters)
        let updater = LiveUpdater(settings: settings)
        var pause = PauseController(settings.configuration, settings.tier, motionInput: motionInput)
        var drift = Drift(state: seed)
        var awake = true
        var firstFixAt = 0
        var run = Run()
        let crossingS = moveAt + Int((edgeM / 10).rounded(.up))
        for second in 0..<(moveAt + 120) {
            let timeNs = Int64(1_710_496_800 + second) * Self.second
            if motionInput && second == moveAt, pause.motion(nowNs: timeNs) == .wake {
                awake = true
                firstFixAt = second + hotStartS
            }
            if awake && second >= firstFixAt {
                if second < moveAt { run.awakeBeforeMove += 1 }
                let moved = Double(max(0, second - moveAt)) * 10
                if moved >= edgeM && run.edgeLatencyS == nil { run.edgeLatencyS = second - crossingS }
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
                let clearanceM = edgeM - (latitude - 45.0) * 111_132 - fix.horizontalAccuracyM!
                let action = pause.observed(wasStationary: wasStationary, isStationary: updater.isStationary, accepted: true,
                                            insideStop: updater.lastFixInsideStop, clearanceM: clearanceM, nowNs: timeNs)
                if case .sleep = action { awake = false }
            }
            switch pause.tick(isStationary: updater.isStationary, nowNs: timeNs) {
            case .wake:
                awake = true
                firstFixAt = second + hotStartS
            case .sleep: awake = false
            case .none: break
            }
        }
        run.probes = pause.probes
        #expect(pause.hotStartSamples == 0 || pause.hotStartMs == Int64(hotStartS) * 1_000, "the measured hot start")
        return run
    }

    /// The bar, on the agent's own schedule: parked most of the time with a fence edge
    /// 150 m away, the hundredMeters receiver is on at most 8 % of the time (a probe ends on one
    /// good fix inside the stop), never resumes falsely, sees the fence crossing at most 30 s
    /// late and the movement within 35 s (the edge's clearance buys the sleep a few seconds),
    /// wherever in the probe cycle the departure falls and whatever the hot start (1 or 4 s).
    @Test func parkedTheReceiverSleepsAndTheFenceIsSeenWithin30Seconds() {
        for hotStartS in [1, 4] {
            var worstLatency = 0
            var worstEdgeLatency = 0
            var worstOnPercent = 0.0
            for offset in 0..<36 {
                let moveAt = 3_000 + offset
                let run = Self.closedLoop(moveAt: moveAt, seed: UInt64(offset + 1), hotStartS: hotStartS)
                #expect(run.falseMovements == 0, "offset \(offset)")
                worstLatency = max(worstLatency, run.resumeLatencyS ?? Int.max)
                worstEdgeLatency = max(worstEdgeLatency, run.edgeLatencyS ?? Int.max)
                worstOnPercent = max(worstOnPercent, 100 * Double(run.awakeBeforeMove) / Double(moveAt))
            }
            #expect(worstEdgeLatency <= 30, "fence seen \(worstEdgeLatency) s late (hot start \(hotStartS) s)")
            #expect(worstLatency <= 35, "resume latency \(worstLatency) s (hot start \(hotStartS) s)")
            #expect(worstOnPercent <= 8, "receiver on \(worstOnPercent) % while parked (hot start \(hotStartS) s)")
            print("pause: parked 50 min, hundredMeters, hot start \(hotStartS) s: receiver on at most \(worstOnPercent) % of the time, fence seen within \(worstEdgeLatency) s, movement within \(worstLatency) s")
        }
    }

    /// With a motion input the probes are a safety net (10 min apart at least): the receiver is
    /// on a fraction of a percent while parked, and the input wakes it at the departure.
    @Test func withAMotionInputProbesAreASafetyNet() {
        let run = Self.closedLoop(moveAt: 3_000, seed: 7, motionInput: true)
        #expect(run.falseMovements == 0)
        #expect(100 * Double(run.awakeBeforeMove) / 3_000 <= 6, "on \(run.awakeBeforeMove) s of 3,000 (the first 120 s are the stationary window)")
        #expect(run.probes <= 5, "\(run.probes) probes in 50 min")
        #expect((run.edgeLatencyS ?? 99) <= 2 && (run.resumeLatencyS ?? 99) <= 5, "\(run)")
    }

    /// The schedule: the edge's clearance at the top speed, plus the tier's budget, less the hot
    /// start and a fix interval; capped at the stationary window; with a motion input between 10
    /// minutes and an hour; too near an edge to sleep, the receiver stays awake.
    @Test func theScheduleFollowsTheNearestEdge() {
        let schedule = ProbeSchedule(LiveConfiguration(preset: .default), TierPolicy(tier: .hundredMeters), motionInput: false)
        #expect(schedule.sleepMs(clearanceM: 144, hotStartMs: 1_000) == 2_880 + 30_000 - 2_000)
        #expect(schedule.sleepMs(clearanceM: 0, hotStartMs: 1_000) == 28_000)
        #expect(schedule.sleepMs(clearanceM: -20, hotStartMs: 3_000) == 26_000)
        #expect(schedule.sleepMs(clearanceM: 2_000, hotStartMs: 1_000) == 68_000)
        #expect(schedule.sleepMs(clearanceM: 50_000, hotStartMs: 1_000) == 120_000, "capped at the stationary window")
        #expect(schedule.sleepMs(clearanceM: nil, hotStartMs: 1_000) == 120_000)
        let motion = ProbeSchedule(LiveConfiguration(preset: .default), TierPolicy(tier: .hundredMeters), motionInput: true)
        #expect(motion.sleepMs(clearanceM: 0, hotStartMs: 1_000) == 600_000)
        #expect(motion.sleepMs(clearanceM: 50_000, hotStartMs: 1_000) == 1_000_000 + 28_000)
        #expect(motion.sleepMs(clearanceM: nil, hotStartMs: 1_000) == 3_600_000)
        // `best` with a slow hot start next to an edge: under the 5 s worth sleeping, awake.
        var pause = PauseController(probeIntervalMs: 10_000, motionHoldMs: 60_000,
                                    schedule: ProbeSchedule(LiveConfiguration(preset: .default), TierPolicy(tier: .best), motionInput: false),
                                    hotStartMs: 6_000)
        #expect(pause.observed(wasStationary: false, isStationary: true, accepted: true, insideStop: true, clearanceM: 0, nowNs: 0) == .none)
        #expect(pause.phase == .nearEdge(sinceNs: 0) && pause.keepsReceiverAwake)
        // A fix further away (better accuracy) decides again: asleep.
        #expect(pause.observed(wasStationary: true, isStationary: true, accepted: true, insideStop: true, clearanceM: 100, nowNs: Self.second)
                == .sleep(durationMs: 2_000 + 10_000 - 6_000 - 1_000))
    }

    /// One good fix inside the stop ends a probe; a fix outside keeps it awake until the detector
    /// confirms movement or sees the stop again. Each wake is timed to its first fix.
    @Test func aProbeSleepsOnOneGoodFixAndMeasuresTheHotStart() {
        var pause = PauseController(LiveConfiguration(preset: .default), TierPolicy(tier: .hundredMeters))
        #expect(pause.hotStartMs == PauseController.initialHotStartMs && pause.hotStartSamples == 0)
        #expect(pause.observed(wasStationary: false, isStationary: true, accepted: true, insideStop: true, clearanceM: 0, nowNs: 0)
                == .sleep(durationMs: 30_000 - 2_000 - 1_000))
        #expect(pause.tick(isStationary: true, nowNs: 27 * Self.second) == .wake)
        // Outside the stop: awake for the confirmation; inside again: asleep.
        #expect(pause.observed(wasStationary: true, isStationary: true, accepted: true, insideStop: false, clearanceM: 0, nowNs: 30 * Self.second) == .none)
        #expect(pause.hotStartMs == 3_000 && pause.hotStartSamples == 1)
        #expect(pause.observed(wasStationary: true, isStationary: true, accepted: true, insideStop: false, clearanceM: 0, nowNs: 31 * Self.second) == .none)
        #expect(pause.observed(wasStationary: true, isStationary: true, accepted: true, insideStop: true, clearanceM: 0, nowNs: 32 * Self.second)
                == .sleep(durationMs: 30_000 - 3_000 - 1_000))
        // The next wake's hot start is 1 s: the running figure moves a quarter of the way.
        #expect(pause.tick(isStationary: true, nowNs: 58 * Self.second) == .wake)
        #expect(pause.observed(wasStationary: true, isStationary: true, accepted: true, insideStop: true, clearanceM: 0, nowNs: 59 * Self.second)
                == .sleep(durationMs: 30_000 - 2_500 - 1_000))
        #expect(pause.hotStartMs == 2_500 && pause.hotStartSamples == 2)
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
            if case .sleep = pause.observed(wasStationary: true, isStationary: true, accepted: true, insideStop: second % 7 != 0,
                                            clearanceM: Double(second % 300) - 50, nowNs: nowNs) { actions += 1 }
            if case .wake = pause.tick(isStationary: true, nowNs: nowNs) { actions += 1 }
            if second % 333 == 0, case .wake = pause.motion(nowNs: nowNs) { actions += 1 }
        }
        return actions
    }

    @Test func theScheduleAllocatesNothing() {
        var pause = PauseController(probeIntervalMs: 25_000, motionHoldMs: 60_000,
                                    schedule: ProbeSchedule(LiveConfiguration(preset: .default), TierPolicy(tier: .best), motionInput: false))
        var actions = 0
        let count = allocations { actions = Self.day(&pause) }
        #expect(count == 0)
        #expect(actions > 10)
    }
}
