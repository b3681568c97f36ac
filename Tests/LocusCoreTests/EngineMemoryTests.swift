import Foundation
import Testing
@testable import LocusCore

/// The engine's memory per condition (docs/memory.md): the strides the table there is built on,
/// and a capacity that is never filled costing no resident memory.
@Suite struct EngineMemoryTests {
    @Test func aRecordsStrides() {
        // The hot slot; a beacon's state beside it (written for beacon slots only).
        #expect(MemoryLayout<MonitorEngine.Slot>.stride == 112)
        #expect(MemoryLayout<MonitorEngine.BeaconState>.stride <= 376)
        #expect(MemoryLayout<Explanation>.stride == 56)
        #expect(MemoryLayout<ConditionSettings>.stride == 48)
        #expect(MemoryLayout<MonitorEngine.PendingEvent>.stride == 176)
    }

    /// Resident anonymous memory of this process, KiB (Linux).
    private func residentAnonymousKiB() -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        }
        return nil
    }

    /// An engine for 200,000 conditions holding two: its tables are allocated but not written, so
    /// they are not resident (writing them all took about 30 MB before; other tests running
    /// meanwhile allocate a little, hence the margin).
    @Test func unusedCapacityIsNotResident() throws {
        guard let before = residentAnonymousKiB() else { return }
        let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: 200_000, events: 4_096))
        let now = UTCTime(seconds: 1_700_000_000)
        engine.add(monitor: FixedName("m")!, identifier: FixedName("a")!,
                   condition: .circle(CircularGeographicCondition(latitude: 45, longitude: 7, radiusM: 100)), now: now)
        engine.add(monitor: FixedName("m")!, identifier: FixedName("b")!,
                   condition: .beacon(BeaconIdentityCondition(uuid: BeaconUUID(high: 1, low: 2))), now: now)
        let after = try #require(residentAnonymousKiB())
        #expect(after - before < 4_096, "an empty capacity of 200,000 conditions took \(after - before) KiB")
        #expect(engine.conditionCount == 2)
    }

    /// Settings are interned: records share an entry, a replaced record gives its entry back, so
    /// replacing records with new settings again and again never fills the table.
    @Test func settingsAreSharedAndGivenBack() {
        let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: 2, events: 4))
        let now = UTCTime(seconds: 1_700_000_000)
        let monitor = FixedName("m")!
        let place = Condition.circle(CircularGeographicCondition(latitude: 45, longitude: 7, radiusM: 100))
        for round in 0..<1_000 {
            var settings = ConditionSettings()
            settings.dwellMs = Int64(round)
            #expect(engine.add(monitor: monitor, identifier: FixedName("a")!, condition: place, settings: settings, now: now) != .limitExceeded)
            settings.exitMarginM = Double(round % 7)
            #expect(engine.add(monitor: monitor, identifier: FixedName("b")!, condition: place, settings: settings, now: now) != .limitExceeded)
            #expect(engine.record(monitor: monitor, identifier: FixedName("a")!)?.settings.dwellMs == Int64(round))
            #expect(engine.record(monitor: monitor, identifier: FixedName("b")!)?.settings == settings)
        }
        var table = SettingsTable(capacity: 4)
        let first = table.intern(ConditionSettings())
        #expect(table.intern(ConditionSettings()) == first)
        #expect(table.count == 1)
        table.release(first)
        #expect(table.count == 1)
        table.release(first)
        #expect(table.count == 0)
    }

    /// Identifiers longer than a slot's 15 bytes are kept whole beside it: names sharing their first
    /// 15 bytes stay apart, and events, records and removal use the whole name.
    @Test func longIdentifiersStayWhole() {
        let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: 8, events: 8))
        let now = UTCTime(seconds: 1_700_000_000)
        let monitor = FixedName("m")!
        let names = ["warehouse-north-bay-01", "warehouse-north-bay-02", "warehouse-north", "warehouse-north-",
                     "abcdefghijklmnopqrstuvwxyz012345"].map { FixedName($0)! }
        for (index, name) in names.enumerated() {
            let place = Condition.circle(CircularGeographicCondition(latitude: 45, longitude: 7 + Double(index), radiusM: 100))
            #expect(engine.add(monitor: monitor, identifier: name, condition: place, now: now) == .added)
        }
        #expect(engine.identifiers(monitor: monitor) == names.sorted())
        for (index, name) in names.enumerated() {
            #expect(engine.record(monitor: monitor, identifier: name)?.condition
                == .circle(CircularGeographicCondition(latitude: 45, longitude: 7 + Double(index), radiusM: 100)))
        }
        var fix = Fix(timeOfDayNs: 0)
        fix.time = now
        fix.mode = .threeDimensional
        fix.latitude = 45
        fix.longitude = 7
        fix.latitudeSigmaM = 3
        fix.longitudeSigmaM = 0
        engine.observe(fix)
        var satisfied: [FixedName] = []
        while let event = engine.oldestPendingEvent() {
            if event.state == .satisfied { satisfied.append(event.identifier) }
            engine.acknowledgeOldest()
        }
        #expect(satisfied == [names[0]])
        #expect(engine.remove(monitor: monitor, identifier: names[1]))
        #expect(engine.record(monitor: monitor, identifier: names[1]) == nil)
        #expect(engine.record(monitor: monitor, identifier: names[0])?.lastEvent.identifier == names[0])
        #expect(engine.record(monitor: monitor, identifier: names[0])?.lastEvent.state == .satisfied)
        #expect(engine.add(monitor: monitor, identifier: names[1], condition: .circle(CircularGeographicCondition(latitude: 1, longitude: 1, radiusM: 5)),
                           now: now) == .added)
        #expect(engine.identifiers(monitor: monitor) == names.sorted())
    }
}
