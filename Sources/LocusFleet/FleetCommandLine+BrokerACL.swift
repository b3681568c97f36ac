import LocusCore
import LocusDevices

extension FleetCommandLine {
    static let brokerACLHelp = """
          broker-acl
                    writes mosquitto's logins and ACL for the fleet into DIR: each gateway logs
                    in with its gateway id and may publish only under its own prefix and read
                    only its <prefix>/remote/#; the fleet's login reads every gateway's topics
                    and writes their remote/ topics. Options:
                      --gateways FILE    the gateway ids, one a line
                      --from-database    the ids of the gateways table instead (with --database
                                         or LOCUS_FLEET_DATABASE)
                      --prefix FILTER    the gateways' topic prefix with + for the gateway, default locus/+
                      --fleet-user NAME  the fleet's own login (the ingest's --username), default fleet
                      --out DIR          DIR/acl, DIR/passwords, DIR/credentials/<login>.password (0600);
                                         run again on the same DIR: existing passwords are kept

        """

    struct BrokerACLOptions {
        var gatewaysFile: String? = nil
        var fromDatabase = false
        var database: String? = nil
        var prefix = IngestTopics.defaultPrefix
        var fleetUser = "fleet"
        var out: String? = nil
    }

    static func parseBrokerACL(_ arguments: [String]) throws(UsageError) -> BrokerACLOptions {
        var options = BrokerACLOptions()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--") else { throw UsageError(message: "unexpected argument '\(argument)'") }
            if argument == "--from-database" {
                options.fromDatabase = true
                index += 1
                continue
            }
            guard ["--gateways", "--database", "--prefix", "--fleet-user", "--out"].contains(argument) else {
                throw UsageError(message: "unknown option '\(argument)'")
            }
            guard index + 1 < arguments.count else { throw UsageError(message: "\(argument) needs a value") }
            let value = arguments[index + 1]
            index += 2
            switch argument {
            case "--gateways": options.gatewaysFile = value
            case "--database": options.database = value
            case "--prefix": options.prefix = value
            case "--fleet-user": options.fleetUser = value
            default: options.out = value
            }
        }
        if options.out?.isEmpty ?? true { throw UsageError(message: "give --out DIR (where the acl, passwords and credentials go)") }
        switch (options.gatewaysFile != nil, options.fromDatabase) {
        case (false, false): throw UsageError(message: "give the gateways: --gateways FILE (one id a line) or --from-database")
        case (true, true): throw UsageError(message: "--gateways FILE and --from-database exclude each other: give one")
        default: break
        }
        if options.database != nil && !options.fromDatabase { throw UsageError(message: "--database goes with --from-database") }
        return options
    }

    static func brokerACL(_ arguments: [String]) -> Int32 {
        let options: BrokerACLOptions
        let prefix: BrokerACL.Prefix
        var connectionString: ConnectionString? = nil
        do {
            options = try parseBrokerACL(arguments)
            if options.fromDatabase { connectionString = try database(Options(database: options.database)) }
        } catch {
            return usageError("broker-acl: \(error.message)")
        }
        do { prefix = try BrokerACL.Prefix(options.prefix) } catch { return usageError("broker-acl: \(error.message)") }
        do {
            let summary = try brokerACLWrite(options, prefix: prefix, connectionString: connectionString)
            FleetOutput.out(summary)
            return 0
        } catch {
            return failure("broker-acl: \(error.message)")
        }
    }

    /// The gateways from the file or the database, the files written; the summary to print.
    static func brokerACLWrite(_ options: BrokerACLOptions, prefix: BrokerACL.Prefix,
                               connectionString: ConnectionString?) throws(BrokerACL.Failure) -> String {
        let gateways: [String]
        if let connectionString {
            let database: FleetDatabase
            do { database = try FleetDatabase(connectionString, notice: notice) } catch { throw BrokerACL.Failure(error.message) }
            gateways = try BrokerACL.gateways(database: database)
        } else {
            gateways = try BrokerACL.gateways(file: options.gatewaysFile!)
        }
        let outcome = try BrokerACL.write(out: options.out!, gateways: gateways, prefix: prefix, fleetUser: options.fleetUser)
        return brokerACLSummary(outcome, gateways: gateways, prefix: prefix, options: options)
    }

    static func brokerACLSummary(_ outcome: BrokerACL.Outcome, gateways: [String], prefix: BrokerACL.Prefix, options: BrokerACLOptions) -> String {
        let directory = outcome.directory
        func list(_ ids: [String]) -> String {
            ids.isEmpty ? "" : " (" + ids.prefix(10).joined(separator: ", ") + (ids.count > 10 ? ", ..." : "") + ")"
        }
        var text = "broker-acl: \(gateways.count) gateways and the fleet's login '\(options.fleetUser)' (\(outcome.fleetPasswordNew ? "new password" : "password kept")) in \(directory)\n"
        text += "  gateways: \(outcome.kept.count) kept their passwords, \(outcome.added.count) new\(list(outcome.added))\n"
        if !outcome.removed.isEmpty {
            text += "  removed \(outcome.removed.count) logins no longer named\(list(outcome.removed)): the broker refuses them once it reloads\n"
        }
        text += """
              \(directory)/acl             each gateway writes \(prefix.topic(for: "<id>"))/# and reads its remote/#
              \(directory)/passwords       hashed (mosquitto_passwd -U), mode 0640\(outcome.brokerGroup ? ", group mosquitto" : "")
              \(directory)/credentials/    <login>.password (0600): a gateway's is its [uplink] password_file, with username = its id

            mosquitto.conf (then restart mosquitto, or kill -HUP it to reload both files):
              per_listener_settings false
              allow_anonymous false
              password_file \(directory)/passwords
              acl_file \(directory)/acl

            """
        if !outcome.brokerGroup {
            text += "The broker reads both files as its own user (mosquitto started as root drops to it first): chgrp mosquitto \(directory)/passwords\n"
        }
        return text
    }
}
