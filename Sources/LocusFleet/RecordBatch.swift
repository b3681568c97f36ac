/// Input kept aside with the reason it could not be stored as a record: a malformed line of an
/// export, a payload that is not a record. Never stored twice (same source, origin and bytes).
public struct QuarantineEntry: Sendable, Equatable {
    public var source: FleetRecord.Source
    /// Where it came from: `FILE:LINE` for an import, the topic for MQTT.
    public var origin: String?
    public var payload: [UInt8]
    public var reason: String

    public init(source: FleetRecord.Source, origin: String?, payload: [UInt8], reason: String) {
        self.source = source
        self.origin = origin
        self.payload = payload
        self.reason = reason
    }
}

/// A gateway's MQTT status (`<prefix>/status`: `online`, or the will's `offline`), as seen by
/// the ingest.
public struct GatewayStatus: Sendable, Equatable {
    public var gateway: String
    public var online: Bool
    /// When the broker stored it (NATS's JetStream) or else when the ingest received it, in
    /// microseconds since 1970: a status older than the stored one is not applied, so two
    /// workers committing out of order leave the newest. Microseconds: a gateway's `online`
    /// and its `offline` right after it are often stored within one millisecond.
    public var receivedUs: Int64

    public init(gateway: String, online: Bool, receivedUs: Int64) {
        self.gateway = gateway
        self.online = online
        self.receivedUs = receivedUs
    }
}

public struct BatchOutcome: Sendable, Equatable {
    /// Records stored now (the others were stored already).
    public var inserted = 0
    /// Quarantine entries kept now (the others were kept already).
    public var quarantined = 0

    public init(inserted: Int = 0, quarantined: Int = 0) {
        self.inserted = inserted
        self.quarantined = quarantined
    }
}

/// One batch of records and quarantine entries, written inside the caller's transaction: the
/// records certainly new straight into `records` (`writeDirect`), the others by COPY into a
/// temporary staging table, then one statement (`merge`) that inserts the new ones into
/// `records` and keeps `conflicts`, `current_state`, `open_gaps` and `gateways` with them; then
/// `settleGaps`. COPY and merge wrote 10,000-row batches 2-14 % faster (new rows) and 12-22 %
/// faster (rows already stored) than one
/// `INSERT ... SELECT FROM unnest(arrays) ON CONFLICT` (InsertBenchmarkTests; docs/fleet.md).
/// The batch's days must have their partitions first (`preparePartitions`, outside the
/// transaction).
public enum RecordBatch {
    public static let columns = "gateway, seq, prev, kind, time, monitor, identifier, state, output, value, payload, source"

    /// Per connection (`if not exists`), emptied at every commit.
    static let staging = """
        create temporary table if not exists fleet_staging (gateway text, seq bigint, prev bigint, kind text, time timestamptz,
            monitor text, identifier text, state text, output text, value boolean, payload jsonb, source text) on commit delete rows
        """

    static let copy = "copy fleet_staging (\(columns)) from stdin"

    static let merge = "with " + storing(from: "fleet_staging")

    /// The statement's body after `with` (or after the caller's own first query): the rows of
    /// `source` into `records`, once each, with what the store keeps beside them, in key order
    /// (two writers at once then take their row locks in the same order and cannot deadlock on
    /// each other's; a deadlock that still happens is tried again); it answers how many rows
    /// were new. `received_at` is the moment each row is written (clock_timestamp(), not the
    /// transaction's start): the end of the path the ingest's latency figures measure.
    static func storing(from source: String) -> String {
        """
        fresh as (
            -- A seq above the gateway's last_seq is not stored (the live case: no look-up); one
            -- at or below it is looked up in every partition, since a second record for it with
            -- another time would land in another day's partition, where the key cannot see it.
            -- (A lateral probe with a limit: as a NOT EXISTS the planner may hash all of
            -- `records` instead.)
            select n.* from \(source) n left join gateways g on g.gateway = n.gateway
            left join lateral (
                select true as stored from records r
                where n.seq <= coalesce(g.last_seq, 0) and r.gateway = n.gateway and r.seq = n.seq limit 1
            ) r on true
            where r.stored is null
        ), stored as (
            insert into records (\(columns), received_at)
            select \(columns), clock_timestamp() from fresh order by gateway, seq
            on conflict (gateway, seq, time) do nothing
            returning gateway, seq, prev, kind, time, monitor, identifier, state, payload, received_at
        ), left_out as materialized (
            -- The batch's rows the insert left out (a hash anti-join against what it stored):
            -- none in the common case. Only these are looked up in `records`, each by its key
            -- (the lateral subquery's limit keeps it an index probe: joined whole, the planner,
            -- who knows nothing of the staging table's size, scans and hashes all of `records`).
            -- When the insert stored every row (the count says so), nothing is looked at.
            select * from \(source) n
            where (select count(*) from stored) < (select count(*) from \(source))
                and not exists (select 1 from stored s where s.gateway = n.gateway and s.seq = n.seq)
        ), conflicting as (
            -- Rows for a key stored before this statement with other contents, and two rows of
            -- the batch itself for one key that differ (the first of them is stored); the
            -- batch's own duplicates are looked for only among keys it holds twice (a hash
            -- aggregate), never row against row.
            insert into conflicts (gateway, seq, kind, time, payload, source)
            select n.gateway, n.seq, n.kind, n.time, n.payload, n.source from left_out n
            join lateral (select r.kind, r.time, r.payload from records r where r.gateway = n.gateway and r.seq = n.seq limit 1) r
                on (r.kind, r.time, r.payload) is distinct from (n.kind, n.time, n.payload)
            union all
            select n.gateway, n.seq, n.kind, n.time, n.payload, n.source from \(source) n
            join (select gateway, seq from \(source) where (select count(*) from stored) < (select count(*) from \(source))
                  group by gateway, seq having count(*) > 1) twice using (gateway, seq)
            where exists (select 1 from \(source) o where o.gateway = n.gateway and o.seq = n.seq
                          and (o.kind, o.time, o.payload) is distinct from (n.kind, n.time, n.payload))
            on conflict do nothing
        ), \(keeping)
        )
        select count(*) from stored
        """
    }

