import Foundation
import Testing

/// The seeds on which the simulator (locus-sim, docs/simulator.md) found a bug, each kept as a test:
/// the scenario the seed draws, run again, passes every invariant. A seed stands for its bug only
/// while Scenario's draws stay the same: a change to them re-finds these seeds (docs/simulator.md).
@Suite struct SimulatorSeedTests {
    /// Seed, and the bug it found.
    static let seeds: [(UInt64, String)] = [
        (9, "an event whose sync failed was logged twice: the reopen's rescan found its record in the page cache"),
        (55, "after a failed sync the log never reopened: the reopen waited for the process's own lock"),
        (81, "after a restart with the system clock set back, a beacon's exit waited for the clock to reach the log's times"),
        (218, "a start the disk refused went to memory and the records started over from the site file"),
        (12, "the levels the outputs were restored to at start were not logged: the log's GPIO records said otherwise"),
        (5405, "a line's change the log could not take (a failing sync) was never logged: the log's GPIO records disagreed with the line"),
        (8001, "with the event ring full and the disk refusing, a beacon's exit deadline already past woke the loop at once, again and again: it spun"),
        (1037, "a torn tail cut at start with the disk failing syncs stopped the log's opening: the records started over in memory"),
        (23, "with the disk full, the uplink's cursor commit was tried at every turn: the loop woke every millisecond"),
        (66, "after the broker dropped the connection, the uplink's commit deadline stayed past while commits waited for a connection: the loop woke every millisecond"),
        (376, "at interval sync, the uplink published a record a power cut then took, and its seq went to another record: the broker had two records as one seq"),
        (9883, "at interval sync, a log whose sync failed was reopened only when an event waited: records acknowledged before the failure stayed unsynced until a power cut took them"),
        (249, "a fleet's command whose record the failing log could not take was remembered as run: delivered again, it was taken for a duplicate and never ran"),
        (510, "at interval sync, a fleet's command whose record's sync failed stayed in the page cache: the reopen found it, and the command's redelivery logged it a second time"),
    ]

    @Test(arguments: seeds.map(\.0)) func aSeedThatFoundABugPasses(seed: UInt64) throws {
        // Built beside the locus the tests run (the debug build's folder).
        let simulator = URL(fileURLWithPath: try locusBinary()).deletingLastPathComponent().appendingPathComponent("locus-sim").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: simulator)
        process.arguments = ["--first", "\(seed)", "--seeds", "1"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let bug = Self.seeds.first { $0.0 == seed }!.1
        #expect(process.terminationStatus == 0 && text.contains("seeds 1, passed 1, failed 0"), "seed \(seed) (\(bug)):\n\(text)")
        // The run did something: the invariants were checked, not skipped.
        #expect(text.contains("outputs equal the log: "), "\(text)")
    }
}
