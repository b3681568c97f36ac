import LocusCore

/// A NATS server's client address, `nats://HOST[:PORT]` or `HOST[:PORT]` (port 4222 by default).
struct NATSAddress: Equatable, CustomStringConvertible {
    static let defaultPort: UInt16 = 4222

    /// Host and port as the broker addresses have them, for the shared resolver (never TLS).
    let resolvable: BrokerAddress
    var port: UInt16 { resolvable.port }

    var description: String { "nats" + resolvable.description.dropFirst(4) }

    static func parse(_ text: String) throws(FleetError) -> NATSAddress {
        var rest = Substring(text)
        if rest.hasPrefix("tls://") { throw FleetError("'\(text)': the ingest speaks to NATS without TLS (keep its client port on the fleet's own network)") }
        if rest.hasPrefix("nats://") { rest = rest.dropFirst(7) }
        switch BrokerAddress.parse("mqtt://" + rest) {
        case .failure(let error): throw FleetError("'\(text)' is not nats://HOST[:PORT]: \(error.problem)")
        case .success(var address):
            let explicitPort = rest.hasPrefix("[") ? rest.contains("]:") : rest.contains(":")
            if !explicitPort { address.port = defaultPort }
            return NATSAddress(resolvable: address)
        }
    }

    /// A comma-separated list of nodes, none twice.
    static func parseList(_ text: String) throws(FleetError) -> [NATSAddress] {
        var nodes: [NATSAddress] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let node = try parse(String(part))
            if nodes.contains(node) { throw FleetError("'\(part)' is named twice") }
            nodes.append(node)
        }
        return nodes
    }
}

/// The NATS client protocol's operations from the server, framed from a byte stream: a line
/// (`INFO`, `PING`, `PONG`, `+OK`, `-ERR`), or a message line and its payload (`MSG`, `HMSG`:
/// headers then body).
struct NATSParser {
    enum Operation: Equatable {
        case info(JSONText)
        case ping
        case pong
        case ok
        case error(String)
        /// `headers` is the header block as sent (`NATS/1.0 [code [text]]` then lines), empty for MSG.
        case message(subject: String, sid: String, reply: String?, headers: [UInt8], payload: [UInt8])
    }

    /// INFO's JSON, kept as text.
    struct JSONText: Equatable { var bytes: [UInt8] }

    /// A control line longer than this is a protocol violation (the server's own limit is 4 KiB).
    static let maximumLine = 8 * 1024

    let maximumPayload: Int
    private var buffer: [UInt8] = []
    private var start = 0

    init(maximumPayload: Int) { self.maximumPayload = maximumPayload }

