// locus-store-bench: the partitioned store (schema version 4) at size, through the ingest's own
// write path (FleetDatabase.write: the partitions of the batch's days, COPY into staging, the
// merge, settleGaps, the commit), on an empty migrated database:
//
//     locus-store-bench --database URL [--records N] [--gateways G] [--days D] [--batch B]
//
// N records of G gateways over the D days ending today (UTC), in time order: each batch holds
// B / G records of every gateway, as a live fleet's ingest sees them. It prints, as markdown
// rows: the write rate of each tenth of the run (a store whose rate falls as it fills shows it
// here), `locus-fleet status`'s read, the `gaps` view, and dropping the oldest day
// (`locus-fleet retain`). Scripts/bench-fleet --store N runs it on a throw-away server.
import LocusCore
import LocusDevices
import LocusFleet

struct Options {
    var database = ""
    var records = 1_000_000
    var gateways = 1_000
    var days = 10
    var batch = 10_000
}

func parse(_ arguments: [String]) -> Options? {
    var options = Options()
    var index = 0
    while index + 1 < arguments.count {
        let value = arguments[index + 1]
        switch arguments[index] {
        case "--database": options.database = value
        case "--records": options.records = Int(value) ?? 0
        case "--gateways": options.gateways = Int(value) ?? 0
        case "--days": options.days = Int(value) ?? 0
        case "--batch": options.batch = Int(value) ?? 0
        default: return nil
        }
        index += 2
    }
    guard index == arguments.count, !options.database.isEmpty, options.records > 0, options.gateways > 0, options.days > 0,
          options.batch >= options.gateways else { return nil }
    return options
}

/// `2024-03-14T00:05:30.000Z` for milliseconds since 1970.
func utc(_ milliseconds: Int64) -> String {
    UTCTime(seconds: milliseconds / 1_000, nanoseconds: Int32(milliseconds % 1_000) * 1_000_000).iso8601
}

func milliseconds(since started: Int64) -> Double { Double(MonotonicClock.now() - started) / 1e6 }

func fail(_ message: String) -> Never {
    Console.error("locus-store-bench: \(message)\n")
    Process.exit(1)
}