    /// The merge's part that keeps `current_state`, `open_gaps` and `gateways` from `stored`.
    static let keeping = """
        state as (
            insert into current_state as c (gateway, monitor, identifier, state, date, seq, refinement)
            select distinct on (gateway, monitor, identifier) gateway, monitor, identifier, state, time, seq,
                nullif(payload -> 'refinement', 'null')
            from stored where kind = 'event'
            order by gateway, monitor, identifier, seq desc
            on conflict (gateway, monitor, identifier) do update set
                state = excluded.state, date = excluded.date, seq = excluded.seq, refinement = excluded.refinement
            where c.seq < excluded.seq
        ), holes as (
            -- A stored record whose prev is neither the record stored before it now, nor the
            -- gateway's newest before, nor stored, nor below what a retention dropped. (The
            -- record before it by `lag`: a join against the batch was planned as a loop over
            -- the batch for each row, the planner taking `stored` for a few rows.) A prev that
            -- another writer stores at this moment is not seen here: `settleGaps` settles that.
            insert into open_gaps (gateway, seq, prev, time)
            select s.gateway, s.seq, s.prev, s.time
            from (select gateway, seq, prev, time, lag(seq) over (partition by gateway order by seq) as before from stored) s
            left join gateways g on g.gateway = s.gateway
            left join lateral (select true as stored from records p where p.gateway = s.gateway and p.seq = s.prev limit 1) p on true
            where s.prev > 0 and s.prev is distinct from s.before and s.prev <> coalesce(g.last_seq, 0)
                and s.prev > coalesce(g.dropped_through, 0) and p.stored is null
            on conflict do nothing
        ), seen as (
            -- newest_stored_at: when the newest record (by its time, last_seen) was stored.
            insert into gateways as g (gateway, first_seen, last_seen, last_seq, records, unverified, newest_stored_at)
            select gateway, min(time), max(time), max(seq), count(*), count(*) filter (where prev is null), max(received_at)
            from stored group by gateway order by gateway
            on conflict (gateway) do update set \(gatewayUpdate)
        """

    /// A batch's aggregates (`excluded`) added to a gateway's row (`g`): the least and greatest
    /// of old and new, the counts summed, and when the newest record by time was stored.
    static let gatewayUpdate = """
        first_seen = least(g.first_seen, excluded.first_seen),
                last_seen = greatest(g.last_seen, excluded.last_seen),
                last_seq = greatest(g.last_seq, excluded.last_seq),
                records = g.records + excluded.records,
                unverified = g.unverified + excluded.unverified,
                newest_stored_at = case when g.last_seen is null or excluded.last_seen > g.last_seen
                                        then excluded.newest_stored_at else g.newest_stored_at end
        """

    /// After the merge, in a statement of its own (so it sees what writers that held the same
    /// gateways committed while the merge waited for their rows): the batch's gateways' open
    /// gaps that this batch opened or whose prev it brought, and whose prev is stored now, are
    /// closed. Two writers storing a record and its prev at once: the later one to commit closes
    /// the gap the other could not see filled.
    /// The batch is given as each gateway's lowest and highest seq in it (closing a gap whose
    /// prev is stored is always right, so a range that takes in more does no harm).
    static let settleGaps = """
        delete from open_gaps o using unnest($1::text[], $2::bigint[], $3::bigint[]) as b (gateway, low, high)
        where o.gateway = b.gateway and (o.seq between b.low and b.high or o.prev between b.low and b.high)
            and exists (select 1 from records p where p.gateway = o.gateway and p.seq = o.prev)
        """

