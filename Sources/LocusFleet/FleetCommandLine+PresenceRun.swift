import Foundation
import LocusCore
import LocusDevices

extension FleetCommandLine {
    struct PresenceRunOptions {
        /// The broker as `config` and `command` reach it (TLS, login, keep-alive), a clean session.
        var broker: FleetBroker.Settings
        var prefix: String
        var plan: String? = nil
        var publish: String? = nil
        var seconds: Double? = nil
        var database: String? = nil
        var calibration: String? = nil
        /// The fleet's signing key, for the plan's rules' commands.
        var key: String? = nil
        /// With --publish: a Home Assistant device tracker per tag (MQTT discovery).
        var homeAssistant = false
        /// `calibrate`: tags laid at known spots (`TAG=X,Y`), and where the calibration goes.
        var spots: [String: PresenceFloorPlan.Point] = [:]
        var out: String? = nil
    }

    static let presenceRunOptions: Set<String> = ["--plan", "--publish", "--calibration", "--out", "--seconds", "--key"]

    /// `run`'s and `calibrate`'s options, read as `config` and `command` read theirs; the broker
    /// options are theirs too. `spots`: whether `TAG=X,Y` arguments are taken (`calibrate`).
    static func parsePresenceRun(_ arguments: [String], spots: Bool = false) throws(UsageError) -> PresenceRunOptions {
        let parsed = try RemoteArguments.parse(arguments, valued: presenceRunOptions.union(brokerOptions).union(databaseOptions),
                                               flags: ["--home-assistant"])
        let (broker, prefix) = try publisherSettings(parsed)
        var options = PresenceRunOptions(broker: broker, prefix: prefix)
        options.plan = parsed["--plan"]
        options.publish = parsed["--publish"]
        options.database = parsed["--database"]
        options.calibration = parsed["--calibration"]
        options.key = parsed["--key"]
        options.out = parsed["--out"]
        options.homeAssistant = parsed.flags.contains("--home-assistant")
        if let text = parsed["--seconds"] {
            guard let seconds = Double(text), seconds > 0 else { throw UsageError(message: "--seconds takes a number above 0, got '\(text)'") }
            options.seconds = seconds
        }
        for argument in parsed.positional {
            let parts = argument.split(separator: "=", omittingEmptySubsequences: false)
            let numbers = parts.count == 2 ? parts[1].split(separator: ",").compactMap { Double(String($0)) } : []
            guard spots, numbers.count == 2, !parts[0].isEmpty else {
                throw UsageError(message: spots ? "'\(argument)' is not TAG=X,Y (a tag and its spot in metres)" : "unexpected argument '\(argument)'")
            }
            options.spots[String(parts[0])] = PresenceFloorPlan.Point(numbers[0], numbers[1])
        }
        if options.homeAssistant && options.publish == nil { throw UsageError(message: "--home-assistant needs --publish PREFIX (its state topics)") }
        return options
    }

    /// The floor plan and the broker's presence messages subscribed to, for `run` and
    /// `calibrate`; nil when a problem was said (exit status in `status`).
    static func presenceSetup(_ options: PresenceRunOptions, _ command: String, status: inout Int32) -> (PresenceFloorPlan, FleetBroker)? {
        guard let planPath = options.plan, let text = try? String(contentsOfFile: planPath, encoding: .utf8) else {
            status = usageError("presence \(command): --plan FILE (a floor plan, docs/presence.md) is required and must be readable")
            return nil
        }
        let plan: PresenceFloorPlan
        do { plan = try PresenceFloorPlan.parse(toml: text) } catch {
            FleetOutput.error("locus-fleet: \(planPath):\(error)\n")
            status = 1
            return nil
        }
        do {
            let broker = try FleetBroker(options.broker)
            try broker.subscribe([options.prefix + "/presence"])
            FleetOutput.out("presence: \(plan.areas.count) areas, \(plan.gateways.count) gateways; listening to \(options.prefix)/presence on \(broker.peer)\n")
            return (plan, broker)
        } catch {
            FleetOutput.error("locus-fleet: presence \(command): \(error.message)\n")
            status = 1
            return nil
        }
    }

