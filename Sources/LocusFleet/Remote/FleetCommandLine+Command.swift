import LocusCore
import LocusDevices

/// `locus-fleet command send` and `command status` (docs/remote.md, "A command").
extension FleetCommandLine {
    static let commandUsage = """
               locus-fleet command send --gateway ID [--expires DURATION] --key FILE [broker options] ACTION ARGUMENTS
               locus-fleet command status [--gateway ID] [--json]
        """

    static let commandHelp = """
          command   one signed command for one gateway, sent once (QoS 1, not retained) on
                    <prefix>/remote/command; the gateway runs it at most once, before it
                    expires (--expires, default 10min), and its command record is the answer:
                      send ... pulse OUTPUT DURATION        drive the output active (DURATION: 500ms)
                      send ... set OUTPUT on|off            latch the output active, or clear its latch
                      send ... locate [--accuracy TIER] [--timeout 30s]   one location request
                      send ... snapshot UUID [MAJOR [MINOR]] [--duration 5s]   the beacons ranged
                      send ... republish FROM TO             the uplink sends log seqs FROM..TO again
                      status    each command and its result: done (with what a locate, snapshot
                                or republish found), refused, failed (from the gateway's record,
                                with its reason), pending, expired-without-answer, or unpublished
                                (the broker never acknowledged it)
                    the broker options as for config set

        """

    static let defaultCommandExpiryMs: Int64 = 600_000
    private static let actions = "pulse, set, locate, snapshot or republish"

    static func commands(_ arguments: [String]) -> Int32 {
        switch arguments.first {
        case "send": return commandSend(Array(arguments.dropFirst()))
        case "status": return commandStatus(Array(arguments.dropFirst()))
        case let other?: return usageError("command: unknown command '\(other)' (send or status)")
        case nil: return usageError("command: send or status is needed")
        }
    }

    /// The action and its `[command]` keys from the positional arguments and options.
    static func commandAction(_ arguments: RemoteArguments) throws(UsageError) -> (String, [(String, RemoteMessage.Value)]) {
        guard let action = arguments.positional.first else { throw UsageError(message: "an action is needed: \(actions)") }
        let values = Array(arguments.positional.dropFirst())
        if action != "locate" && (arguments["--accuracy"] != nil || arguments["--timeout"] != nil) {
            throw UsageError(message: "--accuracy and --timeout are for locate")
        }
        if action != "snapshot" && arguments["--duration"] != nil { throw UsageError(message: "--duration is for snapshot") }
        func duration(_ text: String, _ what: String) throws(UsageError) -> String {
            switch Quantity.durationMs(text) {
            case .success(let ms) where ms > 0: return text
            case .success: throw UsageError(message: "\(what) '\(text)' is not longer than 0")
            case .failure(let problem): throw UsageError(message: "\(what) '\(text)': \(problem.message)")
            }
        }
        switch action {
        case "pulse":
            guard values.count == 2 else { throw UsageError(message: "pulse takes OUTPUT DURATION (pulse relay1 500ms)") }
            guard !values[0].isEmpty else { throw UsageError(message: "pulse: the output's name is empty") }
            return (action, [("output", .string(values[0])), ("duration", .string(try duration(values[1], "pulse's duration")))])
        case "set":
            guard values.count == 2, !values[0].isEmpty, ["on", "off"].contains(values[1]) else {
                throw UsageError(message: "set takes OUTPUT on|off (set relay1 on)")
            }
            return (action, [("output", .string(values[0])), ("value", .string(values[1]))])
        case "snapshot":
            guard (1...3).contains(values.count), BeaconUUID(values[0]) != nil else {
                throw UsageError(message: "snapshot takes UUID [MAJOR [MINOR]] (snapshot E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 100)")
            }
            var keys: [(String, RemoteMessage.Value)] = [("uuid", .string(values[0]))]
            for (index, key) in ["major", "minor"].enumerated() where values.count > index + 1 {
                guard let number = Int64(values[index + 1]), (0...65_535).contains(number) else {
                    throw UsageError(message: "snapshot: \(key) '\(values[index + 1])' is not 0 to 65535")
                }
                keys.append((key, .integer(number)))
            }
            keys.append(("duration", .string(try duration(arguments["--duration"] ?? "5s", "--duration"))))
            return (action, keys)
        case "locate":
            guard values.isEmpty else { throw UsageError(message: "locate takes no arguments, only --accuracy TIER and --timeout DURATION") }
            var keys: [(String, RemoteMessage.Value)] = []
            if let tier = arguments["--accuracy"] {
                guard AccuracyTier.named(tier) != nil else {
                    throw UsageError(message: "--accuracy '\(tier)' is not a tier (\(AccuracyTier.names.map(\.0).joined(separator: ", ")))")
                }
                keys.append(("accuracy", .string(tier)))
            }
            keys.append(("timeout", .string(try duration(arguments["--timeout"] ?? "30s", "--timeout"))))
            return (action, keys)
        case "republish":
            guard values.count == 2, let from = Int64(values[0]), let to = Int64(values[1]), from >= 1, from <= to else {
                throw UsageError(message: "republish takes FROM TO: log sequence numbers, 1 <= FROM <= TO")
            }
            return (action, [("from", .integer(from)), ("to", .integer(to))])
        default:
            throw UsageError(message: "unknown action '\(action)' (\(actions))")
        }
    }

