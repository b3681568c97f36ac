import CLocus
import LocusCore

// A reader that follows the log as it grows (the MQTT uplink publishes every record, in order,
// once per loop turn). `forEachRecord` allocates a 1 MiB buffer and rescans whole segments on
// every call; a tail keeps the byte offset of its next record, that segment's file open and the
// bytes it read ahead, so a turn that finds nothing new reads nothing, and one that finds new
// records reads only their bytes, into a buffer allocated once.
//
// Only what the store accepted is read: never past a segment's `validBytes` in the segment table,
// so a record half written (or cut off at the next open) is never handed out, and every record is
// validated again as it is read.
//
// A tail's place is a sequence number (`position`), not a file: it survives rotation (the offset
// reaches the end of a segment that is no longer the active one: on to the next), retention
// deleting the segment it reads (it finds its place again in the segment table and reports the
// records that went as `missing`), and a reopened store. Finding its place after `init` or
// `reposition` scans one segment from its start, once.

/// A reader's place in the log files. Read with `LogStore.read(_:_:)`.
public final class LogTail {
    /// The last sequence number handed over and accepted, or passed (deleted, or in a corrupt region).
    public private(set) var position: UInt64

    /// The first sequence number of the segment being read; 0 until the next read finds it.
    var segment: UInt64 = 0
    /// The file offset of the next record in that segment, and the sequence number it must carry
    /// (below `position + 1` while the first read scans up to the position).
    var offset: Int64 = 0
    var expected: UInt64 = 0
    /// The segment's file, kept open from one read to the next.
    var descriptor: Int32 = -1
    /// Bytes `windowStart ..< windowStart + filled` of the segment file, read ahead.
    let buffer: UnsafeMutableRawBufferPointer
    var windowStart: Int64 = 0
    var filled = 0

    /// A tail whose next record is the one after `sequence` (0: the oldest the log holds). The
    /// buffer holds at least one record of the largest size; a larger one means fewer reads when
    /// a backlog is drained.
    public init(after sequence: UInt64, bufferBytes: Int = 128 << 10) {
        position = sequence
        buffer = .allocate(byteCount: max(bufferBytes, LogRecord.maximumRecordSize), alignment: 16)
    }

    deinit {
        if descriptor >= 0 { _ = locus_close(descriptor) }
        buffer.deallocate()
    }

    /// Starts over after `sequence` (a reconnect resends from the delivered cursor); the next read
    /// finds the place again.
    public func reposition(after sequence: UInt64) {
        position = sequence
        leave()
    }

    /// Continues at the start of the segment whose first record is `first`.
    @_noAllocation
    func enter(_ first: UInt64, offset: Int64 = 0, expected: UInt64? = nil) {
        leave()
        segment = first
        self.offset = offset
        self.expected = expected ?? first
        windowStart = offset
    }

    /// Forgets the segment: the next read looks its place up again.
    @_noAllocation
    func leave() {
        if descriptor >= 0 {
            let open = descriptor
            _ = _unsafePerformance { locus_close(open) }
            descriptor = -1
        }
        segment = 0
        offset = 0
        windowStart = 0
        filled = 0
    }

    @_noAllocation
    func handed(_ sequence: UInt64) { position = sequence }

    /// Past the record at `offset` (handed over or passed).
    @_noAllocation
    func advance(_ size: Int) {
        offset += Int64(size)
        expected &+= 1
    }

    /// Past records lost to retention or corruption, up to and including `sequence`.
    @_noAllocation
    func pass(through sequence: UInt64) {
        if sequence > position { position = sequence }
    }

    enum Step {
        case record(LogRecordHeader, UnsafeRawBufferPointer)
        case rejected
    }

    /// The record at `offset`, decoded from the bytes read ahead, or, when they end inside it,
    /// after reading more from the file (never past `limit`, the segment's last valid byte). The
    /// payload stays valid until the next call.
    @_noAllocation
    func next(limit: Int64) throws(LogStoreError) -> Step {
        // Bytes read ahead that a reopened store has since cut off are not the log's any more.
        // (Locals: `||` would capture `self` in a closure, which the no-allocation check refuses.)
        let here = offset, first = windowStart, last = windowStart + Int64(filled)
        if here < first || here > last || last > limit {
            windowStart = here
            filled = 0
        }
        // Bounded: every turn returns or reads at least one byte more toward `limit`.
        while true {
            let start = Int(offset - windowStart)
            let window = UnsafeRawBufferPointer(rebasing: buffer[0..<filled])
            switch LogRecord.decode(window, at: start) {
            case .record(let header, let payload):
                return .record(header, UnsafeRawBufferPointer(rebasing: window[payload]))
            case .rejected(let reason):
                let end = windowStart + Int64(filled)
                guard (reason == .truncatedHeader || reason == .truncatedPayload) && end < limit else { return .rejected }
                // Slide the unfinished record to the front (the buffer holds the largest record)
                // and read on from where the window ends.
                let kept = filled - start
                if kept > 0 && start > 0 {
                    buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: kept)
                }
                windowStart = offset
                filled = kept
                let want = Int(min(Int64(buffer.count - kept), limit - end))
                let file = descriptor
                let into = buffer.baseAddress! + kept
                let count = _unsafePerformance { locus_pread(file, into, want, end) }
                if count < 0 { throw .system(.read, SystemError(negated: count)) }
                if count == 0 { return .rejected } // the file is shorter than the store says
                filled += count
            }
        }
    }
}

