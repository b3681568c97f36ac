/// The QoS 1 messages a client has sent and the broker has not yet acknowledged, oldest first:
/// at most `capacity` (the uplink's `max_inflight`), in storage allocated once.
///
/// Each message carries the log sequence number it publishes (0 for messages that are not log
/// records: the status, Home Assistant's discovery). The uplink's cursor may pass a record only
/// when every message of that record and of every record before it has its PUBACK, so
/// `delivered(readThrough:)` is the first unacknowledged record's sequence minus one. PUBACKs
/// may arrive in any order (§4.6 asks brokers for order, but a client must not depend on it
/// for correctness); acknowledged messages leave from the front.
public struct PublishWindow: ~Copyable {
    struct Entry {
        var packetID: UInt16
        var sequence: UInt64
        /// The record's time (UTC ns), for the backlog's age.
        var timeNs: Int64
        /// The uplink's chain before this record (`UplinkCursor.chained` at the record before it).
        var chained: UInt64?
        var acknowledged: Bool
    }

    private let entries: UnsafeMutableBufferPointer<Entry>
    private var head = 0
    public private(set) var count = 0
    private var lastPacketID: UInt16 = 0

    public init(capacity: Int) {
        precondition(capacity >= 2 && capacity < Int(UInt16.max), "a window of 2...65,534 messages (an event takes two)")
        entries = .allocate(capacity: capacity)
    }

    deinit { entries.deallocate() }

    public var capacity: Int { entries.count }
    public var free: Int { capacity - count }
    public var isEmpty: Bool { count == 0 }

    /// A message about to be sent: its packet id. Ids run 1...65,535 and wrap; the window holds
    /// fewer than 65,535 messages, so an id is never in it twice.
    @_noAllocation
    public mutating func add(sequence: UInt64, timeNs: Int64 = 0, chained: UInt64? = nil) -> UInt16 {
        precondition(count < capacity, "the window is full")
        let packetID = unrecordedPacketID()
        entries[(head + count) % capacity] = Entry(packetID: packetID, sequence: sequence, timeNs: timeNs, chained: chained,
                                                   acknowledged: false)
        count += 1
        return packetID
    }

    /// The next id, not recorded: `add` records it; alone it is for a message whose
    /// acknowledgement nothing waits for (the uplink's goodbye at a clean stop), in the window
    /// neither now nor later, the window's own ids going on after it. Works with the window full.
    @_noAllocation
    public mutating func unrecordedPacketID() -> UInt16 {
        lastPacketID = lastPacketID == UInt16.max ? 1 : lastPacketID + 1
        return lastPacketID
    }

    /// A PUBACK: false when no message in the window has that id (a broker's mistake, or an
    /// acknowledgement for a connection the window has forgotten).
    @_noAllocation
    public mutating func acknowledge(_ packetID: UInt16) -> Bool {
        var found = false
        for offset in 0..<count {
            let index = (head + offset) % capacity
            if entries[index].packetID == packetID && !entries[index].acknowledged {
                entries[index].acknowledged = true
                found = true
                break
            }
        }
        while count > 0 && entries[head].acknowledged {
            head = (head + 1) % capacity
            count -= 1
        }
        return found
    }

    /// The last log sequence number through which every record is acknowledged, given that the
    /// reader has passed every record up to `readThrough`.
    @_noAllocation
    public func delivered(readThrough: UInt64) -> UInt64 {
        for offset in 0..<count {
            let entry = entries[(head + offset) % capacity]
            if !entry.acknowledged && entry.sequence > 0 { return entry.sequence - 1 }
        }
        return readThrough
    }

    /// The chain at the delivered position (see `delivered(readThrough:)`): what the oldest
    /// unacknowledged record was sent with, or `current`, the reader's, when every record it
    /// passed is acknowledged.
    @_noAllocation
    public func chained(current: UInt64?) -> UInt64? {
        for offset in 0..<count {
            let entry = entries[(head + offset) % capacity]
            if !entry.acknowledged && entry.sequence > 0 { return entry.chained }
        }
        return current
    }

    /// The oldest log record still waiting for a PUBACK: its sequence and time (nil: none).
    public var oldest: (sequence: UInt64, timeNs: Int64)? {
        for offset in 0..<count {
            let entry = entries[(head + offset) % capacity]
            if !entry.acknowledged && entry.sequence > 0 { return (entry.sequence, entry.timeNs) }
        }
        return nil
    }

    /// The connection is gone: what was in flight is sent again from the cursor on the next.
    public mutating func removeAll() {
        head = 0
        count = 0
    }
}

/// How long to wait before connecting again: doubling from `initialNs` to `maximumNs`, each
/// delay spread by ±25 % so a fleet that lost its broker at once does not return at once.
public struct ReconnectBackoff: Sendable {
    public let initialNs: Int64
    public let maximumNs: Int64
    private var currentNs: Int64

    public init(initialNs: Int64 = 1_000_000_000, maximumNs: Int64 = 60_000_000_000) {
        self.initialNs = initialNs
        self.maximumNs = maximumNs
        currentNs = initialNs
    }

    /// The next delay; `random` is any 64-bit random number (passed in, so tests decide it).
    public mutating func next(random: UInt64) -> Int64 {
        let base = currentNs
        currentNs = min(currentNs * 2, maximumNs)
        // 0.75 ... 1.25 of the base, in 1/1024 steps.
        let spread = Int64(random % 513) // 0...512
        return base / 1024 * (768 + spread)
    }

    /// A connection that stayed up: the next failure starts from the beginning again.
    public mutating func reset() { currentNs = initialNs }
}
