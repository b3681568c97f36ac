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

/// One batch of records and quarantine entries, written inside the caller's transaction:
/// `INSERT ... SELECT FROM unnest(arrays) ON CONFLICT (gateway, seq) DO NOTHING`, one statement
/// for all the records, which also brings `gateways` up to date (first and last seen, last
/// seq: the least and greatest of old and new). docs/fleet.md has the measurement that chose
/// this over COPY into a staging table.
public enum RecordBatch {
    static let columns = "gateway, seq, prev, kind, time, monitor, identifier, state, output, value, payload, source"

    static let insertRecords = """
        with batch as (
            select * from unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::timestamptz[], $6::text[],
                                 $7::text[], $8::text[], $9::text[], $10::boolean[], $11::jsonb[], $12::text[])
                as b(\(columns))
        ), stored as (
            insert into records (\(columns))
            select \(columns) from batch
            on conflict (gateway, seq) do nothing
            returning 1
        ), seen as (
            insert into gateways as g (gateway, first_seen, last_seen, last_seq)
            select gateway, min(time), max(time), max(seq) from batch group by gateway
            on conflict (gateway) do update set
                first_seen = least(g.first_seen, excluded.first_seen),
                last_seen = greatest(g.last_seen, excluded.last_seen),
                last_seq = greatest(g.last_seq, excluded.last_seq)
        )
        select count(*) from stored
        """

    static let insertQuarantine = """
        insert into quarantine (source, origin, payload, reason)
        select * from unnest($1::text[], $2::text[], $3::bytea[], $4::text[])
        on conflict (source, (coalesce(origin, '')), md5(payload)) do nothing
        """

    public static func write(_ records: [FleetRecord], _ quarantine: [QuarantineEntry],
                             on connection: PostgresConnection) throws(PostgresError) -> BatchOutcome {
        var outcome = BatchOutcome()
        if !records.isEmpty {
            let result = try connection.execute(insertRecords, parameters(records))
            outcome.inserted = Int(result.scalar ?? "0") ?? 0
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
        return outcome
    }

    /// The twelve column arrays, in `columns` order.
    static func parameters(_ records: [FleetRecord]) -> [String?] {
        [
            PostgresText.array(records.map { $0.gateway }),
            PostgresText.array(records.map { Optional($0.seq) }),
            PostgresText.array(records.map { $0.prev }),
            PostgresText.array(records.map { $0.kind.rawValue }),
            PostgresText.array(records.map { $0.time }),
            PostgresText.array(records.map { $0.monitor }),
            PostgresText.array(records.map { $0.identifier }),
            PostgresText.array(records.map { $0.state }),
            PostgresText.array(records.map { $0.output }),
            PostgresText.array(records.map { $0.value }),
            PostgresText.array(records.map { $0.payload }),
            PostgresText.array(records.map { $0.source.rawValue }),
        ]
    }
}
