/// Who a configuration version is for.
public enum ConfigTarget: Equatable, Sendable {
    case gateway(String)
    case group(String)
    case all

    var kind: String {
        switch self {
        case .gateway: return "gateway"
        case .group: return "group"
        case .all: return "all"
        }
    }

    var name: String? {
        switch self {
        case .gateway(let name), .group(let name): return name
        case .all: return nil
        }
    }

    init?(kind: String, name: String?) {
        switch (kind, name) {
        case ("gateway", let name?): self = .gateway(name)
        case ("group", let name?): self = .group(name)
        case ("all", _): self = .all
        default: return nil
        }
    }

    /// `gateway gw-0001`, `group north`, `all gateways`.
    public var description: String {
        switch self {
        case .gateway(let name): return "gateway \(name)"
        case .group(let name): return "group \(name)"
        case .all: return "all gateways"
        }
    }
}

/// One row of `config_versions`.
public struct ConfigVersion: Equatable, Sendable {
    public var version: Int64
    public var createdAt: String
    public var target: ConfigTarget
    public var fragment: String
    public var note: String?
}

/// A gateway's configuration as `config status` shows it (view `config_status`).
public struct ConfigState: Equatable, Sendable {
    public var gateway: String
    public var desired: Int64?
    public var applied: Int64?
    public var appliedAt: String?
    public var refusedVersion: Int64?
    public var refusedReason: String?
    /// The desired version is refused (its newest config record says so).
    public var refused: Bool
    public var pending: Bool
    /// When the desired version was last handed to the broker (nil: never).
    public var publishedAt: String?
}

/// The configuration tables (migration 3) as the commands read and write them.
enum FleetConfigStore {
    static let versionColumns = "version, \(FleetStatus.utc("created_at")), target_kind, target, fragment, note"

    static func version(_ row: [String?]) -> ConfigVersion {
        ConfigVersion(version: Int64(row[0] ?? "") ?? 0, createdAt: row[1] ?? "", target: ConfigTarget(kind: row[2] ?? "", name: row[3]) ?? .all,
                      fragment: row[4] ?? "", note: row[5])
    }

    /// A new version (the sequence's next number) and the gateways whose desired version it now
    /// is; nothing is stored when there are none.
    static func create(_ target: ConfigTarget, fragment: String, note: String?,
                       on connection: PostgresConnection) throws(PostgresError) -> (ConfigVersion, [String]) {
        try connection.transaction { () throws(PostgresError) -> (ConfigVersion, [String]) in
            let row = try connection.execute(
                "insert into config_versions (target_kind, target, fragment, note) values ($1, $2, $3, $4) returning \(versionColumns)",
                [target.kind, target.name, fragment, note]).rows[0]
            let created = Self.version(row)
            let gateways = try targeted(created.version, on: connection)
            if gateways.isEmpty {
                let why: String
                switch target {
                case .gateway: why = "no gateway"  // cannot happen: the view names it
                case .group(let name): why = "group '\(name)' has no gateways (locus-fleet group set \(name) GATEWAY...)"
                case .all: why = "the fleet knows no gateway yet (none has published, none is in a group)"
                }
                throw PostgresError(.query, why + "; no version stored")
            }
            return (created, gateways)
        }
    }

    /// The gateways whose desired version is `version` (it targets them, and no newer one does).
    static func targeted(_ version: Int64, on connection: PostgresConnection) throws(PostgresError) -> [String] {
        try connection.execute("""
            select t.gateway from config_targets t where t.version = $1
                and not exists (select 1 from config_targets u where u.gateway = t.gateway and u.version > t.version)
            order by t.gateway
            """, [String(version)]).rows.map { $0[0] ?? "" }
    }

    static func find(_ version: Int64, on connection: PostgresConnection) throws(PostgresError) -> ConfigVersion? {
        try connection.execute("select \(versionColumns) from config_versions where version = $1", [String(version)]).rows.first.map { Self.version($0) }
    }

    static func all(on connection: PostgresConnection) throws(PostgresError) -> [ConfigVersion] {
        try connection.execute("select \(versionColumns) from config_versions order by version").rows.map { Self.version($0) }
    }

    /// Every gateway with a desired version, and that version.
    static func desired(on connection: PostgresConnection) throws(PostgresError) -> [(gateway: String, version: ConfigVersion)] {
        try connection.execute("""
            select s.gateway, v.version, \(FleetStatus.utc("v.created_at")), v.target_kind, v.target, v.fragment, v.note
            from config_status s join config_versions v on v.version = s.desired order by s.gateway
            """).rows.map { (gateway: $0[0] ?? "", version: Self.version(Array($0.dropFirst()))) }
    }

    static func delivered(_ gateway: String, _ version: Int64, on connection: PostgresConnection) throws(PostgresError) {
        try connection.execute("""
            insert into config_deliveries (gateway, version) values ($1, $2)
            on conflict (gateway, version) do update set published_at = now()
            """, [gateway, String(version)])
    }

    static func status(on connection: PostgresConnection) throws(PostgresError) -> [ConfigState] {
        try connection.execute("""
            select gateway, desired, applied, \(FleetStatus.utc("applied_at")), refused_version, refused_reason,
                coalesce(refused, false), coalesce(pending, false), \(FleetStatus.utc("published_at"))
            from config_status order by gateway
            """).rows.map { row in
            ConfigState(gateway: row[0] ?? "", desired: row[1].flatMap { Int64($0) }, applied: row[2].flatMap { Int64($0) }, appliedAt: row[3],
                        refusedVersion: row[4].flatMap { Int64($0) }, refusedReason: row[5], refused: row[6] == "t", pending: row[7] == "t",
                        publishedAt: row[8])
        }
    }

    // MARK: groups

    /// Replaces the group's members.
    static func setGroup(_ name: String, _ gateways: [String], on connection: PostgresConnection) throws(PostgresError) {
        try connection.transaction { () throws(PostgresError) in
            try connection.execute("delete from fleet_groups where name = $1", [name])
            try connection.execute("insert into fleet_groups (name, gateway) select $1, unnest($2::text[]) on conflict do nothing",
                                   [name, PostgresText.array(gateways)])
        }
    }

    /// Each group and its members, sorted.
    static func groups(_ name: String?, on connection: PostgresConnection) throws(PostgresError) -> [(name: String, gateways: [String])] {
        let rows = try connection.execute("""
            select name, gateway from fleet_groups where $1::text is null or name = $1 order by name, gateway
            """, [name]).rows
        var groups: [(name: String, gateways: [String])] = []
        for row in rows {
            let group = row[0] ?? "", gateway = row[1] ?? ""
            if groups.last?.name == group { groups[groups.count - 1].gateways.append(gateway) } else { groups.append((group, [gateway])) }
        }
        return groups
    }
}
