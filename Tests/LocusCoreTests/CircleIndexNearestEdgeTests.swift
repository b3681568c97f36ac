import AllocCounter
import Foundation
import Testing
@testable import LocusCore
import TestSupport

/// Circles everywhere at once: worldwide, at the poles, across the antimeridian and clustered in
/// a city, with tiny, geofence-sized and huge radii (see `randomCircles`), under distinct ids.
func mixedCircles(_ perScenario: Int, random: inout SplitMix64) -> [TestCircle] {
    var all: [TestCircle] = []
    for scenario in ["global", "polar", "antimeridian", "city"] {
        for var circle in randomCircles(perScenario, scenario: scenario, random: &random) {
            circle.id = Int32(all.count)
            all.append(circle)
        }
    }
    return all
}

func fenceEdges(_ circles: [TestCircle]) -> FenceEdges {
    var edges = FenceEdges()
    for circle in circles { edges.add(latitude: circle.center.latitude, longitude: circle.center.longitude, radiusM: circle.radius) }
    return edges
}

/// Query points: near edges, inside, anywhere (`randomQueries`), plus the poles and the
/// antimeridian themselves.
func nearestEdgeQueries(_ count: Int, near circles: [TestCircle], random: inout SplitMix64) -> [GeoPoint] {
    var points = randomQueries(count, near: circles, random: &random).map { $0.0 }
    points += [GeoPoint(latitude: 90, longitude: 0), GeoPoint(latitude: -90, longitude: 123),
               GeoPoint(latitude: 89.95, longitude: -179.99), GeoPoint(latitude: 10, longitude: 180),
               GeoPoint(latitude: -20, longitude: -180), GeoPoint(latitude: 37.3, longitude: -122)]
    return points
}

/// A limit: none, a random one from centimetres to thousands of kilometres, or zero.
func randomLimit(_ random: inout SplitMix64) -> Double {
    switch random.next() % 5 {
    case 0: return .infinity
    case 1: return 0
    default: return random.logUniform(0.01, 5_000_000)
    }
}

@Suite struct CircleIndexNearestEdgeTests {
    /// The index's answer is FenceEdges' (the linear scan with the exact distance), to the last
    /// bit, whenever that is below the limit, and the limit otherwise.
    @Test(arguments: [(300.0, 3), (5_000.0, 3), (150_000.0, 3), (2_000.0, 1)])
    func matchesTheLinearScan(cellSizeM: Double, entriesPerCircle: Int) throws {
        var random = SplitMix64(seed: 0x4E45_4152 &+ UInt64(cellSizeM))
        let circles = mixedCircles(500, random: &random)
        let index = CircleIndex(capacity: circles.count, cellSizeM: cellSizeM, entriesPerCircle: entriesPerCircle)
        try index.insert(circles)
        let edges = fenceEdges(circles)
        var exact = 0, limited = 0
        for point in nearestEdgeQueries(240, near: circles, random: &random) {
            let expected = try #require(edges.nearestEdgeM(latitude: point.latitude, longitude: point.longitude))
            let limit = randomLimit(&random)
            let found = try #require(index.nearestEdgeM(point, limitM: limit))
            if expected < limit {
                exact += 1
                #expect(found == expected, "cell \(cellSizeM): \(found) vs \(expected) at \(point.latitude), \(point.longitude), limit \(limit)")
            } else {
                limited += 1
                #expect(found == limit, "cell \(cellSizeM): \(found) vs limit \(limit) (nearest \(expected))")
            }
            // Without a limit: always the exact answer.
            #expect(index.nearestEdgeM(point) == expected)
        }
        #expect(exact > 100 && limited > 10)
        print("nearest edge, cell \(cellSizeM) m: \(exact) exact, \(limited) beyond the limit, \(index.overflowCount) circles in overflow")
    }

