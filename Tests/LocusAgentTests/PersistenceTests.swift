import AllocCounter
import Foundation
@testable import LocusAgent
import LocusCore
import LocusDevices
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

    static func directory(_ label: String) -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("locus-persistence-\(label)-\(getpid())").path
        try? FileManager.default.removeItem(atPath: path)
        return path
    }

    static func engine() -> MonitorEngine { MonitorEngine(capacity: MonitorEngine.Capacity(conditions: 8, events: 4)) }

    @Test func theUplinkCursorComesBackFromItsRecord() throws {
        let directory = Self.directory("uplink-record")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let now = UTCTime(seconds: 1_710_496_800)
        do {
            let persistence = try Persistence(directory: directory, log: SiteConfig.Log(), engine: Self.engine())
            #expect(persistence.rebuild().uplinkDelivered == nil)
            try persistence.uplink(UplinkCursor(delivered: 16, chained: 12), time: now)
            try persistence.uplink(UplinkCursor(delivered: 17, chained: 17), time: now)
            #expect(persistence.uplinkDelivered == 17)
            try persistence.sync()
        }
        let persistence = try Persistence(directory: directory, log: SiteConfig.Log(), engine: Self.engine())
        let summary = persistence.rebuild()
        #expect(summary.uplinkCursor == UplinkCursor(delivered: 17, chained: 17) && summary.undecodable == 0)
    }

    /// A cursor written before the chain (delivered only: 8 bytes) reads as "chained not known";
    /// one with an unknown chain says so too.
    @Test func anUplinkRecordWithoutTheChainReadsAsUnknown() throws {
        let directory = Self.directory("uplink-old-record")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            var store = try LogStore.open(directory: directory)
            let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: 16, alignment: 8)
            defer { bytes.deallocate() }
            var writer = ByteWriter(bytes)
            writer.put(UInt64(17))
            try store.append(type: .uplink, time: 0, payload: writer.written)
        }
        do {
            let persistence = try Persistence(directory: directory, log: SiteConfig.Log(), engine: Self.engine())
            #expect(persistence.rebuild().uplinkCursor == UplinkCursor(delivered: 17, chained: nil))
            try persistence.uplink(UplinkCursor(delivered: 18, chained: nil), time: UTCTime(seconds: 1))
            try persistence.sync()
        }
        let persistence = try Persistence(directory: directory, log: SiteConfig.Log(), engine: Self.engine())
        #expect(persistence.rebuild().uplinkCursor == UplinkCursor(delivered: 18, chained: nil))
    }

    /// Retention deleted the uplink record: the checkpoint at the head of a later segment states
    /// the cursor. Meanwhile the records past it that retention deleted are counted.
    @Test func theUplinkCursorComesBackFromACheckpointAfterRetentionDeletedItsRecord() throws {
        let directory = Self.directory("uplink-checkpoint")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var log = SiteConfig.Log()
        log.segmentSizeBytes = 1024
        log.retainBytes = 4096
        let now = UTCTime(seconds: 1_710_496_800)
        do {
            let persistence = try Persistence(directory: directory, log: log, engine: Self.engine())
            try persistence.uplink(UplinkCursor(delivered: 3, chained: 2), time: now)
            let record = persistence.lastSequence
            for index in 0..<200 { try persistence.marker(.diagnostic, time: now, text: "filler \(index)") }
            let oldest = try #require(Self.segments(directory).first)
            #expect(oldest > record, "the uplink record is gone")
            #expect(persistence.undeliveredDeleted == oldest - 4, "every record from 4 on that retention deleted")
            // Delivered up to the newest record: what retention deletes next was delivered.
            try persistence.uplink(UplinkCursor(delivered: persistence.lastSequence, chained: 2), time: now)
            let counted = persistence.undeliveredDeleted
            for index in 0..<20 { try persistence.marker(.diagnostic, time: now, text: "filler \(index)") }
            #expect(try #require(Self.segments(directory).first) > oldest)
            #expect(persistence.undeliveredDeleted == counted)
            try persistence.uplink(UplinkCursor(delivered: 3, chained: 2), time: now)
            let again = persistence.lastSequence
            for index in 0..<200 { try persistence.marker(.diagnostic, time: now, text: "filler \(index)") }
            #expect(try #require(Self.segments(directory).first) > again, "only a checkpoint states the cursor now")
            try persistence.sync()
        }
        let persistence = try Persistence(directory: directory, log: log, engine: Self.engine())
        let summary = persistence.rebuild()
        #expect(summary.fromCheckpoint != nil)
        #expect(summary.uplinkCursor == UplinkCursor(delivered: 3, chained: 2) && summary.undecodable == 0)
    }

    static func segments(_ directory: String) -> [UInt64] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).compactMap { LogStore.sequence(fromFileName: $0) }.sorted()
    }

    /// A checkpoint written before the uplink ends after the consumers' cursors: it still rebuilds.
    @Test func aCheckpointWithoutTheUplinkCursorStillRebuilds() throws {
        let directory = Self.directory("old-checkpoint")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let relay = try #require(FixedName("relay1"))
        let gate = try #require(FixedName("gate"))
        do {
            var store = try LogStore.open(directory: directory)
            let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 8)
            defer { bytes.deallocate() }
            var writer = ByteWriter(bytes)
            writer.put(UInt16(0))
            writer.put(UInt8(1))
            writer.put(relay)
            writer.put(UInt8(1))
            LogPayload.writeConsumer(monitor: gate, sequence: 9, &writer)
            try store.append(type: .checkpoint, time: 0, payload: writer.written)
        }
        let persistence = try Persistence(directory: directory, log: SiteConfig.Log(), engine: Self.engine())
        let summary = persistence.rebuild()
        #expect(summary.fromCheckpoint == 1 && summary.undecodable == 0)
        #expect(summary.latched == [relay])
        #expect(summary.consumers.map { "\($0.0) \($0.1)" } == ["gate 9"])
        #expect(summary.uplinkDelivered == nil)
    }

    /// A checkpoint written before the chain ends after the delivered number: the cursor rebuilds
    /// with the chain unknown.
    @Test func aCheckpointWithoutTheChainStillRebuildsTheCursor() throws {
        let directory = Self.directory("old-checkpoint-chain")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            var store = try LogStore.open(directory: directory)
            let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
            defer { bytes.deallocate() }
            var writer = ByteWriter(bytes)
            writer.put(UInt16(0))
            writer.put(UInt8(0))       // no latches
            writer.put(UInt8(0))       // no consumers
            writer.put(UInt8(1))       // an uplink cursor follows
            writer.put(UInt64(41))     // delivered; the record ends here
            try store.append(type: .checkpoint, time: 0, payload: writer.written)
        }
        let persistence = try Persistence(directory: directory, log: SiteConfig.Log(), engine: Self.engine())
        let summary = persistence.rebuild()
        #expect(summary.fromCheckpoint == 1 && summary.undecodable == 0)
        #expect(summary.uplinkCursor == UplinkCursor(delivered: 41, chained: nil))
    }

    /// The uplink's surface on the agent's log: a tail that reads every record, the cursor
    /// committed and restored at the next open, the backlog.
    @Test func theEventLogKeepsTheUplinkCursorAndReadsForIt() throws {
        let directory = try ComponentHarness.directory("uplink-eventlog")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let state = directory + "/state"
        let loaded = try ComponentHarness.loaded(directory, EventLogAndOutputsTests.site)
        do {
            let engine = EngineSetup.engine(for: loaded.site, board: loaded.board)
            guard case .success(let log) = EventLog.open(directory: state, loaded: loaded, engine: engine, now: ComponentHarness.at(0).utc) else {
                Issue.record("the state directory did not open")
                return
            }
            #expect(log.uplinkDelivered == nil)
            let tail = try #require(log.tail(after: 0))
            var sequences: [UInt64] = []
            let read = try #require(log.readTail(tail) { header, _ in
                sequences.append(header.sequence)
                return true
            })
            #expect(read.records == sequences.count && sequences == Array(1...log.newest))
            #expect(log.backlogBytes(after: 0) > 0 && log.backlogBytes(after: log.newest) == 0)
            try log.commitUplink(UplinkCursor(delivered: tail.position, chained: nil), ComponentHarness.at(1))
            #expect(log.uplinkDelivered == sequences.last)
            // The commit is a record itself, after the tail's position.
            #expect(log.readTail(tail) { header, _ in header.typeCode == LogRecordType.uplink.rawValue }?.records == 1)
            // The loop calls it every turn: nothing new costs no allocation.
            var idle: LogTailRead? = nil
            #expect(allocations { idle = log.readTail(tail) { _, _ in true } } == 0)
            #expect(idle == LogTailRead())
            #expect(log.undeliveredDeleted == 0)
            log.shutdown(now: ComponentHarness.at(2))
        }
        let engine = EngineSetup.engine(for: loaded.site, board: loaded.board)
        guard case .success(let log) = EventLog.open(directory: state, loaded: loaded, engine: engine, now: ComponentHarness.at(3).utc) else {
            Issue.record("the state directory did not open again")
            return
        }
        let delivered = try #require(log.uplinkDelivered)
        #expect(delivered > 1)
        log.shutdown(now: ComponentHarness.at(4))
    }
}
