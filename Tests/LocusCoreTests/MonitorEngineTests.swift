import AllocCounter
import Testing
@testable import LocusCore

private let gate = FixedName("gate")!
private let t0 = UTCTime(seconds: 1_700_000_000)
private let depotCenter = (latitude: 37.33467, longitude: -122.00898)
private let tagUUID = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!

private func name(_ text: String) -> FixedName { FixedName(text)! }

/// A fix at `metres` north of the depot centre, `seconds` after t0, with the given accuracy.
private func fix(northM metres: Double, at seconds: Int64, accuracyM: Double = 3) -> Fix {
    var fix = Fix(timeOfDayNs: 0)
    fix.time = UTCTime(seconds: t0.seconds + seconds)
    fix.mode = .threeDimensional
    fix.latitude = depotCenter.latitude + metres / 111_000
    fix.longitude = depotCenter.longitude
    fix.latitudeSigmaM = accuracyM
    fix.longitudeSigmaM = 0
    return fix
}

private func sighting(major: UInt16, minor: UInt16, at seconds: Int64, rssi: Int8 = -60) -> Sighting {
    Sighting(identity: BeaconIdentity(uuid: tagUUID, major: major, minor: minor), rssi: rssi, measuredPower: -59,
             address: BLEAddress(value: 0xC6B5_45F6_F18E), time: UTCTime(seconds: t0.seconds + seconds))
}

/// Handles every pending event (the test is the only sink) and returns them.
func drain(_ engine: MonitorEngine) -> [MonitorEvent] {
    var events: [MonitorEvent] = []
    while let event = engine.oldestPendingEvent() {
        events.append(event)
        engine.acknowledgeOldest()
    }
    return events
}

private func circle(radius: Double = 100) -> Condition {
    .circle(CircularGeographicCondition(latitude: depotCenter.latitude, longitude: depotCenter.longitude, radiusM: radius))
}

@Suite struct MonitorSemanticsTests {
    @Test func addAssumingSetsTheInitialStateAndUnknownOtherwise() {
        let engine = MonitorEngine(capacity: .init(conditions: 8, events: 8))
        engine.add(monitor: gate, identifier: name("depot"), condition: circle(), assuming: .unsatisfied, now: t0)
        engine.add(monitor: gate, identifier: name("yard"), condition: circle(radius: 50), now: t0)
        #expect(engine.record(monitor: gate, identifier: name("depot"))?.lastEvent.state == .unsatisfied)
        #expect(engine.record(monitor: gate, identifier: name("yard"))?.lastEvent.state == .unknown)
        #expect(engine.identifiers(monitor: gate) == [name("depot"), name("yard")])
        #expect(engine.oldestPendingEvent() == nil)
    }

    @Test func eventsOnlyOnChangeAndLastEventOnlyAfterHandling() throws {
        let engine = MonitorEngine(capacity: .init(conditions: 8, events: 8))
        engine.add(monitor: gate, identifier: name("depot"), condition: circle(), settings: .raw, assuming: .unsatisfied, now: t0)
        engine.observe(fix(northM: 500, at: 1))
        #expect(engine.oldestPendingEvent() == nil) // unsatisfied -> unsatisfied: no event
        engine.observe(fix(northM: 10, at: 2))
        let event = try #require(engine.oldestPendingEvent())
        #expect(event.state == .satisfied && event.identifier == name("depot"))
        // Not handled yet: the record still says unsatisfied, and the same state is not reported twice.
        #expect(engine.record(monitor: gate, identifier: name("depot"))?.lastEvent.state == .unsatisfied)
        engine.observe(fix(northM: 12, at: 3))
        #expect(engine.pendingEventCount == 1)
        engine.acknowledgeOldest()
        #expect(engine.record(monitor: gate, identifier: name("depot"))?.lastEvent == event)
        engine.observe(fix(northM: 15, at: 4))
        #expect(engine.oldestPendingEvent() == nil)
        engine.observe(fix(northM: 300, at: 5))
        #expect(drain(engine).map(\.state) == [.unsatisfied])
    }

    @Test func addWithAnExistingIdentifierReplacesAndRemoveDeletes() {
        let engine = MonitorEngine(capacity: .init(conditions: 8, events: 8))
        #expect(engine.add(monitor: gate, identifier: name("depot"), condition: circle(), settings: .raw, now: t0) == .added)
        engine.observe(fix(northM: 10, at: 1))
        #expect(drain(engine).map(\.state) == [.satisfied])
        #expect(engine.add(monitor: gate, identifier: name("depot"), condition: circle(radius: 5), settings: .raw, now: t0) == .replaced)
        #expect(engine.conditionCount == 1)
        #expect(engine.record(monitor: gate, identifier: name("depot"))?.lastEvent.state == .unknown)
        engine.observe(fix(northM: 10, at: 2))
        #expect(drain(engine).map(\.state) == [.unsatisfied]) // 10 m north is outside the new 5 m circle
        #expect(engine.remove(monitor: gate, identifier: name("depot")))
        #expect(engine.record(monitor: gate, identifier: name("depot")) == nil)
        #expect(!engine.remove(monitor: gate, identifier: name("depot")))
        #expect(engine.conditionCount == 0)
    }

