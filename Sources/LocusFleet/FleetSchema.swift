/// The fleet database's schema: numbered migrations, each applied once in its own transaction
/// and recorded in `fleet_schema`. `locus-fleet migrate` applies what is missing; every other
/// command first checks that the database is at exactly the version it knows
/// (docs/fleet.md lists every table, column and view).
public enum FleetSchema {
    public struct Migration: Sendable {
        public let version: Int
        public let description: String
        public let sql: String
    }

    public static let migrations: [Migration] = [
        Migration(version: 1, description: "records, gateways, quarantine; the events, gpio_changes, visits, current_state, gaps and gateway_summary views",
                  sql: migration1),
        Migration(version: 2, description: "conflicts: a second, different record for a (gateway, seq) already stored", sql: migration2),
        Migration(version: 3, description: "config and command records; fleet_groups, config_versions, config_deliveries, commands; the config_status view",
                  sql: migration3),
        Migration(version: 4, description: "records partitioned by day; current_state and open_gaps tables; record counts in gateways",
                  sql: migration4),
        Migration(version: 5, description: "presence: presence_current and presence_changes", sql: migration5),
    ]

    /// The version this program reads and writes.
    public static var version: Int { migrations.last!.version }

    /// Every migration takes this transaction-scoped advisory lock first, so two `migrate` runs
    /// at once apply each migration once.
    static let lockKey = 0x4c6f_6375_7346_6c74  // "LocusFlt"

    static let bootstrap = """
        create table if not exists fleet_schema (
            version int primary key,
            description text not null,
            applied_at timestamptz not null default now()
        )
        """

    /// The schema version the database holds (0: none yet, no `fleet_schema` table).
    public static func currentVersion(_ connection: PostgresConnection) throws(PostgresError) -> Int {
        let exists = try connection.execute("select to_regclass('fleet_schema') is not null").scalar == "t"
        guard exists else { return 0 }
        return Int(try connection.execute("select coalesce(max(version), 0) from fleet_schema").scalar ?? "0") ?? 0
    }

    /// What `migrate` did: the migrations applied now (none when the schema was current).
    /// `through` stops at an earlier version (the tests build an older database so).
    public static func migrate(_ connection: PostgresConnection, through last: Int = version) throws(FleetError) -> [Migration] {
        var applied: [Migration] = []
        for migration in migrations where migration.version <= last {
            let done: Bool
            do {
                done = try connection.transaction { () throws(PostgresError) -> Bool in
                    try connection.execute("select pg_advisory_xact_lock($1)", [String(lockKey)])
                    try connection.execute(bootstrap)
                    let newest = Int(try connection.execute("select coalesce(max(version), 0) from fleet_schema").scalar ?? "0") ?? 0
                    if newest > version { throw PostgresError(.query, newerMessage(newest)) }
                    if newest >= migration.version { return false }
                    try connection.execute(migration.sql)
                    try connection.execute("insert into fleet_schema (version, description) values ($1, $2)",
                                           [String(migration.version), migration.description])
                    return true
                }
            } catch {
                throw FleetError("migration \(migration.version) (\(connection.target)): \(error.message)")
            }
            if done { applied.append(migration) }
        }
        return applied
    }

    /// Throws, saying what to run, unless the database is at `known` (this program's version).
    public static func require(_ connection: PostgresConnection, known: Int = version) throws(FleetError) {
        let current: Int
        do {
            current = try currentVersion(connection)
        } catch {
            throw FleetError("cannot read the schema version (\(connection.target)): \(error.message)")
        }
        if current == known { return }
        if current == 0 {
            throw FleetError("the database (\(connection.target)) has no locus-fleet schema yet: run 'locus-fleet migrate' first")
        }
        if current < known {
            throw FleetError("the database (\(connection.target)) is at schema version \(current), this locus-fleet needs \(known): run 'locus-fleet migrate' first")
        }
        throw FleetError(newerMessage(current, known: known) + " (\(connection.target))")
    }

    static func newerMessage(_ current: Int, known: Int = version) -> String {
        "the database is at schema version \(current), newer than this locus-fleet knows (\(known)): use the locus-fleet that migrated it, or a newer one"
    }
}

/// A failure of a fleet command, as one sentence a technician can act on.
public struct FleetError: Error, CustomStringConvertible, Sendable {
    public let message: String
    /// The database could not be reached or refused the work: no further input can be stored
    /// in this run (as opposed to one input that could not be read).
    public let isDatabase: Bool
    /// The server refused a statement (as opposed to a lost connection): the same work would be
    /// refused again.
    public let isRefused: Bool
    /// The server could not be reached (not there yet, restarting): the same work may pass later.
    public let isUnreachable: Bool
    public init(_ message: String, isDatabase: Bool = false, isRefused: Bool = false, isUnreachable: Bool = false) {
        self.message = message
        self.isDatabase = isDatabase || isRefused || isUnreachable
        self.isRefused = isRefused
        self.isUnreachable = isUnreachable
    }
    public var description: String { message }
}
