import AllocCounter
import Foundation
import LocusCore
import Testing
@testable import LocusDevices
import TestSupport

/// Reads what the tail hands over (all of it unless `until` says stop), as (sequence, payload).
private func drain(_ store: borrowing LogStore, _ tail: LogTail, until: (UInt64) -> Bool = { _ in true })
    throws -> (records: [(UInt64, [UInt8])], read: LogTailRead) {
    var records: [(UInt64, [UInt8])] = []
    let read = try store.read(tail) { header, payload in
        guard until(header.sequence) else { return false }
        records.append((header.sequence, Array(payload)))
        return true
    }
    return (records, read)
}

private func event(_ store: inout LogStore, _ payload: [UInt8]) throws -> UInt64 {
    try store.append(type: .event, time: 1, payload: payload, headOfSegment: checkpointHead)
}

/// The uplink's reader: every record once, in order, while the log grows, rotates and is cut
/// back by retention, reading only new bytes and allocating nothing per read.
@Suite struct LogTailTests {
    @Test func everyRecordIsReadOnceInOrderWhileAppendsRotateSegments() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1024, retainBytes: 1 << 30)
        let tail = LogTail(after: 0)
        var random = SplitMix64(seed: 11)
        var written: [UInt64: [UInt8]] = [:]
        var seen: [UInt64] = []
        for _ in 0..<80 {
            for _ in 0..<random.below(9) {
                let payload = (0..<random.below(90)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                written[try event(&store, payload)] = payload
            }
            let (records, read) = try drain(store, tail)
            #expect(read == LogTailRead(records: records.count))
            for (sequence, payload) in records where written[sequence] != nil { #expect(payload == written[sequence]) }
            seen += records.map(\.0)
            #expect(tail.position == store.nextSequence - 1)
        }
        #expect(store.segmentCountOnDisk >= 10)
        #expect(seen == Array(1..<store.nextSequence), "each record once, in order, checkpoints at segment heads included")
        #expect(written.count > 200)
    }

    @Test func recordsLargerThanWhatIsLeftOfTheBufferAreReadWhole() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 8 << 20, retainBytes: 1 << 30)
        var random = SplitMix64(seed: 5)
        var written: [[UInt8]] = []
        for _ in 0..<40 {
            let payload = (0..<random.below(LogRecord.maximumPayloadSize + 1)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            _ = try event(&store, payload)
            written.append(payload)
        }
        // The smallest buffer (one largest record): records straddle every refill.
        let tail = LogTail(after: 0, bufferBytes: 0)
        let (records, read) = try drain(store, tail)
        #expect(read == LogTailRead(records: 40))
        #expect(records.map(\.1) == written)
    }

    @Test func aRecordTheBodyRefusesIsHandedAgain() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 300, retainBytes: 1 << 30)
        for index in 0..<12 { _ = try event(&store, [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 40)) }
        let tail = LogTail(after: 0)
        let first = try drain(store, tail) { $0 <= 3 }
        #expect(first.records.map(\.0) == [1, 2, 3] && first.read.records == 3 && tail.position == 3)
        var offered: [UInt64] = []
        let refused = try store.read(tail) { header, _ in
            offered.append(header.sequence)
            return false
        }
        #expect(offered == [4] && refused.records == 0 && tail.position == 3)
        let rest = try drain(store, tail)
        #expect(rest.records.map(\.0) == Array(4..<store.nextSequence))
        #expect(store.segmentCountOnDisk > 2)
    }

    @Test func repositionResendsFromTheGivenSequence() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 300, retainBytes: 1 << 30)
        for index in 0..<30 { _ = try event(&store, [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 40)) }
        let tail = LogTail(after: 0)
        let all = try drain(store, tail).records
        #expect(all.map(\.0) == Array(1..<store.nextSequence))
        // A reconnect: the broker acknowledged up to 7; back into an older segment.
        tail.reposition(after: 7)
        #expect(tail.position == 7)
        let again = try drain(store, tail).records
        #expect(again.map(\.0) == Array(8..<store.nextSequence))
        #expect(again.map(\.1) == Array(all.dropFirst(7).map(\.1)))
        tail.reposition(after: 0)
        #expect(try drain(store, tail).records.map(\.0) == Array(1..<store.nextSequence))
        // At the end already, or ahead of the log: nothing, and no error.
        tail.reposition(after: store.nextSequence - 1)
        #expect(try drain(store, tail).read == LogTailRead())
        tail.reposition(after: store.nextSequence + 5)
        #expect(try drain(store, tail).read == LogTailRead())
        #expect(tail.position == store.nextSequence + 5)
    }

    @Test func retentionDeletingAheadOfALaggingTailIsCountedAsMissingAndUndelivered() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1024, retainBytes: 4096)
        for index in 0..<10 { _ = try event(&store, [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 50)) }
        let tail = LogTail(after: 0)
        #expect(try drain(store, tail) { $0 <= 5 }.records.count == 5)
        // The uplink delivered 1...5; the disk promise still wins over the records it lacks.
        store.retentionFloor = tail.position + 1
        for index in 0..<300 { _ = try event(&store, [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 50)) }
        let oldest = store.segmentFirstSequences[0]
        #expect(oldest > 6)
        #expect(store.undeliveredDeleted == oldest - 6)
        #expect(store.undeliveredDeletedSegments >= 10)
        let (records, read) = try drain(store, tail)
        #expect(read.missing == oldest - 6 && read.corrupt == 0)
        #expect(records.map(\.0) == Array(oldest..<store.nextSequence))
        // Delivered past everything retention deletes next: nothing more counts.
        store.retentionFloor = store.nextSequence
        let counted = store.undeliveredDeleted
        for index in 0..<30 { _ = try event(&store, [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 50)) }
        #expect(store.segmentFirstSequences[0] > oldest)
        #expect(store.undeliveredDeleted == counted)
    }

    @Test func withoutAFloorRetentionCountsNothing() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1024, retainBytes: 4096)
        for index in 0..<300 { _ = try event(&store, [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 50)) }
        #expect(store.segmentFirstSequences[0] > 1)
        #expect(store.undeliveredDeleted == 0 && store.undeliveredDeletedSegments == 0)
    }

    @Test func aCorruptRecordInAnOlderSegmentIsSkippedToTheNextSegmentAndReported() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1024, retainBytes: 1 << 30)
        // 100-byte records, ten to a segment, no checkpoints.
        for index in 0..<60 { try store.append(type: .event, time: 0, payload: [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 68)) }
        let files = directory.segmentFiles()
        #expect(files.count == 6)
        let victim = try #require(LogStore.sequence(fromFileName: files[1]))
        var bytes = directory.bytes(files[1])
        bytes[250] ^= 0x10 // the third record's payload
        directory.write(files[1], bytes)
        let expected = (1...60).filter { !(victim + 2..<victim + 10).contains(UInt64($0)) }.map { UInt64($0) }

        // Damaged under a running store: found as it is read.
        let running = try drain(store, LogTail(after: 0))
        #expect(running.read == LogTailRead(records: expected.count, corrupt: 1))
        #expect(running.records.map(\.0) == expected)
        // Damaged before the store opened: the segment table already ends it early.
        _ = consume store
        let reopened = try LogStore.open(directory: directory.path, segmentSizeBytes: 1024, retainBytes: 1 << 30)
        #expect(reopened.recovery.count == 1)
        let fresh = try drain(reopened, LogTail(after: 0))
        #expect(fresh.read == LogTailRead(records: expected.count, corrupt: 1))
        #expect(fresh.records.map(\.0) == expected)
        // A tail that starts after the damage does not see it.
        #expect(try drain(reopened, LogTail(after: victim + 9)).read == LogTailRead(records: 60 - Int(victim) - 9))
    }

    @Test func aTornRecordIsNeverReadAndTheTailGoesOnAfterTheReopenCutsIt() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1 << 20, retainBytes: 1 << 30)
        for index in 0..<5 { _ = try event(&store, [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 40)) }
        // Half of record 6 in the active file, written behind the store's back (a writer that died
        // mid-write): the segment table does not count it.
        let torn = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 8)
        defer { torn.deallocate() }
        let payload = [UInt8](repeating: 0xAB, count: 60)
        let size = try payload.withUnsafeBytes { bytes in
            try LogRecord.encode(LogRecordHeader(type: .event, payloadLength: 60, sequence: 6, time: 1), payload: bytes, into: torn)
        }
        let active = directory.segmentFiles().last!
        let handle = try #require(FileHandle(forWritingAtPath: directory.file(active)))
        handle.seekToEndOfFile()
        handle.write(Data(torn[0..<(size / 2)]))
        handle.closeFile()
        let tail = LogTail(after: 0)
        let first = try drain(store, tail)
        #expect(first.read == LogTailRead(records: 5) && tail.position == 5)
        #expect(try drain(store, tail).read == LogTailRead())
        // The next open cuts it; the same tail goes on with the records written after.
        _ = consume store
        store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1 << 20, retainBytes: 1 << 30)
        #expect(store.recovery.count == 1 && store.recovery[0].truncated)
        for index in 5..<8 { _ = try event(&store, [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 40)) }
        let after = try drain(store, tail)
        #expect(after.records.map(\.0) == [6, 7, 8])
        #expect(after.records.allSatisfy { $0.1 == [UInt8](repeating: UInt8($0.0 - 1), count: 40) })
    }

    @Test func aSteadyStateReadAllocatesNothing() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1 << 20, retainBytes: 1 << 30)
        let tail = LogTail(after: 0)
        for index in 0..<20 { _ = try event(&store, [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 80)) }
        _ = try drain(store, tail)
        for index in 0..<10 { _ = try event(&store, [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 80)) }
        var handed = 0
        var bytes = 0
        var read = LogTailRead()
        var idle = LogTailRead()
        let offset = tail.offset
        let count = try allocations {
            read = try Self.count(store, tail, &handed, &bytes)
            idle = try Self.count(store, tail, &handed, &bytes)
        }
        #expect(count == 0)
        #expect(read == LogTailRead(records: 10) && idle == LogTailRead() && handed == 10 && bytes == 800)
        // Only the new records' bytes were read, from where the last read ended.
        #expect(tail.windowStart == offset && tail.filled == 10 * (LogRecord.headerSize + 80))
    }

    private static func count(_ store: borrowing LogStore, _ tail: LogTail, _ handed: inout Int, _ bytes: inout Int) throws -> LogTailRead {
        try store.read(tail) { _, payload in
            handed += 1
            bytes += payload.count
            return true
        }
    }

    @Test func backlogBytesAreAboutTheBytesAfterASequence() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1024, retainBytes: 1 << 30)
        for index in 0..<100 { try store.append(type: .event, time: 0, payload: [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: 68)) }
        #expect(store.bytes(after: 0) == store.totalBytes)
        #expect(store.bytes(after: store.nextSequence - 1) == 0)
        // 100-byte records: the estimate is exact here.
        #expect(store.bytes(after: 25) == 7500)
        var previous = Int64.max
        for sequence in 0..<store.nextSequence {
            #expect(store.bytes(after: sequence) <= previous)
            previous = store.bytes(after: sequence)
        }
    }
}
