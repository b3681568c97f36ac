import LocusCore
import LocusDevices

/// `locus log export [--state DIR] [--after-seq N] [--format jsonl|csv] [--follow] [--ssh]`: the
/// log as JSON lines (or CSV), incremental by sequence number, so a technician's fetch asks only
/// for what it has not seen. Read-only and lock-free: safe beside a running agent.
enum LogExport {
    static let usage = "usage: locus log export [--state DIR] [--after-seq N] [--format jsonl|csv] [--follow] [--ssh]"

    enum Format { case jsonl, csv }

    struct Options {
        var directory = LogCommand.defaultStateDirectory
        var afterSequence: UInt64 = 0
        var format = Format.jsonl
        var follow = false
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
            case "--state", "--after-seq", "--format":
                guard let value else {
                    return .failure(ExitStatus(code: CommandLineInterface.usageError("log export: \(argument) needs a value", hint: usage)))
                }
                switch argument {
                case "--state": options.directory = value
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

    static func run(_ arguments: [String]) -> Int32 {
        let options: Options
        let parsed = arguments.contains("--ssh")
            ? parseSSH(forced: arguments.filter { $0 != "--ssh" }, command: Process.environment("SSH_ORIGINAL_COMMAND") ?? "")
            : parse(arguments)
        switch parsed {
        case .success(let parsed): options = parsed
        case .failure(let status): return status.code
        }
        var next = options.afterSequence
        var header = options.format == .csv
        // --follow: poll twice a second until interrupted (the technician's ^C or the SSH
        // session ending); without it, one pass.
        while true {
            var failure: LogStoreError? = nil
            var corrupt = 0
            do {
                let scan = try LogStore.scan(directory: options.directory) { record, payload in
                    guard record.sequence > next else { return }
                    if header {
                        Console.out("seq,time,type,monitor,identifier,state,date,refinement_uuid,refinement_major,refinement_minor,diagnostics\n")
                        header = false
                    }
                    next = record.sequence
                    Console.out(line(record, payload, options.format) + "\n")
                }
                corrupt = scan.corruptions.filter { !$0.truncated }.count
            } catch {
                failure = error
            }
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

    static func line(_ header: LogRecordHeader, _ payload: UnsafeRawBufferPointer, _ format: Format) -> String {
        let type = LogRecordType(rawValue: header.typeCode)
        let time = UTCTime(nanoseconds: header.time).iso8601
        var reader = ByteReader(payload)
        if format == .csv {
            var fields = ["\(header.sequence)", time, type?.description ?? "type-\(header.typeCode)", "", "", "", "", "", "", "", ""]
            if type == .event, let event = LogPayload.readEvent(&reader) {
                fields[3] = event.monitor.description
                fields[4] = event.identifier.description
                fields[5] = event.state.description
                fields[6] = event.date.iso8601
                if let refinement = event.refinement {
                    fields[7] = refinement.uuid.description
                    fields[8] = "\(refinement.major)"
                    fields[9] = "\(refinement.minor)"
                }
                var names = ""
                for (index, name) in event.diagnostics.names.enumerated() { names += (index == 0 ? "" : ";") + name }
                fields[10] = names
            } else if type == .conditionAdded, let entry = LogPayload.readCondition(&reader) {
                fields[3] = entry.monitor.description
                fields[4] = entry.identifier.description
            } else if type == .conditionRemoved, let (monitor, identifier) = LogPayload.readRemoval(&reader) {
                fields[3] = monitor.description
                fields[4] = identifier.description
            }
            var text = ""
            for (index, field) in fields.enumerated() { text += (index == 0 ? "" : ",") + field }
            return text
        }
        var json = JSONText()
        json.integer("seq", Int(header.sequence))
        json.string("time", time)
        json.string("type", type?.description ?? "type-\(header.typeCode)")
        switch type {
        case .event?:
            guard let event = LogPayload.readEvent(&reader) else { json.string("error", "undecodable event payload"); break }
            let body = EventJSON.line(event, sequence: Int64(header.sequence))
            // Merge the event's fields into this object (drop its braces and its own "seq").
            json.raw("event", body)
        case .conditionAdded?:
            guard let entry = LogPayload.readCondition(&reader) else { json.string("error", "undecodable condition payload"); break }
            json.string("monitor", entry.monitor.description)
            json.string("identifier", entry.identifier.description)
            json.raw("condition", ConditionJSON.condition(entry.condition))
            json.raw("settings", ConditionJSON.settings(entry.settings))
            json.string("assuming", entry.assuming.description)
            json.boolean("site_file", entry.fromSiteFile)
        case .conditionRemoved?:
            guard let (monitor, identifier) = LogPayload.readRemoval(&reader) else { json.string("error", "undecodable removal payload"); break }
            json.string("monitor", monitor.description)
            json.string("identifier", identifier.description)
        case .start?, .stop?, .diagnostic?:
            json.string("text", String(decoding: payload, as: UTF8.self))
        case .gpio?:
            guard let change = LogPayload.readGPIO(&reader) else { json.string("error", "undecodable gpio payload"); break }
            json.string("output", change.output.description)
            json.boolean("value", change.value)
            json.string("cause", change.cause.description)
            if let monitor = change.monitor, let identifier = change.identifier {
                json.string("monitor", monitor.description)
                json.string("identifier", identifier.description)
            }
        case .consumer?:
            guard let (monitor, sequence) = LogPayload.readConsumer(&reader) else { json.string("error", "undecodable consumer payload"); break }
            json.string("monitor", monitor.description)
            json.integer("taken_seq", Int(sequence))
        case .fix?:
            // gpsd's TPV names: mode, lat, lon, eph (horizontal accuracy, m), speed (m/s), track.
            guard let fix = LogPayload.readFix(&reader) else { json.string("error", "undecodable fix payload"); break }
            json.integer("mode", Int(fix.mode))
            if fix.latitude.isFinite {
                json.number("lat", fix.latitude, decimals: 9)
                json.number("lon", fix.longitude, decimals: 9)
            }
            if fix.accuracyM >= 0 { json.number("eph", fix.accuracyM, decimals: 1) }
            if fix.speedMps >= 0 { json.number("speed", fix.speedMps, decimals: 3) }
            if fix.trackDeg >= 0 { json.number("track", fix.trackDeg, decimals: 1) }
        case .visit?:
            guard let visit = LogPayload.readVisit(&reader) else { json.string("error", "undecodable visit payload"); break }
            json.string("arrival", visit.arrival.iso8601)
            json.string("departure", visit.departure.iso8601)
            json.number("lat", visit.latitude, decimals: 9)
            json.number("lon", visit.longitude, decimals: 9)
            json.number("radius", visit.radiusM, decimals: 1)
        case .checkpoint?:
            json.integer("records", Int(reader.uint16()))
            if header.flags.contains(.moreFollow) { json.boolean("more_follow", true) }
        default:
            json.integer("bytes", payload.count)
        }
        return json.closed
    }
}

/// Conditions and settings as JSON (export, `locus monitor ... records`).
enum EventsCommand {
    static let usage = "usage: locus events [--state DIR] [--monitor NAME] [--after-seq N] [--follow]"

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
        let options: LogExport.Options
        switch LogExport.parse(rest) {
        case .success(let parsed): options = parsed
        case .failure(let status): return status.code
        }
        if options.follow, let client = AgentClient(directory: options.directory) {
            return AgentCommands.followEvents(client, monitor: monitor, afterSequence: options.afterSequence)
        }
        var next = options.afterSequence
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
                    Console.out(EventJSON.line(event, sequence: Int64(header.sequence)) + "\n")
                }
            } catch {
                failure = error
            }
            if let failure { return CommandLineInterface.failure("events", "\(options.directory): \(failure)") }
            // --follow ends when whoever reads it has gone (an SSH session closed while no new
            // record arrived would otherwise leave this process behind on the gateway).
            guard options.follow, !Files.hungUp(1) else { return 0 }
            Clock.sleep(nanoseconds: 500_000_000)
        }
    }
}