    /// A few circles far from the point: the rings outgrow the circle count and the rest is a scan.
    @Test func sparseCirclesFarAway() throws {
        let index = CircleIndex(capacity: 4, cellSizeM: 100)
        let circles = [TestCircle(id: 1, center: GeoPoint(latitude: 48.85, longitude: 2.35), radius: 120, margin: 0),
                       TestCircle(id: 2, center: GeoPoint(latitude: -33.9, longitude: 151.2), radius: 40_000, margin: 0),
                       TestCircle(id: 3, center: GeoPoint(latitude: 0, longitude: 179.999), radius: 0, margin: 10)]
        try index.insert(circles)
        let edges = fenceEdges(circles)
        for point in [GeoPoint(latitude: 40, longitude: -100), GeoPoint(latitude: 0, longitude: -179.999),
                      GeoPoint(latitude: -33.9, longitude: 151.2), GeoPoint(latitude: 48.85, longitude: 2.351)] {
            let expected = edges.nearestEdgeM(latitude: point.latitude, longitude: point.longitude)
            #expect(index.nearestEdgeM(point) == expected)
            #expect(index.nearestEdgeM(point, limitM: 1_000) == min(expected!, 1_000))
        }
    }

    /// A circle whose centre lies several cells away and whose edge passes next to the point.
    @Test func aFarCentreWithANearEdge() throws {
        let index = CircleIndex(capacity: 2, cellSizeM: 10_000, entriesPerCircle: 16)
        // 9 km radius: listed in a few cells (not in the overflow list), its centre a cell away from its edge.
        try index.insert(id: 7, latitude: 45, longitude: 7, radiusM: 9_000)
        #expect(index.overflowCount == 0)
        let outside = GeoPoint(latitude: 45 + 9_003 / 111_132.0, longitude: 7)
        let inside = GeoPoint(latitude: 45 - 8_990 / 111_132.0, longitude: 7)
        for point in [outside, inside] {
            let expected = abs(Geodesy.distanceM(point, GeoPoint(latitude: 45, longitude: 7)) - 9_000)
            #expect(expected < 20)
            #expect(index.nearestEdgeM(point, limitM: 50) == expected)
            #expect(index.nearestEdgeM(point) == expected)
        }
    }

    /// Big circles hundreds of kilometres away whose edges pass within metres of one another
    /// near the point: the chord brackets (tens of metres wide there) overlap, so the search must
    /// settle several candidates exactly.
    @Test(arguments: [20_000.0, 150_000.0])
    func overlappingBracketsFarAway(cellSizeM: Double) throws {
        var random = SplitMix64(seed: 21 &+ UInt64(cellSizeM))
        for _ in 0..<12 {
            let point = GeoPoint(latitude: random.uniform(-70, 70), longitude: random.longitude())
            var circles: [TestCircle] = []
            let gap = random.uniform(0, 3_000)
            for id in 0..<60 {
                let distance = random.uniform(100_000, 900_000)
                let spot = sphericalDestination(point.latitude, point.longitude, bearing: random.uniform(0, 360), distance: distance)
                let radius = id % 2 == 0 ? distance - gap + random.uniform(-20, 20) : distance + gap + random.uniform(-20, 20)
                circles.append(TestCircle(id: Int32(id), center: GeoPoint(latitude: spot.lat, longitude: spot.lon), radius: radius, margin: 0))
            }
            let index = CircleIndex(capacity: circles.count, cellSizeM: cellSizeM, entriesPerCircle: 16)
            for circle in circles {
                try index.insert(id: circle.id, latitude: circle.center.latitude, longitude: circle.center.longitude, radiusM: circle.radius)
            }
            let expected = fenceEdges(circles).nearestEdgeM(latitude: point.latitude, longitude: point.longitude)!
            #expect(index.nearestEdgeM(point) == expected)
            #expect(index.nearestEdgeM(point, limitM: gap + 10) == min(expected, gap + 10))
        }
    }

    @Test func theEmptyIndexHasNoEdge() throws {
        let index = CircleIndex(capacity: 10)
        #expect(index.nearestEdgeM(latitude: 45, longitude: 7, limitM: 100) == nil)
        #expect(index.nearestEdgeM(GeoPoint(latitude: 45, longitude: 7)) == nil)
        #expect(CircleIndex(capacity: 0).nearestEdgeM(latitude: 0, longitude: 0) == nil)
        try index.insert(id: 1, latitude: 45, longitude: 7, radiusM: 100)
        #expect(index.nearestEdgeM(latitude: 45, longitude: 7) == 100)
        index.removeAll()
        #expect(index.nearestEdgeM(latitude: 45, longitude: 7) == nil)
        // An invalid position has no answer within any limit.
        try index.insert(id: 1, latitude: 45, longitude: 7, radiusM: 100)
        #expect(index.nearestEdgeM(latitude: .nan, longitude: 7, limitM: 30) == 30)
        #expect(index.nearestEdgeM(latitude: 91, longitude: 7) == .infinity)
    }

