import LocusCore
import LocusDevices

/// `locus log export [--state DIR] [--config SITE] [--after-seq N] [--format jsonl|csv] [--follow] [--ssh]`:
/// the log as JSON lines (or CSV), incremental by sequence number, so a technician's fetch asks
/// only for what it has not seen. Read-only and lock-free: safe beside a running agent.
///
/// With `--config SITE` whose `[geocoding]` has `annotate = true`, events, visits and fixes carry
/// the place nearest their position, computed now from the record's coordinates with the site's
/// index (the log holds no places); the site's state directory is the default.
enum LogExport {
    static let usage = "usage: locus log export [--state DIR] [--config SITE] [--after-seq N] [--format jsonl|csv] [--follow] [--ssh]"

    enum Format { case jsonl, csv }

    struct Options {
        var directory = LogCommand.defaultStateDirectory
        var afterSequence: UInt64 = 0
        var format = Format.jsonl
        var follow = false
        var stateGiven = false
        /// `--config SITE`: the site's state directory and place labels.
        var config: String? = nil
    }

    static func parse(_ arguments: [String], into defaults: Options = Options()) -> Result<Options, ExitStatus> {
        var options = defaults
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let value = index + 1 < arguments.count ? arguments[index + 1] : nil
            switch argument {
            case "--follow":
                options.follow = true
                index += 1
                continue
            case "--state", "--after-seq", "--format", "--config":
                guard let value else {
                    return .failure(ExitStatus(code: CommandLineInterface.usageError("log export: \(argument) needs a value", hint: usage)))
                }
                switch argument {
                case "--state":
                    options.directory = value
                    options.stateGiven = true
                case "--config": options.config = value
                case "--after-seq":
                    guard let number = UInt64(value) else {
                        return .failure(ExitStatus(code: CommandLineInterface.usageError("log export: --after-seq takes a sequence number, not '\(value)'", hint: usage)))
                    }
                    options.afterSequence = number
                default:
                    switch value {
                    case "jsonl", "json": options.format = .jsonl
                    case "csv": options.format = .csv
                    default:
                        return .failure(ExitStatus(code: CommandLineInterface.usageError("log export: --format is jsonl or csv, not '\(value)'", hint: usage)))
                    }
                }
                index += 2
            default:
                return .failure(ExitStatus(code: CommandLineInterface.usageError("log export: unexpected argument '\(argument)'", hint: usage)))
            }
        }
        return .success(options)
    }

    /// `--ssh`: the forced command of a key that may only export the log (in authorized_keys,
    /// `restrict,command="locus log export --ssh [--state DIR]"`). sshd passes what the client
    /// asked for in SSH_ORIGINAL_COMMAND; it is read as export options and never run. The
    /// state directory is the forced command's to choose, never the client's.
    static func parseSSH(forced: [String], command: String) -> Result<Options, ExitStatus> {
        let defaults: Options
        switch parse(forced) {
        case .success(let parsed): defaults = parsed
        case .failure(let status): return .failure(status)
        }
        guard let arguments = clientArguments(command) else {
            Console.error("locus: log export --ssh: refused '\(command)': only log export arguments are allowed (--after-seq N, --format jsonl|csv, --follow)\n")
            return .failure(ExitStatus(code: 2))
        }
        return parse(arguments, into: defaults)
    }

    /// The client's command split at spaces and tabs: an optional `locus log export` or
    /// `log export` (what `ssh HOST locus log export ...` sends), then only --after-seq N,
    /// --format F and --follow (parse checks the values). nil for anything else. Words are
    /// letters, digits and dashes, so no quote, backslash or shell operator gets that far.
    static func clientArguments(_ command: String) -> [String]? {
        var words: [String] = []
        for word in command.utf8.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) {
            guard word.allSatisfy(isWordByte) else { return nil }
            words.append(String(decoding: word, as: UTF8.self))
        }
        if words.starts(with: ["locus", "log", "export"]) {
            words.removeFirst(3)
        } else if words.starts(with: ["log", "export"]) {
            words.removeFirst(2)
        }
        var index = 0
        while index < words.count {
            switch words[index] {
            case "--follow": index += 1
            case "--after-seq", "--format": index += 2
            default: return nil
            }
        }
        return words
    }

    private static func isWordByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }

    /// A line holds one record: a text payload escaped at worst 6 bytes a byte, plus the members.
    static let lineCapacity = 6 * LogRecord.maximumPayloadSize + 1024

    static func run(_ arguments: [String]) -> Int32 {
        var options: Options
        let parsed = arguments.contains("--ssh")
            ? parseSSH(forced: arguments.filter { $0 != "--ssh" }, command: Process.environment("SSH_ORIGINAL_COMMAND") ?? "")
            : parse(arguments)
        switch parsed {
        case .success(let parsed): options = parsed
        case .failure(let status): return status.code
        }
        let places: SitePlaces
        switch SitePlaces.open(&options) {
        case .success(let opened): places = opened
        case .failure(let status): return status.code
        }
        defer { withExtendedLifetime(places) {} }
        var next = options.afterSequence
        var header = options.format == .csv
        var line = JSONWriter(capacity: lineCapacity)
        var output = BufferedOutput()
        // --follow: poll twice a second until interrupted (the technician's ^C or the SSH
        // session ending); without it, one pass.
        while true {
            var failure: LogStoreError? = nil
            var corrupt = 0
            do {
                let scan = try LogStore.scan(directory: options.directory) { record, payload in
                    guard record.sequence > next else { return }
                    line.reset()
                    if header {
                        line.text("seq,time,type,monitor,identifier,state,date,refinement_uuid,refinement_major,refinement_minor,diagnostics\n")
                        header = false
                    }
                    next = record.sequence
                    write(record, payload, options.format, places: places.labels, into: &line)
                    line.newline()
                    output.write(line.bytes)
                }
                corrupt = scan.corruptions.filter { !$0.truncated }.count
            } catch {
                failure = error
            }
            output.flush()
            if let failure { return CommandLineInterface.failure("log export", "\(options.directory): \(failure)") }
            if corrupt > 0 && !options.follow {
                Console.error("locus: log export: \(corrupt) corrupt region(s) skipped; run 'locus log verify' for offsets\n")
            }
            // --follow ends when whoever reads it has gone (an SSH session closed while no new
            // record arrived would otherwise leave this process behind on the gateway).
            guard options.follow, !Files.hungUp(1) else { return 0 }
            Clock.sleep(nanoseconds: 500_000_000)
        }
    }

    /// One record as a line (no newline) into `line`: a JSON object or a CSV row.
    static func write(_ header: LogRecordHeader, _ payload: UnsafeRawBufferPointer, _ format: Format, places: PlaceLabels? = nil,
                      into line: inout JSONWriter) {
        switch format {
        case .jsonl: writeJSON(header, payload, places: places, into: &line)
        case .csv: writeCSV(header, payload, into: &line)
        }
    }

    /// {"seq":N,"time":..,"type":..,<the payload's members>}; events, visits and fixes with the
    /// place nearest them when `places` is given.
    static func writeJSON(_ header: LogRecordHeader, _ payload: UnsafeRawBufferPointer, places: PlaceLabels? = nil, into line: inout JSONWriter) {
        let type = LogRecordType(rawValue: header.typeCode)
        line.beginObject()
        line.integer("seq", header.sequence)
        line.time("time", UTCTime(nanoseconds: header.time))
        if let type { line.string("type", type.name) } else { line.string("type", "type-\(header.typeCode)") }
        var reader = ByteReader(payload)
        switch type {
        case .event?:
            guard let event = LogPayload.readEvent(&reader) else { line.string("error", "undecodable event payload"); break }
            line.key("event")
            EventJSON.write(event, sequence: Int64(header.sequence), places: places, into: &line)
        case .conditionAdded?:
            guard let entry = LogPayload.readCondition(&reader) else { line.string("error", "undecodable condition payload"); break }
            writeMembers(entry, into: &line)
        case .conditionRemoved?:
            guard let (monitor, identifier) = LogPayload.readRemoval(&reader) else { line.string("error", "undecodable removal payload"); break }
            line.string("monitor", monitor)
            line.string("identifier", identifier)
        case .start?, .stop?, .diagnostic?:
            line.key("text")
            writeText(payload, into: &line)
        case .gpio?:
            guard let change = LogPayload.readGPIO(&reader) else { line.string("error", "undecodable gpio payload"); break }
            writeMembers(change, into: &line)
        case .consumer?:
            guard let (monitor, sequence) = LogPayload.readConsumer(&reader) else { line.string("error", "undecodable consumer payload"); break }
            line.string("monitor", monitor)
            line.integer("taken_seq", sequence)
        case .uplink?:
            guard let cursor = LogPayload.readUplink(&reader) else { line.string("error", "undecodable uplink payload"); break }
            line.integer("delivered_seq", cursor.delivered)
            if let chained = cursor.chained { line.integer("chained_seq", chained) } else { line.null("chained_seq") }
        case .fix?:
            guard let fix = LogPayload.readFix(&reader) else { line.string("error", "undecodable fix payload"); break }
            writeMembers(fix, into: &line)
            places?.writeMember(latitude: fix.latitude, longitude: fix.longitude, into: &line)
        case .visit?:
            guard let visit = LogPayload.readVisit(&reader) else { line.string("error", "undecodable visit payload"); break }
            UpdateJSON.writeMembers(visit, places: places, into: &line)
        case .remote?:
            guard let remote = LogPayload.readRemote(&reader) else { line.string("error", "undecodable remote payload"); break }
            writeMembers(remote, into: &line)
        case .checkpoint?:
            line.integer("records", Int(reader.uint16()))
            if header.flags.contains(.moreFollow) { line.boolean("more_follow", true) }
        default:
            line.integer("bytes", payload.count)
        }
        line.endObject()
    }

    static func writeMembers(_ entry: LogPayload.ConditionEntry, into line: inout JSONWriter) {
        line.string("monitor", entry.monitor)
        line.string("identifier", entry.identifier)
        line.key("condition")
        ConditionJSON.write(entry.condition, into: &line)
        line.key("settings")
        ConditionJSON.write(entry.settings, into: &line)
        line.string("assuming", entry.assuming.name)
        line.boolean("site_file", entry.fromSiteFile)
    }

    /// A configuration's version or a command's id and action, the result, the message's digest
    /// the reason of a refusal or failure, and what a command found.
    static func writeMembers(_ remote: LogPayload.RemoteResult, into line: inout JSONWriter) {
        switch remote.kind {
        case .config:
            line.string("remote", "config")
            line.integer("version", remote.version)
        case .command:
            line.string("remote", "command")
            line.string("id", String(decoding: remote.id, as: UTF8.self))
            line.string("action", String(decoding: remote.action, as: UTF8.self))
        }
        line.string("result", remote.result.name)
        if !remote.digest.isEmpty { line.string("digest", remote.digest.withUnsafeBytes { HexText.string($0) }) }
        if !remote.reason.isEmpty { line.string("reason", String(decoding: remote.reason, as: UTF8.self)) }
        if !remote.detail.isEmpty { remote.detail.withUnsafeBytes { line.raw("detail", $0) } }
    }

    static func writeMembers(_ change: LogPayload.GPIOChange, into line: inout JSONWriter) {
        line.string("output", change.output)
        line.boolean("value", change.value)
        line.string("cause", change.cause.name)
        if let monitor = change.monitor, let identifier = change.identifier {
            line.string("monitor", monitor)
            line.string("identifier", identifier)
        }
    }

    /// A logged fix with gpsd's TPV names: mode, lat, lon, eph (horizontal accuracy, m), speed
    /// (m/s), track; at the precision the log keeps (not the receiver's TPV).
    static func writeMembers(_ fix: LogPayload.LoggedFix, into line: inout JSONWriter) {
        line.integer("mode", Int(fix.mode))
        if fix.latitude.isFinite {
            line.number("lat", fix.latitude, decimals: 9)
            line.number("lon", fix.longitude, decimals: 9)
        }
        if fix.accuracyM >= 0 { line.number("eph", fix.accuracyM, decimals: 1) }
        if fix.speedMps >= 0 { line.number("speed", fix.speedMps, decimals: 3) }
        if fix.trackDeg >= 0 { line.number("track", fix.trackDeg, decimals: 1) }
    }

    /// A text payload as a JSON string; bytes that are not UTF-8 read as U+FFFD, as a String would.
    static func writeText(_ payload: UnsafeRawBufferPointer, into line: inout JSONWriter) {
        if UTF8Validation.firstInvalidByte(in: payload) == nil {
            line.string(bytes: payload)
        } else {
            line.string(String(decoding: payload, as: UTF8.self))
        }
    }

    /// seq,time,type,monitor,identifier,state,date,refinement_uuid,refinement_major,refinement_minor,diagnostics
    static func writeCSV(_ header: LogRecordHeader, _ payload: UnsafeRawBufferPointer, into line: inout JSONWriter) {
        let type = LogRecordType(rawValue: header.typeCode)
        line.text(header.sequence)
        line.text(",")
        line.text(UTCTime(nanoseconds: header.time))
        line.text(",")
        if let type { line.text(type.name) } else { line.text("type-\(header.typeCode)") }
        var reader = ByteReader(payload)
        // Eight fields after the type, empty unless the record has them.
        if type == .event, let event = LogPayload.readEvent(&reader) {
            writeCSVFields(event, into: &line)
        } else if type == .conditionAdded, let entry = LogPayload.readCondition(&reader) {
            writeCSVNames(entry.monitor, entry.identifier, into: &line)
        } else if type == .conditionRemoved, let (monitor, identifier) = LogPayload.readRemoval(&reader) {
            writeCSVNames(monitor, identifier, into: &line)
        } else {
            line.text(",,,,,,,,")
        }
    }

    static func writeCSVFields(_ event: MonitorEvent, into line: inout JSONWriter) {
        writeCSVNames(event.monitor, event.identifier, into: &line, rest: false)
        line.text(",")
        line.text(event.state.name)
        line.text(",")
        line.text(event.date)
        line.text(",")
        if let refinement = event.refinement {
            line.text(refinement.uuid)
            line.text(",")
            line.text(Int64(refinement.major))
            line.text(",")
            line.text(Int64(refinement.minor))
        } else {
            line.text(",,")
        }
        line.text(",")
        var first = true
        event.diagnostics.forEachName { name in
            if !first { line.text(";") }
            line.text(name)
            first = false
        }
    }

    /// ",monitor,identifier", then the six empty fields after them unless `rest` is false.
    static func writeCSVNames(_ monitor: FixedName, _ identifier: FixedName, into line: inout JSONWriter, rest: Bool = true) {
        line.text(",")
        line.text(monitor)
        line.text(",")
        line.text(identifier)
        if rest { line.text(",,,,,,") }
    }
}

