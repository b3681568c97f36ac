import LocusCore
import LocusDevices

/// The way to the broker, made step by step inside the poll loop so that nothing ever waits on
/// the network while GPIO, Bluetooth and GNSS wait on it:
///
///     name lookup (/etc/hosts, then DNS over UDP) -> TCP to each address in turn
///     -> TLS handshake, certificate and host name verified -> ready (a `BrokerStream`)
///
/// It knows nothing of MQTT: `BrokerConnection` puts the MQTT session on the stream once it is
/// ready. Fifteen stored properties, each the state of one step (the lookup's sockets and their
/// poll slots, the addresses tried, the TCP connection, the TLS session, the stream), the
/// settings and the steps done for the log.
final class BrokerTransport {
    enum Phase: Equatable { case idle, resolving, connecting, handshaking, ready }

    /// A step of the connect sequence done, for the agent's log and `locus uplink test`.
    enum Step {
        case resolved([IPAddress], fromHostsFile: Bool)
        case connected(IPAddress, UInt16)
        case secured(String)
        case accepted(sessionPresent: Bool)
    }

    private(set) var phase: Phase = .idle
    var settings: BrokerConnection.Settings
    private var lookup: NameLookup? = nil
    private var datagrams: [DatagramSocket] = []
    private var datagramIndices: [PollSet.Index?] = []
    private var addresses: [IPAddress] = []
    private var addressIndex = 0
    private var tcp: TCPConnection? = nil
    private var tls: TLSSession? = nil
    private(set) var stream: BrokerStream? = nil
    private(set) var streamIndex: PollSet.Index? = nil
    /// TLS asked to be called again when the socket can take more.
    var wantsWrite = false
    /// When the connect sequence started: it has `settings.timeoutNs` to reach an open session.
    private(set) var startedNs: Int64 = 0
    /// The address connected to (for status).
    private(set) var peer: IPAddress? = nil
    /// Steps done since the last `takeSteps` (the loop reports them after its service).
    private var pendingSteps: [Step] = []

    init(settings: BrokerConnection.Settings) {
        self.settings = settings
    }

    func takeSteps(_ body: (Step) -> Void) {
        for step in pendingSteps { body(step) }
        pendingSteps.removeAll(keepingCapacity: true)
    }

    /// The MQTT session's step, reported in order with the transport's.
    func record(_ step: Step) { pendingSteps.append(step) }

    // MARK: the loop's surface

    func register(in poll: inout PollSet, output: Bool) {
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
        case .ready:
            streamIndex = poll.add(stream?.descriptor, write: wantsWrite || output)
        }
    }

    /// The lookup's next server or the connect sequence's end (nil when idle or ready).
    func deadlineNs() -> Int64? {
        switch phase {
        case .idle, .ready: return nil
        case .resolving: return min(lookup?.deadlineNs ?? Int64.max, startedNs + settings.timeoutNs)
        case .connecting, .handshaking: return startedNs + settings.timeoutNs
        }
    }

    // MARK: connecting

    /// Starts a connect sequence (closing what was open). Returns why it failed, if it did.
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
                            randomID: { UInt16(truncatingIfNeeded: Randomness.next()) }, nowNs: nowNs)
        phase = .resolving
        return sendQueries()
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
            phase = .ready
            return nil
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
            phase = .ready
            return nil
        case .wouldBlock(let write):
            wantsWrite = write
            return nil
        case .failed(let error):
            return fail(error.message)
        }
    }

    // MARK: servicing

    /// The connect sequence's next step when the turn brought one; returns why it failed, if it
    /// did. Nothing to do once ready (the stream is the connection's). `buffer`: room for a
    /// name server's answer (the connection's read buffer, unused until the stream is ready).
    func service(_ poll: borrowing PollSet, nowNs: Int64, buffer: UnsafeMutableRawBufferPointer) -> String? {
        switch phase {
        case .idle, .ready:
            return nil
        case .resolving:
            if let problem = serviceLookup(poll, nowNs, buffer) { return problem }
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
        }
        return timeout(nowNs)
    }

    /// The name servers' answers, the lookup's timeouts, and the queries it wants sent next.
    private func serviceLookup(_ poll: borrowing PollSet, _ nowNs: Int64, _ buffer: UnsafeMutableRawBufferPointer) -> String? {
        for (index, socket) in datagrams.enumerated() where index < datagramIndices.count && poll.readable(datagramIndices[index]) {
            while let datagram = socket.receive(into: buffer) {
                guard case .success(let got) = datagram, let lookup else { break }
                if let outcome = lookup.received(UnsafeRawBufferPointer(rebasing: buffer[0..<got.count]), from: got.source,
                                                 sourcePort: got.port, nowNs: nowNs) {
                    return resolved(outcome, nowNs)
                }
            }
        }
        if let outcome = lookup?.tick(nowNs: nowNs) { return resolved(outcome, nowNs) }
        return sendQueries()
    }

    private func timeout(_ nowNs: Int64) -> String? {
        guard phase != .idle && phase != .ready, nowNs - startedNs >= settings.timeoutNs else { return nil }
        return fail("\(Self.describe(phase)) \(settings.broker) took longer than \(settings.timeoutNs / 1_000_000_000) s")
    }

    /// The step a timeout ended, as the message names it.
    private static func describe(_ phase: Phase) -> StaticString {
        switch phase {
        case .idle, .ready: return "connecting to"
        case .resolving: return "looking up"
        case .connecting: return "the TCP connection to"
        case .handshaking: return "the TLS handshake with"
        }
    }

    // MARK: the end

    /// Ends the attempt or the connection: the reason is returned for the caller to report.
    func fail(_ reason: String) -> String {
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
        peer = nil
        phase = .idle
    }
}
