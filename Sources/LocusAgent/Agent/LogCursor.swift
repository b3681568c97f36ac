import LocusCore

/// A reader's place in the event log. Every reader of the log holds one and reads through
/// `EventLog.read(_:_:)`: a subscriber on the control socket (live while it keeps up, from the
/// log when it falls behind), a consumer (its position is the one the log keeps for its monitor,
/// moved by `ack`), and next the MQTT uplink (its own cursor, committed to the log as it is
/// acknowledged by the broker, and a floor under what retention may delete).
///
/// Invariant: `position` only moves forward, and never past the log's newest record.
struct LogCursor: Equatable {
    /// Only this monitor's events (nil: every monitor's).
    let monitor: FixedName?
    /// The sequence number of the last record the reader has taken (0: none yet).
    private(set) var position: UInt64
    /// Behind the log's newest record: it reads from the log, not live, until it has caught up.
    private(set) var behind: Bool

    /// A cursor after `position`, behind when the log has records after it.
    init(monitor: FixedName?, after position: UInt64, newest: UInt64) {
        precondition(position <= newest, "a cursor after a record the log does not have")
        self.monitor = monitor
        self.position = position
        behind = position < newest
    }

    /// Whether the reader takes `event` (its monitor's, or every monitor's).
    func wants(_ event: MonitorEvent) -> Bool { monitor == nil || monitor == event.monitor }

    /// The reader has `sequence` (delivered, or passed over as another monitor's).
    mutating func took(_ sequence: UInt64) {
        precondition(sequence >= position, "a log cursor moves forward only")
        precondition(sequence > 0, "a record's sequence number starts at 1")
        position = sequence
    }

    /// The reader could not take a live event: it reads from the log from now on.
    mutating func fellBehind() { behind = true }

    /// The reader has everything up to `newest`: it takes live events again.
    mutating func caughtUp(to newest: UInt64) {
        precondition(position <= newest, "a log cursor never passes the log's newest record")
        position = newest
        behind = false
    }
}
