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

/// A command's `[command]` table: what the gateway is asked to do.
public struct FleetCommand: Equatable {
    /// What this version runs. (Locating now, a ranging snapshot and publishing a range of the
    /// log again are the next ones; a gateway refuses an action it does not know, naming the
    /// ones it does.)
    public enum Action: CaseIterable, Equatable, Sendable {
        /// The output active for `durationMs`.
        case pulse

        public var name: String {
            switch self {
            case .pulse: return "pulse"
            }
        }
    }

    public var action: Action
    public var output = ""
    public var durationMs: Int64 = 0

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
        }
        return command
    }
}
