import LocusCore
import LocusDevices

/// The command line's side of a running agent's control sockets: `locus monitor`, `locus events
/// --follow`, `locus gpio`, `locus status` and `locus updates` go through them while an agent
/// runs, so changes reach the agent's engine (and its log) at once.
///
/// A command that only reads connects to STATE/read.sock (a technician's read-only account
/// works), one that changes to STATE/control.sock; each falls back to the other socket when its
/// own cannot be reached (the agent then decides from the user's groups, docs/access.md).
struct AgentClient: ~Copyable {
    /// What the command does, which picks the socket it tries first.
    enum Purpose { case reading, changing }

    /// Why no agent could be asked.
    enum Unreachable: Error {
        /// Nothing listens on either socket: no agent runs with this state directory.
        case noAgent
        /// A socket is there but this user may not connect to it (the sockets' or the state
        /// directory's modes).
        case denied(String)
    }

    static let replyTimeoutMs: Int32 = 10_000

    private var connection: ControlConnection
    private var nextID: Int64 = 1
    /// Requests are a few hundred bytes: a monitor name, an identifier, a condition.
    private var line = JSONWriter(capacity: 4096)

    static func socketPath(_ directory: String) -> String { Paths.join(directory, "control.sock") }
    static func readSocketPath(_ directory: String) -> String { Paths.join(directory, "read.sock") }

    /// Connects for `purpose`: read.sock first for reading, control.sock first for changing.
    init(directory: String, for purpose: Purpose) throws(Unreachable) {
        let paths = purpose == .reading ? [AgentClient.readSocketPath(directory), AgentClient.socketPath(directory)]
                                        : [AgentClient.socketPath(directory), AgentClient.readSocketPath(directory)]
        var denied: [String] = []
        for path in paths {
            do {
                connection = try ControlConnection(connecting: path)
                return
            } catch {
                if error == .permissionDenied { denied.append(path) }
            }
        }
        guard denied.isEmpty else {
            throw .denied("permission denied connecting to \(denied.joined(separator: " and ")): this user cannot reach the agent's sockets (control.sock is for group locus; read.sock needs a state directory others may enter, mode 0751; see docs/access.md)")
        }
        throw .noAgent
    }

    /// Sends a request, {"id":N,<members>} (`members` writes the members after the id), and
    /// returns the reply's bytes, or an error message for the user.
    mutating func request(timeoutMs: Int32 = AgentClient.replyTimeoutMs, _ members: (inout JSONWriter) -> Void) -> Result<[UInt8], ExitStatus> {
        line.reset()
        line.beginObject()
        line.integer("id", nextID)
        nextID += 1
        members(&line)
        line.endObject()
        guard !line.overflowed else {
            return .failure(ExitStatus(code: CommandLineInterface.failure("control", "the request does not fit \(line.capacity) bytes")))
        }
        if let error = connection.send(line.string) {
            return .failure(ExitStatus(code: CommandLineInterface.failure("control", "cannot send to the agent: \(error)")))
        }
        guard let reply = connection.readLine(timeoutMs: timeoutMs) else {
            return .failure(ExitStatus(code: CommandLineInterface.failure("control", "the agent did not answer within \(timeoutMs / 1000) s")))
        }
        return .success(reply)
    }

    /// The next streamed line (events), waiting as long as it takes; nil when the agent hung up.
    mutating func nextLine() -> [UInt8]? { connection.readLine(timeoutMs: -1) }

    /// The reply's `error.message` when it is an error reply.
    static func errorMessage(_ reply: [UInt8]) -> String? {
        guard let value = try? JSONParser.parse(reply) else { return "the agent sent an unreadable reply" }
        guard value["ok"]?.bool != true else { return nil }
        return value["error"]?["message"]?.string ?? "the agent refused the request"
    }

    /// The raw text of a reply's member.
    static func member(_ key: String, of reply: [UInt8]) -> String? {
        guard let range = JSONParser.memberRange(key, in: reply) else { return nil }
        return String(decoding: reply[range], as: UTF8.self)
    }

    /// Each element of an array member, as raw text.
    static func elements(_ key: String, of reply: [UInt8]) -> [String] {
        guard let range = JSONParser.memberRange(key, in: reply), let ranges = JSONParser.elementRanges(in: reply, array: range) else { return [] }
        return ranges.map { String(decoding: reply[$0], as: UTF8.self) }
    }
}

