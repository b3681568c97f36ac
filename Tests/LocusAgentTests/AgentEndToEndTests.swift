import Foundation
import Testing

/// `locus run` as deployed, on the simulated board: real pseudo-terminals fed by `locus feed`
/// (NMEA and H4-framed HCI events), the simulated GPIO mirrored to STATE/sim/gpio, the log, the
/// control socket, signals. Expected results come from the recordings' geometry: a road going
/// north at 10 m/s through a 30 m fence centred 200 m from the start.
@Suite(.serialized) struct AgentEndToEndTests {
    /// An iBeacon advertising report of UUID E2C56DB5-DFFB-48D2-B060-D0F5A71096E0, major 100,
    /// minor 0 (the BLE corpus's vector v065), as an HCI LE Advertising Report event.
    static let iBeaconEvent = "043e2a02010001433ea2c96b6a1e02011a1aff4c000215e2c56db5dffb48d2b060d0f5a71096e000640000c5b3"
    /// 2024-03-15T10:00:00Z, the synthetic track's first fix time (RMC date 150324, time 100000).
    static let trackStart = 1_710_496_800

    struct Agent {
        var process: Process
        var stderrPath: String
        var state: String

        var log: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

        func stop(signal: Int32 = SIGTERM) -> Int32 {
            kill(process.processIdentifier, signal)
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    struct Site {
        var directory: String
        var sitePath: String
        var state: String
    }

    /// The outputs the test site's actions drive, for boards other than Boards/sim.toml.
    static let boardOutputs = "[gpio.outputs]\nrelay1 = { line = 0 }\nrelay2 = { line = 1 }\nbuzzer = { line = 2 }\n"

    /// A site file in a directory of its own, on the simulated board or on `board` (a board
    /// file's text, written beside the site).
    static func site(_ name: String, extra: String = "", fenceDwell: String = "0s", board: String? = nil) throws -> Site {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locus-e2e-\(name)-\(getpid())").path
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var boardPath = repositoryRoot + "/Boards/sim.toml"
        if let board {
            boardPath = "board.toml"
            try board.write(toFile: directory + "/board.toml", atomically: true, encoding: .utf8)
        }
        let fence = String(format: "%.7f", 45.0 + 200 / 111_132.0)
        let site = """
        board = "\(boardPath)"
        [log]
        fix_interval = "5s"

        [[monitor.road.condition]]
        id = "fence"
        circle = { lat = \(fence), lon = 7.0, radius = 30.0 }
        exit_margin = 0.0
        dwell = "\(fenceDwell)"

        [[monitor.cargo.condition]]
        id = "tag"
        beacon = { uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0" }
        exit_timeout = "3s"

        [[action]]
        when = "road/fence"
        state = "satisfied"
        gpio = "relay1"
        mode = "level"

        [[action]]
        when = "road/fence"
        state = "satisfied"
        gpio = "relay2"
        mode = "latch"

        [[action]]
        when = "cargo/*"
        state = "any"
        gpio = "buzzer"
        mode = "pulse"
        pulse = "300ms"
        \(extra)
        """
        let sitePath = directory + "/site.toml"
        try site.write(toFile: sitePath, atomically: true, encoding: .utf8)
        return Site(directory: directory, sitePath: sitePath, state: directory + "/state")
    }

    static func start(_ site: Site, binary: String? = nil) throws -> Agent {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try binary ?? locusBinary())
        process.arguments = ["run", "--config", site.sitePath, "--state", site.state]
        let stderrPath = site.directory + "/agent-\(UUID().uuidString.prefix(8)).err"
        FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let agent = Agent(process: process, stderrPath: stderrPath, state: site.state)
        // Set up once its control socket accepts connections (a killed agent leaves the file).
        try waitFor("the control socket", seconds: 20) { canConnect(site.state + "/control.sock") }
        return agent
    }

