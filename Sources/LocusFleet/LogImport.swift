import LocusCore
import LocusDevices

/// `locus-fleet import`: one `Scripts/fetch-logs` host directory's `log.jsonl` (the lines of
/// `locus log export --format jsonl`) into the database. Events, GPIO changes and visits become
/// records (`FleetRecord.exported`, with prev from `PrevChain`); other record types are read for
/// the chain and skipped; a line that cannot be read goes to the quarantine with `FILE:LINE` and
/// the reason. Batches of `batchRecords` rows (records and quarantined lines) are written one
/// transaction each, so a second import of the same file stores nothing new.
public struct LogImport {
    /// The longest line `locus log export` writes (its `lineCapacity`: a text payload escaped at
    /// worst 6 bytes a byte, plus the members); a longer line is not an export's.
    public static let maximumLineBytes = 6 * LogRecord.maximumPayloadSize + 1024
    /// What the quarantine keeps of a longer line.
    public static let keptBytes = 64 * 1024
    public static let defaultBatchRecords = 10_000
    public static let maximumBatchRecords = 100_000
    /// A batch is written once it holds this many bytes of payloads and kept lines, whatever
    /// its count: 10,000 quarantined lines of 64 KiB would otherwise be 640 MiB in memory.
    public static let maximumBatchBytes = 32 << 20

    public struct Summary: Sendable, Equatable {
        public var gateway: String
        /// Events, GPIO changes and visits read from the file.
        public var read = 0
        public var inserted = 0
        public var quarantined = 0
        public var quarantinedNew = 0
        /// Records of other types (checkpoints, fixes, ...), read for the chain only.
        public var otherRecords = 0

        /// `gw-07: 1234 records read, 1234 new, 0 already stored, 0 quarantined`.
        public var line: String {
            var text = "\(gateway): \(read) records read, \(inserted) new, \(read - inserted) already stored, \(quarantined) quarantined"
            if quarantined > quarantinedNew { text += " (\(quarantined - quarantinedNew) of them kept already)" }
            return text
        }
    }

    let path: String
    var summary: Summary
    var chain = PrevChain()
    var records: [FleetRecord] = []
    var quarantine: [QuarantineEntry] = []
    /// The payload and kept-line bytes of the batch being gathered.
    var pendingBytes = 0

    /// Imports `directory` (its `log.jsonl`) as `gateway`, or the id `gatewayID` finds.
    public static func run(directory: String, gateway: String?, database: FleetDatabase,
                           batchRecords: Int = defaultBatchRecords) throws(FleetError) -> Summary {
        precondition((1...maximumBatchRecords).contains(batchRecords), "batch size out of range")
        let id = try gatewayID(directory: directory, given: gateway)
        let file = directory + "/log.jsonl"
        let reader: LineReader
        do {
            reader = try LineReader(path: canonical(file), maximumLineBytes: maximumLineBytes, keptBytes: keptBytes)
        } catch {
            throw FleetError("\(file): \(error.reason) (a Scripts/fetch-logs host directory holds log.jsonl)")
        }
        var job = LogImport(path: reader.path, summary: Summary(gateway: id))
        while true {
            let line: LineReader.Line?
            do { line = try reader.next() } catch { throw FleetError("cannot read \(error)") }
            guard let line else { break }
            job.take(line)
            if job.records.count + job.quarantine.count >= batchRecords || job.pendingBytes >= maximumBatchBytes {
                try job.flush(database)
            }
        }
        try job.flush(database)
        return job.summary
    }

    /// The gateway id: `given` (--gateway), else the one line of DIRECTORY/gateway, else
    /// the directory's own name (fetch-logs names it after the host).
    public static func gatewayID(directory: String, given: String?) throws(FleetError) -> String {
        var id = given ?? ""
        if given == nil {
            let file = directory + "/gateway"
            if let text = readSmallFile(file) {
                let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
                guard lines.count == 1 else { throw FleetError("\(file): expected one line, the gateway id; found \(lines.count)") }
                id = String(lines[0]).trimmingCharacters(in: " \t\r")
            } else {
                id = String(canonical(directory).split(separator: "/").last ?? "")
            }
        }
        if let problem = FleetRecord.gatewayProblem(id) { throw FleetError("\(directory): \(problem)") }
        return id
    }

    // MARK: one line

    mutating func take(_ line: LineReader.Line) {
        if line.isCut {
            keep(line, "a line of \(line.totalBytes) bytes, longer than any line of locus log export (at most \(Self.maximumLineBytes)); its first \(line.bytes.count) bytes are kept")
            return
        }
        if line.bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) {
            keep(line, "an empty line")
            return
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(line.bytes)
        } catch {
            keep(line, "not JSON: \(error)")
            return
        }
        guard value.isObject else { return keep(line, "not a JSON object") }
        let seq: Int64
        do { seq = try FleetRecord.sequence(value["seq"]) } catch { return keep(line, error.reason) }
        if let problem = chain.orderProblem(seq) { return keep(line, problem) }
        guard let type = value["type"]?.string else { return keep(line, "record \(seq): no type (a string)") }
        guard FleetRecord.Kind(rawValue: type) != nil else {
            chain.read(seq, published: false)
            summary.otherRecords += 1
            return
        }
        do {
            let record = try FleetRecord.exported(value, gateway: summary.gateway, prev: chain.prev(of: seq))
            chain.read(seq, published: true)
            records.append(record)
            pendingBytes += record.payload.utf8.count
            summary.read += 1
        } catch {
            keep(line, "\(type) record \(seq): \(error.reason)")
        }
    }

    mutating func keep(_ line: LineReader.Line, _ reason: String) {
        quarantine.append(QuarantineEntry(source: .logImport, origin: "\(path):\(line.number)", payload: line.bytes, reason: reason))
        pendingBytes += line.bytes.count
        summary.quarantined += 1
    }

    mutating func flush(_ database: FleetDatabase) throws(FleetError) {
        guard !records.isEmpty || !quarantine.isEmpty else { return }
        let first = records.first.map { "seq \($0.seq)" } ?? "quarantine"
        let outcome = try database.write(records, quarantine, what: "\(summary.gateway): writing the batch from \(first)")
        summary.inserted += outcome.inserted
        summary.quarantinedNew += outcome.quarantined
        records.removeAll(keepingCapacity: true)
        quarantine.removeAll(keepingCapacity: true)
        pendingBytes = 0
    }

    // MARK: files

    /// The absolute path without symbolic links (realpath(3)), so that the quarantine's
    /// `FILE:LINE` is the same whichever way the directory was named; the path itself if it
    /// does not resolve.
    static func canonical(_ path: String) -> String {
        Files.canonicalPath(path) ?? path
    }

    /// A file of at most 4 KiB as text; nil if it is not there.
    static func readSmallFile(_ path: String) -> String? {
        guard let bytes = try? Files.readStart(path, maximumBytes: 4096) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension String {
    /// Without leading and trailing characters of `set`.
    func trimmingCharacters(in set: String) -> String {
        let unwanted = Set(set.unicodeScalars)
        let scalars = unicodeScalars
        guard let start = scalars.firstIndex(where: { !unwanted.contains($0) }) else { return "" }
        let end = scalars.lastIndex(where: { !unwanted.contains($0) })!
        return String(scalars[start...end])
    }
}
