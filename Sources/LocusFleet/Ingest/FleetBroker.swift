import LocusCore
import LocusDevices

/// The ingest's connection to the broker: MQTT 3.1.1 over TCP or TLS, with LocusCore's codec
/// (`MQTTWriter` out, `MQTTPacket` in) and session (`MQTTSession`: CONNECT and CONNACK,
/// keep-alive, packet ids) and LocusDevices' sockets and mbedTLS session, the same the gateway's
/// uplink uses. A host program waits on one socket only, so each call blocks (LocusDevices'
/// `Descriptor.wait`, with a deadline) instead of stepping through a loop as the agent's
/// `BrokerConnection` does. Closed when the object goes.
///
/// Differences from the uplink, each the ingest's own policy: PINGREQ after half the keep-alive
/// (a batch's commit may hold the reading for a while), PUBACK only once a batch has committed,
/// and reconnecting on the ingest's own schedule (`Ingest.Settings.reconnectDelaysMs`).
final class FleetBroker {
    struct Settings {
        var broker: BrokerAddress
        /// Set for `mqtts://`.
        var tls: TLSConfiguration?
        var connect: MQTTConnectOptions
        /// The connect sequence, a write and an unanswered PINGREQ each have this long.
        var timeoutMs: Int32 = 10_000
        /// The output queue (a publisher's holds its largest message).
        var outputBytes = FleetBroker.outputBytes
    }

    /// What the broker sent the ingest acts on.
    enum Incoming {
        case publish(Message)
        case pingresp
    }

    /// A PUBLISH as received, copied out of the read buffer.
    struct Message {
        var topic: String
        /// The payload, or its first `FleetBroker.keptPayloadBytes` for an oversized message.
        var payload: [UInt8]
        /// The payload's whole size (more than `payload.count` when it was cut).
        var payloadBytes: Int
        var qos: MQTT.QoS
        /// 0 at QoS 0.
        var packetID: UInt16
        var retained: Bool
        var duplicate: Bool
        /// When the broker stored it (µs since 1970), where the broker says (NATS's JetStream).
        var storedUs: Int64? = nil
    }

    /// A packet larger than this is not decoded: its topic, packet id and first 64 KiB are kept
    /// and the rest read past, so one oversized message is quarantined and acknowledged instead
    /// of closing the connection again at each redelivery.
    static let maximumPacketBytes = 1 << 20
    static let keptPayloadBytes = 64 * 1024

    let settings: Settings
    private let stream: BrokerStream
    /// Keeps the TCP connection alive under a plain stream (the TLS session holds its own).
    private let tcp: TCPConnection
    private var framer = IngestFramer(maximumPacketBytes: FleetBroker.maximumPacketBytes, keptBytes: FleetBroker.keptPayloadBytes)
    private var input = [UInt8](repeating: 0, count: 64 * 1024)
    /// CONNECT and CONNACK, keep-alive, the subscriptions' packet ids, the output queue.
    private var session: MQTTSession
    /// The broker kept this client's session (its subscriptions and the messages queued while away).
    private(set) var sessionPresent = false
    let peer: String

