import LocusDevices

/// `locus-fleet retain --days N`: the partitions of `records` (one a UTC day, schema version 4)
/// whose day ended more than N days ago are dropped, each in a transaction of its own that also
/// takes its records out of `gateways`' counts, raises each gateway's `dropped_through` to the
/// highest seq dropped, and forgets the open gaps it held (a hole whose record, or whose prev,
/// is gone with it). `current_state` keeps each condition's newest event whatever its age.
///
/// A record for a dropped day that arrives later (a gateway offline for weeks) is stored again
/// in a partition made for it, and the next run drops it: nothing acknowledged is refused.
public enum FleetRetention {
    public struct Partition: Sendable, Equatable {
        public var name: String
        /// `YYYY-MM-DD` (UTC).
        public var day: String
    }

    public struct Dropped: Sendable, Equatable {
        public var partition: Partition
        public var records: Int64
        public var gateways: Int64
        public var milliseconds: Int64

        /// `dropped records_20240301 (2024-03-01): 1002345 records of 812 gateways, in 412 ms`.
        public var line: String {
            "dropped \(partition.name) (\(partition.day)): \(records) records of \(gateways) gateway\(gateways == 1 ? "" : "s"), in \(milliseconds) ms"
        }
    }

    /// Every partition, oldest first.
    public static func partitions(_ connection: PostgresConnection) throws(PostgresError) -> [Partition] {
        try connection.execute("""
            select c.relname, to_char(to_date(substr(c.relname, 9), 'YYYYMMDD'), 'YYYY-MM-DD')
            from pg_inherits i join pg_class c on c.oid = i.inhrelid
            where i.inhparent = 'records'::regclass order by c.relname
            """).rows.map { Partition(name: $0[0] ?? "", day: $0[1] ?? "") }
    }

    /// The partitions whose day ended more than `days` days before today (UTC): with 7, today's
    /// and the seven days before it stay.
    public static func expired(keepingDays days: Int, _ connection: PostgresConnection) throws(PostgresError) -> [Partition] {
        let cutoff = try connection.execute("select to_char((now() at time zone 'UTC')::date - $1::int, 'YYYY-MM-DD')",
                                            [String(days)]).scalar ?? ""
        return try partitions(connection).filter { $0.day < cutoff }
    }

    /// Drops one partition, in one transaction. `records` is locked first (as a writer takes it
    /// before its partitions, so the two cannot deadlock): the ingest waits while the partition's
    /// counts are taken and it goes (docs/fleet.md has the figures).
    public static func drop(_ partition: Partition, _ connection: PostgresConnection) throws(PostgresError) -> Dropped {
        let started = MonotonicClock.now()
        let table = "\"\(partition.name)\""
        let (records, gateways) = try connection.transaction { () throws(PostgresError) -> (Int64, Int64) in
            try connection.execute("lock table records in access exclusive mode")
            let counted = try connection.execute("""
                with dropped as (
                    select gateway, count(*) as records, count(*) filter (where prev is null) as unverified, max(seq) as through
                    from \(table) group by gateway
                ), counts as (
                    update gateways g set records = g.records - d.records, unverified = g.unverified - d.unverified,
                        dropped_through = greatest(g.dropped_through, d.through)
                    from dropped d where g.gateway = d.gateway
                )
                select coalesce(sum(records), 0), count(*) from dropped
                """).rows.first
            try connection.execute("""
                delete from open_gaps where time >= $1::date::timestamp at time zone 'UTC'
                    and time < ($1::date + 1)::timestamp at time zone 'UTC'
                """, [partition.day])
            try connection.execute("delete from open_gaps o using gateways g where g.gateway = o.gateway and o.prev <= g.dropped_through")
            try connection.execute("drop table \(table)")
            return (Int64(counted?[0] ?? "0") ?? 0, Int64(counted?[1] ?? "0") ?? 0)
        }
        let milliseconds = Int64((MonotonicClock.now() - started) / 1_000_000)
        return Dropped(partition: partition, records: records, gateways: gateways, milliseconds: milliseconds)
    }
}
