import Foundation
import Glibc
import LocusCore
import Testing
@testable import LocusDevices
import TestSupport

/// A fresh, empty directory under the system's temporary directory, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init(_ name: String = #function) throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("locus-log-\(getpid())")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        let cleaned = name.filter { $0.isLetter || $0.isNumber }
        path = base.appendingPathComponent("\(cleaned)-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }
    /// Removes the directory, and its per-process parent once that is empty (rmdir refuses otherwise).
    func remove() {
        try? FileManager.default.removeItem(atPath: path)
        _ = Glibc.rmdir(URL(fileURLWithPath: path).deletingLastPathComponent().path)
    }

    func segmentFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { $0.hasSuffix(".log") }.sorted()
    }

    func bytes(_ name: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: file(name)) ?? Data()) }
    func write(_ name: String, _ bytes: [UInt8]) { _ = FileManager.default.createFile(atPath: file(name), contents: Data(bytes)) }
    func size(_ name: String) -> Int { bytes(name).count }
}

/// What a test wrote: sequence -> (type, time, payload).
struct WrittenRecord: Equatable {
    var type: UInt8
    var time: Int64
    var payload: [UInt8]
}

struct ReadRecord: Equatable {
    var sequence: UInt64
    var record: WrittenRecord
    var flags: LogRecordFlags
}

func readAll(_ store: borrowing LogStore, after: UInt64 = 0) throws -> [ReadRecord] {
    var records: [ReadRecord] = []
    try store.forEachRecord(afterSequence: after) { header, payload in
        records.append(ReadRecord(sequence: header.sequence, record: WrittenRecord(type: header.typeCode, time: header.time, payload: Array(payload)),
                                  flags: header.flags))
    }
    return records
}

private func payload(_ sequence: Int, _ random: inout SplitMix64, maximum: Int = 120) -> [UInt8] {
    (0..<(1 + random.below(maximum))).map { _ in UInt8(truncatingIfNeeded: random.next()) } + [UInt8(truncatingIfNeeded: sequence)]
}

/// Appends a two-record checkpoint group at the head of every new segment.
func checkpointHead(_ store: inout LogStore) throws(LogStoreError) {
    try store.append(type: .checkpoint, time: 7, payload: [1, 1, 1], flags: .moreFollow)
    try store.append(type: .checkpoint, time: 7, payload: [2, 2], flags: .continuation)
}