    @Test func aRemovedConditionsPendingEventIsNeverDelivered() {
        let engine = MonitorEngine(capacity: .init(conditions: 8, events: 8))
        engine.add(monitor: gate, identifier: name("depot"), condition: circle(), settings: .raw, now: t0)
        engine.observe(fix(northM: 10, at: 1))
        #expect(engine.pendingEventCount == 1)
        engine.remove(monitor: gate, identifier: name("depot"))
        #expect(engine.oldestPendingEvent() == nil)
    }

    @Test func capacityLimitsAreReportedNotCrashes() {
        let engine = MonitorEngine(capacity: .init(conditions: 2, events: 4, monitors: 1))
        #expect(engine.add(monitor: gate, identifier: name("a"), condition: circle(), now: t0) == .added)
        #expect(engine.add(monitor: gate, identifier: name("b"), condition: circle(), now: t0) == .added)
        #expect(engine.add(monitor: gate, identifier: name("c"), condition: circle(), now: t0) == .limitExceeded)
        #expect(engine.add(monitor: name("other"), identifier: name("a"), condition: circle(), now: t0) == .monitorLimitExceeded)
        // Replacing at full capacity works: the old slot is freed first.
        #expect(engine.add(monitor: gate, identifier: name("a"), condition: circle(radius: 7), now: t0) == .replaced)
    }

    @Test func aFullEventRingDefersAndLosesNothing() {
        let engine = MonitorEngine(capacity: .init(conditions: 16, events: 2))
        for index in 0..<6 { engine.add(monitor: gate, identifier: name("c\(index)"), condition: circle(), settings: .raw, now: t0) }
        engine.observe(fix(northM: 10, at: 1))
        #expect(engine.pendingEventCount == 2)
        #expect(engine.deferredDetections > 0)
        var seen = drain(engine)
        for second in 2..<6 {
            engine.observe(fix(northM: 10, at: Int64(second)))
            seen += drain(engine)
        }
        #expect(Set(seen.map(\.identifier)).count == 6)
        #expect(seen.allSatisfy { $0.state == .satisfied })
    }

    @Test func monitorsAreSeparate() {
        let engine = MonitorEngine(capacity: .init(conditions: 8, events: 8))
        engine.add(monitor: gate, identifier: name("depot"), condition: circle(), settings: .raw, now: t0)
        engine.add(monitor: name("dock"), identifier: name("depot"), condition: circle(radius: 5), settings: .raw, now: t0)
        engine.observe(fix(northM: 20, at: 1))
        let events = drain(engine)
        #expect(events.count == 2)
        #expect(events.first { $0.monitor == gate }?.state == .satisfied)
        #expect(events.first { $0.monitor == name("dock") }?.state == .unsatisfied)
    }
}

@Suite struct GeofenceDecisionTests {
    @Test func rawSettingsMeanInsideIffDistanceAtMostRadius() {
        let engine = MonitorEngine(capacity: .init(conditions: 4, events: 8))
        engine.add(monitor: gate, identifier: name("depot"), condition: circle(), settings: .raw, now: t0)
        engine.observe(fix(northM: 99, at: 1, accuracyM: 50))
        engine.observe(fix(northM: 101, at: 2, accuracyM: 50))
        engine.observe(fix(northM: 99.5, at: 3, accuracyM: 50))
        #expect(drain(engine).map(\.state) == [.satisfied, .unsatisfied, .satisfied])
    }

    @Test func theAccuracyGateHoldsWhileTheCircleStraddlesTheEdge() {
        var settings = ConditionSettings()
        settings.exitMarginM = 0
        let engine = MonitorEngine(capacity: .init(conditions: 4, events: 8))
        engine.add(monitor: gate, identifier: name("depot"), condition: circle(), settings: settings, assuming: .unsatisfied, now: t0)
        engine.observe(fix(northM: 90, at: 1, accuracyM: 20))   // 90 + 20 > 100: could be outside
        #expect(engine.oldestPendingEvent() == nil)
        engine.observe(fix(northM: 70, at: 2, accuracyM: 20))   // 70 + 20 <= 100: surely inside
        #expect(drain(engine).map(\.state) == [.satisfied])
        engine.observe(fix(northM: 110, at: 3, accuracyM: 20))  // 110 - 20 < 100: could be inside
        #expect(engine.oldestPendingEvent() == nil)
        engine.observe(fix(northM: 130, at: 4, accuracyM: 20))
        #expect(drain(engine).map(\.state) == [.unsatisfied])
    }

