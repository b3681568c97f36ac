import Foundation
import Testing

/// `locus replay` is the agent `locus run` starts, turning on a simulated kernel. Fed the same
/// recording, the two must write the same log, record for record: `locus run` on the simulated
/// board (real pseudo-terminals, `locus feed` at the recording's own pace) against `locus replay`
/// (simulated ports, simulated time). Only times the wall clock sets may differ: the start-up
/// records (written before the first fix sets the clock), the stop record, and by a few
/// milliseconds what the agent stamps with its clock between fixes (sightings, pulses ending).
///
/// Every corpus recording up to `longestSeconds` long plays, on a site with circles at its first,
/// middle and last positions (gpsd's reference decoding names them) and a level action, plus the
/// demo (a boat leaving harbour with a tagged crate aboard: NMEA and BLE, 2.5 minutes).
@Suite struct ReplayEqualsRunTests {
    /// Recordings play at their own pace; longer ones would make the test as long as they are.
    static let longestSeconds = 60.0
    /// At most this many runs at once (each mostly sleeps between sentences).
    static let concurrentRuns = 12

    struct Recording: Sendable {
        var name: String
        var nmea: String
        var hci: String? = nil
        /// The site's conditions and actions (without the board line).
        var site: String
        /// Longer recordings are replayed only (the run would take as long as they last).
        var longestSeconds = ReplayEqualsRunTests.longestSeconds
    }

