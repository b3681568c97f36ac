/// `locus-fleet status`: each gateway's summary (`gateway_summary`), then every gap (`gaps`),
/// as text a technician reads or JSON a script reads.
public struct FleetStatus: Sendable, Equatable {
    public struct Gateway: Sendable, Equatable {
        public var gateway: String
        public var lastSeen: String?
        public var lastSeq: Int64?
        public var records: Int64
        public var gaps: Int64
        public var unverified: Int64
        public var online: Bool?
        public var statusAt: String?
        /// The ingest lag: how long after its own time the newest stored record was stored (ms).
        public var lagMs: Int64? = nil
    }

    public struct Gap: Sendable, Equatable {
        public var gateway: String
        /// The stored record before the hole; nil when none is stored before it.
        public var afterSeq: Int64?
        public var missingFrom: Int64
        public var missingTo: Int64
        /// The stored record whose prev is missing.
        public var nextSeq: Int64

        /// `GAP gw-07: seq 41..57 missing (between 40 and 58)`.
        public var line: String {
            let range = missingFrom == missingTo ? "seq \(missingFrom)" : "seq \(missingFrom)..\(missingTo)"
            let around = afterSeq.map { "between \($0) and \(nextSeq)" } ?? "before \(nextSeq)"
            return "GAP \(gateway): \(range) missing (\(around))"
        }
    }

    /// A `(gateway, seq)` that came again with other contents (table `conflicts`).
    public struct Conflict: Sendable, Equatable {
        public var gateway: String
        public var seq: Int64
        /// The other versions kept (the stored one is in `records`).
        public var versions: Int64

        /// `CONFLICT gw-07: seq 41 came again with other contents (1 version in table conflicts)...`.
        public var line: String {
            "CONFLICT \(gateway): seq \(seq) came again with other contents (\(versions) version\(versions == 1 ? "" : "s") in table conflicts): "
                + "two gateways with one id, or a gateway that numbered records again"
        }
    }

    public var gateways: [Gateway]
    public var gaps: [Gap]
    /// Rows in the quarantine table.
    public var quarantined: Int64
    /// The conflicting keys, at most `conflictLines` of them (`conflicted` counts them all).
    public var conflicts: [Conflict] = []
    public var conflicted: Int64 = 0
    static let conflictLines = 100

    /// A time column as the gateways write times: `2024-03-14T00:05:30.000Z`.
    static func utc(_ column: String) -> String {
        "to_char(\(column) at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
    }

    public static func read(_ connection: PostgresConnection) throws(PostgresError) -> FleetStatus {
        let gateways = try connection.execute("""
            select s.gateway, \(utc("s.last_seen")), s.last_seq, s.records, s.gaps, s.unverified, s.online, \(utc("s.status_at")),
                round(extract(epoch from g.newest_stored_at - g.last_seen) * 1000)::bigint
            from gateway_summary s join gateways g using (gateway) order by s.gateway
            """).rows.map { row in
            Gateway(gateway: row[0] ?? "", lastSeen: row[1], lastSeq: row[2].flatMap { Int64($0) }, records: Int64(row[3] ?? "") ?? 0,
                    gaps: Int64(row[4] ?? "") ?? 0, unverified: Int64(row[5] ?? "") ?? 0, online: row[6].map { $0 == "t" }, statusAt: row[7],
                    lagMs: row[8].flatMap { Int64($0) })
        }
        let gaps = try connection.execute("""
            select gateway, after_seq, missing_from, missing_to, next_seq from gaps order by gateway, next_seq
            """).rows.map { row in
            Gap(gateway: row[0] ?? "", afterSeq: row[1].flatMap { Int64($0) }, missingFrom: Int64(row[2] ?? "") ?? 0,
                missingTo: Int64(row[3] ?? "") ?? 0, nextSeq: Int64(row[4] ?? "") ?? 0)
        }
        let quarantined = Int64(try connection.execute("select count(*) from quarantine").scalar ?? "0") ?? 0
        let conflicts = try connection.execute(
            "select gateway, seq, count(*) from conflicts group by gateway, seq order by gateway, seq limit \(conflictLines)"
        ).rows.map { row in
            Conflict(gateway: row[0] ?? "", seq: Int64(row[1] ?? "") ?? 0, versions: Int64(row[2] ?? "") ?? 0)
        }
        let conflicted = Int64(try connection.execute("select count(distinct (gateway, seq)) from conflicts").scalar ?? "0") ?? 0
        return FleetStatus(gateways: gateways, gaps: gaps, quarantined: quarantined, conflicts: conflicts, conflicted: conflicted)
    }

