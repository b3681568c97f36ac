import LocusCore
import LocusDevices

/// One connection to the broker, made step by step inside the poll loop so that nothing ever
/// waits on the network while GPIO, Bluetooth and GNSS wait on it:
///
///     name lookup (/etc/hosts, then DNS over UDP) -> TCP to each address in turn
///     -> TLS handshake, certificate and host name verified -> CONNECT -> CONNACK -> open
///
/// Then MQTT packets both ways, with PINGREQ when the connection has been quiet for the
/// keep-alive. The uplink keeps one for the agent's life and starts it again after a failure;
/// `locus uplink test` drives one and prints each step. Buffers are allocated once, here.
final class BrokerConnection {
    enum Phase: Equatable { case idle, resolving, connecting, handshaking, accepting, open }

    /// A step of the connect sequence done, for the agent's log and `locus uplink test`.
    enum Step {
        case resolved([IPAddress], fromHostsFile: Bool)
        case connected(IPAddress, UInt16)
        case secured(String)
        case accepted(sessionPresent: Bool)
    }

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

    /// What the broker sent that its user acts on, copied out of the read buffer.
    enum Incoming: Equatable {
        case acknowledged(UInt16)
        case subscribed(UInt16, refused: Bool)
        /// "online" on homeassistant/status (Home Assistant started).
        case homeAssistantOnline
        // The connection's own, handled as they are read (never returned by `nextIncoming`).
        case connack(sessionPresent: Bool, code: UInt8)
        case pingresp
        case message(online: Bool, qos: MQTT.QoS, packetID: UInt16)
        case none
    }

    /// The most packets one read can hold (the smallest, PINGRESP, is 2 bytes).
    static let incomingCapacity = inputBytes / 2

    private(set) var phase: Phase = .idle
    var settings: Settings
    /// Packets waiting to go out; written by the uplink, sent by `flush`.
    var output: MQTTWriter
    private var framer = MQTTFramer(maximumPacketBytes: BrokerConnection.inputBytes)
    private let input = UnsafeMutableRawBufferPointer.allocate(byteCount: BrokerConnection.inputBytes, alignment: 8)
    /// Packets read and not yet taken (`nextIncoming`), oldest at `incomingHead`.
    private let incoming = UnsafeMutableBufferPointer<Incoming>.allocate(capacity: BrokerConnection.incomingCapacity)
    private var incomingHead = 0
    private var incomingCount = 0
    private var lookup: NameLookup? = nil
    private var datagrams: [DatagramSocket] = []
    private var datagramIndices: [PollSet.Index?] = []
    private var addresses: [IPAddress] = []
    private var addressIndex = 0
    private var tcp: TCPConnection? = nil
    private var tls: TLSSession? = nil
    private(set) var stream: BrokerStream? = nil
    private var streamIndex: PollSet.Index? = nil
    /// TLS asked to be called again when the socket can take more.
    private var wantsWrite = false
    private var startedNs: Int64 = 0
    private var lastSentNs: Int64 = 0
    private var pingSentNs: Int64? = nil
    /// The address connected to (for status).
    private(set) var peer: IPAddress? = nil

    init(settings: Settings, outputBytes: Int) {
        self.settings = settings
        output = MQTTWriter(capacity: outputBytes)
    }

    deinit {
        input.deallocate()
        incoming.deallocate()
    }

    /// The next packet read, oldest first.
    func nextIncoming() -> Incoming? {
        while incomingCount > 0 {
            let packet = incoming[incomingHead]
            incomingHead = (incomingHead + 1) % incoming.count
            incomingCount -= 1
            if packet != .none { return packet }
        }
        return nil
    }

    var isOpen: Bool { phase == .open }

    // MARK: the loop's surface

    var maximumDescriptors: Int { 3 }

    func register(in poll: inout PollSet) {
        datagramIndices.removeAll(keepingCapacity: true)
        streamIndex = nil
        switch phase {
        case .idle:
            break
        case .resolving:
            for socket in datagrams { datagramIndices.append(poll.add(socket.descriptor)) }
        case .connecting:
            streamIndex = poll.add(tcp?.descriptor, write: true)
        case .handshaking:
            streamIndex = poll.add(tcp?.descriptor, write: wantsWrite)
        case .accepting, .open:
            streamIndex = poll.add(stream?.descriptor, write: wantsWrite || output.count > 0)
        }
    }

