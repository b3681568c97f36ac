import AllocCounter
import Testing
@testable import LocusCore

// Live updates: presets and tiers, receiver command plans, acknowledgements, stationary and
// visit detection, boundary-aware sampling, the updater's filters and batching, the power model.

/// A deterministic generator (64-bit LCG, Knuth's MMIX constants) for drift.
struct Drift {
    var state: UInt64
    mutating func unit() -> Double {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Double(state >> 11) / Double(1 << 53)
    }
    /// A point within `radiusM` of (lat, lon), uniformly over the disc.
    mutating func around(_ latitude: Double, _ longitude: Double, radiusM: Double) -> (Double, Double) {
        let r = radiusM * unit().squareRoot()
        let angle = 2 * Double.pi * unit()
        let north = r * cosine(angle), east = r * sine(angle)
        return (latitude + north / 111_132, longitude + east / (111_320 * cosine(latitude * .pi / 180)))
    }
}

func cosine(_ x: Double) -> Double { LibM.cos(x) }
func sine(_ x: Double) -> Double { LibM.sin(x) }

/// A 3D fix at `second` seconds after 2024-03-15T10:00:00Z with HDOP `hdop` (accuracy 5 × HDOP).
func liveFix(_ second: Int, _ latitude: Double, _ longitude: Double, hdop: Double = 0.8, speed: Double = 0) -> Fix {
    let start: Int64 = 1_710_496_800
    var fix = Fix(timeOfDayNs: Int64(36_000 + second) * 1_000_000_000)
    fix.time = UTCTime(seconds: start + Int64(second))
    fix.mode = .threeDimensional
    fix.latitude = latitude
    fix.longitude = longitude
    fix.hdop = hdop
    fix.speedMps = speed
    return fix
}

/// Runs fixes through an updater and collects what it delivers.
func collect(_ updater: LiveUpdater, _ fixes: [Fix]) -> [LiveOutput] {
    var outputs: [LiveOutput] = []
    for fix in fixes {
        updater.observe(fix, now: fix.time!)
        drain(updater, into: &outputs)
    }
    return outputs
}

func drain(_ updater: LiveUpdater, into outputs: inout [LiveOutput]) {
    while let output = updater.nextOutput() { outputs.append(output) }
}

func updates(_ outputs: [LiveOutput]) -> [LocationUpdate] {
    outputs.compactMap { if case .update(let update) = $0 { return update } else { return nil } }
}

@Suite struct LiveConfigurationTests {
    @Test func presetsMapToDistinctPlatformModels() {
        let presets: [LivePreset] = [.default, .automotiveNavigation, .otherNavigation, .fitness, .airborne]
        let models = presets.map { LiveConfiguration(preset: $0).ubxDynamicModel }
        #expect(models == [.portable, .automotive, .sea, .pedestrian, .airborne2g])
        #expect(LiveConfiguration(preset: .fitness).pmtkNavigationMode == .pedestrian)
        #expect(LiveConfiguration(preset: .airborne).pmtkNavigationMode == .aviation)
        // The fastest platform allows the fastest movement; walkers the slowest.
        let speeds = presets.map { LiveConfiguration(preset: $0).maximumSpeedMps }
        #expect(speeds.max() == LiveConfiguration(preset: .airborne).maximumSpeedMps)
        #expect(speeds.min() == LiveConfiguration(preset: .fitness).maximumSpeedMps)
    }

    @Test func coarserTiersSampleLessAndScanLess() {
        let tiers: [AccuracyTier] = [.best, .nearestTenMeters, .hundredMeters, .kilometer, .threeKilometers]
        let policies = tiers.map { TierPolicy(tier: $0) }
        for (finer, coarser) in zip(policies, policies.dropFirst()) {
            #expect(finer.maximumIntervalMs <= coarser.maximumIntervalMs)
            #expect(finer.desiredAccuracyM < coarser.desiredAccuracyM)
            #expect(finer.bleScanDuty >= coarser.bleScanDuty)
        }
        #expect(policies[0].dutyCycle == .continuous)
        #expect(policies[2].dutyCycle == .cyclicTracking(periodMs: 10_000))
        if case .onOff = policies[4].dutyCycle {} else { Issue.record("threeKilometers should switch the receiver off") }
    }
}

