import Foundation
import Testing

/// `$BODY` with its checksum and line end: `$BODY*HH\r\n`.
func nmeaChecksummed(_ body: String) -> String {
    var checksum: UInt8 = 0
    for byte in body.utf8.dropFirst() { checksum ^= byte }
    return body + String(format: "*%02X\r\n", checksum)
}

/// A latitude (2 degree digits) or longitude (3) as NMEA writes it: `ddmm.mmmmmmm,N`.
func nmeaCoordinate(_ value: Double, degreeDigits: Int, positive: String, negative: String) -> String {
    let magnitude = abs(value)
    let degrees = Int(magnitude)
    let minutes = (magnitude - Double(degrees)) * 60
    return String(format: "%0\(degreeDigits)d%010.7f,%@", degrees, minutes, value >= 0 ? positive : negative)
}

/// NMEA for a vehicle driving north at `speed` m/s from `start`, one RMC+GGA+GSA cycle a second.
func syntheticTrack(seconds: Int, startLatitude: Double, longitude: Double, speedMps: Double) -> String {
    segmentedTrack([(seconds, speedMps)], startLatitude: startLatitude, longitude: longitude)
}

/// One RMC, GGA and GSA a second from 10:00:00 on 2024-03-15, heading north: each segment lasts
/// its seconds at its speed (0: standing still).
func segmentedTrack(_ segments: [(seconds: Int, speedMps: Double)], startLatitude: Double, longitude: Double) -> String {
    let checksummed = nmeaChecksummed
    var text = ""
    var second = 0
    var segmentStart = startLatitude
    for segment in segments {
        for index in 0..<segment.seconds {
            let latitude = segmentStart + Double(index) * segment.speedMps / 111_132.0
            let time = String(format: "%02d%02d%02d.00", 10 + second / 3600, (second / 60) % 60, second % 60)
            let lat = nmeaCoordinate(latitude, degreeDigits: 2, positive: "N", negative: "S")
            let lon = nmeaCoordinate(longitude, degreeDigits: 3, positive: "E", negative: "W")
            text += checksummed("$GPRMC,\(time),A,\(lat),\(lon),\(String(format: "%.1f", segment.speedMps / 0.514444)),0.0,150324,,,A")
            text += checksummed("$GPGGA,\(time),\(lat),\(lon),1,09,0.8,20.0,M,-30.0,M,,")
            text += checksummed("$GPGSA,A,3,01,02,03,04,05,06,07,08,09,,,,1.5,0.8,1.2")
            second += 1
        }
        segmentStart += Double(segment.seconds) * segment.speedMps / 111_132.0
    }
    return text
}

@Suite(.serialized) struct CrashSafetyTests {
    struct Fixture {
        var directory: URL
        var site: String
        var nmea: String
        var state: String
    }

    static func fixture(_ name: String, fences: Int) throws -> Fixture {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locus-\(name)-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var site = "board = \"\(repositoryRoot)/Boards/sim.toml\"\n[log]\nsegment_size = \"64KiB\"\nretain = \"1MiB\"\n"
        for index in 0..<fences {
            // Fences 100 m apart along the road, alternating raw decisions and defaults.
            site += "[[monitor.road.condition]]\nid = \"f\(index)\"\n"
            site += "circle = { lat = \(String(format: "%.7f", 45.0 + Double(index + 1) * 100 / 111_132.0)), lon = 7.0, radius = 30.0 }\n"
            if index % 2 == 0 { site += "exit_margin = 0.0\naccuracy_gate = false\n" }
        }
        let sitePath = directory.appendingPathComponent("site.toml").path
        try site.write(toFile: sitePath, atomically: true, encoding: .utf8)
        let nmeaPath = directory.appendingPathComponent("track.nmea").path
        try syntheticTrack(seconds: fences * 10 + 40, startLatitude: 45.0, longitude: 7.0, speedMps: 10).write(toFile: nmeaPath, atomically: true, encoding: .utf8)
        return Fixture(directory: directory, site: sitePath, nmea: nmeaPath, state: directory.appendingPathComponent("state").path)
    }

