import LocusCore
import LocusDevices

/// The ingest's source on a NATS cluster (docs/fleet.md, "A clustered broker"): the gateways
/// publish over MQTT to any node, NATS keeps each QoS 1 message in the replicated JetStream
/// stream `$MQTT_msgs`, and the ingest reads that stream through one durable pull consumer
/// (`locus-ingest` by default) that all its workers share, whichever node each is connected to:
///
///     worker --MSG.NEXT {batch, expires}--> consumer --messages--> batch --COMMIT--> +ACK, PING
///
/// As with MQTT, a message is acknowledged only once its batch has committed; one not
/// acknowledged within the consumer's `ack_wait` (a worker killed, a node lost or stalled) is
/// delivered again, to any worker, and meets its own row if it was stored. The consumer is
/// replicated with the stream, so it outlives any one node, and it keeps the messages of a
/// worker that is away: the stream drops a message only once the consumer has its
/// acknowledgement (the MQTT stream's interest retention).
///
/// Blocking calls with deadlines on one socket, as `FleetBroker`; the client protocol is NATS's
/// text protocol over TCP, without TLS (the ingest's nodes are on the fleet's own network).
final class JetStreamSource: IngestSource {
    struct Settings: Equatable {
        var nodes: [NATSAddress]
        /// The durable consumer the workers share.
        var durable = "locus-ingest"
        /// The subjects read: the MQTT prefix's (`$MQTT.msgs.locus.*.>`).
        var filter: String
        /// How long a delivered message waits for its acknowledgement before it goes again.
        var ackWaitMs: Int64 = 30_000
        /// Messages delivered and not yet acknowledged, across all workers, at most.
        var maxAckPending = 20_000
        /// Messages a pull asks for (the ingest's batch).
        var batch = 1_000
        /// The client's name in the server's connection list.
        var name = "locus-fleet"
        var timeoutMs: Int32 = 10_000
        /// How long a pull waits at the server for messages before it ends empty.
        var pullExpiresMs: Int64 = 1_000
        /// A PING when nothing was sent for this long (the server's own PING is every 2 min).
        var pingIntervalMs: Int64 = 15_000
        /// A PING unanswered this long means the node is lost or stalled.
        var pongTimeoutMs: Int64 = 10_000
    }

    let settings: Settings
    let node: NATSAddress
    let peer: String
    private let tcp: TCPConnection
    private var parser = NATSParser(maximumPayload: FleetBroker.maximumPacketBytes)
    private var input = [UInt8](repeating: 0, count: 64 * 1024)
    private var output: [UInt8] = []
    /// This connection's reply subjects are under it.
    private let inbox: String
    /// The pull request waiting at the server: its reply subject, the messages it may still
    /// bring, when it was sent.
    private var pull: (subject: String, remaining: Int, sentMs: Int64)? = nil
    private var pulls = 0
    /// No pull before this (after JetStream said it cannot serve one now).
    private var nextPullMs: Int64 = 0
    /// Each delivered message's acknowledgement subject, by the tag the batch holds for it.
    private var unacknowledged: [UInt16: String] = [:]
    private var nextTag: UInt16 = 1
    private var lastSentMs = FleetClock.monotonicMs()
    private var pingSentMs: Int64? = nil
    private var early: [FleetBroker.Incoming] = []
    /// Messages the consumer held for the workers when this one connected.
    private(set) var waiting: Int = 0

