import LocusCore
import LocusDevices

/// One connection to the broker: the way there (`BrokerTransport`: lookup, TCP, TLS), the MQTT
/// session on it (`MQTTSession`: CONNECT and CONNACK, keep-alive, the window of QoS 1 messages,
/// the reconnect backoff), and the reading of the broker's packets between them, all stepped
/// inside the poll loop so that nothing ever waits on the network:
///
///     transport ready -> CONNECT -> CONNACK -> open: packets both ways, PINGREQ when quiet
///
/// The uplink keeps one for the agent's life and starts it again after a failure; `locus uplink
/// test` drives one and prints each step. Buffers are allocated once, here.
final class BrokerConnection {
    /// The transport's phases, then the session's.
    enum Phase: Equatable { case idle, resolving, connecting, handshaking, accepting, open }

    typealias Step = BrokerTransport.Step

    struct Settings {
        var broker: BrokerAddress
        /// Set for `mqtts://`.
        var tls: TLSConfiguration?
        var connect: MQTTConnectOptions
        /// How long the whole connect sequence, and an unanswered PINGREQ, may take.
        var timeoutNs: Int64 = 10_000_000_000
        /// The name servers' port (53; tests use their own).
        var nameServerPort: UInt16 = 53
        var resolvConfPath = "/etc/resolv.conf"
        var hostsPath = "/etc/hosts"
    }

    static let inputBytes = 4096

    /// A packet read, in the queue between the framer and the user: first as decoded, then as
    /// the session took it (`nextIncoming` hands over what its user acts on).
    enum Incoming: Equatable {
        /// Decoded, not yet through the session; `homeAssistantOnline`: "online" on
        /// homeassistant/status (Home Assistant started).
        case packet(MQTTSession.Packet, homeAssistantOnline: Bool)
        case acknowledged(UInt16)
        /// A PUBACK for no message in flight: a broker's mistake, counted, never acted on.
        case unknownAcknowledgement(UInt16)
        case subscribed(UInt16, refused: Bool)
        case homeAssistantOnline
        /// A message from the fleet (docs/remote.md), its bytes in the connection's remote inbox
        /// until `releaseRemote`.
        case remote(RemoteInbox.Message)
        /// The session's own (CONNACK, PINGRESP, a message acknowledged): nothing to hand over.
        case none
    }

    /// The most packets one read can hold (the smallest, PINGRESP, is 2 bytes).
    static let incomingCapacity = inputBytes / 2

    private let transport: BrokerTransport
    /// CONNECT and CONNACK, keep-alive, the window, the backoff; its output is written by the
    /// uplink and sent by `flush`.
    var session: MQTTSession
    private var framer = MQTTFramer(maximumPacketBytes: BrokerConnection.inputBytes)
    private let input = UnsafeMutableRawBufferPointer.allocate(byteCount: BrokerConnection.inputBytes, alignment: 8)
    /// Packets read and not yet taken (`nextIncoming`), oldest at `incomingHead`.
    private let incoming = UnsafeMutableBufferPointer<Incoming>.allocate(capacity: BrokerConnection.incomingCapacity)
    private var incomingHead = 0
    private var incomingCount = 0
    /// Where the fleet's messages are kept from their read until the loop has handled them
    /// (`remoteTopic`: `<prefix>/remote/`; nil: the uplink takes nothing from the fleet).
    private let remote: RemoteInbox?
    /// Remote messages handed over and not yet released: no read until they are (their bytes
    /// would be overwritten).
    private var remoteHeld = 0
    /// Connections started: a remote message is acknowledged on the connection that brought it.
    private var connections = 0

    /// `outputBytes`: the output queue; `windowCapacity`: QoS 1 messages in flight at most;
    /// `remoteTopic` and `remoteBytes`: the fleet's topics and its largest message.
    init(settings: Settings, outputBytes: Int, windowCapacity: Int, remoteTopic: [UInt8]? = nil, remoteBytes: Int = 0) {
        transport = BrokerTransport(settings: settings)
        session = MQTTSession(outputBytes: outputBytes, windowCapacity: windowCapacity,
                              pingIntervalNs: Int64(settings.connect.keepAliveS) * 1_000_000_000, answerTimeoutNs: settings.timeoutNs)
        // A PUBLISH from the fleet: its payload, the topic and the headers.
        let largest = remoteTopic.map { remoteBytes + $0.count + 64 } ?? 0
        framer = MQTTFramer(maximumPacketBytes: max(BrokerConnection.inputBytes, largest))
        // One read completes at most the packet the framer was assembling and one input's worth.
        remote = remoteTopic.map { RemoteInbox(topic: $0, bytes: largest + BrokerConnection.inputBytes) }
    }

