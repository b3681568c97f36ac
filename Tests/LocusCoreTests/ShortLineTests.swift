import Testing
import TestSupport
@testable import LocusCore

/// `Geodesy.shortLine` against Karney's solution (`inverseSolution`, itself within 1e-14° and
/// 1 nm of GeodSolve on the corpus) on random short lines everywhere, poles and antimeridian included.
@Suite struct ShortLineTests {
    @Test func agreesWithTheInverseSolution() throws {
        var random = SplitMix64(seed: 2_211)
        var worstDistance = 0.0, worstAzimuth = 0.0, compared = 0, worstLine = ""
        for round in 0..<200_000 {
            let latitude = round % 10 == 0 ? random.uniform(85, 90) * (random.chance(50) ? 1 : -1) : asinDegrees(random.uniform(-1, 1))
            let longitude = round % 10 == 1 ? 180 - random.uniform(0, 0.1) : random.uniform(-180, 180)
            let length = [1.0, 100, 1_000, 5_000, 20_000][random.below(5)] * random.unit()
            let heading = random.uniform(0, 360)
            // A nearby point: offset by `length` metres along `heading` in degrees (roughly).
            let dLatitude = length * cosDegrees(heading) / 111_000
            let dLongitude = length * sinDegrees(heading) / (111_000 * max(0.01, cosDegrees(latitude)))
            let lat2 = max(-90, min(90, latitude + dLatitude)), lon2 = longitude + dLongitude
            let q = GeoPoint(latitude: lat2, longitude: lon2)
            guard let short = Geodesy.shortLine(fromLatitude: latitude, longitude: longitude, to: q) else { continue }
            let exact = Geodesy.inverseSolution(latitude, longitude, lat2, lon2)
            compared += 1
            worstDistance = max(worstDistance, abs(short.distanceM - exact.distanceM))
            // Under 1 m the chord's direction carries the ECEF coordinates' rounding (1e-9 m).
            if exact.distanceM > 1 {
                var difference = abs(short.azimuthDeg - exact.azimuth1Deg).truncatingRemainder(dividingBy: 360)
                difference = min(difference, 360 - difference)
                if difference > worstAzimuth { worstAzimuth = difference; worstLine = "\(latitude),\(longitude) -> \(lat2),\(lon2) s=\(exact.distanceM)" }
            }
        }
        print("short line vs inverse: \(compared) lines, max |Δs| \(worstDistance) m, max |Δα| \(worstAzimuth)° (\(worstLine))")
        #expect(compared > 150_000)
        #expect(worstDistance < 2e-6)
        #expect(worstAzimuth < 1e-6)
    }

    @Test func refusesLongLinesAndCoincidentPoints() {
        #expect(Geodesy.shortLine(fromLatitude: 53.5, longitude: 8.5, to: GeoPoint(latitude: 53.5, longitude: 8.5)) == nil)
        #expect(Geodesy.shortLine(fromLatitude: 53.5, longitude: 8.5, to: GeoPoint(latitude: 53.7, longitude: 8.5)) == nil)   // 22 km
        #expect(Geodesy.shortLine(fromLatitude: 53.5, longitude: 8.5, to: GeoPoint(latitude: 53.6, longitude: 8.5)) != nil)
    }

    func asinDegrees(_ x: Double) -> Double { LibM.asin(x) * 180 / .pi }
    func cosDegrees(_ x: Double) -> Double { LibM.cos(x * .pi / 180) }
    func sinDegrees(_ x: Double) -> Double { LibM.sin(x * .pi / 180) }
}
