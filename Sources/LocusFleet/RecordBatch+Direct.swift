/// The live ingest's common case, written without the staging table: records whose seq is above
/// their gateway's `last_seq` cannot be stored yet (a gateway numbers upwards, and the merge keeps
/// `last_seq` as the greatest stored), so they go by COPY straight into `records`, and what the
/// merge would keep beside them (`current_state`, `open_gaps`, `gateways`) is worked out here from
/// the batch and written in one statement. Half of the merge's cost was the staging table's own
/// COPY and the second copy of every row out of it (docs/fleet.md, "Where the time goes").
///
/// A batch holding any other record (a seq at or below `last_seq`: a redelivery, another
/// worker's older rows, an import; a key twice in the batch) goes through the merge whole. A
/// COPY that meets a row stored meanwhile by another writer (a unique violation) is undone to
/// its savepoint and the whole batch goes through the merge, so nothing depends on the guess
/// being right.
extension RecordBatch {
    /// The batch's gateways' `last_seq` and `dropped_through`, read in the batch's transaction.
    static let readGateways = "select gateway, last_seq, dropped_through from gateways where gateway = any($1::text[])"

    static let copyDirect = "copy records (\(columns)) from stdin"

    /// What the direct rows change beside `records`, from arrays: each condition's newest event,
    /// the rows whose prev is neither in the batch nor the gateway's newest (kept as open gaps
    /// unless the prev is stored), each gateway's aggregates. Each in key order, and the three in
    /// the merge's order (all of them parts of the WITH, which PostgreSQL runs in a fixed order,
    /// as the merge's): two writers, one here and one in the merge, take their row locks in the
    /// same order.
    static let keepDirect = """
        with state as (
            insert into current_state as c (gateway, monitor, identifier, state, date, seq, refinement)
            select gateway, monitor, identifier, state, date, seq, refinement
            from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::bigint[], $7::jsonb[])
                as s (gateway, monitor, identifier, state, date, seq, refinement)
            order by gateway, monitor, identifier
            on conflict (gateway, monitor, identifier) do update set
                state = excluded.state, date = excluded.date, seq = excluded.seq, refinement = excluded.refinement
            where c.seq < excluded.seq
        ), holes as (
            insert into open_gaps (gateway, seq, prev, time)
            select h.gateway, h.seq, h.prev, h.time
            from unnest($8::text[], $9::bigint[], $10::bigint[], $11::timestamptz[]) as h (gateway, seq, prev, time)
            left join lateral (select true as stored from records p where p.gateway = h.gateway and p.seq = h.prev limit 1) p on true
            where p.stored is null
            on conflict do nothing
        ), seen as (
            insert into gateways as g (gateway, first_seen, last_seen, last_seq, records, unverified, newest_stored_at)
            select gateway, first_seen, last_seen, last_seq, records, unverified, clock_timestamp()
            from unnest($12::text[], $13::timestamptz[], $14::timestamptz[], $15::bigint[], $16::bigint[], $17::bigint[])
                as b (gateway, first_seen, last_seen, last_seq, records, unverified)
            order by gateway
            on conflict (gateway) do update set \(gatewayUpdate)
        )
        select 1
        """

    struct Known {
        var lastSeq: Int64
        var droppedThrough: Int64
    }

    /// Each gateway's seqs in the batch, when the whole batch can go straight into `records`:
    /// every record above its gateway's `last_seq` (what `gateways` says now) and no key twice.
    /// Nil sends the batch through the merge.
    static func directKeys(_ records: [FleetRecord], known: [String: Known]) -> [String: Set<Int64>]? {
        var keys: [String: Set<Int64>] = [:]
        for record in records {
            guard record.seq > (known[record.gateway]?.lastSeq ?? 0), keys[record.gateway, default: []].insert(record.seq).inserted else {
                return nil
            }
        }
        return keys
    }

