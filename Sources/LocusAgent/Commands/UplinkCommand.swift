import LocusCore
import LocusDevices

/// `locus uplink test [--config SITE.toml]`: one connection with the site's `[uplink]` settings,
/// each step reported for a technician on site (DNS, TCP, TLS, CONNECT, a test message and its
/// PUBACK), exit 0 only when all of them worked.
/// `locus uplink status [--state DIR]`: the running agent's uplink in one line.
enum UplinkCommand {
    static let usage = "usage: locus uplink (test [--config SITE.toml] | status [--state DIR])"

    static func run(_ arguments: [String]) -> Int32 {
        guard let verb = arguments.first else { return CommandLineInterface.usageError("uplink: test or status?", hint: usage) }
        switch verb {
        case "test": return test(Array(arguments.dropFirst()))
        case "status": return status(Array(arguments.dropFirst()))
        default: return CommandLineInterface.usageError("uplink: unknown '\(verb)'", hint: usage)
        }
    }

    // MARK: test

    /// The gateway id, client id and topic prefix the settings come to, or nil without a gateway
    /// id. Each optional is unwrapped on its own, with no `??` between String optionals: the
    /// aarch64 Embedded build read `settings.gateway ?? machineID()` as a String with its
    /// discriminator's small-string bits cleared (a crash appending to it).
    static func identity(_ settings: SiteConfig.Uplink) -> (gateway: String, clientID: String, prefix: String)? {
        let gateway: String
        if let configured = settings.gateway {
            gateway = configured
        } else if let machine = Uplink.machineID() {
            gateway = machine
        } else {
            return nil
        }
        var prefix = UplinkTopics.defaultPrefix(gateway: gateway)
        if let configured = settings.topicPrefix { prefix = configured }
        var clientID = gateway
        if let configured = settings.clientID { clientID = configured }
        return (gateway, clientID, prefix)
    }

    static func test(_ arguments: [String]) -> Int32 {
        var configPath = RunCommand.defaultConfig
        if arguments.count == 2 && arguments[0] == "--config" {
            configPath = arguments[1]
        } else if !arguments.isEmpty {
            return CommandLineInterface.usageError("uplink test: unexpected argument '\(arguments[0])'", hint: usage)
        }
        guard case .success(let loaded) = LoadedConfig.load(configPath) else { return 1 }
        guard let settings = loaded.site.uplink else {
            return CommandLineInterface.failure("uplink test", "\(configPath) has no [uplink] section")
        }
        guard let (gateway, clientID, prefix) = identity(settings) else {
            return CommandLineInterface.failure("uplink test", "no gateway id: /etc/machine-id cannot be read; set uplink.gateway")
        }
        // Its own client id and a clean session: the running agent's session is left alone (a
        // second connection with its id would throw it off the broker).
        let options = Uplink.connectOptions(settings, clientID: "\(clientID)-test", statusTopic: "\(prefix)/status", will: false)
        // A cluster's nodes are each tried: the gateway moves to any of them when one is lost.
        let count = settings.brokers.count
        var problems: [String] = []
        for (index, broker) in settings.brokers.enumerated() {
            Console.out("uplink test: \(broker)\(count > 1 ? " (node \(index + 1) of \(count))" : "") as gateway \(gateway), topics under \(prefix)/\n")
            if let problem = testNode(broker, settings, options: options, gateway: gateway, prefix: prefix) {
                Console.out("  FAILED: \(problem)\n")
                problems.append(count > 1 ? "\(broker): \(problem)" : problem)
            }
        }
        guard problems.isEmpty else {
            let summary = count > 1 ? "\(problems.count) of \(count) nodes failed; " : ""
            return CommandLineInterface.failure("uplink test", summary + problems.joined(separator: "; "))
        }
        Console.out("uplink test: passed\(count > 1 ? " (all \(count) nodes)" : "")\n")
        return 0
    }

