import LocusCore
import LocusDevices

/// `locus-fleet config ...` and `locus-fleet group ...` (docs/fleet.md, "Configuration and
/// commands"; the messages: docs/remote.md).
extension FleetCommandLine {
    static let configUsage = """
               locus-fleet config keygen --out FILE
               locus-fleet config set (--gateway ID | --group NAME | --all) [--note TEXT] --key FILE [broker options] FRAGMENT.toml
               locus-fleet config publish --key FILE [broker options]
               locus-fleet config rollback --to VERSION (--gateway ID | --group NAME | --all) --key FILE [broker options]
               locus-fleet config show [--version N | --gateway ID]
               locus-fleet config diff VERSION VERSION
               locus-fleet config status [--json]
               locus-fleet group set NAME GATEWAY...
               locus-fleet group show [NAME]
        """

    static let configHelp = """
          config    the gateways' configuration: versions of a site-file fragment (TOML without
                    [fleet]: the keys it names replace the site file's), each numbered by the
                    fleet and signed for each gateway, sent retained on <prefix>/remote/config
                    (docs/remote.md). A gateway applies only a newer version than it runs.
                      keygen    writes FILE (the private key, 0600) and FILE's .pub (the public key
                                each gateway's [remote] key names); never overwrites
                      set       stores a new version for the gateway, the group or every gateway,
                                and publishes it to each gateway it is now the newest for
                      publish   publishes every gateway's desired version again (a broker that
                                lost its retained messages)
                      rollback  a new version with version N's fragment, published as set does
                      show      the versions; one version's fragment; a gateway's desired one
                      diff      the fragments of two versions, line by line
                      status    per gateway: desired, applied, pending, refused (with the
                                gateway's reason); exit 1 when a gateway refused its desired version
        \(brokerHelp)
          group     named sets of gateways for config set --group: set replaces a group's
                    members; show lists the groups (then 'config publish' sends members their
                    new desired version)

        """

    static func config(_ arguments: [String]) -> Int32 {
        guard let sub = arguments.first else { return usageError("config: keygen, set, publish, rollback, show, diff or status is needed") }
        let rest = Array(arguments.dropFirst())
        switch sub {
        case "keygen": return configKeygen(rest)
        case "set", "rollback": return configSet(sub, rest)
        case "publish": return configPublish(rest)
        case "show": return configShow(rest)
        case "diff": return configDiff(rest)
        case "status": return configStatus(rest)
        default: return usageError("config: unknown command '\(sub)' (keygen, set, publish, rollback, show, diff or status)")
        }
    }

    static func configKeygen(_ arguments: [String]) -> Int32 {
        let path: String
        do throws(UsageError) {
            let parsed = try RemoteArguments.parse(arguments, valued: ["--out"])
            guard parsed.positional.isEmpty else { throw UsageError(message: "unexpected argument '\(parsed.positional[0])'") }
            guard let out = parsed["--out"], !out.isEmpty else { throw UsageError(message: "--out FILE is needed (the private key's path)") }
            path = out
        } catch {
            return usageError("config keygen: \(error.message)")
        }
        do {
            let publicPath = try FleetSigner.generate(at: path)
            FleetOutput.out("private key \(path) (mode 0600: keep it on the fleet's host only)\npublic key \(publicPath) (copy it to each gateway: [remote] key)\n")
            return 0
        } catch {
            return failure("config keygen: \(error.message)")
        }
    }

    /// --gateway, --group or --all: exactly one.
    static func target(_ arguments: RemoteArguments) throws(UsageError) -> ConfigTarget {
        let given = [arguments["--gateway"].map(ConfigTarget.gateway), arguments["--group"].map(ConfigTarget.group),
                     arguments.flags.contains("--all") ? ConfigTarget.all : nil].compactMap { $0 }
        guard given.count == 1 else { throw UsageError(message: "give one of --gateway ID, --group NAME and --all") }
        if case .gateway(let gateway) = given[0], let problem = gatewayProblem(gateway) { throw UsageError(message: problem) }
        if case .group(let name) = given[0], name.isEmpty { throw UsageError(message: "--group needs a name") }
        return given[0]
    }

