import AllocCounter
import Testing
@testable import LocusCore

/// The MQTT client session without a network: CONNECT and CONNACK, keep-alive, the window's
/// acknowledgements and the reconnect backoff, as the uplink and the ingest step it. (#expect
/// takes copies: each value is read into a local first, the session being noncopyable.)
@Suite struct MQTTSessionTests {
    static let second: Int64 = 1_000_000_000

    static func session(pingIntervalNs: Int64 = 30 * second) -> MQTTSession {
        MQTTSession(outputBytes: 256, windowCapacity: 4, pingIntervalNs: pingIntervalNs, answerTimeoutNs: 10 * second,
                    backoff: ReconnectBackoff(initialNs: 1 * second, maximumNs: 8 * second))
    }

    static func options() -> MQTTConnectOptions {
        MQTTConnectOptions(clientID: Array("gw-1".utf8), cleanSession: false, keepAliveS: 30)
    }

    /// A session that has sent CONNECT and had it accepted at `nowNs`.
    static func open(pingIntervalNs: Int64 = 30 * second, nowNs: Int64 = 0) -> MQTTSession {
        var session = Self.session(pingIntervalNs: pingIntervalNs)
        _ = session.connect(Self.options())
        _ = session.receive(.connack(sessionPresent: false, code: 0), nowNs: nowNs)
        session.output.reset()
        return session
    }

    @Test func connectWritesCONNECTAndCONNACKOpensTheSession() {
        var session = Self.session()
        let closed = session.phase
        let written = session.connect(Self.options())
        let phase = session.phase
        let first = session.output.bytes.first
        let accepted = session.receive(.connack(sessionPresent: true, code: 0), nowNs: 5)
        let open = session.isOpen
        let second = session.receive(.connack(sessionPresent: false, code: 0), nowNs: 6)
        #expect(closed == .closed && written && phase == .accepting && first == 0x10)
        #expect(accepted == .accepted(sessionPresent: true) && open)
        #expect(second == .failed(.secondConnack))
    }

    @Test func aRefusalOrAPacketBeforeCONNACKFails() {
        var refused = Self.session()
        _ = refused.connect(Self.options())
        let refusal = refused.receive(.connack(sessionPresent: false, code: 5), nowNs: 0)
        let open = refused.isOpen
        var early = Self.session()
        _ = early.connect(Self.options())
        let before = early.receive(.puback(packetID: 1), nowNs: 0)
        #expect(refusal == .failed(.refused(code: 5)) && !open)
        #expect(before == .failed(.packetBeforeConnack))
    }

    @Test func keepAlivePingsWhenQuietAndFailsWithoutAnAnswer() {
        var session = Self.open()
        let firstDeadline = session.keepAliveDeadlineNs
        let quiet = session.keepAlive(nowNs: 29 * Self.second)
        let ping = session.keepAlive(nowNs: 30 * Self.second)
        let bytes = Array(session.output.bytes)
        let answerDeadline = session.keepAliveDeadlineNs
        let waiting = session.keepAlive(nowNs: 35 * Self.second)
        let pong = session.receive(.pingresp, nowNs: 36 * Self.second)
        session.sent(nowNs: 36 * Self.second)
        let again = session.keepAlive(nowNs: 66 * Self.second)
        let lost = session.keepAlive(nowNs: 76 * Self.second)
        #expect(firstDeadline == 30 * Self.second && quiet == .idle && ping == .ping && bytes == [0xC0, 0x00])
        #expect(answerDeadline == 40 * Self.second && waiting == .idle && pong == .handled)
        #expect(again == .ping && lost == .failed(.pingUnanswered))
    }