@Suite struct ReceiverPlanTests {
    @Test func ubloxHundredMetersIsModelRateAndCyclicTracking() {
        let plan = ReceiverPlan.commands(preset: LiveConfiguration(preset: .automotiveNavigation),
                                         tier: TierPolicy(tier: .hundredMeters), receiver: .ublox)
        let expected: [ReceiverCommand] = [
            .ubx(UBX.cfgNav5(dynamicModel: .automotive)),
            .ubx(UBX.cfgRate(measurementPeriodMilliseconds: 1_000)!),
            .ubx(UBX.cfgPm2CyclicTracking(updatePeriodMilliseconds: 10_000)!),
            .ubx(UBX.cfgRxm(.powerSave)),
        ]
        #expect(Array(plan) == expected)
        #expect(ReceiverPlan.sleep(durationMs: 60_000, receiver: .ublox) == .ubx(UBX.rxmPmreq(durationMilliseconds: 60_000)))
        #expect(ReceiverPlan.sleep(durationMs: 60_000, receiver: .mediatek) == nil)
    }

    @Test func mediatekKilometerIsPeriodicBackup() {
        let plan = ReceiverPlan.commands(preset: LiveConfiguration(preset: .fitness), tier: TierPolicy(tier: .kilometer), receiver: .mediatek)
        let texts = plan.map { command -> String in
            guard case .pmtk(let sentence) = command else { return "?" }
            return String(sentence.text.split(separator: "*")[0])
        }
        #expect(texts == ["$PMTK886,1", "$PMTK220,1000", "$PMTK225,1,3000,117000,12000,117000"])
        let best = ReceiverPlan.commands(preset: LiveConfiguration(preset: .default), tier: TierPolicy(tier: .best), receiver: .mediatek)
        #expect(best.last == .pmtk(PMTK.setPeriodicMode(.normal)!))
        #expect(ReceiverPlan.commands(preset: LiveConfiguration(preset: .default), tier: TierPolicy(tier: .best), receiver: .genericNMEA).isEmpty)
    }

    @Test func acknowledgementsConfirmRefuseAndRetry() {
        let plan = ReceiverPlan.commands(preset: LiveConfiguration(preset: .default), tier: TierPolicy(tier: .hundredMeters), receiver: .ublox)
        var tracker = AcknowledgementTracker(timeoutMs: 1_000, maximumAttempts: 3)
        for command in plan { tracker.sent(command, now: UTCTime(seconds: 100)) }
        tracker.observe(.ack(.cfgNav5))
        tracker.observe(.nak(.cfgPm2))
        tracker.observe(.ack(.cfgMsg))            // never sent: ignored
        #expect(tracker.entry(0).status == .confirmed)
        #expect(tracker.entry(2).status == .refused)
        #expect(tracker.count(.pending) == 2)
        var resent: [Int] = []
        tracker.resends(now: UTCTime(seconds: 100, nanoseconds: 500_000_000)) { resent.append($0) }
        #expect(resent.isEmpty)                   // not yet timed out
        tracker.resends(now: UTCTime(seconds: 101)) { resent.append($0) }
        #expect(resent == [1, 3])
        tracker.observe(.ack(.cfgRate))
        tracker.resends(now: UTCTime(seconds: 102)) { resent.append($0) }
        tracker.resends(now: UTCTime(seconds: 103)) { resent.append($0) }
        #expect(resent == [1, 3, 3])              // CFG-RXM: third and last attempt at 102
        #expect(tracker.entry(1).status == .confirmed && tracker.entry(1).attempts == 2)
        #expect(tracker.entry(3).status == .timedOut && tracker.entry(3).attempts == 3)
        #expect(tracker.isSettled)
    }

    @Test func pmtkAcknowledgementFlags() {
        let plan = ReceiverPlan.commands(preset: LiveConfiguration(preset: .fitness), tier: TierPolicy(tier: .best), receiver: .mediatek)
        var tracker = AcknowledgementTracker()
        for command in plan { tracker.sent(command, now: UTCTime(seconds: 0)) }
        tracker.observe(PMTKAcknowledgement(command: 886, flag: .unsupported))
        tracker.observe(PMTKAcknowledgement(command: 220, flag: .succeeded))
        #expect(tracker.entry(0).status == .refused && tracker.entry(0).pmtkFlag == .unsupported)
        #expect(tracker.entry(1).status == .confirmed)
        #expect(tracker.entry(2).status == .pending)
        // Standby is never answered: confirmed on sending.
        var standby = AcknowledgementTracker()
        standby.sent(.pmtk(PMTK.standby()), now: UTCTime(seconds: 0))
        #expect(standby.isSettled)
    }
}