    /// Removed circles no longer count; the survivors' answer is still the linear scan's.
    @Test func afterRemovals() throws {
        var random = SplitMix64(seed: 77)
        let circles = randomCircles(400, scenario: "city", random: &random)
        let index = CircleIndex(capacity: 400, cellSizeM: 600)
        try index.insert(circles)
        var kept: [TestCircle] = []
        for (position, circle) in circles.enumerated() {
            if position % 3 == 0 { index.remove(id: circle.id) } else { kept.append(circle) }
        }
        let edges = fenceEdges(kept)
        for point in nearestEdgeQueries(200, near: circles, random: &random) {
            let limit = randomLimit(&random)
            let expected = edges.nearestEdgeM(latitude: point.latitude, longitude: point.longitude)!
            #expect(index.nearestEdgeM(point, limitM: limit) == (expected < limit ? expected : limit))
        }
    }

    /// The engine answers over its circular conditions only, as they are added and removed.
    @Test func theEngineForwardsItsCircles() throws {
        let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: 300, events: 16))
        let monitor = FixedName("m")!
        let now = UTCTime(seconds: 1_700_000_000)
        #expect(engine.nearestFenceEdgeM(latitude: 37.3, longitude: -122, limitM: 1_000) == nil)
        engine.add(monitor: monitor, identifier: FixedName("tag")!,
                   condition: .beacon(BeaconIdentityCondition(uuid: BeaconUUID(high: 1, low: 2))), now: now)
        #expect(engine.nearestFenceEdgeM(latitude: 37.3, longitude: -122) == nil)
        var random = SplitMix64(seed: 9)
        let circles = randomCircles(200, scenario: "city", random: &random)
        for circle in circles {
            engine.add(monitor: monitor, identifier: FixedName("c\(circle.id)")!,
                       condition: .circle(CircularGeographicCondition(latitude: circle.center.latitude, longitude: circle.center.longitude,
                                                                      radiusM: circle.radius)), now: now)
        }
        engine.remove(monitor: monitor, identifier: FixedName("c\(circles[5].id)")!)
        var kept = circles
        kept.remove(at: 5)
        let edges = fenceEdges(kept)
        for point in nearestEdgeQueries(100, near: circles, random: &random) {
            let limit = randomLimit(&random)
            let expected = edges.nearestEdgeM(latitude: point.latitude, longitude: point.longitude)!
            #expect(engine.nearestFenceEdgeM(latitude: point.latitude, longitude: point.longitude, limitM: limit)
                    == (expected < limit ? expected : limit))
        }
    }

    /// Nearest-edge queries allocate nothing, on the index and through the engine.
    @Test func queriesAllocateNothing() throws {
        var random = SplitMix64(seed: 13)
        let circles = mixedCircles(250, random: &random)
        let index = CircleIndex(capacity: circles.count, cellSizeM: 1_000)
        let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: circles.count, events: 16))
        let monitor = FixedName("m")!
        for circle in circles {
            try index.insert(id: circle.id, latitude: circle.center.latitude, longitude: circle.center.longitude,
                             radiusM: circle.radius, maxMarginM: circle.margin)
            engine.add(monitor: monitor, identifier: FixedName("c\(circle.id)")!,
                       condition: .circle(CircularGeographicCondition(latitude: circle.center.latitude, longitude: circle.center.longitude,
                                                                      radiusM: circle.radius)), now: UTCTime(seconds: 0))
        }
        let points = nearestEdgeQueries(300, near: circles, random: &random)
        let limits = points.map { _ in randomLimit(&random) }
        var total = 0.0
        var counts: [Int] = []
        for _ in 0..<2 { // the first round warms up
            let counted = allocations {
                for position in 0..<points.count { // an index loop: `for in` allocates in debug builds
                    let point = points[position]
                    let limit = limits[position]
                    total += index.nearestEdgeM(point, limitM: limit) ?? 0
                    total += engine.nearestFenceEdgeM(latitude: point.latitude, longitude: point.longitude, limitM: limit) ?? 0
                }
            }
            counts.append(counted)
        }
        #expect(counts[1] == 0, "allocations per round: \(counts)")
        #expect(total > 0)
    }
}