    static func feed(_ site: Site, nmea: String?, hci: String?, speed: String = "10", linger: Int = 0) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try locusBinary())
        var arguments = ["feed", "--speed", speed, "--linger", "\(linger)", "--wait", "60"]
        if let nmea {
            let path = site.directory + "/track.nmea"
            try nmea.write(toFile: path, atomically: true, encoding: .utf8)
            arguments += ["--nmea", path, "--gnss", site.state + "/sim/gnss"]
        }
        if let hci {
            let path = site.directory + "/ble.hci"
            try hci.write(toFile: path, atomically: true, encoding: .utf8)
            arguments += ["--hci", path, "--ble", site.state + "/sim/ble"]
        }
        process.arguments = arguments
        let stderrPath = site.directory + "/feed.err"
        FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        return process
    }

    static func waitFor(_ what: String, seconds: Double, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return }
            usleep(50_000)
        }
        throw WaitTimedOut(what: what)
    }

    struct WaitTimedOut: Error, CustomStringConvertible {
        var what: String
        var description: String { "timed out waiting for \(what)" }
    }

    static func gpio(_ state: String) -> [String: Int] {
        guard let text = try? String(contentsOfFile: state + "/sim/gpio", encoding: .utf8) else { return [:] }
        var values: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 2 { values[String(parts[0])] = Int(parts[1]) }
        }
        return values
    }

    /// Every record of the log as a JSON object.
    static func records(_ state: String) throws -> [[String: Any]] {
        let run = try locus(["log", "export", "--state", state])
        return run.output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    static func events(_ records: [[String: Any]]) -> [(seq: Int, name: String, state: String, event: [String: Any])] {
        records.compactMap { record in
            guard record["type"] as? String == "event", let event = record["event"] as? [String: Any],
                  let monitor = event["monitor"] as? String, let identifier = event["identifier"] as? String,
                  let state = event["state"] as? String, let seq = record["seq"] as? Int else { return nil }
            return (seq, "\(monitor)/\(identifier)", state, event)
        }
    }

    /// Sightings of the test beacon, one a second, from `from` to `to` seconds into the track.
    static func sightings(from: Int, to: Int) -> String {
        (from...to).map { "\(trackStart + $0).500 \(iBeaconEvent)" }.joined(separator: "\n") + "\n"
    }

    @Test func fixesAndSightingsDriveEventsGPIOAndTheLogInOrder() throws {
        let site = try Self.site("events")
        let agent = try Self.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let track = syntheticTrack(seconds: 40, startLatitude: 45.0, longitude: 7.0, speedMps: 10)
        let feeder = try Self.feed(site, nmea: track, hci: Self.sightings(from: 5, to: 12))
        feeder.waitUntilExit()
        #expect(feeder.terminationStatus == 0)
        try Self.waitFor("five events", seconds: 10) { Self.events(try Self.records(site.state)).count >= 5 }
        let records = try Self.records(site.state)
        let events = Self.events(records)
        var summary = events.map { "\($0.name) \($0.state)" }
        // The first fix decides the fence (outside); the tag is seen 5-12 s in and, with a 3 s exit
        // timeout, gone ~3 s later; the fence (200 m north, radius 30 m, at 10 m/s) is entered
        // at 17-18 s and left at 23-24 s. The tag's first decision may come before its first
        // sighting: unseen for its 3 s exit timeout since the agent started monitoring, counted
        // on the agent's clock, which the fixes (played 10 times faster) move.
        if let unseen = summary.firstIndex(of: "cargo/tag unsatisfied"), let seen = summary.firstIndex(of: "cargo/tag satisfied"), unseen < seen {
            summary.remove(at: unseen)
        }
        #expect(summary == ["road/fence unsatisfied", "cargo/tag satisfied", "cargo/tag unsatisfied", "road/fence satisfied",
                            "road/fence unsatisfied"], "events: \(summary)")
        let tag = try #require(events.first { $0.name == "cargo/tag" && $0.state == "satisfied" })
        let refinement = try #require(tag.event["refinement"] as? [String: Any])
        #expect(refinement["major"] as? Int == 100 && refinement["minor"] as? Int == 0)
        let entered = try #require(events.first { $0.name == "road/fence" && $0.state == "satisfied" })
        let date = try #require(entered.event["date"] as? String)
        #expect(date.hasPrefix("2024-03-15T10:00:1"), "entered at \(date): fix times, not the system clock, date events")

        // Log, then act: every GPIO change comes after the event that caused it.
        let changes = records.filter { $0["type"] as? String == "gpio" }
        #expect(!changes.isEmpty, "no gpio records")
        for change in changes where change["monitor"] != nil {
            let seq = try #require(change["seq"] as? Int)
            let cause = events.last { $0.seq < seq && $0.name == "\(change["monitor"]!)/\(change["identifier"]!)" }
            #expect(cause != nil, "gpio record \(seq) before its event")
        }
        // The start states every line's level (all off on a new state directory); after it, the
        // lines move for events only.
        let restored = changes.filter { $0["cause"] as? String == "restored" }
        #expect(Set(restored.compactMap { $0["output"] as? String }) == ["relay1", "relay2", "buzzer"] && restored.count == 3,
                "one restored record a line: \(restored)")
        #expect(restored.allSatisfy { $0["value"] as? Bool == false })
        func values(_ name: String) -> [Bool] {
            changes.filter { $0["output"] as? String == name && $0["cause"] as? String != "restored" }.compactMap { $0["value"] as? Bool }
        }
        #expect(values("relay1") == [true, false], "relay1 follows the fence")
        #expect(values("relay2") == [true], "relay2 latched on entry")
        // A pulse per cargo event; one that comes while a pulse runs (the agent's clock hurried by
        // the fast feed) extends it.
        let cargoEvents = events.filter { $0.name == "cargo/tag" }.count
        let pulses = values("buzzer").count / 2
        #expect(pulses >= 2 && pulses <= cargoEvents && values("buzzer") == Array(repeating: [true, false], count: pulses).flatMap { $0 },
                "buzzer \(values("buzzer")) for \(cargoEvents) cargo events")
        let gpio = Self.gpio(site.state)
        #expect(gpio["relay1"] == 0 && gpio["relay2"] == 1 && gpio["buzzer"] == 0, "\(gpio)")
        #expect(records.contains { $0["type"] as? String == "fix" }, "fixes are logged (privacy full)")

        // The latch holds until cleared, and the clear is logged.
        let cleared = try locus(["gpio", "clear", "relay2", "--state", site.state])
        #expect(cleared.status == 0 && cleared.output == "relay2: cleared\n", "\(cleared.error)")
        try Self.waitFor("relay2 off", seconds: 5) { Self.gpio(site.state)["relay2"] == 0 }
        let status = try locus(["status", "--state", site.state])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any])
        let gnss = try #require(object["gnss"] as? [String: Any])
        #expect((gnss["fixes"] as? Int ?? 0) >= 30)
        #expect(object["clock_follows_gnss"] as? Bool == true)

        // SIGTERM: outputs to their safe values, a stop record, exit 0.
        #expect(agent.stop() == 0)
        #expect(try Self.records(site.state).last?["type"] as? String == "stop")
        #expect(!FileManager.default.fileExists(atPath: site.state + "/control.sock"))
    }

    @Test func sigkillAndRestartRestoresGPIOFromTheLogBeforeAnyNewEvent() throws {
        let site = try Self.site("restart")
        let agent = try Self.start(site)
        // The track ends inside the fence: relay1 (level) and relay2 (latch) are on.
        let track = syntheticTrack(seconds: 20, startLatitude: 45.0, longitude: 7.0, speedMps: 10)
        let feeder = try Self.feed(site, nmea: track, hci: nil)
        feeder.waitUntilExit()
        try Self.waitFor("relay1 on", seconds: 10) { Self.gpio(site.state)["relay1"] == 1 }
        let before = Self.events(try Self.records(site.state))
        _ = agent.stop(signal: SIGKILL)
        // A power cut: the lines lose their levels.
        try "relay1 0\nrelay2 0\nbuzzer 0\n".write(toFile: site.state + "/sim/gpio", atomically: true, encoding: .utf8)

        let restarted = try Self.start(site)
        defer { _ = restarted.stop(signal: SIGKILL) }
        let gpio = Self.gpio(site.state)
        #expect(gpio["relay1"] == 1 && gpio["relay2"] == 1, "restored before the loop ran: \(gpio)")
        let records = try locus(["monitor", "road", "records", "--state", site.state])
        #expect(records.status == 0, "\(records.error)")
        #expect(records.output.contains("\"state\":\"satisfied\""), "\(records.output)")
        let after = Self.events(try Self.records(site.state))
        #expect(after.count == before.count, "no event was re-reported or lost across the restart")
        #expect(restarted.log.contains("gpio relay1 on (restored from the log)"), "\(restarted.log)")
    }

    @Test func controlSocketAddRemoveAndSighupReload() throws {
        let site = try Self.site("control")
        let agent = try Self.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let added = try locus(["monitor", "road", "add", "depot", "--circle", "45.01,7.0,50", "--assuming", "unsatisfied", "--state", site.state])
        #expect(added.status == 0 && added.output == "added road/depot\n", "\(added.error)")
        let identifiers = try locus(["monitor", "road", "identifiers", "--state", site.state])
        #expect(identifiers.output == "depot\nfence\n")
        let record = try locus(["monitor", "road", "record", "depot", "--state", site.state])
        #expect(record.output.contains("\"state\":\"unsatisfied\""), "\(record.output)")
        let missing = try locus(["monitor", "road", "remove", "nowhere", "--state", site.state])
        #expect(missing.status == 1 && missing.error.contains("no condition 'nowhere' in monitor 'road'"), "\(missing.error)")
        #expect(try locus(["monitor", "road", "remove", "depot", "--state", site.state]).output == "removed road/depot\n")

        // Malformed and oversized requests get a coded error, and the agent keeps serving.
        let socket = site.state + "/control.sock"
        let bad = try rawRequest(socket, "{\"op\": \"add\", \"monitor\": 5}\n")
        #expect(bad.contains("\"code\":\"bad_argument\""), "\(bad)")
        let broken = try rawRequest(socket, "{not json\n")
        #expect(broken.contains("\"code\":\"bad_request\""), "\(broken)")
        let huge = try rawRequest(socket, "{\"op\":\"hello\",\"pad\":\"" + String(repeating: "x", count: 5000) + "\"}\n")
        #expect(huge.contains("\"code\":\"too_large\""), "\(huge)")
        let hello = try rawRequest(socket, "{\"id\": 3, \"op\": \"hello\"}\n")
        #expect(hello.hasPrefix("{\"id\":3,\"ok\":true,\"protocol\":1"), "\(hello)")

        // Who may change and who may only read is the sockets' file modes.
        let readOnly = site.state + "/read.sock"
        func mode(_ path: String) throws -> Int { (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1 }
        #expect(try mode(socket) == 0o660 && mode(readOnly) == 0o666 && mode(site.state) == 0o750)
        #expect(try rawRequest(readOnly, "{\"id\":4,\"op\":\"identifiers\",\"monitor\":\"road\"}\n") == "{\"id\":4,\"ok\":true,\"identifiers\":[\"fence\"]}\n")
        // The test's user (root) has every grant on either socket; an unprivileged user's are AccessTests'.
        let readHello = try rawRequest(readOnly, "{\"id\":5,\"op\":\"hello\"}\n")
        #expect(readHello.contains("\"access\":[\"read\",\"positions\",\"change\"]"), "\(readHello)")

        // SIGHUP: a condition added to the site file appears; the agent keeps running.
        let extra = "\n[[monitor.road.condition]]\nid = \"yard\"\ncircle = { lat = 45.02, lon = 7.0, radius = 40.0 }\n"
        try (String(contentsOfFile: site.sitePath, encoding: .utf8) + extra).write(toFile: site.sitePath, atomically: true, encoding: .utf8)
        kill(agent.process.processIdentifier, SIGHUP)
        try Self.waitFor("the reload", seconds: 10) { agent.log.contains("reloaded:") }
        #expect(try locus(["monitor", "road", "identifiers", "--state", site.state]).output == "fence\nyard\n")
        // A broken file is refused and the running configuration kept.
        try "board = 5\n".write(toFile: site.sitePath, atomically: true, encoding: .utf8)
        kill(agent.process.processIdentifier, SIGHUP)
        try Self.waitFor("the refused reload", seconds: 10) { agent.log.contains("keeping the running configuration") }
        #expect(try locus(["monitor", "road", "identifiers", "--state", site.state]).output == "fence\nyard\n")
        #expect(agent.process.isRunning)
    }

    @Test func anUnwritableStateDirectoryMeansMonitoringInMemoryAndSaysSo() throws {
        let gnss = FileManager.default.temporaryDirectory.appendingPathComponent("locus-e2e-memory-\(getpid())/gnss").path
        let site = try Self.site("memory", board: "[board]\nname = \"memory\"\n[gnss]\ndevice = \"\(gnss)\"\n[gpio]\nsimulated = true\n" + Self.boardOutputs)
        // The state directory's parent is a regular file: it cannot be created.
        try "".write(toFile: site.directory + "/blocker", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try locusBinary())
        process.arguments = ["run", "--config", site.sitePath, "--state", site.directory + "/blocker/state"]
        let stderrPath = site.directory + "/agent.err"
        FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        let log = { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }
        try Self.waitFor("the agent to start", seconds: 20) { log().contains("running:") }
        let feeder = Process()
        feeder.executableURL = URL(fileURLWithPath: try locusBinary())
        let track = site.directory + "/track.nmea"
        try syntheticTrack(seconds: 25, startLatitude: 45.0, longitude: 7.0, speedMps: 10).write(toFile: track, atomically: true, encoding: .utf8)
        feeder.arguments = ["feed", "--nmea", track, "--gnss", site.directory + "/gnss", "--speed", "10", "--wait", "20"]
        feeder.standardError = FileHandle.nullDevice
        try feeder.run()
        feeder.waitUntilExit()
        try Self.waitFor("the fence event", seconds: 10) { log().contains("road/fence              satisfied") }
        #expect(log().contains("persistenceUnavailable: monitoring in memory only"), "\(log())")
        let event = log().split(separator: "\n").first { $0.contains("road/fence              satisfied") } ?? ""
        #expect(event.contains("[persistenceUnavailable]"), "\(event)")
        #expect(log().contains("gpio relay1 on (road/fence satisfied)"), "the GPIO sink still acts")
    }

    @Test func systemdHearsReadyWatchdogAndStoppingOnItsNotifySocket() throws {
        let site = try Self.site("notify")
        let socketPath = site.directory + "/notify.sock"
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(descriptor) }
        try #require(Self.withAddress(socketPath) { bind(descriptor, $0, $1) } == 0)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        func receive() -> String? {
            var buffer = [UInt8](repeating: 0, count: 512)
            let count = recv(descriptor, &buffer, buffer.count, 0)
            return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : nil
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try locusBinary())
        process.arguments = ["run", "--config", site.sitePath, "--state", site.state]
        // A 400 ms watchdog: the agent must say WATCHDOG=1 every 200 ms even with nothing to do.
        process.environment = ProcessInfo.processInfo.environment.merging(["NOTIFY_SOCKET": socketPath, "WATCHDOG_USEC": "400000"]) { $1 }
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        let ready = try #require(receive())
        #expect(ready.hasPrefix("READY=1"), "\(ready)")
        var watchdogs = 0
        let started = Date()
        while Date().timeIntervalSince(started) < 1.0, let message = receive() {
            if message == "WATCHDOG=1" { watchdogs += 1 }
        }
        #expect(watchdogs >= 3, "\(watchdogs) watchdog pings in 1 s with WatchdogSec 0.4 s")
        kill(process.processIdentifier, SIGHUP)
        var reloaded: [String] = []
        while let message = receive(), reloaded.count < 10 {
            if message != "WATCHDOG=1" { reloaded.append(message) }
            if message == "READY=1" { break }
        }
        #expect(reloaded == ["RELOADING=1", "READY=1"], "\(reloaded)")
        kill(process.processIdentifier, SIGTERM)
        var stopping = false
        while let message = receive() { if message == "STOPPING=1" { stopping = true; break } }
        #expect(stopping)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }

    @Test func privacyCoarsensOrDropsPositionsInTheLogAndTheExport() throws {
        for (setting, expectLatitude) in [("coarse", "45.000000000"), ("none", nil)] {
            let site = try Self.site("privacy-\(setting)", extra: "[privacy]\nfixes = \"\(setting)\"\n")
            let agent = try Self.start(site)
            defer { _ = agent.stop(signal: SIGKILL) }
            let feeder = try Self.feed(site, nmea: syntheticTrack(seconds: 25, startLatitude: 45.0, longitude: 7.0, speedMps: 10), hci: nil)
            feeder.waitUntilExit()
            try Self.waitFor("the fence event", seconds: 10) { Self.events(try Self.records(site.state)).count >= 2 }
            _ = agent.stop()
            let records = try Self.records(site.state)
            let fixes = records.filter { $0["type"] as? String == "fix" }
            let entered = try #require(Self.events(records).first { $0.state == "satisfied" })
            let explain = try #require(entered.event["explain"] as? [String: Any])
            // Positions the gateway was at: fix and event records (conditions carry their own centres).
            let export = try locus(["log", "export", "--state", site.state]).output.split(separator: "\n")
                .filter { $0.contains("\"type\":\"fix\"") || $0.contains("\"type\":\"event\"") }.joined(separator: "\n")
            if let expectLatitude {
                #expect(!fixes.isEmpty)
                for fix in fixes {
                    let latitude = try #require(fix["lat"] as? Double)
                    #expect(abs(latitude * 100 - (latitude * 100).rounded()) < 1e-6, "coarse fixes are on the 0.01° grid: \(latitude)")
                    #expect((fix["eph"] as? Double ?? 0) >= 1000)
                }
                #expect(export.contains("\"lat\":\(expectLatitude)"), "coarse event position")
                #expect(!export.contains("45.0017"), "no full-precision position anywhere")
            } else {
                #expect(fixes.isEmpty, "no fix records with fixes = none")
                #expect(explain["lat"] == nil && explain["edge_distance_m"] != nil, "the decision stays, the position goes: \(explain)")
                #expect(!export.contains("\"lat\""), "no position anywhere in the export")
            }
        }
    }

    @Test func hostileInputIsCountedAndTheAgentKeepsDeciding() throws {
        let site = try Self.site("hostile")
        let agent = try Self.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        // Every tenth sentence damaged (a flipped character, so its checksum fails), junk between
        // cycles, and LE Advertising Reports whose inner lengths lie, between good ones.
        var lines = syntheticTrack(seconds: 30, startLatitude: 45.0, longitude: 7.0, speedMps: 10).components(separatedBy: "\r\n")
        for index in stride(from: 5, to: lines.count, by: 10) {
            var bytes = Array(lines[index].utf8)
            bytes[10] = bytes[10] == UInt8(ascii: "1") ? UInt8(ascii: "2") : UInt8(ascii: "1")
            lines[index] = String(decoding: bytes, as: UTF8.self) + "\r\n\u{7}\u{0}garbage$GP,,*ZZ"
        }
        let hostile = [
            "043e2a02010001433ea2c96b6a1eff011a1aff4c000215e2c56db5dffb48d2b060d0f5a71096e000640000c5b3", // AD length past the end
            "043e0c02050001433ea2c96b6a1e0201",                                                           // 5 reports claimed, 1 partial
            "043e2a0201000143",                                                                           // truncated report
        ]
        var hci = ""
        for second in 5...12 {
            hci += "\(Self.trackStart + second).250 \(hostile[second % hostile.count])\n"
            hci += "\(Self.trackStart + second).500 \(Self.iBeaconEvent)\n"
        }
        let feeder = try Self.feed(site, nmea: lines.joined(separator: "\r\n"), hci: hci)
        feeder.waitUntilExit()
        try Self.waitFor("the fence to be entered", seconds: 10) {
            Self.events(try Self.records(site.state)).contains { $0.name == "road/fence" && $0.state == "satisfied" }
        }
        #expect(Self.events(try Self.records(site.state)).contains { $0.name == "cargo/tag" && $0.state == "satisfied" })
        let status = try locus(["status", "--state", site.state])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any])
        let gnss = try #require(object["gnss"] as? [String: Any])
        let bluetooth = try #require(object["bluetooth"] as? [String: Any])
        #expect((gnss["rejected"] as? Int ?? 0) >= 8, "damaged sentences are counted: \(gnss)")
        #expect((bluetooth["rejected_events"] as? Int ?? 0) >= 3, "malformed HCI events are counted: \(bluetooth)")
        #expect(agent.process.isRunning)
    }

    @Test func aMissingGPIOChipStopsTheStartWithTheReason() throws {
        let site = try Self.site("nochip", board: "[board]\nname = \"no chip\"\n[gpio]\nchip = \"gpiochip-absent\"\n" + Self.boardOutputs)
        let run = try locus(["run", "--config", site.sitePath, "--state", site.state])
        #expect(run.status == 1)
        #expect(run.error.contains("locus: run: cannot open GPIO chip gpiochip-absent: "), "\(run.error)")
        #expect(run.error.contains("gpiodetect"), "the error says what to check: \(run.error)")
        // The log records the attempt and its end: nothing half-started is left behind.
        #expect(try Self.records(site.state).last?["type"] as? String == "stop")
    }

    /// A control socket refused the connection: the reason, and the end of each agent log in the
    /// site's directory (the state directory's parent), since a refusal usually means the agent
    /// is gone.
    struct ConnectFailed: Error, CustomStringConvertible {
        var path: String
        var reason: String
        var description: String {
            let site = URL(fileURLWithPath: path).deletingLastPathComponent().deletingLastPathComponent().path
            let logs = ((try? FileManager.default.contentsOfDirectory(atPath: site)) ?? []).filter { $0.hasPrefix("agent-") }.sorted()
            let tails = logs.map { name in
                let text = (try? String(contentsOfFile: site + "/" + name, encoding: .utf8)) ?? ""
                return "\(name) ends: \(text.suffix(700).replacingOccurrences(of: "\n", with: " | "))"
            }
            return "cannot connect to \(path): \(reason); " + tails.joined(separator: "; ")
        }
    }

    /// A control-socket connection that reads JSON lines with a timeout.
    final class Connection {
        private(set) var descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var pending: [UInt8] = []

        init(_ path: String) throws {
            guard AgentEndToEndTests.withAddress(path, { connect(descriptor, $0, $1) }) == 0 else {
                throw ConnectFailed(path: path, reason: String(cString: strerror(errno)))
            }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit { hangUp() }

        func hangUp() {
            if descriptor >= 0 { close(descriptor) }
            descriptor = -1
        }

        func send(_ line: String) { _ = (line + "\n").withCString { Glibc.send(descriptor, $0, strlen($0), 0) } }

        /// The next line as a JSON object, or nil on timeout or hang-up.
        func next() -> [String: Any]? {
            while true {
                if let newline = pending.firstIndex(of: 0x0A) {
                    let line = Data(pending[..<newline])
                    pending.removeFirst(newline + 1)
                    return try? JSONSerialization.jsonObject(with: line) as? [String: Any]
                }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count <= 0 { return nil }
                pending += buffer[0..<count]
            }
        }

        func request(_ line: String) -> [String: Any]? {
            send(line)
            while let message = next() { if message["event"] == nil { return message } }
            return nil
        }

        /// The next streamed event's (seq, "identifier state").
        func event() -> (Int, String)? {
            while let message = next() {
                if let event = message["event"] as? [String: Any], let seq = event["seq"] as? Int {
                    return (seq, "\(event["identifier"] as? String ?? "") \(event["state"] as? String ?? "")")
                }
            }
            return nil
        }
    }

    @Test func aConsumerThatPausesResumesWithWhatItMissedInOrderWithoutDuplicates() throws {
        let site = try Self.site("consumer")
        var agent = try Self.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let socket = site.state + "/control.sock"
        let first = try Connection(socket)
        #expect(first.request("{\"id\":1,\"op\":\"open\",\"monitor\":\"road\"}")?["consumer_seq"] as? Int == 0)
        let second = try Connection(socket)
        let refused = second.request("{\"id\":1,\"op\":\"open\",\"monitor\":\"road\"}")
        #expect((refused?["error"] as? [String: Any])?["code"] as? String == "in_use", "one open instance per name: \(String(describing: refused))")
        #expect(first.request("{\"id\":2,\"op\":\"subscribe\",\"monitor\":\"road\",\"consumer\":true}")?["ok"] as? Bool == true)

        let feeder = try Self.feed(site, nmea: syntheticTrack(seconds: 30, startLatitude: 45.0, longitude: 7.0, speedMps: 10), hci: nil)
        feeder.waitUntilExit()
        // The consumer takes one event, then stops iterating (disconnects) with two more pending.
        let taken = try #require(first.event())
        #expect(taken.1 == "fence unsatisfied")
        #expect(first.request("{\"id\":3,\"op\":\"ack\",\"monitor\":\"road\",\"seq\":\(taken.0)}")?["consumer_seq"] as? Int == taken.0)
        try Self.waitFor("the fence to be left", seconds: 10) { Self.events(try Self.records(site.state)).count >= 3 }
        first.hangUp()

        // Resuming, even across an agent restart: what was missed, in order, and nothing taken.
        _ = agent.stop()
        agent = try Self.start(site)
        let resumed = try Connection(socket)
        #expect(resumed.request("{\"id\":1,\"op\":\"open\",\"monitor\":\"road\"}")?["consumer_seq"] as? Int == taken.0)
        #expect(resumed.request("{\"id\":2,\"op\":\"subscribe\",\"monitor\":\"road\",\"consumer\":true}")?["after_seq"] as? Int == taken.0)
        let missed = [resumed.event(), resumed.event()].compactMap { $0 }
        #expect(missed.map { $0.1 } == ["fence satisfied", "fence unsatisfied"], "\(missed)")
        #expect(missed.allSatisfy { $0.0 > taken.0 } && missed.map { $0.0 } == missed.map { $0.0 }.sorted())
    }

    @Test func anIdleAgentSleepsUntilSomethingArrives() throws {
        let site = try Self.site("idle")
        let agent = try Self.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        // Both ports open, nothing written: the loop must not wake at all.
        let feeder = try Self.feed(site, nmea: "\r\n", hci: "", linger: 8)
        defer { feeder.terminate(); feeder.waitUntilExit() }
        try Self.waitFor("the ports to open", seconds: 10) { agent.log.contains("reading the HCI feed") && agent.log.contains("gnss: reading") }
        // The beacon condition is decided (unseen for its 3 s exit timeout) and its pulse ends;
        // after that no timer is due.
        try Self.waitFor("the tag's timeout and pulse", seconds: 10) { agent.log.contains("gpio buzzer off") }
        let first = try Self.contextSwitches(agent.process.processIdentifier)
        sleep(3)
        let second = try Self.contextSwitches(agent.process.processIdentifier)
        #expect(second - first == 0, "the idle agent woke \(second - first) times in 3 s")
    }

    static func contextSwitches(_ pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        var total = 0
        for line in status.split(separator: "\n") where line.hasPrefix("voluntary_ctxt_switches") {
            total += Int(line.split(separator: "\t").last.map(String.init)?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
        }
        return total
    }

    static func canConnect(_ path: String) -> Bool {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        return withAddress(path) { connect(descriptor, $0, $1) } == 0
    }

    /// Calls `body` with `path` as a Unix socket address (for bind or connect).
    static func withAddress(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() where index < raw.count - 1 { raw[index] = byte }
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// One request over the control socket with plain sockets; returns the reply line.
    func rawRequest(_ path: String, _ text: String) throws -> String {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        #expect(Self.withAddress(path) { connect(descriptor, $0, $1) } == 0)
        _ = text.withCString { send(descriptor, $0, strlen($0), 0) }
        var reply = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while !reply.contains(0x0A) {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { break }
            reply += buffer[0..<count]
        }
        return String(decoding: reply, as: UTF8.self)
    }
}
