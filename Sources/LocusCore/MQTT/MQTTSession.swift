/// One MQTT 3.1.1 client session as a state machine, without I/O: the gateway's uplink steps it
/// from the agent's loop (through `BrokerConnection`) and the fleet's ingest from its blocking
/// reads (`FleetBroker`). The transport (name lookup, TCP, TLS) and the framing of the bytes are
/// the caller's; the session decides what the packets mean and what goes out.
///
///     closed --connect--> accepting --CONNACK 0--> open --disconnected--> closed
///                              `--CONNACK refused, a packet before CONNACK--> failure
///
/// It owns:
/// - the output queue (`output`): CONNECT, PINGREQ and what its user writes, sent by the caller,
///   which reports each send (`sent(nowNs:)`);
/// - keep-alive: PINGREQ once nothing was sent for `pingIntervalNs`, and the connection is lost
///   when its PINGRESP has not come within `answerTimeoutNs` (§3.1.2.10), or when messages have
///   waited `acknowledgementTimeoutNs` in the window with no acknowledgement at all (a broker
///   that answers PINGs and has dropped them: NATS 2.9 was seen to during a leader change; §4.4
///   has them sent again on the next connection);
/// - the window of QoS 1 messages and subscriptions awaiting their acknowledgement (`window`),
///   whose packet ids it hands out;
/// - the reconnect schedule (`ReconnectBackoff`): after a loss the next attempt waits, and the
///   first acknowledgement on a new connection starts the backoff over.
///
/// What a PUBLISH from the broker means is the user's: the session reports it and the user
/// acknowledges it when it has taken the message (the uplink at once; the ingest once its batch
/// has committed, §4.3.2 allowing either). Every method is allocation-free.
public struct MQTTSession: ~Copyable {
    public enum Phase: Equatable, Sendable { case closed, accepting, open }

    /// A packet from the broker as the session sees it (the caller decodes and copies what else
    /// it needs, such as a PUBLISH's topic and payload).
    public enum Packet: Equatable, Sendable {
        case connack(sessionPresent: Bool, code: UInt8)
        case puback(packetID: UInt16)
        case suback(packetID: UInt16, refused: Bool)
        case pingresp
        case publish(qos: MQTT.QoS, packetID: UInt16)
    }

    /// What a packet meant.
    public enum Outcome: Equatable, Sendable {
        /// The session's own (PINGRESP): nothing for the user.
        case handled
        /// CONNACK accepted the connection: publishing may start.
        case accepted(sessionPresent: Bool)
        /// A PUBACK for a message in the window, which has left it.
        case acknowledged(packetID: UInt16)
        /// A PUBACK for no message in the window: a broker's mistake, to count, never to act on.
        case unknownAcknowledgement(packetID: UInt16)
        /// A SUBACK (its id has left the window); `refused`: a filter was refused (0x80).
        case subscribed(packetID: UInt16, refused: Bool)
        /// A PUBLISH: at QoS 1 the user sends PUBACK when it has taken the message.
        case message(qos: MQTT.QoS, packetID: UInt16)
        /// The connection is to be closed (§4.8), for this reason.
        case failed(Failure)
    }

    /// Why the session ends the connection.
    public enum Failure: Equatable, Sendable {
        /// CONNACK with a return code other than 0 (`MQTT.explain(connectReturnCode:)`).
        case refused(code: UInt8)
        case secondConnack
        case packetBeforeConnack
        /// A PINGREQ went unanswered for `answerTimeoutNs`.
        case pingUnanswered
        /// Messages waited `acknowledgementTimeoutNs` with no acknowledgement.
        case unacknowledged
    }

    /// What keep-alive asks of the caller now.
    public enum KeepAlive: Equatable, Sendable {
        case idle
        /// PINGREQ is in the output: send it.
        case ping
        case failed(Failure)
    }

    public private(set) var phase: Phase = .closed
    /// Packets waiting to go out.
    public var output: MQTTWriter
    /// QoS 1 messages and subscriptions awaiting their acknowledgement.
    public var window: PublishWindow
    /// 0: no keep-alive (a CONNECT keep-alive of 0).
    public let pingIntervalNs: Int64
    public let answerTimeoutNs: Int64
    public let acknowledgementTimeoutNs: Int64
    /// Since when the window has held something with no acknowledgement (nil: empty, as last seen).
    private var waitingSinceNs: Int64? = nil
    private var lastSentNs: Int64 = 0
    private var pingSentNs: Int64? = nil
    private var backoff: ReconnectBackoff
    /// When the next connection may be tried (nil: now).
    public private(set) var retryAt: MonotonicInstant? = nil
    /// Whether the connection now ending was open (the user says a lost connection louder).
    private var wasOpen = false
    private var acknowledgedSinceOpen = 0

    /// `outputBytes`: the output queue; `windowCapacity`: messages in flight at most (2...65,534);
    /// `pingIntervalNs`: silence before PINGREQ (0: none); `answerTimeoutNs`: how long PINGRESP
    /// may take; `acknowledgementTimeoutNs`: how long messages may wait with none acknowledged.
    public init(outputBytes: Int, windowCapacity: Int, pingIntervalNs: Int64, answerTimeoutNs: Int64,
                acknowledgementTimeoutNs: Int64 = 30_000_000_000, backoff: ReconnectBackoff = ReconnectBackoff()) {
        precondition(pingIntervalNs >= 0 && answerTimeoutNs > 0 && acknowledgementTimeoutNs > 0)
        self.acknowledgementTimeoutNs = acknowledgementTimeoutNs
        output = MQTTWriter(capacity: outputBytes)
        window = PublishWindow(capacity: windowCapacity)
        self.pingIntervalNs = pingIntervalNs
        self.answerTimeoutNs = answerTimeoutNs
        self.backoff = backoff
    }

