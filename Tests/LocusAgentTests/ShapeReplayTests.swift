import Foundation
@testable import LocusCore
import TestSupport
import Testing

/// Polygons and corridors through `locus replay` (the agent's loop on a recording): a truck
/// hugging a corridor's border under ±5 m of noise does not flap, and a yard's entry and exit are
/// seen where the track crosses its polygon.
@Suite struct ShapeReplayTests {
    /// NMEA (RMC, GGA, GST) for `positions`, one a second from 10:00:00 on 2024-03-15, each with a
    /// GST saying `sigmaM` on both axes.
    static func nmea(_ positions: [(Double, Double)], sigmaM: Double) -> String {
        let checksummed = nmeaChecksummed
        var text = ""
        for (second, position) in positions.enumerated() {
            let time = String(format: "%02d%02d%02d.00", 10 + second / 3600, (second / 60) % 60, second % 60)
            let lat = nmeaCoordinate(position.0, degreeDigits: 2, positive: "N", negative: "S")
            let lon = nmeaCoordinate(position.1, degreeDigits: 3, positive: "E", negative: "W")
            text += checksummed("$GPRMC,\(time),A,\(lat),\(lon),19.4,80.0,150324,,,A")
            text += checksummed("$GPGGA,\(time),\(lat),\(lon),1,09,0.8,20.0,M,-30.0,M,,")
            text += checksummed(String(format: "$GPGST,%@,%.1f,%.1f,%.1f,0.0,%.1f,%.1f,%.1f", time, sigmaM, sigmaM, sigmaM, sigmaM, sigmaM, sigmaM * 1.5))
        }
        return text
    }

    @Test func aTruckHuggingACorridorsBorderDoesNotFlapAndAYardIsEnteredAndLeft() throws {
        // A route of four 800 m legs turning 25° right each time, 30 m wide.
        var path = [(51.95, 4.05)], heading = 80.0
        for _ in 0..<4 {
            let leg = Geodesy.direct(path.last!.0, path.last!.1, azimuthDeg: heading, distanceM: 800)
            path.append((leg.latitude, leg.longitude))
            heading = leg.azimuthDeg + 25
        }
        // The truck keeps 12 m right of the path (3 m inside the 15 m half width), its fixes
        // scattered up to 5 m; then it turns off the route into a yard and out again.
        var random = SplitMix64(seed: 3_510)
        var track: [(Double, Double)] = []
        for leg in 0..<4 {
            let edge = Geodesy.inverseSolution(path[leg].0, path[leg].1, path[leg + 1].0, path[leg + 1].1)
            var along = 20.0
            while along < edge.distanceM - 20 {
                let onPath = Geodesy.direct(path[leg].0, path[leg].1, azimuthDeg: edge.azimuth1Deg, distanceM: along)
                let hugging = Geodesy.direct(onPath.latitude, onPath.longitude, azimuthDeg: onPath.azimuthDeg + 90, distanceM: 12)
                let noisy = Geodesy.direct(hugging.latitude, hugging.longitude, azimuthDeg: random.uniform(-180, 180), distanceM: random.uniform(0, 5))
                track.append((noisy.latitude, noisy.longitude))
                along += 12
            }
        }
        let end = path.last!
        for step in 1...40 {
            let away = Geodesy.direct(end.0, end.1, azimuthDeg: 180, distanceM: Double(step) * 12)
            track.append((away.latitude, away.longitude))
        }
        // The yard: a square 100 m on a side, 150 to 250 m south of the route's end.
        let corners = [(150.0, -50.0), (150, 50), (250, 50), (250, -50)].map { (south, east) -> (Double, Double) in
            let down = Geodesy.direct(end.0, end.1, azimuthDeg: 180, distanceM: south)
            let side = Geodesy.direct(down.latitude, down.longitude, azimuthDeg: 90, distanceM: east)
            return (side.latitude, side.longitude)
        }
        func positions(_ points: [(Double, Double)]) -> String { points.map { String(format: "[%.9f, %.9f]", $0.0, $0.1) }.joined(separator: ", ") }
        let site = """
        board = "\(repositoryRoot)/Boards/sim.toml"
        [[monitor.route.condition]]
        id = "lane"
        corridor = { path = [\(positions(path))], width = 30 }
        [[monitor.route.condition]]
        id = "yard"
        polygon = [\(positions(corners))]
        """
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("shape-replay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let sitePath = directory.appendingPathComponent("site.toml").path
        let nmeaPath = directory.appendingPathComponent("truck.nmea").path
        try site.write(toFile: sitePath, atomically: true, encoding: .utf8)
        try Self.nmea(track, sigmaM: 5).write(toFile: nmeaPath, atomically: true, encoding: .utf8)
        let result = try locus(["replay", "--config", sitePath, "--nmea", nmeaPath])
        try #require(result.status == 0, "\(result.error)")
        let events = result.output.split(separator: "\n").compactMap { line -> String? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let identifier = object["identifier"] as? String, let state = object["state"] as? String else { return nil }
            return "\(identifier) \(state)"
        }
        #expect(track.count > 250)
        // The lane: satisfied once while hugging its border, unsatisfied once the truck leaves it;
        // the yard: entered and left, each once.
        #expect(events.filter { $0.hasPrefix("lane") } == ["lane satisfied", "lane unsatisfied"], "\(events)")
        #expect(events.filter { $0.hasPrefix("yard") } == ["yard unsatisfied", "yard satisfied", "yard unsatisfied"], "\(events)")
    }
}
