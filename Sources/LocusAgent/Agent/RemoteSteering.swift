import LocusCore
import LocusDevices

/// The fleet's configurations and commands on this gateway (docs/remote.md): every message
/// checked in one order (size, signature, `[fleet]`, then what it asks), and what to do decided.
/// It acts on nothing itself: the loop logs the decision, then applies or runs it.
///
/// The applied configuration is `<state_dir>/remote.toml`, the whole signed message, checked
/// again at every start and SIGHUP; the log's `remote` records say which version the fleet was
/// told of, and which commands ran.
final class RemoteSteering {
    static let fileName = "remote.toml"

    let settings: SiteConfig.Remote
    /// The fleet's public key (PEM), read at start.
    private let key: [UInt8]
    let gateway: String
    /// `<state_dir>/remote.toml`.
    let path: String
    /// The version applied (0: the site file alone).
    private(set) var applied: UInt64
    /// The commands the log holds: never run again.
    private var commandIDs: Set<String>
    /// The configurations refused (SHA-256): a retained one comes at every connection, and is
    /// refused once.
    private var refusedDigests: Set<[UInt8]>
    private(set) var counters = Counters()
    private(set) var lastRefusal: String? = nil
    /// The command that takes time, under way (nil: none).
    private(set) var running: Running? = nil

    struct Counters {
        var configurations = 0
        var refused = 0
        var commands = 0
        var duplicates = 0
    }

    struct SetupError: Error, CustomStringConvertible {
        let description: String
    }

    init(_ settings: SiteConfig.Remote, sitePath: String, gateway: String, directory: String, applied: UInt64,
         commandIDs: Set<String>, refusedDigests: Set<[UInt8]>) throws(SetupError) {
        self.settings = settings
        let keyPath = Paths.resolve(settings.keyFile, relativeTo: Paths.directory(of: sitePath))
        do { key = try Files.read(keyPath, limit: 16 << 10) } catch {
            throw SetupError(description: "[remote] key: cannot read the fleet's public key \(keyPath): \(error)")
        }
        self.gateway = gateway
        path = Paths.join(directory, RemoteSteering.fileName)
        self.applied = applied
        self.commandIDs = commandIDs
        self.refusedDigests = refusedDigests
    }

    // MARK: configurations

    enum ConfigDecision {
        /// The version applied, again (the broker's retained copy at every connection).
        case same
        case refuse(LogPayload.RemoteResult)
        /// Checked: the site file with the configuration over it.
        case apply(LoadedConfig, LogPayload.RemoteResult)
    }

    /// A configuration from the broker, checked against the site file as it is now.
    func configuration(_ message: UnsafeRawBufferPointer, sitePath: String) -> ConfigDecision {
        counters.configurations += 1
        var result = LogPayload.RemoteResult(kind: .config, result: .refused)
        result.digest = Signatures.sha256(message)
        if refusedDigests.contains(result.digest) {
            counters.duplicates += 1
            return .same
        }
        switch RemoteSteering.check(message, key: key, gateway: gateway, settings: settings, sitePath: sitePath, applied: applied,
                                    digest: result.digest) {
        case .failure(let refusal):
            if refusal.reason.isEmpty { return .same }
            result.version = refusal.version
            return refuse(result, refusal.reason)
        case .success(let checked):
            result.version = checked.remoteVersion
            result.result = .applied
            return .apply(checked, result)
        }
    }

    /// A record is in the log: a command's id is never run again, a refused configuration never
    /// refused again. (Not before: a message whose record the log could not take comes again.)
    func logged(_ record: LogPayload.RemoteResult) {
        if let current = running, current.finished, current.record.id == record.id { running = nil }
        switch record.kind {
        case .command: if !record.id.isEmpty { commandIDs.insert(String(decoding: record.id, as: UTF8.self)) }
        case .config: if record.result == .refused && !record.digest.isEmpty { refusedDigests.insert(record.digest) }
        }
    }

    /// The configuration is in `remote.toml` and its record in the log: it is the applied one.
    func applied(_ version: UInt64) {
        precondition(version > applied, "a configuration applied is newer than the one before")
        applied = version
    }

