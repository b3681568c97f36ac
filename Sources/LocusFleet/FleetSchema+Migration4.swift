extension FleetSchema {
    /// Version 4: the store for a large fleet (docs/fleet.md, "The store at scale").
    ///
    /// - `records` is partitioned by day (UTC) on `time`, one table a day named `records_YYYYMMDD`
    ///   (`records_partition(day)` makes one; the ingest asks for the days of each batch before
    ///   its transaction). Its key is `(gateway, seq, time)`, as PostgreSQL requires the
    ///   partition key in it; a record and its redelivery have the same time, so the key still
    ///   stores each once. A second record for a stored `(gateway, seq)` with another time would
    ///   go to another day: the merge looks the seq up in every partition first, but only for a
    ///   seq at or below the gateway's `last_seq` (a live gateway's new records are above it and
    ///   need no look-up). `time` has a BRIN index; the per-condition index is gone
    ///   (`current_state` is a table now).
    /// - `gateways` keeps each gateway's record counts and when its newest record (by time) was
    ///   stored, so `status` reads one row a gateway instead of counting `records`;
    ///   `dropped_through` is the highest seq a retention dropped.
    /// - `current_state` is a table the merge keeps (the newest event of each condition), so it
    ///   outlives the partitions a retention drops. Its `refinement` is NULL when the event has
    ///   none (the version 3 view gave JSON null).
    /// - `open_gaps` holds each stored record whose `prev` is not stored, kept by the merge
    ///   (added when such a record is stored, removed when its prev arrives); `gaps` reads it.
    ///   Exact over the whole store, and `status` never scans `records`.
    ///
    /// The rows of version 3 move into the partitions inside the migration's transaction.
    static let migration4 = """
        drop view gateway_summary, gaps, current_state, events, gpio_changes, visits, config_status, config_results;
        alter table records rename to records_v3;
        alter table records_v3 rename constraint records_pkey to records_v3_pkey;
        drop index records_latest_event, records_time, records_remote;

        create table records (
            gateway text not null,
            seq bigint not null check (seq > 0),
            prev bigint check (prev >= 0 and prev < seq),
            kind text not null check (kind in ('event', 'gpio', 'visit', 'config', 'command')),
            time timestamptz not null,
            monitor text,
            identifier text,
            state text,
            output text,
            value boolean,
            payload jsonb not null,
            source text not null check (source in ('mqtt', 'import')),
            -- The moment the row is written (a batch's direct COPY takes the default).
            received_at timestamptz not null default clock_timestamp(),
            primary key (gateway, seq, time)
        ) partition by range (time);

        -- The partition of one UTC day, made when missing; its name. Two callers at once: the
        -- second waits for the first's lock, and a table made meanwhile is not an error.
        create function records_partition(day date) returns text language plpgsql as $$
        declare
            name text := 'records_' || to_char(day, 'YYYYMMDD');
        begin
            if to_regclass(name) is null then
                perform pg_advisory_xact_lock(\(partitionLockKey));
                begin
                    execute format('create table %I partition of records for values from (%L) to (%L)', name,
                                   day::timestamp at time zone 'UTC', (day + 1)::timestamp at time zone 'UTC');
                exception when duplicate_table or unique_violation then
                    null;
                end;
            end if;
            return name;
        end $$;

        select records_partition(day) from (select distinct (time at time zone 'UTC')::date as day from records_v3) days;
        insert into records (\(RecordBatch.columns), received_at) select \(RecordBatch.columns), received_at from records_v3;
        drop table records_v3;
        -- Time ranges (Grafana's $__timeFilter): a day's rows arrive nearly in time order.
        create index records_time on records using brin (time);
        -- A gateway's configuration and command results, newest first.
        create index records_remote on records (gateway, kind, seq desc) where kind in ('config', 'command');

        alter table gateways
            add column records bigint not null default 0,
            add column unverified bigint not null default 0,
            add column newest_stored_at timestamptz,
            add column dropped_through bigint not null default 0;
        update gateways g set records = c.records, unverified = c.unverified
            from (select gateway, count(*) as records, count(*) filter (where prev is null) as unverified from records group by gateway) c
            where c.gateway = g.gateway;
        update gateways g set newest_stored_at = r.received_at
            from (select distinct on (gateway) gateway, received_at from records order by gateway, time desc) r where r.gateway = g.gateway;
        -- Rewritten in place at every batch: room on each page keeps the updates HOT (no index
        -- entry a version), which halves their cost.
        alter table gateways set (fillfactor = 50);

        create table current_state (
            gateway text not null,
            monitor text not null,
            identifier text not null,
            state text,
            date timestamptz not null,
            seq bigint not null,
            refinement jsonb,
            primary key (gateway, monitor, identifier)
        ) with (fillfactor = 50);
        insert into current_state
            select distinct on (gateway, monitor, identifier) gateway, monitor, identifier, state, time, seq,
                nullif(payload -> 'refinement', 'null')
            from records where kind = 'event'
            order by gateway, monitor, identifier, seq desc;

        create table open_gaps (
            gateway text not null,
            seq bigint not null,
            prev bigint not null,
            time timestamptz not null,
            primary key (gateway, seq)
        );
        create index open_gaps_prev on open_gaps (gateway, prev);
        insert into open_gaps
            select r.gateway, r.seq, r.prev, r.time from records r
            where r.prev > 0 and not exists (select 1 from records p where p.gateway = r.gateway and p.seq = r.prev)
            on conflict do nothing;

        \(recordViews)

        \(configViews)

        -- A stored record whose prev is not stored: the records after the stored one before it,
        -- up to prev, are lost (after what a retention dropped, when that one is gone too).
        create view gaps as
            select o.gateway, coalesce(before.seq, nullif(g.dropped_through, 0)) as after_seq,
                coalesce(before.seq, g.dropped_through) + 1 as missing_from, o.prev as missing_to, o.seq as next_seq
            from open_gaps o
            join gateways g on g.gateway = o.gateway
            left join lateral (
                select b.seq from records b where b.gateway = o.gateway and b.seq < o.prev order by b.seq desc limit 1
            ) before on true;

        create view gateway_summary as
            select g.gateway, g.first_seen, g.last_seen, g.last_seq, g.records,
                coalesce(x.gaps, 0) as gaps, g.unverified, g.online, g.status_at
            from gateways g
            left join (select gateway, count(*) as gaps from open_gaps group by gateway) x on x.gateway = g.gateway;
        """

    /// Serializes the making of partitions (`records_partition`).
    static let partitionLockKey = 0x4c6f_6375_7350_6172  // "LocusPar"
}
