import AllocCounter
import Foundation
import Testing
@testable import LocusCore
import TestSupport

struct TestCircle {
    var id: Int32
    var center: GeoPoint
    var radius: Double
    var margin: Double
}

/// Circles clustered the way a deployment might have them, in awkward places too.
extension CircleIndex {
    /// Inserts every test circle, with its margin.
    func insert(_ circles: [TestCircle]) throws {
        for circle in circles {
            try insert(id: circle.id, latitude: circle.center.latitude, longitude: circle.center.longitude,
                       radiusM: circle.radius, maxMarginM: circle.margin)
        }
    }
}

func randomCircles(_ count: Int, scenario: String, random: inout SplitMix64) -> [TestCircle] {
    var circles: [TestCircle] = []
    for index in 0..<count {
        var lat: Double, lon: Double
        switch scenario {
        case "antimeridian":
            lat = random.uniform(-60, 70)
            lon = (random.unit() < 0.5 ? -1 : 1) * random.uniform(179.9, 180)
        case "polar":
            lat = (random.unit() < 0.5 ? -1 : 1) * random.uniform(89.9, 90)
            lon = random.longitude()
        case "city":
            lat = 37.3 + random.uniform(-0.1, 0.1)
            lon = -122.0 + random.uniform(-0.1, 0.1)
        default:
            lat = random.latitude()
            lon = random.longitude()
        }
        // Mostly geofence-sized, some huge ones (the overflow list), some tiny.
        let radius: Double
        switch index % 20 {
        case 0: radius = random.logUniform(50_000, 3_000_000)
        case 1: radius = random.uniform(0, 1)
        default: radius = random.logUniform(5, 5_000)
        }
        circles.append(TestCircle(id: Int32(index * 7 + 3), center: GeoPoint(latitude: lat, longitude: lon),
                                  radius: radius, margin: random.uniform(0, 30)))
    }
    return circles
}

/// Query points: around circle edges (inside and outside), at centres, and anywhere.
func randomQueries(_ count: Int, near circles: [TestCircle], random: inout SplitMix64) -> [(GeoPoint, Double)] {
    let accuracies = [0.0, 3, 25, 150, 2_000, 40_000]
    var queries: [(GeoPoint, Double)] = []
    for index in 0..<count {
        let accuracy = accuracies[index % accuracies.count]
        let circle = circles[Int(random.next() % UInt64(circles.count))]
        let point: GeoPoint
        switch index % 3 {
        case 0:
            let distance = max(0, circle.radius + circle.margin + accuracy + random.uniform(-20, 20))
            let spot = sphericalDestination(circle.center.latitude, circle.center.longitude, bearing: random.uniform(0, 360), distance: distance)
            point = GeoPoint(latitude: spot.lat, longitude: spot.lon)
        case 1:
            let spot = sphericalDestination(circle.center.latitude, circle.center.longitude, bearing: random.uniform(0, 360), distance: random.uniform(0, circle.radius))
            point = GeoPoint(latitude: spot.lat, longitude: spot.lon)
        default:
            point = GeoPoint(latitude: random.latitude(), longitude: random.longitude())
        }
        queries.append((point, accuracy))
    }
    return queries
}

func candidates(_ index: CircleIndex, _ point: GeoPoint, _ accuracy: Double) -> [Int32] {
    var ids: [Int32] = []
    index.forEachCandidate(near: point, accuracyM: accuracy) { ids.append($0) }
    return ids
}

@Suite struct CircleIndexTests {
    /// Every circle whose reach plus the accuracy contains the point (by the exact distance) is
    /// reported, once; nothing is reported whose chord already rules it out.
    @Test(arguments: ["global", "city", "antimeridian", "polar"])
    func candidatesAreASupersetOfTheExactAnswer(scenario: String) throws {
        var random = SplitMix64(seed: UInt64(scenario.utf8.count) &* 1_000_003)
        let circles = randomCircles(600, scenario: scenario, random: &random)
        let index = CircleIndex(capacity: 600, cellSizeM: scenario == "city" ? 1_000 : 5_000)
        try index.insert(circles)
        #expect(index.count == 600)
        var reported = 0, exact = 0
        for (point, accuracy) in randomQueries(900, near: circles, random: &random) {
            let found = candidates(index, point, accuracy)
            #expect(Set(found).count == found.count, "duplicates")
            let foundSet = Set(found)
            for circle in circles {
                let reach = circle.radius + circle.margin + accuracy
                let distance = Geodesy.distanceM(point, circle.center)
                if distance <= reach {
                    exact += 1
                    #expect(foundSet.contains(circle.id), "\(scenario): missed circle \(circle.id) at \(distance) m, reach \(reach); point \(point.latitude), \(point.longitude)")
                }
                if foundSet.contains(circle.id) {
                    #expect(Geodesy.chordM(point, circle.center) <= reach + 1e-3)
                }
            }
            reported += found.count
        }
        print("circle index \(scenario): \(exact) true hits, \(reported) reported, \(index.overflowCount) circles in overflow, \(index.entriesInUse) cell entries")
    }

