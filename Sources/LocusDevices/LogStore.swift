import CLocus
import LocusCore

// The log on disk: segment files of LogRecord records in one directory.
//
//   DIR/00000000000000000001.log     records 1 ..< 4097
//   DIR/00000000000000004097.log     records 4097 ..< 9100       (the active segment: appended to)
//   DIR/log.lock                     flock'ed by the one process that appends
//
// A segment is named by the sequence number of its first record (20 digits, so names sort as
// numbers). Every record in it has the next sequence number; the active segment is the last one.
//
// Recovery (open): every segment is read and every record validated. The active segment's torn or
// corrupt tail is cut off (ftruncate + fsync) and reported; corruption inside an older segment is
// reported and the rest of that segment skipped, never accepted. A reader re-validates every record
// it hands out.
//
// Rotation: before a record would take the active segment past `segmentSizeBytes`, a new segment
// starts and the caller's `headOfSegment` writes the engine's checkpoint at its head, so that
// everything needed to rebuild state lies at or after the newest checkpoint.
//
// Retention rule: while the segment files total more than `retainBytes`, the oldest segment is
// deleted, except that (1) the active segment is never deleted, and (2) the segment holding the
// first record of the newest complete checkpoint is never deleted, nor anything after it. Replay
// starts at that record, so deleting only what lies before it loses no state. With no complete
// checkpoint in the log nothing is deleted (`retentionBlocked` says so): the engine must write
// checkpoints for space to be reclaimed. A reader that has not caught up (the uplink, whose
// `retentionFloor` says where it is) does not hold retention back: the disk comes first, and the
// records deleted before it read them are counted (`undeliveredDeleted`).
//
// Memory: every buffer (one record, one segment path, the segment table) is allocated by `open`;
// `append`, rotation, retention and sync allocate nothing. The functions doing that work carry
// `@_noAllocation`; their calls into the C shim are wrapped in `_unsafePerformance`, because the
// compiler cannot see across the C boundary (each is one system call, which allocates nothing).
// `append` itself is not annotated: it takes the caller's `headOfSegment` closure, and an
// annotation would forbid passing a closure the compiler cannot see (one kept in a property).

/// When appended records reach the disk.
public enum LogSyncPolicy: Equatable, Sendable {
    /// fdatasync before `append` returns: an acknowledged record survives a power cut.
    case everyRecord
    /// `append` only writes; the caller's loop calls `syncIfDue(now:)`, so a record waits at most
    /// about this long (plus one loop turn) before it is synced.
    case interval(milliseconds: Int64)
}

/// What a log operation was doing when a system call failed.
public enum LogStoreOperation: UInt8, Sendable, CustomStringConvertible {
    case createDirectory, listDirectory, lock, open, read, write, sync, truncate, createSegment, deleteSegment

    public var description: String {
        switch self {
        case .createDirectory: return "create the log directory"
        case .listDirectory: return "list the log directory"
        case .lock: return "lock the log"
        case .open: return "open a log segment"
        case .read: return "read a log segment"
        case .write: return "write a log record"
        case .sync: return "sync the log"
        case .truncate: return "truncate a log segment"
        case .createSegment: return "create a log segment"
        case .deleteSegment: return "delete a log segment"
        }
    }
}

public enum LogStoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file system is full (ENOSPC or EDQUOT). Nothing of the record was kept: the segment is
    /// as it was before the call, and a later append may succeed.
    case noSpace
    case payloadTooLarge(Int)
    /// Another process holds the log's lock (an agent is running on this state directory).
    case locked
    case system(LogStoreOperation, SystemError)
    /// An earlier failure (a failed fsync, or a failed roll-back after a failed write) left the
    /// segment's on-disk state unknown. Nothing more is appended; reopening the store rescans the
    /// log and restores a consistent one.
    case unusable

    public var description: String {
        switch self {
        case .noSpace: return "no space left on the log's file system"
        case .payloadTooLarge(let size): return "log record payload of \(size) bytes exceeds \(LogRecord.maximumPayloadSize)"
        case .locked: return "the log is in use by another process"
        case .system(let operation, let error): return "cannot \(operation): \(error)"
        case .unusable: return "the log failed earlier and must be reopened"
        }
    }
}

/// A region of the log that was not accepted.
public struct LogCorruption: Equatable, Sendable {
    /// The segment's first sequence number (its file name).
    public var segment: UInt64
    /// Byte offset in the segment file where the bad region starts, and its length to the end of
    /// the file (0 for `.sequenceGap`).
    public var offset: Int64
    public var length: Int64
    public var reason: LogRecordRejection
    /// The sequence number expected at `offset` (for a gap: the first missing one).
    public var expectedSequence: UInt64
    /// True when `open` cut the region off the active segment; false when it was left on disk and
    /// skipped (older segments, and every scan that only reads).
    public var truncated: Bool

    public var fileName: String { LogStore.segmentFileName(segment) }
}

