import LocusCore
import LocusDevices

/// `locus-fleet`: the fleet's PostgreSQL database from the host. Exit status: 0 success, 1 the
/// command failed (status: a gap exists), 2 the command line is wrong.
public enum FleetCommandLine {
    public static let usage = """
        usage: locus-fleet migrate [--database URL]
               locus-fleet import [--database URL] [--gateway ID] [--batch N] DIR...
               locus-fleet status [--database URL] [--json]
               locus-fleet retain [--database URL] --days N [--dry-run]
               locus-fleet ingest [--database URL] --broker URL [--client-id ID] [--share GROUP] [options]
               locus-fleet broker-acl (--gateways FILE | --from-database [--database URL]) [--prefix FILTER]
                                      [--fleet-user NAME] --out DIR
        """ + "\n" + configUsage + "\n" + commandUsage + "\n" + presenceUsage

    static let help = usage + """


        The database is --database URL or the environment's LOCUS_FLEET_DATABASE: a libpq
        connection string (host=db port=5432 user=fleet dbname=fleet) or URI
        (postgres://fleet@db:5432/fleet?sslmode=verify-full); libpq's PGPASSWORD, ~/.pgpass and
        PGSERVICE work as for psql.

          migrate   creates or updates the schema (one transaction a migration); run it first
          import    stores the events, GPIO changes and visits of Scripts/fetch-logs host
                    directories (DIR/log.jsonl), each once per (gateway, seq); the gateway id is
                    --gateway (one DIR only), else DIR/gateway, else the directory's name;
                    --batch N rows a transaction (records and quarantined lines, default
                    10000); unreadable lines go to the quarantine table with FILE:LINE and
                    the reason
          status    one line per gateway (last seen, last seq, records, gaps, unverified), then
                    one 'GAP' line per hole in a gateway's records and one 'CONFLICT' line per
                    (gateway, seq) that came again with other contents; exit 1 when there is either
          retain    drops the days of records (one partition a UTC day) that ended more than
                    --days N days ago, each in its own transaction, and says what each held;
                    --dry-run names them and drops nothing. current_state keeps every
                    condition's newest event

        """ + ingestHelp + brokerACLHelp + configHelp + commandHelp + presenceHelp + """

        docs/fleet.md describes the tables, the views and the broker's settings; docs/remote.md
        the signed configuration and commands.

        """

    struct Options {
        var database: String? = nil
        var gateway: String? = nil
        var batchRecords = LogImport.defaultBatchRecords
        var json = false
        var directories: [String] = []
        var keepDays: Int? = nil
        var dryRun = false
    }

    struct UsageError: Error {
        var message: String
    }

    public static func main(_ arguments: [String]) -> Int32 {
        guard let command = arguments.first else { return usageError("a command is needed") }
        let rest = Array(arguments.dropFirst())
        switch command {
        case "help", "--help", "-h":
            FleetOutput.out(help)
            return 0
        case "--version":
            FleetOutput.out("locus-fleet \(LocusVersion.string) (schema version \(FleetSchema.version))\n")
            return 0
        case "ingest":
            return ingest(rest)
        case "broker-acl":
            return brokerACL(rest)
        case "config":
            return config(rest)
        case "group":
            return group(rest)
        case "command":
            return commands(rest)
        case "presence":
            return presence(rest)
        case "migrate", "import", "status", "retain":
            break
        default:
            return usageError("unknown command '\(command)'")
        }
        let options: Options
        let connectionString: ConnectionString
        do {
            options = try parse(command, rest)
            connectionString = try database(options)
        } catch {
            return usageError("\(command): \(error.message)")
        }
        switch command {
        case "migrate": return migrate(connectionString)
        case "import": return importDirectories(connectionString, options)
        case "retain": return retain(connectionString, options)
        default: return status(connectionString, options)
        }
    }

    static func usageError(_ message: String) -> Int32 {
        FleetOutput.error("locus-fleet: \(message)\n\(usage)\n")
        return 2
    }

    static func failure(_ message: String) -> Int32 {
        FleetOutput.error("locus-fleet: \(message)\n")
        return 1
    }

