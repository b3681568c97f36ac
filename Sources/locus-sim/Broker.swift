import Glibc
import LocusDevices

/// The fleet's MQTT broker as the simulator plays it (MQTT 3.1.1, one connection at a time), on a
/// TCP listener at 127.0.0.1: the agent's uplink reaches it through Linux, and the simulated
/// kernel's poll asks Linux about the uplink's socket at every turn, so what the broker writes
/// between two turns is read at the same simulated moment on every run.
///
/// It keeps every record the uplink published by sequence number, and its faults are the plan's:
/// refusing connections (hanging up at once, or CONNACK "server unavailable"), dropping the
/// connection in the middle of a window, holding PUBACKs back, and sending each one twice.
final class SimulatedBroker {
    struct Plan {
        enum Refusal { case hangUp, unavailable }
        /// Connections refused in [from, until).
        var down: [(fromS: Int, untilS: Int, refusal: Refusal)] = []
        /// The open connection dropped at these seconds.
        var drops: [Int] = []
        /// PUBACKs held back `delayS` in [from, until).
        var slow: [(fromS: Int, untilS: Int, delayS: Int)] = []
        /// Every PUBACK sent twice in [from, until).
        var duplicates: [(fromS: Int, untilS: Int)] = []
        var inflight = 16
        var keepaliveS = 60
    }

    /// A record as published: its topic and payload, and the members the checks read.
    struct Published: Equatable {
        var topic: String
        var payload: String
        var sequence: UInt64
        /// The previous published record's sequence number (nil: the payload has none).
        var previous: UInt64?
    }

    let plan: Plan
    let startNs: Int64
    /// The fleet's messages for the gateway (nil: the site has no `[remote]`).
    var remote: RemoteFeed? = nil
    private(set) var port: UInt16 = 0
    private var listener: Int32 = -1
    private var connection: Int32 = -1
    private var input: [UInt8] = []
    /// A refusing connection waits for its CONNECT to answer it.
    private var refusing = false
    /// PUBACKs held back: when each is due, and its packet id.
    private var held: [(dueNs: Int64, packetID: UInt16)] = []
    /// Every record received, by sequence number (its first copy).
    private(set) var records: [UInt64: Published] = [:]
    /// The sequence number of the last record on the open connection (they must increase).
    private var connectionLast: UInt64 = 0
    private var nextDrop = 0
    /// Connections accepted, copies received (first and again), refusals, drops: for the report.
    private(set) var tally: [String: Int] = [:]

    /// The faults as the report names them, and the counter each is tallied in.
    static let faultKinds = [("broker-refused-connection", "refusals"), ("broker-dropped-connection", "drops"),
                             ("puback-held-back", "pubacks-held"), ("puback-duplicated", "duplicate-pubacks")]

    init(_ plan: Plan, startNs: Int64) {
        self.plan = plan
        self.startNs = startNs
    }

    deinit { close() }

    /// Listens on 127.0.0.1 at a port Linux picks; the reason when it cannot.
    func listen() -> String? {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { return "socket: \(String(cString: strerror(errno)))" }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(listener, 4) == 0 else { return "bind or listen: \(String(cString: strerror(errno)))" }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        return nil
    }

    /// The broker's own descriptors (the simulator counts the agent's without them).
    var descriptors: Int { (listener >= 0 ? 1 : 0) + (connection >= 0 ? 1 : 0) }

    func close() {
        hangUp()
        if listener >= 0 { _ = Glibc.close(listener) }
        listener = -1
    }

    private func hangUp() {
        if connection >= 0 { _ = Glibc.close(connection) }
        connection = -1
        input.removeAll()
        held.removeAll()
        remote?.subscribed = false
    }

    private func seconds(_ nowNs: Int64) -> Int { Int((nowNs - startNs) / 1_000_000_000) }

    /// The run's end: no more faults, the backlog drains.
    var healed = false
    /// When the simulated kernel must wake for the broker (a PUBACK held back is due), taken by
    /// the simulator after each service.
    var wakes: [Int64] = []

    /// The moments the plan acts at (drops, windows' ends), for the simulated kernel to wake at.
    var moments: [Int] { plan.drops + plan.down.map(\.untilS) + plan.slow.map(\.untilS) + (remote?.moments ?? []) }