    @Test func removeAndReplace() throws {
        var random = SplitMix64(seed: 42)
        let circles = randomCircles(400, scenario: "city", random: &random)
        let index = CircleIndex(capacity: 400, cellSizeM: 800)
        try index.insert(circles)
        var kept: [TestCircle] = []
        for (position, circle) in circles.enumerated() {
            if position % 2 == 0 {
                #expect(index.remove(id: circle.id))
                #expect(!index.contains(id: circle.id))
            } else {
                kept.append(circle)
            }
        }
        #expect(!index.remove(id: 999_999))
        #expect(index.count == kept.count)
        for circle in kept { #expect(index.circle(id: circle.id)?.radiusM == circle.radius) }
        let removed = Set(circles.enumerated().filter { $0.offset % 2 == 0 }.map { $0.element.id })
        for (point, accuracy) in randomQueries(800, near: circles, random: &random) {
            let found = Set(candidates(index, point, accuracy))
            #expect(found.isDisjoint(with: removed))
            for circle in kept where Geodesy.distanceM(point, circle.center) <= circle.radius + circle.margin + accuracy {
                #expect(found.contains(circle.id))
            }
        }
        // Replacing moves the circle: its old place no longer reports it.
        let moved = kept[0]
        try index.insert(id: moved.id, latitude: -33.86, longitude: 151.21, radiusM: 100)
        #expect(index.count == kept.count)
        #expect(!candidates(index, moved.center, 0).contains(moved.id))
        #expect(candidates(index, GeoPoint(latitude: -33.86, longitude: 151.21), 0) == [moved.id])
        // Emptying returns every cell entry to the pool.
        index.removeAll()
        #expect(index.count == 0 && index.entriesInUse == 0 && index.overflowCount == 0)
        #expect(candidates(index, moved.center, 1e6).isEmpty)
    }

    @Test func aFullIndexReportsCapacityExceeded() throws {
        let index = CircleIndex(capacity: 3)
        for id in Int32(0)..<3 { try index.insert(id: id, latitude: 10, longitude: Double(id), radiusM: 50) }
        #expect(throws: CircleIndex.Failure.capacityExceeded(capacity: 3)) {
            try index.insert(id: 3, latitude: 10, longitude: 5, radiusM: 50)
        }
        // Replacing an existing id needs no new slot.
        try index.insert(id: 1, latitude: 11, longitude: 1, radiusM: 60)
        #expect(index.count == 3)
        #expect(throws: CircleIndex.Failure.invalidCircle) { try index.insert(id: 9, latitude: 91, longitude: 0, radiusM: 5) }
        #expect(throws: CircleIndex.Failure.invalidCircle) { try index.insert(id: 9, latitude: 0, longitude: .nan, radiusM: 5) }
        #expect(throws: CircleIndex.Failure.invalidCircle) { try index.insert(id: 9, latitude: 0, longitude: 0, radiusM: -1) }
        let empty = CircleIndex(capacity: 0)
        #expect(throws: CircleIndex.Failure.capacityExceeded(capacity: 0)) { try empty.insert(id: 0, latitude: 0, longitude: 0, radiusM: 1) }
    }

    /// With a tiny cell-entry pool most circles end up in the overflow list; answers stay right.
    @Test func anExhaustedEntryPoolFallsBackToTheOverflowList() throws {
        var random = SplitMix64(seed: 5)
        let circles = randomCircles(300, scenario: "city", random: &random)
        let index = CircleIndex(capacity: 300, cellSizeM: 300, entriesPerCircle: 1)
        try index.insert(circles)
        #expect(index.overflowCount > 0)
        #expect(index.entriesInUse <= index.entryCapacity)
        for (point, accuracy) in randomQueries(300, near: circles, random: &random) {
            let found = Set(candidates(index, point, accuracy))
            for circle in circles where Geodesy.distanceM(point, circle.center) <= circle.radius + circle.margin + accuracy {
                #expect(found.contains(circle.id))
            }
        }
    }

    @Test func nearestEdgeDistanceIsALowerBound() throws {
        var random = SplitMix64(seed: 11)
        let circles = randomCircles(200, scenario: "city", random: &random)
        let index = CircleIndex(capacity: 200)
        #expect(index.nearestEdgeDistanceM(GeoPoint(latitude: 0, longitude: 0)) == .infinity)
        try index.insert(circles)
        var tightChecks = 0
        for (point, _) in randomQueries(300, near: circles, random: &random) {
            let gaps = circles.map { (gap: abs(Geodesy.distanceM(point, $0.center) - $0.radius), circle: $0) }
            let nearest = gaps.min { $0.gap < $1.gap }!
            let bound = index.nearestEdgeDistanceM(point)
            #expect(bound <= nearest.gap + 1e-9)
            // Tight when the nearest edge belongs to a circle whose centre is near (the chord
            // bound's error grows with the cube of the distance to the centre).
            if Geodesy.distanceM(point, nearest.circle.center) < 10_000 {
                tightChecks += 1
                #expect(bound >= nearest.gap - 2e-3, "loose: \(bound) vs \(nearest.gap)")
            }
        }
        #expect(tightChecks > 100)
    }

    /// Queries, inserts and removes after start-up allocate nothing.
    @Test func queriesAllocateNothing() throws {
        var random = SplitMix64(seed: 3)
        let circles = randomCircles(1_000, scenario: "city", random: &random)
        let index = CircleIndex(capacity: 1_000, cellSizeM: 1_000)
        try index.insert(circles)
        let queries = randomQueries(1_000, near: circles, random: &random)
        var seen = 0
        var counts: [Int] = []
        for _ in 0..<2 { // the first round warms up
            let counted = allocations {
                for position in 0..<queries.count { // an index loop: `for in` allocates in debug builds
                    let (point, accuracy) = queries[position]
                    index.forEachCandidate(near: point, accuracyM: accuracy) { id in
                        seen &+= Int(id)
                        _ = Geodesy.compare(point, center: point, radiusM: 10, marginM: 1)
                    }
                }
                let circle = circles[0]
                index.remove(id: circle.id)
                try? index.insert(id: circle.id, latitude: circle.center.latitude, longitude: circle.center.longitude, radiusM: circle.radius)
            }
            counts.append(counted)
        }
        #expect(counts[1] == 0, "allocations per round: \(counts)")
        #expect(seen != 0)
    }
}