@Suite struct LogStoreTests {
    @Test func appendReopenAndReadBack() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var random = SplitMix64(state: 1)
        var written: [ReadRecord] = []
        do {
            var store = try LogStore.open(directory: directory.path)
            #expect(store.nextSequence == 1)
            #expect(store.recovery.isEmpty)
            for index in 0..<200 {
                let type = LogRecordType.allCases[index % LogRecordType.allCases.count]
                let body = payload(index, &random)
                let sequence = try store.append(type: type, time: Int64(index) * 1_000_000_000, payload: body)
                #expect(sequence == UInt64(index + 1))
                written.append(ReadRecord(sequence: sequence, record: WrittenRecord(type: type.rawValue, time: Int64(index) * 1_000_000_000, payload: body), flags: []))
            }
            #expect(try readAll(store) == written)
        }
        let store = try LogStore.open(directory: directory.path)
        #expect(store.recovery.isEmpty)
        #expect(store.nextSequence == 201)
        #expect(try readAll(store) == written)
        #expect(try readAll(store, after: 150) == Array(written[150...]))
        #expect(try readAll(store, after: 200).isEmpty)
        #expect(directory.segmentFiles() == ["00000000000000000001.log"])
    }

    @Test func emptyPayloadsAndTheLargestPayloadRoundTrip() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path)
        let largest = (0..<LogRecord.maximumPayloadSize).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try store.append(type: .start, time: 0, payload: [])
        try store.append(type: .checkpoint, time: 0, payload: largest)
        #expect(throws: LogStoreError.payloadTooLarge(largest.count + 1)) {
            try store.append(type: .checkpoint, time: 0, payload: largest + [0])
        }
        let records = try readAll(store)
        #expect(records.map(\.record.payload) == [[], largest])
        #expect(store.nextSequence == 3)
    }

    @Test func rotationPutsACheckpointAtTheHeadOfEverySegment() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1024, retainBytes: 1 << 30)
        for index in 0..<100 {
            try store.append(type: .event, time: Int64(index), payload: [UInt8](repeating: UInt8(index), count: 60), headOfSegment: checkpointHead)
        }
        let records = try readAll(store)
        let byFirst = Dictionary(uniqueKeysWithValues: records.map { ($0.sequence, $0) })
        let files = directory.segmentFiles()
        #expect(files.count > 5)
        #expect(files.count == store.segmentCountOnDisk)
        for (index, name) in files.enumerated() {
            let first = try #require(LogStore.sequence(fromFileName: name))
            #expect(name == LogStore.segmentFileName(first))
            #expect(directory.size(name) <= 1024)
            if index == 0 { continue }
            #expect(byFirst[first]?.record.type == LogRecordType.checkpoint.rawValue)
            #expect(byFirst[first]?.flags == .moreFollow)
            #expect(byFirst[first + 1]?.flags == .continuation)
        }
        #expect(store.lastCheckpointSequence == store.activeSegmentFirstSequence)
        #expect(records.filter { $0.record.type == LogRecordType.event.rawValue }.count == 100)
    }

    @Test func sequenceNumbersContinueAcrossSegmentsAndReopens() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for round in 0..<3 {
            var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 700, retainBytes: 1 << 30)
            for index in 0..<40 { try store.append(type: .fix, time: Int64(round * 100 + index), payload: [UInt8](repeating: 9, count: 30)) }
        }
        let scan = try LogStore.scan(directory: directory.path)
        #expect(scan.corruptions.isEmpty)
        #expect(scan.records == 120)
        #expect(scan.segments.first?.firstSequence == 1)
        for (earlier, later) in zip(scan.segments, scan.segments.dropFirst()) {
            #expect(later.firstSequence == earlier.nextSequence)
        }
        let store = try LogStore.open(directory: directory.path)
        #expect(try readAll(store).map(\.sequence) == Array(1...120))
        #expect(try readAll(store).map(\.record.time) == (0..<3).flatMap { round in (0..<40).map { Int64(round * 100 + $0) } })
    }

    @Test func retentionDeletesOldSegmentsButKeepsTheNewestCheckpoint() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1024, retainBytes: 4096)
        for index in 0..<500 {
            try store.append(type: .event, time: Int64(index), payload: [UInt8](repeating: 1, count: 50), headOfSegment: checkpointHead)
            let onDisk = directory.segmentFiles().reduce(0) { $0 + directory.size($1) }
            #expect(onDisk == Int(store.totalBytes))
            #expect(onDisk <= 4096 + 1024)
        }
        #expect(store.retentionBlocked == false)
        let newest = store.lastCheckpointSequence
        let checkpoint = try #require(newest)
        let oldest = try #require(LogStore.sequence(fromFileName: directory.segmentFiles()[0]))
        #expect(oldest > 1)
        #expect(oldest <= checkpoint)
        // Replay from the checkpoint has everything from there on.
        let replay = try readAll(store, after: checkpoint - 1)
        #expect(replay.first?.sequence == checkpoint)
        #expect(replay.last?.sequence == store.nextSequence - 1)
        #expect(replay.count == Int(store.nextSequence - checkpoint))
        // And a reopen agrees.
        _ = consume store
        let reopened = try LogStore.open(directory: directory.path, segmentSizeBytes: 1024, retainBytes: 4096)
        #expect(reopened.recovery.isEmpty)
        #expect(reopened.lastCheckpointSequence == checkpoint)
    }

    @Test func retentionNeverDeletesTheSegmentHoldingTheNewestCheckpoint() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 512, retainBytes: 1024)
        // No checkpoint at all: nothing may be deleted.
        for index in 0..<40 { try store.append(type: .event, time: Int64(index), payload: [UInt8](repeating: 2, count: 40)) }
        #expect(store.retentionBlocked == true)
        #expect(directory.segmentFiles().first == "00000000000000000001.log")
        // One checkpoint, then more events without head checkpoints: only what precedes the
        // checkpoint's segment goes.
        let checkpoint = try store.append(type: .checkpoint, time: 0, payload: [5])
        let holder = store.activeSegmentFirstSequence
        for index in 0..<40 { try store.append(type: .event, time: Int64(index), payload: [UInt8](repeating: 3, count: 40)) }
        #expect(store.lastCheckpointSequence == checkpoint)
        #expect(store.retentionBlocked == true)
        #expect(directory.segmentFiles().first == LogStore.segmentFileName(holder))
        #expect(try readAll(store, after: checkpoint - 1).count == 41)
    }

    @Test func anIncompleteCheckpointGroupDoesNotCount() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path)
        let complete = try store.append(type: .checkpoint, time: 0, payload: [1])
        try store.append(type: .checkpoint, time: 0, payload: [2], flags: .moreFollow)
        #expect(store.lastCheckpointSequence == complete)
        _ = consume store
        let reopened = try LogStore.open(directory: directory.path)
        #expect(reopened.lastCheckpointSequence == complete)
        #expect(reopened.checkpoints.open == 2)
    }

    /// The test the issue asks for: the active segment's tail is truncated and bit-flipped at
    /// random offsets, 1,000 times. After every reopen, every record read back is one that was
    /// written (same sequence, type, time and payload), exactly the records wholly before the
    /// first damaged byte survive, and the store takes new appends.
    @Test func tornAndCorruptTailsAreCutAndNothingCorruptIsEverAccepted() throws {
        let template = try TemporaryDirectory()
        defer { template.remove() }
        var random = SplitMix64(state: 2024)
        var written: [UInt64: WrittenRecord] = [:]
        var recordEnds: [Int] = [] // end offsets of the records in the last segment
        do {
            var store = try LogStore.open(directory: template.path, segmentSizeBytes: 2048, retainBytes: 1 << 30)
            for index in 0..<60 {
                let body = payload(index, &random, maximum: 90)
                let sequence = try store.append(type: .event, time: Int64(index), payload: body, headOfSegment: checkpointHead)
                written[sequence] = WrittenRecord(type: LogRecordType.event.rawValue, time: Int64(index), payload: body)
            }
            try readAll(store).forEach { written[$0.sequence] = $0.record }
        }
        let files = template.segmentFiles()
        #expect(files.count >= 3)
        let last = try #require(files.last)
        let lastFirst = try #require(LogStore.sequence(fromFileName: last))
        let original = template.bytes(last)
        var offset = 0
        var sequence = lastFirst
        while offset < original.count {
            offset += 32 + (written[sequence]?.payload.count ?? 0)
            recordEnds.append(offset)
            sequence += 1
        }
        #expect(offset == original.count)
        let recordsBeforeLast = Int(lastFirst - 1)

        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for name in files.dropLast() { directory.write(name, template.bytes(name)) }
        var acceptedTotal = 0
        var cutTotal = 0
        for round in 0..<1000 {
            var damaged = original
            var firstBad = damaged.count
            switch round % 4 {
            case 0: // torn: cut anywhere
                let length = random.below(damaged.count + 1)
                damaged.removeLast(damaged.count - length)
                firstBad = length
            case 1: // one flipped bit
                let bit = random.below(damaged.count * 8)
                damaged[bit / 8] ^= 1 << UInt8(bit % 8)
                firstBad = bit / 8
            case 2: // a few damaged bytes, then cut
                for _ in 0..<(1 + random.below(3)) {
                    let index = random.below(damaged.count)
                    damaged[index] ^= UInt8(1 + random.below(255))
                    firstBad = min(firstBad, index)
                }
                let length = random.below(damaged.count + 1)
                damaged.removeLast(damaged.count - length)
                firstBad = min(firstBad, length)
            default: // unwritten space or garbage after the last record, as after a power cut
                let extra = random.below(2) == 0 ? [UInt8](repeating: 0, count: 1 + random.below(300))
                                                 : (0..<(1 + random.below(300))).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                damaged += extra
            }
            directory.write(last, damaged)
            let survivors = recordEnds.filter { $0 <= firstBad }.count
            let keptBytes = survivors == 0 ? 0 : recordEnds[survivors - 1]

            var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1 << 20, retainBytes: 1 << 30)
            let records = try readAll(store)
            for record in records {
                #expect(written[record.sequence] == record.record, "round \(round): sequence \(record.sequence) is not what was written")
            }
            #expect(records.map(\.sequence) == Array(1...UInt64(recordsBeforeLast + survivors)), "round \(round)")
            if damaged.count != keptBytes {
                #expect(store.recovery.count == 1, "round \(round)")
                #expect(store.recovery.first?.truncated == true)
                #expect(store.recovery.first?.offset == Int64(keptBytes))
                #expect(store.recovery.first?.length == Int64(damaged.count - keptBytes))
                cutTotal += 1
            } else {
                #expect(store.recovery.isEmpty, "round \(round)")
            }
            #expect(directory.size(last) == keptBytes)
            // The store goes on from where the good records end.
            let next = try store.append(type: .stop, time: -1, payload: [0xEE])
            #expect(next == UInt64(recordsBeforeLast + survivors + 1))
            acceptedTotal += records.count
            _ = consume store
            let again = try LogStore.scan(directory: directory.path)
            #expect(again.corruptions.isEmpty, "round \(round): the log is not clean after recovery and one append")
            #expect(again.records == recordsBeforeLast + survivors + 1)
        }
        #expect(cutTotal > 900)
        #expect(acceptedTotal > 1000)
    }

    @Test func corruptionInAnOlderSegmentIsReportedAndSkippedNotTruncated() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        do {
            var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1024, retainBytes: 1 << 30)
            for index in 0..<60 { try store.append(type: .event, time: Int64(index), payload: [UInt8](repeating: UInt8(index), count: 68)) }
        }
        let files = directory.segmentFiles()
        #expect(files.count >= 4)
        // Records are 100 bytes: damage the payload of the third record of the second segment.
        let victim = files[1]
        let victimFirst = try #require(LogStore.sequence(fromFileName: victim))
        var bytes = directory.bytes(victim)
        let size = bytes.count
        bytes[250] ^= 0x10
        directory.write(victim, bytes)

        let scan = try LogStore.scan(directory: directory.path)
        #expect(scan.corruptions == [LogCorruption(segment: victimFirst, offset: 200, length: Int64(size - 200), reason: .recordChecksum,
                                                   expectedSequence: victimFirst + 2, truncated: false)])
        let store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1024, retainBytes: 1 << 30)
        #expect(store.recovery == scan.corruptions)
        #expect(directory.size(victim) == size) // left on disk for inspection
        let sequences = try readAll(store).map(\.sequence)
        let lost = Set(Int(victimFirst + 2)..<Int(victimFirst + UInt64(size / 100)))
        #expect(sequences.map { Int($0) } == (1...60).filter { !lost.contains($0) })
    }

    @Test func aMissingMiddleSegmentIsReportedAsAGap() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        do {
            var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 500, retainBytes: 1 << 30)
            for index in 0..<30 { try store.append(type: .event, time: Int64(index), payload: [UInt8](repeating: 1, count: 68)) }
        }
        let files = directory.segmentFiles()
        try FileManager.default.removeItem(atPath: directory.file(files[1]))
        let scan = try LogStore.scan(directory: directory.path)
        let second = try #require(LogStore.sequence(fromFileName: files[1]))
        let third = try #require(LogStore.sequence(fromFileName: files[2]))
        #expect(scan.corruptions == [LogCorruption(segment: third, offset: 0, length: 0, reason: .sequenceGap,
                                                   expectedSequence: second, truncated: false)])
    }

    /// A last segment whose name repeats sequence numbers already read (a file copied in by hand):
    /// skipped whole, never truncated, and appends continue in a new segment after it.
    @Test func anOverlappingLastSegmentIsSkippedAndANewOneStarted() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        do {
            var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 1000, retainBytes: 1 << 30)
            for index in 0..<20 { try store.append(type: .event, time: Int64(index), payload: [UInt8](repeating: 1, count: 68)) }
        }
        #expect(directory.segmentFiles() == ["00000000000000000001.log", "00000000000000000011.log"])
        let copied = directory.bytes("00000000000000000001.log")
        directory.write("00000000000000000015.log", copied)
        var store = try LogStore.open(directory: directory.path)
        #expect(store.recovery == [LogCorruption(segment: 15, offset: 0, length: Int64(copied.count), reason: .outOfSequence,
                                                 expectedSequence: 21, truncated: false)])
        #expect(directory.size("00000000000000000015.log") == copied.count)
        #expect(try store.append(type: .event, time: 0, payload: [1]) == 21)
        #expect(directory.segmentFiles().last == "00000000000000000021.log")
        #expect(try readAll(store).map(\.sequence) == Array(1...21))
    }

    /// With retention blocked (no checkpoint) the segment table eventually fills: rotation stops
    /// and the active segment grows, counted, instead of failing or allocating.
    @Test func aFullSegmentTableDefersRotation() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 100, retainBytes: 0)
        for index in 0..<80 { try store.append(type: .event, time: Int64(index), payload: [UInt8](repeating: 1, count: 68)) }
        #expect(store.segmentCountOnDisk == 65)
        #expect(store.rotationsDeferred == 15)
        #expect(store.retentionBlocked == true)
        #expect(try readAll(store).count == 80)
    }

    @Test func zeroFilledTailAfterAPowerCutIsCut() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        do {
            var store = try LogStore.open(directory: directory.path)
            for index in 0..<5 { try store.append(type: .event, time: Int64(index), payload: [1, 2, 3]) }
        }
        let name = "00000000000000000001.log"
        directory.write(name, directory.bytes(name) + [UInt8](repeating: 0, count: 4096))
        let store = try LogStore.open(directory: directory.path)
        #expect(store.recovery == [LogCorruption(segment: 1, offset: 175, length: 4096, reason: .zeroFill, expectedSequence: 6, truncated: true)])
        #expect(directory.size(name) == 175)
    }

    @Test func segmentFilesAre0640AndOtherFilesAreIgnored() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        directory.write("notes.txt", Array("not a segment".utf8))
        directory.write("0001.log", Array("not a segment name".utf8))
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 200, retainBytes: 1 << 30)
        for index in 0..<10 { try store.append(type: .event, time: Int64(index), payload: [UInt8](repeating: 1, count: 60)) }
        let segments = directory.segmentFiles().filter { LogStore.sequence(fromFileName: $0) != nil }
        #expect(segments.count > 2)
        for name in segments {
            let attributes = try FileManager.default.attributesOfItem(atPath: directory.file(name))
            #expect((attributes[.posixPermissions] as? Int) == 0o640, "\(name)")
        }
        #expect(try LogStore.scan(directory: directory.path).corruptions.isEmpty)
    }

    @Test func aSecondWriterIsRefused() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let first = try LogStore.open(directory: directory.path)
        #expect(throws: LogStoreError.locked) { _ = try LogStore.open(directory: directory.path) }
        _ = consume first
        _ = try LogStore.open(directory: directory.path)
    }

    @Test func aMissingParentIsATypedError() throws {
        #expect(throws: LogStoreError.system(.createDirectory, .notFound)) {
            _ = try LogStore.open(directory: "/nonexistent-locus-test/a/b")
        }
        #expect(throws: LogStoreError.system(.listDirectory, .notFound)) {
            _ = try LogStore.scan(directory: "/nonexistent-locus-test/a/b")
        }
    }
}