    /// Between two turns: drops due, a new connection, what arrived, PUBACKs due. The problem
    /// found in what the uplink sent, if any (a copy unlike the first, a record out of order).
    func service(nowNs: Int64) -> String? {
        let now = seconds(nowNs)
        while nextDrop < plan.drops.count, plan.drops[nextDrop] <= now {
            if connection >= 0, !healed { tally["drops", default: 0] += 1; hangUp() }
            nextDrop += 1
        }
        if connection < 0 { accept(now: now) }
        remote?.publishDue(now: now)
        guard connection >= 0 else { return nil }
        if let problem = receive(nowNs: nowNs) { return problem }
        if let remote, remote.subscribed { for message in remote.takeOutgoing() { send(message) } }
        while let first = held.first, first.dueNs <= nowNs {
            held.removeFirst()
            send([0x40, 0x02, UInt8(first.packetID >> 8), UInt8(first.packetID & 0xFF)])
        }
        return nil
    }

    private func accept(now: Int) {
        let accepted = Glibc.accept(listener, nil, nil)
        guard accepted >= 0 else { return }
        _ = fcntl(accepted, F_SETFL, fcntl(accepted, F_GETFL) | O_NONBLOCK)
        _ = fcntl(accepted, F_SETFD, FD_CLOEXEC)
        connection = accepted
        connectionLast = 0
        tally["connections", default: 0] += 1
        refusing = false
        guard !healed, let window = plan.down.first(where: { now >= $0.fromS && now < $0.untilS }) else { return }
        tally["refusals", default: 0] += 1
        switch window.refusal {
        case .hangUp: hangUp()
        case .unavailable: refusing = true
        }
    }