/// `locus gpio clear NAME [--state DIR]` and `locus status [--state DIR]`: questions only a
/// running agent can answer.
enum AgentCommands {
    static let gpioUsage = "usage: locus gpio clear NAME [--state DIR]"
    static let statusUsage = "usage: locus status [--state DIR]"

    static func stateDirectory(_ arguments: inout [String], usage: String) -> Result<String, ExitStatus> {
        var directory = LogCommand.defaultStateDirectory
        if let index = arguments.firstIndex(of: "--state") {
            guard index + 1 < arguments.count else {
                return .failure(ExitStatus(code: CommandLineInterface.usageError("--state needs a directory", hint: usage)))
            }
            directory = arguments[index + 1]
            arguments.removeSubrange(index...(index + 1))
        }
        return .success(directory)
    }

    static func connect(_ directory: String, _ what: String, for purpose: AgentClient.Purpose) -> Result<AgentClient, ExitStatus> {
        do {
            return .success(try AgentClient(directory: directory, for: purpose))
        } catch {
            switch error {
            case .noAgent:
                return .failure(ExitStatus(code: CommandLineInterface.failure(what, "no agent is running with state directory \(directory) (nothing listens on \(AgentClient.socketPath(directory)))")))
            case .denied(let message):
                return .failure(ExitStatus(code: CommandLineInterface.failure(what, message)))
            }
        }
    }

    static func gpio(_ arguments: [String]) -> Int32 {
        var rest = arguments
        let directory: String
        switch stateDirectory(&rest, usage: gpioUsage) {
        case .success(let value): directory = value
        case .failure(let status): return status.code
        }
        guard rest.count == 2, rest[0] == "clear" else { return CommandLineInterface.usageError("gpio takes 'clear NAME'", hint: gpioUsage) }
        guard FixedName(rest[1]) != nil else { return CommandLineInterface.usageError("gpio clear: '\(rest[1])' is not an output name", hint: gpioUsage) }
        var client: AgentClient
        switch connect(directory, "gpio clear", for: .changing) {
        case .success(let value): client = value
        case .failure(let status): return status.code
        }
        let output = rest[1]
        let reply: [UInt8]
        switch client.request({ line in
            line.string("op", "gpio-clear")
            line.string("gpio", output)
        }) {
        case .success(let value): reply = value
        case .failure(let status): return status.code
        }
        if let message = AgentClient.errorMessage(reply) { return CommandLineInterface.failure("gpio clear", message) }
        let result = (try? JSONParser.parse(reply))?["result"]?.string ?? "cleared"
        Console.out("\(rest[1]): \(result)\n")
        return 0
    }

    static func status(_ arguments: [String]) -> Int32 {
        var rest = arguments
        let directory: String
        switch stateDirectory(&rest, usage: statusUsage) {
        case .success(let value): directory = value
        case .failure(let status): return status.code
        }
        guard rest.isEmpty else { return CommandLineInterface.usageError("status: unexpected argument '\(rest[0])'", hint: statusUsage) }
        var client: AgentClient
        switch connect(directory, "status", for: .reading) {
        case .success(let value): client = value
        case .failure(let status): return status.code
        }
        switch client.request({ $0.string("op", "status") }) {
        case .success(let reply):
            if let message = AgentClient.errorMessage(reply) { return CommandLineInterface.failure("status", message) }
            Console.out(String(decoding: reply, as: UTF8.self) + "\n")
            return 0
        case .failure(let status):
            return status.code
        }
    }

    /// `locus events --follow` while an agent runs: subscribe, then print every event as it comes.
    static func followEvents(_ client: consuming AgentClient, monitor: FixedName?, afterSequence: UInt64) -> Int32 {
        switch client.request({ line in
            line.string("op", "subscribe")
            if let monitor { line.string("monitor", monitor) }
            line.integer("after_seq", afterSequence)
        }) {
        case .success(let reply):
            if let message = AgentClient.errorMessage(reply) { return CommandLineInterface.failure("events", message) }
        case .failure(let status):
            return status.code
        }
        while let line = client.nextLine() {
            guard let event = AgentClient.member("event", of: line) else {
                if let message = AgentClient.errorMessage(line) { return CommandLineInterface.failure("events", message) }
                continue
            }
            Console.out(event + "\n")
        }
        return CommandLineInterface.failure("events", "the agent closed the connection (stopped?)")
    }

