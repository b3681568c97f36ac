import LocusCore
import LocusDevices

/// What `config`, `group` and `command` share: their options, the database, the broker.
extension FleetCommandLine {
    /// A subcommand's arguments: options with a value, flags, and the rest in order.
    struct RemoteArguments {
        var values: [String: String] = [:]
        var flags: Set<String> = []
        var positional: [String] = []

        subscript(_ option: String) -> String? { values[option] }

        /// `valued` options take the next argument; `flags` none; anything else starting with
        /// `--` is refused. An option given twice is refused.
        static func parse(_ arguments: [String], valued: Set<String>, flags: Set<String> = []) throws(UsageError) -> RemoteArguments {
            var parsed = RemoteArguments()
            var index = 0
            while index < arguments.count {
                let argument = arguments[index]
                index += 1
                if flags.contains(argument) {
                    parsed.flags.insert(argument)
                } else if valued.contains(argument) {
                    guard index < arguments.count else { throw UsageError(message: "\(argument) needs a value") }
                    guard parsed.values[argument] == nil else { throw UsageError(message: "\(argument) is given twice") }
                    parsed.values[argument] = arguments[index]
                    index += 1
                } else if argument.hasPrefix("--") {
                    throw UsageError(message: "unknown option '\(argument)'")
                } else {
                    parsed.positional.append(argument)
                }
            }
            return parsed
        }

        func integer(_ option: String, in range: ClosedRange<Int64>) throws(UsageError) -> Int64? {
            guard let text = values[option] else { return nil }
            guard let number = Int64(text), range.contains(number) else {
                throw UsageError(message: "\(option) takes a number from \(range.lowerBound), not '\(text)'")
            }
            return number
        }
    }

    static let databaseOptions: Set<String> = ["--database"]
    static let brokerOptions: Set<String> = ["--broker", "--username", "--password-file", "--ca-file", "--cert-file", "--key-file",
                                             "--prefix", "--client-id", "--keepalive"]
    static let publishingOptions = databaseOptions.union(brokerOptions).union(["--key"])

    static let brokerHelp = """
                      --key FILE         the fleet's private key (PEM, P-256) that signs the message
                      --broker mqtt[s]://HOST[:PORT] (or LOCUS_FLEET_BROKER), --prefix FILTER (default locus/+),
                      --username NAME, --password-file FILE, --ca-file FILE, --cert-file FILE, --key-file FILE,
                      --client-id ID (default locus-fleet-publish-RANDOM), --keepalive S: as ingest's
        """

    /// The broker's settings from the options, as the ingest reads them, but a clean session of
    /// its own: the publisher must never take over an ingest worker's session.
    static func publisherSettings(_ arguments: RemoteArguments) throws(UsageError) -> (FleetBroker.Settings, String) {
        var options = IngestOptions()
        options.broker = arguments["--broker"]
        options.username = arguments["--username"]
        options.passwordFile = arguments["--password-file"]
        options.caFile = arguments["--ca-file"]
        options.certFile = arguments["--cert-file"]
        options.keyFile = arguments["--key-file"]
        options.prefix = arguments["--prefix"] ?? IngestTopics.defaultPrefix
        if let keepAlive = arguments["--keepalive"] {
            guard let seconds = UInt16(keepAlive), seconds >= 5 else { throw UsageError(message: "--keepalive takes seconds from 5 to 65535, not '\(keepAlive)'") }
            options.keepAliveS = seconds
        }
        if options.passwordFile != nil && options.username == nil { throw UsageError(message: "--password-file needs --username") }
        if (options.certFile == nil) != (options.keyFile == nil) { throw UsageError(message: "--cert-file and --key-file go together") }
        guard var settings = try ingestSettings(options).broker else { throw UsageError(message: "no MQTT broker") }
        let clientID = arguments["--client-id"] ?? FleetPublisher.clientID()
        guard !clientID.isEmpty, clientID.utf8.count <= MQTT.maximumStringBytes else { throw UsageError(message: "--client-id must be 1 to 65535 bytes") }
        settings.connect.clientID = Array(clientID.utf8)
        settings.connect.cleanSession = true
        return (settings, options.prefix)
    }

    /// The signer of `--key` (required).
    static func signer(_ arguments: RemoteArguments) throws(FleetError) -> FleetSigner {
        guard let path = arguments["--key"] else { throw FleetError("--key FILE is needed: the fleet's private key that signs the message") }
        return try signer(keyFile: path)
    }

    /// The signer of the key file at `path`, with a warning when others may read it.
    static func signer(keyFile path: String) throws(FleetError) -> FleetSigner {
        let signer = try FleetSigner(keyFile: path)
        if let exposure = signer.exposure { notice("warning: \(exposure)") }
        return signer
    }

    /// The database of `--database` or LOCUS_FLEET_DATABASE, connected and at this schema.
    static func openDatabase(_ arguments: RemoteArguments) throws(UsageError) -> ConnectionString {
        try database(Options(database: arguments["--database"]))
    }

    /// A gateway id as topics can carry it: the uplink's own (1 to 64 bytes of letters, digits,
    /// '-', '_' and '.').
    static func gatewayProblem(_ gateway: String) -> String? {
        let allowed = gateway.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x2D || byte == 0x5F || byte == 0x2E
        }
        guard !gateway.isEmpty, gateway.utf8.count <= 64, allowed else {
            return "'\(gateway)' is not a gateway id (1 to 64 letters, digits, '-', '_' or '.')"
        }
        return nil
    }

    /// Runs `body` against the database, turning its failure into the command's message.
    static func withDatabase<T>(_ connectionString: ConnectionString, _ what: String,
                                _ body: (PostgresConnection) throws(PostgresError) -> T) throws(FleetError) -> T {
        let database = try FleetDatabase(connectionString, notice: notice)
        return try database.retrying(what, body)
    }
}
