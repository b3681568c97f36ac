import Foundation
@testable import LocusCore
import TestSupport
import Testing

/// `Geodesy.direct` against GeographicLib's GeodSolve (Debian geographiclib-tools): 2,000 random
/// geodesics from a metre to nearly half the globe, the end point, azimuth, reduced length and
/// geodesic scales compared; and back through the inverse solution.
@Suite struct GeodesicDirectTests {
    /// `GeodSolve -f -p 12` on "lat1 lon1 azi1 s12" lines: its lat2, lon2, azi2, m12, M12, M21.
    static func geodSolveDirect(_ executable: String, _ lines: [String]) throws -> [[Double]] {
        // -f: lat1 lon1 azi1 lat2 lon2 azi2 s12 a12 m12 M12 M21 S12.
        try GeodSolveDifferentialTests.run(executable, ["-f", "-p", "12"], lines).split(separator: "\n").map { line in
            let fields = line.split(separator: " ").map { Double(String($0)) ?? .nan }
            return fields.count == 12 ? [fields[3], fields[4], fields[5], fields[8], fields[9], fields[10]] : []
        }
    }

    @Test(.enabled(if: GeodSolveDifferentialTests.geodSolvePath() != nil, "GeodSolve is not on PATH: apt-get install geographiclib-tools"))
    func theDirectSolutionIsGeodSolves() throws {
        let executable = try #require(GeodSolveDifferentialTests.geodSolvePath())
        var random = SplitMix64(seed: 35)
        var cases: [(lat: Double, lon: Double, azi: Double, s: Double)] = []
        for index in 0..<2_000 {
            // Lengths spread over decades: a metre to 19,000 km; a few from the poles and along
            // the equator and meridians.
            let s = pow(10, random.uniform(0, 7.28))
            var lat = random.latitude(), azi = random.uniform(-180, 180)
            switch index % 10 {
            case 0: lat = index % 20 == 0 ? 90 : -90
            case 1: lat = 0; azi = index % 4 == 1 ? 90 : -90
            case 2: azi = index % 4 == 2 ? 0 : 180
            default: break
            }
            cases.append((lat, random.longitude(), azi, s))
        }
        let theirs = try Self.geodSolveDirect(executable, cases.map { "\($0.lat) \($0.lon) \($0.azi) \($0.s)" })
        #expect(theirs.count == cases.count)
        var worstM = 0.0, worstAzimuth = 0.0, worstReduced = 0.0, worstScale = 0.0
        for (index, item) in cases.enumerated() where index < theirs.count && theirs[index].count == 6 {
            let ours = Geodesy.direct(item.lat, item.lon, azimuthDeg: item.azi, distanceM: item.s)
            let reference = theirs[index]
            let apartM = Geodesy.distanceM(ours.latitude, ours.longitude, reference[0], reference[1])
            worstM = max(worstM, apartM)
            // The azimuth at a pole depends on the longitude's convention: compared elsewhere.
            if abs(reference[0]) < 89.9999 {
                var azimuth = abs(ours.azimuthDeg - reference[2])
                if azimuth > 180 { azimuth = 360 - azimuth }
                worstAzimuth = max(worstAzimuth, azimuth)
            }
            worstReduced = max(worstReduced, abs(ours.reducedLengthM - reference[3]))
            worstScale = max(worstScale, abs(ours.scale12 - reference[4]), abs(ours.scale21 - reference[5]))
            #expect(apartM < 1e-6, "\(item): \(ours) against \(reference)")
        }
        // Nanometres and nanodegrees, as GeographicLib's own error bounds.
        #expect(worstM < 1e-6 && worstAzimuth < 1e-9 && worstReduced < 1e-6 && worstScale < 1e-12,
                "worst: \(worstM) m, \(worstAzimuth)°, m12 \(worstReduced) m, M \(worstScale)")
    }

    /// Out and back: the inverse solution between the ends gives the distance and the azimuth.
    @Test func theInverseSolutionUndoesIt() {
        var random = SplitMix64(seed: 36)
        for _ in 0..<1_000 {
            let lat = random.latitude(), lon = random.longitude(), azi = random.uniform(-180, 180), s = pow(10, random.uniform(0, 7))
            let end = Geodesy.direct(lat, lon, azimuthDeg: azi, distanceM: s)
            let back = Geodesy.inverseSolution(lat, lon, end.latitude, end.longitude)
            #expect(abs(back.distanceM - s) < 1e-6 * max(1, s / 1e6), "\(lat) \(lon) \(azi) \(s)")
            var difference = abs(back.azimuth1Deg - azi)
            if difference > 180 { difference = 360 - difference }
            // As a sideways displacement at the end: the ends' coordinates are rounded to about a
            // nanometre, which for a short line is a large angle.
            if abs(lat) < 89.99 { #expect(difference * .pi / 180 * s < 1e-8, "\(lat) \(lon) \(azi) \(s): \(back.azimuth1Deg)") }
        }
    }
}