    /// Messages in flight that the broker never acknowledges, while it answers every PINGREQ:
    /// the connection is given up 30 s after the last acknowledgement (or after they started to
    /// wait), so they go again on the next; each acknowledgement starts the wait over.
    @Test func messagesNeverAcknowledgedEndTheConnection() {
        var session = Self.open(pingIntervalNs: 10 * Self.second)
        let empty = session.keepAlive(nowNs: 5 * Self.second)
        let first = session.window.add(sequence: 1)
        let second = session.window.add(sequence: 2)
        let noted = session.keepAlive(nowNs: 6 * Self.second)
        let deadline = session.keepAliveDeadlineNs
        let acknowledged = session.receive(.puback(packetID: first), nowNs: 30 * Self.second)
        _ = session.receive(.pingresp, nowNs: 30 * Self.second)
        session.sent(nowNs: 30 * Self.second)
        let waiting = session.keepAlive(nowNs: 59 * Self.second)
        _ = session.receive(.pingresp, nowNs: 59 * Self.second)
        let lost = session.keepAlive(nowNs: 60 * Self.second)
        #expect(empty == .idle && noted == .idle && deadline == 10 * Self.second, "the PINGREQ first, the acknowledgement at 36 s")
        #expect(acknowledged == .acknowledged(packetID: first) && waiting == .ping)
        #expect(lost == .failed(.unacknowledged), "seq 2 (id \(second)) waited 30 s after the last acknowledgement")
        // Emptied in time: nothing to give up.
        var calm = Self.open(pingIntervalNs: 0)
        let only = calm.window.add(sequence: 1)
        _ = calm.keepAlive(nowNs: 1 * Self.second)
        _ = calm.receive(.puback(packetID: only), nowNs: 2 * Self.second)
        let later = calm.keepAlive(nowNs: 100 * Self.second)
        let none = calm.keepAliveDeadlineNs
        #expect(later == .idle && none == nil)
    }

    @Test func noKeepAliveWithAZeroInterval() {
        var session = Self.open(pingIntervalNs: 0)
        let deadline = session.keepAliveDeadlineNs
        let keepAlive = session.keepAlive(nowNs: 1_000 * Self.second)
        #expect(deadline == nil && keepAlive == .idle)
    }

    @Test func theBackoffDoublesUntilTheFirstAcknowledgement() {
        var session = Self.session()
        // random 256: the base delay (in 1/1024 steps).
        let first = session.lost(now: MonotonicInstant(nanoseconds: 0), random: 256)
        let early = session.mayConnect(at: MonotonicInstant(nanoseconds: first.delayNs - 1))
        let due = session.mayConnect(at: MonotonicInstant(nanoseconds: first.delayNs))
        session.attempting()
        let second = session.lost(now: MonotonicInstant(nanoseconds: Self.second), random: 256)
        _ = session.connect(Self.options())
        _ = session.receive(.connack(sessionPresent: false, code: 0), nowNs: 0)
        let id = session.window.add(sequence: 7)
        _ = session.receive(.puback(packetID: id), nowNs: 1)
        let afterOpen = session.lost(now: MonotonicInstant(nanoseconds: 10 * Self.second), random: 256)
        let phase = session.phase
        let queued = session.output.count
        #expect(first.delayNs == Self.second / 1024 * 1024 && !first.wasOpen && !early && due)
        #expect(second.delayNs == 2 * Self.second / 1024 * 1024)
        #expect(afterOpen.delayNs == first.delayNs && afterOpen.wasOpen && phase == .closed && queued == 0)
    }

    @Test func acknowledgementsLeaveTheWindow() {
        var session = Self.open()
        let id = session.window.add(sequence: 7)
        let unknown = session.receive(.puback(packetID: id &+ 1), nowNs: 1)
        let known = session.receive(.puback(packetID: id), nowNs: 1)
        let emptied = session.window.isEmpty
        let subscription = session.window.add(sequence: 0)
        let subscribed = session.receive(.suback(packetID: subscription, refused: true), nowNs: 2)
        let emptiedAgain = session.window.isEmpty
        let message = session.receive(.publish(qos: .atLeastOnce, packetID: 9), nowNs: 3)
        #expect(unknown == .unknownAcknowledgement(packetID: id &+ 1) && known == .acknowledged(packetID: id) && emptied)
        #expect(subscribed == .subscribed(packetID: subscription, refused: true) && emptiedAgain)
        #expect(message == .message(qos: .atLeastOnce, packetID: 9))
    }

    @Test func receivingAllocatesNothing() {
        var session = Self.open()
        let id = session.window.add(sequence: 1)
        let count = allocations {
            _ = session.receive(.puback(packetID: id), nowNs: 1)
            _ = session.receive(.pingresp, nowNs: 2)
            _ = session.keepAlive(nowNs: 3)
            session.sent(nowNs: 4)
        }
        #expect(count == 0)
    }
}