    /// The options each command takes (`--database` all of them), in any order.
    static func parse(_ command: String, _ arguments: [String]) throws(UsageError) -> Options {
        var options = Options()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let value = index + 1 < arguments.count ? arguments[index + 1] : nil
            switch (command, argument) {
            case (_, "--database"), ("import", "--gateway"), ("import", "--batch"):
                guard let value else { throw UsageError(message: "\(argument) needs a value") }
                if argument == "--database" { options.database = value }
                if argument == "--gateway" { options.gateway = value }
                if argument == "--batch" {
                    guard let count = Int(value), (1...LogImport.maximumBatchRecords).contains(count) else {
                        throw UsageError(message: "--batch takes a number of rows from 1 to \(LogImport.maximumBatchRecords), not '\(value)'")
                    }
                    options.batchRecords = count
                }
                index += 2
            case ("status", "--json"):
                options.json = true
                index += 1
            case ("retain", "--days"):
                guard let value, let days = Int(value), (0...36_500).contains(days) else {
                    throw UsageError(message: "--days takes a number of days from 0 to 36500, not '\(value ?? "")'")
                }
                options.keepDays = days
                index += 2
            case ("retain", "--dry-run"):
                options.dryRun = true
                index += 1
            case ("import", _) where !argument.hasPrefix("-"):
                options.directories.append(argument)
                index += 1
            default:
                throw UsageError(message: argument.hasPrefix("-") ? "unknown option '\(argument)'" : "unexpected argument '\(argument)'")
            }
        }
        if command == "retain" && options.keepDays == nil {
            throw UsageError(message: "--days N is needed: the days of records to keep before today (UTC)")
        }
        if command == "import" {
            if options.directories.isEmpty { throw UsageError(message: "give at least one directory (a Scripts/fetch-logs host directory)") }
            if options.gateway != nil && options.directories.count > 1 {
                throw UsageError(message: "--gateway names the gateway of one directory; give one DIR, or a DIR/gateway file in each")
            }
        }
        return options
    }

    /// --database, else LOCUS_FLEET_DATABASE, checked by libpq's own parser.
    static func database(_ options: Options) throws(UsageError) -> ConnectionString {
        let environment = Process.environment("LOCUS_FLEET_DATABASE")
        guard let text = options.database ?? environment, !text.isEmpty else {
            throw UsageError(message: "no database: give --database URL or set LOCUS_FLEET_DATABASE")
        }
        switch ConnectionString.parse(text) {
        case .success(let parsed): return parsed
        case .failure(let error):
            let origin = options.database != nil ? "--database" : "LOCUS_FLEET_DATABASE"
            throw UsageError(message: "\(origin) is not a connection string libpq reads: \(error.reason)")
        }
    }

    // MARK: commands

    static func migrate(_ connectionString: ConnectionString) -> Int32 {
        do {
            let database = try FleetDatabase(connectionString, checkSchema: false, notice: notice)
            let connection = try database.current
            let before = try? FleetSchema.currentVersion(connection)
            let applied = try FleetSchema.migrate(connection)
            for migration in applied {
                FleetOutput.out("migration \(migration.version) applied: \(migration.description)\n")
            }
            if applied.isEmpty {
                FleetOutput.out("schema version \(before ?? FleetSchema.version) (\(connection.target)): up to date, nothing to do\n")
            } else {
                FleetOutput.out("schema version \(FleetSchema.version) (\(connection.target))\n")
            }
            return 0
        } catch {
            return failure("migrate: \(error.message)")
        }
    }

    static func importDirectories(_ connectionString: ConnectionString, _ options: Options) -> Int32 {
        let database: FleetDatabase
        do {
            database = try FleetDatabase(connectionString, notice: notice)
        } catch {
            return failure("import: \(error.message)")
        }
        var status: Int32 = 0
        for directory in options.directories {
            do {
                let summary = try LogImport.run(directory: directory, gateway: options.gateway, database: database,
                                                batchRecords: options.batchRecords)
                FleetOutput.out(summary.line + "\n")
            } catch {
                status = failure("import: \(error.message)")
                if error.isDatabase { return status }
            }
        }
        return status
    }

    static func status(_ connectionString: ConnectionString, _ options: Options) -> Int32 {
        do {
            let database = try FleetDatabase(connectionString, notice: notice)
            let status = try database.retrying("reading the status") { (connection) throws(PostgresError) -> FleetStatus in
                try FleetStatus.read(connection)
            }
            FleetOutput.out(options.json ? status.json : status.text)
            return status.gaps.isEmpty && status.conflicts.isEmpty ? 0 : 1
        } catch {
            return failure("status: \(error.message)")
        }
    }

    static func retain(_ connectionString: ConnectionString, _ options: Options) -> Int32 {
        do {
            let database = try FleetDatabase(connectionString, notice: notice)
            let days = options.keepDays ?? 0
            let expired = try database.retrying("listing the partitions") { (connection) throws(PostgresError) in
                try FleetRetention.expired(keepingDays: days, connection)
            }
            for partition in expired {
                if options.dryRun {
                    FleetOutput.out("would drop \(partition.name) (\(partition.day))\n")
                    continue
                }
                let dropped = try database.retrying("dropping \(partition.name)") { (connection) throws(PostgresError) in
                    try FleetRetention.drop(partition, connection)
                }
                FleetOutput.out(dropped.line + "\n")
            }
            let kept = try database.retrying("listing the partitions") { (connection) throws(PostgresError) in
                try FleetRetention.partitions(connection)
            }.filter { kept in options.dryRun ? !expired.contains(kept) : true }
            let range = kept.isEmpty ? "" : kept.count == 1 ? ", \(kept[0].day)" : ", \(kept.first!.day) to \(kept.last!.day)"
            FleetOutput.out("\(options.dryRun ? "would keep" : "kept") \(kept.count) day\(kept.count == 1 ? "" : "s") of records\(range)\n")
            return 0
        } catch {
            return failure("retain: \(error.message)")
        }
    }

    static func notice(_ message: String) {
        FleetOutput.error("locus-fleet: \(message)\n")
    }
}

/// Standard output and error, each text written at once with write(2) (a script reading both
/// sees them in order; nothing waits in a buffer when the process ends): LocusDevices' `Console`,
/// whose shim retries short writes and EINTR (bounded).
enum FleetOutput {
    static func out(_ text: String) { Console.out(text) }
    static func error(_ text: String) { Console.error(text) }
}
