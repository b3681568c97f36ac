import Foundation
import LocusCore
@testable import LocusFleet
import Testing
import TestSupport

/// The store on a primary with a synchronous standby (Debian's PostgreSQL 15, streaming
/// replication; docs/fleet.md, "A standby"): the primary crashes while the ingest drains a
/// backlog, the standby is promoted, and the ingest, given both hosts with
/// `target_session_attrs=read-write`, finds the new primary by itself. Every record the broker
/// had is on it once: what was acknowledged had been flushed on the standby before the commit
/// returned, and what was not is sent again by the broker.
@Suite(.serialized) struct StandbyTests {
    @Test func aPromotedStandbyHoldsEveryRecordAndTheIngestFindsIt() throws {
        let primary = try TestPostgres()
        let database = try primary.createDatabase("standby")
        let migrate = try Fleet.fleet(["migrate", "--database", primary.url(database: database)])
        #expect(migrate.status == 0, "\(migrate.error)")
        let standby = try TestPostgres(standbyOf: primary)
        #expect(try primary.psql("select sync_state from pg_stat_replication where application_name = 'standby'") == "sync")
        let both = "postgresql://\(TestPostgres.user):\(TestPostgres.password)@127.0.0.1:\(primary.port),127.0.0.1:\(standby.port)/\(database)"
            + "?target_session_attrs=read-write"
        let broker = try IngestTests.broker()
        let port = broker.ports[0]
        let worker = try IngestTests.Worker(broker: port, database: both)
        let events = IngestTests.events("gw-standby", 3_000)
        try IngestTests.publish(port, "locus/gw-standby/event/yard/fence", Array(events[0..<1_500]))
        // Once batches have committed (and been flushed on the standby), most often mid-drain.
        let onPrimary = primary.url(database: database, user: TestPostgres.user)
        _ = try IngestTests.waitCount(onPrimary, "select least(count(*), 300) from records", 300)
        let committed = try IngestTests.count(onPrimary, "select count(*) from records")
        try primary.crash()
        try standby.promote()
        // Every commit that had returned is on the standby: it flushed each before the primary answered.
        let promoted = try IngestTests.count(standby.url(database: database), "select count(*) from records")
        #expect(promoted >= committed, "\(committed) committed on the primary before its crash, \(promoted) on the promoted standby")
        try IngestTests.publish(port, "locus/gw-standby/event/yard/fence", Array(events[1_500...]))
        let onStandby = standby.url(database: database)
        #expect(try IngestTests.waitCount(onStandby, "select count(*) from records", 3_000, seconds: 60) == 3_000, "\(worker.said)")
        #expect(try ImportTests.stored(onStandby, "gw-standby").map(\.seq) == Array(1...3_000))
        #expect(try Fleet.fleet(["status", "--database", onStandby]).status == 0, "no gap")
        #expect(worker.said.contains("connecting again"), "the worker lost the primary and found the new one: \(worker.said)")
        #expect(worker.stop() == 0)
    }
}
