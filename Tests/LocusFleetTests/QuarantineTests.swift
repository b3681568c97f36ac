import Foundation
import LocusCore
import LocusFleet
import Testing
import TestSupport

/// Malformed and foreign lines: each kept in `quarantine` with FILE:LINE and the reason, never
/// stopping the rest, never kept twice.
@Suite struct QuarantineTests {
    @Test func malformedLinesAreQuarantinedWithTheirReasonsAndTheRestIsStored() throws {
        let url = try Fleet.migratedDatabase("quarantine")
        let demo = try Fleet.demoLog.get()
        var lines: [[UInt8]] = demo.text.split(separator: "\n").map { Array($0.utf8) }
        let eventIndex = try #require(demo.lines.firstIndex { $0["type"]?.string == "event" })
        // A line's change after the first event (the lines' levels logged at start come before it).
        let gpioIndex = try #require(demo.lines.indices.first { $0 > eventIndex && demo.lines[$0]["type"]?.string == "gpio" })
        let gpioSeq = demo.lines[gpioIndex]["seq"]!.integer(in: 1...Int64.max)!
        // One real record damaged (its value a string): it is lost to `records`, so it is a gap.
        lines[gpioIndex] = Array(String(decoding: lines[gpioIndex], as: UTF8.self)
            .replacingOccurrences(of: #""value":true"#, with: #""value":"on""#)
            .replacingOccurrences(of: #""value":false"#, with: #""value":"off""#).utf8)
        let huge = Array(#"{"seq":1,"type":"diagnostic","text":""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 600_000) + Array(#""}"#.utf8)
        // Foreign lines after the first event (each inserted; the records around them stay whole).
        let foreign: [[UInt8]] = [
            Array(lines[eventIndex].prefix(lines[eventIndex].count / 2)),          // truncated JSON
            Array(#"{"time":"2024-03-14T00:05:30.000Z","type":"event"}"#.utf8),    // no seq
            huge,                                                                  // longer than any export line
            [],                                                                    // an empty line
            [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D],                            // not UTF-8
            Array("[1,2,3]".utf8),                                                 // not an object
        ]
        lines.insert(contentsOf: foreign, at: eventIndex + 1)
        let gpioLine = gpioIndex + foreign.count + 1
        let directory = try Fleet.temporaryDirectory("hosts") + "/gw-bad"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let file = directory + "/log.jsonl"
        _ = FileManager.default.createFile(atPath: file, contents: Data(lines.joined(separator: [0x0A]) + [0x0A]))

        let published = demo.publishedSeqs.count
        let run = try Fleet.fleet(["import", "--database", url, directory])
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output == "gw-bad: \(published - 1) records read, \(published - 1) new, 0 already stored, 7 quarantined\n")

        let first = eventIndex + 2
        var truncated = ""
        do { _ = try JSONParser.parse(foreign[0]) } catch { truncated = "not JSON: \(error)" }
        let expected: [(line: Int, reason: String)] = [
            (first, truncated),
            (first + 1, "no seq"),
            (first + 2, "a line of \(huge.count) bytes, longer than any line of locus log export (at most \(LogImport.maximumLineBytes)); its first 65536 bytes are kept"),
            (first + 3, "an empty line"),
            (first + 4, "not JSON: invalid JSON at byte 3: not valid UTF-8"),
            (first + 5, "not a JSON object"),
            (gpioLine, "gpio record \(gpioSeq): value is not true or false"),
        ]
        let connection = try Fleet.connect(url)
        let rows = try connection.execute("select source, origin, reason, payload from quarantine order by id").rows
        #expect(rows.map { [$0[0]!, $0[1]!, $0[2]!] } == expected.map { ["import", "\(file):\($0.line)", $0.reason] })
        #expect(rows[0][3] == PostgresText.byteaHex(foreign[0]), "the line is kept as it was")
        #expect(rows[2][3] == PostgresText.byteaHex(Array(huge.prefix(LogImport.keptBytes))))
        #expect(rows[4][3] == PostgresText.byteaHex(foreign[4]))

        // Every other record is stored; the damaged one is reported as the gap it leaves.
        let stored = try ImportTests.stored(url, "gw-bad").map(\.seq)
        #expect(stored == demo.publishedSeqs.filter { $0 != gpioSeq })
        let status = try Fleet.fleet(["status", "--database", url])
        #expect(status.status == 1)
        let before = demo.publishedSeqs.last { $0 < gpioSeq }!
        let after = demo.publishedSeqs.first { $0 > gpioSeq }!
        let range = before + 1 == gpioSeq ? "seq \(gpioSeq)" : "seq \(before + 1)..\(gpioSeq)"
        #expect(status.output.contains("GAP gw-bad: \(range) missing (between \(before) and \(after))\n"), "\(status.output)")
        #expect(status.output.hasSuffix("quarantine: 7 inputs kept with the reason they were refused (table quarantine)\n"))

        // Again: nothing new anywhere.
        let digest = try ImportTests.digest(url)
        let again = try Fleet.fleet(["import", "--database", url, directory])
        #expect(again.output == "gw-bad: \(published - 1) records read, 0 new, \(published - 1) already stored, 7 quarantined (7 of them kept already)\n")
        #expect(try ImportTests.digest(url) == digest)
    }

    @Test func theQuarantineKeepsAnyBytesAndTheArraysCarryAnyText() throws {
        let url = try Fleet.migratedDatabase("bytes")
        let connection = try Fleet.connect(url)
        let awkward = ["quote \" and backslash \\ and {braces}, commas", "tab\tnewline\nreturn\r", "NULL", "", "ünïcødé ✓ 𝄞"]
        let entries = awkward.enumerated().map { index, text in
            QuarantineEntry(source: .mqtt, origin: index == 0 ? nil : "locus/gw/event/\(index)", payload: Array(text.utf8) + [0, 0xFF, UInt8(index)], reason: text)
        }
        let outcome = try connection.transaction { () throws(PostgresError) -> BatchOutcome in
            try RecordBatch.write([], entries, on: connection)
        }
        #expect(outcome == BatchOutcome(inserted: 0, quarantined: awkward.count))
        let rows = try connection.execute("select origin, payload, reason from quarantine order by id").rows
        #expect(rows.map { $0[2]! } == awkward)
        #expect(rows.map { $0[1]! } == entries.map { PostgresText.byteaHex($0.payload) })
        #expect(rows[0][0] == nil)
        let again = try connection.transaction { () throws(PostgresError) -> BatchOutcome in
            try RecordBatch.write([], entries, on: connection)
        }
        #expect(again.quarantined == 0, "kept once, the NULL origin too")
    }
}