/// The gnomonic projection and the nearest point of a geodesic edge, against the definitions:
/// the projection's round trip, and the distance to an edge against a golden-section search for
/// the minimum of the exact distance along the edge.
@Suite struct EdgeProximityTests {
    @Test func theProjectionRoundTrips() {
        #expect(Gnomonic.tolerance == 0.01 * Double.ulpOfOne.squareRoot(), "the literal is GeographicLib's 0.01 √ε")
        var random = SplitMix64(seed: 37)
        for _ in 0..<500 {
            let center = Gnomonic(latitude: random.latitude(), longitude: random.longitude())
            let end = Geodesy.direct(center.latitude, center.longitude, azimuthDeg: random.uniform(-180, 180), distanceM: pow(10, random.uniform(0, 6.5)))
            guard let point = center.forward(end.latitude, end.longitude) else {
                Issue.record("within 3,000 km the projection reaches")
                continue
            }
            let back = center.reverse(point)
            #expect(Geodesy.distanceM(back.latitude, back.longitude, end.latitude, end.longitude) < 1e-6)
        }
    }

    /// The minimum over the edge of the exact distance, by golden-section search on the length.
    static func nearestByScan(_ p: (Double, Double), _ a: (Double, Double), _ b: (Double, Double)) -> (distanceM: Double, fraction: Double) {
        let edge = Geodesy.inverseSolution(a.0, a.1, b.0, b.1)
        func distance(_ s: Double) -> Double {
            let q = Geodesy.direct(a.0, a.1, azimuthDeg: edge.azimuth1Deg, distanceM: s)
            return Geodesy.distanceM(p.0, p.1, q.latitude, q.longitude)
        }
        var low = 0.0, high = edge.distanceM
        let ratio = (5.0.squareRoot() - 1) / 2
        for _ in 0..<200 {
            let left = high - ratio * (high - low), right = low + ratio * (high - low)
            if distance(left) < distance(right) { high = right } else { low = left }
        }
        let s = (low + high) / 2
        return (min(distance(s), distance(0), distance(edge.distanceM)), s / edge.distanceM)
    }

    @Test func theNearestPointOfAnEdgeIsTheMinimumOfTheDistance() {
        var random = SplitMix64(seed: 38)
        var worst = 0.0
        for index in 0..<400 {
            // Edges from a metre to 500 km, anywhere (across the antimeridian and near the poles
            // too); positions near them and beyond their ends.
            let lat1 = index % 20 == 0 ? random.uniform(88, 89.9) : random.latitude(), lon1 = index % 7 == 0 ? random.uniform(179.9, 180) : random.longitude()
            let length = pow(10, random.uniform(0, 5.7))
            let end = Geodesy.direct(lat1, lon1, azimuthDeg: random.uniform(-180, 180), distanceM: length)
            let along = Geodesy.direct(lat1, lon1, azimuthDeg: Geodesy.inverseSolution(lat1, lon1, end.latitude, end.longitude).azimuth1Deg,
                                       distanceM: length * random.uniform(-0.3, 1.3))
            let p = Geodesy.direct(along.latitude, along.longitude, azimuthDeg: random.uniform(-180, 180), distanceM: length * random.uniform(0, 0.5))
            let ours = Geodesy.edgeProximity(p.latitude, p.longitude, lat1, lon1, end.latitude, end.longitude)
            let reference = Self.nearestByScan((p.latitude, p.longitude), (lat1, lon1), (end.latitude, end.longitude))
            worst = max(worst, abs(ours.distanceM - reference.distanceM))
            #expect(abs(ours.distanceM - reference.distanceM) < 1e-6 + 1e-12 * length, "\(index): \(ours) against \(reference)")
            // The side: the position's direction from the foot against the edge's there.
            let toP = Geodesy.inverseSolution(ours.latitude, ours.longitude, p.latitude, p.longitude)
            let edgeHere = ours.fraction < 1 ? Geodesy.inverseSolution(ours.latitude, ours.longitude, end.latitude, end.longitude).azimuth1Deg
                : Geodesy.inverseSolution(lat1, lon1, end.latitude, end.longitude).azimuth2Deg
            let turn = sin((toP.azimuth1Deg - edgeHere) * .pi / 180)
            if ours.distanceM > 1e-3 && abs(turn) > 1e-6 { #expect(ours.isLeft == (turn < 0), "\(index): turn \(turn)") }
        }
        #expect(worst < 1e-6, "worst \(worst) m")
    }
}

/// Polygons with geodesic edges: inside or out against a second method (the crossing number in
/// the gnomonic projection about the position, where the edges are straight to well under the
/// margin the comparison leaves), and the shapes refused.
@Suite struct GeoPolygonTests {
    /// A star-shaped ring about a centre (simple by construction): `count` vertices at sorted
    /// bearings, each between `innermost` (0.3) and 1 of `radiusM` out; reversed when `clockwise` is false.
    static func star(_ random: inout SplitMix64, latitude: Double, longitude: Double, radiusM: Double, count: Int,
                     counterclockwise: Bool, innermost: Double = 0.3) -> (latitudes: [Double], longitudes: [Double]) {
        var bearings = (0..<count).map { _ in random.uniform(0, 360) }.sorted()
        if counterclockwise { bearings.reverse() }
        var latitudes: [Double] = [], longitudes: [Double] = []
        for bearing in bearings {
            let vertex = Geodesy.direct(latitude, longitude, azimuthDeg: bearing, distanceM: radiusM * random.uniform(innermost, 1))
            latitudes.append(vertex.latitude)
            longitudes.append(vertex.longitude)
        }
        return (latitudes, longitudes)
    }

