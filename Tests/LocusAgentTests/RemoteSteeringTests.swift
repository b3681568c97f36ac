import AllocCounter
import Foundation
import LocusAgent
import Testing
import TestSupport

/// The fleet steering a gateway (docs/remote.md), end to end: `locus run` on the simulated board
/// with `[uplink]` to a real broker (Debian's mosquitto on 127.0.0.1) and `[remote]`; the fleet's
/// messages signed by OpenSSL (`openssl dgst -sha256 -sign`, the outside reference for the
/// agent's mbedTLS check) and published with mosquitto_pub; what the gateway did read back from
/// its log and from what its uplink published.
@Suite(.serialized) struct RemoteSteeringTests {
    static let gateway = UplinkAgentTests.gateway

    /// An EC P-256 key pair made by openssl: (private, public) paths.
    static func keyPair(_ directory: String, _ name: String) throws -> (String, String) {
        let key = "\(directory)/\(name).key", pub = "\(directory)/\(name).pub"
        try run("/usr/bin/openssl", ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key])
        try run("/usr/bin/openssl", ["ec", "-in", key, "-pubout", "-out", pub])
        return (key, pub)
    }

    @discardableResult
    static func run(_ path: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else { throw TestBroker.BrokerError("\(path) \(arguments.joined(separator: " ")): \(text)") }
        return text
    }

    /// `body` with its signature line, signed with `key` by openssl.
    static func signed(_ body: String, key: String, directory: String) throws -> String {
        let bodyPath = directory + "/body-\(UUID().uuidString.prefix(8))"
        try body.write(toFile: bodyPath, atomically: true, encoding: .utf8)
        try run("/usr/bin/openssl", ["dgst", "-sha256", "-sign", key, "-out", bodyPath + ".sig", bodyPath])
        let signature = try Data(contentsOf: URL(fileURLWithPath: bodyPath + ".sig")).base64EncodedString()
        return body + "# locus-signature: ecdsa-p256-sha256 \(signature)\n"
    }

    static func config(_ version: Int, gateway: String = gateway, _ fragment: String) -> String {
        "\(fragment)\n\n[fleet]\nkind = \"config\"\ngateway = \"\(gateway)\"\nversion = \(version)\nissued = \"2026-11-28T15:00:00Z\"\n"
    }

    static func command(_ id: String, expires: Int, output: String = "buzzer", gateway: String = gateway) -> String {
        "[fleet]\nkind = \"command\"\ngateway = \"\(gateway)\"\nid = \"\(id)\"\nexpires = \(expires)\n\n[command]\naction = \"pulse\"\noutput = \"\(output)\"\nduration = \"200ms\"\n"
    }

    static func publish(_ message: String, topic: String, retain: Bool, port: UInt16, directory: String) throws {
        let path = directory + "/message-\(UUID().uuidString.prefix(8))"
        try message.write(toFile: path, atomically: true, encoding: .utf8)
        try run("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", "\(port)", "-q", "1"] + (retain ? ["-r"] : []) + ["-t", topic, "-f", path])
    }

    /// The log's remote records, oldest first.
    static func remoteRecords(_ site: AgentEndToEndTests.Site) throws -> [[String: Any]] {
        try locus(["log", "export", "--state", site.state]).output.split(separator: "\n").compactMap { line in
            guard let record = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], record["type"] as? String == "remote" else { return nil }
            return record
        }
    }

    static func status(_ site: AgentEndToEndTests.Site) throws -> [String: Any] {
        let output = try locus(["status", "--state", site.state]).output
        return (try? JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]) ?? [:]
    }

    static let yard = """
        [[monitor.yard.condition]]
        id = "gate"
        circle = { lat = 45.5, lon = 7.5, radius = 40.0 }
        """

    /// Applying a configuration allocates (the site is read and checked again); the loop's turns
    /// after it, with a fix and an event each, allocate nothing.
    @Test func theTurnsAfterAnApplyAllocateNothing() throws {
        let broker = try TestBroker(listeners: [[]])
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locus-remote-turn-\(getpid())").path
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        unsetenv("WATCHDOG_USEC")
        let (key, publicKey) = try Self.keyPair(directory, "fleet")
        let bench = try #require(AgentBenchmark(directory: directory + "/bench", brokerPort: Int(broker.ports[0]), remoteKey: publicKey))
        for _ in 0..<50 where !bench.uplinkConnected { bench.turn() }
        #expect(bench.uplinkConnected)
        let fragment = "[[monitor.bench.condition]]\nid = \"fence\"\ncircle = { lat = 45.0, lon = 7.0, radius = 100.0 }\nexit_margin = 0.0\n"
            + "dwell = \"0s\"\naccuracy_gate = false\n[[monitor.bench.condition]]\nid = \"yard\"\ncircle = { lat = 45.1, lon = 7.0, radius = 50.0 }\n"
        let message = try Self.signed(Self.config(1, gateway: "bench", fragment), key: key, directory: directory)
        try Self.publish(message, topic: "locus/bench/remote/config", retain: true, port: broker.ports[0], directory: directory)
        for _ in 0..<50 where bench.remoteApplied == 0 { bench.turn() }
        #expect(bench.remoteApplied == 1 && bench.conditions == 2)
        let epoch = GeocodingAgentTests.fenceEpoch
        for second in 0..<20 {
            bench.write(epoch(second))
            bench.turn()
        }
        let events = bench.events
        var counted = 0
        for second in 20..<60 {
            bench.write(epoch(second))
            counted += allocations { bench.turn() }
        }
        #expect(bench.events - events == 40, "an event every turn")
        #expect(counted == 0, "\(counted) allocations in 40 turns after the apply")
    }

    @Test func signedConfigurationsApplyWholeRefusalsChangeNothingAndCommandsRunOnce() throws {
        let broker = try TestBroker(listeners: [[]])
        let port = broker.ports[0]
        let prefix = "locus/\(Self.gateway)"
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("locus-remote-keys-\(getpid())").path
        try? FileManager.default.removeItem(atPath: scratch)
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (fleetKey, fleetPublic) = try Self.keyPair(scratch, "fleet")
        let (otherKey, _) = try Self.keyPair(scratch, "other")
        let remote = "\n[remote]\nkey = \"\(fleetPublic)\"\nsettable = [\"monitor\", \"action\"]\ncommands = [\"pulse\"]\n"
        let site = try UplinkAgentTests.site("remote", broker: "mqtt://127.0.0.1:\(port)", uplinkExtra: remote)
        defer { try? FileManager.default.removeItem(atPath: site.directory) }
        // The state directory named in the file too, for check-config.
        let text = try String(contentsOfFile: site.sitePath, encoding: .utf8)
        try ("state_dir = \"state\"\n" + text).write(toFile: site.sitePath, atomically: true, encoding: .utf8)
        let collector = try TestCollector(port: port, filters: ["\(prefix)/config", "\(prefix)/command"])
        var agent = try UplinkAgentTests.startAgent(site)
        func results(_ count: Int) -> [[String: Any]] {
            _ = collector.wait(seconds: 20) { $0.count >= count }
            return collector.messages.compactMap { $0.json }
        }
        func publishConfig(_ version: Int, _ fragment: String, key: String? = nil, gateway: String = Self.gateway) throws {
            try Self.publish(try Self.signed(Self.config(version, gateway: gateway, fragment), key: key ?? fleetKey, directory: scratch),
                             topic: "\(prefix)/remote/config", retain: true, port: port, directory: scratch)
        }

        // Version 1 replaces the site's monitors with one: applied, logged, published.
        try publishConfig(1, Self.yard)
        var published = results(1)
        #expect(published.first?["version"] as? Int == 1 && published.first?["result"] as? String == "applied", "\(published); \(agent.log)")
        #expect((try Self.status(site)["engine"] as? [String: Any])?["conditions"] as? Int == 1, "\(agent.log)")
        // The retained copy again, at a reconnection or republished: nothing new.
        try publishConfig(1, Self.yard)

        // Refused, each with its reason, none changing anything.
        try publishConfig(2, Self.yard + "\n[monitr.x]\n")
        try publishConfig(3, "[uplink]\nbroker = \"mqtt://127.0.0.1:1\"\n")
        try publishConfig(4, Self.yard, key: otherKey)
        try publishConfig(5, Self.yard, gateway: "gw-other")
        published = results(5)
        let reasons = published.dropFirst().map { ($0["version"] as? Int ?? -1, $0["result"] as? String ?? "", $0["reason"] as? String ?? "") }
        #expect(reasons.count == 4, "\(published)")
        if reasons.count == 4 {
            #expect(reasons[0].0 == 2 && reasons[0].1 == "refused" && reasons[0].2.contains("unknown key 'monitr' (did you mean 'monitor'?)"), "\(reasons[0])")
            #expect(reasons[1].0 == 3 && reasons[1].2.contains("'uplink' cannot be set by the fleet"), "\(reasons[1])")
            #expect(reasons[2].1 == "refused" && reasons[2].2.contains("does not verify"), "\(reasons[2])")
            #expect(reasons[3].0 == 5 && reasons[3].2.contains("for gateway 'gw-other'"), "\(reasons[3])")
        }
        #expect((try Self.status(site)["engine"] as? [String: Any])?["conditions"] as? Int == 1)

        // Version 7, then an older one replayed.
        try publishConfig(7, Self.yard + "\n[[monitor.yard.condition]]\nid = \"dock\"\ncircle = { lat = 45.6, lon = 7.5, radius = 40.0 }\n")
        try publishConfig(6, Self.yard)
        published = results(7)
        #expect(published.count == 7 && published[5]["version"] as? Int == 7 && published[5]["result"] as? String == "applied", "\(published)")
        #expect(published.count == 7 && (published[6]["reason"] as? String ?? "").contains("older than the applied version 7"), "\(published)")
        #expect((try Self.status(site)["engine"] as? [String: Any])?["conditions"] as? Int == 2)

        // A pulse, delivered twice: run once. An expired one and one for an output the board lacks.
        let now = Int(Date().timeIntervalSince1970)
        let pulse = try Self.signed(Self.command("c-1", expires: now + 600), key: fleetKey, directory: scratch)
        for _ in 0..<2 { try Self.publish(pulse, topic: "\(prefix)/remote/command", retain: false, port: port, directory: scratch) }
        try Self.publish(try Self.signed(Self.command("c-2", expires: now - 60), key: fleetKey, directory: scratch),
                         topic: "\(prefix)/remote/command", retain: false, port: port, directory: scratch)
        try Self.publish(try Self.signed(Self.command("c-3", expires: now + 600, output: "relay9"), key: fleetKey, directory: scratch),
                         topic: "\(prefix)/remote/command", retain: false, port: port, directory: scratch)
        published = results(10)
        let commands = published.filter { $0["id"] != nil }.map { ($0["id"] as? String ?? "", $0["result"] as? String ?? "", $0["reason"] as? String ?? "") }
        #expect(commands.map { $0.0 } == ["c-1", "c-2", "c-3"], "\(published); \(agent.log)")
        #expect(commands.map { $0.1 } == ["done", "refused", "failed"], "\(commands)")
        #expect(commands.count == 3 && commands[1].2.contains("expired"), "\(commands)")
        let gpio = try locus(["log", "export", "--state", site.state]).output.split(separator: "\n").filter { $0.contains("\"buzzer\"") && $0.contains("pulse-start") }
        #expect(gpio.count == 1, "\(gpio)")

        // A restart runs version 7 again from remote.toml, with no new record; the same command
        // delivered again after it is still not run twice.
        #expect(agent.stop() == 0)
        let before = try Self.remoteRecords(site).count
        agent = try UplinkAgentTests.startAgent(site)
        try Self.publish(pulse, topic: "\(prefix)/remote/command", retain: false, port: port, directory: scratch)
        Thread.sleep(forTimeInterval: 2)
        #expect((try Self.status(site)["engine"] as? [String: Any])?["conditions"] as? Int == 2, "\(agent.log)")
        #expect((try Self.status(site)["remote"] as? [String: Any])?["applied_version"] as? Int == 7)
        let after = try Self.remoteRecords(site)
        #expect(after.count == before, "\(after)")
        #expect(agent.stop() == 0)
        let check = try locus(["check-config", site.sitePath])
        #expect(check.status == 0 && check.output.contains("remote: the fleet's configuration version 7 (") && check.output.contains("replaces monitor: "),
                "\(check.output)\(check.error)")
    }

    static func command(_ id: String, expires: Int, _ keys: String, gateway: String = gateway) -> String {
        "[fleet]\nkind = \"command\"\ngateway = \"\(gateway)\"\nid = \"\(id)\"\nexpires = \(expires)\n\n[command]\n\(keys)\n"
    }

    /// The commands that take time (a beacon snapshot, a location) and the others (a latch set and
    /// cleared, a range of the log published again), each answered by one record with what it
    /// found; then a configuration that changes [updates], which the agent applies by restarting.
    @Test func snapshotLocateSetAndRepublishAnswerWithWhatTheyFound() throws {
        let broker = try TestBroker(listeners: [[]])
        let port = broker.ports[0]
        let prefix = "locus/\(Self.gateway)"
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("locus-remote-commands-\(getpid())").path
        try? FileManager.default.removeItem(atPath: scratch)
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (fleetKey, fleetPublic) = try Self.keyPair(scratch, "fleet")
        let remote = "\n[remote]\nkey = \"\(fleetPublic)\"\nsettable = [\"monitor\", \"updates\"]\n"
            + "commands = [\"set\", \"locate\", \"snapshot\", \"republish\"]\n"
        let site = try UplinkAgentTests.site("commands", broker: "mqtt://127.0.0.1:\(port)", uplinkExtra: remote)
        defer { try? FileManager.default.removeItem(atPath: site.directory) }
        let collector = try TestCollector(port: port, filters: ["\(prefix)/config", "\(prefix)/command"])
        var agent = try UplinkAgentTests.startAgent(site)
        let expires = Int(Date().timeIntervalSince1970) + 600
        func send(_ id: String, _ keys: String) throws {
            try Self.publish(try Self.signed(Self.command(id, expires: expires, keys), key: fleetKey, directory: scratch),
                             topic: "\(prefix)/remote/command", retain: false, port: port, directory: scratch)
        }
        func answer(_ id: String) -> [String: Any]? {
            _ = collector.wait(seconds: 20) { messages in messages.contains { $0.json?["id"] as? String == id } }
            return collector.messages.compactMap { $0.json }.first { $0["id"] as? String == id }
        }
        // Fixes and the test beacon for 300 s of track, played 10 times faster.
        let feeder = try AgentEndToEndTests.feed(site, nmea: syntheticTrack(seconds: 300, startLatitude: 45.0, longitude: 7.0, speedMps: 1),
                                                 hci: AgentEndToEndTests.sightings(from: 0, to: 299))
        defer { feeder.terminate() }
        try AgentEndToEndTests.waitFor("fixes", seconds: 20) {
            ((try Self.status(site)["gnss"] as? [String: Any])?["fixes"] as? Int ?? 0) > 3
        }

        // A snapshot of 2 s; a locate sent while it ranges fails (one at a time), then one after it
        // answers with the last fix.
        try send("c-snap", "action = \"snapshot\"\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nduration = \"2s\"")
        try send("c-busy", "action = \"locate\"\ntimeout = \"10s\"")
        let busy = try #require(answer("c-busy"), "\(agent.log)")
        #expect(busy["result"] as? String == "failed" && (busy["reason"] as? String ?? "").contains("c-snap (snapshot) is under way"), "\(busy)")
        let snapshot = try #require(answer("c-snap"), "\(agent.log)")
        #expect(snapshot["result"] as? String == "done", "\(snapshot)")
        let beacons = (snapshot["detail"] as? [String: Any])?["beacons"] as? [[String: Any]] ?? []
        #expect(beacons.count == 1 && beacons.first?["major"] as? Int == 100 && beacons.first?["minor"] as? Int == 0, "\(snapshot)")
        try send("c-where", "action = \"locate\"\ntimeout = \"10s\"")
        let located = try #require(answer("c-where"), "\(agent.log)")
        let fix = (located["detail"] as? [String: Any])?["fix"] as? [String: Any] ?? [:]
        #expect(located["result"] as? String == "done" && abs((fix["lat"] as? Double ?? 0) - 45.0) < 0.01, "\(located)")

        // A latch set, then cleared: each logged before the line moves, and the line follows.
        try send("c-on", "action = \"set\"\noutput = \"relay1\"\nvalue = \"on\"")
        #expect(answer("c-on")?["result"] as? String == "done")
        #expect(((try Self.status(site)["gpio"] as? [String: Any])?["relay1"] as? Int) == 1, "\(agent.log)")
        try send("c-off", "action = \"set\"\noutput = \"relay1\"\nvalue = \"off\"")
        #expect(answer("c-off")?["result"] as? String == "done")
        #expect(((try Self.status(site)["gpio"] as? [String: Any])?["relay1"] as? Int) == 0)
        let latches = try locus(["log", "export", "--state", site.state]).output.split(separator: "\n")
            .filter { $0.contains("\"relay1\"") && $0.contains("latch-") }.map { $0.contains("latch-set") ? "set" : "cleared" }
        #expect(latches.first == "set" && latches.last == "cleared", "\(latches)")

        // The snapshot's record published again: the same seq and contents, no "prev".
        let seq = try #require(snapshot["seq"] as? Int)
        try send("c-again", "action = \"republish\"\nfrom = \(seq)\nto = \(seq)")
        let again = try #require(answer("c-again"))
        #expect((again["detail"] as? [String: Any])?["through"] as? Int == seq, "\(again)")
        _ = collector.wait(seconds: 10) { $0.filter { $0.json?["id"] as? String == "c-snap" }.count >= 2 }
        let copies = collector.messages.compactMap { $0.json }.filter { $0["id"] as? String == "c-snap" }
        #expect(copies.count == 2 && copies[1]["seq"] as? Int == seq && copies[1]["prev"] is NSNull, "\(copies)")
        #expect((copies.last?["detail"] as? [String: Any])?["beacons"] != nil)

        // [updates] from the fleet: applied, then the agent stops to be restarted (status 75), and
        // starts with the fleet's preset.
        try Self.publish(try Self.signed(Self.config(1, "[updates]\npreset = \"fitness\"\n"), key: fleetKey, directory: scratch),
                         topic: "\(prefix)/remote/config", retain: true, port: port, directory: scratch)
        let deadline = Date().addingTimeInterval(20)
        while agent.process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        #expect(!agent.process.isRunning && agent.process.terminationStatus == 75, "\(agent.log)")
        #expect(agent.log.contains("which a restart applies"), "\(agent.log)")
        agent = try UplinkAgentTests.startAgent(site)
        #expect((try Self.status(site)["updates"] as? [String: Any])?["preset"] as? String == "fitness", "\(agent.log)")
        #expect(agent.stop() == 0, "\(agent.log)")
    }
}
