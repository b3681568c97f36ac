/// Which of the commands sent to the receiver it confirmed (UBX ACK-ACK, PMTK001 flag 3),
/// refused (ACK-NAK, PMTK001 flags 0...2) or has not answered yet, with resends bounded by
/// `maximumAttempts`. Acknowledgements name only the message type, so an answer is matched to
/// the oldest pending command of that type. Unacknowledged commands (RXM-PMREQ, PMTK161) are
/// confirmed on sending.
public struct AcknowledgementTracker: Sendable {
    public enum Status: Equatable, Sendable {
        case pending
        case confirmed
        case refused
        /// No answer after `maximumAttempts` sends.
        case timedOut
    }

    public struct Entry: Equatable, Sendable {
        public var key: AcknowledgementKey?
        public var status: Status
        /// Sends so far (1 after the first).
        public var attempts: Int
        public var lastSentNs: Int64
        /// PMTK001's flag when refused, for the log.
        public var pmtkFlag: PMTKAcknowledgement.Flag?
    }

    public static let capacity = ReceiverCommandSequence.capacity
    public let timeoutMs: Int64
    public let maximumAttempts: Int
    private var entries = InlineArray<6, Entry?>(repeating: nil)
    public private(set) var count = 0

    public init(timeoutMs: Int64 = 1_000, maximumAttempts: Int = 3) {
        precondition(timeoutMs > 0 && maximumAttempts >= 1)
        self.timeoutMs = timeoutMs
        self.maximumAttempts = maximumAttempts
    }

    public func entry(_ index: Int) -> Entry {
        precondition(index >= 0 && index < count)
        return entries[index]!
    }

    /// Records that `commands[index]` was sent for the first time.
    @_noAllocation
    public mutating func sent(_ command: ReceiverCommand, now: UTCTime) {
        precondition(count < AcknowledgementTracker.capacity, "more commands than AcknowledgementTracker.capacity")
        let key = command.acknowledgementKey
        entries[count] = Entry(key: key, status: key == nil ? .confirmed : .pending, attempts: 1,
                               lastSentNs: now.totalNanoseconds, pmtkFlag: nil)
        count += 1
    }

    @_noAllocation
    public mutating func observe(_ acknowledgement: UBXAcknowledgement) {
        guard let index = oldestPending(.ubx(acknowledgement.message)) else { return }
        if case .ack = acknowledgement { entries[index]!.status = .confirmed } else { entries[index]!.status = .refused }
    }

    @_noAllocation
    public mutating func observe(_ acknowledgement: PMTKAcknowledgement) {
        guard let index = oldestPending(.pmtk(acknowledgement.command)) else { return }
        if acknowledgement.flag == .succeeded {
            entries[index]!.status = .confirmed
        } else {
            entries[index]!.status = .refused
            entries[index]!.pmtkFlag = acknowledgement.flag
        }
    }

    /// Commands to send again now: pending for `timeoutMs` since their last send. Each one
    /// returned counts as sent; one that has used its attempts becomes `timedOut` instead.
    @_noAllocation
    public mutating func resends(now: UTCTime, _ body: (Int) -> Void) {
        let nowNs = now.totalNanoseconds
        for index in 0..<count {
            guard var entry = entries[index], entry.status == .pending, nowNs - entry.lastSentNs >= timeoutMs * 1_000_000 else { continue }
            if entry.attempts >= maximumAttempts {
                entry.status = .timedOut
            } else {
                entry.attempts += 1
                entry.lastSentNs = nowNs
                body(index)
            }
            entries[index] = entry
        }
    }

    public var isSettled: Bool {
        for index in 0..<count where entries[index]!.status == .pending { return false }
        return true
    }

    public func count(_ status: Status) -> Int {
        var total = 0
        for index in 0..<count where entries[index]!.status == status { total += 1 }
        return total
    }

    private func oldestPending(_ key: AcknowledgementKey) -> Int? {
        for index in 0..<count {
            if let entry = entries[index], entry.status == .pending, entry.key == key { return index }
        }
        return nil
    }
}