    /// The crossing number of the ray from the position eastward (+x) in the gnomonic projection
    /// about it.
    static func insideByProjection(_ latitude: Double, _ longitude: Double, _ ring: (latitudes: [Double], longitudes: [Double])) -> Bool? {
        let projection = Gnomonic(latitude: latitude, longitude: longitude)
        var points: [GnomonicPoint] = []
        for index in ring.latitudes.indices {
            guard let point = projection.forward(ring.latitudes[index], ring.longitudes[index]) else { return nil }
            points.append(point)
        }
        var inside = false
        for index in points.indices {
            let a = points[index], b = points[(index + 1) % points.count]
            if (a.y > 0) != (b.y > 0) {
                let x = a.x + (0 - a.y) * (b.x - a.x) / (b.y - a.y)
                if x > 0 { inside.toggle() }
            }
        }
        return inside
    }

    @Test func insideOrOutAgreesWithTheCrossingNumber() throws {
        var random = SplitMix64(seed: 39)
        var decided = 0, nearEdges = 0, inside = 0
        for index in 0..<60 {
            // Yards of 10 m to districts of 20 km; some across the antimeridian, some about a pole.
            let radius = [10.0, 300, 5_000, 20_000][index % 4]
            var latitude = random.latitude(), longitude = random.longitude()
            if index % 6 == 0 { longitude = 179.99999 }
            if index % 10 == 1 { latitude = 90 }
            let ring = Self.star(&random, latitude: latitude, longitude: longitude, radiusM: radius, count: 5 + index % 16,
                                 counterclockwise: index % 2 == 0)
            let polygon = try GeoPolygon(latitudes: ring.latitudes, longitudes: ring.longitudes)
            for _ in 0..<40 {
                let p = Geodesy.direct(latitude, longitude, azimuthDeg: random.uniform(-180, 180), distanceM: radius * random.uniform(0, 1.3))
                let located = polygon.locate(latitude: p.latitude, longitude: p.longitude)
                // Where the projection's straight edges could differ from the geodesics, not compared.
                guard located.boundaryDistanceM > max(1e-3, radius * 1e-6) else {
                    nearEdges += 1
                    continue
                }
                let reference = try #require(Self.insideByProjection(p.latitude, p.longitude, ring))
                #expect(located.isInside == reference, "ring \(index) at \(p.latitude), \(p.longitude): \(located)")
                decided += 1
                if located.isInside { inside += 1 }
            }
        }
        #expect(decided > 2_000 && inside > 500 && decided - inside > 500, "\(decided) decided (\(inside) inside), \(nearEdges) near edges")
    }

    @Test func badRingsAreRefused() {
        #expect(throws: ShapeError.tooFewVertices(2)) { try GeoPolygon(latitudes: [45, 45.001], longitudes: [7, 7]) }
        #expect(throws: ShapeError.repeatedVertex(index: 2)) {
            try GeoPolygon(latitudes: [45, 45.001, 45.001, 45], longitudes: [7, 7, 7, 7.001])
        }
        #expect(throws: ShapeError.invalidVertex(index: 1)) { try GeoPolygon(latitudes: [45, 91, 45], longitudes: [7, 7, 7.001]) }
        #expect(throws: ShapeError.doublesBack(index: 0)) { try GeoPolygon(latitudes: [45, 45.001, 45.002], longitudes: [7, 7, 7]) }
        // A bow tie: its first and third edges cross.
        #expect(throws: ShapeError.selfIntersecting(edge: 0, other: 2)) {
            try GeoPolygon(latitudes: [45, 45.001, 45.001, 45], longitudes: [7, 7.001, 7, 7.001])
        }
        // A ring whose fifth vertex lies on its first edge.
        #expect(throws: ShapeError.self) {
            try GeoPolygon(latitudes: [45, 45, 45.001, 45.001, 45], longitudes: [7, 7.002, 7.002, 7.001, 7.001])
        }
        // Closed as GeoJSON writes it: the repeated first vertex is dropped.
        #expect((try? GeoPolygon(latitudes: [45, 45.001, 45.001, 45], longitudes: [7, 7, 7.001, 7]))?.count == 3)
    }
}