/// One segment file as a scan found it.
public struct LogSegmentSummary: Equatable, Sendable {
    public var firstSequence: UInt64
    /// One past the last valid record (`firstSequence` when it holds none).
    public var nextSequence: UInt64
    public var records: Int
    /// Bytes from the start of the file through the last valid record.
    public var validBytes: Int64
    public var fileBytes: Int64

    public var fileName: String { LogStore.segmentFileName(firstSequence) }
}

/// The result of reading a whole log directory.
public struct LogScan: Sendable {
    public var segments: [LogSegmentSummary] = []
    public var corruptions: [LogCorruption] = []
    public var records = 0
    /// Sum of the segment files' sizes.
    public var bytes: Int64 = 0
    /// The sequence number the next appended record gets.
    public var nextSequence: UInt64 = 1
    public var checkpoints = LogCheckpointTracker()

    public var lastCheckpointSequence: UInt64? { checkpoints.lastComplete }
}

/// The system calls that change the log, as a seam: tests replace them to inject ENOSPC, short
/// writes and fsync failures (swift-system's mock-syscall idea).
struct LogSystemCalls {
    var write: (Int32, UnsafeRawPointer, Int) -> Int = { descriptor, bytes, count in locus_write(descriptor, bytes, count) }
    var dataSync: (Int32) -> Int32 = { descriptor in locus_fdatasync(descriptor) }
}

/// The append-only log of one state directory. One process appends (it holds `log.lock`); readers
/// of a live log use `LogStore.scan`, and a reader in that process that follows the log as it
/// grows uses a `LogTail`.
public struct LogStore: ~Copyable {
    public let directory: String
    public let segmentSizeBytes: Int64
    public let retainBytes: Int64
    public let syncPolicy: LogSyncPolicy

    /// What `open` found and did: regions truncated from the active segment or skipped.
    public let recovery: [LogCorruption]
    /// The sequence number the next record gets.
    public private(set) var nextSequence: UInt64
    /// Sum of the segment files' sizes.
    public private(set) var totalBytes: Int64
    public private(set) var checkpoints: LogCheckpointTracker
    /// Monotonic time (ns) of the oldest record written but not yet synced; nil when all are
    /// synced. The agent bounds it through `syncIfDue(now:)`.
    public private(set) var unsyncedSinceNs: Int64?
    /// The newest record a sync made durable (all of them at every-record sync; under an interval
    /// policy the ones before the last sync). A power cut can take only records after it, and a
    /// sequence number after it may be given again to another record: what leaves the gateway
    /// with its sequence number (the uplink) goes only up to here.
    public private(set) var durableSequence: UInt64
    /// Rotations not done because the segment table was full (the active segment grew instead).
    public private(set) var rotationsDeferred = 0
    /// True while the files exceed `retainBytes` and the retention rule forbids deleting more.
    public private(set) var retentionBlocked = false
    /// The first sequence number a reader (the uplink) has not delivered; 0 while no reader needs
    /// protecting. Retention still keeps the log within `retainBytes` (the disk promise comes
    /// first), but counts what it deletes at or past the floor, so the loss is reported, not silent.
    public var retentionFloor: UInt64 = 0
    /// Records at or past `retentionFloor` that retention deleted before they were delivered, and
    /// the segments that held them.
    public private(set) var undeliveredDeleted: UInt64 = 0
    public private(set) var undeliveredDeletedSegments = 0

    var systemCalls = LogSystemCalls()

    private let directoryDescriptor: Int32
    private let lockDescriptor: Int32
    private var activeDescriptor: Int32
    private var failed = false
    private var writingHead = false
    /// One encoded record: `append` writes it with a single write(2).
    private let recordBuffer: UnsafeMutableRawBufferPointer
    /// "DIR/" followed by a segment name and a NUL; the name part is rewritten in place.
    let pathBuffer: UnsafeMutableBufferPointer<CChar>
    private let pathNameOffset: Int
    /// Segment table, oldest first; the last entry is the active segment.
    let segments: UnsafeMutableBufferPointer<Segment>
    private(set) var segmentCount: Int

    struct Segment {
        var firstSequence: UInt64
        var nextSequence: UInt64
        var validBytes: Int64
        var fileBytes: Int64
    }

    public static let lockFileName = "log.lock"
    /// How long `open` waits for another holder of the lock to let go.
    public static let lockWaitMs = 500
    static let nameDigits = 20
    static let nameSuffix: [UInt8] = Array(".log".utf8)

    /// The file name of the segment whose first record has `firstSequence`.
    public static func segmentFileName(_ firstSequence: UInt64) -> String {
        let digits = "\(firstSequence)"
        var name = ""
        for _ in 0..<max(0, nameDigits - digits.utf8.count) { name += "0" }
        return name + digits + ".log"
    }

