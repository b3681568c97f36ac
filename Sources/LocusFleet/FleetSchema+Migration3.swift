extension FleetSchema {
    /// Version 3: steering the gateways (docs/remote.md, docs/fleet.md "Configuration and
    /// commands"). `records` takes the gateways' `config` and `command` records (what a gateway
    /// did with a signed message: the only acknowledgement there is); groups of gateways; the
    /// configuration versions (numbered by one sequence for the whole fleet, so a gateway, which
    /// accepts only a newer version than it runs, can be given any later one); what was
    /// delivered to the broker; the commands sent. `config_status` is each gateway's desired,
    /// applied and refused version.
    static let migration3 = """
        alter table records drop constraint records_kind_check;
        alter table records add constraint records_kind_check check (kind in ('event', 'gpio', 'visit', 'config', 'command'));
        -- A gateway's configuration and command results, newest first.
        create index records_remote on records (gateway, kind, seq desc) where kind in ('config', 'command');

        create table fleet_groups (
            name text not null,
            gateway text not null,
            primary key (name, gateway)
        );
        create index fleet_groups_gateway on fleet_groups (gateway);

        create sequence config_version_seq;
        create table config_versions (
            version bigint primary key default nextval('config_version_seq'),
            created_at timestamptz not null default now(),
            target_kind text not null check (target_kind in ('gateway', 'group', 'all')),
            target text check ((target_kind = 'all') = (target is null)),
            fragment text not null,
            note text
        );
        alter sequence config_version_seq owned by config_versions.version;

        create table config_deliveries (
            gateway text not null,
            version bigint not null references config_versions,
            published_at timestamptz not null default now(),
            primary key (gateway, version)
        );

        create table commands (
            id text primary key,
            gateway text not null,
            action text not null,
            body text not null,
            created_at timestamptz not null default now(),
            expires_at timestamptz not null,
            published_at timestamptz
        );
        create index commands_gateway on commands (gateway, created_at);

        -- Every gateway the fleet knows: seen by the ingest or an import, in a group, or named by
        -- a version.
        create view fleet_gateways as
            select gateway from gateways
            union select gateway from fleet_groups
            union select target from config_versions where target_kind = 'gateway';

        -- Each version and the gateways it is for, now (a group's members as they are today).
        create view config_targets as
            select k.gateway, v.version
            from config_versions v
            join fleet_gateways k on v.target_kind = 'all'
                or (v.target_kind = 'gateway' and v.target = k.gateway)
                or (v.target_kind = 'group' and exists (select 1 from fleet_groups f where f.name = v.target and f.gateway = k.gateway));

        \(configViews)
        """

    /// `config_results` and `config_status` (versions 3 and 4 make them).
    static let configViews = """
        create view config_results as
            select gateway, seq, time, (payload ->> 'version')::bigint as version, payload ->> 'result' as result,
                payload ->> 'reason' as reason, payload ->> 'digest' as digest
            from records where kind = 'config';

        -- desired: the newest version for the gateway; applied: the version of its newest
        -- 'applied' record; refused: its newest refusal. The desired version is refused when the
        -- gateway's newest config record refuses it, or refuses a message it could not read far
        -- enough to know its version (version 0); pending: desired, newer than the applied one,
        -- and not refused.
        create view config_status as
            select k.gateway, d.version as desired, a.version as applied, a.time as applied_at,
                f.version as refused_version, f.reason as refused_reason, f.time as refused_at,
                (d.version > coalesce(a.version, 0) and l.result = 'refused' and l.version in (d.version, 0)) as refused,
                (d.version > coalesce(a.version, 0) and not coalesce(l.result = 'refused' and l.version in (d.version, 0), false)) as pending,
                p.published_at
            from fleet_gateways k
            left join lateral (select max(t.version) as version from config_targets t where t.gateway = k.gateway) d on true
            left join lateral (select version, time from config_results c where c.gateway = k.gateway and c.result = 'applied'
                               order by c.seq desc limit 1) a on true
            left join lateral (select version, reason, time from config_results c where c.gateway = k.gateway and c.result = 'refused'
                               order by c.seq desc limit 1) f on true
            left join lateral (select version, result from config_results c where c.gateway = k.gateway order by c.seq desc limit 1) l on true
            left join config_deliveries p on p.gateway = k.gateway and p.version = d.version;
        """
}
