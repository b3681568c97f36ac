extension FleetSchema {
    /// Version 2: `conflicts`, the records that came for a `(gateway, seq)` already stored with
    /// other contents (docs/fleet.md, "Identity"). The stored row stays; the other is kept here,
    /// once however often it comes, and `locus-fleet status` shows it loudly. Two gateways cloned
    /// from one SD image (one machine-id, so one default gateway id) end up here, as does a
    /// gateway that lost part of its log and numbered records again.
    static let migration2 = """
        create table conflicts (
            id bigserial primary key,
            received_at timestamptz not null default now(),
            gateway text not null,
            seq bigint not null,
            kind text not null,
            time timestamptz not null,
            payload jsonb not null,
            source text not null check (source in ('mqtt', 'import'))
        );
        create unique index conflicts_once on conflicts (gateway, seq, kind, time, md5(payload::text));
        """
}