    public var isOpen: Bool { phase == .open }

    // MARK: connecting

    /// A connection attempt starts (the transport's first step): the backoff's wait is over.
    public mutating func attempting() { retryAt = nil }

    /// The transport is up: CONNECT goes first in an emptied output. False when it does not fit
    /// (a client id, user name or will too long); the session stays closed then.
    public mutating func connect(_ options: MQTTConnectOptions) -> Bool {
        output.reset()
        guard output.connect(options) else { return false }
        phase = .accepting
        return true
    }

    /// Bytes of the output went out (the caller dropped them from it).
    @_noAllocation
    public mutating func sent(nowNs: Int64) { lastSentNs = nowNs }

    // MARK: the broker's packets

    /// One packet from the broker.
    @_noAllocation
    public mutating func receive(_ packet: Packet, nowNs: Int64) -> Outcome {
        if case .connack(let sessionPresent, let code) = packet {
            guard phase == .accepting else { return .failed(.secondConnack) }
            guard code == 0 else { return .failed(.refused(code: code)) }
            phase = .open
            wasOpen = true
            acknowledgedSinceOpen = 0
            lastSentNs = nowNs
            waitingSinceNs = nil
            return .accepted(sessionPresent: sessionPresent)
        }
        guard phase == .open else { return .failed(.packetBeforeConnack) }
        switch packet {
        case .connack:
            return .failed(.secondConnack)
        case .pingresp:
            pingSentNs = nil
            return .handled
        case .puback(let packetID):
            guard window.acknowledge(packetID) else { return .unknownAcknowledgement(packetID: packetID) }
            // The broker works: a later failure starts the backoff from the beginning.
            if acknowledgedSinceOpen == 0 { backoff.reset() }
            acknowledgedSinceOpen += 1
            waitingSinceNs = window.count > 0 ? nowNs : nil
            return .acknowledged(packetID: packetID)
        case .suback(let packetID, let refused):
            _ = window.acknowledge(packetID)
            waitingSinceNs = window.count > 0 ? nowNs : nil
            return .subscribed(packetID: packetID, refused: refused)
        case .publish(let qos, let packetID):
            return .message(qos: qos, packetID: packetID)
        }
    }

    // MARK: time

    /// PINGREQ when nothing was sent for the interval; the connection lost when the last one went
    /// unanswered for the timeout.
    public mutating func keepAlive(nowNs: Int64) -> KeepAlive {
        guard phase == .open else { return .idle }
        if window.count == 0 {
            waitingSinceNs = nil
        } else if let since = waitingSinceNs {
            if nowNs - since >= acknowledgementTimeoutNs { return .failed(.unacknowledged) }
        } else {
            waitingSinceNs = nowNs
        }
        guard pingIntervalNs > 0 else { return .idle }
        if let pingSentNs {
            return nowNs - pingSentNs >= answerTimeoutNs ? .failed(.pingUnanswered) : .idle
        }
        guard nowNs - lastSentNs >= pingIntervalNs, output.pingreq() else { return .idle }
        pingSentNs = nowNs
        return .ping
    }

    /// When keep-alive next has something to do (nil: nothing while open without keep-alive).
    public var keepAliveDeadlineNs: Int64? {
        guard phase == .open else { return nil }
        // Messages in the window not yet seen by keepAlive: it notes when they started waiting
        // at its next call, which the interval brings soon enough.
        let acknowledgement = waitingSinceNs.map { $0 + acknowledgementTimeoutNs }
        guard pingIntervalNs > 0 else { return acknowledgement }
        let ping = pingSentNs.map { $0 + answerTimeoutNs } ?? lastSentNs + pingIntervalNs
        return acknowledgement.map { min($0, ping) } ?? ping
    }

    // MARK: the end

    /// The transport closed (or is closed by the caller): nothing half-sent stays queued. The
    /// window keeps what was in flight until `lost` (its user reads it first).
    public mutating func disconnected() {
        phase = .closed
        output.reset()
        pingSentNs = nil
        waitingSinceNs = nil
    }

    /// The connection ended or could not be made: what was in flight is forgotten (the user
    /// sends it again) and the next attempt waits the backoff's delay, spread by `random` (any
    /// 64-bit random number). Returns the delay and whether the connection had been open.
    public mutating func lost(now: MonotonicInstant, random: UInt64) -> (delayNs: Int64, wasOpen: Bool) {
        disconnected()
        window.removeAll()
        let delayNs = backoff.next(random: random)
        retryAt = now + delayNs
        defer { wasOpen = false }
        return (delayNs, wasOpen)
    }

    /// Whether a connection may be tried now: the session is closed and the backoff has passed.
    public func mayConnect(at now: MonotonicInstant) -> Bool {
        phase == .closed && retryAt.map { now >= $0 } ?? true
    }
}

extension MQTTSession.Failure: CustomStringConvertible {
    public var description: String {
        switch self {
        case .refused(let code): return "the broker refused the connection: \(MQTT.explain(connectReturnCode: code))"
        case .secondConnack: return "the broker sent a second CONNACK"
        case .packetBeforeConnack: return "the broker sent a packet before CONNACK"
        case .pingUnanswered: return "the broker did not answer PINGREQ"
        case .unacknowledged: return "the broker acknowledged none of the messages in flight (it answers PINGREQ but has dropped them); reconnecting to send them again"
        }
    }
}