    /// A message checked as a configuration: the site file at `sitePath` with it over it.
    /// `applied` 0 accepts any version (the start's check of `remote.toml`); `digest`: the
    /// message's SHA-256 when the caller has it already.
    static func check(_ message: UnsafeRawBufferPointer, key: [UInt8], gateway: String, settings: SiteConfig.Remote, sitePath: String,
                      applied: UInt64, digest: [UInt8]? = nil) -> Result<LoadedConfig, Refusal> {
        let header: FleetHeader
        let report: ConfigReport
        switch verified(message, key: key, settings: settings, name: "fleet configuration") {
        case .failure(let refusal): return .failure(refusal)
        case .success(let read): (header, report) = read
        }
        let version = UInt64(header.version)
        guard header.kind == .config else { return .failure(Refusal("a command on the configuration topic")) }
        guard header.gateway == gateway else {
            return .failure(Refusal("it is for gateway '\(header.gateway)', not this one ('\(gateway)')", version: version))
        }
        if version == applied && applied > 0 { return .failure(Refusal("", version: version)) } // the retained copy again
        if version < applied {
            return .failure(Refusal("version \(version) is older than the applied version \(applied) (an old message replayed?)", version: version))
        }
        let source: [UInt8]
        do { source = try Files.read(sitePath) } catch { return .failure(Refusal("cannot read the site file \(sitePath): \(error)", version: version)) }
        var problems: [String] = []
        let fragment = SiteConfig.FleetFragment(report: report, settable: settings.settable)
        guard case .success(var loaded) = LoadedConfig.check(source, path: sitePath, fleet: fragment, say: { problems.append($0) }) else {
            var reason = problems.first ?? "it does not check"
            if problems.count > 1 { reason += " (and \(problems.count - 1) more)" }
            return .failure(Refusal(reason, version: version))
        }
        loaded.remoteVersion = version
        loaded.remoteDigest = digest ?? Signatures.sha256(message)
        return .success(loaded)
    }

    /// Size, signature and `[fleet]`, the checks every message passes first.
    private static func verified(_ message: UnsafeRawBufferPointer, key: [UInt8], settings: SiteConfig.Remote,
                                 name: String) -> Result<(FleetHeader, ConfigReport), Refusal> {
        guard message.count <= settings.maximumBytes else {
            return .failure(Refusal("\(message.count) bytes, more than [remote] max_size (\(settings.maximumBytes))"))
        }
        let split: FleetMessage
        switch FleetMessage.split(message) {
        case .failure(let refusal): return .failure(Refusal(refusal.reason))
        case .success(let parts): split = parts
        }
        let body = UnsafeRawBufferPointer(rebasing: message[0..<split.bodyCount])
        if let why = Signatures.verify(key: key, message: body, signature: UnsafeRawBufferPointer(rebasing: message[split.signature])) {
            return .failure(Refusal(why))
        }
        switch FleetMessage.header(Array(body), name: name) {
        case .failure(let refusal): return .failure(Refusal(refusal.reason))
        case .success(let read): return .success(read)
        }
    }

    struct Refusal: Error {
        let reason: String
        var version: UInt64 = 0
        var id = ""
        init(_ reason: String, version: UInt64 = 0, id: String = "") {
            self.reason = reason
            self.version = version
            self.id = id
        }
    }

    private func refuse(_ result: LogPayload.RemoteResult, _ reason: String) -> ConfigDecision { .refuse(refused(result, reason)) }

    /// `result` refused for `reason` (cut to what a record holds), counted and kept for status.
    private func refused(_ result: LogPayload.RemoteResult, _ reason: String, as outcome: LogPayload.RemoteResult.Result = .refused)
        -> LogPayload.RemoteResult {
        var refused = result
        refused.result = outcome
        refused.reason = Array(reason.utf8.prefix(LogPayload.RemoteResult.maximumReasonBytes))
        if outcome == .refused { counters.refused += 1 }
        lastRefusal = reason
        return refused
    }

    // MARK: commands

    enum CommandDecision {
        /// Its id is in the log: it ran (or was refused) before.
        case duplicate
        case refuse(LogPayload.RemoteResult)
        case run(FleetCommand, LogPayload.RemoteResult)
    }

    /// A command from the broker, at `now` (UTC).
    func command(_ message: UnsafeRawBufferPointer, now: UTCTime) -> CommandDecision {
        var result = LogPayload.RemoteResult(kind: .command, result: .refused)
        result.digest = Signatures.sha256(message)
        let header: FleetHeader
        switch RemoteSteering.verified(message, key: key, settings: settings, name: "fleet command") {
        case .failure(let refusal): return refuseCommand(result, refusal.reason)
        case .success(let read): header = read.0
        }
        result.id = Array(header.id.utf8)
        guard header.kind == .command, let command = header.command else { return refuseCommand(result, "a configuration on the command topic") }
        result.action = Array(command.action.name.utf8)
        guard header.gateway == gateway else { return refuseCommand(result, "it is for gateway '\(header.gateway)', not this one ('\(gateway)')") }
        guard !commandIDs.contains(header.id) else {
            counters.duplicates += 1
            return .duplicate
        }
        counters.commands += 1
        let late = now.totalNanoseconds / 1_000_000_000 - header.expires
        if late > 0 { return refuseCommand(result, "expired \(Quantity.describe(nanoseconds: late * 1_000_000_000)) before it arrived") }
        guard settings.commands.contains(command.action) else {
            let allowed = settings.commands.isEmpty ? "none" : settings.commands.map { $0.name }.joined(separator: ", ")
            return refuseCommand(result, "'\(command.action.name)' is not a command this gateway takes ([remote] commands: \(allowed))")
        }
        result.result = .done
        return .run(command, result)
    }