@Suite struct StationaryDetectorTests {
    @Test func multipathDriftIsStationaryOnceAndMovementEndsIt() {
        var detector = StationaryDetector(radiusM: 25, windowMs: 120_000)
        var drift = Drift(state: 42)
        var transitions: [StationaryDetector.Transition] = []
        for second in 0..<1_800 {
            let (latitude, longitude) = drift.around(45.0, 7.0, radiusM: 20)
            let transition = detector.observe(latitude: latitude, longitude: longitude, accuracyM: 4, timeNs: Int64(second) * 1_000_000_000)
            if transition != .none { transitions.append(transition) }
        }
        #expect(transitions.count == 1)
        guard case .becameStationary(let stay) = transitions.first else { Issue.record("never stationary"); return }
        #expect(stay.arrivalNs <= 5_000_000_000)
        #expect(Geodesy.distanceM(stay.latitude, stay.longitude, 45.0, 7.0) < 5)
        // Drive off north at 10 m/s: movement is confirmed within a few fixes.
        var resumedAt: Int? = nil
        for second in 1_800..<1_830 {
            let latitude = 45.0 + Double(second - 1_800) * 10 / 111_132
            if case .resumedMoving(let ended) = detector.observe(latitude: latitude, longitude: 7.0, accuracyM: 4, timeNs: Int64(second) * 1_000_000_000) {
                resumedAt = second
                #expect(ended.lastNearNs >= 1_799_000_000_000 && ended.lastNearNs <= 1_802_000_000_000)
            }
        }
        #expect(resumedAt != nil && resumedAt! <= 1_806)
    }

    @Test func steadyWalkingIsNeverStationary() {
        var detector = StationaryDetector(LiveConfiguration(preset: .fitness))
        for second in 0..<3_600 {
            let latitude = 45.0 + Double(second) * 1.4 / 111_132
            #expect(detector.observe(latitude: latitude, longitude: 7.0, accuracyM: 4, timeNs: Int64(second) * 1_000_000_000) == .none)
        }
        #expect(!detector.isStationary)
    }
}

@Suite struct VisitDetectorTests {
    func stay(arrival: Int64, departure: Int64) -> StationaryDetector.Transition {
        .resumedMoving(StationaryDetector.Stay(arrivalNs: arrival * 1_000_000_000, lastNearNs: departure * 1_000_000_000,
                                               latitude: 45, longitude: 7, radiusM: 12))
    }

    @Test func onlyStaysOfTheMinimumAreVisits() {
        let detector = VisitDetector(minimumMs: 300_000)
        #expect(detector.visit(for: stay(arrival: 100, departure: 399)) == nil)
        let visit = detector.visit(for: stay(arrival: 100, departure: 400))
        #expect(visit?.arrival == UTCTime(seconds: 100) && visit?.departure == UTCTime(seconds: 400) && visit?.radiusM == 12)
        #expect(detector.visit(for: .none) == nil)
    }