    deinit {
        input.deallocate()
        incoming.deallocate()
        remote?.deallocate()
    }

    var settings: Settings {
        get { transport.settings }
        set { transport.settings = newValue }
    }

    var phase: Phase {
        switch session.phase {
        case .open: return .open
        case .accepting: return .accepting
        case .closed:
            switch transport.phase {
            case .idle, .ready: return .idle
            case .resolving: return .resolving
            case .connecting: return .connecting
            case .handshaking: return .handshaking
            }
        }
    }

    var isOpen: Bool { session.isOpen }

    /// The address connected to (for status).
    var peer: IPAddress? { transport.peer }

    /// Packets waiting to go out (the session's).
    var output: MQTTWriter {
        _read { yield session.output }
        _modify { yield &session.output }
    }

    func takeSteps(_ body: (Step) -> Void) { transport.takeSteps(body) }

    /// The next packet read, oldest first.
    func nextIncoming() -> Incoming? {
        while incomingCount > 0 {
            let packet = incoming[incomingHead]
            incomingHead = (incomingHead + 1) % incoming.count
            incomingCount -= 1
            switch packet {
            case .none, .packet: continue
            case .remote:
                remoteHeld += 1
                return packet
            case .acknowledged, .unknownAcknowledgement, .subscribed, .homeAssistantOnline: return packet
            }
        }
        return nil
    }

    /// A remote message handled (or given up): its bytes may go; PUBACK when `acknowledge` and
    /// the connection that brought it is still open (else the broker sends it again).
    func releaseRemote(_ message: RemoteInbox.Message, acknowledge: Bool) {
        precondition(remoteHeld > 0, "only a message handed over is released")
        remoteHeld -= 1
        if acknowledge && message.qos != .atMostOnce && session.isOpen && message.connection == connections {
            _ = session.output.puback(packetID: message.packetID)
        }
    }

    /// The bytes of a remote message handed over and not yet released.
    func remoteBytes(_ message: RemoteInbox.Message) -> UnsafeRawBufferPointer {
        precondition(remoteHeld > 0, "a remote message's bytes are read while it is held")
        return remote!.bytes(message)
    }

    // MARK: the loop's surface

    var maximumDescriptors: Int { 3 }

    func register(in poll: inout PollSet) { transport.register(in: &poll, output: session.output.count > 0) }

    /// When something is due without input: the lookup's next server, the connect sequence's
    /// end, the next PINGREQ or the PINGRESP's end.
    func deadlineNs() -> Int64? {
        switch session.phase {
        case .closed: return transport.deadlineNs()
        case .accepting: return transport.startedNs + settings.timeoutNs
        case .open:
            // TLS holds decrypted bytes a read had no room for: the socket will not wake us.
            if let stream = transport.stream, stream.pending > 0 { return 0 }
            return session.keepAliveDeadlineNs
        }
    }

    // MARK: connecting

    /// Starts a connect sequence (closing what was open).
    func start(nowNs: Int64) -> String? {
        close()
        connections += 1
        session.attempting()
        if let problem = transport.start(nowNs: nowNs) { return fail(problem) }
        return connectWhenReady(nowNs)
    }

    /// The transport became ready: CONNECT goes out.
    private func connectWhenReady(_ nowNs: Int64) -> String? {
        guard transport.phase == .ready && session.phase == .closed else { return nil }
        framer.reset()
        guard session.connect(settings.connect) else { return fail("the CONNECT packet does not fit (client id, user name or will too long)") }
        return flush(nowNs)
    }

    // MARK: servicing

    /// What the turn brought: the connect sequence's next step, or packets from the broker (for
    /// `nextIncoming`). Returns why the connection ended, when it did.
    func service(_ poll: borrowing PollSet, nowNs: Int64) -> String? {
        if session.phase == .closed {
            if let problem = transport.service(poll, nowNs: nowNs, buffer: input) { return fail(problem) }
            return connectWhenReady(nowNs)
        }
        if poll.writable(transport.streamIndex) { transport.wantsWrite = false }
        if let problem = readPackets(nowNs) { return problem }
        if let problem = flush(nowNs) { return problem }
        return timeouts(nowNs)
    }

