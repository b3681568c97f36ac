import Foundation
import LocusMonitor
import Testing

/// Beacon ranging through a real `locus run` on the simulated board, its HCI feed played by
/// `locus feed`: the `range` op on read.sock, `range-stop`, `locus range`, and
/// `rangeBeacons(satisfying:)`.
@Suite(.serialized) struct RangingAgentTests {
    typealias E = AgentEndToEndTests
    static let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"

    /// `seconds` of sightings, four a second: minor 1 at -50 dBm (0.35 m with measured power -59:
    /// immediate), minor 2 at -75 dBm (6.3 m: far), and major 200 (not in the constraint).
    static func feed(seconds: Int) -> String {
        var lines: [String] = []
        for quarter in 0..<(seconds * 4) {
            let ms = Int64(quarter) * 250 + 100
            let time = String(format: "%d.%03d", E.trackStart + Int(ms / 1_000), Int(ms % 1_000))
            for (major, minor, rssi) in [(100, 1, -50), (100, 2, -75), (200, 1, -45)] as [(UInt16, UInt16, Int8)] {
                let sent = RangingComponentTests.Sent(ms: ms, major: major, minor: minor, power: -59, rssi: rssi)
                lines.append("\(time) " + RangingComponentTests.event(sent).map { String(format: "%02x", $0) }.joined())
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func date(_ text: Any?) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return (text as? String).flatMap { formatter.date(from: $0) }
    }

    @Test func rangingOnTheReadSocketTheCommandAndTheLibrary() async throws {
        let site = try E.site("ranging")
        let agent = try E.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let connection = try E.Connection(site.state + "/read.sock")
        let reply = try #require(connection.request(#"{"id":1,"op":"range","constraint":{"uuid":"\#(Self.uuid)","major":100}}"#))
        #expect(reply["ok"] as? Bool == true && reply["interval_ms"] as? Int == 1_000 && reply["silence_ms"] as? Int == 30_000)
        #expect((reply["constraint"] as? [String: Any])?["major"] as? Int == 100)
        let bad = try #require(connection.request(#"{"id":2,"op":"range","constraint":{"uuid":"\#(Self.uuid)","minor":3}}"#))
        #expect((bad["error"] as? [String: Any])?["code"] as? String == "bad_argument")

        let feeder = try E.feed(site, nmea: nil, hci: Self.feed(seconds: 40), speed: "1")
        defer { feeder.terminate() }
        // Lines a second apart; once both beacons are heard: nearest first, CLProximity's
        // categories, the distance from the line's own RSSI and the frames' measured power.
        var times: [Date] = []
        var full = 0
        while full < 3 {
            let line = try #require(connection.next(), "a ranging line within 10 s")
            guard line["ranging"] != nil else { continue }
            times.append(try #require(Self.date(line["time"])))
            let beacons = try #require(line["beacons"] as? [[String: Any]])
            #expect(beacons.allSatisfy { $0["major"] as? Int == 100 && $0["uuid"] as? String == Self.uuid })
            guard beacons.count == 2 else { continue }
            full += 1
            #expect(beacons.map { $0["minor"] as? Int } == [1, 2])
            #expect(beacons.map { $0["proximity"] as? String } == ["immediate", "far"])
            for beacon in beacons {
                let rssi = try #require(beacon["rssi"] as? Double)
                let distance = try #require(beacon["distance_m"] as? Double)
                #expect(abs(distance - pow(10, (-59 - rssi) / 20)) < 0.005 + 0.002 * distance, "\(beacon)")
            }
        }
        for (earlier, later) in zip(times, times.dropFirst()) {
            #expect(later.timeIntervalSince(earlier) > 0.9 && later.timeIntervalSince(earlier) < 1.5, "\(times)")
        }

        // The command, on the same agent, while the feed goes on.
        let json = try locus(["range", "\(Self.uuid):100:2", "--state", site.state, "--count", "2", "--json"])
        #expect(json.status == 0, "\(json.error)")
        let lines = json.output.split(separator: "\n")
        #expect(lines.count == 2 && lines.allSatisfy { $0.hasPrefix(#"{"ranging":{"uuid":""#) })
        let table = try locus(["range", "\(Self.uuid):100", "--state", site.state, "--count", "2"])
        #expect(table.status == 0 && table.output.contains("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0") && table.output.contains("immediate"), "\(table.output)")
        let usage = try locus(["range", "E2C56DB5:1", "--state", site.state])
        #expect(usage.status == 2 && usage.error.contains("UUID[:MAJOR[:MINOR]]"))

        // The library: nearest first; breaking out ends its ranging on the agent.
        var ranged: [[Beacon]] = []
        for try await beacons in rangeBeacons(satisfying: BeaconIdentityConstraint(uuid: UUID(uuidString: Self.uuid)!), stateDirectory: site.state) {
            if beacons.count == 3 { ranged.append(beacons) }
            if ranged.count == 2 { break }
        }
        for beacons in ranged {
            #expect(beacons.map { "\($0.major)/\($0.minor)" } == ["200/1", "100/1", "100/2"])
            #expect(beacons.map(\.proximity) == [.immediate, .immediate, .far])
            #expect(beacons.allSatisfy { $0.accuracy > 0 && $0.rssi < 0 })
        }

        // range-stop: the reply, then no more lines on this connection.
        connection.send(#"{"id":3,"op":"range-stop"}"#)
        var stopped: [String: Any]? = nil
        while let line = connection.next() {
            if line["id"] as? Int == 3 {
                stopped = line
                break
            }
            #expect(line["ranging"] != nil, "before the reply: ranging lines")
        }
        #expect(stopped?["result"] as? String == "stopped")
        var after = 0
        var timeout = timeval(tv_sec: 0, tv_usec: 500_000)
        setsockopt(connection.descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let until = Date().addingTimeInterval(2.5)
        while Date() < until, let line = connection.next() { if line["ranging"] != nil { after += 1 } }
        #expect(after == 0, "no line after the reply")
        try E.waitFor("every ranging stream to end", seconds: 5) {
            let status = try locus(["status", "--state", site.state])
            let object = try JSONSerialization.jsonObject(with: Data(status.output.utf8)) as? [String: Any]
            return (object?["ranging"] as? [String: Any])?["streams"] as? Int == 0
        }
    }
}