    /// The first sequence number a segment file name stands for, or nil for other files.
    public static func sequence(fromFileName name: String) -> UInt64? {
        let bytes = Array(name.utf8)
        guard bytes.count == nameDigits + nameSuffix.count, Array(bytes[nameDigits...]) == nameSuffix else { return nil }
        var value: UInt64 = 0
        for byte in bytes[0..<nameDigits] {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return nil }
            let (times, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflowA && !overflowB else { return nil }
            value = sum
        }
        return value
    }

    public var lastCheckpointSequence: UInt64? { checkpoints.lastComplete }
    public var segmentCountOnDisk: Int { segmentCount }
    /// Bytes in the active segment.
    public var activeSegmentBytes: Int64 { segments[segmentCount - 1].fileBytes }
    public var activeSegmentFirstSequence: UInt64 { segments[segmentCount - 1].firstSequence }
    /// The segments' first sequence numbers, oldest first.
    public var segmentFirstSequences: [UInt64] { (0..<segmentCount).map { segments[$0].firstSequence } }

    /// True after a failure that only a reopen clears (`LogStoreError.unusable`).
    public var isFailed: Bool { failed }

    /// The monotonic time at which `syncIfDue` will sync, or nil when nothing waits (or the store
    /// failed: its owner's retry reopens it).
    public var nextSyncDueNs: Int64? {
        guard !failed, let since = unsyncedSinceNs, case .interval(let milliseconds) = syncPolicy else { return nil }
        return since + milliseconds * 1_000_000
    }

    deinit {
        _ = locus_close(activeDescriptor)
        _ = locus_close(directoryDescriptor)
        _ = locus_close(lockDescriptor) // releases the flock
        recordBuffer.deallocate()
        pathBuffer.deallocate()
        segments.deallocate()
    }
}

// MARK: - Opening and recovery

extension LogStore {
    /// Opens (creating it if needed) the log in `directory`: takes the lock, scans and validates
    /// every segment, cuts a torn or corrupt tail off the active segment, applies retention.
    public static func open(directory: String, segmentSizeBytes: Int64 = 8 << 20, retainBytes: Int64 = 512 << 20,
                            sync: LogSyncPolicy = .everyRecord) throws(LogStoreError) -> LogStore {
        let made = locus_mkdir(directory, 0o750)
        if made < 0 && SystemError(negated: made) != .exists { throw .system(.createDirectory, SystemError(negated: made)) }
        let lockPath = directory + "/" + lockFileName
        let lockDescriptor = locus_open(lockPath, Int32(LOCUS_O_READ | LOCUS_O_WRITE | LOCUS_O_CREATE), 0o640)
        if lockDescriptor < 0 { throw .system(.lock, SystemError(negated: lockDescriptor)) }
        // A lock can outlive its holder briefly: a previous agent still exiting, or a child being
        // spawned (fork to exec) that shares the descriptor for a moment. Retry for up to
        // `lockWaitMs` before calling the log busy.
        var locked = locus_lock_exclusive(lockDescriptor)
        var waitedMs = 0
        while locked < 0 && SystemError(negated: locked) == .wouldBlock && waitedMs < lockWaitMs {
            _ = locus_poll(nil, nil, nil, 0, 10)
            waitedMs += 10
            locked = locus_lock_exclusive(lockDescriptor)
        }
        if locked < 0 {
            _ = locus_close(lockDescriptor)
            throw SystemError(negated: locked) == .wouldBlock ? .locked : .system(.lock, SystemError(negated: locked))
        }
        // The store owns the lock from here: it closes it when it fails to open, or in deinit.
        return try LogStore(directory: directory, lockDescriptor: lockDescriptor, segmentSizeBytes: segmentSizeBytes,
                            retainBytes: retainBytes, sync: sync)
    }

    /// The log this store has open, opened again (after a failed sync: the segments rescanned and
    /// what did not make it cut). The lock passes from this store to the new one without being
    /// let go: another process cannot take the log in between, and this one does not wait for
    /// its own lock (a second flock on the lock file would).
    public func reopened() throws(LogStoreError) -> LogStore {
        let lock = locus_dup(lockDescriptor)
        if lock < 0 { throw .system(.lock, SystemError(negated: lock)) }
        return try LogStore(directory: directory, lockDescriptor: lock, segmentSizeBytes: segmentSizeBytes, retainBytes: retainBytes,
                            sync: syncPolicy)
    }