    /// Resolves, connects (each address in turn), secures with TLS when asked, sends CONNECT and
    /// waits for an accepting CONNACK; each failure says which step and why.
    init(_ settings: Settings) throws(FleetError) {
        self.settings = settings
        let connect = settings.connect
        session = MQTTSession(outputBytes: max(settings.outputBytes, 512 + connect.clientID.count + (connect.username?.count ?? 0)
                                               + (connect.password?.count ?? 0) + (connect.will.map { $0.topic.count + $0.payload.count } ?? 0)),
                              windowCapacity: 2, pingIntervalNs: Int64(connect.keepAliveS) * 500_000_000,
                              answerTimeoutNs: Int64(settings.timeoutMs) * 1_000_000)
        let deadline = FleetClock.monotonicMs() + Int64(settings.timeoutMs)
        let made = try Self.connect(to: settings.broker, deadline: deadline)
        tcp = made
        peer = "\(made.address):\(made.port)"
        if let configuration = settings.tls {
            let session: TLSSession
            do {
                session = try TLSSession(configuration: configuration, connection: made, hostName: settings.broker.host)
            } catch {
                throw FleetError("\(settings.broker): TLS: \(error.message)")
            }
            try Self.handshake(session, deadline: deadline, broker: settings.broker)
            stream = .tls(session)
        } else {
            stream = .plain(made)
        }
        guard session.connect(settings.connect) else { throw FleetError("the client id, user name or password is too long for MQTT") }
        try sendOutput(deadline: deadline)
        while true {
            let packets = try receive(until: deadline, what: "CONNACK")
            guard let first = packets.first else { continue }
            guard case .connack(let sessionPresent, let code) = first else {
                throw FleetError("\(settings.broker): the broker answered CONNECT with another packet than CONNACK")
            }
            switch session.receive(.connack(sessionPresent: sessionPresent, code: code), nowNs: MonotonicClock.now()) {
            case .accepted(let sessionPresent):
                self.sessionPresent = sessionPresent
                return
            default:
                throw FleetError("\(settings.broker): CONNECT refused (code \(code)): \(MQTT.explain(connectReturnCode: code))")
            }
        }
    }

    /// The output queue: CONNECT, a SUBSCRIBE, a batch's PUBACKs (written in several sends when
    /// a batch has more than fit), PINGREQ, DISCONNECT.
    static let outputBytes = 64 * 1024

    deinit { stream.close() }

    /// SUBSCRIBE to each filter at QoS 1 and wait for each SUBACK. A refusal names the filter.
    func subscribe(_ filters: [String]) throws(FleetError) {
        let deadline = FleetClock.monotonicMs() + Int64(settings.timeoutMs)
        for filter in filters {
            // One subscription in flight at a time: the window holds its id until the SUBACK.
            let id = session.window.add(sequence: 0)
            session.output.reset()
            let written = Array(filter.utf8).withUnsafeBytes { session.output.subscribe(packetID: id, filter: $0, qos: .atLeastOnce) }
            guard written else { throw FleetError("the topic filter '\(filter)' is too long for MQTT") }
            try sendOutput(deadline: deadline)
            var granted: UInt8? = nil
            while granted == nil {
                // Messages may come before the SUBACK (a session's queue); they are kept for the caller.
                for packet in try receive(until: deadline, what: "SUBACK for \(filter)") {
                    guard case .suback(id, let grant, let refused) = packet else { continue }
                    _ = session.receive(.suback(packetID: id, refused: refused), nowNs: MonotonicClock.now())
                    granted = grant
                }
            }
            guard granted != 0x80 else {
                throw FleetError("\(settings.broker): the broker refused the subscription to '\(filter)' (check its ACL for this user)")
            }
        }
    }

    /// PUBLISH at QoS 1 and wait for its PUBACK: one message in flight (`config` and `command`
    /// publish a few, each acknowledged before the next).
    func publish(topic: String, payload: [UInt8], retain: Bool) throws(FleetError) {
        let deadline = FleetClock.monotonicMs() + Int64(settings.timeoutMs)
        let id = session.window.add(sequence: 0)
        session.output.reset()
        let written = Array(topic.utf8).withUnsafeBytes { name in
            payload.withUnsafeBytes { session.output.publish(topic: name, payload: $0, qos: .atLeastOnce, retain: retain, packetID: id) }
        }
        guard written else {
            _ = session.window.acknowledge(id)
            throw FleetError("the message for '\(topic)' (\(payload.count) bytes) is too large to send")
        }
        try sendOutput(deadline: deadline)
        while true {
            for packet in try receive(until: deadline, what: "PUBACK for \(topic)") {
                guard case .puback(let acknowledged) = packet, acknowledged == id else { continue }
                _ = session.receive(.puback(packetID: id), nowNs: MonotonicClock.now())
                return
            }
        }
    }

    /// Messages that arrived while waiting for a CONNACK or SUBACK.
    private(set) var early: [Incoming] = []