    /// When something is due without input: the lookup's next server, the connect sequence's
    /// end, the next PINGREQ or the PINGRESP's end.
    func deadlineNs() -> Int64? {
        switch phase {
        case .idle: return nil
        case .resolving: return min(lookup?.deadlineNs ?? Int64.max, startedNs + settings.timeoutNs)
        case .connecting, .handshaking, .accepting: return startedNs + settings.timeoutNs
        case .open:
            // TLS holds decrypted bytes a read had no room for: the socket will not wake us.
            if let stream, stream.pending > 0 { return 0 }
            guard settings.connect.keepAliveS > 0 else { return nil }
            if let pingSentNs { return pingSentNs + settings.timeoutNs }
            return lastSentNs + Int64(settings.connect.keepAliveS) * 1_000_000_000
        }
    }

    // MARK: connecting

    /// Starts a connect sequence (closing what was open).
    func start(nowNs: Int64) -> String? {
        close()
        startedNs = nowNs
        if let address = settings.broker.address {
            addresses = [address]
            return connectNext(nowNs)
        }
        let hosts = (try? Files.read(settings.hostsPath, limit: 1 << 20)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let found = HostsFile.addresses(of: settings.broker.host, in: hosts)
        if !found.isEmpty {
            addresses = found
            pendingSteps.append(.resolved(found, fromHostsFile: true))
            return connectNext(nowNs)
        }
        let conf = (try? Files.read(settings.resolvConfPath, limit: 1 << 20)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let configuration = ResolverConfiguration.parse(conf)
        lookup = NameLookup(name: settings.broker.host, configuration: configuration, hosts: [], port: settings.nameServerPort,
                            randomID: { UInt16.random(in: 0...UInt16.max) }, nowNs: nowNs)
        phase = .resolving
        return sendQueries()
    }

    /// Steps done since the last `takeSteps` (the loop reports them after its service).
    private var pendingSteps: [Step] = []

    func takeSteps(_ body: (Step) -> Void) {
        for step in pendingSteps { body(step) }
        pendingSteps.removeAll(keepingCapacity: true)
    }

    private func sendQueries() -> String? {
        guard let lookup else { return nil }
        while let query = lookup.nextQuery() {
            guard let socket = datagramSocket(for: query.server.family) else {
                return fail("cannot open a UDP socket to ask \(query.server) for \(settings.broker.host)")
            }
            let problem = query.bytes.withUnsafeBytes { socket.send($0, to: query.server, port: query.port) }
            if let problem {
                // Like a server that does not answer: the lookup's timeout moves to the next.
                AgentLog.warning("locus: uplink: asking \(query.server) for \(settings.broker.host): \(problem)")
            }
        }
        return nil
    }

    private func datagramSocket(for family: IPAddress.Family) -> DatagramSocket? {
        if let socket = datagrams.first(where: { $0.family == family }) { return socket }
        guard let socket = try? DatagramSocket(family: family) else { return nil }
        datagrams.append(socket)
        return socket
    }

    private func resolved(_ outcome: NameLookup.Outcome, _ nowNs: Int64) -> String? {
        lookup = nil
        datagrams.removeAll()
        switch outcome {
        case .failed(let why): return fail(why)
        case .addresses(let found):
            addresses = found
            pendingSteps.append(.resolved(found, fromHostsFile: false))
            return connectNext(nowNs)
        }
    }

    /// TCP to the next address; after the last, the sequence fails with the last reason.
    private func connectNext(_ nowNs: Int64, after problem: String? = nil) -> String? {
        tcp = nil
        guard addressIndex < addresses.count else {
            return fail(problem ?? "no address to connect to")
        }
        let address = addresses[addressIndex]
        addressIndex += 1
        do {
            tcp = try TCPConnection(to: address, port: settings.broker.port)
        } catch {
            return connectNext(nowNs, after: "cannot connect to \(endpoint(address)): \(error)")
        }
        phase = .connecting
        if tcp?.isConnected == true { return connected(nowNs) }
        return nil
    }

    private func endpoint(_ address: IPAddress) -> String {
        address.family == .v6 ? "[\(address)]:\(settings.broker.port)" : "\(address):\(settings.broker.port)"
    }

    private func connected(_ nowNs: Int64) -> String? {
        guard let tcp else { return nil }
        peer = tcp.address
        pendingSteps.append(.connected(tcp.address, settings.broker.port))
        guard let configuration = settings.tls else {
            stream = .plain(tcp)
            return sendConnect(nowNs)
        }
        do {
            tls = try TLSSession(configuration: configuration, connection: tcp, hostName: settings.broker.host)
        } catch {
            return fail(error.message)
        }
        phase = .handshaking
        return handshake(nowNs)
    }

    private func handshake(_ nowNs: Int64) -> String? {
        guard let tls else { return nil }
        switch tls.handshake() {
        case .done:
            pendingSteps.append(.secured(tls.agreed))
            wantsWrite = false
            stream = .tls(tls)
            return sendConnect(nowNs)
        case .wouldBlock(let write):
            wantsWrite = write
            return nil
        case .failed(let error):
            return fail(error.message)
        }
    }

    private func sendConnect(_ nowNs: Int64) -> String? {
        phase = .accepting
        framer.reset()
        output.reset()
        guard output.connect(settings.connect) else { return fail("the CONNECT packet does not fit (client id, user name or will too long)") }
        return flush(nowNs)
    }

    // MARK: servicing

    /// What the turn brought: the connect sequence's next step, or packets from the broker (for
    /// `nextIncoming`). Returns why the connection ended, when it did.
    func service(_ poll: borrowing PollSet, nowNs: Int64) -> String? {
        switch phase {
        case .idle:
            return nil
        case .resolving:
            for (index, socket) in datagrams.enumerated() where index < datagramIndices.count && poll.readable(datagramIndices[index]) {
                while let datagram = socket.receive(into: input) {
                    guard case .success(let got) = datagram, let lookup else { break }
                    if let outcome = lookup.received(UnsafeRawBufferPointer(rebasing: input[0..<got.count]), from: got.source,
                                                     sourcePort: got.port, nowNs: nowNs) {
                        return resolved(outcome, nowNs)
                    }
                }
            }
            if let outcome = lookup?.tick(nowNs: nowNs) { return resolved(outcome, nowNs) }
            if let problem = sendQueries() { return problem }
        case .connecting:
            if poll.writable(streamIndex) || poll.readable(streamIndex), let tcp {
                if let error = tcp.finishConnecting() {
                    let endpoint = self.endpoint(tcp.address)
                    if let problem = connectNext(nowNs, after: "cannot connect to \(endpoint): \(error)") { return problem }
                } else if let problem = connected(nowNs) {
                    return problem
                }
            }
        case .handshaking:
            if poll.readable(streamIndex) || poll.writable(streamIndex), let problem = handshake(nowNs) { return problem }
        case .accepting, .open:
            if poll.writable(streamIndex) { wantsWrite = false }
            if let problem = readPackets(nowNs) { return problem }
            if let problem = flush(nowNs) { return problem }
        }
        return timeouts(nowNs)
    }

    private func timeouts(_ nowNs: Int64) -> String? {
        switch phase {
        case .idle:
            return nil
        case .open:
            guard settings.connect.keepAliveS > 0 else { return nil }
            if let pingSentNs {
                if nowNs - pingSentNs >= settings.timeoutNs {
                    return fail("the broker did not answer PINGREQ within \(settings.timeoutNs / 1_000_000_000) s")
                }
            } else if nowNs - lastSentNs >= Int64(settings.connect.keepAliveS) * 1_000_000_000 && output.pingreq() {
                pingSentNs = nowNs
                return flush(nowNs)
            }
            return nil
        case .resolving, .connecting, .handshaking, .accepting:
            guard nowNs - startedNs >= settings.timeoutNs else { return nil }
            return fail("\(phaseText) \(settings.broker) took longer than \(settings.timeoutNs / 1_000_000_000) s")
        }
    }

    private var phaseText: String {
        switch phase {
        case .idle, .open: return "connecting to"
        case .resolving: return "looking up"
        case .connecting: return "the TCP connection to"
        case .handshaking: return "the TLS handshake with"
        case .accepting: return "waiting for CONNACK from"
        }
    }

    /// Everything the stream has, through the framer; stops when it would block, or when the
    /// packets not yet taken leave no room for another read's.
    private func readPackets(_ nowNs: Int64) -> String? {
        guard let stream else { return nil }
        // Bounded: a turn reads at most 64 buffers, so a flooding broker cannot hold the loop.
        for _ in 0..<64 where incomingCount == 0 {
            switch stream.receive(into: input) {
            case .bytes(let count):
                var problem: MQTTProtocolError? = nil
                var packets = 0
                let queue = incoming
                let head = incomingHead
                let failure = framer.consume(UnsafeRawBufferPointer(rebasing: input[0..<count])) { packet in
                    guard problem == nil else { return }
                    problem = BrokerPackets.decode(packet, into: queue, at: (head + packets) % queue.count, &packets)
                }
                if let failure { return fail("the broker sent a malformed packet (\(failure))") }
                if let problem { return fail("the broker broke the protocol: \(problem)") }
                for index in 0..<packets {
                    if let problem = accept(at: (incomingHead + index) % incoming.count, nowNs) { return problem }
                }
                incomingCount = packets
            case .wouldBlock(let write):
                if write { wantsWrite = true }
                return nil
            case .closed:
                return fail(phase == .accepting ? "the broker closed the connection before CONNACK (not an MQTT broker, or a TLS listener on a plain URL?)"
                                                : "the broker closed the connection")
            case .failed(let why):
                return fail(why)
            }
        }
        return nil
    }

    /// A decoded packet: the connection's own (CONNACK, PINGRESP, a message to acknowledge) are
    /// handled here and become `.none`; the rest stay for `nextIncoming`.
    private func accept(at slot: Int, _ nowNs: Int64) -> String? {
        switch incoming[slot] {
        case .connack(let sessionPresent, let code):
            guard phase == .accepting else { return fail("the broker sent a second CONNACK") }
            guard code == 0 else { return fail("the broker refused the connection: \(MQTT.explain(connectReturnCode: code))") }
            phase = .open
            lastSentNs = nowNs
            pendingSteps.append(.accepted(sessionPresent: sessionPresent))
            incoming[slot] = .none
            return nil
        case .pingresp:
            pingSentNs = nil
            incoming[slot] = .none
        case .message(let online, let qos, let packetID):
            if qos != .atMostOnce { _ = output.puback(packetID: packetID) }
            incoming[slot] = online ? .homeAssistantOnline : .none
        case .acknowledged, .subscribed, .homeAssistantOnline, .none:
            break
        }
        return phase == .open ? nil : fail("the broker sent a packet before CONNACK")
    }

    /// Sends what the output holds, as far as the socket takes it.
    func flush(_ nowNs: Int64) -> String? {
        guard let stream else { return nil }
        while output.count > 0 {
            switch stream.send(output.bytes) {
            case .bytes(let count):
                output.drop(count)
                lastSentNs = nowNs
            case .wouldBlock:
                wantsWrite = true
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
    func close() {
        stream?.close()
        stream = nil
        tls = nil
        tcp = nil
        lookup = nil
        datagrams.removeAll()
        addresses = []
        addressIndex = 0
        wantsWrite = false
        pingSentNs = nil
        peer = nil
        output.reset()
        incomingHead = 0
        incomingCount = 0
        phase = .idle
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
            queue[slot] = .connack(sessionPresent: sessionPresent, code: code)
        case .success(.puback(let packetID)):
            queue[slot] = .acknowledged(packetID)
        case .success(.suback(let packetID, _, let refused)):
            queue[slot] = .subscribed(packetID, refused: refused)
        case .success(.pingresp):
            queue[slot] = .pingresp
        case .success(.publish(let message)):
            let online = message.topic.elementsEqual(BrokerPackets.homeAssistantStatusBytes)
                && message.payload.count == 6 && message.payload[0] == 0x6F && message.payload[5] == 0x65 // "online"
            queue[slot] = .message(online: online, qos: message.qos, packetID: message.packetID)
        case .success:
            return nil // QoS 2 acknowledgements and UNSUBACK: nothing this client asked for
        }
        packets += 1
        return nil
    }
}