    /// One node, each step reported: nil when the test message's PUBACK came, else the problem.
    private static func testNode(_ broker: BrokerAddress, _ settings: SiteConfig.Uplink, options: MQTTConnectOptions,
                                 gateway: String, prefix: String) -> String? {
        let connection = BrokerConnection(settings: BrokerConnection.Settings(broker: broker, tls: nil, connect: options),
                                          outputBytes: 4096, windowCapacity: 2)
        if let problem = Uplink.loadCredentials(settings, into: connection) { return problem }
        let start = MonotonicClock.instant.nanoseconds
        var elapsed: String { "\((MonotonicClock.instant.nanoseconds - start) / 1_000_000) ms" }
        if let problem = connection.start(nowNs: start) { return report(connection, elapsed, failure: problem) }
        var acknowledged = false
        var packetID: UInt16 = 0
        var poll = PollSet(capacity: connection.maximumDescriptors)
        while !acknowledged {
            poll.removeAll()
            connection.register(in: &poll)
            let now = MonotonicClock.instant.nanoseconds
            let waitMs = max(0, min(1000, ((connection.deadlineNs() ?? now + 1_000_000_000) - now) / 1_000_000))
            _ = poll.wait(timeoutMs: Int32(waitMs))
            let problem = connection.service(poll, nowNs: MonotonicClock.instant.nanoseconds)
            while let packet = connection.nextIncoming() {
                if case .acknowledged(let id) = packet, id == packetID { acknowledged = true }
            }
            var opened = false
            connection.takeSteps { step in
                say(step, broker)
                if case .accepted = step { opened = true }
            }
            if let problem { return report(connection, elapsed, failure: problem) }
            if opened {
                Console.out("  CONNECT accepted (\(elapsed))\n")
                var payload = JSONWriter(capacity: UplinkJSON.maximumTestBytes)
                var topics = UplinkTopics(prefix: prefix, gateway: gateway)
                UplinkJSON.test(gateway: topics.gateway, time: UTCTime(nanoseconds: Clock.realtimeNs()), into: &payload)
                packetID = connection.session.window.add(sequence: 0)
                guard connection.output.publish(topic: topics.test(), payload: payload.bytes, qos: .atLeastOnce, retain: false, packetID: packetID) else {
                    connection.close()
                    return "the test message does not fit"
                }
                if let problem = connection.flush(MonotonicClock.instant.nanoseconds) { connection.close(); return problem }
                Console.out("  published a test message to \(prefix)/test (QoS 1)\n")
            }
        }
        Console.out("  PUBACK received (\(elapsed)): the broker has the message\n")
        _ = connection.output.disconnect()
        _ = connection.flush(MonotonicClock.instant.nanoseconds)
        connection.close()
        return nil
    }

    private static func say(_ step: BrokerConnection.Step, _ broker: BrokerAddress) {
        switch step {
        case .resolved(let addresses, let fromHostsFile):
            Console.out("  DNS: \(broker.host) is \(addresses.map { $0.description }.joined(separator: ", "))\(fromHostsFile ? " (from /etc/hosts)" : "")\n")
        case .connected(let address, let port):
            Console.out("  TCP: connected to \(address.family == .v6 ? "[\(address)]" : "\(address)"):\(port)\n")
        case .secured(let agreed):
            Console.out("  TLS: \(agreed); the broker's certificate is valid for \(broker.host)\n")
        case .accepted:
            break
        }
    }

    private static func report(_ connection: BrokerConnection, _ elapsed: String, failure: String) -> String {
        connection.takeSteps { _ in }
        connection.close()
        return "\(failure) (after \(elapsed))"
    }

    // MARK: status

    static func status(_ arguments: [String]) -> Int32 {
        var rest = arguments
        let directory: String
        switch AgentCommands.stateDirectory(&rest, usage: usage) {
        case .success(let value): directory = value
        case .failure(let status): return status.code
        }
        guard rest.isEmpty else { return CommandLineInterface.usageError("uplink status: unexpected argument '\(rest[0])'", hint: usage) }
        var client: AgentClient
        switch AgentCommands.connect(directory, "uplink status", for: .reading) {
        case .success(let value): client = value
        case .failure(let status): return status.code
        }
        switch client.request({ $0.string("op", "status") }) {
        case .success(let reply):
            if let message = AgentClient.errorMessage(reply) { return CommandLineInterface.failure("uplink status", message) }
            guard let status = try? JSONParser.parse(reply), let uplink = status["uplink"] else {
                return CommandLineInterface.failure("uplink status", "the agent has no [uplink] (its site file has none)")
            }
            Console.out(line(uplink, backlog: status["uplink_backlog"]) + "\n")
            return 0
        case .failure(let status):
            return status.code
        }
    }

    /// "uplink: connected (mqtts://host:8883, node 2 of 3 as gw-7), cursor 1234, backlog 56 records / 1.2 MiB, oldest 3 h"
    static func line(_ uplink: JSONValue, backlog: JSONValue?) -> String {
        var text = "uplink: \(uplink["state"]?.string ?? "?") (\(uplink["broker"]?.string ?? "?")"
        if let node = uplink["node"]?.number, let nodes = uplink["nodes"]?.number { text += ", node \(Int(node)) of \(Int(nodes))" }
        text += " as \(uplink["gateway"]?.string ?? "?"))"
        text += ", cursor \(Int(uplink["cursor"]?.number ?? 0))"
        if let backlog {
            let records = Int(backlog["records"]?.number ?? 0)
            let bytes = Int64(backlog["bytes"]?.number ?? 0)
            text += ", backlog \(records) records / \(Quantity.describe(bytes: bytes))"
            if let age = backlog["oldest_age_s"]?.number { text += ", oldest \(Quantity.describe(nanoseconds: Int64(age) * 1_000_000_000))" }
            let deleted = Int(backlog["deleted_undelivered"]?.number ?? 0)
            if deleted > 0 { text += ", \(deleted) records deleted undelivered at [log] retain" }
        }
        text += ", \(Int(uplink["published"]?.number ?? 0)) published, \(Int(uplink["acknowledged"]?.number ?? 0)) acknowledged"
        if let error = uplink["last_error"]?.string { text += "; last error: \(error)" }
        return text
    }
}