    @Test func aStopIsOneVisitReportedAtArrivalAndAtDeparture() throws {
        // Drive 60 s north at 10 m/s, stop 10 min with 3 m wander, drive on.
        let updater = LiveUpdater(settings: LiveUpdateSettings(preset: .automotiveNavigation, tier: .best, visitMinimumMs: 300_000))
        var drift = Drift(state: 99)
        var fixes: [Fix] = []
        for second in 0..<60 { fixes.append(liveFix(second, 45.0 + Double(second) * 10 / 111_132, 7.0, speed: 10)) }
        let stopLatitude = 45.0 + 600 / 111_132
        for second in 60..<660 {
            let (latitude, longitude) = drift.around(stopLatitude, 7.0, radiusM: 3)
            fixes.append(liveFix(second, latitude, longitude))
        }
        for second in 660..<720 { fixes.append(liveFix(second, stopLatitude + Double(second - 659) * 10 / 111_132, 7.0, speed: 10)) }
        let outputs = collect(updater, fixes)
        let visits = outputs.compactMap { if case .visit(let visit) = $0 { return visit } else { return nil } }
        // Reported twice, as CLVisit is: at arrival (no departure) once the stay has lasted the
        // minimum, then at departure with both times.
        #expect(visits.count == 2)
        guard visits.count == 2 else { return }
        let start = Int64(1_710_496_800)
        #expect(visits[0].departure == nil && visits[1].departure != nil)
        for visit in visits {
            #expect(abs(visit.arrival.seconds - (start + 60)) <= 3)
            #expect(Geodesy.distanceM(visit.latitude, visit.longitude, stopLatitude, 7.0) < 3)
        }
        #expect(abs((visits[1].departure?.seconds ?? 0) - (start + 659)) <= 3)
        // The arrival is reported with the first fix at which the stay has lasted 5 minutes:
        // the outputs before it are the updates up to about 60 + 300 s.
        let arrivalIndex = try #require(outputs.firstIndex { if case .visit = $0 { return true } else { return false } })
        let before = outputs[..<arrivalIndex].compactMap { if case .update(let update) = $0 { return update.time.seconds } else { return nil } }
        #expect(before.allSatisfy { $0 <= start + 362 }, "updates before the arrival: \(before.suffix(3))")
    }

    @Test func anArrivalFallsDueWithoutAFixAndIsReportedOncePerStay() {
        var detector = VisitDetector(minimumMs: 300_000)
        let stay = StationaryDetector.Stay(arrivalNs: 100_000_000_000, lastNearNs: 200_000_000_000, latitude: 45, longitude: 7, radiusM: 12)
        #expect(detector.arrivalDueNs(stay) == 400_000_000_000)
        #expect(detector.arrival(stay, nowNs: 399_999_999_999) == nil)
        let arrival = detector.arrival(stay, nowNs: 400_000_000_000)
        #expect(arrival == Visit(arrival: UTCTime(seconds: 100), departure: nil, latitude: 45, longitude: 7, radiusM: 12))
        #expect(detector.arrival(stay, nowNs: 500_000_000_000) == nil && detector.arrivalDueNs(stay) == nil)
        #expect(detector.arrival(nil, nowNs: 500_000_000_000) == nil)
    }

    /// While paused there may be no fix for a while: the updater's deadline is the arrival, and a
    /// tick at it reports the arrival.
    @Test func theUpdaterReportsAnArrivalOnATick() throws {
        let updater = LiveUpdater(settings: LiveUpdateSettings(preset: .automotiveNavigation, tier: .best, visitMinimumMs: 300_000))
        var fixes: [Fix] = []
        for second in 0..<200 { fixes.append(liveFix(second, 45.0, 7.0)) }
        let outputs = collect(updater, fixes)
        #expect(!outputs.contains { if case .visit = $0 { return true } else { return false } })
        #expect(updater.isStationary)
        let due = try #require(updater.nextDeadlineNs)
        let start = Int64(1_710_496_800)
        #expect(due == (start + 300) * 1_000_000_000, "arrival at the first fix, due 5 minutes later")
        updater.tick(now: UTCTime(nanoseconds: due))
        var visits: [Visit] = []
        while let output = updater.nextOutput() { if case .visit(let visit) = output { visits.append(visit) } }
        #expect(visits.count == 1 && visits.first?.departure == nil && visits.first?.arrival == UTCTime(seconds: start))
    }
}

@Suite struct SamplingPlannerTests {
    let planner = SamplingPlanner(minimumIntervalMs: 1_000, maximumIntervalMs: 120_000, maximumSpeedMps: 50)
    let now = UTCTime(seconds: 1_000)

    func interval(_ distance: Double?, _ accuracy: Double?) -> Int64 {
        planner.nextFixTime(now: now, distanceToEdgeM: distance, accuracyM: accuracy).totalNanoseconds - now.totalNanoseconds
    }

