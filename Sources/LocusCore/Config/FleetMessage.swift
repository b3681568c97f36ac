/// A message from the fleet (docs/remote.md): a TOML document, then one line with the
/// signature over every byte before it:
///
///     [fleet]
///     kind = "config"
///     gateway = "gw-0001"
///     version = 3
///     ...
///     # locus-signature: ecdsa-p256-sha256 MEUCIQ...
///
/// Reading one is pure: the signature is checked by the caller (LocusDevices' `Signatures`),
/// between `split` and `header`.
public struct FleetMessage {
    public static let signaturePrefix = "# locus-signature: "
    public static let algorithm = "ecdsa-p256-sha256"

    /// The signed bytes: the message's first `bodyCount`.
    public let bodyCount: Int
    /// Where the signature's base64 text is in the message.
    public let signature: Range<Int>

    /// The body and the signature line. Refused: no final newline, no signature line last, another
    /// algorithm, an empty signature.
    public static func split(_ bytes: UnsafeRawBufferPointer) -> Result<FleetMessage, FleetRefusal> {
        guard bytes.count > 0, bytes[bytes.count - 1] == 0x0A else { return .failure(FleetRefusal("the message does not end with its signature line and a newline")) }
        var start = bytes.count - 1
        while start > 0 && bytes[start - 1] != 0x0A { start -= 1 }
        let line = UnsafeRawBufferPointer(rebasing: bytes[start..<(bytes.count - 1)])
        let prefix = Array((signaturePrefix + algorithm + " ").utf8)
        guard line.count > prefix.count, line.starts(with: Array(signaturePrefix.utf8)) else {
            return .failure(FleetRefusal("the message's last line is not its signature ('\(signaturePrefix)\(algorithm) ...')"))
        }
        guard line.starts(with: prefix) else {
            return .failure(FleetRefusal("the message is signed with another algorithm than \(algorithm)"))
        }
        return .success(FleetMessage(bodyCount: start, signature: (start + prefix.count)..<(bytes.count - 1)))
    }

    /// The body as TOML, with `[fleet]` read: a configuration keeps the rest of the document for
    /// the site schema (`SiteConfig.parse(..., fleet:)`); a command has its `[command]` read too.
    public static func header(_ body: [UInt8], name: String) -> Result<(FleetHeader, ConfigReport), FleetRefusal> {
        let report: ConfigReport
        do { report = try ConfigReport.parse(body, file: name) } catch { return .failure(FleetRefusal(error.diagnostics)) }
        var root = TableReader(report.document.root, report: report, path: "")
        guard var section = root.table("fleet", required: true) else { return .failure(FleetRefusal(report.diagnostics)) }
        let kind = section.choice("kind", [("config", FleetHeader.Kind.config), ("command", .command)], required: true)
        var header = FleetHeader(kind: kind ?? .config, gateway: section.string("gateway", required: true) ?? "")
        _ = section.string("issued")
        switch kind {
        case .config?:
            header.version = section.integer("version", in: 1...Int64.max, required: true) ?? 0
        case .command?:
            if let id = section.string("id", required: true) {
                if FleetCommand.isValidID(id) { header.id = id } else {
                    report.fail(at: section.offset(of: "id"), "'fleet.id' must be 1 to 64 bytes of A-Z a-z 0-9 . _ -")
                }
            }
            header.expires = section.integer("expires", in: 1...Int64(UInt32.max) * 4, required: true) ?? 0
            if var command = root.table("command", required: true) {
                header.command = FleetCommand.read(&command)
                command.finish()
            }
            root.finish()
        case nil:
            break
        }
        section.finish()
        if report.hasErrors { return .failure(FleetRefusal(report.diagnostics)) }
        return .success((header, report))
    }
}

/// Why a message from the fleet was refused, in a sentence (the first diagnostic's, with its
/// place in the message).
public struct FleetRefusal: Error, Equatable, CustomStringConvertible {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    init(_ diagnostics: [ConfigDiagnostic]) {
        var reason = diagnostics.first?.description ?? "the message cannot be read"
        if diagnostics.count > 1 { reason += " (and \(diagnostics.count - 1) more)" }
        self.reason = reason
    }
    public var description: String { reason }
}

/// A message's `[fleet]` table.
public struct FleetHeader: Equatable {
    public enum Kind: Equatable { case config, command }
    public var kind: Kind
    public var gateway: String
    /// A configuration's version (1 or more); 0 for a command.
    public var version: Int64 = 0
    /// A command's id and expiry (UTC seconds since 1970); "" and 0 for a configuration.
    public var id = ""
    public var expires: Int64 = 0
    public var command: FleetCommand? = nil

