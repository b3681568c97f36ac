import LocusCore
import LocusDevices

/// `locus monitor NAME ...`: CLMonitor's calls on one named monitor, applied to the state
/// directory under the monitor's lock (so not while an agent has the monitor open; it reports the
/// holder's pid). Changes are appended to the log like the agent's own, so the next start (or
/// replay with the same state) sees them.
enum MonitorCommand {
    static let usage = """
    usage: locus monitor NAME [--state DIR] add ID (--circle LAT,LON,RADIUS | --beacon UUID[,MAJOR[,MINOR]]) [--assuming satisfied|unsatisfied]
           locus monitor NAME [--state DIR] remove ID
           locus monitor NAME [--state DIR] records | record ID | identifiers
    """

    static func run(_ arguments: [String]) -> Int32 {
        var rest = arguments
        guard let monitorText = rest.first, !monitorText.hasPrefix("-") else {
            return CommandLineInterface.usageError("monitor needs a monitor NAME", hint: "run 'locus help monitor'")
        }
        rest.removeFirst()
        guard let monitor = FixedName(monitorText) else {
            return CommandLineInterface.failure("monitor", "'\(monitorText)' is not a monitor name (1...32 letters, digits, '-' or '_')")
        }
        let directory: String
        switch AgentCommands.stateDirectory(&rest, usage: "run 'locus help monitor'") {
        case .success(let value): directory = value
        case .failure(let status): return status.code
        }
        guard let verb = rest.first else { return CommandLineInterface.usageError("monitor \(monitorText) needs a subcommand", hint: "run 'locus help monitor'") }
        rest.removeFirst()
        let verbs = ["add", "remove", "records", "record", "identifiers"]
        guard verbs.contains(verb) else {
            var hint = "run 'locus help monitor'"
            if let suggestion = Spelling.closest(to: verb, among: verbs) { hint = "did you mean 'locus monitor \(monitorText) \(suggestion)'?" }
            return CommandLineInterface.usageError("monitor: unknown subcommand '\(verb)'", hint: hint)
        }
        // Reading verbs go through read.sock, changes through control.sock (docs/access.md).
        do {
            var client = try AgentClient(directory: directory, for: verb == "add" || verb == "remove" ? .changing : .reading)
            return remote(&client, monitor, verb, rest)
        } catch {
            switch error {
            case .noAgent: return local(directory, monitor, verb, rest)
            case .denied(let message): return CommandLineInterface.failure("monitor \(monitorText) \(verb)", message)
            }
        }
    }

