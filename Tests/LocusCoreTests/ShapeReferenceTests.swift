import Foundation
@testable import LocusCore
import TestSupport
import Testing

/// Polygons and corridors against outside references (Scripts/lib/shapes_reference.py): every
/// distance the agent gives against GeographicLib's geodesics (the distance to the foot it found,
/// and a right angle there), and inside or out and the boundary distance of small shapes against
/// shapely (GEOS) in a local projection. Random points per shape class, half of them close to an
/// edge: `LOCUS_SHAPE_POINTS` of them (10,000 here; `Scripts/test-shapes` runs 100,000, the
/// figures in docs/shapes.md).
@Suite struct ShapeReferenceTests {
    struct Shape {
        var kind: String
        var latitudes: [Double]
        var longitudes: [Double]
        var widthM: Double
        var center: (Double, Double)
        var radiusM: Double
    }

    static let pointsPerShape = 200

    static func shapes(_ name: String, count: Int, _ random: inout SplitMix64) -> [Shape] {
        var result: [Shape] = []
        while result.count < count {
            let index = result.count
            var center = (random.latitude() * 0.98, random.longitude())
            if index % 6 == 0 { center.1 = 179.9999 }
            if index % 10 == 1 { center.0 = 89.995 * (index % 20 == 1 ? 1 : -1) }
            switch name {
            case "corridors 5 to 100 m wide":
                var latitudes = [center.0], longitudes = [center.1], heading = random.uniform(-180, 180)
                for _ in 0..<(1 + index % 7) {
                    let leg = Geodesy.direct(latitudes.last!, longitudes.last!, azimuthDeg: heading, distanceM: random.uniform(20, 1_000))
                    latitudes.append(leg.latitude)
                    longitudes.append(leg.longitude)
                    heading = leg.azimuthDeg + random.uniform(-150, 150)
                }
                guard (try? GeoCorridor(latitudes: latitudes, longitudes: longitudes, widthM: 5)) != nil else { continue }
                result.append(Shape(kind: "corridor", latitudes: latitudes, longitudes: longitudes, widthM: random.uniform(5, 100),
                                    center: (latitudes[latitudes.count / 2], longitudes[latitudes.count / 2]), radiusM: 1_000))
            default:
                let (low, high, depth): (Double, Double, Double) = switch name {
                case "convex-ish polygons 10 m to 1 km": (10, 1_000, 0.8)
                case "concave polygons 10 m to 1 km": (10, 1_000, 0.15)
                default: (100_000, 3_000_000, 0.5)
                }
                let radius = low * LibM.pow(high / low, random.unit())
                let vertices = 5 + Int(random.next() % 16)
                let (latitudes, longitudes) = GeoPolygonTests.star(&random, latitude: center.0, longitude: center.1, radiusM: radius,
                                                                   count: vertices, counterclockwise: index % 2 == 0, innermost: depth)
                guard (try? GeoPolygon(latitudes: latitudes, longitudes: longitudes)) != nil else { continue }
                result.append(Shape(kind: "polygon", latitudes: latitudes, longitudes: longitudes, widthM: 0, center: center, radiusM: radius))
            }
        }
        return result
    }