guard let options = parse(Array(CommandLine.arguments.dropFirst())) else {
    fail("usage: locus-store-bench --database URL [--records N] [--gateways G] [--days D] [--batch B (at least G)]")
}
let connectionString: ConnectionString
switch ConnectionString.parse(options.database) {
case .success(let parsed): connectionString = parsed
case .failure(let error): fail(error.reason)
}
do {
    let database = try FleetDatabase(connectionString) { Console.error("locus-store-bench: \($0)\n") }
    let connection = try database.current
    guard try connection.execute("select count(*) from gateways").scalar == "0" else { fail("the database is not empty") }
    let nowMs = Int64(try connection.execute("select (extract(epoch from now()) * 1000)::bigint").scalar ?? "0") ?? 0
    let startMs = (nowMs / 86_400_000 - Int64(options.days - 1)) * 86_400_000
    let stepMs = max(1, Int64(options.days) * 86_400_000 / Int64(options.records))
    let perGateway = options.batch / options.gateways
    /// The batch that starts at record `first` of the run: `perGateway` records of each gateway,
    /// in time order.
    func batch(from first: Int, prefix: String) -> [FleetRecord] {
        var records: [FleetRecord] = []
        records.reserveCapacity(options.batch)
        let round = first / options.gateways
        for slot in 0..<perGateway {
            for index in 0..<options.gateways where first + records.count < options.records {
                let seq = Int64(round + slot + 1)
                let time = utc(startMs + Int64(first + records.count) * stepMs)
                let identifier = "zone-\(seq % 8)"
                let state = seq % 2 == 0 ? "satisfied" : "unsatisfied"
                let refinement = "{\"lat\":48.1\(index % 10),\"lon\":11.5}"
                let payload = "{\"date\":\"\(time)\",\"identifier\":\"\(identifier)\",\"monitor\":\"yard\",\"refinement\":\(refinement)," +
                    "\"state\":\"\(state)\"}"
                records.append(FleetRecord(gateway: "\(prefix)\(index)", seq: seq, prev: seq - 1, kind: .event, time: time, monitor: "yard",
                                           identifier: identifier, state: state, refinement: refinement, payload: payload, source: .mqtt))
            }
        }
        return records
    }
    var written = 0
    var tenths: [(Int, Double)] = []
    // Only FleetDatabase.write is timed (the COPY text, the statements, the commit), not the
    // making of the records.
    var tenthMs = 0.0
    var tenthRecords = 0
    var totalMs = 0.0
    while written < options.records {
        let records = batch(from: written, prefix: "gw-")
        let began = MonotonicClock.now()
        let outcome = try database.write(records, [], what: "batch")
        let batchMs = milliseconds(since: began)
        totalMs += batchMs
        tenthMs += batchMs
        guard outcome.inserted == records.count else { fail("a batch stored \(outcome.inserted) of \(records.count) records") }
        written += records.count
        tenthRecords += records.count
        if tenthRecords >= options.records / 10 || written == options.records {
            tenths.append((tenthRecords, tenthMs))
            tenthMs = 0
            tenthRecords = 0
        }
    }
    print("\nThe partitioned store: \(written) records of \(options.gateways) gateways over \(options.days) days, "
          + "batches of \(options.batch) (PostgreSQL 15, fsync on)\n")
    print("| measure | value |")
    print("|---|---:|")
    print("| write, whole run | \(Int(Double(written) / totalMs * 1000)) records/s (\(Int(totalMs / 1000)) s) |")
    for (index, tenth) in tenths.enumerated() {
        print("| write, tenth \(index + 1) | \(Int(Double(tenth.0) / tenth.1 * 1000)) records/s |")
    }
    var statusMs = Double.infinity
    for _ in 0..<3 {
        let began = MonotonicClock.now()
        let status = try FleetStatus.read(connection)
        statusMs = min(statusMs, milliseconds(since: began))
        guard status.gateways.count == options.gateways, status.gaps.isEmpty else { fail("the status shows gaps or misses gateways") }
    }
    print("| locus-fleet status (\(options.gateways) gateways), best of 3 | \(Int(statusMs)) ms |")
    let gapsStarted = MonotonicClock.now()
    _ = try connection.execute("select count(*) from gaps")
    print("| the gaps view | \(Int(milliseconds(since: gapsStarted))) ms |")
    let size = try connection.execute("select pg_size_pretty(sum(pg_total_relation_size(inhrelid))) from pg_inherits where inhparent = 'records'::regclass").scalar ?? ""
    print("| records on disk (tables and indexes) | \(size) |")
    if let oldest = try FleetRetention.partitions(connection).first {
        let dropped = try FleetRetention.drop(oldest, connection)
        print("| dropping the oldest day (\(dropped.records) records) | \(dropped.milliseconds) ms |")
    }
    // The store's own limit, as psql's \copy: the last tenth's rows again under other gateway
    // names, COPY straight into `records` (no staging, no merge), a transaction a batch as above.
    let reference = written - written / 10
    var copied = 0
    var copyMs = 0.0
    var first = reference
    while first < written {
        let records = batch(from: first, prefix: "copy-")
        let began = MonotonicClock.now()
        let data = RecordBatch.copyData(records)
        copied += try connection.copyIn("copy records (\(RecordBatch.columns)) from stdin", data)
        copyMs += milliseconds(since: began)
        first += records.count
    }
    let lastTenth = tenths.last.map { Double($0.0) / $0.1 * 1000 } ?? 0
    let copyRate = Double(copied) / copyMs * 1000
    print("| COPY straight into records, the last tenth's rows (the store's own limit) | \(Int(copyRate)) records/s |")
    let ratio = JSONWriter.rendering(capacity: 16) { $0.fixed(units: Int64(lastTenth / copyRate * 100), scale: 2) }
    print("| the last tenth's write / COPY | \(ratio) |")
} catch {
    fail("\(error)")
}