    private init(directory: String, lockDescriptor: Int32, segmentSizeBytes: Int64, retainBytes: Int64,
                 sync: LogSyncPolicy) throws(LogStoreError) {
        // Everything that can fail happens before `self` is initialised; after that nothing throws.
        var scan = LogScan()
        var active: Int32 = -1
        var syncFailed = false
        let directoryDescriptor = locus_open(directory, Int32(LOCUS_O_READ | LOCUS_O_DIRECTORY), 0)
        do throws(LogStoreError) {
            if directoryDescriptor < 0 { throw LogStoreError.system(.open, SystemError(negated: directoryDescriptor)) }
            scan = try LogStore.scan(directory: directory)
            active = try LogStore.recoverActiveSegment(directory: directory, scan: &scan, syncFailed: &syncFailed)
            if active < 0 {
                // A new log, or one whose last segment cannot be continued: start a segment.
                let path = directory + "/" + LogStore.segmentFileName(scan.nextSequence)
                let created = path.withCString { path in
                    Result { () throws(LogStoreError) in try LogStore.createSegmentFile(path, directoryDescriptor: directoryDescriptor) }
                }
                active = try created.get()
                scan.segments.append(LogSegmentSummary(firstSequence: scan.nextSequence, nextSequence: scan.nextSequence,
                                                       records: 0, validBytes: 0, fileBytes: 0))
            }
        } catch {
            if directoryDescriptor >= 0 { _ = locus_close(directoryDescriptor) }
            _ = locus_close(lockDescriptor)
            throw error
        }

        self.directory = directory
        self.segmentSizeBytes = max(1, segmentSizeBytes)
        self.retainBytes = max(0, retainBytes)
        syncPolicy = sync
        self.lockDescriptor = lockDescriptor
        self.directoryDescriptor = directoryDescriptor
        activeDescriptor = active
        failed = syncFailed
        recovery = scan.corruptions
        nextSequence = scan.nextSequence
        // What the scan found was synced by the recovery, unless that sync failed (then nothing
        // counts as durable until a reopen syncs it).
        durableSequence = syncFailed ? 0 : scan.nextSequence &- 1
        totalBytes = scan.bytes
        checkpoints = scan.checkpoints

        // Room for every segment retention may keep, twice over, plus slack for the blocked case.
        let retained = Int(min(self.retainBytes / self.segmentSizeBytes, 1 << 20))
        let capacity = max(scan.segments.count, retained * 2) + 64
        segments = .allocate(capacity: capacity)
        segmentCount = 0
        for summary in scan.segments {
            segments[segmentCount] = Segment(firstSequence: summary.firstSequence, nextSequence: summary.nextSequence,
                                             validBytes: summary.validBytes, fileBytes: summary.fileBytes)
            segmentCount += 1
        }
        recordBuffer = .allocate(byteCount: LogRecord.maximumRecordSize, alignment: 16)
        let prefix = Array(directory.utf8) + [UInt8(ascii: "/")]
        pathNameOffset = prefix.count
        pathBuffer = .allocate(capacity: prefix.count + LogStore.nameDigits + LogStore.nameSuffix.count + 1)
        for (index, byte) in prefix.enumerated() { pathBuffer[index] = CChar(bitPattern: byte) }
        for (index, byte) in LogStore.nameSuffix.enumerated() { pathBuffer[pathNameOffset + LogStore.nameDigits + index] = CChar(bitPattern: byte) }
        pathBuffer[pathBuffer.count - 1] = 0
        applyRetention()
    }

    /// Cuts the active (last) segment back to its last valid record and opens it for appending.
    /// Returns -1 when a new segment must be started instead (no segments, or a last segment
    /// whose name overlaps the one before it and was skipped whole).
    private static func recoverActiveSegment(directory: String, scan: inout LogScan, syncFailed: inout Bool) throws(LogStoreError) -> Int32 {
        guard let last = scan.segments.last else { return -1 }
        let path = directory + "/" + last.fileName
        if let index = scan.corruptions.lastIndex(where: { $0.segment == last.firstSequence && $0.reason != .sequenceGap }) {
            if scan.corruptions[index].offset == 0 && scan.corruptions[index].reason == .outOfSequence && last.records == 0
                && last.firstSequence < scan.nextSequence {
                return -1
            }
            let descriptor = locus_open(path, Int32(LOCUS_O_WRITE), 0)
            if descriptor < 0 { throw .system(.open, SystemError(negated: descriptor)) }
            defer { _ = locus_close(descriptor) }
            let cut = locus_ftruncate(descriptor, last.validBytes)
            if cut < 0 { throw .system(.truncate, SystemError(negated: cut)) }
            // A sync that fails here leaves the store open and failed (`syncFailed`): its records
            // can be read (the agent rebuilds its records from them), nothing is appended until
            // a reopen succeeds. Throwing would leave the agent without its records.
            if locus_fsync(descriptor) < 0 { syncFailed = true }
            scan.corruptions[index].truncated = true
            scan.bytes -= last.fileBytes - last.validBytes
            scan.segments[scan.segments.count - 1].fileBytes = last.validBytes
        }
        let descriptor = locus_open(path, Int32(LOCUS_O_WRITE | LOCUS_O_APPEND), 0)
        if descriptor < 0 { throw .system(.open, SystemError(negated: descriptor)) }
        return descriptor
    }
}

// MARK: - Scanning and reading