    func takeEarly() -> [Incoming] {
        defer { early.removeAll() }
        return early
    }

    /// Waits up to `timeoutMs` for bytes, then reads what has arrived: the packets it completes.
    /// A closed or broken connection, or a protocol violation, throws.
    func read(timeoutMs: Int32) throws(FleetError) -> [Incoming] {
        if stream.pending == 0 {
            switch stream.descriptor.wait(until: .readable, timeoutMs: timeoutMs) {
            case .success(true): break
            case .success(false), .failure(.interrupted): return []
            case .failure(let error): throw FleetError("poll: \(error)")
            }
        }
        var incoming: [Incoming] = []
        for packet in try readOnce() {
            switch packet {
            case .publish(let message):
                _ = session.receive(.publish(qos: message.qos, packetID: message.packetID), nowNs: MonotonicClock.now())
                incoming.append(.publish(message))
            case .pingresp:
                _ = session.receive(.pingresp, nowNs: MonotonicClock.now())
                incoming.append(.pingresp)
            default:
                throw FleetError("\(settings.broker): an unexpected packet from the broker (the ingest publishes nothing)")
            }
        }
        return incoming
    }

    /// True when bytes are waiting (a read would not block).
    var hasInput: Bool {
        if stream.pending > 0 { return true }
        return (try? stream.descriptor.wait(until: .readable, timeoutMs: 0).get()) == true
    }

    /// PUBACK for each id, in the order given (the order the messages came: §4.6), in one write.
    func acknowledge(_ packetIDs: [UInt16]) throws(FleetError) {
        guard !packetIDs.isEmpty else { return }
        let deadline = FleetClock.monotonicMs() + Int64(settings.timeoutMs)
        session.output.reset()
        for id in packetIDs where !session.output.puback(packetID: id) {
            // The output is full: what it holds goes first.
            try sendOutput(deadline: deadline)
            _ = session.output.puback(packetID: id)
        }
        try sendOutput(deadline: deadline)
    }

    /// PINGREQ when nothing was sent for half the keep-alive; throws when the last one went
    /// unanswered for the timeout (the broker or the path is gone).
    func keepAlive() throws(FleetError) {
        session.output.reset()
        switch session.keepAlive(nowNs: MonotonicClock.now()) {
        case .idle: return
        case .ping: try sendOutput(deadline: FleetClock.monotonicMs() + Int64(settings.timeoutMs))
        case .failed(.unacknowledged): throw FleetError("\(settings.broker): \(MQTTSession.Failure.unacknowledged)")
        case .failed: throw FleetError("\(settings.broker): no PINGRESP in \(settings.timeoutMs / 1000) s: the connection is lost")
        }
    }

    /// DISCONNECT, best effort: the broker then keeps the session and forgets no message.
    func disconnect() {
        session.output.reset()
        _ = session.output.disconnect()
        try? sendOutput(deadline: FleetClock.monotonicMs() + 1_000)
        session.disconnected()
    }

    // MARK: bytes

    /// Sends the whole output, waiting (until `deadline`) while the socket takes no more.
    private func sendOutput(deadline: Int64) throws(FleetError) {
        while session.output.count > 0 {
            switch stream.send(session.output.bytes) {
            case .bytes(let count): session.output.drop(count)
            case .wouldBlock(let wantsWrite):
                try wait(wantsWrite ? .writable : .readable, until: deadline, what: "sending to the broker")
            case .closed: throw FleetError("\(settings.broker): the broker closed the connection")
            case .failed(let reason): throw FleetError("\(settings.broker): sending: \(reason)")
            }
        }
        session.sent(nowNs: MonotonicClock.now())
    }

    /// Reads until at least one packet is complete or the deadline passes (for the handshake).
    private func receive(until deadline: Int64, what: String) throws(FleetError) -> [MQTTPacketCopy] {
        while true {
            if stream.pending == 0 { try wait(.readable, until: deadline, what: "waiting for \(what)") }
            let packets = try readOnce()
            var answers: [MQTTPacketCopy] = []
            for packet in packets {
                if case .publish(let message) = packet { early.append(.publish(message)) } else { answers.append(packet) }
            }
            if !answers.isEmpty { return answers }
        }
    }