    static let updatesUsage = "usage: locus updates [--state DIR] [--config PRESET] [--accuracy TIER] [--significant-change[=M]] [--follow]"

    /// What `locus updates` asks for: the stream's settings in the order given, whether to keep
    /// printing, and the significant-change distance.
    struct UpdatesOptions {
        var settings: [(key: StaticString, value: String)] = []
        var follow = false
        var significantChangeM: Double? = nil
    }

    static func parseUpdates(_ rest: [String]) -> Result<UpdatesOptions, ExitStatus> {
        func usage(_ message: String) -> Result<UpdatesOptions, ExitStatus> {
            .failure(ExitStatus(code: CommandLineInterface.usageError("updates: " + message, hint: updatesUsage)))
        }
        var options = UpdatesOptions()
        var index = 0
        while index < rest.count {
            let argument = rest[index]
            switch argument {
            case "--follow":
                options.follow = true
                index += 1
            case _ where argument == "--significant-change" || argument.hasPrefix("--significant-change="):
                options.significantChangeM = ControlProtocol.defaultSignificantChangeM
                if let equals = argument.utf8.firstIndex(of: UInt8(ascii: "=")) {
                    let text = String(argument[argument.index(after: equals)...])
                    guard let metres = Double(text), metres >= 50, metres <= 100_000 else {
                        return usage("--significant-change=M takes metres, 50...100000 (not '\(text)')")
                    }
                    options.significantChangeM = metres
                }
                index += 1
            case "--config", "--accuracy":
                guard index + 1 < rest.count else { return usage("\(argument) needs a value") }
                let value = rest[index + 1]
                if argument == "--config" {
                    guard LivePreset.named(value) != nil else {
                        return usage("no preset '\(value)' (presets: \(LivePreset.names.map { $0.0 }.joined(separator: ", ")))")
                    }
                    options.settings.append(("preset", value))
                } else {
                    guard AccuracyTier.named(value) != nil else {
                        return usage("no accuracy tier '\(value)' (tiers: \(AccuracyTier.names.map { $0.0 }.joined(separator: ", ")))")
                    }
                    options.settings.append(("accuracy", value))
                }
                index += 2
            default:
                return usage("unexpected argument '\(argument)'")
            }
        }
        return .success(options)
    }

    /// `locus updates`: ask the agent for a live-update stream and print it.
    static func updates(_ arguments: [String]) -> Int32 {
        var rest = arguments
        let directory: String
        switch stateDirectory(&rest, usage: updatesUsage) {
        case .success(let value): directory = value
        case .failure(let status): return status.code
        }
        let options: UpdatesOptions
        switch parseUpdates(rest) {
        case .success(let value): options = value
        case .failure(let status): return status.code
        }
        var client: AgentClient
        switch connect(directory, "updates", for: .reading) {
        case .success(let value): client = value
        case .failure(let status): return status.code
        }
        switch client.request({ line in
            line.string("op", "updates")
            for setting in options.settings { line.string(setting.key, setting.value) }
            if let metres = options.significantChangeM { line.number("significant_change_m", metres, decimals: 1) }
        }) {
        case .success(let reply):
            if let message = AgentClient.errorMessage(reply) { return CommandLineInterface.failure("updates", message) }
        case .failure(let status):
            return status.code
        }
        while let line = client.nextLine() {
            if let update = AgentClient.member("update", of: line) ?? AgentClient.member("visit", of: line) {
                Console.out(update + "\n")
                if !options.follow { return 0 }
            } else if let message = AgentClient.errorMessage(line) {
                return CommandLineInterface.failure("updates", message)
            }
        }
        return CommandLineInterface.failure("updates", "the agent closed the connection (stopped?)")
    }

    // MARK: single location request and visits

    static let locateUsage = "usage: locus locate [--state DIR] [--accuracy TIER] [--max-age S] [--timeout S]"