extension LogStore {
    /// Reads every segment of the log in `directory` without changing anything (no lock: safe on a
    /// live log, whose last record may be caught half written and reported torn), validating every
    /// record and calling `visit` with each one that is accepted, in sequence order.
    public static func scan(directory: String,
                            _ visit: (LogRecordHeader, UnsafeRawBufferPointer) -> Void = { _, _ in }) throws(LogStoreError) -> LogScan {
        let names = try segmentNames(directory)
        var scan = LogScan()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: scanBufferSize, alignment: 16)
        defer { buffer.deallocate() }
        var previousNext: UInt64? = nil
        var previousClean = true
        for name in names {
            let path = directory + "/" + segmentFileName(name)
            let descriptor = locus_open(path, Int32(LOCUS_O_READ), 0)
            if descriptor < 0 { throw .system(.open, SystemError(negated: descriptor)) }
            defer { _ = locus_close(descriptor) }
            let size = locus_file_size(descriptor)
            if size < 0 { throw .system(.read, SystemError(negated: size)) }
            scan.bytes += size
            var summary = LogSegmentSummary(firstSequence: name, nextSequence: name, records: 0, validBytes: 0, fileBytes: size)
            if let expected = previousNext, name < expected {
                // Its records would repeat sequence numbers already read: none can be trusted.
                scan.corruptions.append(LogCorruption(segment: name, offset: 0, length: size, reason: .outOfSequence,
                                                      expectedSequence: expected, truncated: false))
                scan.segments.append(summary)
                scan.checkpoints.interrupt()
                previousClean = false
                continue
            }
            if let expected = previousNext, name > expected, previousClean {
                scan.corruptions.append(LogCorruption(segment: name, offset: 0, length: 0, reason: .sequenceGap,
                                                      expectedSequence: expected, truncated: false))
                scan.checkpoints.interrupt()
            }
            let result = try readSegment(descriptor, firstSequence: name, limit: size, buffer: buffer) { header, payload in
                scan.checkpoints.note(header)
                visit(header, payload)
            }
            summary.records = result.records
            summary.nextSequence = result.nextSequence
            summary.validBytes = result.validBytes
            scan.records += result.records
            scan.segments.append(summary)
            if let reason = result.rejection {
                scan.corruptions.append(LogCorruption(segment: name, offset: result.validBytes, length: size - result.validBytes,
                                                      reason: reason, expectedSequence: result.nextSequence, truncated: false))
                scan.checkpoints.interrupt()
            }
            previousClean = result.rejection == nil
            previousNext = result.nextSequence
        }
        scan.nextSequence = previousNext ?? 1
        return scan
    }

    /// Calls `body` with every record whose sequence number is greater than `afterSequence`, in
    /// order, across segments (replay from a checkpoint: `afterSequence: checkpoint - 1`; export).
    /// Records are validated again as they are read: a region that went bad since `open` is
    /// skipped to the end of its segment and returned, never handed to `body`.
    @discardableResult
    public func forEachRecord(afterSequence: UInt64,
                              _ body: (LogRecordHeader, UnsafeRawBufferPointer) -> Void) throws(LogStoreError) -> [LogCorruption] {
        var corruptions: [LogCorruption] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: LogStore.scanBufferSize, alignment: 16)
        defer { buffer.deallocate() }
        for index in 0..<segmentCount {
            let segment = segments[index]
            guard segment.validBytes > 0, segment.nextSequence &- 1 > afterSequence else { continue }
            let path = directory + "/" + LogStore.segmentFileName(segment.firstSequence)
            let descriptor = locus_open(path, Int32(LOCUS_O_READ), 0)
            if descriptor < 0 { throw .system(.open, SystemError(negated: descriptor)) }
            defer { _ = locus_close(descriptor) }
            let result = try LogStore.readSegment(descriptor, firstSequence: segment.firstSequence, limit: segment.validBytes,
                                                  buffer: buffer) { header, payload in
                if header.sequence > afterSequence { body(header, payload) }
            }
            if let reason = result.rejection {
                corruptions.append(LogCorruption(segment: segment.firstSequence, offset: result.validBytes,
                                                 length: segment.validBytes - result.validBytes, reason: reason,
                                                 expectedSequence: result.nextSequence, truncated: false))
            }
        }
        return corruptions
    }

    /// Bytes read per pread while scanning: large reads keep a 100 MB scan to a few hundred calls.
    /// At least one whole record, so a record never has to straddle more than one refill.
    static let scanBufferSize = 1 << 20

    struct SegmentReadResult {
        var records = 0
        var nextSequence: UInt64
        var validBytes: Int64 = 0
        var rejection: LogRecordRejection? = nil
    }

    /// Streams one segment's first `limit` bytes through `buffer` and validates each record in turn:
    /// intact, and carrying the next sequence number. Stops at the first record that is not.
    static func readSegment(_ descriptor: Int32, firstSequence: UInt64, limit: Int64, buffer: UnsafeMutableRawBufferPointer,
                            _ body: (LogRecordHeader, UnsafeRawBufferPointer) -> Void) throws(LogStoreError) -> SegmentReadResult {
        precondition(buffer.count >= LogRecord.maximumRecordSize, "scan buffer smaller than a record")
        var result = SegmentReadResult(nextSequence: firstSequence)
        var windowStart: Int64 = 0 // file offset of buffer[0]
        var filled = 0             // bytes of the window read so far
        var position = 0           // next record's index in the window
        var end = limit
        // Bounded: every turn either accepts a record (advancing), reads more bytes (advancing the
        // window toward `end`), or returns.
        while windowStart + Int64(position) < end {
            let window = UnsafeRawBufferPointer(rebasing: buffer[0..<filled])
            let decoding = LogRecord.decode(window, at: position)
            switch decoding {
            case .record(let header, let payload):
                guard header.sequence == result.nextSequence else {
                    result.rejection = .outOfSequence
                    return result
                }
                body(header, UnsafeRawBufferPointer(rebasing: window[payload]))
                result.records += 1
                result.nextSequence &+= 1
                position = payload.upperBound
                result.validBytes = windowStart + Int64(position)
            case .rejected(let reason):
                let unread = end - (windowStart + Int64(filled))
                guard (reason == .truncatedHeader || reason == .truncatedPayload) && unread > 0 else {
                    result.rejection = reason
                    return result
                }
                // Slide the unfinished record to the front and read on.
                let kept = filled - position
                if kept > 0 && position > 0 {
                    buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + position, byteCount: kept)
                }
                windowStart += Int64(position)
                filled = kept
                position = 0
                let want = Int(min(Int64(buffer.count - filled), unread))
                let count = locus_pread(descriptor, buffer.baseAddress! + filled, want, windowStart + Int64(filled))
                if count < 0 { throw .system(.read, SystemError(negated: count)) }
                if count == 0 { end = windowStart + Int64(filled) } // the file shrank under us
                filled += count
            }
        }
        return result
    }

    /// The first sequence numbers of the segment files in `directory`, ascending.
    static func segmentNames(_ directory: String) throws(LogStoreError) -> [UInt64] {
        var names: [UInt64] = []
        let visit: @convention(c) (UnsafePointer<CChar>?, UnsafeMutableRawPointer?) -> Void = { name, context in
            guard let name, let context else { return }
            if let sequence = LogStore.sequence(fromFileName: String(cString: name)) {
                context.assumingMemoryBound(to: [UInt64].self).pointee.append(sequence)
            }
        }
        let result = withUnsafeMutablePointer(to: &names) { pointer in
            locus_list_directory(directory, visit, UnsafeMutableRawPointer(pointer))
        }
        if result < 0 { throw .system(.listDirectory, SystemError(negated: result)) }
        names.sort()
        return names
    }
}

