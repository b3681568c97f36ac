import Foundation
@testable import LocusAgent
import LocusCore
import Testing

/// What the agent keeps besides records — latched outputs and consumers' cursors — survives a
/// restart through the log, including when only a checkpoint states it (old segments deleted).
@Suite struct PersistenceTests {
    @Test func latchesAndConsumerCursorsComeBackFromTheNewestCheckpoint() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locus-persistence-\(getpid())").path
        try? FileManager.default.removeItem(atPath: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let relay = try #require(FixedName("relay1"))
        let gate = try #require(FixedName("gate"))
        let dock = try #require(FixedName("dock"))
        let now = UTCTime(seconds: 1_710_496_800)
        do {
            let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: 8, events: 4))
            let persistence = try Persistence(directory: directory, log: SiteConfig.Log(), engine: engine)
            try persistence.consumer(monitor: gate, sequence: 41, time: now)
            try persistence.consumer(monitor: dock, sequence: 7, time: now)
            try persistence.consumer(monitor: gate, sequence: 42, time: now)
            persistence.latched = [relay]
            // A checkpoint states everything; the records before it are no longer needed.
            try persistence.checkpoint(time: now)
            try persistence.sync()
        }
        let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: 8, events: 4))
        let persistence = try Persistence(directory: directory, log: SiteConfig.Log(), engine: engine)
        let summary = persistence.rebuild()
        #expect(summary.latched == [relay])
        #expect(summary.consumers.map { "\($0.0) \($0.1)" } == ["gate 42", "dock 7"])
        #expect(summary.fromCheckpoint != nil)
    }
}
