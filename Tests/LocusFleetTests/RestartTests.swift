import Foundation
import LocusCore
@testable import LocusFleet
import Testing
import TestSupport

/// PostgreSQL going away during an import: a restart (`pg_ctl restart -m fast`) is survived by
/// connecting again and writing the batch again; a server that stays down fails the command
/// clearly; either way a second run completes with nothing lost or stored twice. These tests
/// restart their own cluster, so they run alone on it.
@Suite(.serialized) struct RestartTests {
    static let cluster = Result { try TestPostgres() }

    static func migrated(_ name: String) throws -> String {
        let cluster = try cluster.get()
        let url = cluster.url(database: try cluster.createDatabase(name))
        #expect(try Fleet.fleet(["migrate", "--database", url]).status == 0)
        return url
    }

    /// Notices said during an import, kept for the checks.
    final class Notices: @unchecked Sendable {
        var lines: [String] = []
    }

    @Test func aRestartJustBeforeABatchCommitsIsSurvivedByWritingTheBatchAgain() throws {
        let cluster = try Self.cluster.get()
        let url = try Self.migrated("restart")
        let log = try Fleet.replayLog(events: 5_000, gateway: "gw-restart")
        let notices = Notices()
        let database = try FleetDatabase(try ConnectionString.parse(url).get()) { notices.lines.append($0) }
        var restarts = 0
        database.beforeCommit = { batch in
            guard batch == 3, restarts == 0 else { return }
            restarts += 1
            try? cluster.restart()
        }
        let summary = try LogImport.run(directory: log.directory, gateway: nil, database: database, batchRecords: 1_000)
        #expect(restarts == 1)
        #expect(summary.read == 5_000 && summary.inserted == 5_000, "the third batch was rolled back by the restart and written again: \(summary)")
        #expect(notices.lines.count == 1, "\(notices.lines)")
        let notice = try #require(notices.lines.first)
        #expect(notice.hasPrefix("gw-restart: writing the batch from seq "), "\(notice)")
        #expect(notice.hasSuffix("; connecting again in 0.25 s (attempt 1 of 6)"), "\(notice)")
        #expect(notice.contains("terminating connection due to administrator command") || notice.contains("server closed the connection"), "\(notice)")
        #expect(try ImportTests.stored(url, "gw-restart").map(\.seq) == log.publishedSeqs)
        let again = try Fleet.fleet(["import", "--database", url, log.directory])
        #expect(again.output == "gw-restart: 5000 records read, 0 new, 5000 already stored, 0 quarantined\n")
    }

    @Test func aServerThatStaysDownFailsClearlyAndASecondRunCompletes() throws {
        let cluster = try Self.cluster.get()
        let url = try Self.migrated("down")
        let log = try Fleet.replayLog(events: 5_000, gateway: "gw-down")
        let notices = Notices()
        let database = try FleetDatabase(try ConnectionString.parse(url).get()) { notices.lines.append($0) }
        database.reconnectDelaysMs = [100, 200]
        database.beforeCommit = { batch in
            if batch == 2 { try? cluster.stop() }
        }
        defer { try? cluster.start() }
        do {
            _ = try LogImport.run(directory: log.directory, gateway: nil, database: database, batchRecords: 1_000)
            Issue.record("the import fails while the server is down")
        } catch {
            #expect(error.isDatabase)
            #expect(error.message.hasPrefix("gw-down: writing the batch from seq "), "\(error.message)")
            #expect(error.message.hasSuffix("; gave up after 2 new connections over 0.3 s. Run the command again once PostgreSQL is back: "
                                            + "what was stored stays stored, and nothing is stored twice"), "\(error.message)")
            #expect(error.message.contains("Connection refused") || error.message.contains("No such file or directory"), "\(error.message)")
        }
        #expect(notices.lines.count == 2 && notices.lines[1].hasSuffix("connecting again in 0.2 s (attempt 2 of 2)"), "\(notices.lines)")
        try cluster.start()
        #expect(try ImportTests.stored(url, "gw-down").count == 1_000, "the first batch only")
        let rerun = try Fleet.fleet(["import", "--database", url, log.directory])
        #expect(rerun.status == 0)
        #expect(rerun.output == "gw-down: 5000 records read, 4000 new, 1000 already stored, 0 quarantined\n")
        #expect(try ImportTests.stored(url, "gw-down").map(\.seq) == log.publishedSeqs)
    }

    /// The command as a technician runs it, the server restarted at whatever moment it is in.
    @Test func aRestartDuringTheImportCommandLosesAndDoublesNothing() throws {
        let cluster = try Self.cluster.get()
        let url = try Self.migrated("command")
        let log = try Fleet.replayLog(events: 20_000, gateway: "gw-command")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Fleet.binary("locus-fleet"))
        process.arguments = ["import", "--database", url, "--batch", "100", log.directory]
        let errorPath = try Fleet.temporaryDirectory("command") + "/import.err"
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: errorPath)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let connection = try Fleet.connect(url)
        // Once some batches are in: restart while the import goes on.
        var stored = 0
        for _ in 0..<400 where stored < 2_000 && process.isRunning {
            usleep(10_000)
            stored = Int(try connection.execute("select count(*) from records").scalar ?? "0") ?? 0
        }
        let restartedWhileRunning = process.isRunning
        try cluster.restart()
        process.waitUntilExit()
        let error = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
        #expect(restartedWhileRunning, "the import was still running when the server restarted (\(stored) records stored)")
        if process.terminationStatus == 0 {
            #expect(error.contains("connecting again in 0.25 s (attempt 1 of 6)"), "\(error)")
        } else {
            #expect(process.terminationStatus == 1 && error.hasPrefix("locus-fleet: import: "), "\(error)")
        }
        let rerun = try Fleet.fleet(["import", "--database", url, log.directory])
        #expect(rerun.status == 0, "\(rerun.error)")
        #expect(rerun.output.hasPrefix("gw-command: 20000 records read, "))
        #expect(try ImportTests.stored(url, "gw-command").map(\.seq) == log.publishedSeqs)
        #expect(try Fleet.fleet(["status", "--database", url]).status == 0)
    }
}