    @Test func nextFixFromDistanceOverMaximumSpeed() {
        #expect(interval(1_010, 10) == 20_000_000_000)        // 1000 m clear at 50 m/s
        #expect(interval(5, 10) == 1_000_000_000)             // straddling: the receiver's rate
        #expect(interval(20, 10) == 1_000_000_000)            // 0.2 s: never faster than the receiver
        #expect(interval(100_000, 10) == 120_000_000_000)     // never slower than the tier
        #expect(interval(nil, 10) == 120_000_000_000)         // no fences
        #expect(interval(500, nil) == 1_000_000_000)          // unknown accuracy: fix again soon
    }

    @Test func fenceEdgesInsideAndOutside() {
        var edges = FenceEdges()
        edges.add(latitude: 45.0, longitude: 7.0, radiusM: 100)
        edges.add(latitude: 45.1, longitude: 7.0, radiusM: 50)
        let inside = edges.nearestEdgeM(latitude: 45.0, longitude: 7.0)!
        #expect(abs(inside - 100) < 0.01)
        let outside = edges.nearestEdgeM(latitude: 45.0 + 300 / 111_132, longitude: 7.0)!
        #expect(abs(outside - 200) < 2)
        #expect(FenceEdges().nearestEdgeM(latitude: 45, longitude: 7) == nil)
    }
}

@Suite struct LiveUpdaterTests {
    @Test func parkedWithDriftGivesOneStationaryUpdate() {
        let updater = LiveUpdater(settings: LiveUpdateSettings(preset: .automotiveNavigation, tier: .best))
        var drift = Drift(state: 7)
        var fixes: [Fix] = []
        for second in 0..<7_200 {
            let (latitude, longitude) = drift.around(45.0, 7.0, radiusM: 5 + 15 * drift.unit())
            fixes.append(liveFix(second, latitude, longitude, hdop: 1.0))
        }
        let delivered = updates(collect(updater, fixes))
        let stationary = delivered.filter { $0.isStationary }
        #expect(stationary.count == 1)
        #expect(stationary.first?.diagnostics.contains(.stationary) == true)
        // Before it settled, the first fixes were delivered; after it, nothing moved.
        let after = delivered.drop { !$0.isStationary }.dropFirst()
        #expect(after.isEmpty)
        #expect(delivered.count <= 130)
    }

    @Test func batchOfNIsFlushedByAnEvent() {
        let updater = LiveUpdater(settings: LiveUpdateSettings(preset: .automotiveNavigation, tier: .best, batchCount: 10, batchAgeMs: 600_000))
        var outputs: [LiveOutput] = []
        for second in 0..<4 {
            let fix = liveFix(second, 45.0 + Double(second) * 10 / 111_132, 7.0, speed: 10)
            updater.observe(fix, now: fix.time!); drain(updater, into: &outputs)
        }
        #expect(outputs.isEmpty)
        updater.monitorEvent(now: UTCTime(seconds: 1_710_496_804)); drain(updater, into: &outputs)
        #expect(updates(outputs).count == 4)
        #expect(outputs.last == .batchEnd(.event))
        // Count bound: ten more make exactly one batch.
        outputs = []
        for second in 4..<14 {
            let fix = liveFix(second, 45.0 + Double(second) * 10 / 111_132, 7.0, speed: 10)
            updater.observe(fix, now: fix.time!); drain(updater, into: &outputs)
        }
        #expect(updates(outputs).count == 10 && outputs.last == .batchEnd(.count))
        // Age bound: one update, then ten minutes later it is delivered by tick.
        outputs = []
        let fix = liveFix(14, 45.0 + 140 / 111_132, 7.0, speed: 10)
        updater.observe(fix, now: fix.time!); drain(updater, into: &outputs)
        updater.tick(now: UTCTime(seconds: 1_710_496_814 + 600)); drain(updater, into: &outputs)
        #expect(updates(outputs).count == 1)
        #expect(outputs.contains(.batchEnd(.age)))
    }