    /// Reads what the uplink sent and answers each whole packet.
    private func receive(nowNs: Int64) -> String? {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while connection >= 0 {
            let count = Glibc.read(connection, &buffer, buffer.count)
            if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) { hangUp(); return nil }
            if count < 0 { break }
            input += buffer[0..<count]
        }
        while let (type, body, size) = SimulatedBroker.packet(in: input) {
            input.removeFirst(size)
            if let problem = answer(type: type, body, nowNs: nowNs) { return problem }
            if connection < 0 { break }
        }
        return nil
    }

    /// One whole packet at the start of `bytes`: its type, its body, its whole size.
    static func packet(in bytes: [UInt8]) -> (UInt8, ArraySlice<UInt8>, Int)? {
        var length = 0, multiplier = 1, index = 1
        while true {
            guard index < bytes.count, index <= 4 else { return nil }
            length += Int(bytes[index] & 0x7F) * multiplier
            multiplier *= 128
            index += 1
            if bytes[index - 1] & 0x80 == 0 { break }
        }
        guard bytes.count >= index + length else { return nil }
        return (bytes[0], bytes[index..<(index + length)], index + length)
    }

    private func answer(type: UInt8, _ body: ArraySlice<UInt8>, nowNs: Int64) -> String? {
        switch type >> 4 {
        case 1:  // CONNECT: "unavailable" while refusing, else accepted (the session kept)
            if refusing {
                send([0x20, 0x02, 0x00, 0x03])
                hangUp()
            } else {
                send([0x20, 0x02, tally["sessions", default: 0] > 0 ? 0x01 : 0x00, 0x00])
                tally["sessions", default: 0] += 1
            }
        case 3:
            return publish(flags: type & 0x0F, body, nowNs: nowNs)
        case 8:  // SUBSCRIBE: every filter granted QoS 0
            let id = Array(body.prefix(2))
            var filters = 0, index = body.startIndex + 2
            while index + 2 <= body.endIndex {
                index += 2 + Int(body[index]) << 8 + Int(body[index + 1]) + 1
                filters += 1
            }
            send([0x90, UInt8(2 + filters)] + id + [UInt8](repeating: remote != nil && filterText(body).hasSuffix("/remote/+") ? 1 : 0, count: filters))
            // The retained configuration and the commands not yet acknowledged, after the SUBACK.
            if let remote, filterText(body).hasSuffix("/remote/+") {
                remote.subscribedAgain()
                for message in remote.takeOutgoing() { send(message) }
            }
        case 4:  // PUBACK of one of the fleet's messages
            if body.count >= 2 { remote?.acknowledged(UInt16(body[body.startIndex]) << 8 | UInt16(body[body.startIndex + 1])) }
        case 12:
            send([0xD0, 0x00])
        case 14:
            hangUp()
        default:
            break
        }
        return nil
    }

    /// A PUBLISH: a record kept by sequence number (a copy must equal the first), its PUBACK
    /// sent, held back or doubled as the plan says.
    private func publish(flags: UInt8, _ body: ArraySlice<UInt8>, nowNs: Int64) -> String? {
        let start = body.startIndex
        let topicLength = Int(body[start]) << 8 + Int(body[start + 1])
        let topic = String(decoding: body[(start + 2)..<(start + 2 + topicLength)], as: UTF8.self)
        let qos = (flags >> 1) & 0x03
        var payloadStart = start + 2 + topicLength
        var packetID: UInt16 = 0
        if qos > 0 {
            packetID = UInt16(body[payloadStart]) << 8 | UInt16(body[payloadStart + 1])
            payloadStart += 2
        }
        let payload = String(decoding: body[payloadStart...], as: UTF8.self)
        if let problem = keep(topic: topic, payload: payload) { return problem }
        guard qos == 1 else { return nil }
        let now = seconds(nowNs)
        if !healed, let slow = plan.slow.first(where: { now >= $0.fromS && now < $0.untilS }) {
            let dueNs = nowNs + Int64(slow.delayS) * 1_000_000_000
            held.append((dueNs, packetID))
            wakes.append(dueNs)
            tally["pubacks-held", default: 0] += 1
            return nil
        }
        let puback: [UInt8] = [0x40, 0x02, UInt8(packetID >> 8), UInt8(packetID & 0xFF)]
        send(puback)
        if !healed, plan.duplicates.contains(where: { now >= $0.fromS && now < $0.untilS }) {
            send(puback)
            tally["duplicate-pubacks", default: 0] += 1
        }
        return nil
    }

    /// The record topics (`<prefix>/event/...`, `gpio/...`, `visit`, `fix`) carry a record each:
    /// once by sequence number, in log order on a connection.
    private func keep(topic: String, payload: String) -> String? {
        let parts = topic.split(separator: "/")
        guard parts.count >= 3, ["event", "gpio", "visit", "fix", "config", "command"].contains(parts[2]) else { return nil }
        guard let sequence = SimulatedBroker.number("seq", in: payload) else { return "the broker got a record without a seq on \(topic): \(payload)" }
        let record = Published(topic: topic, payload: payload, sequence: sequence, previous: SimulatedBroker.number("prev", in: payload))
        if let first = records[sequence] {
            if first != record {
                return "the broker got two records as seq \(sequence): \(first.topic) \(first.payload.prefix(300)) and \(topic) \(payload.prefix(300))"
            }
            tally["copies-again", default: 0] += 1
        } else {
            records[sequence] = record
        }
        if sequence <= connectionLast {
            return "the broker got seq \(sequence) after seq \(connectionLast) on one connection (out of log order)"
        }
        connectionLast = sequence
        tally["records", default: 0] += 1
        return nil
    }

    /// The first topic filter of a SUBSCRIBE's body.
    private func filterText(_ body: ArraySlice<UInt8>) -> String {
        let start = body.startIndex + 2
        guard start + 2 <= body.endIndex else { return "" }
        let length = Int(body[start]) << 8 + Int(body[start + 1])
        guard start + 2 + length <= body.endIndex else { return "" }
        return String(decoding: body[(start + 2)..<(start + 2 + length)], as: UTF8.self)
    }

    /// A whole-number member of a JSON payload as the agent writes it (`"name":123`).
    static func number(_ name: String, in payload: String) -> UInt64? {
        guard let range = payload.range(of: "\"\(name)\":") else { return nil }
        return UInt64(payload[range.upperBound...].prefix { $0.isNumber })
    }

    private func send(_ bytes: [UInt8]) {
        guard connection >= 0 else { return }
        // The uplink reads promptly and a socket buffer holds far more than a turn's answers.
        if Glibc.write(connection, bytes, bytes.count) != bytes.count { hangUp() }
    }
}

/// The fleet's side of the simulated broker (`RemotePlan`): the retained configuration (the newest
/// published), and the commands sent at QoS 1 and kept until the gateway acknowledges them, sent
/// again at every subscription as a broker does for a kept session.
final class RemoteFeed {
    let plan: RemotePlan
    let gateway: String
    let startUTC: Int64
    private(set) var retained: [UInt8]? = nil
    /// Commands sent and not acknowledged: packet id -> PUBLISH.
    private var unacknowledged: [(packetID: UInt16, packet: [UInt8])] = []
    private var outgoing: [[UInt8]] = []
    private var nextConfiguration = 0
    private var nextCommand = 0
    private var nextRepeat = 0
    private var nextPacketID: UInt16 = 1
    private let repeats: [(index: Int, atS: Int)]
    var subscribed = false
    /// Configurations published so far, in order (the checks read them).
    private(set) var published: [RemotePlan.Configuration] = []
    /// Commands published so far (their first time).
    private(set) var commandsSent: [RemotePlan.Command] = []
    private(set) var tally: [String: Int] = [:]