    @Test func exitMarginPreventsFlappingAtTheEdge() {
        var settings = ConditionSettings.raw
        settings.exitMarginM = 15
        let engine = MonitorEngine(capacity: .init(conditions: 4, events: 16))
        engine.add(monitor: gate, identifier: name("depot"), condition: circle(), settings: settings, assuming: .unsatisfied, now: t0)
        var north = 95.0
        for second in 1...40 {
            engine.observe(fix(northM: north, at: Int64(second)))
            north = north == 95 ? 110 : 95 // wobbling across the edge, never 15 m out
        }
        #expect(drain(engine).map(\.state) == [.satisfied])
    }

    @Test func dwellDelaysTheEventUntilTheStateHeld() throws {
        var settings = ConditionSettings.raw
        settings.dwellMs = 5_000
        let engine = MonitorEngine(capacity: .init(conditions: 4, events: 8))
        engine.add(monitor: gate, identifier: name("depot"), condition: circle(), settings: settings, assuming: .unsatisfied, now: t0)
        engine.observe(fix(northM: 10, at: 1))
        engine.observe(fix(northM: 10, at: 3))
        #expect(engine.oldestPendingEvent() == nil)
        engine.observe(fix(northM: 200, at: 4)) // left again before the dwell: nothing
        engine.observe(fix(northM: 10, at: 10))
        engine.observe(fix(northM: 10, at: 14))
        #expect(engine.oldestPendingEvent() == nil)
        #expect(engine.nextDeadline() == UTCTime(seconds: t0.seconds + 15))
        engine.tick(now: UTCTime(seconds: t0.seconds + 15))
        let event = try #require(drain(engine).first)
        #expect(event.state == .satisfied && event.date == UTCTime(seconds: t0.seconds + 15) && event.explanation.dwellMs == 5_000)
    }

    @Test func transitBetweenSparseFixesGivesAnInterpolatedPair() throws {
        var settings = ConditionSettings.raw
        settings.transit = true
        let engine = MonitorEngine(capacity: .init(conditions: 4, events: 8))
        engine.add(monitor: gate, identifier: name("depot"), condition: circle(), settings: settings, assuming: .unsatisfied, now: t0)
        engine.observe(fix(northM: -400, at: 0))
        engine.observe(fix(northM: 400, at: 80)) // 10 m/s straight through the 100 m circle
        let events = drain(engine)
        try #require(events.count == 2)
        #expect(events.map(\.state) == [.satisfied, .unsatisfied])
        #expect(abs(Double(events[0].date.totalNanoseconds - t0.totalNanoseconds) / 1e9 - 30) < 0.6)
        #expect(abs(Double(events[1].date.totalNanoseconds - t0.totalNanoseconds) / 1e9 - 50) < 0.6)
        #expect(engine.record(monitor: gate, identifier: name("depot"))?.lastEvent.state == .unsatisfied)
    }
}

@Suite struct BeaconConditionTests {
    @Test func wildcardSatisfiedEventsCarryTheRefinementAndExitClearsIt() throws {
        let engine = MonitorEngine(capacity: .init(conditions: 8, events: 8))
        var settings = ConditionSettings()
        settings.exitTimeoutMs = 10_000
        engine.add(monitor: gate, identifier: name("dock"), condition: .beacon(BeaconIdentityCondition(uuid: tagUUID, major: 1)),
                   settings: settings, assuming: .unsatisfied, now: t0)
        engine.add(monitor: gate, identifier: name("exact"), condition: .beacon(BeaconIdentityCondition(uuid: tagUUID, major: 1, minor: 7)),
                   settings: settings, assuming: .unsatisfied, now: t0)
        engine.observe(sighting(major: 2, minor: 7, at: 1)) // other major: no match
        #expect(engine.oldestPendingEvent() == nil)
        engine.observe(sighting(major: 1, minor: 7, at: 2))
        let events = drain(engine)
        let dock = try #require(events.first { $0.identifier == name("dock") })
        #expect(dock.state == .satisfied && dock.refinement == BeaconIdentity(uuid: tagUUID, major: 1, minor: 7))
        let exact = try #require(events.first { $0.identifier == name("exact") })
        #expect(exact.refinement == nil) // not a wildcard
        for second in stride(from: Int64(3), to: 12, by: 1) {
            engine.observe(sighting(major: 1, minor: 7, at: second))
            engine.tick(now: UTCTime(seconds: t0.seconds + second))
        }
        #expect(drain(engine).isEmpty)
        engine.tick(now: UTCTime(seconds: t0.seconds + 25))
        let exits = drain(engine)
        #expect(exits.count == 2 && exits.allSatisfy { $0.state == .unsatisfied && $0.refinement == nil })
        #expect(exits.allSatisfy { $0.date == UTCTime(seconds: t0.seconds + 21) }) // last seen 11 + 10 s
    }