    public init(kind: Kind, gateway: String) {
        self.kind = kind
        self.gateway = gateway
    }
}

/// A command's `[command]` table: what the gateway is asked to do (docs/remote.md, "Commands").
public struct FleetCommand: Equatable {
    /// What a gateway can be asked to do. A gateway refuses an action it does not know, and one
    /// its site does not allow (`[remote] commands`), naming the ones it takes.
    public enum Action: CaseIterable, Equatable, Sendable {
        /// The output active for `durationMs`.
        case pulse
        /// The output latched active (`value`) or its latch cleared, as `locus gpio clear` does.
        case set
        /// One location: the last fix when it is recent and accurate enough, else the receiver
        /// woken until one is (CLLocationManager.requestLocation), within `timeoutMs`.
        case locate
        /// The beacons matching `constraint`, ranged for `durationMs`, nearest first.
        case snapshot
        /// The log's records `from` through `to` published again (the store keeps one of each).
        case republish

        public var name: String {
            switch self {
            case .pulse: return "pulse"
            case .set: return "set"
            case .locate: return "locate"
            case .snapshot: return "snapshot"
            case .republish: return "republish"
            }
        }

        /// Whether the command's result comes later than the turn it arrives in (its record is
        /// logged when it ends).
        public var takesTime: Bool { self == .locate || self == .snapshot }
    }

    public static let longestSnapshotMs: Int64 = 60_000
    public static let longestLocateMs: Int64 = 600_000

    public var action: Action
    /// `pulse`, `set`: the board's output.
    public var output = ""
    /// `pulse`: how long; `snapshot`: how long to range.
    public var durationMs: Int64 = 0
    /// `set`: latched active (true) or cleared.
    public var value = false
    /// `locate`: the accuracy tier the fix must meet (nil: the site's), and how long to try.
    public var accuracy: AccuracyTier? = nil
    public var timeoutMs: Int64 = 0
    /// `snapshot`: the beacons ranged.
    public var constraint: BeaconIdentityConstraint? = nil
    /// `republish`: the log's records `from...to`.
    public var from: UInt64 = 0
    public var to: UInt64 = 0

    public init(action: Action) { self.action = action }

    public static func isValidID(_ id: String) -> Bool {
        let bytes = id.utf8
        return !bytes.isEmpty && bytes.count <= 64 && bytes.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x2E || byte == 0x5F || byte == 0x2D
        }
    }

    static func read(_ section: inout TableReader) -> FleetCommand? {
        let actions = Action.allCases.map { ($0.name, $0) }
        guard let action = section.choice("action", actions, required: true) else { return nil }
        var command = FleetCommand(action: action)
        switch action {
        case .pulse:
            command.output = section.string("output", required: true) ?? ""
            command.durationMs = section.duration("duration", in: 1...3_600_000, required: true) ?? 0
        case .set:
            command.output = section.string("output", required: true) ?? ""
            command.value = section.choice("value", [("on", true), ("off", false)], required: true) ?? false
        case .locate:
            command.accuracy = section.choice("accuracy", AccuracyTier.names)
            command.timeoutMs = section.duration("timeout", in: 1_000...longestLocateMs) ?? 30_000
        case .snapshot:
            command.durationMs = section.duration("duration", in: 1_000...longestSnapshotMs) ?? 5_000
            if let text = section.string("uuid", required: true) {
                if let uuid = BeaconUUID(text) {
                    let major = section.integer("major", in: 0...65_535).map { UInt16($0) }
                    let minor = section.integer("minor", in: 0...65_535).map { UInt16($0) }
                    if minor != nil && major == nil {
                        section.report.fail(at: section.offset(of: "minor"), "'\(section.label("minor"))' needs a major")
                    } else {
                        command.constraint = BeaconIdentityConstraint(uuid: uuid, major: major, minor: minor)
                    }
                } else {
                    section.report.fail(at: section.offset(of: "uuid"), "'\(section.label("uuid"))' is not a UUID like E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
                }
            }
        case .republish:
            let from = section.integer("from", in: 1...Int64.max, required: true) ?? 1
            let to = section.integer("to", in: 1...Int64.max, required: true) ?? 1
            if to < from { section.report.fail(at: section.offset(of: "to"), "'\(section.label("to"))' (\(to)) is before 'from' (\(from))") }
            command.from = UInt64(from)
            command.to = UInt64(max(from, to))
        }
        return command
    }
}