    @Test func distanceFilterAndSignificantChange() {
        let track = (0..<600).map { liveFix($0, 45.0 + Double($0) * 3 / 111_132, 7.0, speed: 3) }   // 1.8 km north
        let filtered = updates(collect(LiveUpdater(settings: LiveUpdateSettings(preset: .fitness, tier: .best, distanceFilterM: 30)), track))
        for (a, b) in zip(filtered, filtered.dropFirst()) {
            #expect(Geodesy.distanceM(a.fix.latitude!, a.fix.longitude!, b.fix.latitude!, b.fix.longitude!) >= 30)
        }
        #expect(filtered.count >= 55 && filtered.count <= 61)
        let significant = updates(collect(LiveUpdater(settings: LiveUpdateSettings(preset: .fitness, tier: .best, significantChange: true)), track))
        #expect(significant.count == 4)           // the start, then at 500, 1000, 1500 m
        for (a, b) in zip(significant, significant.dropFirst()) {
            #expect(Geodesy.distanceM(a.fix.latitude!, a.fix.longitude!, b.fix.latitude!, b.fix.longitude!) >= 500)
        }
    }

    @Test func noFixSaysLocationUnavailableAndPoorFixesAreAccuracyLimited() {
        let updater = LiveUpdater(settings: LiveUpdateSettings(preset: .default, tier: .nearestTenMeters))
        var noFix = liveFix(0, 0, 0)
        noFix.mode = .noFix
        noFix.latitude = nil
        noFix.longitude = nil
        var outputs = collect(updater, [noFix])
        #expect(updates(outputs).first?.diagnostics == .locationUnavailable)
        outputs = collect(updater, [liveFix(1, 45.0, 7.0, hdop: 4)])        // 20 m > 10 m wanted
        #expect(updates(outputs).first?.diagnostics == .accuracyLimited)
        // A receiver that goes silent is reported too.
        outputs = []
        updater.tick(now: UTCTime(seconds: 1_710_496_801 + 60)); drain(updater, into: &outputs)
        #expect(updates(outputs).first?.diagnostics == .locationUnavailable)
    }

    @Test func aJumpFasterThanThePresetAllowsIsDropped() {
        let updater = LiveUpdater(settings: LiveUpdateSettings(preset: .fitness, tier: .best))
        let outputs = collect(updater, [liveFix(0, 45.0, 7.0), liveFix(1, 45.01, 7.0), liveFix(2, 45.0, 7.0)])
        #expect(updates(outputs).count == 2)
        #expect(updater.filteredCount == 1)
    }

    @Test func observingAFixAllocatesNothing() {
        let updater = LiveUpdater(settings: LiveUpdateSettings(preset: .automotiveNavigation, tier: .best, batchCount: 16, batchAgeMs: 60_000))
        let fixes = (0..<200).map { liveFix($0, 45.0 + Double($0) * 10 / 111_132, 7.0, speed: 10) }
        var delivered = 0
        for fix in fixes.prefix(20) { updater.observe(fix, now: fix.time!); while updater.nextOutput() != nil { delivered += 1 } }
        // Through a buffer pointer: a debug build's `for fix in array` copies each Fix through
        // a heap box, which would be counted against the updater.
        let count = fixes.withUnsafeBufferPointer { buffer in
            allocations {
                for index in 20..<buffer.count {
                    updater.observe(buffer[index], now: buffer[index].time!)
                    while updater.nextOutput() != nil { delivered += 1 }
                }
            }
        }
        #expect(count == 0)
        #expect(delivered > 100)
    }
}

@Suite struct PowerModelTests {
    @Test func duttierCyclesCostLess() {
        func perDay(_ tier: AccuracyTier, gapS: Double) -> PowerAccount {
            var account = PowerAccount(currents: .ubloxNEOM8, dutyCycle: TierPolicy(tier: tier).dutyCycle)
            for _ in 0..<Int(3_600 / gapS) { account.gap(gapS) }
            return account
        }
        let continuous = perDay(.best, gapS: 1)
        let cyclic = perDay(.hundredMeters, gapS: 10)
        let onOff = perDay(.kilometer, gapS: 120)
        #expect(continuous.mAhPerDay > cyclic.mAhPerDay && cyclic.mAhPerDay > onOff.mAhPerDay)
        // Continuous tracking for a day is the tracking current times 24 h (plus one start).
        #expect(abs(continuous.mAhPerDay - 23 * 24) < 1)
        #expect(onOff.wakeUps == 30 && abs(onOff.wakeUpsPerHour - 30) < 0.1)
        #expect(onOff.onTimeS < 0.05 * onOff.durationS)
    }
}