    /// `config set` (the fragment from FILE) and `config rollback` (version N's fragment).
    static func configSet(_ sub: String, _ arguments: [String]) -> Int32 {
        let parsed: RemoteArguments
        let connectionString: ConnectionString
        let target: ConfigTarget
        let broker: (FleetBroker.Settings, String)
        do throws(UsageError) {
            let valued = publishingOptions.union(["--gateway", "--group", "--note"]).union(sub == "rollback" ? ["--to"] : [])
            parsed = try RemoteArguments.parse(arguments, valued: valued, flags: ["--all"])
            let files = sub == "set" ? 1 : 0
            guard parsed.positional.count == files else {
                throw UsageError(message: files == 1 ? "give one fragment file (TOML without [fleet])" : "unexpected argument '\(parsed.positional[0])'")
            }
            if sub == "rollback" && parsed["--to"] == nil { throw UsageError(message: "--to VERSION is needed") }
            target = try Self.target(parsed)
            connectionString = try openDatabase(parsed)
            broker = try publisherSettings(parsed)
        } catch {
            return usageError("config \(sub): \(error.message)")
        }
        do {
            let signer = try signer(parsed)
            let (fragment, note) = try setFragment(sub, parsed, connectionString)
            let publisher = try FleetPublisher(broker.0, prefix: broker.1)
            defer { publisher.close() }
            let (version, gateways) = try withDatabase(connectionString, "storing the version") { (connection) throws(PostgresError) in
                try FleetConfigStore.create(target, fragment: fragment, note: note, on: connection)
            }
            FleetOutput.out("version \(version.version) for \(target.description): stored; \(gateways.count) gateway\(gateways.count == 1 ? "" : "s") targeted\n")
            let database = try FleetDatabase(connectionString, notice: notice)
            let published = try publishConfig(version, to: gateways, signer: signer, publisher: publisher, database)
            FleetOutput.out("version \(version.version): published to \(published) of \(gateways.count) gateways (retained, acknowledged by the broker)\n")
            return 0
        } catch {
            return failure("config \(sub): \(error.message)")
        }
    }

    /// The fragment and note of a new version: FILE checked (set), or version N's (rollback).
    static func setFragment(_ sub: String, _ arguments: RemoteArguments, _ connectionString: ConnectionString) throws(FleetError) -> (String, String?) {
        if sub == "rollback" {
            guard let to = Int64(arguments["--to"] ?? ""), to > 0 else { throw FleetError("--to takes a version number, not '\(arguments["--to"] ?? "")'") }
            let found = try withDatabase(connectionString, "reading version \(to)") { (connection) throws(PostgresError) in
                try FleetConfigStore.find(to, on: connection)
            }
            guard let old = found else { throw FleetError("there is no version \(to) (locus-fleet config show lists them)") }
            return (old.fragment, arguments["--note"] ?? "rollback to version \(to)")
        }
        let path = arguments.positional[0]
        let bytes: [UInt8]
        do { bytes = try Files.read(path, limit: RemoteMessage.maximumBytes) } catch { throw FleetError("cannot read \(path): \(error)") }
        let (text, warnings) = try RemoteMessage.checkFragment(bytes, name: path)
        for warning in warnings { notice("warning: \(warning)") }
        return (text, arguments["--note"])
    }

    /// Signs `version` for each gateway and publishes it retained, recording each delivery once
    /// the broker acknowledged it. Returns how many were published; a failure says how far it got.
    static func publishConfig(_ version: ConfigVersion, to gateways: [String], signer: FleetSigner, publisher: FleetPublisher,
                              _ database: FleetDatabase) throws(FleetError) -> Int {
        var published = 0
        for gateway in gateways {
            do {
                let body = RemoteMessage.configBody(gateway: gateway, version: version.version, issued: RemoteMessage.now(), fragment: version.fragment)
                try publisher.publish(publisher.topic(gateway, "config"), try signer.signed(body), retain: true)
                try database.retrying("recording the delivery") { (connection) throws(PostgresError) in
                    try FleetConfigStore.delivered(gateway, version.version, on: connection)
                }
                published += 1
            } catch {
                throw FleetError("version \(version.version) to \(gateway): \(error.message) (published to \(published) of \(gateways.count) gateways; "
                                 + "'locus-fleet config publish' sends every gateway its desired version again)")
            }
        }
        return published
    }

    static func configPublish(_ arguments: [String]) -> Int32 {
        let parsed: RemoteArguments
        let connectionString: ConnectionString
        let broker: (FleetBroker.Settings, String)
        do throws(UsageError) {
            parsed = try RemoteArguments.parse(arguments, valued: publishingOptions)
            guard parsed.positional.isEmpty else { throw UsageError(message: "unexpected argument '\(parsed.positional[0])'") }
            connectionString = try openDatabase(parsed)
            broker = try publisherSettings(parsed)
        } catch {
            return usageError("config publish: \(error.message)")
        }
        do {
            let signer = try signer(parsed)
            let database = try FleetDatabase(connectionString, notice: notice)
            let desired = try database.retrying("reading the desired versions") { (connection) throws(PostgresError) in
                try FleetConfigStore.desired(on: connection)
            }
            guard !desired.isEmpty else {
                FleetOutput.out("no gateway has a configuration version: nothing to publish\n")
                return 0
            }
            let publisher = try FleetPublisher(broker.0, prefix: broker.1)
            defer { publisher.close() }
            var published = 0
            for (gateway, version) in desired {
                published += try publishConfig(version, to: [gateway], signer: signer, publisher: publisher, database)
            }
            FleetOutput.out("published the desired version of \(published) of \(desired.count) gateways (retained, acknowledged by the broker)\n")
            return 0
        } catch {
            return failure("config publish: \(error.message)")
        }
    }
}