    /// One read and the packets it completes.
    private func readOnce() throws(FleetError) -> [MQTTPacketCopy] {
        let transfer = input.withUnsafeMutableBytes { stream.receive(into: $0) }
        switch transfer {
        case .bytes(let count):
            var packets: [MQTTPacketCopy] = []
            var violation: String? = nil
            input.withUnsafeBytes { bytes in
                framer.consume(UnsafeRawBufferPointer(rebasing: bytes[0..<count])) { framed in
                    guard violation == nil else { return }
                    switch MQTTPacketCopy.make(framed) {
                    case .success(let packet): packets.append(packet)
                    case .failure(let error): violation = error.message
                    }
                }
            }
            if let failure = framer.failure { throw FleetError("\(settings.broker): \(failure) (protocol violation; connecting again)") }
            if let violation { throw FleetError("\(settings.broker): \(violation) (protocol violation; connecting again)") }
            return packets
        case .wouldBlock: return []
        case .closed: throw FleetError("\(settings.broker): the broker closed the connection")
        case .failed(let reason): throw FleetError("\(settings.broker): reading: \(reason)")
        }
    }

    private func wait(_ readiness: Descriptor.Readiness, until deadline: Int64, what: String) throws(FleetError) {
        try Self.wait(stream.descriptor, readiness, until: deadline,
                      timedOut: "\(settings.broker): no answer in \(settings.timeoutMs / 1000) s \(what)")
    }

    /// Waits until `descriptor` is ready, at most until `deadline` (monotonic ms), then throws
    /// `timedOut`; the broker's connection and the NATS source's share it.
    static func wait(_ descriptor: Descriptor, _ readiness: Descriptor.Readiness, until deadline: Int64,
                     timedOut: @autoclosure () -> String) throws(FleetError) {
        while true {
            let left = deadline - FleetClock.monotonicMs()
            guard left > 0 else { throw FleetError(timedOut()) }
            switch descriptor.wait(until: readiness, timeoutMs: Int32(min(left, 1_000))) {
            case .success(true): return
            case .success(false), .failure(.interrupted): continue
            case .failure(let error): throw FleetError("poll: \(error)")
            }
        }
    }

    // MARK: connecting

    /// The broker's addresses: the one written, or the host's resolver's (getaddrinfo(3):
    /// /etc/hosts, DNS, nsswitch).
    private static func resolve(_ broker: BrokerAddress, named name: String) throws(FleetError) -> [IPAddress] {
        if let address = broker.address { return [address] }
        switch HostResolver.addresses(of: broker.host) {
        case .failure(let error): throw FleetError("\(name): cannot resolve \(broker.host): \(error)")
        case .success(let addresses):
            guard !addresses.isEmpty else { throw FleetError("\(name): \(broker.host) has no address") }
            return addresses
        }
    }

    /// A TCP connection to the first of the broker's addresses that takes one; the failure
    /// names the server (`name`, by default the broker's address), each address and why.
    static func connect(to broker: BrokerAddress, named name: String? = nil, deadline: Int64) throws(FleetError) -> TCPConnection {
        let name = name ?? broker.description
        var failures: [String] = []
        for address in try resolve(broker, named: name) {
            do {
                return try connect(address, broker.port, deadline: deadline)
            } catch {
                failures.append("\(address): \(error.message)")
            }
        }
        throw FleetError("\(name): cannot connect (\(failures.joined(separator: "; ")))")
    }

