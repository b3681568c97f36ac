/// One host name's lookup as a stub resolver makes it, without I/O, so the agent can run it
/// inside its poll loop: the caller sends what `nextQuery` gives over UDP, hands back what
/// arrives (`received`) and calls `tick` when `deadlineNs` passes.
///
/// Rules (resolv.conf(5), RFC 1035 §7.2, RFC 5452): `/etc/hosts` first (the caller passes its
/// answer to `init`); then A, and AAAA only when the name has no A record; the servers in the
/// file's order, each query waiting `timeout` seconds, `attempts` rounds over them; an answer
/// counts only from the server asked, with the query's random id and its question (name, type,
/// class). A name that does
/// not exist (NXDOMAIN) ends the lookup at once; a server failure moves to the next server.
public final class NameLookup {
    public enum Outcome: Equatable {
        case addresses([IPAddress])
        /// Why there is no address, in words for the uplink's status and log.
        case failed(String)
    }

    public struct Query {
        public let server: IPAddress
        public let port: UInt16
        public let bytes: [UInt8]
    }

    public let name: String
    private let configuration: ResolverConfiguration
    private let port: UInt16
    private var type = DNSMessage.RecordType.a
    /// Which server and round the current query is in.
    private var serverIndex = 0
    private var round = 0
    private var id: UInt16
    private var nextID: () -> UInt16
    private var pendingQuery: Query? = nil
    public private(set) var deadlineNs: Int64? = nil
    public private(set) var outcome: Outcome? = nil
    /// Answers ignored: from another address, with another id or question, or malformed.
    public private(set) var ignored = 0
    private var lastProblem = "no name server answered"
    /// An answer's addresses as read (a length byte and 16 address bytes each); at most
    /// `keptAddresses` are kept.
    static let keptAddresses = 16
    private let answers = UnsafeMutableRawBufferPointer.allocate(byteCount: NameLookup.keptAddresses * 17, alignment: 1)

    /// `hosts`: what /etc/hosts says of the name (an answer there ends the lookup). `randomID`
    /// gives each query's id; `port` is the name servers' (53; tests use another).
    public init(name: String, configuration: ResolverConfiguration, hosts: [IPAddress], port: UInt16 = 53,
                randomID: @escaping () -> UInt16, nowNs: Int64) {
        self.name = name
        self.configuration = configuration
        self.port = port
        nextID = randomID
        id = randomID()
        if !hosts.isEmpty {
            outcome = .addresses(hosts)
        } else {
            prepare(nowNs)
        }
    }

    deinit { answers.deallocate() }

    /// The query to send now, once (nil: none due).
    public func nextQuery() -> Query? {
        defer { pendingQuery = nil }
        return pendingQuery
    }

    /// A datagram from `source`: the lookup's outcome when it ends it, else nil.
    public func received(_ message: UnsafeRawBufferPointer, from source: IPAddress, sourcePort: UInt16, nowNs: Int64) -> Outcome? {
        guard outcome == nil, source == configuration.nameServers[serverIndex], sourcePort == port else {
            ignored += 1
            return nil
        }
        // The answer's addresses go to a buffer allocated once: the reader allocates nothing,
        // and neither may what it calls.
        var count = 0
        let buffer = answers
        var text = name
        let result = text.withUTF8 { name in
            DNSMessage.addresses(in: message, id: id, type: type, name: UnsafeRawBufferPointer(name)) { bytes, _ in
                // Raw bytes only (a length, then the address) into the buffer allocated at
                // start: nothing generic may run inside the allocation-checked reader.
                guard count < NameLookup.keptAddresses, bytes.count <= 16 else { return }
                let slot = count * 17
                buffer[slot] = UInt8(truncatingIfNeeded: bytes.count)
                if let source = bytes.baseAddress, let target = buffer.baseAddress {
                    (target + slot + 1).copyMemory(from: source, byteCount: bytes.count)
                }
                count += 1
            }
        }
        var found: [IPAddress] = []
        for index in 0..<count {
            let start: Int = index * 17 + 1
            let length: Int = Int(answers[index * 17])
            let bytes = UnsafeRawBufferPointer(rebasing: answers[start..<(start + length)])
            if let address = IPAddress(bytes: bytes) { found.append(address) }
        }
        switch result {
        case .success:
            return finish(.addresses(found))
        case .failure(.nameNotFound):
            return finish(.failed("\(name) does not exist (the name server \(source) says NXDOMAIN)"))
        case .failure(.noAddress) where type == .a:
            type = .aaaa
            id = nextID()
            round = 0
            prepare(nowNs)
            return nil
        case .failure(.noAddress):
            return finish(.failed("\(name) has no address (no A or AAAA record)"))
        case .failure(.notOurs), .failure(.malformed):
            ignored += 1
            return nil
        case .failure(.truncated):
            lastProblem = "the answer for \(name) from \(source) was truncated"
            return advance(nowNs)
        case .failure(.serverFailure(let code)):
            lastProblem = "the name server \(source) could not answer for \(name) (RCODE \(code))"
            return advance(nowNs)
        case .failure(.badName):
            return finish(.failed("'\(name)' is not a valid host name"))
        }
    }

    /// Time passing: a query that waited its timeout moves to the next server or round.
    public func tick(nowNs: Int64) -> Outcome? {
        guard outcome == nil, let deadlineNs, nowNs >= deadlineNs else { return nil }
        lastProblem = "no answer from \(configuration.nameServers[serverIndex]) within \(configuration.timeoutS) s"
        return advance(nowNs)
    }

    // MARK: internals

    private func advance(_ nowNs: Int64) -> Outcome? {
        serverIndex += 1
        if serverIndex == configuration.nameServers.count {
            serverIndex = 0
            round += 1
        }
        guard round < configuration.attempts else {
            return finish(.failed("cannot resolve \(name): \(lastProblem) (\(configuration.attempts) rounds over \(configuration.nameServers.count) name servers)"))
        }
        id = nextID()
        prepare(nowNs)
        return nil
    }

    private func prepare(_ nowNs: Int64) {
        var bytes = [UInt8](repeating: 0, count: DNSMessage.maximumQueryBytes)
        var text = name
        let written = bytes.withUnsafeMutableBytes { buffer in
            text.withUTF8 { DNSMessage.query(id: id, name: UnsafeRawBufferPointer($0), type: type, into: buffer) }
        }
        guard case .success(let length) = written else {
            outcome = .failed("'\(name)' is not a valid host name")
            deadlineNs = nil
            return
        }
        pendingQuery = Query(server: configuration.nameServers[serverIndex], port: port, bytes: Array(bytes[0..<length]))
        deadlineNs = nowNs + Int64(configuration.timeoutS) * 1_000_000_000
    }

    private func finish(_ result: Outcome) -> Outcome {
        outcome = result
        deadlineNs = nil
        pendingQuery = nil
        return result
    }
}
