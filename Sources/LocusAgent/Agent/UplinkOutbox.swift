import LocusCore
import LocusDevices

/// The uplink's outbox: the log itself, read through the uplink's own `LogTail`, with the
/// position the broker has acknowledged and the rules for moving and committing it.
///
///     committed <= delivered <= tail.position <= log.newest
///
/// `committed` is what the log states (an `uplink` record, and every checkpoint); `delivered` is
/// what the broker acknowledged (`PublishWindow.delivered(readThrough:)`); the tail's position is
/// the last record read and published or passed over. The uplink owns one; the outbox does no
/// network work and knows nothing of MQTT beyond the window it is shown.
///
/// The chain: each published event, GPIO change or visit carries "prev", the record of those
/// kinds published before it (`chained`). Records missing before the next one read (deleted by
/// retention, or damaged) make "prev" name the last of them, which no store holds, so the loss
/// shows there as a gap.
struct UplinkOutbox: ~Copyable {
    /// How often the delivered position is committed to the log while messages are acknowledged
    /// (a crash resends at most this much), or after this many acknowledgements.
    static let commitIntervalNs: Int64 = 1_000_000_000
    static let commitMessages = 256

    let tail: LogTail
    /// The delivered position last written to the log.
    private(set) var committed: UInt64
    /// The last record the tail passed, and the last of a kind that carries "prev" that was
    /// published: the next such record's "prev" (nil: not known).
    private var lastRead: UInt64
    private var chained: UInt64?
    private var acknowledgedSinceCommit = 0
    private var lastCommit = MonotonicInstant(nanoseconds: 0)
    /// Fix time (UTC ns) before which no fix is published (`fix_interval`).
    private var nextFixNs: Int64 = 0
    /// Undelivered records retention deleted, as last reported.
    private var reportedDeleted: UInt64 = 0
    /// The oldest undelivered record's time when the connection was lost (the window knows it
    /// while connected).
    private var oldestAtLossNs: Int64? = nil

    init(cursor: UplinkCursor?) {
        precondition(UplinkOutbox.commitIntervalNs > 0, "commits are spaced in time")
        precondition(UplinkOutbox.commitMessages > 0, "commits are spaced in acknowledgements")
        committed = cursor?.delivered ?? 0
        lastRead = committed
        // No cursor: nothing was ever delivered, and the chain starts with the log.
        if let cursor { chained = cursor.chained } else { chained = 0 }
        tail = LogTail(after: committed)
        precondition(tail.position == committed, "the tail starts at the committed position")
    }

    /// The last record read (published or passed over).
    var position: UInt64 { tail.position }

    /// When the delivered position is next due to be committed (nil: nothing to commit).
    var commitDeadline: MonotonicInstant? {
        acknowledgedSinceCommit > 0 ? lastCommit + UplinkOutbox.commitIntervalNs : nil
    }

    // MARK: reading

    /// A record the tail hands over: the chain's step. Returns the "prev" it is published with.
    mutating func read(_ header: LogRecordHeader) -> UInt64? {
        precondition(header.sequence > lastRead, "the tail hands records over in increasing order")
        if header.sequence != lastRead &+ 1 { chained = header.sequence &- 1 }
        lastRead = header.sequence
        return chained
    }

    /// A record that carries "prev" was published: the next one names it.
    mutating func chain(_ sequence: UInt64) {
        precondition(sequence == lastRead, "the chain moves to the record just read")
        chained = sequence
    }

    /// Whether a fix of this time goes out: fixes go `fix_interval` apart.
    func wantsFix(timeNs: Int64) -> Bool { timeNs >= nextFixNs }

    /// A fix of this time was published: the next goes `intervalMs` after it.
    mutating func publishedFix(timeNs: Int64, intervalMs: Int64) {
        precondition(intervalMs >= 0, "a fix interval is not negative")
        precondition(timeNs >= nextFixNs, "a fix is published only when one is wanted")
        nextFixNs = timeNs + intervalMs * 1_000_000
    }

    /// Reports what the tail found missing or damaged in a read.
    func report(_ read: LogTailRead) {
        if read.missing > 0 {
            AgentLog.error("locus: uplink: \(read.missing) log records were deleted by retention before they were sent; going on from record \(tail.position + 1)")
        }
        if read.corrupt > 0 {
            AgentLog.error("locus: uplink: \(read.corrupt) damaged log regions skipped (locus log verify shows them)")
        }
    }