/// `locus events [--state DIR] [--config SITE] [--monitor NAME] [--after-seq N] [--follow]`: the
/// events of the log (all monitors, or one), as JSON lines with their log sequence numbers; with
/// `--config`, annotated as the site's `[geocoding]` says (see `LogExport`).
enum EventsCommand {
    static let usage = "usage: locus events [--state DIR] [--config SITE] [--monitor NAME] [--after-seq N] [--follow]"

    static func run(_ arguments: [String]) -> Int32 {
        var rest: [String] = []
        var monitor: FixedName? = nil
        var index = 0
        while index < arguments.count {
            if arguments[index] == "--monitor" {
                guard index + 1 < arguments.count, let name = FixedName(arguments[index + 1]) else {
                    return CommandLineInterface.usageError("events: --monitor needs a monitor name", hint: usage)
                }
                monitor = name
                index += 2
            } else {
                rest.append(arguments[index])
                index += 1
            }
        }
        var options: LogExport.Options
        switch LogExport.parse(rest) {
        case .success(let parsed): options = parsed
        case .failure(let status): return status.code
        }
        let places: SitePlaces
        switch SitePlaces.open(&options) {
        case .success(let opened): places = opened
        case .failure(let status): return status.code
        }
        defer { withExtendedLifetime(places) {} }
        // --follow through a running agent's read.sock (a plain subscription only reads); without
        // an agent, or without the right to reach it, by watching the log files.
        if options.follow, let client = try? AgentClient(directory: options.directory, for: .reading) {
            return AgentCommands.followEvents(client, monitor: monitor, afterSequence: options.afterSequence)
        }
        var next = options.afterSequence
        var line = JSONWriter(capacity: 4096 + PlaceLabels.maximumMemberBytes)
        var output = BufferedOutput()
        while true {
            var failure: LogStoreError? = nil
            do {
                _ = try LogStore.scan(directory: options.directory) { header, payload in
                    guard header.sequence > next else { return }
                    next = header.sequence
                    guard header.typeCode == LogRecordType.event.rawValue else { return }
                    var reader = ByteReader(payload)
                    guard let event = LogPayload.readEvent(&reader) else { return }
                    if let monitor, event.monitor != monitor { return }
                    line.reset()
                    EventJSON.write(event, sequence: Int64(header.sequence), places: places.labels, into: &line)
                    line.newline()
                    output.write(line.bytes)
                }
            } catch {
                failure = error
            }
            output.flush()
            if let failure { return CommandLineInterface.failure("events", "\(options.directory): \(failure)") }
            // --follow ends when whoever reads it has gone (an SSH session closed while no new
            // record arrived would otherwise leave this process behind on the gateway).
            guard options.follow, !Files.hungUp(1) else { return 0 }
            Clock.sleep(nanoseconds: 500_000_000)
        }
    }
}