    private func timeouts(_ nowNs: Int64) -> String? {
        switch session.phase {
        case .closed:
            return nil
        case .accepting:
            guard nowNs - transport.startedNs >= settings.timeoutNs else { return nil }
            return fail("waiting for CONNACK from \(settings.broker) took longer than \(settings.timeoutNs / 1_000_000_000) s")
        case .open:
            switch session.keepAlive(nowNs: nowNs) {
            case .idle: return nil
            case .ping: return flush(nowNs)
            case .failed(.unacknowledged): return fail("\(MQTTSession.Failure.unacknowledged) (\(session.acknowledgementTimeoutNs / 1_000_000_000) s)")
            case .failed(let failure): return fail("\(failure) within \(settings.timeoutNs / 1_000_000_000) s")
            }
        }
    }

    /// Everything the stream has, through the framer; stops when it would block, or when the
    /// packets not yet taken leave no room for another read's.
    private func readPackets(_ nowNs: Int64) -> String? {
        guard let stream = transport.stream else { return nil }
        // Bounded: a turn reads at most 64 buffers, so a flooding broker cannot hold the loop.
        for _ in 0..<64 where incomingCount == 0 && remoteHeld == 0 {
            switch stream.receive(into: input) {
            case .bytes(let count):
                var problem: MQTTProtocolError? = nil
                var packets = 0
                let queue = incoming
                let head = incomingHead
                var inbox = remote
                inbox?.used = 0
                let connection = connections
                let failure = framer.consume(UnsafeRawBufferPointer(rebasing: input[0..<count])) { packet in
                    guard problem == nil else { return }
                    if let taken = inbox?.take(packet, connection: connection) {
                        queue[(head + packets) % queue.count] = .remote(taken)
                        packets += 1
                        return
                    }
                    problem = BrokerPackets.decode(packet, into: queue, at: (head + packets) % queue.count, &packets)
                }
                if let failure { return fail("the broker sent a malformed packet (\(failure))") }
                if let problem { return fail("the broker broke the protocol: \(problem)") }
                for index in 0..<packets {
                    if let problem = accept(at: (incomingHead + index) % incoming.count, nowNs) { return problem }
                }
                incomingCount = packets
            case .wouldBlock(let write):
                if write { transport.wantsWrite = true }
                return nil
            case .closed:
                return fail(session.phase == .accepting ? "the broker closed the connection before CONNACK (not an MQTT broker, or a TLS listener on a plain URL?)"
                                                        : "the broker closed the connection")
            case .failed(let why):
                return fail(why)
            }
        }
        return nil
    }

    /// A decoded packet through the session: what its user acts on stays in the queue, the rest
    /// becomes `.none`. A message at QoS 1 is acknowledged at once (the uplink keeps nothing of it).
    private func accept(at slot: Int, _ nowNs: Int64) -> String? {
        guard case .packet(let packet, let homeAssistantOnline) = incoming[slot] else { return nil }
        switch session.receive(packet, nowNs: nowNs) {
        case .handled:
            incoming[slot] = .none
        case .accepted(let sessionPresent):
            transport.record(.accepted(sessionPresent: sessionPresent))
            incoming[slot] = .none
        case .acknowledged(let packetID):
            incoming[slot] = .acknowledged(packetID)
        case .unknownAcknowledgement(let packetID):
            incoming[slot] = .unknownAcknowledgement(packetID)
        case .subscribed(let packetID, let refused):
            incoming[slot] = .subscribed(packetID, refused: refused)
        case .message(let qos, let packetID):
            if qos != .atMostOnce { _ = session.output.puback(packetID: packetID) }
            incoming[slot] = homeAssistantOnline ? .homeAssistantOnline : .none
        case .failed(let failure):
            return fail("\(failure)")
        }
        return nil
    }

    /// Sends what the output holds, as far as the socket takes it.
    func flush(_ nowNs: Int64) -> String? {
        guard let stream = transport.stream else { return nil }
        while session.output.count > 0 {
            switch stream.send(session.output.bytes) {
            case .bytes(let count):
                session.output.drop(count)
                session.sent(nowNs: nowNs)
            case .wouldBlock:
                transport.wantsWrite = true
                return nil
            case .closed:
                return fail("the broker closed the connection")
            case .failed(let why):
                return fail(why)
            }
        }
        return nil
    }

    // MARK: the end

    /// Ends the attempt or the connection: the reason is returned for the caller to report.
    private func fail(_ reason: String) -> String {
        close()
        return reason
    }

    /// Closes everything (a graceful goodbye, when wanted, is the caller's DISCONNECT first).
    /// The session's window keeps what was in flight for its user (`MQTTSession.lost`).
    func close() {
        transport.close()
        session.disconnected()
        incomingHead = 0
        incomingCount = 0
    }
}

/// The fleet's messages (PUBLISH on `<prefix>/remote/config` and `/command`) copied out of the
/// framer as they are read, into bytes allocated once, until the loop has handled them.
struct RemoteInbox {
    enum Kind: Equatable { case config, command, other }