// MARK: - Appending

extension LogStore {
    /// Appends one record and returns its sequence number, syncing per the policy. When the record
    /// would take the active segment past `segmentSizeBytes`, a new segment starts first and
    /// `headOfSegment` is called to append the checkpoint records at its head (appends made inside
    /// it never rotate). If the head cannot be written, the new segment is removed again and the
    /// error is thrown: rotation happens whole or not at all.
    @discardableResult
    public mutating func append(type: LogRecordType, time: Int64, payload: UnsafeRawBufferPointer, flags: LogRecordFlags = LogRecordFlags(),
                                headOfSegment: (inout LogStore) throws(LogStoreError) -> Void = { _ in }) throws(LogStoreError) -> UInt64 {
        guard !failed else { throw .unusable }
        guard payload.count <= LogRecord.maximumPayloadSize else { throw .payloadTooLarge(payload.count) }
        let size = Int64(LogRecord.headerSize + payload.count)
        let active = segments[segmentCount - 1]
        if !writingHead && active.fileBytes > 0 && active.fileBytes + size > segmentSizeBytes {
            try rotate(headOfSegment: headOfSegment)
        }
        return try write(type: type, time: time, payload: payload, flags: flags)
    }

    /// The same, for a payload held in an array (start-up records, tools, tests).
    @discardableResult
    public mutating func append(type: LogRecordType, time: Int64, payload: [UInt8], flags: LogRecordFlags = LogRecordFlags(),
                                headOfSegment: (inout LogStore) throws(LogStoreError) -> Void = { _ in }) throws(LogStoreError) -> UInt64 {
        let result = payload.withUnsafeBytes { bytes in
            Result { () throws(LogStoreError) in
                try append(type: type, time: time, payload: bytes, flags: flags, headOfSegment: headOfSegment)
            }
        }
        return try result.get()
    }

