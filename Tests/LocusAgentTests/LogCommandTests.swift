import Foundation
import LocusCore
import LocusDevices
import Testing

/// A state directory holding a log written through the store, for `locus log` to read.
private func stateDirectory(_ name: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("locus-log-cli-\(getpid())-\(name)").path
    try? FileManager.default.removeItem(atPath: path)
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// 2024-03-23T12:00:00Z in nanoseconds.
private let baseTimeNs: Int64 = 1_711_195_200_000_000_000

/// Writes `events` events of 68-byte payloads (100-byte records) after a start record and a
/// checkpoint, in segments of `segmentSize` bytes.
private func writeLog(_ directory: String, events: Int, segmentSize: Int64 = 1 << 20) throws {
    var store = try LogStore.open(directory: directory, segmentSizeBytes: segmentSize, retainBytes: 1 << 30)
    try store.append(type: .start, time: baseTimeNs, payload: [UInt8](repeating: 0, count: 68))
    try store.append(type: .checkpoint, time: baseTimeNs, payload: [UInt8](repeating: 1, count: 68))
    for index in 0..<events {
        try store.append(type: .event, time: baseTimeNs + Int64(index + 1) * 1_000_000_000, payload: [UInt8](repeating: 2, count: 68))
    }
}

private func flipByte(_ path: String, at offset: Int) throws {
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    bytes[offset] ^= 0x40
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

@Suite struct LogCommandTests {
    @Test func verifyAcceptsAnIntactLog() throws {
        let directory = try stateDirectory("intact")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try writeLog(directory, events: 8)
        let run = try locus(["log", "verify", "--state", directory])
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output == "ok: \(directory): 1 segment, 10 records (sequence 1-10), 1000 bytes\n")
        #expect(run.error.isEmpty)
        let equals = try locus(["log", "verify", "--state=\(directory)"])
        #expect(equals.output == run.output)
    }

    @Test func verifyAcceptsAnEmptyStateDirectory() throws {
        let directory = try stateDirectory("empty")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try locus(["log", "verify", "--state", directory])
        #expect(run.status == 0)
        #expect(run.output == "ok: \(directory): 0 segments, 0 records, 0 bytes\n")
    }

    @Test func verifyReportsEachBadRegionWithItsOffsetAndExitsOne() throws {
        let directory = try stateDirectory("corrupt")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try writeLog(directory, events: 28, segmentSize: 1000) // three segments of ten records
        let second = directory + "/" + LogStore.segmentFileName(11)
        let last = directory + "/" + LogStore.segmentFileName(21)
        try flipByte(second, at: 450)   // inside record 15's payload
        try flipByte(last, at: 905)     // inside record 30's header
        let sizeBefore = try FileManager.default.attributesOfItem(atPath: last)[.size] as? Int
        let run = try locus(["log", "verify", "--state", directory])
        #expect(run.status == 1)
        #expect(run.output.isEmpty)
        let lines = run.error.split(separator: "\n").map(String.init)
        #expect(lines == [
            "\(second): offset 400, 600 bytes: record checksum mismatch",
            "\(last): offset 900, 100 bytes: header checksum mismatch",
            "locus: log verify: \(directory): 2 bad regions; accepted 3 segments, 23 records (sequence 1-29), 3000 bytes",
        ])
        // Verify only reads: the torn tail is still there for the agent to cut.
        #expect(try FileManager.default.attributesOfItem(atPath: last)[.size] as? Int == sizeBefore)
    }

    @Test func verifyReportsAMissingSegmentAsAGap() throws {
        let directory = try stateDirectory("gap")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try writeLog(directory, events: 28, segmentSize: 1000)
        try FileManager.default.removeItem(atPath: directory + "/" + LogStore.segmentFileName(11))
        let run = try locus(["log", "verify", "--state", directory])
        #expect(run.status == 1)
        #expect(run.error.hasPrefix("\(directory)/\(LogStore.segmentFileName(21)): sequence numbers missing before this segment (from 11 to 20)\n"))
    }

    @Test func verifyOfAMissingDirectoryFailsWithOneLine() throws {
        let run = try locus(["log", "verify", "--state", "/nonexistent-locus-state"])
        #expect(run.status == 1)
        #expect(run.error == "locus: log verify: /nonexistent-locus-state: cannot list the log directory: No such file or directory\n")
    }

    @Test func statSummarisesTheLog() throws {
        let directory = try stateDirectory("stat")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try writeLog(directory, events: 18, segmentSize: 1000)
        let run = try locus(["log", "stat", "--state", directory])
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output == """
        directory   \(directory)
        segments    2, 2000 bytes (oldest 00000000000000000001.log, active 00000000000000000011.log)
        records     20
        sequence    1 ... 20
        time        2024-03-23T12:00:00.000Z ... 2024-03-23T12:00:18.000Z
        checkpoint  2 (newest complete)
        types       start 1, event 18, checkpoint 1
        corrupt     none

        """)
    }

    @Test func usageErrorsExitTwo() throws {
        let none = try locus(["log"])
        #expect(none.status == 2)
        #expect(none.error.hasPrefix("locus: log needs a subcommand (verify, stat, export); "))
        let typo = try locus(["log", "verfy"])
        #expect(typo.status == 2)
        #expect(typo.error == "locus: log: unknown subcommand 'verfy'; did you mean 'locus log verify'?\n")
        let extra = try locus(["log", "stat", "--bogus"])
        #expect(extra.status == 2)
        #expect(extra.error.split(separator: "\n").count == 1)
        let missing = try locus(["log", "verify", "--state"])
        #expect(missing.status == 2)
        let help = try locus(["help", "log"])
        #expect(help.status == 0)
        #expect(help.output.hasPrefix("usage: locus log verify [--state DIR]\n"))
    }
}