    @Test func afterARestartASatisfiedBeaconGetsAWholeTimeoutToBeSeenAgain() throws {
        let engine = MonitorEngine(capacity: .init(conditions: 4, events: 4))
        var settings = ConditionSettings()
        settings.exitTimeoutMs = 10_000
        engine.add(monitor: gate, identifier: name("dock"), condition: .beacon(BeaconIdentityCondition(uuid: tagUUID)), settings: settings, now: t0)
        // The log says it was satisfied an hour before this start.
        let restored = MonitorEvent(monitor: gate, identifier: name("dock"), state: .satisfied, date: UTCTime(seconds: t0.seconds - 3600),
                                    refinement: BeaconIdentity(uuid: tagUUID, major: 1, minor: 1), diagnostics: [],
                                    explanation: Explanation(source: .sighting))
        engine.restore(restored)
        engine.tick(now: t0)
        engine.tick(now: UTCTime(seconds: t0.seconds + 5))
        #expect(engine.oldestPendingEvent() == nil)
        engine.observe(sighting(major: 1, minor: 1, at: 8))
        #expect(engine.oldestPendingEvent() == nil) // still satisfied: no flap across the restart
        engine.tick(now: UTCTime(seconds: t0.seconds + 30))
        let exit = try #require(drain(engine).first)
        #expect(exit.state == .unsatisfied && exit.date == UTCTime(seconds: t0.seconds + 18))
    }

    @Test func beaconConditionsWithoutBluetoothAreUnsupported() {
        let engine = MonitorEngine(capacity: .init(conditions: 4, events: 4), beaconsSupported: false)
        engine.add(monitor: gate, identifier: name("dock"), condition: .beacon(BeaconIdentityCondition(uuid: tagUUID)), now: t0)
        #expect(engine.record(monitor: gate, identifier: name("dock"))?.lastEvent.diagnostics == .conditionUnsupported)
    }

    @Test func proximityRequirementNeedsTheBeaconClose() {
        let engine = MonitorEngine(capacity: .init(conditions: 4, events: 4))
        var settings = ConditionSettings()
        settings.proximity = .immediate
        engine.add(monitor: gate, identifier: name("desk"), condition: .beacon(BeaconIdentityCondition(uuid: tagUUID)),
                   settings: settings, assuming: .unsatisfied, now: t0)
        for second in 1...5 { engine.observe(sighting(major: 1, minor: 1, at: Int64(second), rssi: -80)) } // ~11 m
        #expect(engine.oldestPendingEvent() == nil)
        for second in 6...30 { engine.observe(sighting(major: 1, minor: 1, at: Int64(second), rssi: -45)) } // ~0.2 m
        #expect(drain(engine).map(\.state) == [.satisfied])
    }
}

@Suite struct MonitorAllocationTests {
    @Test func fixesAndSightingsAllocateNothingAfterStartUp() {
        let engine = MonitorEngine(capacity: .init(conditions: 2_000, events: 64))
        var generator: UInt64 = 42
        func random() -> Double {
            generator = generator &* 6364136223846793005 &+ 1442695040888963407
            return Double(generator >> 11) / Double(1 << 53)
        }
        for index in 0..<1_000 {
            engine.add(monitor: gate, identifier: name("c\(index)"),
                       condition: .circle(CircularGeographicCondition(latitude: 37 + random(), longitude: -122 + random(), radiusM: 50 + 400 * random())),
                       assuming: .unsatisfied, now: t0)
            engine.add(monitor: gate, identifier: name("b\(index)"),
                       condition: .beacon(BeaconIdentityCondition(uuid: tagUUID, major: UInt16(index % 50), minor: index % 3 == 0 ? nil : UInt16(index))),
                       assuming: .unsatisfied, now: t0)
        }
        var fixes: [Fix] = []
        for second in 0..<200 { fixes.append(fix(northM: Double(second) * 30, at: Int64(second), accuracyM: 5)) }
        var sightings: [Sighting] = []
        for second in 0..<200 { sightings.append(sighting(major: UInt16(second % 50), minor: UInt16(second), at: Int64(second))) }
        func run() {
            for index in 0..<200 {
                engine.observe(fixes[index])
                engine.observe(sightings[index])
                engine.tick(now: UTCTime(seconds: t0.seconds + Int64(index)))
                while engine.oldestPendingEvent() != nil { engine.acknowledgeOldest() }
            }
        }
        run()
        let count = allocations { run() }
        #expect(count == 0)
    }
}
