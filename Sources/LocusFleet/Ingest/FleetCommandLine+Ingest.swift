import LocusCore
import LocusDevices

extension FleetCommandLine {
    static let ingestHelp = """
          ingest    subscribes (QoS 1, persistent session) to the gateways' events, GPIO
                    changes, visits, configuration and command results and status, and
                    stores each record once; a message is acknowledged to the broker only
                    after its batch has committed. Runs until
                    SIGTERM or SIGINT. Options:
                      --broker mqtt[s]://HOST[:PORT]   (or LOCUS_FLEET_BROKER)
                      --client-id ID     the session's name, default locus-fleet; each worker its own
                      --share GROUP      subscribe as $share/GROUP/...: the group's workers split the messages
                      --prefix FILTER    the gateways' topic prefix with + for the gateway, default locus/+
                      --batch N          messages a transaction at most, default 1000
                      --username NAME, --password-file FILE
                      --ca-file FILE, --cert-file FILE, --key-file FILE   (mqtts; default CA: Debian's bundle)
                      --keepalive S      default 60
                    On a NATS cluster (docs/fleet.md), instead of --broker and --share:
                      --nats HOST:PORT,...   the nodes' client ports; the workers share one
                                         durable consumer of the MQTT messages' stream
                      --consumer NAME    that consumer, default locus-ingest
                      --ack-wait S       a message not acknowledged goes again after S, default 30

        """

    struct IngestOptions {
        var database: String? = nil
        var broker: String? = nil
        var clientID = "locus-fleet"
        var share: String? = nil
        var prefix = IngestTopics.defaultPrefix
        var batch = 1_000
        var username: String? = nil
        var passwordFile: String? = nil
        var caFile: String? = nil
        var certFile: String? = nil
        var keyFile: String? = nil
        var keepAliveS: UInt16 = 60
        var nats: String? = nil
        var consumer = "locus-ingest"
        var ackWaitS = 30
    }

