extension FleetSchema {
    /// Version 1: the tables, their indexes and the views (docs/fleet.md, "The schema").
    static let migration1 = """
        create table gateways (
            gateway text primary key,
            first_seen timestamptz,
            last_seen timestamptz,
            last_seq bigint,
            online boolean,
            status_at timestamptz
        );

        create table records (
            gateway text not null,
            seq bigint not null check (seq > 0),
            prev bigint check (prev >= 0 and prev < seq),
            kind text not null check (kind in ('event', 'gpio', 'visit')),
            time timestamptz not null,
            monitor text,
            identifier text,
            state text,
            output text,
            value boolean,
            payload jsonb not null,
            source text not null check (source in ('mqtt', 'import')),
            received_at timestamptz not null default now(),
            primary key (gateway, seq)
        );
        -- "Where is each condition now": the newest event of each (gateway, monitor, identifier).
        create index records_latest_event on records (gateway, monitor, identifier, seq desc) where kind = 'event';
        -- Time ranges (Grafana's $__timeFilter).
        create index records_time on records (time);

        create table quarantine (
            id bigserial primary key,
            received_at timestamptz not null default now(),
            source text not null check (source in ('mqtt', 'import')),
            origin text,
            payload bytea not null,
            reason text not null
        );
        -- The same bad input from the same place is kept once (an import run twice, a redelivery).
        create unique index quarantine_once on quarantine (source, (coalesce(origin, '')), md5(payload));

        \(recordViews)
        create view current_state as
            select distinct on (gateway, monitor, identifier)
                gateway, monitor, identifier, state, time as date, seq, payload -> 'refinement' as refinement
            from records where kind = 'event'
            order by gateway, monitor, identifier, seq desc;

        -- A stored record whose prev is not stored: the records after the stored one before it,
        -- up to prev, are lost.
        create view gaps as
            select r.gateway, before.seq as after_seq, coalesce(before.seq, 0) + 1 as missing_from,
                r.prev as missing_to, r.seq as next_seq
            from records r
            left join lateral (
                select b.seq from records b where b.gateway = r.gateway and b.seq < r.prev order by b.seq desc limit 1
            ) before on true
            where r.prev > 0
                and not exists (select 1 from records p where p.gateway = r.gateway and p.seq = r.prev);

        create view gateway_summary as
            select g.gateway, g.first_seen, g.last_seen, g.last_seq,
                coalesce(r.records, 0) as records,
                coalesce(x.gaps, 0) as gaps,
                coalesce(r.unverified, 0) as unverified,
                g.online, g.status_at
            from gateways g
            left join (
                select gateway, count(*) as records, count(*) filter (where prev is null) as unverified
                from records group by gateway
            ) r on r.gateway = g.gateway
            left join (select gateway, count(*) as gaps from gaps group by gateway) x on x.gateway = g.gateway;
        """

    /// The views that read one kind of record (versions 1 and 4 make them).
    static let recordViews = """
        create view events as
            select gateway, seq, monitor, identifier, state, time as date, payload -> 'refinement' as refinement, payload
            from records where kind = 'event';

        create view gpio_changes as
            select gateway, seq, time, output, value, payload ->> 'cause' as cause, monitor, identifier, payload
            from records where kind = 'gpio';

        create view visits as
            select gateway, seq, time,
                (payload ->> 'arrival')::timestamptz as arrival,
                (payload ->> 'departure')::timestamptz as departure,
                (payload ->> 'lat')::double precision as lat,
                (payload ->> 'lon')::double precision as lon,
                (payload ->> 'radius')::double precision as radius,
                payload
            from records where kind = 'visit';
        """
}