    // MARK: the connection's ends

    /// The connection is gone: what was in flight was not acknowledged, so the tail goes back to
    /// the delivered position and the next connection sends it again. The caller empties the
    /// window after.
    mutating func rewind(_ window: borrowing PublishWindow) {
        if let oldest = window.oldest { oldestAtLossNs = oldest.timeNs }
        let delivered = window.delivered(readThrough: tail.position)
        precondition(delivered >= committed, "committed <= delivered")
        precondition(delivered <= tail.position, "delivered <= the tail's position")
        chained = window.chained(current: chained)
        lastRead = delivered
        tail.reposition(after: delivered)
        precondition(tail.position == delivered, "a rewound tail reads again after the delivered position")
    }

    /// A PUBACK for one of the window's messages.
    mutating func acknowledged() {
        acknowledgedSinceCommit += 1
        precondition(acknowledgedSinceCommit > 0, "acknowledgements since the last commit are counted")
    }

    // MARK: the cursor

    /// Writes the delivered position to the log once a second while messages are acknowledged
    /// (or every `commitMessages`), and at the end (`force`).
    mutating func commit(_ log: EventLog, _ now: AgentTime, window: borrowing PublishWindow, force: Bool) {
        guard acknowledgedSinceCommit > 0 || force else { return }
        guard force || acknowledgedSinceCommit >= UplinkOutbox.commitMessages
            || now.monotonic >= lastCommit + UplinkOutbox.commitIntervalNs else { return }
        let delivered = window.delivered(readThrough: tail.position)
        // The outbox's invariant: committed <= delivered <= tail.position <= log.newest.
        precondition(delivered >= committed, "committed <= delivered")
        precondition(delivered <= tail.position, "delivered <= the tail's position")
        precondition(tail.position <= log.newest, "the tail's position <= the log's newest record")
        guard delivered > committed else {
            // Acknowledged messages that move nothing (retained states, discovery, or behind a
            // message still in flight): no commit is due until the next acknowledgement.
            acknowledgedSinceCommit = 0
            return
        }
        do {
            try log.commitUplink(UplinkCursor(delivered: delivered, chained: window.chained(current: chained)), now)
        } catch {
            // The log's failure path reports it. The commit is tried again a commit interval
            // later, not at every turn (a full disk would otherwise keep the loop awake).
            lastCommit = now.monotonic
            acknowledgedSinceCommit = min(acknowledgedSinceCommit, UplinkOutbox.commitMessages - 1)
            return
        }
        committed = delivered
        acknowledgedSinceCommit = 0
        lastCommit = now.monotonic
        precondition(log.uplinkDelivered == committed, "the log states the committed position")
    }

    // MARK: the backlog

    /// The backlog's part of the status, which needs the log.
    func backlogStatus(_ log: EventLog, window: borrowing PublishWindow, now: AgentTime, into line: inout JSONWriter) {
        line.beginObject("uplink_backlog")
        let delivered = window.delivered(readThrough: tail.position)
        line.integer("records", log.newest - min(delivered, log.newest))
        line.integer("bytes", log.backlogBytes(after: delivered))
        if let oldestNs = window.oldest?.timeNs ?? oldestAtLossNs, delivered < log.newest {
            line.integer("oldest_age_s", max(0, (now.utc.totalNanoseconds - oldestNs) / 1_000_000_000))
        } else {
            line.null("oldest_age_s")
        }
        line.integer("deleted_undelivered", log.undeliveredDeleted)
        line.endObject()
    }

    /// Records retention deleted before they were delivered: said once per occurrence.
    mutating func reportDeleted(_ log: EventLog) {
        let deleted = log.undeliveredDeleted
        precondition(deleted >= reportedDeleted, "retention's count of undelivered records only grows")
        guard deleted > reportedDeleted else { return }
        AgentLog.error("locus: uplink: the log reached [log] retain with the broker away: \(deleted - reportedDeleted) records were deleted before they were delivered (\(deleted) in all)")
        reportedDeleted = deleted
    }
}