    init(_ plan: RemotePlan, gateway: String, startUTC: Int64) {
        self.plan = plan
        self.gateway = gateway
        self.startUTC = startUTC
        repeats = plan.repeats.sorted { $0.atS < $1.atS }
    }

    /// The fleet's doings as the report names them (`tally`'s names with `remote-` before them).
    static let kinds = ["remote-configurations", "remote-commands", "remote-commands-repeated", "remote-commands-redelivered"]

    var moments: [Int] { plan.configurations.map(\.atS) + plan.commands.map(\.atS) + plan.repeats.map(\.atS) }

    /// What is due by `now` (seconds into the run) becomes the retained configuration or a command
    /// waiting for its acknowledgement; sent at once when the gateway is subscribed.
    func publishDue(now: Int) {
        while nextConfiguration < plan.configurations.count, plan.configurations[nextConfiguration].atS <= now {
            let configuration = plan.configurations[nextConfiguration]
            retained = RemotePlan.message(configuration, gateway: gateway)
            published.append(configuration)
            tally["configurations", default: 0] += 1
            if subscribed { outgoing.append(publish(topic: "config", retained!, packetID: takeID(), retain: false)) }
            nextConfiguration += 1
        }
        while nextCommand < plan.commands.count, plan.commands[nextCommand].atS <= now {
            send(plan.commands[nextCommand])
            commandsSent.append(plan.commands[nextCommand])
            nextCommand += 1
        }
        while nextRepeat < repeats.count, repeats[nextRepeat].atS <= now {
            let index = repeats[nextRepeat].index
            // Only a command the fleet has sent can be sent again.
            if index < nextCommand {
                send(plan.commands[index])
                tally["commands-repeated", default: 0] += 1
            }
            nextRepeat += 1
        }
    }

    private func send(_ command: RemotePlan.Command) {
        let packetID = takeID()
        let packet = publish(topic: "command", RemotePlan.message(command, gateway: gateway, startUTC: startUTC), packetID: packetID, retain: false)
        unacknowledged.append((packetID, packet))
        tally["commands", default: 0] += 1
        if subscribed { outgoing.append(packet) }
    }

    /// A SUBSCRIBE to the remote topics: the retained configuration, then every command not yet
    /// acknowledged (again, marked as such).
    func subscribedAgain() {
        subscribed = true
        if let retained { outgoing.append(publish(topic: "config", retained, packetID: takeID(), retain: true)) }
        for (_, packet) in unacknowledged {
            var again = packet
            again[0] |= 0x08
            outgoing.append(again)
            tally["commands-redelivered", default: 0] += 1
        }
    }

    func acknowledged(_ packetID: UInt16) {
        unacknowledged.removeAll { $0.packetID == packetID }
    }

    func takeOutgoing() -> [[UInt8]] {
        defer { outgoing.removeAll() }
        return outgoing
    }

    private func takeID() -> UInt16 {
        defer { nextPacketID = nextPacketID == UInt16.max ? 1 : nextPacketID + 1 }
        return nextPacketID
    }

    /// PUBLISH at QoS 1 on `locus/<gateway>/remote/<topic>`.
    private func publish(topic: String, _ payload: [UInt8], packetID: UInt16, retain: Bool) -> [UInt8] {
        let name = Array("locus/\(gateway)/remote/\(topic)".utf8)
        var body: [UInt8] = [UInt8(name.count >> 8), UInt8(name.count & 0xFF)] + name + [UInt8(packetID >> 8), UInt8(packetID & 0xFF)] + payload
        var length = body.count
        var header: [UInt8] = [0x32 | (retain ? 0x01 : 0)]
        repeat {
            var byte = UInt8(length & 0x7F)
            length >>= 7
            if length > 0 { byte |= 0x80 }
            header.append(byte)
        } while length > 0
        body.insert(contentsOf: header, at: 0)
        return body
    }
}