    /// Connects, reads INFO, sends CONNECT and waits for the PONG that says it was accepted,
    /// subscribes to the inbox, and creates the durable consumer (or finds it as configured).
    init(_ settings: Settings, node: NATSAddress) throws(FleetError) {
        self.settings = settings
        self.node = node
        inbox = "_INBOX.locus.\(Randomness.next() & 0xFFFF_FFFF_FFFF)"
        let deadline = FleetClock.monotonicMs() + Int64(settings.timeoutMs)
        let made = try FleetBroker.connect(to: node.resolvable, named: node.description, deadline: deadline)
        tcp = made
        peer = "\(made.address):\(made.port)"
        guard case .info = try nextOperation(until: deadline, what: "INFO") else { throw FleetError("\(node): the server did not start with INFO (is this a NATS client port?)") }
        let connect = #"{"verbose":false,"pedantic":false,"tls_required":false,"name":"\#(settings.name)","lang":"swift","version":"locus","protocol":1,"headers":true,"no_responders":true}"#
        output += Array("CONNECT \(connect)\r\nPING\r\nSUB \(inbox).> 1\r\n".utf8)
        try flush(deadline: deadline)
        while true {
            switch try nextOperation(until: deadline, what: "PONG after CONNECT") {
            case .pong: break
            case .error(let text): throw FleetError("\(node): the server refused the connection: \(text)")
            default: continue
            }
            break
        }
        try createConsumer(deadline: deadline)
    }

    var description: String { "\(node) (\(peer))" }

    // MARK: the consumer

    /// `$JS.API.CONSUMER.DURABLE.CREATE`: made on the first worker's start, found by the others
    /// (the same configuration is no change); a refusal (JetStream not ready yet, another
    /// filter under the same name) is thrown with the server's words.
    private func createConsumer(deadline: Int64) throws(FleetError) {
        let config = #"{"stream_name":"\#(NATSSubjects.mqttStream)","config":{"durable_name":"\#(settings.durable)","deliver_policy":"all","ack_policy":"explicit","ack_wait":\#(settings.ackWaitMs * 1_000_000),"max_deliver":-1,"filter_subject":"\#(settings.filter)","replay_policy":"instant","max_ack_pending":\#(settings.maxAckPending),"max_waiting":512}}"#
        let reply = "\(inbox).api"
        publish("$JS.API.CONSUMER.DURABLE.CREATE.\(NATSSubjects.mqttStream).\(settings.durable)", reply: reply, payload: Array(config.utf8))
        try flush(deadline: deadline)
        while true {
            guard case .message(let subject, _, _, let headers, let payload) = try nextOperation(until: deadline, what: "the consumer's creation"),
                  subject == reply else { continue }
            if NATSParser.status(headers) == 503 { throw FleetError("\(node): JetStream is not answering (not ready yet, or the node has lost its cluster)") }
            let answer: JSONValue
            do { answer = try JSONParser.parse(payload) } catch { throw FleetError("\(node): the consumer's creation answered \(error)") }
            if let error = answer["error"] {
                let text = error["description"]?.string ?? "an error"
                let code = error["err_code"]?.integer(in: 0...1_000_000).map { " (\($0))" } ?? ""
                throw FleetError("\(node): JetStream refused the consumer \(settings.durable) on \(NATSSubjects.mqttStream): \(text)\(code)")
            }
            waiting = Int(answer["num_pending"]?.integer(in: 0...Int64.max) ?? 0)
            return
        }
    }

    // MARK: the ingest's surface

    func takeEarly() -> [FleetBroker.Incoming] {
        defer { early.removeAll() }
        return early
    }

    /// Asks for the next messages when no pull is waiting, waits up to `timeoutMs` for bytes,
    /// then hands over the messages they complete. A lost connection or a server's error throws.
    func read(timeoutMs: Int32) throws(FleetError) -> [FleetBroker.Incoming] {
        let now = FleetClock.monotonicMs()
        // A pull neither answered nor expired a second past the server's own expiry (the
        // consumer's leader stalled or lost, and the request with it): asked again, so a
        // worker on a live node does not sit out an election while another takes the backlog.
        // With a PING: the silence may be this worker's own node stalling, which the pulls,
        // keeping the connection busy, would otherwise hide from `keepAlive`. (An end that came
        // unread while a batch committed is then ignored: it names the old pull.)
        if let current = pull, now - current.sentMs > settings.pullExpiresMs + Self.pullGraceMs {
            pull = nil
            ping()
        }
        if pull == nil && now >= nextPullMs { requestMessages(now) }
        try flush(deadline: now + Int64(settings.timeoutMs))
        let waitMs = pull == nil ? max(0, min(Int64(timeoutMs), nextPullMs - now)) : Int64(timeoutMs)
        switch tcp.descriptor.wait(until: .readable, timeoutMs: Int32(waitMs)) {
        case .success(true): break
        case .success(false), .failure(.interrupted): return takeEarly()
        case .failure(let error): throw FleetError("poll: \(error)")
        }
        try receiveOnce()
        while let operation = try parser.next() { try handle(operation) }
        try flush(deadline: FleetClock.monotonicMs() + Int64(settings.timeoutMs))
        return takeEarly()
    }