    /// `presence run`: the broker's presence messages into a `PresenceService`, decided once a
    /// second; each change printed (and published with --publish, stored with --database).
    static func presenceRun(_ arguments: [String]) -> Int32 {
        let options: PresenceRunOptions
        do { options = try parsePresenceRun(arguments) } catch { return usageError("presence run: \(error.message)") }
        var database: FleetDatabase? = nil
        if options.database != nil {
            let connection: ConnectionString
            do { connection = try self.database(Options(database: options.database)) } catch { return usageError("presence run: \(error.message)") }
            do { database = try FleetDatabase(connection, notice: notice) } catch {
                FleetOutput.error("locus-fleet: presence run: \(error.message)\n")
                return 1
            }
        }
        var status: Int32 = 0
        guard let (plan, broker) = presenceSetup(options, "run", status: &status) else { return status }
        var service = PresenceService(plan: plan)
        if let path = options.calibration {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return usageError("presence run: cannot read \(path)") }
            do {
                let calibration = try PresenceCalibrationFile.read(text, plan: plan, file: path)
                service = PresenceService(plan: plan, gatewayOffsetsDB: calibration.offsetsDB)
                service.calibratedPowersDBm = calibration.tagPowersDBm
            } catch {
                FleetOutput.error(error.description + "\n")
                return 1
            }
        }
        var commands: PresenceCommands? = nil
        if !plan.rules.isEmpty {
            guard let key = options.key else {
                return usageError("presence run: the plan has \(plan.rules.count) [[rule]]: --key FILE (the fleet's signing key) is needed to send their commands")
            }
            do {
                let signer = try signer(keyFile: key)
                // A connection of its own, beside the subscription's: a client id of its own too.
                var settings = options.broker
                settings.connect.clientID += Array("-commands".utf8)
                commands = PresenceCommands(book: PresenceRuleBook(plan.rules), signer: signer,
                                            publisher: try FleetPublisher(settings, prefix: options.prefix), database: database)
            } catch {
                FleetOutput.error("locus-fleet: presence run: \(error.message)\n")
                return 1
            }
        } else if options.key != nil {
            return usageError("presence run: --key signs the commands of the plan's [[rule]] tables, and the plan has none")
        }
        defer { commands?.publisher.close() }
        do {
            try presenceLoop(broker, service, options, database, commands)
            return 0
        } catch {
            FleetOutput.error("locus-fleet: presence run: \(error.message)\n")
            return 1
        }
    }

    /// `presence calibrate`: listens for --seconds, then solves the gateways' offsets (from their
    /// own beacons) and the powers of the tags at their TAG=X,Y spots, says what it learned and how many
    /// of the recording's decisions it changes, and writes --out.
    static func presenceCalibrate(_ arguments: [String]) -> Int32 {
        let options: PresenceRunOptions
        do { options = try parsePresenceRun(arguments, spots: true) } catch { return usageError("presence calibrate: \(error.message)") }
        guard let seconds = options.seconds else { return usageError("presence calibrate: --seconds N (how long to listen) is required") }
        if options.key != nil { return usageError("presence calibrate: --key is for presence run (its rules' commands)") }
        var status: Int32 = 0
        guard let (plan, broker) = presenceSetup(options, "calibrate", status: &status) else { return status }
        var recording = PresenceRecording(plan: plan)
        let start = FleetClock.monotonicMs()
        do {
            while Double(FleetClock.monotonicMs() - start) < seconds * 1_000 {
                for incoming in try broker.read(timeoutMs: 200) {
                    if case .publish(let message) = incoming { recording.take(message.payload, timeMs: FleetClock.monotonicMs()) }
                }
                try broker.keepAlive()
            }
        } catch {
            FleetOutput.error("locus-fleet: presence calibrate: \(error.message)\n")
            return 1
        }
        return presenceCalibrationReport(recording, options)
    }

    private static func presenceCalibrationReport(_ recording: PresenceRecording, _ options: PresenceRunOptions) -> Int32 {
        let plan = recording.plan
        let (result, powers) = recording.calibrate(spots: options.spots)
        var text = "calibration: \(recording.messages.count) messages, \(result.hearingsUsed) hearings of the gateways' beacons, fit \(String(format: "%.2f", result.residualRMSDB)) dB RMS\n"
        for (index, gateway) in plan.gateways.enumerated() {
            text += result.gatewaySolved[index] ? "  gateway \(gateway.id): receive offset \(String(format: "%+.2f", result.gatewayOffsetsDB[index])) dB\n"
                                                 : "  gateway \(gateway.id): not calibrated (its beacon unheard, or it heard none)\n"
        }
        for name in options.spots.keys.sorted() {
            text += powers[name].map { "  tag \(name): \(String(format: "%.1f", $0)) dBm at 1 m\n" } ?? "  tag \(name): not heard\n"
        }
        let changed = recording.decisionsChanged(offsetsDB: result.gatewayOffsetsDB, tagPowersDBm: powers)
        text += "  decisions changed: \(changed.differing) of \(changed.decided) tag-seconds of the recording\n"
        FleetOutput.out(text)
        guard let out = options.out else { return 0 }
        let file = PresenceCalibrationFile.text(plan: plan, offsetsDB: result.gatewayOffsetsDB, solved: result.gatewaySolved, tagPowersDBm: powers,
                                                note: "locus-fleet presence calibrate, \(recording.messages.count) messages")
        guard (try? file.write(toFile: out, atomically: true, encoding: .utf8)) != nil else {
            FleetOutput.error("locus-fleet: presence calibrate: cannot write \(out)\n")
            return 1
        }
        FleetOutput.out("calibration written to \(out) (presence run --calibration \(out))\n")
        return 0
    }

    private static func presenceLoop(_ broker: FleetBroker, _ service: consuming PresenceService, _ options: PresenceRunOptions,
                                     _ database: FleetDatabase?, _ commands: PresenceCommands?) throws(FleetError) {
        var commands = commands
        var service = service
        var announced: Set<String> = []
        let start = FleetClock.monotonicMs()
        var nextDecision = start + 1_000
        while options.seconds.map({ Double(FleetClock.monotonicMs() - start) < $0 * 1_000 }) ?? true {
            for incoming in try broker.read(timeoutMs: 200) {
                if case .publish(let message) = incoming { service.take(message.payload) }
            }
            try broker.keepAlive()
            let now = FleetClock.monotonicMs()
            guard now >= nextDecision else { continue }
            nextDecision = now + 1_000
            let wallMs = Int64(Date().timeIntervalSince1970 * 1_000)
            let changes = service.decide(nowMs: now)
            for change in changes {
                FleetOutput.out(UTCTime(nanoseconds: wallMs * 1_000_000).iso8601 + "  " + change.text + "\n")
                guard let prefix = options.publish else { continue }
                if options.homeAssistant, announced.insert(change.tag).inserted { try announce(change.tag, prefix: prefix, broker) }
                try publish(change, prefix: prefix, wallMs: wallMs, homeAssistant: options.homeAssistant, broker)
            }
            if let database, !changes.isEmpty { try store(changes, wallMs: wallMs, database) }
            commands?.send(changes)
        }
        let counts = service.counts
        FleetOutput.out("presence: \(counts.messages) messages (\(counts.unreadable) unreadable, \(counts.unknownGateways) from gateways not in the plan), \(counts.tagsHeard) tags\n")
        if let commands {
            FleetOutput.out("rules: \(commands.book.rules.count), \(commands.sent) commands sent, \(commands.failed) not sent\n")
        }
    }

    /// The round's changes into `presence_changes`, and each tag's newest into `presence_current`,
    /// in one transaction.
    private static func store(_ changes: [PresenceService.Change], wallMs: Int64, _ database: FleetDatabase) throws(FleetError) {
        let time = UTCTime(nanoseconds: wallMs * 1_000_000).iso8601
        try database.retrying("presence") { (connection) throws(PostgresError) in
            try connection.transaction { () throws(PostgresError) in
                for change in changes {
                    let values: [String?] = [change.tag, change.from, change.to, change.away ? "t" : "f", change.x.map { String($0) },
                                             change.y.map { String($0) }, change.spreadM.map { String($0) }, time]
                    try connection.execute("""
                        insert into presence_changes (tag, from_area, to_area, away, x, y, spread_m, time)
                        values ($1, $2, $3, $4, $5, $6, $7, $8)
                        """, values)
                    try connection.execute("""
                        insert into presence_current (tag, area, away, x, y, spread_m, since) values ($1, $2, $3, $4, $5, $6, $7)
                        on conflict (tag) do update set area = excluded.area, away = excluded.away, x = excluded.x, y = excluded.y,
                            spread_m = excluded.spread_m, since = excluded.since
                        """, [values[0]] + values[2...])
                }
            }
        }
    }

    /// `PREFIX/<tag>` (retained): `{"area":..,"x":..,"y":..,"spread_m":..,"time":..}`, area null when away.
    private static func publish(_ change: PresenceService.Change, prefix: String, wallMs: Int64, homeAssistant: Bool,
                                _ broker: FleetBroker) throws(FleetError) {
        let slug = presenceSlug(change.tag)
        var object: [String: Any] = ["area": change.to ?? NSNull(), "away": change.away, "time": UTCTime(nanoseconds: wallMs * 1_000_000).iso8601]
        if let x = change.x, let y = change.y, let spread = change.spreadM {
            object["x"] = (x * 100).rounded() / 100
            object["y"] = (y * 100).rounded() / 100
            object["spread_m"] = (spread * 100).rounded() / 100
        }
        let payload = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])).map { Array($0) } ?? []
        try broker.publish(topic: prefix + "/" + slug, payload: payload, retain: true)
        // Home Assistant's device tracker takes the area's name as its location; "not_home" when away.
        if homeAssistant { try broker.publish(topic: prefix + "/" + slug + "/state", payload: Array((change.to ?? "not_home").utf8), retain: true) }
    }

    /// A tag's topic level and Home Assistant object id: `phone-NAME`, `UUID-MAJOR-MINOR`.
    static func presenceSlug(_ tag: String) -> String { String(tag.map { $0 == ":" || $0 == "/" ? "-" : $0 }) }

    /// `homeassistant/device_tracker/locus_presence_<slug>/config` (retained): the tag as a device
    /// tracker whose location is its area, with its position as attributes.
    private static func announce(_ tag: String, prefix: String, _ broker: FleetBroker) throws(FleetError) {
        let slug = presenceSlug(tag), id = "locus_presence_" + slug
        let config: [String: Any] = [
            "name": tag, "unique_id": id, "object_id": id, "source_type": "bluetooth_le",
            "state_topic": prefix + "/" + slug + "/state", "json_attributes_topic": prefix + "/" + slug,
            "payload_not_home": "not_home", "device": ["identifiers": [id], "name": tag, "manufacturer": "Locus"],
        ]
        let payload = (try? JSONSerialization.data(withJSONObject: config, options: [.sortedKeys])).map { Array($0) } ?? []
        try broker.publish(topic: "homeassistant/device_tracker/\(id)/config", payload: payload, retain: true)
    }
}

