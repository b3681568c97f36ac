import Foundation
import LocusCore
@testable import LocusFleet
import Testing
import TestSupport

/// The measurement behind `RecordBatch`: 10,000-row batches written as COPY into a temporary
/// staging table followed by one `INSERT ... SELECT ... ON CONFLICT DO NOTHING` (what
/// `RecordBatch` does), or as one `INSERT ... SELECT FROM unnest(arrays) ON CONFLICT DO NOTHING`
/// (the alternative, here only). Both bring `gateways` up to date in the same transaction. Wall
/// clock on this machine, so it runs only when asked:
///
///     LOCUS_FLEET_BENCH=1 swift test --skip-build --filter InsertBenchmark
///
/// docs/fleet.md has the figures.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["LOCUS_FLEET_BENCH"] != nil))
struct InsertBenchmarkTests {
    static let batchRows = 10_000
    static let batches = 10

    static let unnestInsert = """
        with batch as (
            select * from unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::timestamptz[], $6::text[],
                                 $7::text[], $8::text[], $9::text[], $10::boolean[], $11::jsonb[], $12::text[])
                as b(\(RecordBatch.columns))
        ), \(RecordBatch.storing(from: "batch"))
        """

    /// The twelve column arrays, in `RecordBatch.columns` order.
    static func unnestParameters(_ records: [FleetRecord]) -> [String?] {
        func integers(_ values: [Int64?]) -> String { "{" + values.map { $0.map { String($0) } ?? "NULL" }.joined(separator: ",") + "}" }
        func booleans(_ values: [Bool?]) -> String { "{" + values.map { $0.map { $0 ? "t" : "f" } ?? "NULL" }.joined(separator: ",") + "}" }
        return [
            PostgresText.array(records.map { $0.gateway }), integers(records.map { $0.seq }), integers(records.map { $0.prev }),
            PostgresText.array(records.map { $0.kind.rawValue }), PostgresText.array(records.map { $0.time }),
            PostgresText.array(records.map { $0.monitor }), PostgresText.array(records.map { $0.identifier }),
            PostgresText.array(records.map { $0.state }), PostgresText.array(records.map { $0.output }), booleans(records.map { $0.value }),
            PostgresText.array(records.map { $0.payload }), PostgresText.array(records.map { $0.source.rawValue }),
        ]
    }

    static func unnestWrite(_ records: [FleetRecord], on connection: PostgresConnection) throws(PostgresError) -> Int {
        Int(try connection.execute(unnestInsert, unnestParameters(records)).scalar ?? "0") ?? 0
    }

    enum Strategy: String, CaseIterable {
        case unnest = "INSERT ... SELECT FROM unnest(arrays) ON CONFLICT DO NOTHING"
        case copy = "COPY into a staging table, then INSERT ... SELECT ... ON CONFLICT DO NOTHING (kept)"
    }

    /// Rows a second over `batches` batches of `records` under `gateway`, each in its own transaction.
    static func measure(_ strategy: Strategy, _ records: [FleetRecord], gateway: String, on connection: PostgresConnection,
                        expectNew: Bool) throws -> Double {
        var batch = records
        for index in batch.indices { batch[index].gateway = gateway }
        try RecordBatch.preparePartitions(batch, on: connection)
        let started = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<batches / 2 {
            for part in [Array(batch[..<batchRows]), Array(batch[batchRows...])] {
                let inserted = try connection.transaction { () throws(PostgresError) -> Int in
                    switch strategy {
                    case .unnest: return try unnestWrite(part, on: connection)
                    case .copy: return try RecordBatch.write(part, [], on: connection).inserted
                    }
                }
                #expect(inserted == (expectNew ? part.count : 0))
            }
            if expectNew { break }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let rows = expectNew ? 2 * batchRows : batches * batchRows
        return Double(rows) / seconds
    }

    @Test func insertOnConflictAgainstCopyAndMerge() throws {
        let url = try Fleet.migratedDatabase("bench")
        let connection = try Fleet.connect(url)
        let log = try Fleet.replayLog(events: 2 * Self.batchRows, gateway: "bench")
        let records = try log.lines.filter { $0["type"]?.string == "event" }.map { line in
            try FleetRecord.exported(line, gateway: "bench", prev: nil)
        }
        #expect(records.count == 2 * Self.batchRows)
        var report: [String] = ["| strategy (10,000-row batches) | new rows/s | rows already stored/s |", "|---|---:|---:|"]
        var figures: [Strategy: (Double, Double)] = [:]
        // Three rounds, alternating, each on fresh gateways; the best of each.
        for round in 0..<3 {
            for strategy in Strategy.allCases {
                let gateway = "bench-\(strategy)-\(round)"
                let fresh = try Self.measure(strategy, records, gateway: gateway, on: connection, expectNew: true)
                let again = try Self.measure(strategy, records, gateway: gateway, on: connection, expectNew: false)
                let best = figures[strategy] ?? (0, 0)
                figures[strategy] = (max(best.0, fresh), max(best.1, again))
            }
        }
        // What of it is this program's own work: encoding a batch (array literals, COPY text).
        let part = Array(records[..<Self.batchRows])
        var encodeMs: [Strategy: Double] = [:]
        for strategy in Strategy.allCases {
            let started = DispatchTime.now().uptimeNanoseconds
            for _ in 0..<3 {
                switch strategy {
                case .unnest: _ = Self.unnestParameters(part)
                case .copy: _ = RecordBatch.copyData(part)
                }
            }
            encodeMs[strategy] = Double(DispatchTime.now().uptimeNanoseconds - started) / 3e6
        }
        report[0] += " encoding a batch (ms) |"
        report[1] += "---:|"
        for strategy in Strategy.allCases {
            let (fresh, again) = figures[strategy]!
            report.append("| \(strategy.rawValue) | \(Int(fresh)) | \(Int(again)) | \(Int(encodeMs[strategy]!)) |")
        }
        let payloadBytes = records.reduce(0) { $0 + $1.payload.utf8.count } / records.count
        print("payload: \(payloadBytes) bytes on average; COPY data: \(RecordBatch.copyData(part).count / part.count) bytes a row")
        print(report.joined(separator: "\n"))
    }
}