    /// Encodes the record into the record buffer and writes it with one write(2) (a short write is
    /// continued, a bounded number of times). On failure the segment is cut back to where it was.
    @_noAllocation
    private mutating func write(type: LogRecordType, time: Int64, payload: UnsafeRawBufferPointer,
                                flags: LogRecordFlags) throws(LogStoreError) -> UInt64 {
        let header = LogRecordHeader(type: type, flags: flags, payloadLength: payload.count, sequence: nextSequence, time: time)
        let size: Int
        do {
            size = try LogRecord.encode(header, payload: payload, into: recordBuffer)
        } catch {
            throw .payloadTooLarge(payload.count)
        }
        // Bounded: a regular file takes a whole write unless the disk fills or a signal cuts it
        // short; a few continuations cover the latter.
        var written = 0
        var failure: SystemError? = nil
        for _ in 0..<8 where written < size && failure == nil {
            let descriptor = activeDescriptor
            let start = recordBuffer.baseAddress! + written
            let count = _unsafePerformance { systemCalls.write(descriptor, start, size - written) }
            if count < 0 { failure = SystemError(negated: count) } else { written += count }
        }
        if written < size {
            try rollBack()
            let error = failure ?? .ioError
            throw error == .noSpace || error.code == 122 /* EDQUOT */ ? .noSpace : .system(.write, error)
        }
        let index = segmentCount - 1
        segments[index].fileBytes += Int64(size)
        segments[index].validBytes += Int64(size)
        segments[index].nextSequence = header.sequence &+ 1
        totalBytes += Int64(size)
        nextSequence &+= 1
        checkpoints.note(header)
        switch syncPolicy {
        case .everyRecord:
            guard !writingHead else { break }
            do throws(LogStoreError) { try dataSync() } catch {
                // The caller is told this record is not logged and appends it again once the
                // store is reopened: it must not stay in the file, where the reopen's rescan
                // would find it (the page cache still holds it) and the log would hold it twice.
                let descriptor = activeDescriptor
                let length = segments[index].fileBytes - Int64(size)
                _ = _unsafePerformance { locus_ftruncate(descriptor, length) }
                throw error
            }
        case .interval:
            if unsyncedSinceNs == nil { unsyncedSinceNs = _unsafePerformance { locus_monotonic_ns() } }
        }
        return header.sequence
    }

    /// After a failed or partial write: cut the active segment back to its last whole record, so
    /// no part of the failed record stays in the log.
    @_noAllocation
    private mutating func rollBack() throws(LogStoreError) {
        let descriptor = activeDescriptor
        let length = segments[segmentCount - 1].fileBytes
        let result = _unsafePerformance { locus_ftruncate(descriptor, length) }
        if result < 0 {
            failed = true
            throw .unusable
        }
    }

    @_noAllocation
    private mutating func dataSync() throws(LogStoreError) {
        let descriptor = activeDescriptor
        let result = _unsafePerformance { systemCalls.dataSync(descriptor) }
        if result < 0 {
            // After a failed fsync the kernel may have dropped the dirty pages and cleared the
            // error: a retry could "succeed" over lost data. Stop; a reopen rescans the log.
            failed = true
            throw .system(.sync, SystemError(negated: result))
        }
        unsyncedSinceNs = nil
        durableSequence = nextSequence &- 1
    }

    /// Syncs the active segment now.
    public mutating func sync() throws(LogStoreError) {
        guard !failed else { throw .unusable }
        try dataSync()
    }

    /// Syncs now, whatever the policy, for a record whose caller acts only once it is durable
    /// (the newest, `size` bytes with its header). When the sync fails the record is cut from
    /// the segment, as under `.everyRecord`: its caller is told it is not logged and appends it
    /// again, and the reopen's rescan must not find it in the page cache (the log would hold it
    /// twice).
    public mutating func syncNewest(cutting size: Int64) throws(LogStoreError) {
        guard !failed else { throw .unusable }
        precondition(size >= Int64(LogRecord.headerSize) && size <= segments[segmentCount - 1].fileBytes, "the newest record lies in the active segment")
        do throws(LogStoreError) { try dataSync() } catch {
            let descriptor = activeDescriptor
            let length = segments[segmentCount - 1].fileBytes - size
            _ = _unsafePerformance { locus_ftruncate(descriptor, length) }
            throw error
        }
    }

    /// Under `.interval(ms)`: syncs when the oldest unsynced record has waited `ms` or longer.
    /// Returns true when it synced.
    @discardableResult
    public mutating func syncIfDue(now: Int64) throws(LogStoreError) -> Bool {
        guard let due = nextSyncDueNs, now >= due else { return false }
        try sync()
        return true
    }
}

// MARK: - Rotation and retention

extension LogStore {
    private mutating func rotate(headOfSegment: (inout LogStore) throws(LogStoreError) -> Void) throws(LogStoreError) {
        guard segmentCount < segments.count else {
            rotationsDeferred += 1
            return
        }
        // The old segment is complete before the new one exists: no torn tail can hide behind a
        // newer segment (recovery truncates only the last one).
        try dataSync()
        let previousDescriptor = activeDescriptor
        let savedNext = nextSequence
        let savedCheckpoints = checkpoints
        let savedTotal = totalBytes
        activeDescriptor = try createSegment(nextSequence)
        segments[segmentCount] = Segment(firstSequence: nextSequence, nextSequence: nextSequence, validBytes: 0, fileBytes: 0)
        segmentCount += 1
        writingHead = true
        do throws(LogStoreError) {
            try headOfSegment(&self)
            // The checkpoint is durable before retention deletes what it replaces.
            try dataSync()
        } catch {
            writingHead = false
            // Undo: remove the new segment and continue the old one.
            let abandoned = activeDescriptor
            _ = _unsafePerformance { locus_close(abandoned) }
            activeDescriptor = previousDescriptor
            segmentCount -= 1
            nextSequence = savedNext
            durableSequence = min(durableSequence, savedNext &- 1)
            checkpoints = savedCheckpoints
            totalBytes = savedTotal
            setSegmentPath(savedNext)
            let path = pathBuffer.baseAddress!
            let directory = directoryDescriptor
            let removed = _unsafePerformance { locus_unlink(path) }
            if removed < 0 || _unsafePerformance({ locus_fsync(directory) }) < 0 { failed = true }
            throw error
        }
        writingHead = false
        _ = _unsafePerformance { locus_close(previousDescriptor) }
        applyRetention()
    }