/// What one `LogStore.read(_:_:)` did.
public struct LogTailRead: Equatable, Sendable {
    /// Records handed over and accepted.
    public var records = 0
    /// Sequence numbers the tail needed that retention had deleted: the tail went on from the
    /// oldest record the log still holds.
    public var missing: UInt64 = 0
    /// Bad regions passed: a record that failed validation (the rest of its segment is skipped,
    /// as `forEachRecord` does), or sequence numbers missing between two segments.
    public var corrupt = 0

    public init(records: Int = 0, missing: UInt64 = 0, corrupt: Int = 0) {
        self.records = records
        self.missing = missing
        self.corrupt = corrupt
    }
}

extension LogStore {
    /// Hands the records after `tail.position` to `body`, in order, until `body` returns false
    /// (that record is not taken: the next read hands it again) or the log's end (every record
    /// appended so far). A read that finds nothing new reads no file.
    ///
    /// `body` must not append to this store (nor call anything that does): the store is being
    /// read. Take what it hands over, and log the cursor after `read` returns.
    ///
    /// Not `@_noAllocation` itself, because it takes a closure the compiler cannot see (as
    /// `append`); the byte-level work it calls is, and the test counts 0 allocations per read.
    public func read(_ tail: LogTail, _ body: (LogRecordHeader, UnsafeRawBufferPointer) -> Bool) throws(LogStoreError) -> LogTailRead {
        var result = LogTailRead()
        // Bounded: every turn ends at the log's end or moves the tail to a later segment.
        while let index = place(tail, &result) {
            let segment = segments[index]
            var skipped = false
            if tail.offset < segment.validBytes && tail.descriptor < 0 { try openSegment(for: tail) }
            // Bounded by the segment's valid bytes: every record moves the offset forward.
            while tail.offset < segment.validBytes && !skipped {
                switch try tail.next(limit: segment.validBytes) {
                case .record(let header, let payload):
                    guard header.sequence == tail.expected else {
                        skipped = true
                        break
                    }
                    if header.sequence > tail.position {
                        guard body(header, payload) else { return result }
                        tail.handed(header.sequence)
                        result.records += 1
                    }
                    tail.advance(header.recordSize)
                case .rejected:
                    skipped = true
                }
            }
            // The active segment read to its end is the log's end; the next read goes on from here.
            guard index + 1 < segmentCount else { return result }
            // A segment the store no longer appends to: what could not be read in it is passed.
            let next = segments[index + 1].firstSequence
            if skipped || segment.validBytes < segment.fileBytes || tail.expected != next { result.corrupt += 1 }
            tail.pass(through: next &- 1)
            tail.enter(next)
        }
        return result
    }

    /// The index of the segment `tail` reads. When the tail has no segment yet (a new tail, a
    /// reposition), or its segment is gone (retention) or shorter than its offset (a reopened
    /// store cut it), the place is found again from `position`: records retention deleted are
    /// counted in `missing` and passed. nil while the log holds nothing after the position.
    @_noAllocation
    private func place(_ tail: LogTail, _ result: inout LogTailRead) -> Int? {
        let current = tail.segment, offset = tail.offset
        if current != 0 {
            let index = segmentIndex(containing: current)
            let segment = segments[index]
            if segment.firstSequence == current && offset <= segment.validBytes { return index }
        }
        tail.leave()
        let target = tail.position &+ 1
        let last = segmentCount - 1
        if target >= nextSequence {
            guard target == nextSequence else { return nil }
            // Caught up: wait at the end of the active segment, without reading it.
            tail.enter(segments[last].firstSequence, offset: segments[last].validBytes, expected: nextSequence)
            return last
        }
        let oldest = segments[0].firstSequence
        if target < oldest {
            result.missing &+= oldest - target
            tail.pass(through: oldest - 1)
            tail.enter(oldest)
            return 0
        }
        let index = segmentIndex(containing: target)
        tail.enter(segments[index].firstSequence)
        return index
    }

    /// The last segment whose first sequence number is at most `sequence` (0 when none is).
    @_noAllocation
    private func segmentIndex(containing sequence: UInt64) -> Int {
        var low = 0
        var high = segmentCount - 1
        // Bounded: the range halves every turn.
        while low < high {
            let middle = (low + high + 1) / 2
            if segments[middle].firstSequence <= sequence { low = middle } else { high = middle - 1 }
        }
        return low
    }

    @_noAllocation
    private func openSegment(for tail: LogTail) throws(LogStoreError) {
        setSegmentPath(tail.segment)
        let path = pathBuffer.baseAddress!
        let descriptor = _unsafePerformance { locus_open(path, Int32(LOCUS_O_READ), 0) }
        if descriptor < 0 { throw .system(.open, SystemError(negated: descriptor)) }
        tail.descriptor = descriptor
    }
}