    var hasInput: Bool { (try? tcp.descriptor.wait(until: .readable, timeoutMs: 0).get()) == true }

    /// How long past its expiry a pull may go unanswered before it is taken as lost.
    static let pullGraceMs: Int64 = 1_000

    /// `+ACK` for each message, then a PING: its PONG says the server has read them all.
    func acknowledge(_ tags: [UInt16]) throws(FleetError) {
        guard !tags.isEmpty else { return }
        for tag in tags {
            guard let subject = unacknowledged.removeValue(forKey: tag) else { continue }
            publish(subject, reply: nil, payload: Array("+ACK".utf8))
        }
        ping()
        try flush(deadline: FleetClock.monotonicMs() + Int64(settings.timeoutMs))
    }

    /// A PING when nothing was sent for `pingIntervalMs`; throws when one has waited the timeout
    /// for its PONG (the node is gone, stalled or cut off).
    func keepAlive() throws(FleetError) {
        let now = FleetClock.monotonicMs()
        if let sent = pingSentMs {
            if now - sent >= settings.pongTimeoutMs { throw FleetError("\(node): no PONG in \(settings.pongTimeoutMs / 1000) s: the node is lost or stalled") }
            return
        }
        guard now - lastSentMs >= settings.pingIntervalMs else { return }
        ping()
        try flush(deadline: now + Int64(settings.timeoutMs))
    }

    /// Nothing to say: the socket closes when the object goes, and what was delivered and not
    /// acknowledged goes again after `ack_wait`.
    func disconnect() {}

    // MARK: operations

    private func handle(_ operation: NATSParser.Operation) throws(FleetError) {
        switch operation {
        case .ping: output += Array("PONG\r\n".utf8)
        case .pong: pingSentMs = nil
        case .ok, .info: break
        case .error(let text): throw FleetError("\(node): the server said: \(text)")
        case .message(let subject, _, _, let headers, _):
            if tookDelivery(operation) { return }
            if let status = NATSParser.status(headers) { try pullStatus(status, subject: subject, headers: headers) }
        }
    }

    /// A message the consumer delivered (no status, an acknowledgement subject) is kept for the
    /// ingest: true. Anything else is left to the caller.
    private func tookDelivery(_ operation: NATSParser.Operation) -> Bool {
        guard case .message(let subject, _, let reply?, let headers, let payload) = operation, NATSParser.status(headers) == nil,
              reply.hasPrefix("$JS.ACK.") else { return false }
        if let topic = NATSSubjects.topic(subject: subject) { delivered(topic: topic, ack: reply, payload: payload) }
        return true
    }

    /// A status on a pull's reply subject: the pull is over (404 nothing now, 408 expired), or
    /// JetStream cannot serve it now (409 a limit, 503 no responder: the next pull waits half a
    /// second), or the consumer is gone (409 Consumer Deleted: connect again to make it).
    private func pullStatus(_ status: Int, subject: String, headers: [UInt8]) throws(FleetError) {
        guard status != 100 else { return } // an idle heartbeat
        let text = String(decoding: headers.prefix(while: { $0 != 0x0D }), as: UTF8.self)
        if status == 409 && text.contains("Deleted") { throw FleetError("\(node): \(text): the consumer was deleted") }
        guard subject == pull?.subject else { return }
        pull = nil
        if status != 404 && status != 408 { nextPullMs = FleetClock.monotonicMs() + 500 }
    }