    /// `850 ms`, `12.5 s`, `3 h 20 min`, `41 d`: an ingest lag as a technician reads it.
    static func duration(_ milliseconds: Int64) -> String {
        let ms = max(0, milliseconds)
        if ms < 1_000 { return "\(ms) ms" }
        if ms < 60_000 { return "\(ms / 1_000).\(ms % 1_000 / 100) s" }
        if ms < 3_600_000 { return "\(ms / 60_000) min \(ms % 60_000 / 1_000) s" }
        if ms < 86_400_000 { return "\(ms / 3_600_000) h \(ms % 3_600_000 / 60_000) min" }
        return "\(ms / 86_400_000) d"
    }

    /// One line per gateway, then one loud line per gap and per conflict, then the quarantine if
    /// it holds anything.
    public var text: String {
        var lines: [String] = []
        if gateways.isEmpty { lines.append("no gateway has records yet") }
        for gateway in gateways {
            var line = "\(gateway.gateway): last seen \(gateway.lastSeen ?? "never"), last seq \(gateway.lastSeq.map(String.init) ?? "none"), "
            line += "\(gateway.records) records, \(gateway.gaps) gaps, \(gateway.unverified) unverified"
            if let lag = gateway.lagMs { line += ", lag \(Self.duration(lag))" }
            if let online = gateway.online {
                line += online ? ", online" : ", offline"
                if let since = gateway.statusAt { line += " since \(since)" }
            }
            lines.append(line)
        }
        lines += gaps.map(\.line)
        lines += conflicts.map(\.line)
        if conflicted > Int64(conflicts.count) { lines.append("CONFLICT: \(conflicted) keys in all (the first \(conflicts.count) shown)") }
        if quarantined > 0 { lines.append("quarantine: \(quarantined) inputs kept with the reason they were refused (table quarantine)") }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `{"gateways":[...],"gaps":[...],"conflicts":[...],"conflicted":N,"quarantined":N}`: names
    /// as the views' columns.
    public var json: String {
        let gatewayObjects = gateways.map { gateway in
            FleetJSON.object([("gateway", .string(gateway.gateway)), ("last_seen", .string(gateway.lastSeen)),
                              ("last_seq", .integer(gateway.lastSeq)), ("records", .integer(gateway.records)),
                              ("gaps", .integer(gateway.gaps)), ("unverified", .integer(gateway.unverified)),
                              ("online", .boolean(gateway.online)), ("status_at", .string(gateway.statusAt)),
                              ("lag_ms", .integer(gateway.lagMs))])
        }
        let gapObjects = gaps.map { gap in
            FleetJSON.object([("gateway", .string(gap.gateway)), ("after_seq", .integer(gap.afterSeq)),
                              ("missing_from", .integer(gap.missingFrom)), ("missing_to", .integer(gap.missingTo)),
                              ("next_seq", .integer(gap.nextSeq))])
        }
        let conflictObjects = conflicts.map { conflict in
            FleetJSON.object([("gateway", .string(conflict.gateway)), ("seq", .integer(conflict.seq)), ("versions", .integer(conflict.versions))])
        }
        return FleetJSON.object([("gateways", .raw("[" + gatewayObjects.joined(separator: ",") + "]")),
                                 ("gaps", .raw("[" + gapObjects.joined(separator: ",") + "]")),
                                 ("conflicts", .raw("[" + conflictObjects.joined(separator: ",") + "]")),
                                 ("conflicted", .integer(conflicted)), ("quarantined", .integer(quarantined))]) + "\n"
    }
}
