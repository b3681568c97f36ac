import Foundation
import LocusFleet
import Testing
import TestSupport

/// `locus-fleet migrate` and the version check every other command makes.
@Suite struct SchemaTests {
    @Test func migrateTwiceLeavesOneVersionAndTheSecondRunDoesNothing() throws {
        let cluster = try Fleet.cluster.get()
        let database = try cluster.createDatabase("migrate")
        let url = cluster.url(database: database)
        let first = try Fleet.fleet(["migrate", "--database", url])
        #expect(first.status == 0, "\(first.error)")
        #expect(first.output == FleetSchema.migrations.map { "migration \($0.version) applied: \($0.description)\n" }.joined()
                + "schema version 5 (user fleet at 127.0.0.1:\(cluster.port), database \(database))\n")
        #expect(first.error.isEmpty, "no notices: \(first.error)")
        let tables = try cluster.psql("select string_agg(tablename, ',' order by tablename) from pg_tables where schemaname = 'public'", database: database)
        let views = try cluster.psql("select string_agg(viewname, ',' order by viewname) from pg_views where schemaname = 'public'", database: database)
        let before = try cluster.psql("select version, description, applied_at from fleet_schema", database: database)

        let second = try Fleet.fleet(["migrate", "--database", url])
        #expect(second.status == 0)
        #expect(second.output == "schema version 5 (user fleet at 127.0.0.1:\(cluster.port), database \(database)): up to date, nothing to do\n")
        #expect(second.error.isEmpty, "\(second.error)")
        #expect(try cluster.psql("select version, description, applied_at from fleet_schema", database: database) == before)
        #expect(tables == "commands,config_deliveries,config_versions,conflicts,current_state,fleet_groups,fleet_schema,gateways,open_gaps,presence_changes,presence_current,quarantine,records")
        #expect(views == "config_results,config_status,config_targets,events,fleet_gateways,gaps,gateway_summary,gpio_changes,visits")
        #expect(try cluster.psql("select count(*) from fleet_schema", database: database) == "5")
    }

    @Test func twoMigrationsAtOnceApplyItOnce() throws {
        let cluster = try Fleet.cluster.get()
        let database = try cluster.createDatabase("concurrent")
        let url = cluster.url(database: database)
        nonisolated(unsafe) var runs: [Fleet.Run?] = [nil, nil]
        DispatchQueue.concurrentPerform(iterations: 2) { index in runs[index] = try? Fleet.fleet(["migrate", "--database", url]) }
        #expect(runs.allSatisfy { $0?.status == 0 }, "\(runs.map { $0?.error ?? "" })")
        #expect(runs.compactMap { $0?.output }.filter { $0.hasPrefix("migration 1 applied") }.count == 1)
        #expect(try cluster.psql("select count(*) from fleet_schema", database: database) == "5")
    }

    @Test func commandsRefuseADatabaseWithoutTheSchemaOrWithANewerOne() throws {
        let cluster = try Fleet.cluster.get()
        let database = try cluster.createDatabase("versions")
        let url = cluster.url(database: database)
        let target = "user fleet at 127.0.0.1:\(cluster.port), database \(database)"
        let empty = try Fleet.fleet(["status", "--database", url])
        #expect(empty.status == 1)
        #expect(empty.error == "locus-fleet: status: the database (\(target)) has no locus-fleet schema yet: run 'locus-fleet migrate' first\n")

        #expect(try Fleet.fleet(["migrate", "--database", url]).status == 0)
        try cluster.psql("insert into fleet_schema (version, description) values (6, 'from a newer locus-fleet')", database: database)
        let newer = "the database is at schema version 6, newer than this locus-fleet knows (5): use the locus-fleet that migrated it, or a newer one"
        let status = try Fleet.fleet(["status", "--database", url])
        #expect(status.status == 1)
        #expect(status.error == "locus-fleet: status: \(newer) (\(target))\n")
        let imported = try Fleet.fleet(["import", "--database", url, "--gateway", "gw", "/nonexistent"])
        #expect(imported.status == 1 && imported.error == "locus-fleet: import: \(newer) (\(target))\n", "\(imported.error)")
        let migrate = try Fleet.fleet(["migrate", "--database", url])
        #expect(migrate.status == 1)
        #expect(migrate.error == "locus-fleet: migrate: migration 1 (\(target)): \(newer)\n", "\(migrate.error)")
        #expect(try cluster.psql("select count(*) from fleet_schema", database: database) == "6")
    }

    @Test func anOlderSchemaNamesTheCommandToRun() throws {
        let connection = try Fleet.connect(try Fleet.migratedDatabase("older"))
        // A locus-fleet that knows version 6 meets this version 5 database.
        do {
            try FleetSchema.require(connection, known: 6)
            Issue.record("an older schema is refused")
        } catch {
            #expect(error.message == "the database (\(connection.target)) is at schema version 5, this locus-fleet needs 6: run 'locus-fleet migrate' first")
        }
        try FleetSchema.require(connection)
    }
}