    /// `keepDirect`'s seventeen arrays for a batch going straight into `records` (`keys`: its
    /// seqs, from `directKeys`).
    static func keepParameters(_ direct: [FleetRecord], keys: [String: Set<Int64>], known: [String: Known]) -> [String?] {
        struct Condition: Hashable {
            var gateway: String
            var monitor: String?
            var identifier: String?
        }
        var newest: [Condition: FleetRecord] = [:]
        for record in direct where record.kind == .event {
            let key = Condition(gateway: record.gateway, monitor: record.monitor, identifier: record.identifier)
            if (newest[key]?.seq ?? .min) < record.seq { newest[key] = record }
        }
        // The statement sorts them for its locks; the order here does not matter.
        let states = Array(newest.values)
        let holes = direct.filter { record in
            guard let prev = record.prev, prev > 0 else { return false }
            let gateway = known[record.gateway]
            return prev != (gateway?.lastSeq ?? 0) && prev > (gateway?.droppedThrough ?? 0) && keys[record.gateway]?.contains(prev) != true
        }
        var seen: [String: (first: String, last: String, lastSeq: Int64, records: Int64, unverified: Int64)] = [:]
        for record in direct {
            var entry = seen[record.gateway] ?? (record.time, record.time, record.seq, 0, 0)
            entry.first = min(entry.first, record.time)
            entry.last = max(entry.last, record.time)
            entry.lastSeq = max(entry.lastSeq, record.seq)
            entry.records += 1
            if record.prev == nil { entry.unverified += 1 }
            seen[record.gateway] = entry
        }
        let gateways = seen.keys.sorted()
        return [
            PostgresText.array(states.map(\.gateway)), PostgresText.array(states.map(\.monitor)), PostgresText.array(states.map(\.identifier)),
            PostgresText.array(states.map(\.state)), PostgresText.array(states.map(\.time)), PostgresText.array(states.map { String($0.seq) }),
            PostgresText.array(states.map(\.refinement)),
            PostgresText.array(holes.map(\.gateway)), PostgresText.array(holes.map { String($0.seq) }),
            PostgresText.array(holes.map { $0.prev.map { String($0) } }), PostgresText.array(holes.map(\.time)),
            PostgresText.array(gateways), PostgresText.array(gateways.map { seen[$0]!.first }), PostgresText.array(gateways.map { seen[$0]!.last }),
            PostgresText.array(gateways.map { String(seen[$0]!.lastSeq) }), PostgresText.array(gateways.map { String(seen[$0]!.records) }),
            PostgresText.array(gateways.map { String(seen[$0]!.unverified) }),
        ]
    }

    /// Writes the batch straight into `records` when all of it can go so (`directKeys`), inside
    /// the caller's transaction: true when it did, false when the merge is to write it.
    static func writeDirect(_ records: [FleetRecord], on connection: PostgresConnection) throws(PostgresError) -> Bool {
        let gateways = Array(Set(records.map(\.gateway)))
        var known: [String: Known] = [:]
        for row in try connection.execute(readGateways, [PostgresText.array(gateways)]).rows {
            known[row[0] ?? ""] = Known(lastSeq: Int64(row[1] ?? "") ?? 0, droppedThrough: Int64(row[2] ?? "") ?? 0)
        }
        // All or nothing: a batch written half directly and half by the merge would take its row
        // locks in two statements, each in key order but not together, an order two workers
        // sharing gateways can deadlock on.
        guard let keys = directKeys(records, known: known) else { return false }
        try connection.execute("savepoint direct")
        do throws(PostgresError) {
            let copied = try connection.copyIn(copyDirect, copyData(records))
            guard copied == records.count else { throw PostgresError(.query, "COPY took \(copied) of the batch's \(records.count) records") }
        } catch {
            // Another writer stored one of these keys since `known` was read: the merge sorts it out.
            guard error.sqlState == "23505" else { throw error }
            try connection.execute("rollback to savepoint direct")
            return false
        }
        try connection.execute("release savepoint direct")
        try connection.execute(keepDirect, keepParameters(records, keys: keys, known: known))
        return true
    }
}