    /// Exported events by sequence number (the log's view of what was handled).
    static func loggedEvents(_ state: String) throws -> [Int: String] {
        let export = try locus(["log", "export", "--state", state])
        #expect(export.status == 0, "\(export.error)")
        var events: [Int: String] = [:]
        for line in export.output.split(separator: "\n") where line.contains("\"type\":\"event\"") {
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let sequence = object["seq"] as? Int, let event = object["event"] as? [String: Any] else { continue }
            events[sequence] = "\(event["identifier"] ?? "")/\(event["state"] ?? "")/\(event["date"] ?? "")"
        }
        return events
    }

    @Test func sigkillAtRandomMomentsLosesNoHandledEvent() throws {
        let fixture = try Self.fixture("crash", fences: 12)
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let binary = try locusBinary()
        var generator: UInt64 = 0x5EED
        func random(_ bound: Int) -> Int {
            generator = generator &* 6364136223846793005 &+ 1442695040888963407
            return Int((generator >> 33) % UInt64(bound))
        }
        var handled: [Int: String] = [:]
        let rounds = Int(ProcessInfo.processInfo.environment["LOCUS_CRASH_ROUNDS"] ?? "200") ?? 200
        var killed = 0
        for round in 0..<rounds {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["replay", "--config", fixture.site, "--nmea", fixture.nmea, "--state", fixture.state, "--speed", "400"]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            usleep(useconds_t(20_000 + random(600_000)))
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                killed += 1
            }
            process.waitUntilExit()
            let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            // Every event the replay printed had been appended (and synced) before it printed it.
            for line in printed.split(separator: "\n") {
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                      let sequence = object["seq"] as? Int else { continue } // a line cut by the kill
                handled[sequence] = "\(object["identifier"] ?? "")/\(object["state"] ?? "")/\(object["date"] ?? "")"
            }
            if round % 20 == 19 || round == rounds - 1 {
                let logged = try Self.loggedEvents(fixture.state)
                for (sequence, event) in handled {
                    #expect(logged[sequence] == event, "round \(round): handled event \(sequence) \(event) missing or different in the log")
                }
                let verify = try locus(["log", "verify", "--state", fixture.state])
                #expect(verify.status == 0, "round \(round): \(verify.error)")
            }
        }
        #expect(killed >= rounds / 2, "too few runs were killed mid-way (\(killed) of \(rounds)): the test would prove little")
        #expect(handled.count > 50)

        // The records rebuilt from the log equal the log's history: for each fence, the state of
        // its last logged event.
        let logged = try Self.loggedEvents(fixture.state)
        var lastState: [String: String] = [:]
        for sequence in logged.keys.sorted() {
            let parts = logged[sequence]!.split(separator: "/")
            lastState[String(parts[0])] = String(parts[1])
        }
        let records = try locus(["monitor", "road", "--state", fixture.state, "records"])
        #expect(records.status == 0, "\(records.error)")
        var rebuilt: [String: String] = [:]
        for line in records.output.split(separator: "\n") {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            let last = object["lastEvent"] as! [String: Any]
            rebuilt[object["identifier"] as! String] = last["state"] as? String
        }
        for (identifier, state) in lastState { #expect(rebuilt[identifier] == state, "\(identifier)") }
    }

    @Test func aSecondOpenerOfTheSameMonitorIsToldWhoHoldsIt() throws {
        let fixture = try Self.fixture("lock", fences: 2)
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try locusBinary())
        process.arguments = ["replay", "--config", fixture.site, "--nmea", fixture.nmea, "--state", fixture.state, "--speed", "5"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // SIGKILL: test runners may block SIGTERM, and spawned children inherit the mask.
        defer { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        // Wait (bounded) until the first process holds the lock: its pid is in the lock file.
        let lockPath = fixture.state + "/road.lock"
        for _ in 0..<600 {
            if let text = try? String(contentsOfFile: lockPath, encoding: .utf8), text == "\(process.processIdentifier)\n" { break }
            usleep(50_000)
        }
        let second = try locus(["replay", "--config", fixture.site, "--nmea", fixture.nmea, "--state", fixture.state])
        #expect(second.status == 1)
        #expect(second.error == "locus: monitor 'road' is already open in process \(process.processIdentifier) (lock \(fixture.state)/road.lock); stop it first or use another monitor name\n")
    }
}
