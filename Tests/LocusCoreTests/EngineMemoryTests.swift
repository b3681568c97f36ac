import Foundation
import Testing
@testable import LocusCore

/// The engine's memory per condition (docs/memory.md): the strides the table there is built on,
/// and a capacity that is never filled costing no resident memory.
@Suite struct EngineMemoryTests {
    @Test func aRecordsStrides() {
        // The hot slot; a beacon's state beside it (written for beacon slots only).
        #expect(MemoryLayout<MonitorEngine.Slot>.stride == 128)
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
}