    /// `locus locate`: one location from the agent (CLLocationManager.requestLocation).
    static func locate(_ arguments: [String]) -> Int32 {
        var rest = arguments
        let directory: String
        switch stateDirectory(&rest, usage: locateUsage) {
        case .success(let value): directory = value
        case .failure(let status): return status.code
        }
        var accuracy: String? = nil
        var maxAgeS: Double? = nil
        var timeoutS = Double(LocateRequests.defaultTimeoutMs / 1000)
        var index = 0
        while index < rest.count {
            let argument = rest[index]
            guard argument == "--accuracy" || argument == "--max-age" || argument == "--timeout" else {
                return CommandLineInterface.usageError("locate: unexpected argument '\(argument)'", hint: locateUsage)
            }
            guard index + 1 < rest.count else { return CommandLineInterface.usageError("locate: \(argument) needs a value", hint: locateUsage) }
            let value = rest[index + 1]
            index += 2
            if argument == "--accuracy" {
                guard AccuracyTier.named(value) != nil else {
                    return CommandLineInterface.usageError("locate: no accuracy tier '\(value)' (tiers: \(AccuracyTier.names.map { $0.0 }.joined(separator: ", ")))", hint: locateUsage)
                }
                accuracy = value
                continue
            }
            let limit = argument == "--timeout" ? Double(LocateRequests.maximumTimeoutMs / 1000) : Double(LocateRequests.maximumMaxAgeMs / 1000)
            guard let seconds = Double(value), seconds >= (argument == "--timeout" ? 1 : 0), seconds <= limit else {
                return CommandLineInterface.usageError("locate: \(argument) takes seconds, \(argument == "--timeout" ? 1 : 0)...\(Int(limit)) (not '\(value)')", hint: locateUsage)
            }
            if argument == "--timeout" { timeoutS = seconds } else { maxAgeS = seconds }
        }
        var client: AgentClient
        switch connect(directory, "locate", for: .reading) {
        case .success(let value): client = value
        case .failure(let status): return status.code
        }
        // The agent answers by the timeout; a little more for the reply to arrive.
        switch client.request(timeoutMs: Int32(timeoutS * 1000) + 5_000, { line in
            line.string("op", "locate")
            if let accuracy { line.string("accuracy", accuracy) }
            if let maxAgeS { line.number("max_age_s", maxAgeS, decimals: 3) }
            line.number("timeout_s", timeoutS, decimals: 3)
        }) {
        case .success(let reply):
            if let message = AgentClient.errorMessage(reply) { return CommandLineInterface.failure("locate", message) }
            Console.out((AgentClient.member("result", of: reply) ?? "") + "\n")
            return 0
        case .failure(let status):
            return status.code
        }
    }

    static let visitsUsage = "usage: locus visits [--state DIR] [--since UNIX_SECONDS] [--limit N]"

    /// `locus visits`: the visits in the agent's log (arrivals and departures), one JSON line each.
    static func visits(_ arguments: [String]) -> Int32 {
        var rest = arguments
        let directory: String
        switch stateDirectory(&rest, usage: visitsUsage) {
        case .success(let value): directory = value
        case .failure(let status): return status.code
        }
        var since: Double? = nil
        var limit: Int? = nil
        var index = 0
        while index < rest.count {
            let argument = rest[index]
            guard argument == "--since" || argument == "--limit", index + 1 < rest.count else {
                return CommandLineInterface.usageError("visits: unexpected argument '\(argument)'", hint: visitsUsage)
            }
            let value = rest[index + 1]
            index += 2
            if argument == "--since" {
                guard let seconds = Double(value), seconds >= 0 else { return CommandLineInterface.usageError("visits: --since takes seconds since 1970", hint: visitsUsage) }
                since = seconds
            } else {
                guard let count = Int(value), count >= 1, count <= ControlProtocol.visitLimit else {
                    return CommandLineInterface.usageError("visits: --limit takes 1...\(ControlProtocol.visitLimit)", hint: visitsUsage)
                }
                limit = count
            }
        }
        var client: AgentClient
        switch connect(directory, "visits", for: .reading) {
        case .success(let value): client = value
        case .failure(let status): return status.code
        }
        switch client.request({ line in
            line.string("op", "visits")
            if let since { line.number("since", since, decimals: 3) }
            if let limit { line.integer("limit", limit) }
        }) {
        case .success(let reply):
            if let message = AgentClient.errorMessage(reply) { return CommandLineInterface.failure("visits", message) }
            for visit in AgentClient.elements("visits", of: reply) { Console.out(visit + "\n") }
            return 0
        case .failure(let status):
            return status.code
        }
    }
}