/// `--config SITE` for the commands that read the log: the site's state directory (unless
/// `--state` was given) and, with `[geocoding] annotate = true`, its place index, open as long as
/// this value lives, and the labels over it.
struct SitePlaces {
    let file: PlaceIndexFile?
    let labels: PlaceLabels?

    static func open(_ options: inout LogExport.Options) -> Result<SitePlaces, ExitStatus> {
        guard let path = options.config else { return .success(SitePlaces(file: nil, labels: nil)) }
        guard let site = LoadedConfig.readSite(path) else { return .failure(ExitStatus(code: 1)) }
        if !options.stateGiven { options.directory = Paths.resolve(site.stateDirectory, relativeTo: Paths.directory(of: path)) }
        guard let geocoding = site.geocoding, geocoding.annotate else { return .success(SitePlaces(file: nil, labels: nil)) }
        let indexPath = Paths.resolve(geocoding.index, relativeTo: Paths.directory(of: path))
        switch PlaceIndexFile.open(indexPath) {
        case .success(let file):
            return .success(SitePlaces(file: file, labels: PlaceLabels(index: file.index, settings: geocoding)))
        case .failure(let refusal):
            return .failure(ExitStatus(code: CommandLineInterface.failure("--config", "place index \(indexPath): \(refusal.reason)")))
        }
    }
}
