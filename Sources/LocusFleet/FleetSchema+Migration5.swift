extension FleetSchema {
    /// Version 5: presence (docs/presence.md). `presence_current` is each tag's decided area now
    /// (null when away or in no area) with its position and since when; `presence_changes` every
    /// change `locus-fleet presence run --database` decided, newest last. A tag is `phone:NAME`
    /// or `UUID/MAJOR/MINOR`.
    static let migration5 = """
        create table presence_current (
            tag text primary key,
            area text,
            away boolean not null,
            x double precision,
            y double precision,
            spread_m double precision,
            since timestamptz not null
        );
        create table presence_changes (
            id bigserial primary key,
            tag text not null,
            from_area text,
            to_area text,
            away boolean not null,
            x double precision,
            y double precision,
            spread_m double precision,
            time timestamptz not null
        );
        create index presence_changes_tag_time on presence_changes (tag, time desc);
        """
}