    static func commandSend(_ arguments: [String]) -> Int32 {
        let parsed: RemoteArguments
        let connectionString: ConnectionString
        let broker: (FleetBroker.Settings, String)
        let gateway: String, action: String, keys: [(String, RemoteMessage.Value)], expiresMs: Int64
        do throws(UsageError) {
            parsed = try RemoteArguments.parse(arguments, valued: publishingOptions.union(["--gateway", "--expires", "--accuracy", "--timeout", "--duration"]))
            guard let named = parsed["--gateway"] else { throw UsageError(message: "--gateway ID is needed") }
            if let problem = gatewayProblem(named) { throw UsageError(message: problem) }
            gateway = named
            (action, keys) = try commandAction(parsed)
            switch Quantity.durationMs(parsed["--expires"] ?? "10min") {
            case .success(let ms) where ms >= 1_000: expiresMs = ms
            case .success: throw UsageError(message: "--expires '\(parsed["--expires"]!)' is shorter than a second")
            case .failure(let problem): throw UsageError(message: "--expires '\(parsed["--expires"]!)': \(problem.message)")
            }
            connectionString = try openDatabase(parsed)
            broker = try publisherSettings(parsed)
        } catch {
            return usageError("command send: \(error.message)")
        }
        do {
            let signer = try signer(parsed)
            let publisher = try FleetPublisher(broker.0, prefix: broker.1)
            defer { publisher.close() }
            let database = try FleetDatabase(connectionString, notice: notice)
            let id = try sendCommand(gateway: gateway, action: action, keys, expiresMs: expiresMs, signer: signer, publisher: publisher, database: database)
            FleetOutput.out("command \(id) (\(action)) for \(gateway): published, acknowledged by the broker; expires in \(Quantity.formatMs(expiresMs))\n")
            return 0
        } catch {
            return failure("command send: \(error.message)")
        }
    }

    /// Signs one command, stores it (with a database: `command status` then shows it and the
    /// gateway's answer), publishes it at QoS 1 and records that the broker took it; its id.
    static func sendCommand(gateway: String, action: String, _ keys: [(String, RemoteMessage.Value)], expiresMs: Int64,
                            signer: FleetSigner, publisher: FleetPublisher, database: FleetDatabase?) throws(FleetError) -> String {
        let hex = String(Randomness.next(), radix: 16)
        let id = "c-" + String(repeating: "0", count: 16 - hex.count) + hex
        let expiresS = (Clock.realtimeNs() / 1_000_000 + expiresMs + 999) / 1_000
        let message = try signer.signed(RemoteMessage.commandBody(gateway: gateway, id: id, expiresS: expiresS, action: action, keys))
        try database?.retrying("storing the command") { (connection) throws(PostgresError) in
            try FleetCommandStore.create(id: id, gateway: gateway, action: action, body: message, expiresS: expiresS, on: connection)
        }
        try publisher.publish(publisher.topic(gateway, "command"), message, retain: false)
        try database?.retrying("recording the publication") { (connection) throws(PostgresError) in
            try FleetCommandStore.published(id, on: connection)
        }
        return id
    }

    static func commandStatus(_ arguments: [String]) -> Int32 {
        let parsed: RemoteArguments
        let connectionString: ConnectionString
        do throws(UsageError) {
            (parsed, connectionString) = try readingArguments("", arguments, valued: ["--gateway"], flags: ["--json"], positional: 0...0)
        } catch {
            return usageError("command status: \(error.message)")
        }
        do {
            let commands = try withDatabase(connectionString, "reading the commands") { (connection) throws(PostgresError) in
                try FleetCommandStore.status(gateway: parsed["--gateway"], on: connection)
            }
            if parsed.flags.contains("--json") {
                let objects = commands.map { command in
                    FleetJSON.object([("id", .string(command.id)), ("gateway", .string(command.gateway)), ("action", .string(command.action)),
                                      ("created_at", .string(command.createdAt)), ("expires_at", .string(command.expiresAt)),
                                      ("published_at", .string(command.publishedAt)), ("state", .string(command.state)),
                                      ("reason", .string(command.reason)), ("answered_at", .string(command.answeredAt)),
                                      ("detail", .raw(command.detail ?? "null"))])
                }
                FleetOutput.out(FleetJSON.object([("commands", .raw("[" + objects.joined(separator: ",") + "]"))]) + "\n")
            } else {
                if commands.isEmpty { FleetOutput.out("no command yet (locus-fleet command send)\n") }
                for command in commands {
                    var line = "\(command.id) \(command.gateway) \(command.action): \(command.state)"
                    if let reason = command.reason { line += ": \(reason)" }
                    if let detail = command.detail { line += ": \(detail)" }
                    line += command.answeredAt.map { " (answered \($0))" } ?? " (sent \(command.createdAt), expires \(command.expiresAt))"
                    FleetOutput.out(line + "\n")
                }
            }
            return 0
        } catch {
            return failure("command status: \(error.message)")
        }
    }
}