    /// Bytes read from the server. What was taken goes first: all of it, or, when a read ended
    /// inside an operation, once it is 64 KiB (a steady stream seldom ends a read on an
    /// operation's end, and the buffer would keep the whole session).
    mutating func consume(_ bytes: UnsafeRawBufferPointer) {
        if start > 0 && (start == buffer.count || start >= 64 * 1024) {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole operation, nil when more bytes are needed; throws on a protocol violation.
    mutating func next() throws(FleetError) -> Operation? {
        guard let lineEnd = findCRLF(from: start) else {
            if buffer.count - start > Self.maximumLine { throw FleetError("a NATS control line longer than \(Self.maximumLine) bytes") }
            return nil
        }
        let line = Array(buffer[start..<lineEnd])
        let fields = String(decoding: line, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard let verb = fields.first?.uppercased() else { throw FleetError("an empty NATS control line") }
        switch verb {
        case "PING": start = lineEnd + 2; return .ping
        case "PONG": start = lineEnd + 2; return .pong
        case "+OK": start = lineEnd + 2; return .ok
        case "-ERR":
            start = lineEnd + 2
            let text = String(decoding: line.dropFirst(4), as: UTF8.self).trimmingSpacesAndQuotes()
            return .error(text)
        case "INFO":
            start = lineEnd + 2
            return .info(JSONText(bytes: Array(line.dropFirst(4).drop(while: { $0 == 0x20 }))))
        case "MSG", "HMSG":
            let headered = verb == "HMSG"
            // MSG subject sid [reply] size; HMSG subject sid [reply] header-size total-size
            let sizes = headered ? 2 : 1
            guard fields.count == 3 + sizes || fields.count == 4 + sizes else { throw FleetError("a malformed NATS \(verb) line") }
            guard let total = Int(fields[fields.count - 1]), total >= 0, total <= maximumPayload + 64 * 1024 else {
                throw FleetError("a NATS \(verb) of an impossible size")
            }
            let headerBytes = headered ? Int(fields[fields.count - 2]) ?? -1 : 0
            guard headerBytes >= 0, headerBytes <= total else { throw FleetError("a NATS HMSG with a header size past its total") }
            let bodyStart = lineEnd + 2
            guard buffer.count >= bodyStart + total + 2 else { return nil }
            guard buffer[bodyStart + total] == 0x0D, buffer[bodyStart + total + 1] == 0x0A else {
                throw FleetError("a NATS \(verb) whose payload does not end where its size says")
            }
            let reply = fields.count == 4 + sizes ? fields[3] : nil
            let headers = Array(buffer[bodyStart..<(bodyStart + headerBytes)])
            let payload = Array(buffer[(bodyStart + headerBytes)..<(bodyStart + total)])
            start = bodyStart + total + 2
            return .message(subject: fields[1], sid: fields[2], reply: reply, headers: headers, payload: payload)
        default:
            throw FleetError("an unknown NATS operation '\(verb.prefix(16))'")
        }
    }

    private func findCRLF(from index: Int) -> Int? {
        var at = index
        while at + 1 < buffer.count {
            if buffer[at] == 0x0D && buffer[at + 1] == 0x0A { return at }
            at += 1
        }
        return nil
    }

    /// The status of a header block (`NATS/1.0 408 Request Timeout` is 408), nil without one.
    static func status(_ headers: [UInt8]) -> Int? {
        guard headers.count >= 12, headers.starts(with: Array("NATS/1.0 ".utf8)) else { return nil }
        let digits = headers[9..<12]
        guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }
}

/// How NATS's MQTT names a topic's messages in JetStream: the topic's levels joined by '.'
/// under `$MQTT.msgs.` (a NATS subject cannot hold '.' in a level, so a topic that has one is
/// refused by the broker: gateway ids and names published to a NATS cluster must not hold it).
enum NATSSubjects {
    static let mqttMessages = "$MQTT.msgs."
    static let mqttStream = "$MQTT_msgs"

    /// The subject filter for an MQTT topic filter (`+` is `*`, `#` is `>`).
    static func filter(mqtt topicFilter: String) -> String {
        mqttMessages + topicFilter.split(separator: "/", omittingEmptySubsequences: false).map { level -> String in
            switch level {
            case "+": return "*"
            case "#": return ">"
            default: return String(level)
            }
        }.joined(separator: ".")
    }

    /// The MQTT topic of a stored message's subject, nil for a subject outside the MQTT stream.
    static func topic(subject: String) -> String? {
        guard subject.hasPrefix(mqttMessages) else { return nil }
        return subject.dropFirst(mqttMessages.count).split(separator: ".", omittingEmptySubsequences: false).joined(separator: "/")
    }

    /// When JetStream stored the message (µs since 1970), from its acknowledgement subject.
    static func storedUs(ackSubject: String) -> Int64? {
        acknowledgementFields(ackSubject).flatMap { Int64($0.stored) }.map { $0 / 1_000 }
    }

    /// The delivery count (1 the first time), from the acknowledgement subject.
    static func deliveries(ackSubject: String) -> Int? {
        acknowledgementFields(ackSubject).flatMap { Int($0.delivered) }
    }

    /// The delivery count and the time stored (ns) in an acknowledgement subject: NATS 2.9's
    /// `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ns>.<pending>`, or
    /// the later form with a domain and an account hash after `ACK` and a token at the end.
    private static func acknowledgementFields(_ subject: String) -> (delivered: Substring, stored: Substring)? {
        let tokens = subject.split(separator: ".", omittingEmptySubsequences: false)
        guard tokens.count >= 9, tokens[0] == "$JS", tokens[1] == "ACK" else { return nil }
        let first = tokens.count == 9 ? 4 : 6
        guard tokens.count >= first + 4 else { return nil }
        return (tokens[first], tokens[first + 3])
    }
}

private extension String {
    func trimmingSpacesAndQuotes() -> String {
        var view = Substring(self)
        while let first = view.first, first == " " || first == "'" { view = view.dropFirst() }
        while let last = view.last, last == " " || last == "'" { view = view.dropLast() }
        return String(view)
    }
}