    /// The corpus's NMEA recordings short enough to play at their pace, and the demo.
    static func recordings() throws -> [Recording] {
        let directory = repositoryRoot + "/Tests/Corpus/nmea"
        var recordings: [Recording] = []
        for file in try FileManager.default.contentsOfDirectory(atPath: directory).sorted() where file.hasSuffix(".log") {
            let points = try referencePositions(directory + "/" + file + ".gpsdecode.json")
            recordings.append(Recording(name: file, nmea: directory + "/" + file, site: circles(points)))
        }
        let demo = try String(contentsOfFile: repositoryRoot + "/Examples/demo/site.toml", encoding: .utf8)
        let demoSite = demo.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("board =") && !$0.hasPrefix("state_dir =") }.joined(separator: "\n")
        recordings.append(Recording(name: "demo", nmea: directory + "/bundg_zeus_9.log", hci: repositoryRoot + "/Examples/demo/ble.hci",
                                    site: demoSite, longestSeconds: 180))
        return recordings
    }

    /// gpsd's TPV positions of a recording: the first, the middle and the last.
    static func referencePositions(_ path: String) throws -> [(Double, Double)] {
        var points: [(Double, Double)] = []
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  object["class"] as? String == "TPV", let lat = object["lat"] as? Double, let lon = object["lon"] as? Double else { continue }
            points.append((lat, lon))
        }
        return points.isEmpty ? [] : [points[0], points[points.count / 2], points[points.count - 1]]
    }

    /// Circles of 25 m around the points (a point nowhere near without any), relay1 following
    /// the first.
    static func circles(_ points: [(Double, Double)]) -> String {
        let centres = points.isEmpty ? [(0.0, 0.0)] : points
        var text = ""
        for (index, (lat, lon)) in centres.enumerated() {
            text += "[[monitor.track.condition]]\nid = \"c\(index)\"\ncircle = { lat = \(String(format: "%.7f", lat)), lon = \(String(format: "%.7f", lon)), radius = 25.0 }\n"
        }
        return text + "[[action]]\nwhen = \"track/c0\"\nstate = \"satisfied\"\ngpio = \"relay1\"\nmode = \"level\"\n"
    }

    @Test func everyRecordingLogsTheSameInReplayAndInRun() throws {
        let recordings = try Self.recordings()
        let results = Results()
        let slots = DispatchSemaphore(value: Self.concurrentRuns)
        let group = DispatchGroup()
        for recording in recordings {
            slots.wait()
            group.enter()
            Thread.detachNewThread {
                defer { slots.signal(); group.leave() }
                results.add(recording.name, Result { try Self.compare(recording) })
            }
        }
        group.wait()
        var compared: [String] = []
        var skipped: [String] = []
        for (name, result) in results.all.sorted(by: { $0.0 < $1.0 }) {
            switch result {
            case .success(let problems?):
                compared.append(name)
                #expect(problems.isEmpty, "\(name): \(problems.joined(separator: "\n"))")
            case .success(nil): skipped.append(name)
            case .failure(let error): Issue.record("\(name): \(error)")
            }
        }
        // The corpus's 54 recordings: most last seconds; a few span years (a receiver's 1980 or
        // 2008 dates before its real one) or many minutes, and one has no timed sentence.
        #expect(compared.count >= 40 && compared.contains("demo"), "compared: \(compared)")
        print("replay equals run: \(compared.count) recordings compared record by record; longer than \(Int(Self.longestSeconds)) s or without a timed sentence, not run: \(skipped)")
    }

    final class Results: @unchecked Sendable {
        private let lock = NSLock()
        private var results: [(String, Result<[String]?, Error>)] = []
        func add(_ name: String, _ result: Result<[String]?, Error>) { lock.withLock { results.append((name, result)) } }
        var all: [(String, Result<[String]?, Error>)] { lock.withLock { results } }
    }

    /// The differences between the two logs of one recording (empty: the same); nil when the
    /// recording spans more than `longestSeconds` (the replay's log says how long).
    static func compare(_ recording: Recording) throws -> [String]? {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locus-replay-run-\(getpid())-\(recording.name)").path
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let site = directory + "/site.toml"
        try ("board = \"\(repositoryRoot)/Boards/sim.toml\"\n" + recording.site).write(toFile: site, atomically: true, encoding: .utf8)
        var replayArguments = ["replay", "--config", site, "--nmea", recording.nmea, "--state", directory + "/replay"]
        if let hci = recording.hci { replayArguments += ["--hci", hci] }
        let replay = try locus(replayArguments)
        // A recording without one timed sentence has nothing to play (skytraq-err.log): refused.
        if replay.error.contains("the recordings hold no timed fix") { return nil }
        guard replay.status == 0 else { return ["replay failed: \(replay.error)"] }
        let replayed = try exported(directory + "/replay")
        let times = replayed.compactMap(time)
        guard let first = times.min(), let last = times.max() else { return ["the replay logged nothing"] }
        guard last - first <= recording.longestSeconds else { return nil }
        try run(site: site, state: directory + "/run", recording, seconds: last - first)
        return differences(try exported(directory + "/run"), replayed)
    }

    /// `locus run` on the simulated board with `locus feed` playing the recording at its pace.
    static func run(site: String, state: String, _ recording: Recording, seconds: Double) throws {
        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: try locusBinary())
        agent.arguments = ["run", "--config", site, "--state", state]
        agent.standardError = FileHandle.nullDevice
        agent.standardOutput = FileHandle.nullDevice
        try agent.run()
        defer { kill(agent.processIdentifier, SIGKILL); agent.waitUntilExit() }
        try AgentEndToEndTests.waitFor("the control socket", seconds: 20) { AgentEndToEndTests.canConnect(state + "/control.sock") }
        var arguments = ["feed", "--speed", "1", "--linger", "1", "--wait", "30", "--nmea", recording.nmea, "--gnss", state + "/sim/gnss"]
        if let hci = recording.hci { arguments += ["--hci", hci, "--ble", state + "/sim/ble"] }
        let feed = Process()
        feed.executableURL = URL(fileURLWithPath: try locusBinary())
        feed.arguments = arguments
        let errors = FileManager.default.temporaryDirectory.appendingPathComponent("feed-\(UUID().uuidString).err").path
        FileManager.default.createFile(atPath: errors, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: errors) }
        feed.standardError = FileHandle(forWritingAtPath: errors)
        feed.standardOutput = FileHandle.nullDevice
        try feed.run()
        defer { if feed.isRunning { kill(feed.processIdentifier, SIGKILL) }; feed.waitUntilExit() }
        try AgentEndToEndTests.waitFor("locus feed to play \(Int(seconds)) s", seconds: seconds + 40) { !feed.isRunning }
        let text = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        guard feed.terminationStatus == 0 else { throw FeedFailed(text: text) }
        // A line the agent did not take in time would make the logs differ for a reason of its own.
        for line in text.split(separator: "\n") where !line.hasSuffix(" 0 dropped") { throw FeedFailed(text: String(line)) }
        kill(agent.processIdentifier, SIGTERM)
        agent.waitUntilExit()
    }

    struct FeedFailed: Error, CustomStringConvertible {
        var text: String
        var description: String { "locus feed: \(text)" }
    }

    static func exported(_ state: String) throws -> [[String: Any]] {
        let export = try locus(["log", "export", "--state", state])
        guard export.status == 0 else { throw FeedFailed(text: "log export: \(export.error)") }
        return export.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// Record by record: the same types and contents; times equal, except where the wall clock
    /// sets them (start-up and stop records and the levels logged with them: not compared; times the agent's clock stamps
    /// between fixes: within `clockToleranceS`).
    static let clockToleranceS = 0.5

    static func differences(_ run: [[String: Any]], _ replay: [[String: Any]]) -> [String] {
        var problems: [String] = []
        if run.count != replay.count { problems.append("run logged \(run.count) records, replay \(replay.count)") }
        for (index, (a, b)) in zip(run, replay).enumerated() {
            let type = a["type"] as? String ?? "?"
            guard type == b["type"] as? String else {
                problems.append("record \(index + 1): run \(type), replay \(b["type"] ?? "?")")
                break
            }
            if type == "start" || type == "stop" { continue }
            if NSDictionary(dictionary: withoutTimes(a)) != NSDictionary(dictionary: withoutTimes(b)) {
                problems.append("record \(index + 1) differs:\n  run    \(a)\n  replay \(b)")
            }
            // The lines' levels logged at start and stop are dated like the start and stop records.
            if type.hasPrefix("condition-") || ["restored", "safe"].contains(a["cause"] as? String ?? "") { continue }
            if let ta = time(a), let tb = time(b), abs(ta - tb) > clockToleranceS {
                problems.append("record \(index + 1) (\(type)) at \(a["time"] ?? "") in the run, \(b["time"] ?? "") in the replay")
            }
        }
        return problems
    }

    /// A record without its times (and without the event's sequence copy, equal to the record's).
    static func withoutTimes(_ record: [String: Any]) -> [String: Any] {
        var copy = record
        copy["time"] = nil
        if var event = copy["event"] as? [String: Any] {
            event["date"] = nil
            if var explain = event["explain"] as? [String: Any] {
                // How long a beacon went unseen is measured on the agent's clock.
                explain["unseen_ms"] = nil
                // A dwell ending in the very second a fix arrives: in the simulation the fix is
                // read first and explains the event; on a real port the bytes arrive a few
                // milliseconds into the second and the dwell's deadline may fire first, with the
                // fix before. The event, its state and time are the same.
                if let dwell = explain["dwell_ms"] as? Int, dwell > 0 {
                    for key in ["lat", "lon", "edge_distance_m", "accuracy_m"] { explain[key] = nil }
                }
                event["explain"] = explain
            }
            copy["event"] = event
        }
        return copy
    }

    static func time(_ record: [String: Any]) -> Double? {
        guard let text = record["time"] as? String else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)?.timeIntervalSince1970
    }
}
