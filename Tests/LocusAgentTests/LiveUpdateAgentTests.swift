import Foundation
import Testing

/// Live updates from a running agent (the `updates` op, `locus updates`), with pseudo-terminal
/// NMEA: positions as sent, stationary pause and resume, visits in the stream and the log, the
/// motion input, privacy.
@Suite(.serialized) struct LiveUpdateAgentTests {
    typealias E2E = AgentEndToEndTests

    /// Stationary after 10 s, visits from 5 s, the simulated board's motion input.
    static let updates = "[updates]\nstationary_window = \"10s\"\nvisit_minimum = \"5s\"\nmotion_input = \"motion\"\n"

    /// Reads stream lines until `stop` says so or the agent goes quiet for 10 s.
    static func collect(_ connection: E2E.Connection, until stop: ([String: Any]) -> Bool) -> [[String: Any]] {
        var lines: [[String: Any]] = []
        while let line = connection.next() {
            lines.append(line)
            if stop(line) { break }
        }
        return lines
    }

    @Test func aStreamCarriesTheFixesPausesWhenStationaryResumesAndReportsTheVisit() throws {
        let site = try E2E.site("updates-stream", extra: Self.updates)
        let agent = try E2E.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let connection = try E2E.Connection(site.state + "/control.sock")
        let reply = try #require(connection.request("{\"id\":1,\"op\":\"updates\",\"preset\":\"fitness\",\"accuracy\":\"best\"}"))
        #expect(reply["ok"] as? Bool == true && reply["preset"] as? String == "fitness" && reply["accuracy"] as? String == "best")
        #expect(reply["radios"] as? String == "best", "a finer tier than the site's raises the radios: \(reply)")

        // 20 s north at 10 m/s, 30 s standing, 20 s north again (fix times; played at 10x).
        let track = segmentedTrack([(20, 10), (30, 0), (20, 10)], startLatitude: 45.0, longitude: 7.0)
        let feeder = try E2E.feed(site, nmea: track, hci: nil)
        // Until the first update after the visit's departure (reported as movement resumes).
        var visited = false
        let lines = Self.collect(connection) { line in
            if let visit = line["visit"] as? [String: Any], !(visit["departure"] is NSNull) { visited = true }
            return visited && line["update"] != nil
        }
        feeder.waitUntilExit()
        let updates = lines.compactMap { $0["update"] as? [String: Any] }
        let visits = lines.compactMap { $0["visit"] as? [String: Any] }
        // Twice, as CLVisit: at arrival once the stay lasted visit_minimum (5 s), departure null...
        let arrival = try #require(visits.first, "an arrival during the stop: \(lines.suffix(3))")
        #expect(arrival["departure"] is NSNull && visits.count == 2, "\(visits)")
        let arrivalIndex = try #require(lines.firstIndex { $0["visit"] != nil })
        let reportedAt = try #require(lines[..<arrivalIndex].compactMap { $0["update"] as? [String: Any] }.last.flatMap(second))
        #expect((24...34).contains(reportedAt), "the arrival comes during the stop, not after it: after second \(reportedAt)")
        // ...and at departure, with both times.
        let visit = try #require(visits.last)
        #expect(visit["arrival"] as? String == arrival["arrival"] as? String)

        // Every position is the one sent: second n of the track, to the NMEA's 1e-7 minute.
        func second(_ update: [String: Any]) -> Int? {
            guard let time = update["time"] as? String, time.hasPrefix("2024-03-15T10:") else { return nil }
            let parts = time.dropFirst(14).prefix(5).split(separator: ":")
            return Int(parts[0])! * 60 + Int(parts[1])!
        }
        func expectedLatitude(_ second: Int) -> Double {
            45.0 + Double(min(second, 20)) * 10 / 111_132.0 + Double(max(0, second - 50)) * 10 / 111_132.0
        }
        var checked = 0
        for update in updates {
            guard let second = second(update), let latitude = update["lat"] as? Double else { continue }
            #expect(abs(latitude - expectedLatitude(second)) < 1e-8, "second \(second): \(latitude)")
            #expect(update["class"] as? String == "TPV" && update["mode"] as? Int == 3)
            checked += 1
        }
        #expect(checked >= 20, "positions checked: \(checked)")

        // Paused once, standing: one update says so, none follow until the movement.
        let stationary = updates.filter { $0["isStationary"] as? Bool == true }
        #expect(stationary.count == 1, "one stationary update: \(stationary)")
        let pausedAt = try #require(stationary.first.flatMap(second))
        #expect((28...34).contains(pausedAt), "stationary 10 s after stopping at 20 s: \(pausedAt)")
        #expect((stationary.first?["diagnostics"] as? [String])?.contains("stationary") == true)
        let after = updates.compactMap(second).filter { $0 > pausedAt }
        let resumedAt = try #require(after.first, "updates again after moving")
        #expect((50...54).contains(resumedAt), "resumed within the two confirming fixes after 50 s: \(resumedAt)")

        // The visit: arrival about 20 s, departure about 49 s, at the stop.
        #expect((visit["arrival"] as? String).map { $0 >= "2024-03-15T10:00:19" && $0 <= "2024-03-15T10:00:22" } == true, "\(visit)")
        #expect((visit["departure"] as? String).map { $0 >= "2024-03-15T10:00:48" && $0 <= "2024-03-15T10:00:51" } == true, "\(visit)")
        #expect(abs((visit["lat"] as? Double ?? 0) - expectedLatitude(20)) < 1e-5)

        // The log has the same visit, and the agent has gone back to the site's tier once the
        // stream closed.
        connection.hangUp()
        try E2E.waitFor("two visit records", seconds: 10) { try E2E.records(site.state).filter { $0["type"] as? String == "visit" }.count == 2 }
        let logged = try E2E.records(site.state).filter { $0["type"] as? String == "visit" }
        // The log's are the site updater's (default preset: its own stationary radius): one visit,
        // reported at arrival and at departure with the same arrival, at the same stop as the
        // stream's (which fix opened the stay may differ by one between the two updaters when
        // the agent runs slowly, as under qemu).
        #expect(logged[0]["departure"] is NSNull && logged[1]["departure"] is String, "\(logged)")
        #expect(logged[0]["arrival"] as? String == logged[1]["arrival"] as? String, "\(logged)")
        #expect((logged[0]["arrival"] as? String).map { $0 >= "2024-03-15T10:00:19" && $0 <= "2024-03-15T10:00:22" } == true, "\(logged) \(visit)")
        // The `visits` operation reads them back (what a program does after a restart).
        let reader = try E2E.Connection(site.state + "/read.sock")
        let read = try #require(reader.request("{\"id\":9,\"op\":\"visits\"}"))
        let readVisits = try #require(read["visits"] as? [[String: Any]], "\(read)")
        #expect(readVisits.count == 2 && readVisits[0]["departure"] is NSNull && readVisits[1]["departure"] as? String == logged[1]["departure"] as? String, "\(readVisits)")
        #expect((readVisits[0]["seq"] as? Int ?? 0) < (readVisits[1]["seq"] as? Int ?? 0))
        let newest = try #require(reader.request("{\"id\":10,\"op\":\"visits\",\"limit\":1}")?["visits"] as? [[String: Any]])
        #expect(newest.count == 1 && newest[0]["seq"] as? Int == readVisits[1]["seq"] as? Int)
        let cli = try locus(["visits", "--state", site.state])
        #expect(cli.status == 0 && cli.output.split(separator: "\n").count == 2, "\(cli.output)\(cli.error)")
        let status = try locus(["status", "--state", site.state])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any])
        let updatesStatus = try #require(object["updates"] as? [String: Any])
        #expect(updatesStatus["radios"] as? String == "hundredMeters" && updatesStatus["streams"] as? Int == 0, "\(updatesStatus)")
    }

    @Test func theMotionInputWakesThePausedReceiverAndTheCommandLinePrintsAnUpdate() throws {
        let site = try E2E.site("updates-motion", extra: Self.updates)
        let agent = try E2E.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        // `locus updates` without --follow: the first update, then it exits.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try locusBinary())
        process.arguments = ["updates", "--state", site.state, "--config", "automotiveNavigation"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        try E2E.waitFor("the updates stream", seconds: 10) {
            let status = try locus(["status", "--state", site.state]).output
            return status.contains("\"streams\":1")
        }
        let feeder = try E2E.feed(site, nmea: segmentedTrack([(10, 10), (30, 0)], startLatitude: 45.0, longitude: 7.0), hci: nil)
        process.waitUntilExit()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 0)
        #expect(printed.split(separator: "\n").count == 1 && printed.hasPrefix("{\"class\":\"TPV\""), "\(printed)")

        func updatesStatus() throws -> [String: Any] {
            let status = try locus(["status", "--state", site.state])
            let object = try JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any]
            return object?["updates"] as? [String: Any] ?? [:]
        }
        try E2E.waitFor("the pause", seconds: 20) { try updatesStatus()["stationary"] as? Bool == true }
        #expect(try updatesStatus()["pause"] as? String == "paused")
        // The ignition comes on: the receiver is woken and held awake.
        try "1\n".write(toFile: site.state + "/sim/input-motion", atomically: false, encoding: .utf8)
        try E2E.waitFor("the motion wake", seconds: 10) { try updatesStatus()["motion_wakes"] as? Int == 1 }
        #expect(try updatesStatus()["pause"] as? String == "held awake (motion input)")
        let log = try String(contentsOfFile: agent.stderrPath, encoding: .utf8)
        #expect(log.contains("waking the receiver (motion input)"), "\(log.suffix(600))")
        feeder.waitUntilExit()
    }

    @Test func privacyAndTheReadOnlySocketDecideWhoGetsPositions() throws {
        let site = try E2E.site("updates-privacy", extra: "[privacy]\nfixes = \"none\"\n")
        let agent = try E2E.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let refused = try E2E.Connection(site.state + "/read.sock").request("{\"id\":1,\"op\":\"updates\"}")
        #expect((refused?["error"] as? [String: Any])?["code"] as? String == "permission_denied", "\(String(describing: refused))")
        _ = agent.stop()

        let open = try E2E.site("updates-readonly", extra: "[privacy]\nfixes = \"coarse\"\n")
        let second = try E2E.start(open)
        defer { _ = second.stop(signal: SIGKILL) }
        let connection = try E2E.Connection(open.state + "/read.sock")
        let reply = connection.request("{\"id\":1,\"op\":\"updates\",\"accuracy\":\"kilometer\"}")
        #expect(reply?["ok"] as? Bool == true && reply?["coarse"] as? Bool == true, "reading updates is reading: \(String(describing: reply))")
        let bad = connection.request("{\"id\":2,\"op\":\"updates\",\"preset\":\"walking\"}")
        #expect((bad?["error"] as? [String: Any])?["code"] as? String == "bad_argument")
        let feeder = try E2E.feed(open, nmea: syntheticTrack(seconds: 10, startLatitude: 45.0012, longitude: 7.0, speedMps: 10), hci: nil)
        let update = try #require(Self.collect(connection) { $0["update"] != nil && ($0["update"] as? [String: Any])?["lat"] != nil }.last?["update"] as? [String: Any])
        feeder.waitUntilExit()
        let latitude = try #require(update["lat"] as? Double)
        #expect(abs(latitude * 100 - (latitude * 100).rounded()) < 1e-6, "coarse: on the 0.01° grid: \(latitude)")
        #expect((update["eph"] as? Double ?? 0) >= 1000 && update["speed"] == nil, "\(update)")
    }

    // MARK: significant change

    /// A stream with `significant_change`: an update only after a move of the distance asked,
    /// whatever the site says, and the radios stay at the coarse tier it implies.
    @Test func aSignificantChangeStreamDeliversOnlyAfterTheDistanceAndKeepsTheRadiosCoarse() throws {
        let site = try E2E.site("updates-significant", extra: "[updates]\naccuracy = \"threeKilometers\"\n")
        let agent = try E2E.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let connection = try E2E.Connection(site.state + "/control.sock")
        let reply = try #require(connection.request("{\"id\":1,\"op\":\"updates\",\"significant_change_m\":200,\"accuracy\":\"best\"}"))
        #expect(reply["ok"] as? Bool == true && reply["significant_change_m"] as? Double == 200, "\(reply)")
        #expect(reply["accuracy"] as? String == "hundredMeters" && reply["radios"] as? String == "hundredMeters",
                "a finer tier than the distance implies is not taken: \(reply)")
        // 120 s north at 10 m/s: 1,200 m, so updates at about 0, 200, 400 ... m.
        let feeder = try E2E.feed(site, nmea: syntheticTrack(seconds: 120, startLatitude: 45.0, longitude: 7.0, speedMps: 10), hci: nil)
        var located: [Double] = []
        _ = Self.collect(connection) { line in
            if let latitude = (line["update"] as? [String: Any])?["lat"] as? Double { located.append(latitude) }
            return located.count == 5
        }
        feeder.waitUntilExit()
        #expect(located.count == 5)
        for (a, b) in zip(located, located.dropFirst()) {
            let metres = (b - a) * 111_132
            #expect(metres >= 199 && metres <= 215, "one update per 200 m: \(metres)")
        }
        #expect(!agent.log.contains("radios from threeKilometers to best"), "\(agent.log.suffix(400))")
        let bad = try E2E.Connection(site.state + "/read.sock").request("{\"id\":2,\"op\":\"updates\",\"significant_change_m\":5}")
        #expect((bad?["error"] as? [String: Any])?["code"] as? String == "bad_argument")
    }
}