    static func parseIngest(_ arguments: [String]) throws(UsageError) -> IngestOptions {
        var options = IngestOptions()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--") else { throw UsageError(message: "unexpected argument '\(argument)'") }
            guard index + 1 < arguments.count else { throw UsageError(message: "\(argument) needs a value") }
            let value = arguments[index + 1]
            index += 2
            switch argument {
            case "--database": options.database = value
            case "--broker": options.broker = value
            case "--client-id":
                guard !value.isEmpty, value.utf8.count <= MQTT.maximumStringBytes else { throw UsageError(message: "--client-id must be 1 to 65535 bytes") }
                options.clientID = value
            case "--share": options.share = value
            case "--prefix": options.prefix = value
            case "--batch":
                guard let count = Int(value), (1...65_535).contains(count) else {
                    throw UsageError(message: "--batch takes a number of messages from 1 to 65535, not '\(value)'")
                }
                options.batch = count
            case "--username": options.username = value
            case "--password-file": options.passwordFile = value
            case "--ca-file": options.caFile = value
            case "--cert-file": options.certFile = value
            case "--key-file": options.keyFile = value
            case "--keepalive":
                guard let seconds = UInt16(value), seconds >= 5 else { throw UsageError(message: "--keepalive takes seconds from 5 to 65535, not '\(value)'") }
                options.keepAliveS = seconds
            case "--nats": options.nats = value
            case "--consumer":
                guard !value.isEmpty, value.utf8.count <= 64, value.utf8.allSatisfy({ ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x5F }) else {
                    throw UsageError(message: "--consumer is 1 to 64 letters, digits, '-' or '_'")
                }
                options.consumer = value
            case "--ack-wait":
                guard let seconds = Int(value), (1...3_600).contains(seconds) else { throw UsageError(message: "--ack-wait takes seconds from 1 to 3600, not '\(value)'") }
                options.ackWaitS = seconds
            default: throw UsageError(message: "unknown option '\(argument)'")
            }
        }
        if options.passwordFile != nil && options.username == nil { throw UsageError(message: "--password-file needs --username") }
        if (options.certFile == nil) != (options.keyFile == nil) { throw UsageError(message: "--cert-file and --key-file go together") }
        if options.nats != nil {
            if options.broker != nil { throw UsageError(message: "--nats and --broker: one or the other (the NATS cluster is the broker)") }
            if options.share != nil { throw UsageError(message: "--share is for an MQTT broker: on NATS the workers share one consumer (--consumer)") }
            if options.username != nil || options.caFile != nil || options.certFile != nil {
                throw UsageError(message: "--username, --password-file and the TLS files are for an MQTT broker; the ingest speaks to NATS without them")
            }
        }
        return options
    }

    /// The broker's settings from the options: the address, TLS, CONNECT (clean session 0).
    static func ingestSettings(_ options: IngestOptions) throws(UsageError) -> Ingest.Settings {
        if let nats = options.nats { return try natsSettings(options, nodes: nats) }
        let environment = Process.environment("LOCUS_FLEET_BROKER")
        guard let text = options.broker ?? environment, !text.isEmpty else {
            throw UsageError(message: "no broker: give --broker mqtt[s]://HOST[:PORT] or set LOCUS_FLEET_BROKER")
        }
        let address: BrokerAddress
        switch BrokerAddress.parse(text) {
        case .success(let parsed): address = parsed
        case .failure(let error): throw UsageError(message: "the broker '\(text)' \(error.problem)")
        }
        if !address.tls && (options.caFile != nil || options.certFile != nil) {
            throw UsageError(message: "--ca-file, --cert-file and --key-file are for an mqtts:// broker")
        }
        var tls: TLSConfiguration? = nil
        if address.tls {
            do {
                tls = try TLSConfiguration(caFile: options.caFile ?? SiteConfig.Uplink.systemCAFile, certificateFile: options.certFile,
                                           keyFile: options.keyFile)
            } catch {
                throw UsageError(message: "TLS: \(error.message)")
            }
        }
        var password: [UInt8]? = nil
        if let path = options.passwordFile {
            guard let secret = Files.readSecret(path) else { throw UsageError(message: "cannot read the password file \(path)") }
            password = secret
        }
        let topics: IngestTopics
        do { topics = try IngestTopics(prefix: options.prefix, share: options.share) } catch { throw UsageError(message: error.message) }
        let connect = MQTTConnectOptions(clientID: Array(options.clientID.utf8), cleanSession: false, keepAliveS: options.keepAliveS,
                                         username: options.username.map { Array($0.utf8) }, password: password)
        return Ingest.Settings(broker: FleetBroker.Settings(broker: address, tls: tls, connect: connect), topics: topics,
                               batchMessages: options.batch)
    }

    /// A NATS cluster's settings: the nodes, the consumer, the subjects the prefix comes to.
    static func natsSettings(_ options: IngestOptions, nodes text: String) throws(UsageError) -> Ingest.Settings {
        let nodes: [NATSAddress]
        let topics: IngestTopics
        do {
            nodes = try NATSAddress.parseList(text)
            topics = try IngestTopics(prefix: options.prefix, share: nil)
        } catch {
            throw UsageError(message: "--nats: \(error.message)")
        }
        let filter = NATSSubjects.filter(mqtt: topics.prefix.joined(separator: "/") + "/#")
        let nats = JetStreamSource.Settings(nodes: nodes, durable: options.consumer, filter: filter, ackWaitMs: Int64(options.ackWaitS) * 1000,
                                            batch: options.batch, name: options.clientID, pingIntervalMs: Int64(options.keepAliveS) * 500,
                                            pongTimeoutMs: min(10_000, Int64(options.keepAliveS) * 1000))
        return Ingest.Settings(broker: nil, nats: nats, topics: topics, batchMessages: options.batch)
    }

    static func ingest(_ arguments: [String]) -> Int32 {
        let settings: Ingest.Settings
        let connectionString: ConnectionString
        do {
            let options = try parseIngest(arguments)
            settings = try ingestSettings(options)
            connectionString = try database(Options(database: options.database))
        } catch {
            return usageError("ingest: \(error.message)")
        }
        // SIGTERM and SIGINT: the ingest writes what it holds, acknowledges it and exits.
        StopSignals.install()
        // A server not up yet (the host's boot, a restart) is waited for; a refusal is not.
        var database: FleetDatabase? = nil
        while database == nil {
            do {
                database = try FleetDatabase(connectionString, notice: notice)
            } catch where error.isUnreachable {
                notice("ingest: \(error.message); connecting again in 2 s")
                for _ in 0..<20 where !StopSignals.requested { MonotonicClock.sleep(milliseconds: 100) }
                if StopSignals.requested { return 0 }
            } catch {
                return failure("ingest: \(error.message)")
            }
        }
        let worker = Ingest(settings, database: database!) { notice("ingest: \($0)") }
        do {
            try worker.run(until: { StopSignals.requested })
            return 0
        } catch {
            return failure("ingest: \(error.message). Is the database at this version's schema? (locus-fleet migrate)")
        }
    }
}