    private static func connect(_ address: IPAddress, _ port: UInt16, deadline: Int64) throws(FleetError) -> TCPConnection {
        let connection: TCPConnection
        do { connection = try TCPConnection(to: address, port: port) } catch { throw FleetError("\(error)") }
        if connection.isConnected { return connection }
        while true {
            let left = deadline - FleetClock.monotonicMs()
            guard left > 0 else { throw FleetError("no answer (timed out)") }
            switch connection.descriptor.wait(until: .writable, timeoutMs: Int32(left)) {
            case .success(true): break
            case .success(false), .failure(.interrupted): continue
            case .failure(let error): throw FleetError("poll: \(error)")
            }
            break
        }
        if let failure = connection.finishConnecting() { throw FleetError("\(failure)") }
        return connection
    }

    private static func handshake(_ session: TLSSession, deadline: Int64, broker: BrokerAddress) throws(FleetError) {
        while true {
            let readiness: Descriptor.Readiness
            switch session.handshake() {
            case .done: return
            case .failed(let error): throw FleetError("\(broker): TLS: \(error.message)")
            case .wouldBlock(let wantsWrite): readiness = wantsWrite ? .writable : .readable
            }
            let left = deadline - FleetClock.monotonicMs()
            guard left > 0 else { throw FleetError("\(broker): TLS: no answer to the handshake (timed out)") }
            _ = session.connection.descriptor.wait(until: readiness, timeoutMs: Int32(left))
        }
    }
}

/// What the ingest reads from: an MQTT broker's session (`FleetBroker`) or a NATS cluster's
/// JetStream consumer (`JetStreamSource`). A message's `packetID` is the tag its
/// acknowledgement takes.
protocol IngestSource: AnyObject {
    /// Messages that came while connecting.
    func takeEarly() -> [FleetBroker.Incoming]
    func read(timeoutMs: Int32) throws(FleetError) -> [FleetBroker.Incoming]
    /// True when bytes are waiting (a read would not block).
    var hasInput: Bool { get }
    /// The messages stored: acknowledged, in the order they came.
    func acknowledge(_ tags: [UInt16]) throws(FleetError)
    func keepAlive() throws(FleetError)
    func disconnect()
}

extension FleetBroker: IngestSource {}

/// A packet from the broker copied out of the framer's buffer.
enum MQTTPacketCopy {
    case connack(sessionPresent: Bool, code: UInt8)
    case publish(FleetBroker.Message)
    case suback(UInt16, UInt8, Bool)
    case puback(UInt16)
    case pingresp
    case other

    static func make(_ framed: IngestFramer.Framed) -> Result<MQTTPacketCopy, FleetError> {
        switch framed {
        case .oversized(let head, let total):
            guard let message = IngestFramer.oversizedPublish(head, totalBytes: total) else {
                return .failure(FleetError("a packet of \(total) bytes that is not a PUBLISH"))
            }
            return .success(.publish(message))
        case .whole(let bytes):
            return bytes.withUnsafeBytes { packet in
                switch MQTTPacket.decode(packet) {
                case .failure(let error): return .failure(FleetError(error.description))
                case .success(.connack(let sessionPresent, let code)): return .success(.connack(sessionPresent: sessionPresent, code: code))
                case .success(.suback(let id, let grant, let refused)): return .success(.suback(id, grant, refused))
                case .success(.pingresp): return .success(.pingresp)
                case .success(.puback(let id)): return .success(.puback(id))
                case .success(.publish(let publish)):
                    guard publish.qos != .exactlyOnce else { return .failure(FleetError("a QoS 2 PUBLISH on a QoS 1 subscription")) }
                    return .success(.publish(FleetBroker.Message(
                        topic: String(decoding: publish.topic, as: UTF8.self), payload: Array(publish.payload),
                        payloadBytes: publish.payload.count, qos: publish.qos, packetID: publish.packetID,
                        retained: publish.retain, duplicate: publish.duplicate)))
                case .success: return .success(.other)
                }
            }
        }
    }
}

/// Milliseconds of LocusDevices' clocks: the monotonic one (deadlines) and the wall clock.
enum FleetClock {
    static func monotonicMs() -> Int64 { MonotonicClock.now() / 1_000_000 }
    static func wallMs() -> Int64 { Clock.realtimeNs() / 1_000_000 }
    static func wallUs() -> Int64 { Clock.realtimeNs() / 1_000 }
}