    /// The calls on the state directory itself, under the monitor's lock (no agent is running).
    static func local(_ directory: String, _ monitor: FixedName, _ verb: String, _ rest: [String]) -> Int32 {
        let monitorText = monitor.description
        if verb == "add" || verb == "remove", let error = Files.makeDirectory(directory, mode: 0o750) {
            return CommandLineInterface.failure("monitor \(monitorText)", "cannot use the state directory \(directory): \(error)")
        }
        if !Files.isDirectory(directory) {
            return CommandLineInterface.failure("monitor \(monitorText)", "no state directory \(directory) (nothing has been monitored there yet)")
        }
        let lock: MonitorLock
        do {
            lock = try MonitorLock(directory: directory, name: monitorText)
        } catch {
            return CommandLineInterface.failure("monitor \(monitorText)", error.description)
        }
        defer { withExtendedLifetime(lock) {} }
        let scan: LogScan
        do { scan = try LogStore.scan(directory: directory) } catch {
            return CommandLineInterface.failure("monitor \(monitorText)", "\(directory): \(error)")
        }
        // Room for everything the log holds plus the change.
        let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: scan.records + 64, events: 16))
        let persistence: Persistence
        do {
            persistence = try Persistence(directory: directory, log: SiteConfig.Log(), engine: engine)
        } catch {
            return CommandLineInterface.failure("monitor \(monitorText)", "cannot open the log in \(directory): \(error)")
        }
        _ = persistence.rebuild()
        let log = EventLog.offline(persistence)
        let now = AgentTime(monotonic: MonotonicClock.instant, utc: UTCTime(nanoseconds: Clock.realtimeNs()))
        switch verb {
        case "add": return add(monitor, rest, engine, log, now)
        case "remove": return remove(monitor, rest, engine, log, now)
        case "identifiers":
            for identifier in engine.identifiers(monitor: monitor) { Console.out("\(identifier)\n") }
            return 0
        case "records":
            printRecords(engine, monitor, engine.identifiers(monitor: monitor))
            return 0
        default:
            guard rest.count == 1, let identifier = FixedName(rest[0]), engine.record(monitor: monitor, identifier: identifier) != nil else {
                return CommandLineInterface.failure("monitor \(monitorText) record", "no condition '\(rest.first ?? "")' in monitor '\(monitorText)'")
            }
            printRecords(engine, monitor, [identifier])
            return 0
        }
    }

    static func remove(_ monitor: FixedName, _ rest: [String], _ engine: MonitorEngine, _ log: EventLog, _ now: AgentTime) -> Int32 {
        guard rest.count == 1, let identifier = FixedName(rest[0]) else {
            return CommandLineInterface.usageError("monitor remove needs one condition ID", hint: "usage: locus monitor NAME remove ID")
        }
        guard engine.record(monitor: monitor, identifier: identifier) != nil else {
            return CommandLineInterface.failure("monitor \(monitor) remove", "no condition '\(rest[0])' in monitor '\(monitor)'")
        }
        do { try log.removeCondition(monitor, identifier, from: engine, now); try log.sync() } catch {
            return CommandLineInterface.failure("monitor \(monitor) remove", "cannot append to the log: \(error)")
        }
        Console.out("removed \(monitor)/\(rest[0])\n")
        return 0
    }

    /// One JSON line per record, through one writer.
    static func printRecords(_ engine: MonitorEngine, _ monitor: FixedName, _ identifiers: [FixedName]) {
        var line = JSONWriter(capacity: 4096)
        for identifier in identifiers {
            guard let record = engine.record(monitor: monitor, identifier: identifier) else { continue }
            line.reset()
            RecordJSON.write(identifier, record, into: &line)
            line.newline()
            Console.out(line.bytes)
        }
    }

    /// The same calls through a running agent: its engine changes at once, and it logs them.
    static func remote(_ client: inout AgentClient, _ monitor: FixedName, _ verb: String, _ arguments: [String]) -> Int32 {
        var identifier: String? = nil
        var condition: Condition? = nil
        var assuming = ConditionState.unknown
        switch verb {
        case "add":
            switch parseAdd(arguments) {
            case .success(let parsed): (identifier, condition, assuming) = (parsed.0.description, parsed.1, parsed.2)
            case .failure(let status): return status.code
            }
        case "remove", "record":
            guard arguments.count == 1, FixedName(arguments[0]) != nil else {
                return CommandLineInterface.usageError("monitor \(verb) needs one condition ID", hint: "usage: locus monitor NAME \(verb) ID")
            }
            identifier = arguments[0]
        default:
            break
        }
        let reply: [UInt8]
        switch client.request({ line in
            line.string("op", verb)
            line.string("monitor", monitor)
            if let identifier { line.string("identifier", identifier) }
            if let condition { writeRequested(condition, into: &line) }
            if assuming != .unknown { line.string("assuming", assuming.name) }
        }) {
        case .success(let value): reply = value
        case .failure(let status): return status.code
        }
        if let message = AgentClient.errorMessage(reply) { return CommandLineInterface.failure("monitor \(monitor) \(verb)", message) }
        switch verb {
        case "add", "remove":
            let result = (try? JSONParser.parse(reply))?["result"]?.string ?? "done"
            Console.out("\(result) \(monitor)/\(arguments.first ?? "")\n")
        case "identifiers":
            if case .array(let names)? = (try? JSONParser.parse(reply))?["identifiers"] {
                for name in names { if let text = name.string { Console.out(text + "\n") } }
            }
        case "records":
            for record in AgentClient.elements("records", of: reply) { Console.out(record + "\n") }
        default:
            if let record = AgentClient.member("record", of: reply) { Console.out(record + "\n") }
        }
        return 0
    }

    /// The condition of an `add` request: "circle" {lat, lon, radius} at the precision the user
    /// gave, or "beacon" as records show it.
    static func writeRequested(_ condition: Condition, into line: inout JSONWriter) {
        switch condition {
        case .circle(let circle):
            line.beginObject("circle")
            line.number("lat", circle.latitude, decimals: 9)
            line.number("lon", circle.longitude, decimals: 9)
            line.number("radius", circle.radiusM, decimals: 3)
            line.endObject()
        case .beacon:
            line.key("beacon")
            ConditionJSON.write(condition, into: &line)
        case .phone(let phone):
            line.string("phone", phone.name)
        case .polygon, .corridor:
            ConditionJSON.shapeMember(condition, widthDecimals: 3, into: &line)
        }
    }

    static let addHint = "usage: locus monitor NAME add ID (--circle LAT,LON,RADIUS | --beacon UUID[,MAJOR[,MINOR]] | --phone NAME | --polygon 'LAT,LON LAT,LON ...' | --corridor 'WIDTH LAT,LON LAT,LON ...') [--assuming satisfied|unsatisfied]"

    static func add(_ monitor: FixedName, _ arguments: [String], _ engine: MonitorEngine, _ log: EventLog, _ now: AgentTime) -> Int32 {
        let identifier: FixedName, condition: Condition, assuming: ConditionState
        switch parseAdd(arguments) {
        case .success(let parsed): (identifier, condition, assuming) = parsed
        case .failure(let status): return status.code
        }
        let entry = LogPayload.ConditionEntry(monitor: monitor, identifier: identifier, condition: condition, settings: ConditionSettings(),
                                              assuming: assuming, fromSiteFile: false)
        let result: MonitorEngine.AddResult
        switch log.addCondition(entry, to: engine, now) {
        case .success(let added) where added == .added || added == .replaced: result = added
        case .success: return CommandLineInterface.failure("monitor \(monitor) add", "conditionLimitExceeded: the capacity is full")
        case .failure(let error): return CommandLineInterface.failure("monitor \(monitor) add", "cannot append to the log: \(error)")
        }
        do { try log.sync() } catch {
            return CommandLineInterface.failure("monitor \(monitor) add", "cannot append to the log: \(error)")
        }
        Console.out("\(result == .added ? "added" : "replaced") \(monitor)/\(identifier)\n")
        return 0
    }

    static func parseAdd(_ arguments: [String]) -> Result<(FixedName, Condition, ConditionState), ExitStatus> {
        let hint = addHint
        func usage(_ message: String) -> Result<(FixedName, Condition, ConditionState), ExitStatus> {
            .failure(ExitStatus(code: CommandLineInterface.usageError(message, hint: hint)))
        }
        guard let idText = arguments.first, let identifier = FixedName(idText) else {
            return usage("monitor add needs a condition ID (1...32 letters, digits, '-' or '_')")
        }
        var condition: Condition? = nil
        var assuming: ConditionState = .unknown
        var index = 1
        while index < arguments.count {
            guard index + 1 < arguments.count else { return usage("monitor add: \(arguments[index]) needs a value") }
            let value = arguments[index + 1]
            switch arguments[index] {
            case "--circle":
                let parts = value.split(separator: ",").map { Double(String($0)) }
                guard parts.count == 3, let latitude = parts[0], let longitude = parts[1], let radius = parts[2],
                      abs(latitude) <= 90, abs(longitude) <= 180, radius > 0, radius <= 10_000_000 else {
                    return usage("monitor add: --circle takes LAT,LON,RADIUS (degrees, metres > 0), not '\(value)'")
                }
                condition = .circle(CircularGeographicCondition(latitude: latitude, longitude: longitude, radiusM: radius))
            case "--beacon":
                let parts = value.split(separator: ",").map(String.init)
                guard (1...3).contains(parts.count), let uuid = BeaconUUID(parts[0]) else {
                    return usage("monitor add: --beacon takes UUID[,MAJOR[,MINOR]], not '\(value)'")
                }
                let numbers = parts.dropFirst().map { UInt16($0) }
                guard numbers.allSatisfy({ $0 != nil }) else {
                    return usage("monitor add: major and minor are 0...65535")
                }
                condition = .beacon(BeaconIdentityCondition(uuid: uuid, major: numbers.first ?? nil, minor: numbers.count > 1 ? numbers[1] : nil))
            case "--phone":
                guard let name = FixedName(value) else { return usage("monitor add: --phone takes a phone's name from the site's phones file, not '\(value)'") }
                condition = .phone(PhoneCondition(name: name))
            case "--polygon", "--corridor":
                let corridor = arguments[index] == "--corridor"
                var words = value.split(separator: " ").map(String.init)
                let width = corridor ? Double(words.first ?? "") : 0
                if corridor, !words.isEmpty { words.removeFirst() }
                let pairs = words.map { $0.split(separator: ",").map { Double(String($0)) } }
                guard let width, width >= 0, pairs.allSatisfy({ $0.count == 2 && $0[0].map { abs($0) <= 90 } == true && $0[1].map { abs($0) <= 180 } == true }) else {
                    return usage("monitor add: \(arguments[index]) takes \(corridor ? "WIDTH then " : "")LAT,LON positions separated by spaces, not '\(value)'")
                }
                let latitudes = pairs.map { $0[0]! }, longitudes = pairs.map { $0[1]! }
                if corridor {
                    do throws(CorridorError) { condition = .corridor(try GeoCorridor(latitudes: latitudes, longitudes: longitudes, widthM: width)) } catch {
                        return usage("monitor add: --corridor: " + ShapeMessages.corridor(error).message)
                    }
                } else {
                    do throws(ShapeError) { condition = .polygon(try GeoPolygon(latitudes: latitudes, longitudes: longitudes)) } catch {
                        return usage("monitor add: --polygon: " + ShapeMessages.polygon(error).message)
                    }
                }
            case "--assuming":
                switch value {
                case "satisfied": assuming = .satisfied
                case "unsatisfied": assuming = .unsatisfied
                default: return usage("monitor add: --assuming is satisfied or unsatisfied, not '\(value)'")
                }
            default:
                return usage("monitor add: unexpected argument '\(arguments[index])'")
            }
            index += 2
        }
        guard let condition else { return usage("monitor add needs --circle or --beacon") }
        return .success((identifier, condition, assuming))
    }
}
