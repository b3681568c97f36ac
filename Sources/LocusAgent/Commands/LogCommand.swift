import LocusCore
import LocusDevices

/// `locus log verify|stat [--state DIR]`: read-only looks at the log. They take no lock and
/// change nothing, so they are safe beside a running agent (whose record being written at that
/// instant may show as a torn tail).
enum LogCommand {
    static let usage = "usage: locus log verify [--state DIR] | log stat [--state DIR] | log export [--state DIR] [--after-seq N] [--format jsonl|csv] [--follow] [--ssh]"
    static let defaultStateDirectory = "/var/lib/locus"

    static func run(_ arguments: [String]) -> Int32 {
        guard let subcommand = arguments.first else {
            return CommandLineInterface.usageError("log needs a subcommand (verify, stat, export)", hint: usage)
        }
        if subcommand == "export" { return LogExport.run(Array(arguments.dropFirst())) }
        let subcommands = ["verify", "stat", "export"]
        guard subcommands.contains(subcommand) else {
            var hint = usage
            if let suggestion = Spelling.closest(to: subcommand, among: subcommands) { hint = "did you mean 'locus log \(suggestion)'?" }
            return CommandLineInterface.usageError("log: unknown subcommand '\(subcommand)'", hint: hint)
        }
        var directory = defaultStateDirectory
        var rest = Array(arguments.dropFirst())
        while let argument = rest.first {
            rest.removeFirst()
            if argument == "--state", let value = rest.first {
                directory = value
                rest.removeFirst()
            } else if argument.hasPrefix("--state=") {
                directory = String(argument.dropFirst("--state=".utf8.count))
            } else if argument == "--state" {
                return CommandLineInterface.usageError("log \(subcommand): --state needs a directory", hint: usage)
            } else {
                return CommandLineInterface.usageError("log \(subcommand): unexpected argument '\(argument)'", hint: usage)
            }
        }
        return subcommand == "verify" ? verify(directory) : stat(directory)
    }

    /// Exit 0 with a one-line summary, or 1 with one line per region that was not accepted.
    static func verify(_ directory: String) -> Int32 {
        let scan: LogScan
        do {
            scan = try LogStore.scan(directory: directory)
        } catch {
            return CommandLineInterface.failure("log verify", "\(directory): \(error)")
        }
        if scan.corruptions.isEmpty {
            Console.out("ok: \(directory): \(summary(scan))\n")
            return 0
        }
        for corruption in scan.corruptions { Console.error(describe(corruption, in: directory) + "\n") }
        let regions = count(scan.corruptions.count, "bad region")
        return CommandLineInterface.failure("log verify", "\(directory): \(regions); accepted \(summary(scan))")
    }

    /// One line per region: file, byte offset, length, reason.
    static func describe(_ corruption: LogCorruption, in directory: String) -> String {
        let path = directory + "/" + corruption.fileName
        switch corruption.reason {
        case .sequenceGap:
            return "\(path): \(corruption.reason) (from \(corruption.expectedSequence) to \(corruption.segment - 1))"
        case .outOfSequence:
            return "\(path): offset \(corruption.offset), \(corruption.length) bytes: \(corruption.reason) (expected \(corruption.expectedSequence))"
        default:
            return "\(path): offset \(corruption.offset), \(corruption.length) bytes: \(corruption.reason)"
        }
    }

    static func summary(_ scan: LogScan) -> String {
        var text = "\(count(scan.segments.count, "segment")), \(count(scan.records, "record"))"
        if scan.records > 0, let range = sequenceRange(scan) { text += " (sequence \(range.first)-\(range.last))" }
        return text + ", \(count(Int(scan.bytes), "byte"))"
    }

    /// First and last accepted sequence numbers.
    static func sequenceRange(_ scan: LogScan) -> (first: UInt64, last: UInt64)? {
        guard let first = scan.segments.first(where: { $0.records > 0 }),
              let last = scan.segments.last(where: { $0.records > 0 }) else { return nil }
        return (first.firstSequence, last.nextSequence - 1)
    }

    static func stat(_ directory: String) -> Int32 {
        var counts = [Int](repeating: 0, count: 256)
        var firstTime: Int64? = nil
        var lastTime: Int64 = 0
        let scan: LogScan
        do {
            scan = try LogStore.scan(directory: directory) { header, _ in
                counts[Int(header.typeCode)] += 1
                if firstTime == nil { firstTime = header.time }
                lastTime = header.time
            }
        } catch {
            return CommandLineInterface.failure("log stat", "\(directory): \(error)")
        }
        var rows: [(String, String)] = [("directory", directory)]
        var segments = "\(scan.segments.count), \(count(Int(scan.bytes), "byte"))"
        if let first = scan.segments.first, let last = scan.segments.last {
            segments += " (oldest \(first.fileName), active \(last.fileName))"
        }
        rows.append(("segments", segments))
        rows.append(("records", "\(scan.records)"))
        if let range = sequenceRange(scan) {
            rows.append(("sequence", "\(range.first) ... \(range.last)"))
        } else {
            rows.append(("sequence", "none (next \(scan.nextSequence))"))
        }
        if let firstTime { rows.append(("time", "\(iso8601(firstTime)) ... \(iso8601(lastTime))")) }
        if let checkpoint = scan.lastCheckpointSequence {
            rows.append(("checkpoint", "\(checkpoint) (newest complete)"))
        } else {
            rows.append(("checkpoint", "none"))
        }
        var types: [String] = []
        for code in 1..<256 where counts[code] > 0 {
            let name = LogRecordType(rawValue: UInt8(code)).map { $0.description } ?? "type-\(code)"
            types.append("\(name) \(counts[code])")
        }
        rows.append(("types", types.isEmpty ? "none" : join(types)))
        rows.append(("corrupt", scan.corruptions.isEmpty ? "none" : "\(count(scan.corruptions.count, "bad region")) (see 'locus log verify')"))
        let width = rows.reduce(0) { max($0, $1.0.utf8.count) }
        var text = ""
        for (name, value) in rows {
            text += name + String(repeating: " ", count: width - name.utf8.count + 2) + value + "\n"
        }
        Console.out(text)
        return 0
    }

    /// UTC nanoseconds as ISO 8601 with milliseconds.
    static func iso8601(_ nanoseconds: Int64) -> String {
        var seconds = nanoseconds / 1_000_000_000
        var remainder = nanoseconds % 1_000_000_000
        if remainder < 0 {
            seconds -= 1
            remainder += 1_000_000_000
        }
        return UTCTime(seconds: seconds, nanoseconds: Int32(remainder)).iso8601
    }

    /// "1 record", "2 records".
    private static func count(_ value: Int, _ noun: String) -> String {
        value == 1 ? "1 \(noun)" : "\(value) \(noun)s"
    }

    private static func join(_ parts: [String]) -> String {
        var text = ""
        for (index, part) in parts.enumerated() { text += (index == 0 ? "" : ", ") + part }
        return text
    }
}
