import LocusCore

/// One row of `records`: a published record of one gateway's log (an event, a GPIO change, a
/// visit, or what the gateway did with a configuration or a command of the fleet: docs/remote.md,
/// "The records"), from either road into the database, mapped the same way:
/// - `exported`: a line of `locus log export --format jsonl` (`import`), whose `prev` the
///   importer computes from the file;
/// - `published`: an MQTT payload of the uplink (`ingest`), which names its gateway and carries
///   `seq` and, from the gateway, `prev`.
///
/// The payload kept is the record's own members as the gateway wrote them, without what is a
/// column already (gateway, seq, prev, time, and the export's type): the same jsonb whichever
/// road the record came by.
public struct FleetRecord: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable { case event, gpio, visit, config, command }
    public enum Source: String, Sendable { case mqtt, logImport = "import" }

    public var gateway: String
    public var seq: Int64
    /// The previous published record's seq in the same log; 0: none (the log's first); nil: unknown.
    public var prev: Int64?
    public var kind: Kind
    /// The record's time as the gateway wrote it (UTC): an event's date, a GPIO change's time,
    /// a visit's departure or, for an arrival, its arrival.
    public var time: String
    public var monitor: String? = nil
    public var identifier: String? = nil
    public var state: String? = nil
    public var output: String? = nil
    public var value: Bool? = nil
    /// An event's refinement as JSON text; nil when it has none (or null). Kept beside the
    /// payload (which holds it too) for `current_state`, so that the ingest never parses the
    /// payload again.
    public var refinement: String? = nil
    /// JSON text of the record's members.
    public var payload: String
    public var source: Source

    /// A record whose columns are already known (the store's benchmark writes such records;
    /// the ingest and the import read theirs with `published` and `exported`).
    public init(gateway: String, seq: Int64, prev: Int64?, kind: Kind, time: String, monitor: String? = nil, identifier: String? = nil,
                state: String? = nil, output: String? = nil, value: Bool? = nil, refinement: String? = nil, payload: String, source: Source) {
        self.gateway = gateway
        self.seq = seq
        self.prev = prev
        self.kind = kind
        self.time = time
        self.monitor = monitor
        self.identifier = identifier
        self.state = state
        self.output = output
        self.value = value
        self.refinement = refinement
        self.payload = payload
        self.source = source
    }

    /// Members that are columns (or the export's framing), never kept in the payload.
    static func isEnvelope(_ key: String) -> Bool {
        switch key {
        case "gateway", "seq", "prev", "time", "type": return true
        default: return false
        }
    }
    /// Sequence numbers are read from JSON numbers, exact up to 2^53.
    public static let maximumSeq: Int64 = 1 << 53
    /// A gateway id: 1 to 255 bytes, no spaces or control characters (the uplink's own ids are
    /// letters, digits, '-', '_' and '.', at most 64 bytes).
    public static let maximumGatewayBytes = 255
    static let states: Set<String> = ["satisfied", "unsatisfied", "unknown"]

    /// A line of the export whose type is event, gpio, visit, config or command (`{"seq":..,"time":..,"type":..,...}`;
    /// an event's members are in its `event` object).
    public static func exported(_ line: JSONValue, gateway: String, prev: Int64?) throws(FleetRecordError) -> FleetRecord {
        guard case .object(var members) = line else { throw FleetRecordError("not a JSON object") }
        let seq = try sequence(line["seq"])
        guard let name = line["type"]?.string, let kind = Kind(rawValue: name) else {
            throw FleetRecordError("type is not event, gpio, visit, config or command")
        }
        members.removeAll { $0.key == "seq" || $0.key == "type" }
        if kind == .event {
            guard let event = line["event"] else {
                throw FleetRecordError("an event record without 'event'" + (line["error"]?.string.map { " (the export says: \($0))" } ?? ""))
            }
            guard case .object(let eventMembers) = event else { throw FleetRecordError("'event' is not an object") }
            if let inner = event["seq"], (try? sequence(inner)) != seq {
                throw FleetRecordError("the event's seq \(FleetJSON.text(inner)) is not the record's \(seq)")
            }
            members = eventMembers
        }
        return try make(kind, members, gateway: gateway, seq: seq, prev: prev, source: .logImport)
    }

    /// An uplink payload for a record of `kind` (the topic says which: `<prefix>/event/...`,
    /// `<prefix>/gpio/...`, `<prefix>/visit`, `<prefix>/config`, `<prefix>/command`): gateway,
    /// seq, prev when the gateway sends it, and the record's members.
    public static func published(_ payload: JSONValue, kind: Kind) throws(FleetRecordError) -> FleetRecord {
        guard case .object(let members) = payload else { throw FleetRecordError("not a JSON object") }
        guard let gateway = payload["gateway"]?.string else { throw FleetRecordError("no gateway (a string)") }
        let seq = try sequence(payload["seq"])
        var prev: Int64? = nil
        if let value = payload["prev"], !value.isNull {
            guard let number = value.integer(in: 0...(seq - 1)) else {
                throw FleetRecordError("prev \(FleetJSON.text(value)) is not a sequence number below seq \(seq)")
            }
            prev = number
        }
        return try make(kind, members, gateway: gateway, seq: seq, prev: prev, source: .mqtt)
    }

    static func sequence(_ value: JSONValue?) throws(FleetRecordError) -> Int64 {
        guard let value else { throw FleetRecordError("no seq") }
        guard let seq = value.integer(in: 1...maximumSeq) else {
            throw FleetRecordError("seq \(FleetJSON.text(value)) is not a sequence number (1 to 2^53)")
        }
        return seq
    }

    /// nil for an acceptable gateway id, else why not.
    public static func gatewayProblem(_ gateway: String) -> String? {
        if gateway.isEmpty { return "the gateway id is empty" }
        if gateway.utf8.count > maximumGatewayBytes { return "the gateway id is longer than \(maximumGatewayBytes) bytes" }
        if gateway.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) { return "the gateway id '\(gateway)' holds a space or a control character" }
        return nil
    }

    private static func make(_ kind: Kind, _ members: [JSONMember], gateway: String, seq: Int64, prev: Int64?,
                             source: Source) throws(FleetRecordError) -> FleetRecord {
        if let problem = gatewayProblem(gateway) { throw FleetRecordError(problem) }
        let object = JSONValue.object(members)
        if let string = FleetJSON.nulString(in: object) {
            throw FleetRecordError("the string '\(string.replacingNUL)' holds U+0000, which PostgreSQL cannot store")
        }
        let payload = FleetJSON.text(members: members.filter { !isEnvelope($0.key) })
        var record = FleetRecord(gateway: gateway, seq: seq, prev: prev, kind: kind, time: "", payload: payload, source: source)
        switch kind {
        case .event: try record.readEvent(object)
        case .gpio: try record.readGPIO(object)
        case .visit: try record.readVisit(object)
        case .config, .command: try record.readRemote(object)
        }
        return record
    }

    // MARK: the columns of each kind

    /// monitor, identifier, state and date (the time).
    private mutating func readEvent(_ event: JSONValue) throws(FleetRecordError) {
        monitor = try Self.name(event, "monitor")
        identifier = try Self.name(event, "identifier")
        guard let state = event["state"]?.string, Self.states.contains(state) else {
            throw FleetRecordError("state is not satisfied, unsatisfied or unknown")
        }
        self.state = state
        time = try Self.timestamp(event, "date")
        if let refinement = event["refinement"], !refinement.isNull {
            guard refinement.isObject else { throw FleetRecordError("refinement is neither null nor an object") }
            self.refinement = FleetJSON.text(refinement)
        }
    }

    /// output, value, time, and the monitor and identifier of the event that caused it, if one did.
    private mutating func readGPIO(_ change: JSONValue) throws(FleetRecordError) {
        output = try Self.name(change, "output")
        guard let value = change["value"]?.bool else { throw FleetRecordError("value is not true or false") }
        self.value = value
        time = try Self.timestamp(change, "time")
        if let cause = change["cause"], cause.string == nil { throw FleetRecordError("cause is not a string") }
        if change["monitor"] != nil || change["identifier"] != nil {
            monitor = try Self.name(change, "monitor")
            identifier = try Self.name(change, "identifier")
        }
    }

    /// arrival, departure (null until the device leaves), lat, lon, radius; the time is the
    /// departure, or the arrival for an arrival record.
    private mutating func readVisit(_ visit: JSONValue) throws(FleetRecordError) {
        let arrival = try Self.timestamp(visit, "arrival")
        var departure: String? = nil
        if let value = visit["departure"], !value.isNull { departure = try Self.timestamp(visit, "departure") }
        else if visit["departure"] == nil { throw FleetRecordError("no departure (null for an arrival)") }
        let limits: [(String, ClosedRange<Double>)] = [("lat", -90...90), ("lon", -180...180), ("radius", 0...1e7)]
        for (key, range) in limits {
            guard let number = visit[key]?.number, range.contains(number) else {
                throw FleetRecordError("\(key) is not a number in \(range.lowerBound)...\(range.upperBound)")
            }
        }
        time = departure ?? arrival
    }

    /// A configuration's or a command's result: the time, `result`, and the version (a
    /// configuration, 0 when the gateway could not read it) or the id (a command, "" likewise);
    /// a refusal's `reason` is a string. No column but the time: the rest stays in the payload.
    private mutating func readRemote(_ result: JSONValue) throws(FleetRecordError) {
        time = try Self.timestamp(result, "time")
        let results: [String] = kind == .config ? ["applied", "refused"] : ["done", "refused", "failed"]
        guard let outcome = result["result"]?.string, results.contains(outcome) else {
            throw FleetRecordError("result is not \(results.dropLast().joined(separator: ", ")) or \(results.last!)")
        }
        if kind == .config {
            guard let version = result["version"], version.integer(in: 0...Self.maximumSeq) != nil else {
                throw FleetRecordError("version is not a version number (0 to 2^53)")
            }
        } else {
            guard result["id"]?.string != nil else { throw FleetRecordError("id is not a string") }
            if let action = result["action"], action.string == nil { throw FleetRecordError("action is not a string") }
        }
        if let reason = result["reason"], reason.string == nil { throw FleetRecordError("reason is not a string") }
    }

    private static func name(_ object: JSONValue, _ key: String) throws(FleetRecordError) -> String {
        guard let value = object[key]?.string, !value.isEmpty else { throw FleetRecordError("\(key) is not a non-empty string") }
        return value
    }

    private static func timestamp(_ object: JSONValue, _ key: String) throws(FleetRecordError) -> String {
        guard let value = object[key] else { throw FleetRecordError("no \(key)") }
        guard let text = value.string, FleetJSON.isTimestamp(text) else {
            throw FleetRecordError("\(key) \(FleetJSON.text(value).prefix(64)) is not a UTC time like 2024-03-14T00:05:30.000Z")
        }
        return text
    }
}

public struct FleetRecordError: Error, CustomStringConvertible, Sendable, Equatable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

extension JSONValue {
    var isObject: Bool { if case .object = self { return true } else { return false } }
}

extension String {
    /// The text with U+0000 shown as `\u0000`, for messages.
    var replacingNUL: String { String(decoding: utf8.flatMap { $0 == 0 ? Array("\\u0000".utf8) : [$0] }, as: UTF8.self) }
}