    /// One JSON line: the shape and, for each point, the agent's answers (see shapes_reference.py).
    static func line(_ name: String, _ shape: Shape, _ random: inout SplitMix64) throws -> String {
        let store = ShapeStore(shapeCapacity: 1, vertexCapacity: shape.latitudes.count)
        let polygon = shape.kind == "polygon" ? try GeoPolygon(latitudes: shape.latitudes, longitudes: shape.longitudes) : nil
        if let polygon { try store.insert(id: 0, polygon: polygon) } else {
            try store.insert(id: 0, corridor: try GeoCorridor(latitudes: shape.latitudes, longitudes: shape.longitudes, widthM: shape.widthM))
        }
        let segments = shape.kind == "polygon" ? shape.latitudes.count : shape.latitudes.count - 1
        var points: [String] = []
        for number in 0..<pointsPerShape {
            let p: GeodesicDirect
            if number % 2 == 0 {
                // Close to the boundary: a point of an edge, moved up to 2 % of the size (corridors:
                // of the path, moved about half the width).
                let edge = Int(random.next() % UInt64(segments))
                let next = (edge + 1) % shape.latitudes.count
                let line = Geodesy.inverseSolution(shape.latitudes[edge], shape.longitudes[edge], shape.latitudes[next], shape.longitudes[next])
                let on = Geodesy.direct(shape.latitudes[edge], shape.longitudes[edge], azimuthDeg: line.azimuth1Deg, distanceM: line.distanceM * random.unit())
                let offset = shape.kind == "polygon" ? shape.radiusM * 0.02 * random.unit() : shape.widthM / 2 + random.uniform(-3, 3)
                p = Geodesy.direct(on.latitude, on.longitude, azimuthDeg: random.uniform(-180, 180), distanceM: offset)
            } else {
                p = Geodesy.direct(shape.center.0, shape.center.1, azimuthDeg: random.uniform(-180, 180), distanceM: shape.radiusM * 1.3 * random.unit())
            }
            let point = GeoPoint(latitude: p.latitude, longitude: p.longitude)
            let inside = store.place(id: 0, point, bandM: 0).isInside
            let location = store.locate(id: 0, point)
            let edge = location.nearestEdge, next = (edge + 1) % shape.latitudes.count
            let foot = Geodesy.edgeProximity(p.latitude, p.longitude, shape.latitudes[edge], shape.longitudes[edge],
                                             shape.latitudes[next], shape.longitudes[next])
            let isVertex = foot.fraction == 0 || foot.fraction == 1
            let along = isVertex ? 0 : Geodesy.inverseSolution(foot.latitude, foot.longitude, shape.latitudes[next], shape.longitudes[next]).azimuth1Deg
            points.append("[\(p.latitude),\(p.longitude),\(inside),\(location.boundaryDistanceM),"
                          + "\(foot.latitude),\(foot.longitude),\(isVertex),\(along),\(foot.distanceM)]")
        }
        let vertices = shape.latitudes.indices.map { "[\(shape.latitudes[$0]),\(shape.longitudes[$0])]" }.joined(separator: ",")
        let small = shape.radiusM <= 1_000
        return "{\"class\":\"\(name)\",\"kind\":\"\(shape.kind)\",\"small\":\(small),\"width\":\(shape.widthM),"
            + "\"vertices\":[\(vertices)],\"points\":[\(points.joined(separator: ","))]}"
    }

    static let classes = ["convex-ish polygons 10 m to 1 km", "concave polygons 10 m to 1 km", "corridors 5 to 100 m wide",
                          "large polygons 100 to 3,000 km"]

    @Test func theAgentAgreesWithGeographicLibAndShapely() throws {
        let python = try TestPython.path(repositoryRoot: repositoryRoot, need: "geographiclib and shapely, the references")
        let perClass = Int(ProcessInfo.processInfo.environment["LOCUS_SHAPE_POINTS"] ?? "") ?? 10_000
        var random = SplitMix64(seed: 3_500)
        var input = ""
        for name in Self.classes {
            for shape in Self.shapes(name, count: max(1, perClass / Self.pointsPerShape), &random) {
                input += try Self.line(name, shape, &random) + "\n"
            }
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [repositoryRoot + "/Scripts/lib/shapes_reference.py"]
        let stdin = Pipe(), stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        let bytes = Data(input.utf8)
        let writer = Thread { stdin.fileHandleForWriting.write(bytes); try? stdin.fileHandleForWriting.close() }
        writer.start()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "shapes_reference.py failed")
        let figures = try #require(try JSONSerialization.jsonObject(with: output) as? [String: [String: Any]])
        for name in Self.classes {
            let row = try #require(figures[name], "\(name) reported")
            let number = { (key: String) in (row[key] as? NSNumber)?.doubleValue ?? .nan }
            // The row docs/shapes.md shows (Scripts/test-shapes prints them).
            let small = name.contains("1 km") || name.contains("corridors")
            print(String(format: "shape-reference | %@ (%d positions) | %d | %@ | %.1e m | %.1e m | %@ |", name, Int(number("points")),
                         Int(number("disagreements")), small ? "\(Int(number("in_band")))" : "-", number("distance_max_error_m"),
                         number("foot_excess_max_m"), small ? String(format: "%.1e m", number("shapely_distance_max_error_m")) : "-"))
            #expect(number("points") >= Double(perClass), "\(name): \(row)")
            #expect(number("distance_max_error_m") < 1e-6, "\(name): GeographicLib's distance to the foot, \(row)")
            #expect(number("foot_excess_max_m") < 1e-8, "\(name): the right angle at the foot, \(row)")
            #expect(number("disagreements") == 0, "\(name): \(row)")
            if name.contains("1 km") || name.contains("corridors") {
                #expect(number("containment_compared") > 0.9 * Double(perClass), "\(name): \(row)")
                #expect(number("shapely_distance_max_error_m") < 1e-3, "\(name): shapely's distance, \(row)")
            }
        }
    }
}
