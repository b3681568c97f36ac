import Foundation
@testable import LocusFleet
import Testing
import TestSupport

/// Schema version 4 (docs/fleet.md, "The store at scale"): `records` partitioned by day, and the
/// tables the merge keeps beside it (`current_state`, `open_gaps`, the counts in `gateways`),
/// each checked against what the version 3 views computed from `records` alone.
@Suite struct PartitionTests {
    static let day = 86_400

    /// An event record at `second` seconds after 2024-03-14T00:00:00Z.
    static func event(_ gateway: String, _ seq: Int64, prev: Int64?, second: Int, identifier: String = "dock",
                      state: String = "satisfied") -> FleetRecord {
        let date = Date(timeIntervalSince1970: 1_710_374_400 + Double(second))
        // Every third record has a refinement (a beacon), the others JSON null, as the uplink writes.
        let refinement = seq % 3 == 0 ? "{\"major\":\(seq % 7)}" : nil
        return FleetRecord(gateway: gateway, seq: seq, prev: prev, kind: .event, time: timestamp(date), monitor: "yard",
                           identifier: identifier, state: state, refinement: refinement,
                           payload: "{\"monitor\":\"yard\",\"identifier\":\"\(identifier)\",\"refinement\":\(refinement ?? "null"),\"state\":\"\(state)\"}",
                           source: .mqtt)
    }

    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }

    static func database(_ url: String) throws -> FleetDatabase {
        try FleetDatabase(try ConnectionString.parse(url).get()) { _ in }
    }

    // The version 3 definitions, as references computed from `records` alone.
    static let referenceGaps = """
        select string_agg(r.gateway || ':' || r.seq || '<-' || r.prev, ',' order by r.gateway, r.seq) from records r
        where r.prev > 0 and not exists (select 1 from records p where p.gateway = r.gateway and p.seq = r.prev)
        """
    static let storedGaps = "select string_agg(gateway || ':' || next_seq || '<-' || missing_to, ',' order by gateway, next_seq) from gaps"
    static let referenceState = """
        select string_agg(gateway || '/' || monitor || '/' || identifier || '=' || state || '@' || seq || coalesce(nullif(payload -> 'refinement', 'null')::text, ''),
                          ',' order by gateway, monitor, identifier)
        from (select distinct on (gateway, monitor, identifier) * from records where kind = 'event'
              order by gateway, monitor, identifier, seq desc) newest
        """
    static let storedState = """
        select string_agg(gateway || '/' || monitor || '/' || identifier || '=' || state || '@' || seq || coalesce(refinement::text, ''),
                          ',' order by gateway, monitor, identifier)
        from current_state
        """
    static let referenceCounts = """
        select string_agg(gateway || '=' || n || '/' || u, ',' order by gateway)
        from (select gateway, count(*) as n, count(*) filter (where prev is null) as u from records group by gateway) c
        """
    static let storedCounts = "select string_agg(gateway || '=' || records || '/' || unverified, ',' order by gateway) from gateways where records > 0"

    static func expectKeptMatchesRecords(_ connection: PostgresConnection, _ context: String) throws {
        for (stored, reference) in [(storedGaps, referenceGaps), (storedState, referenceState), (storedCounts, referenceCounts)] {
            let kept = try connection.execute(stored).scalar
            #expect(kept == (try connection.execute(reference).scalar), "\(context): \(stored)")
        }
    }

    @Test func eachDayHasItsPartitionAndAKeyIsStoredOnceAcrossThem() throws {
        let url = try Fleet.migratedDatabase("partitions")
        let database = try Self.database(url)
        let records = (1...6).map { Self.event("gw-a", Int64($0), prev: $0 == 1 ? nil : Int64($0 - 1), second: ($0 - 1) * Self.day / 2) }
        #expect(try database.write(records, [], what: "batch").inserted == 6)
        let connection = try Fleet.connect(url)
        let placed = try connection.execute("select tableoid::regclass::text, count(*) from records group by 1 order by 1").rows
        #expect(placed.map { "\($0[0] ?? "")=\($0[1] ?? "")" } == ["records_20240314=2", "records_20240315=2", "records_20240316=2"])
        // The same records again (a redelivery): nothing new. One seq again with another time, in
        // a day that has no partition yet: a conflict, not a second row.
        #expect(try database.write(records, [], what: "again").inserted == 0)
        var other = Self.event("gw-a", 3, prev: 2, second: 9 * Self.day, state: "unsatisfied")
        other.source = .logImport
        #expect(try database.write([other], [], what: "other").inserted == 0)
        #expect(try connection.execute("select count(*) from records where gateway = 'gw-a' and seq = 3").scalar == "1")
        #expect(try connection.execute("select count(*) from conflicts where gateway = 'gw-a' and seq = 3").scalar == "1")
        #expect(try FleetRetention.partitions(connection).map(\.day) == ["2024-03-14", "2024-03-15", "2024-03-16", "2024-03-23"])
        try Self.expectKeptMatchesRecords(connection, "after a conflict")
        let status = try FleetStatus.read(connection)
        #expect(status.gateways.map(\.records) == [6] && status.gaps.isEmpty && status.conflicted == 1)
    }

    /// Batches in a shuffled order, holes left and filled, records of several days and gateways:
    /// `gaps`, `current_state` and the counts equal what version 3 computed from `records`.
    @Test func whatTheMergeKeepsEqualsWhatRecordsSay() throws {
        let url = try Fleet.migratedDatabase("kept")
        let database = try Self.database(url)
        let connection = try Fleet.connect(url)
        var random = SplitMix64(seed: 33)
        var all: [FleetRecord] = []
        for gateway in ["gw-a", "gw-b", "gw-c"] {
            for seq in 1...300 {
                let identifier = ["dock", "gate", "yard"][Int(random.next() % 3)]
                all.append(Self.event(gateway, Int64(seq), prev: seq == 1 ? 0 : Int64(seq - 1), second: seq * 1_200, identifier: identifier,
                                      state: random.next() % 2 == 0 ? "satisfied" : "unsatisfied"))
            }
        }
        // A few records never arrive; the rest come in 30 batches in random order, some twice.
        let lost = Set(all.indices.filter { _ in random.next() % 40 == 0 })
        var batches = stride(from: 0, to: all.count, by: 30).map { Array(all[$0..<min($0 + 30, all.count)].indices) }
        batches += batches.filter { _ in random.next() % 5 == 0 }
        for index in batches.indices.reversed() { batches.swapAt(index, Int(random.next() % UInt64(index + 1))) }
        for (number, batch) in batches.enumerated() {
            _ = try database.write(batch.filter { !lost.contains($0) }.map { all[$0] }, [], what: "batch \(number)")
            if number % 7 == 0 { try Self.expectKeptMatchesRecords(connection, "after batch \(number)") }
        }
        try Self.expectKeptMatchesRecords(connection, "at the end")
        let holes = all.indices.filter { !lost.contains($0) && all[$0].seq > 1 && lost.contains($0 - 1) }.count
        let gapCount = try connection.execute("select count(*) from gaps").scalar
        #expect(holes > 0 && gapCount == String(holes))
        // The lost records arrive: no gap is left.
        _ = try database.write(lost.map { all[$0] }, [], what: "the lost ones")
        try Self.expectKeptMatchesRecords(connection, "after the lost ones")
        #expect(try connection.execute("select count(*) from open_gaps").scalar == "0")
    }

    /// Two writers store a record and its prev at the same moment, in either order of commit:
    /// neither sees the other's row while it writes, and no gap is left; two writers storing
    /// one record at once store it once.
    @Test func twoWritersStoringARecordAndItsPrevAtOnceLeaveNoGap() throws {
        let url = try Fleet.migratedDatabase("race")
        // Round 2: both write the same record (a message delivered to two workers at once): the
        // second's COPY meets the first's row, goes back to its savepoint, and the merge finds
        // the record stored.
        for (round, pausedFirst) in [(0, true), (1, false), (2, true)] {
            let gateway = "gw-\(round)"
            let first = Self.event(gateway, 1, prev: 0, second: 0)
            let second = round == 2 ? first : Self.event(gateway, 2, prev: 1, second: 60)
            nonisolated(unsafe) let pausing = try Self.database(url)
            nonisolated(unsafe) let other = try Self.database(url)
            // The first writer holds its transaction open, after its merge, until the other's
            // merge waits on a row it holds.
            let paused = DispatchSemaphore(value: 0)
            let go = DispatchSemaphore(value: 0)
            pausing.beforeCommit = { _ in
                paused.signal()
                _ = go.wait(timeout: .now() + 10)
            }
            let watcher = try Fleet.connect(url)
            let pausedRecord = pausedFirst ? second : first
            let otherRecord = pausedFirst ? first : second
            let group = DispatchGroup()
            nonisolated(unsafe) var failures: [String] = []
            let lock = NSLock()
            @Sendable func note(_ error: Error) { lock.withLock { failures.append("\(error)") } }
            DispatchQueue.global().async(group: group) { do { _ = try pausing.write([pausedRecord], [], what: "paused") } catch { note(error) } }
            #expect(paused.wait(timeout: .now() + 10) == .success)
            DispatchQueue.global().async(group: group) { do { _ = try other.write([otherRecord], [], what: "other") } catch { note(error) } }
            var waiting = false
            for _ in 0..<200 where !waiting {
                waiting = try watcher.execute("select count(*) from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'").scalar == "1"
                if !waiting { usleep(50_000) }
            }
            #expect(waiting, "round \(round): the other writer waits on the paused one's row")
            go.signal()
            #expect(group.wait(timeout: .now() + 20) == .success)
            #expect(failures.isEmpty, "round \(round): \(failures)")
            let connection = try Fleet.connect(url)
            #expect(try connection.execute("select count(*) from records where gateway = $1", [gateway]).scalar == (round == 2 ? "1" : "2"))
            #expect(try connection.execute("select count(*) from conflicts where gateway = $1", [gateway]).scalar == "0")
            #expect(try connection.execute("select records from gateways where gateway = $1", [gateway]).scalar == (round == 2 ? "1" : "2"))
            #expect(try connection.execute("select count(*) from open_gaps where gateway = $1", [gateway]).scalar == "0",
                    "round \(round): the gap the paused writer's merge saw was closed")
        }
    }

    /// `retain --days N` drops the days before the last N and what they held, and leaves the rest
    /// as it was: counts, no false gap at the edge, `current_state` whatever its age. A late record
    /// for a dropped day is stored again.
    @Test func retainDropsOldDaysAndKeepsTheRestExact() throws {
        let url = try Fleet.migratedDatabase("retain")
        let database = try Self.database(url)
        let connection = try Fleet.connect(url)
        let today = Date()
        let midnight = Date(timeIntervalSince1970: (today.timeIntervalSince1970 / Double(Self.day)).rounded(.down) * Double(Self.day))
        // Ten days of records, four a day; "gate" changes only on the first day.
        var records: [FleetRecord] = []
        for day in 0..<10 {
            for slot in 0..<4 {
                let seq = Int64(day * 4 + slot + 1)
                let date = midnight.addingTimeInterval(Double((day - 9) * Self.day + slot * 3_600))
                var record = Self.event("gw-r", seq, prev: seq - 1, second: 0, identifier: day == 0 && slot == 0 ? "gate" : "dock")
                record.time = Self.timestamp(date)
                records.append(record)
            }
        }
        _ = try database.write(records, [], what: "ten days")
        #expect(try FleetRetention.partitions(connection).count == 10)
        let dry = try Fleet.fleet(["retain", "--database", url, "--days", "3", "--dry-run"])
        #expect(dry.status == 0 && dry.output.components(separatedBy: "would drop").count - 1 == 6, "\(dry.output)\(dry.error)")
        #expect(try FleetRetention.partitions(connection).count == 10)
        let run = try Fleet.fleet(["retain", "--database", url, "--days", "3"])
        #expect(run.status == 0, "\(run.error)")
        let lines = run.output.split(separator: "\n")
        #expect(lines.count == 7 && lines.prefix(6).allSatisfy { $0.hasPrefix("dropped records_") && $0.contains(": 4 records of 1 gateway, in ") },
                "\(run.output)")
        #expect(lines.last?.hasPrefix("kept 4 days of records, ") == true, "\(run.output)")
        #expect(try connection.execute("select count(*) from records").scalar == "16")
        #expect(try connection.execute("select records || ' ' || dropped_through from gateways").scalar == "16 24")
        let status = try FleetStatus.read(connection)
        #expect(status.gaps.isEmpty, "the first kept record's prev went with its day: not a gap")
        #expect(status.gateways.map(\.records) == [16])
        #expect(try connection.execute("select seq from current_state where identifier = 'gate'").scalar == "1",
                "a condition's newest event outlives its day")
        // A record of a dropped day, late: stored again, in its day made again.
        _ = try database.write([records[0]], [], what: "late")
        #expect(try connection.execute("select count(*) from records").scalar == "17")
        #expect(try FleetRetention.partitions(connection).count == 5)
        let bad = try Fleet.fleet(["retain", "--database", url])
        #expect(bad.status == 2 && bad.error.contains("--days N is needed"), "\(bad.error)")
    }

    /// A version 3 database with records, gaps and the views moves into the partitions whole.
    @Test func aVersion3DatabaseMovesIntoThePartitions() throws {
        let cluster = try Fleet.cluster.get()
        let name = try cluster.createDatabase("v3")
        let url = cluster.url(database: name)
        let connection = try Fleet.connect(url)
        _ = try FleetSchema.migrate(connection, through: 3)
        try connection.execute("""
            insert into records (gateway, seq, prev, kind, time, monitor, identifier, state, payload, source)
            select 'gw-' || g, s, s - 1, 'event', timestamptz '2024-03-14' + s * interval '7 hours',
                'yard', 'id-' || (s % 3), 'satisfied', '{}', 'mqtt'
            from generate_series(1, 2) g, generate_series(1, 20) s where s <> 4
            """)
        try connection.execute("""
            insert into gateways (gateway, first_seen, last_seen, last_seq)
            select gateway, min(time), max(time), max(seq) from records group by gateway
            """)
        let before = try connection.execute("select gateway, after_seq, missing_from, missing_to, next_seq from gaps order by 1, 5").rows
        let state = try connection.execute(Self.storedState).scalar
        #expect(before.count == 2)
        let applied = try FleetSchema.migrate(connection, through: 4)
        #expect(applied.map(\.version) == [4])
        #expect(try connection.execute("select count(*) from records").scalar == "38")
        #expect(try FleetRetention.partitions(connection).count == 6)
        #expect(try connection.execute("select gateway, after_seq, missing_from, missing_to, next_seq from gaps order by 1, 5").rows == before)
        #expect(try connection.execute(Self.storedState).scalar == state)
        try Self.expectKeptMatchesRecords(connection, "after the migration")
    }
}