/// Failures injected through the store's system-call seam.
@Suite struct LogStoreFailureTests {
    /// The disk fills in the middle of a record: part of it reaches the file, then ENOSPC.
    @Test func fullDiskLeavesNoPartialRecord() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path)
        for index in 0..<3 { try store.append(type: .event, time: Int64(index), payload: [UInt8](repeating: 7, count: 50)) }
        let before = directory.size("00000000000000000001.log")
        var calls = 0
        store.systemCalls.write = { descriptor, bytes, count in
            calls += 1
            if calls == 1 { return locus_write_for_tests(descriptor, bytes, count / 2) }
            return -28 // ENOSPC
        }
        #expect(throws: LogStoreError.noSpace) {
            try store.append(type: .event, time: 9, payload: [UInt8](repeating: 8, count: 50))
        }
        #expect(calls == 2)
        #expect(directory.size("00000000000000000001.log") == before)
        #expect(store.nextSequence == 4)
        // Space comes back: the next record gets the sequence number the failed one would have had.
        store.systemCalls = LogSystemCalls()
        #expect(try store.append(type: .event, time: 10, payload: [1]) == 4)
        _ = consume store
        let reopened = try LogStore.open(directory: directory.path)
        #expect(reopened.recovery.isEmpty)
        #expect(try readAll(reopened).map(\.record.time) == [0, 1, 2, 10])
    }

    @Test func fullDiskWhileWritingTheHeadUndoesTheRotation() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, segmentSizeBytes: 300, retainBytes: 1 << 30)
        for index in 0..<2 { try store.append(type: .event, time: Int64(index), payload: [UInt8](repeating: 7, count: 100)) }
        #expect(directory.segmentFiles().count == 1)
        var calls = 0
        store.systemCalls.write = { descriptor, bytes, count in
            calls += 1
            return calls == 2 ? -28 : locus_write_for_tests(descriptor, bytes, count) // the head's second record fails
        }
        #expect(throws: LogStoreError.noSpace) {
            try store.append(type: .event, time: 2, payload: [UInt8](repeating: 7, count: 100), headOfSegment: checkpointHead)
        }
        #expect(directory.segmentFiles() == ["00000000000000000001.log"])
        #expect(store.nextSequence == 3)
        #expect(store.lastCheckpointSequence == nil)
        store.systemCalls = LogSystemCalls()
        #expect(try store.append(type: .event, time: 2, payload: [UInt8](repeating: 7, count: 100), headOfSegment: checkpointHead) == 5)
        #expect(directory.segmentFiles() == ["00000000000000000001.log", "00000000000000000003.log"])
        #expect(store.lastCheckpointSequence == 3)
        #expect(try readAll(store).map(\.sequence) == [1, 2, 3, 4, 5])
    }

    @Test func failedSyncMakesTheStoreRefuseMoreUntilReopened() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path)
        store.systemCalls.dataSync = { _ in -5 } // EIO
        #expect(throws: LogStoreError.system(.sync, .ioError)) { try store.append(type: .event, time: 0, payload: [1]) }
        #expect(throws: LogStoreError.unusable) { try store.append(type: .event, time: 1, payload: [2]) }
        _ = consume store
        // The record whose sync failed was reported as not logged, and it is not in the log: the
        // caller appends it again and the log holds it once (the page cache kept its bytes).
        var reopened = try LogStore.open(directory: directory.path)
        #expect(reopened.nextSequence == 1)
        #expect(try reopened.append(type: .event, time: 2, payload: [3]) == 1)
    }

    @Test func reopeningKeepsTheLockAndCutsTheRecordWhoseSyncFailed() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path)
        try store.append(type: .event, time: 0, payload: [1])
        store.systemCalls.dataSync = { _ in -5 } // EIO
        #expect(throws: LogStoreError.system(.sync, .ioError)) { try store.append(type: .event, time: 1, payload: [2]) }
        // In the same process, while the failed store still exists: no wait for its own lock.
        var reopened = try store.reopened()
        _ = consume store
        #expect(reopened.nextSequence == 2)
        #expect(throws: LogStoreError.locked) { _ = try LogStore.open(directory: directory.path) }
        #expect(try reopened.append(type: .event, time: 2, payload: [3]) == 2)
    }

    @Test func intervalSyncWaitsForTheLoopAndIsBounded() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var store = try LogStore.open(directory: directory.path, sync: .interval(milliseconds: 100))
        var syncs = 0
        store.systemCalls.dataSync = { descriptor in
            syncs += 1
            return locus_fdatasync_for_tests(descriptor)
        }
        #expect(store.unsyncedSinceNs == nil)
        #expect(try !store.syncIfDue(now: MonotonicClock.now()))
        try store.append(type: .event, time: 0, payload: [1])
        let unsynced = store.unsyncedSinceNs
        let since = try #require(unsynced)
        try store.append(type: .event, time: 1, payload: [2])
        #expect(store.unsyncedSinceNs == since) // the oldest unsynced record sets the deadline
        #expect(store.nextSyncDueNs == since + 100_000_000)
        #expect(syncs == 0)
        #expect(try !store.syncIfDue(now: since + 99_999_999))
        #expect(try store.syncIfDue(now: since + 100_000_000))
        #expect(syncs == 1)
        #expect(store.unsyncedSinceNs == nil)
        #expect(store.nextSyncDueNs == nil)

        var everyRecord = try LogStore.open(directory: directory.path + "-every", sync: .everyRecord)
        defer { try? FileManager.default.removeItem(atPath: directory.path + "-every") }
        var everySyncs = 0
        everyRecord.systemCalls.dataSync = { descriptor in
            everySyncs += 1
            return locus_fdatasync_for_tests(descriptor)
        }
        for index in 0..<3 { try everyRecord.append(type: .event, time: Int64(index), payload: [1]) }
        #expect(everySyncs == 3)
        #expect(everyRecord.unsyncedSinceNs == nil)
    }
}

// The real calls, for seams that pass some calls through.
func locus_write_for_tests(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    Glibc.write(descriptor, bytes, count)
}

func locus_fdatasync_for_tests(_ descriptor: Int32) -> Int32 {
    Glibc.fdatasync(descriptor) == 0 ? 0 : -errno
}