/// Corridors: inside within half the width of the path, against the distance to each segment
/// found by searching for its minimum; the bad ones refused.
@Suite struct GeoCorridorTests {
    /// A random route: `legs` legs of `lengths` metres, each turning up to `turn` degrees from
    /// the last; starting just west of the antimeridian when `antimeridian`.
    static func route(_ random: inout SplitMix64, antimeridian: Bool, legs: Int, lengths: ClosedRange<Double>,
                      turn: Double) -> (latitudes: [Double], longitudes: [Double]) {
        var latitudes = [random.latitude() * 0.9], longitudes = [antimeridian ? 179.9995 : random.longitude()]
        var heading = random.uniform(-180, 180)
        for _ in 0..<legs {
            let leg = Geodesy.direct(latitudes.last!, longitudes.last!, azimuthDeg: heading, distanceM: random.uniform(lengths.lowerBound, lengths.upperBound))
            latitudes.append(leg.latitude)
            longitudes.append(leg.longitude)
            heading = leg.azimuthDeg + random.uniform(-turn, turn)
        }
        return (latitudes, longitudes)
    }

    @Test func insideWithinHalfTheWidthOfThePath() throws {
        var random = SplitMix64(seed: 40)
        var inside = 0, outside = 0
        for index in 0..<20 {
            // A route of 2 to 6 legs of 50 m to 5 km, turning at random; 30 m wide.
            let (latitudes, longitudes) = Self.route(&random, antimeridian: index % 5 == 0, legs: 2 + index % 5, lengths: 50...5_000, turn: 120)
            let corridor = try GeoCorridor(latitudes: latitudes, longitudes: longitudes, widthM: 30)
            for _ in 0..<30 {
                let segment = Int(random.uniform(0, Double(latitudes.count - 1)))
                let edge = Geodesy.inverseSolution(latitudes[segment], longitudes[segment], latitudes[segment + 1], longitudes[segment + 1])
                let along = Geodesy.direct(latitudes[segment], longitudes[segment], azimuthDeg: edge.azimuth1Deg, distanceM: edge.distanceM * random.uniform(0, 1))
                let p = Geodesy.direct(along.latitude, along.longitude, azimuthDeg: random.uniform(-180, 180), distanceM: random.uniform(0, 40))
                let located = corridor.locate(latitude: p.latitude, longitude: p.longitude)
                var nearest = Double.infinity
                for leg in 0..<(latitudes.count - 1) {
                    nearest = min(nearest, EdgeProximityTests.nearestByScan((p.latitude, p.longitude), (latitudes[leg], longitudes[leg]),
                                                                           (latitudes[leg + 1], longitudes[leg + 1])).distanceM)
                }
                #expect(abs(located.boundaryDistanceM - abs(nearest - 15)) < 1e-6, "\(located) against \(nearest)")
                if abs(nearest - 15) > 1e-6 { #expect(located.isInside == (nearest < 15)) }
                if located.isInside { inside += 1 } else { outside += 1 }
            }
        }
        #expect(inside > 100 && outside > 100, "\(inside) inside, \(outside) outside")
    }

    @Test func badCorridorsAreRefused() {
        #expect(throws: CorridorError.badWidth(0)) { try GeoCorridor(latitudes: [45, 45.001], longitudes: [7, 7], widthM: 0) }
        #expect(throws: CorridorError.tooFewPoints(1)) { try GeoCorridor(latitudes: [45], longitudes: [7], widthM: 30) }
        #expect(throws: CorridorError.repeatedPoint(index: 1)) { try GeoCorridor(latitudes: [45, 45], longitudes: [7, 7], widthM: 30) }
        #expect(throws: CorridorError.segmentTooLong(index: 0, lengthM: Geodesy.distanceM(0, 0, 0, 100))) {
            try GeoCorridor(latitudes: [0, 0], longitudes: [0, 100], widthM: 30)
        }
    }
}
