import Foundation
import LocusCore
import Testing
import TestSupport

/// Gateway logs made by the host `locus`, exported as `Scripts/fetch-logs` leaves them
/// (`HOST/log.jsonl`).
struct GatewayLog {
    /// The host directory `import` reads.
    var directory: String
    /// The state directory `locus log export` read.
    var state: String
    var lines: [JSONValue]

    /// The seqs of the published kinds (event, gpio, visit), in log order.
    var publishedSeqs: [Int64] {
        lines.compactMap { line in
            guard let type = line["type"]?.string, ["event", "gpio", "visit"].contains(type) else { return nil }
            return line["seq"]?.integer(in: 1...Int64.max)
        }
    }

    func count(_ type: String) -> Int { lines.filter { $0["type"]?.string == type }.count }

    var text: String { (try? String(contentsOfFile: directory + "/log.jsonl", encoding: .utf8)) ?? "" }

    /// Exports `state` into `directory`/log.jsonl.
    static func export(state: String, into directory: String) throws -> GatewayLog {
        let export = try Fleet.locus(["log", "export", "--state", state])
        guard export.status == 0 else { throw TestPostgres.PostgresFailure("locus log export: \(export.error)") }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try export.output.write(toFile: directory + "/log.jsonl", atomically: true, encoding: .utf8)
        return GatewayLog(directory: directory, state: state, lines: try Fleet.exportLines(export.output))
    }
}

extension Fleet {
    /// The demo, as `Scripts/demo` runs it, with visits: `locus run` on the simulated board and
    /// the demo site (Examples/demo/site.toml) plus `[updates]` (visits after 5 s), fed by
    /// `locus feed` at 200x with the harbour recording (Tests/Corpus/nmea/bundg_zeus_9.log) and
    /// the crate's iBeacon advertisements (Examples/demo/ble.hci). Its log holds events, GPIO
    /// changes, visits, fixes and the other types; made once per test process (about 2 s).
    static let demoLog = Result { try makeDemoLog() }

    private static func makeDemoLog() throws -> GatewayLog {
        let work = try temporaryDirectory("demo")
        var site = try String(contentsOfFile: repositoryRoot + "/Examples/demo/site.toml", encoding: .utf8)
        site = site.replacingOccurrences(of: "board = \"../../Boards/sim.toml\"", with: "board = \"\(repositoryRoot)/Boards/sim.toml\"")
        site = site.replacingOccurrences(of: "state_dir = \"/tmp/locus-demo\"", with: "state_dir = \"\(work)/state\"")
        site += "\n[updates]\nstationary_window = \"10s\"\nvisit_minimum = \"5s\"\n"
        try site.write(toFile: work + "/site.toml", atomically: true, encoding: .utf8)
        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: try binary("locus"))
        agent.arguments = ["run", "--config", work + "/site.toml", "--state", work + "/state"]
        _ = FileManager.default.createFile(atPath: work + "/agent.err", contents: nil)
        agent.standardError = FileHandle(forWritingAtPath: work + "/agent.err")
        agent.standardOutput = FileHandle.nullDevice
        agent.standardInput = FileHandle.nullDevice
        try agent.run()
        defer {
            if agent.isRunning { kill(agent.processIdentifier, SIGKILL) }
            agent.waitUntilExit()
        }
        for _ in 0..<400 where !FileManager.default.fileExists(atPath: work + "/state/control.sock") { usleep(50_000) }
        let feed = try locus(["feed", "--nmea", repositoryRoot + "/Tests/Corpus/nmea/bundg_zeus_9.log", "--gnss", work + "/state/sim/gnss",
                              "--hci", repositoryRoot + "/Examples/demo/ble.hci", "--ble", work + "/state/sim/ble",
                              "--speed", "200", "--linger", "1", "--wait", "30"])
        guard feed.status == 0 else { throw TestPostgres.PostgresFailure("locus feed: \(feed.error)") }
        kill(agent.processIdentifier, SIGTERM)
        agent.waitUntilExit()
        return try GatewayLog.export(state: work + "/state", into: work + "/hosts/gw-demo")
    }

    /// A log of `events` events from `locus replay --speed max` (a fix a second, alternately
    /// inside and outside a 100 m fence, as Scripts/bench-uplink-drain makes), in 64 KiB segments
    /// so that checkpoints fall between the events; exported into HOST `gateway`.
    static func replayLog(events: Int, gateway: String) throws -> GatewayLog {
        let work = try temporaryDirectory("replay")
        try "[board]\nname = \"replay\"\n".write(toFile: work + "/board.toml", atomically: true, encoding: .utf8)
        let site = """
            board = "board.toml"
            [log]
            fix_interval = "60s"
            sync = "interval"
            segment_size = "64KiB"
            retain = "512MiB"
            [[monitor.yard.condition]]
            id = "fence"
            circle = { lat = 45.0, lon = 7.0, radius = 100.0 }
            exit_margin = 0.0
            dwell = "0s"
            accuracy_gate = false

            """
        try site.write(toFile: work + "/site.toml", atomically: true, encoding: .utf8)
        try alternatingTrack(fixes: events + 2).write(toFile: work + "/track.nmea", atomically: true, encoding: .utf8)
        let replay = try locus(["replay", "--config", work + "/site.toml", "--nmea", work + "/track.nmea", "--state", work + "/state", "--speed", "max"])
        guard replay.status == 0 else { throw TestPostgres.PostgresFailure("locus replay: \(replay.error)") }
        return try GatewayLog.export(state: work + "/state", into: work + "/hosts/" + gateway)
    }

    /// RMC and GGA a second from 00:00:00 on 2024-03-15, 80 m and 120 m north of (45, 7) in turn.
    static func alternatingTrack(fixes: Int) -> String {
        func checksummed(_ body: String) -> String {
            var checksum: UInt8 = 0
            for byte in body.utf8.dropFirst() { checksum ^= byte }
            return body + String(format: "*%02X\r\n", checksum)
        }
        var text = ""
        text.reserveCapacity(fixes * 150)
        for second in 0..<fixes {
            let time = String(format: "%02d%02d%02d.00", second / 3600 % 24, second / 60 % 60, second % 60)
            let date = String(format: "%02d0324", 15 + second / 86400)
            let latitude = String(format: "45%010.7f,N", (second % 2 == 0 ? 80.0 : 120.0) / 111_132.0 * 60)
            text += checksummed("$GPRMC,\(time),A,\(latitude),00700.0000000,E,0.0,0.0,\(date),,,A")
            text += checksummed("$GPGGA,\(time),\(latitude),00700.0000000,E,1,09,0.8,20.0,M,-30.0,M,,")
        }
        return text
    }
}