    /// `settleGaps`' arrays: each gateway of the batch with its lowest and highest seq.
    static func settleParameters(_ records: [FleetRecord]) -> [String?] {
        var ranges: [String: (low: Int64, high: Int64)] = [:]
        for record in records {
            let range = ranges[record.gateway] ?? (record.seq, record.seq)
            ranges[record.gateway] = (min(range.low, record.seq), max(range.high, record.seq))
        }
        let gateways = ranges.keys.sorted()
        return [PostgresText.array(gateways), PostgresText.array(gateways.map { String(ranges[$0]!.low) }),
                PostgresText.array(gateways.map { String(ranges[$0]!.high) })]
    }

    /// The UTC days (`YYYY-MM-DD`) of the records' times, each once: the partitions they need.
    static func days(_ records: [FleetRecord]) -> [String] {
        Array(Set(records.map { String($0.time.prefix(10)) })).sorted()
    }

    /// Makes the partitions of the records' days that are missing, in a statement of its own:
    /// run it outside the batch's transaction, which would otherwise hold the lock on `records`
    /// that making a partition takes until its commit.
    public static func preparePartitions(_ records: [FleetRecord], on connection: PostgresConnection) throws(PostgresError) {
        guard !records.isEmpty else { return }
        try connection.execute("select records_partition(day) from unnest($1::date[]) as day", [PostgresText.array(days(records))])
    }

    static let insertQuarantine = """
        insert into quarantine (source, origin, payload, reason)
        select * from unnest($1::text[], $2::text[], $3::bytea[], $4::text[])
        on conflict (source, (coalesce(origin, '')), md5(payload)) do nothing
        """

    /// The statuses of a batch, the newest of each gateway (the later one of two as new);
    /// `status_at` is `receivedUs`, and an older one than the stored never replaces it.
    static let updateStatus = """
        insert into gateways as g (gateway, online, status_at)
        select gateway, online, timestamptz 'epoch' + received_us * interval '1 microsecond'
        from unnest($1::text[], $2::boolean[], $3::bigint[]) as s (gateway, online, received_us)
        on conflict (gateway) do update set online = excluded.online, status_at = excluded.status_at
        where g.status_at is null or g.status_at <= excluded.status_at
        """

    public static func write(_ records: [FleetRecord], _ quarantine: [QuarantineEntry], statuses: [GatewayStatus] = [],
                             on connection: PostgresConnection) throws(PostgresError) -> BatchOutcome {
        var outcome = BatchOutcome()
        if !records.isEmpty {
            if try writeDirect(records, on: connection) {
                outcome.inserted = records.count
            } else {
                try connection.execute(staging)
                let copied = try connection.copyIn(copy, copyData(records))
                guard copied == records.count else {
                    throw PostgresError(.query, "COPY took \(copied) of the batch's \(records.count) records")
                }
                outcome.inserted = Int(try connection.execute(merge).scalar ?? "0") ?? 0
            }
            try connection.execute(settleGaps, settleParameters(records))
        }
        if !quarantine.isEmpty {
            let parameters: [String?] = [
                PostgresText.array(quarantine.map { $0.source.rawValue }),
                PostgresText.array(quarantine.map { $0.origin }),
                PostgresText.array(quarantine.map { PostgresText.byteaHex($0.payload) }),
                PostgresText.array(quarantine.map { $0.reason }),
            ]
            outcome.quarantined = try connection.execute(insertQuarantine, parameters).affectedRows
        }
        if !statuses.isEmpty {
            var latest: [String: GatewayStatus] = [:]
            for status in statuses where (latest[status.gateway]?.receivedUs ?? .min) <= status.receivedUs { latest[status.gateway] = status }
            let newest = latest.keys.sorted().map { latest[$0]! }
            _ = try connection.execute(updateStatus, [PostgresText.array(newest.map(\.gateway)),
                                                      PostgresText.array(newest.map { $0.online ? "t" : "f" }),
                                                      PostgresText.array(newest.map { String($0.receivedUs) })])
        }
        return outcome
    }

    /// COPY's text format: a line a record, its twelve columns in `columns` order, tab-separated.
    public static func copyData(_ records: [FleetRecord]) -> [UInt8] {
        var data: [UInt8] = []
        data.reserveCapacity(records.reduce(0) { $0 + $1.payload.utf8.count + 160 })
        for record in records {
            let fields: [String?] = [record.gateway, String(record.seq), record.prev.map { String($0) }, record.kind.rawValue, record.time,
                                     record.monitor, record.identifier, record.state, record.output, record.value.map { $0 ? "t" : "f" },
                                     record.payload, record.source.rawValue]
            for (index, field) in fields.enumerated() {
                if index > 0 { data.append(0x09) }
                PostgresText.copyField(field, into: &data)
            }
            data.append(0x0A)
        }
        return data
    }
}