    private func refuseCommand(_ result: LogPayload.RemoteResult, _ reason: String) -> CommandDecision { .refuse(refused(result, reason)) }

    /// A command that cannot act here (an output that is not there): its record says failed.
    func failed(_ result: LogPayload.RemoteResult, _ reason: String) -> LogPayload.RemoteResult { refused(result, reason, as: .failed) }

    // MARK: commands that take time

    /// A `locate` or `snapshot` under way, one at a time. Its id is taken when it starts (a second
    /// delivery is a duplicate); its record, with what it found, is logged when it ends, and the
    /// broker's message was acknowledged at its start. A restart before the end leaves no record:
    /// the fleet shows the command expired without an answer.
    struct Running {
        var record: LogPayload.RemoteResult
        /// A snapshot's end; nil for a locate (the live updates answer it).
        let endsAt: MonotonicInstant?
        /// The record is complete and waits for the log to take it.
        var finished = false
    }

    /// `record`'s command started; it ends at `endsAt` (a snapshot), or when the live updates
    /// answer it (a locate).
    func start(_ record: LogPayload.RemoteResult, endsAt: MonotonicInstant?) {
        precondition(running == nil, "one command that takes time at a time")
        precondition(record.result == .done, "a command starts once checked")
        commandIDs.insert(String(decoding: record.id, as: UTF8.self))
        running = Running(record: record, endsAt: endsAt)
    }

    /// Why a command that takes time cannot start now, or nil.
    var busy: String? {
        guard let running else { return nil }
        return "command \(String(decoding: running.record.id, as: UTF8.self)) (\(String(decoding: running.record.action, as: UTF8.self))) is under way; send it again when that one has answered"
    }

    /// The command under way ends: done with what it found (`detail`, one JSON object), or failed
    /// for `reason`. Its record waits in `running` until the log takes it (`takeFinished`).
    func finish(detail: UnsafeRawBufferPointer?, failure reason: String? = nil) {
        guard var current = running, !current.finished else { return }
        if let reason {
            current.record = failed(current.record, reason)
        } else if let detail, detail.count <= LogPayload.RemoteResult.maximumDetailBytes {
            current.record.detail = Array(detail)
        } else {
            current.record = failed(current.record, "its answer (\(detail?.count ?? 0) bytes) does not fit a record")
        }
        current.finished = true
        running = current
    }

    /// The finished command's record, for the log; `logged` then ends it.
    var finishedRecord: LogPayload.RemoteResult? { running?.finished == true ? running!.record : nil }

    // MARK: the start

    /// The site file with `remote.toml` over it, checked again (the key or the site file may
    /// have changed since it was applied); the site file alone, with a warning, when it does not
    /// check.
    static func overlay(_ base: LoadedConfig, directory: String, gateway: String) -> LoadedConfig {
        guard let settings = base.site.remote else { return base }
        let keyPath = Paths.resolve(settings.keyFile, relativeTo: Paths.directory(of: base.sitePath))
        guard let key = try? Files.read(keyPath, limit: 16 << 10) else { return base }
        return overlay(base, key: key, path: Paths.join(directory, fileName), gateway: gateway)
    }

    /// `overlay` for a SIGHUP's fresh site file, with the key read at start.
    func overlay(_ base: LoadedConfig) -> LoadedConfig { RemoteSteering.overlay(base, key: key, path: path, gateway: gateway) }

    private static func overlay(_ base: LoadedConfig, key: [UInt8], path: String, gateway: String) -> LoadedConfig {
        guard let settings = base.site.remote, let message = try? Files.read(path, limit: settings.maximumBytes + 1) else { return base }
        let checked = message.withUnsafeBytes { bytes in
            check(bytes, key: key, gateway: gateway, settings: settings, sitePath: base.sitePath, applied: 0)
        }
        switch checked {
        case .success(let loaded):
            return loaded
        case .failure(let refusal):
            AgentLog.warning("locus: remote: \(path) no longer checks (\(refusal.reason)); running on \(base.sitePath) alone until the fleet sends a configuration that does")
            return base
        }
    }

    /// Whether a configuration (already checked) sets top-level `key`.
    static func sets(_ key: String, _ message: [UInt8]) -> Bool {
        guard let report = try? ConfigReport.parse(message, file: "fleet configuration") else { return false }
        return report.document.root[key] != nil
    }

    func status(into line: inout JSONWriter) {
        line.beginObject("remote")
        line.integer("applied_version", applied)
        line.integer("configurations", counters.configurations)
        line.integer("commands", counters.commands)
        line.integer("refused", counters.refused)
        line.integer("duplicates", counters.duplicates)
        if let running {
            line.beginObject("running")
            line.string("id", String(decoding: running.record.id, as: UTF8.self))
            line.string("action", String(decoding: running.record.action, as: UTF8.self))
            line.endObject()
        }
        if let lastRefusal { line.string("last_refusal", lastRefusal) } else { line.null("last_refusal") }
        line.endObject()
    }
}