    /// Creates the segment file for `firstSequence` and returns its descriptor, open for appending.
    @_noAllocation
    private mutating func createSegment(_ firstSequence: UInt64) throws(LogStoreError) -> Int32 {
        setSegmentPath(firstSequence)
        return try LogStore.createSegmentFile(UnsafePointer(pathBuffer.baseAddress!), directoryDescriptor: directoryDescriptor)
    }

    /// Creates a segment file (0640, its directory entry made durable), open for appending.
    @_noAllocation
    private static func createSegmentFile(_ path: UnsafePointer<CChar>, directoryDescriptor: Int32) throws(LogStoreError) -> Int32 {
        let flags = Int32(LOCUS_O_WRITE | LOCUS_O_CREATE | LOCUS_O_EXCLUSIVE | LOCUS_O_APPEND)
        let descriptor = _unsafePerformance { locus_open(path, flags, 0o640) }
        if descriptor < 0 { throw .system(.createSegment, SystemError(negated: descriptor)) }
        // The mode passed to open is filtered by the umask; the log's mode is not up to it.
        _ = _unsafePerformance { locus_chmod(path, 0o640) }
        let synced = _unsafePerformance { locus_fsync(directoryDescriptor) }
        if synced < 0 {
            _ = _unsafePerformance { locus_close(descriptor) }
            _ = _unsafePerformance { locus_unlink(path) }
            throw .system(.sync, SystemError(negated: synced))
        }
        return descriptor
    }

    /// Deletes the oldest segments while the log exceeds `retainBytes`, under the retention rule
    /// (see the top of this file).
    @_noAllocation
    private mutating func applyRetention() {
        var deleted = 0
        // Bounded by the segment count; never deletes the last (active) segment.
        while totalBytes > retainBytes && segmentCount - deleted > 1 {
            guard let keep = checkpoints.lastComplete, segments[deleted + 1].firstSequence <= keep else { break }
            setSegmentPath(segments[deleted].firstSequence)
            let path = pathBuffer.baseAddress!
            let removed = _unsafePerformance { locus_unlink(path) }
            if removed < 0 && SystemError(negated: removed) != .notFound { break }
            let floor = retentionFloor
            let end = segments[deleted].nextSequence
            if floor > 0 && end > floor {
                undeliveredDeleted &+= end - max(floor, segments[deleted].firstSequence)
                undeliveredDeletedSegments += 1
            }
            totalBytes -= segments[deleted].fileBytes
            deleted += 1
        }
        if deleted > 0 {
            for index in 0..<(segmentCount - deleted) { segments[index] = segments[index + deleted] }
            segmentCount -= deleted
            let directory = directoryDescriptor
            _ = _unsafePerformance { locus_fsync(directory) }
        }
        retentionBlocked = totalBytes > retainBytes
    }

    /// Writes `sequence` as the 20-digit name part of `pathBuffer`.
    @_noAllocation
    func setSegmentPath(_ sequence: UInt64) {
        var value = sequence
        var index = pathNameOffset + LogStore.nameDigits - 1
        while index >= pathNameOffset {
            pathBuffer[index] = CChar(UInt8(ascii: "0") + UInt8(value % 10))
            value /= 10
            index -= 1
        }
    }
}


// MARK: - Backlog

extension LogStore {
    /// About how many bytes of the log hold records after `sequence`: the whole files of the
    /// segments after it, plus the share of its own segment's bytes that its later records take,
    /// interpolated by sequence numbers (records differ in size, and checkpoints count too), so
    /// approximate: for telling a backlog of kilobytes from one of megabytes, not for accounting.
    @_noAllocation
    public func bytes(after sequence: UInt64) -> Int64 {
        var total: Int64 = 0
        for index in 0..<segmentCount {
            let segment = segments[index]
            if segment.firstSequence > sequence {
                total += segment.fileBytes
            } else if segment.nextSequence > sequence &+ 1 {
                let records = Double(segment.nextSequence - segment.firstSequence)
                let after = Double(segment.nextSequence - (sequence + 1))
                total += Int64(Double(segment.validBytes) * after / records)
            }
        }
        return total
    }
}