    private func delivered(topic: String, ack: String, payload: [UInt8]) {
        let tag = nextTag
        nextTag = nextTag == UInt16.max ? 1 : nextTag + 1
        unacknowledged[tag] = ack
        if var current = pull {
            current.remaining -= 1
            pull = current.remaining > 0 ? current : nil
        }
        let kept = payload.count > FleetBroker.keptPayloadBytes ? Array(payload.prefix(FleetBroker.keptPayloadBytes)) : payload
        early.append(.publish(FleetBroker.Message(topic: topic, payload: kept, payloadBytes: payload.count, qos: .atLeastOnce,
                                                  packetID: tag, retained: false, duplicate: (NATSSubjects.deliveries(ackSubject: ack) ?? 1) > 1,
                                                  storedUs: NATSSubjects.storedUs(ackSubject: ack))))
    }

    private func requestMessages(_ nowMs: Int64) {
        pulls += 1
        let subject = "\(inbox).pull.\(pulls)"
        let request = #"{"batch":\#(settings.batch),"expires":\#(settings.pullExpiresMs * 1_000_000)}"#
        publish("$JS.API.CONSUMER.MSG.NEXT.\(NATSSubjects.mqttStream).\(settings.durable)", reply: subject, payload: Array(request.utf8))
        pull = (subject, settings.batch, nowMs)
    }

    private func publish(_ subject: String, reply: String?, payload: [UInt8]) {
        output += Array("PUB \(subject)\(reply.map { " \($0)" } ?? "") \(payload.count)\r\n".utf8)
        output += payload
        output += [0x0D, 0x0A]
    }

    private func ping() {
        output += Array("PING\r\n".utf8)
        if pingSentMs == nil { pingSentMs = FleetClock.monotonicMs() }
    }

    // MARK: bytes

    private func flush(deadline: Int64) throws(FleetError) {
        var sent = 0
        while sent < output.count {
            let transfer = output.withUnsafeBytes { tcp.send(UnsafeRawBufferPointer(rebasing: $0[sent...])) }
            switch transfer {
            case .bytes(let count): sent += count
            case .wouldBlock: try wait(.writable, until: deadline, what: "sending")
            case .closed: throw FleetError("\(node): the server closed the connection")
            case .failed(let reason): throw FleetError("\(node): sending: \(reason)")
            }
        }
        if sent > 0 { lastSentMs = FleetClock.monotonicMs() }
        output.removeAll(keepingCapacity: true)
    }

    /// One read into the parser.
    private func receiveOnce() throws(FleetError) {
        let transfer = input.withUnsafeMutableBytes { tcp.receive(into: $0) }
        switch transfer {
        case .bytes(let count): input.withUnsafeBytes { parser.consume(UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        case .wouldBlock: break
        case .closed: throw FleetError("\(node): the server closed the connection")
        case .failed(let reason): throw FleetError("\(node): reading: \(reason)")
        }
    }

    /// The next operation, reading until the deadline; messages read meanwhile are kept for the
    /// ingest, PINGs answered.
    private func nextOperation(until deadline: Int64, what: String) throws(FleetError) -> NATSParser.Operation {
        while true {
            while let operation = try parser.next() {
                if tookDelivery(operation) { continue }
                guard operation == .ping else { return operation }
                output += Array("PONG\r\n".utf8)
                try flush(deadline: deadline)
            }
            try wait(.readable, until: deadline, what: "waiting for \(what)")
            try receiveOnce()
        }
    }

    private func wait(_ readiness: Descriptor.Readiness, until deadline: Int64, what: String) throws(FleetError) {
        try FleetBroker.wait(tcp.descriptor, readiness, until: deadline, timedOut: "\(node): no answer in \(settings.timeoutMs / 1000) s \(what)")
    }
}