/// The plan's rules and what sends their commands (`presence run --key`): each command a fired
/// rule gives is signed, stored with a database, published and printed; one that cannot be sent
/// is printed as such and counted, and the run goes on (with a database, `command status` shows
/// it unpublished).
struct PresenceCommands {
    var book: PresenceRuleBook
    let signer: FleetSigner
    let publisher: FleetPublisher
    let database: FleetDatabase?
    private(set) var sent = 0
    private(set) var failed = 0

    init(book: PresenceRuleBook, signer: FleetSigner, publisher: FleetPublisher, database: FleetDatabase?) {
        self.book = book
        self.signer = signer
        self.publisher = publisher
        self.database = database
    }

    mutating func send(_ changes: [PresenceService.Change]) {
        for (rule, change) in book.fire(changes) {
            let edge = rule.when == .enters || rule.when == .leaves ? "\(rule.when.rawValue) \(rule.area)" : "made \(rule.area) \(rule.when.rawValue)"
            let what = "\(rule.label): \(change.tag) \(edge)"
            do {
                let id = try FleetCommandLine.sendCommand(gateway: rule.gateway, action: rule.action, rule.keys, expiresMs: rule.expiresMs,
                                                          signer: signer, publisher: publisher, database: database)
                sent += 1
                FleetOutput.out("  \(what): command \(id) (\(rule.command)) for \(rule.gateway): published\n")
            } catch {
                failed += 1
                FleetOutput.error("locus-fleet: presence run: \(what): command (\(rule.command)) for \(rule.gateway) not sent: \(error.message)\n")
            }
        }
    }
}