    /// One message: where its payload is in the inbox, and how to acknowledge it.
    struct Message: Equatable {
        var kind: Kind
        var qos: MQTT.QoS
        var packetID: UInt16
        var offset: Int
        var count: Int
        /// The connection it came on (`BrokerConnection.connections`).
        var connection: Int
    }

    private let topic: UnsafeMutableRawBufferPointer
    private let storage: UnsafeMutableRawBufferPointer
    /// Bytes taken since the last read began.
    var used = 0

    init(topic: [UInt8], bytes: Int) {
        self.topic = .allocate(byteCount: topic.count, alignment: 1)
        self.topic.copyBytes(from: topic)
        storage = .allocate(byteCount: bytes, alignment: 8)
    }

    func deallocate() {
        topic.deallocate()
        storage.deallocate()
    }

    func bytes(_ message: Message) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: storage[message.offset..<(message.offset + message.count)])
    }

    /// The packet's payload copied in, when it is a PUBLISH under the remote topic; nil for any
    /// other packet (the connection decodes those), or when it does not parse (likewise).
    @_noAllocation
    mutating func take(_ packet: UnsafeRawBufferPointer, connection: Int) -> Message? {
        guard packet.count > 0, packet[0] >> 4 == 3, case .success(.publish(let message)) = MQTTPacket.decode(packet) else { return nil }
        let prefix = UnsafeRawBufferPointer(topic)
        guard message.topic.count > prefix.count, message.topic.starts(with: prefix) else { return nil }
        let suffix = UnsafeRawBufferPointer(rebasing: message.topic[prefix.count...])
        var kind = Kind.other
        let config: StaticString = "config", command: StaticString = "command"
        if suffix.elementsEqual(UnsafeRawBufferPointer(start: config.utf8Start, count: config.utf8CodeUnitCount)) {
            kind = .config
        } else if suffix.elementsEqual(UnsafeRawBufferPointer(start: command.utf8Start, count: command.utf8CodeUnitCount)) {
            kind = .command
        }
        let count = min(message.payload.count, storage.count - used)
        precondition(used + count <= storage.count, "a remote message fits the inbox")
        if count > 0 { (storage.baseAddress! + used).copyMemory(from: message.payload.baseAddress!, byteCount: count) }
        defer { used += count }
        // A payload cut short by a full inbox cannot pass its signature check: refused, not lost
        // in silence (the framer bounds a message by the remote size, so it does not happen).
        return Message(kind: kind, qos: message.qos, packetID: message.packetID, offset: used, count: count, connection: connection)
    }
}

/// Broker packets decoded into what the connection and the uplink act on, inside the framer's
/// callback (a plain enum: the callback may reach no object, as it allocates nothing).
enum BrokerPackets {
    /// Where Home Assistant says "online" when it starts (its discovery's birth message): the
    /// uplink subscribes to it, and a message there is recognised as it is read.
    static let homeAssistantStatus: StaticString = "homeassistant/status"
    static var homeAssistantStatusBytes: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: homeAssistantStatus.utf8Start, count: homeAssistantStatus.utf8CodeUnitCount)
    }

    /// One packet decoded into `queue[slot]` (`packets` counts them).
    @_noAllocation
    static func decode(_ bytes: UnsafeRawBufferPointer, into queue: UnsafeMutableBufferPointer<BrokerConnection.Incoming>, at slot: Int,
                               _ packets: inout Int) -> MQTTProtocolError? {
        switch MQTTPacket.decode(bytes) {
        case .failure(let error):
            return error
        case .success(.connack(let sessionPresent, let code)):
            queue[slot] = .packet(.connack(sessionPresent: sessionPresent, code: code), homeAssistantOnline: false)
        case .success(.puback(let packetID)):
            queue[slot] = .packet(.puback(packetID: packetID), homeAssistantOnline: false)
        case .success(.suback(let packetID, _, let refused)):
            queue[slot] = .packet(.suback(packetID: packetID, refused: refused), homeAssistantOnline: false)
        case .success(.pingresp):
            queue[slot] = .packet(.pingresp, homeAssistantOnline: false)
        case .success(.publish(let message)):
            let online = message.topic.elementsEqual(BrokerPackets.homeAssistantStatusBytes)
                && message.payload.count == 6 && message.payload[0] == 0x6F && message.payload[5] == 0x65 // "online"
            queue[slot] = .packet(.publish(qos: message.qos, packetID: message.packetID), homeAssistantOnline: online)
        case .success:
            return nil // QoS 2 acknowledgements and UNSUBACK: nothing this client asked for
        }
        packets += 1
        return nil
    }
}
