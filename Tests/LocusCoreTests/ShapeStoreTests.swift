import AllocCounter
@testable import LocusCore
import TestSupport
import Testing

/// The shape store's cheap placement against the exact one (`GeoPolygon.locate`,
/// `GeoCorridor.locate`): the same side every time, a clearance that never overstates the
/// distance, the exact answer whenever the boundary is within the band; removal that keeps the
/// other shapes whole; no allocation.
@Suite struct ShapeStoreTests {
    /// Random polygons of every size class (10 m to 2,000 km, some across the antimeridian, some
    /// about a pole) and positions in and around them.
    static func polygons(_ random: inout SplitMix64, count: Int) throws -> [(GeoPolygon, center: (Double, Double), radiusM: Double)] {
        var result: [(GeoPolygon, center: (Double, Double), radiusM: Double)] = []
        for index in 0..<count {
            let radius = [10.0, 300, 5_000, 20_000, 400_000, 2_000_000][index % 6]
            var latitude = random.latitude(), longitude = random.longitude()
            if index % 7 == 0 { longitude = 179.99999 }
            if index % 11 == 1 { latitude = 90 }
            if index % 13 == 2 { latitude = -89.9999 }
            let ring = GeoPolygonTests.star(&random, latitude: latitude, longitude: longitude, radiusM: radius, count: 3 + index % 18,
                                            counterclockwise: index % 2 == 0)
            guard let polygon = try? GeoPolygon(latitudes: ring.latitudes, longitudes: ring.longitudes) else { continue }
            result.append((polygon, (latitude, longitude), radius))
        }
        return result
    }

    @Test func theCheapPlacementAgreesWithTheExactLocation() throws {
        var random = SplitMix64(seed: 350)
        let shapes = try Self.polygons(&random, count: 120)
        let store = ShapeStore(shapeCapacity: shapes.count, vertexCapacity: shapes.reduce(0) { $0 + $1.0.count })
        for (id, shape) in shapes.enumerated() { try store.insert(id: Int32(id), polygon: shape.0) }
        var cheap = 0, exact = 0, inside = 0
        for (id, shape) in shapes.enumerated() {
            let cap = try #require(store.cap(id: Int32(id)))
            let widestTube = shape.0.latitudes.indices.map { index in
                let next = (index + 1) % shape.0.count
                return ShapeStore.tubeM(lengthM: Geodesy.distanceM(shape.0.latitudes[index], shape.0.longitudes[index],
                                                                   shape.0.latitudes[next], shape.0.longitudes[next]))
            }.max()!
            for probe in 0..<200 {
                // Most positions near the shape, some right at its edges.
                let p: GeodesicDirect
                if probe % 4 == 0 {
                    let vertex = Int(random.uniform(0, Double(shape.0.count)))
                    p = Geodesy.direct(shape.0.latitudes[vertex], shape.0.longitudes[vertex], azimuthDeg: random.uniform(-180, 180),
                                       distanceM: shape.radiusM * random.uniform(0, 0.01))
                } else {
                    p = Geodesy.direct(shape.center.0, shape.center.1, azimuthDeg: random.uniform(-180, 180), distanceM: shape.radiusM * random.uniform(0, 1.3))
                }
                let point = GeoPoint(latitude: p.latitude, longitude: p.longitude)
                let truth = shape.0.locate(latitude: p.latitude, longitude: p.longitude)
                // Every position of the shape is within its bounding circle.
                if truth.isInside { #expect(Geodesy.distanceM(point, cap.center) <= cap.radiusM, "shape \(id): the bounding circle") }
                let band = [0.0, 5, 50][probe % 3]
                switch store.place(id: Int32(id), point, bandM: band) {
                case .bounded(let isInside, let lower, let upper, _):
                    #expect(isInside == truth.isInside, "shape \(id) at \(p.latitude), \(p.longitude): \(isInside), exactly \(truth)")
                    #expect(lower <= truth.boundaryDistanceM + 1e-6 && truth.boundaryDistanceM <= upper + 1e-6,
                            "shape \(id): [\(lower), \(upper)], exactly \(truth)")
                    // As tight as the edges' tubes, 2τ of the longest edge (0.6 mm for 100 m edges),
                    // and the chord's bounds (micrometres within a kilometre).
                    if lower < 1_000 && upper.isFinite { #expect(upper - lower <= 2 * widestTube + 1e-5, "[\(lower), \(upper)], τ \(widestTube)") }
                    if shape.radiusM <= 20_000 { cheap += 1 }
                case .exact(let located):
                    #expect(located == truth)
                    if shape.radiusM <= 20_000 { exact += 1 }
                }
                if truth.isInside { inside += 1 }
                let bounds = store.boundaryBounds(id: Int32(id), point)
                #expect(bounds.lower <= truth.boundaryDistanceM + 1e-6 && truth.boundaryDistanceM <= bounds.upper + 1e-6,
                        "shape \(id): \(bounds) around \(truth.boundaryDistanceM)")
            }
        }
        // The cheap test places nearly every position around shapes up to 20 km; the exact query
        // is for the ones within a tube's width of an edge (edges of hundreds of kilometres have
        // tubes of kilometres, where the positions near their edges are placed exactly).
        #expect(cheap > 50 * exact && inside > 3_000, "\(cheap) placed cheaply, \(exact) exactly, \(inside) inside")
    }

    @Test func corridorsArePlacedByTheirBand() throws {
        var random = SplitMix64(seed: 351)
        var corridors: [GeoCorridor] = []
        for index in 0..<40 {
            let (latitudes, longitudes) = GeoCorridorTests.route(&random, antimeridian: index % 5 == 0, legs: 1 + index % 8, lengths: 20...20_000, turn: 120)
            corridors.append(try GeoCorridor(latitudes: latitudes, longitudes: longitudes, widthM: [8.0, 30, 400][index % 3]))
        }
        let store = ShapeStore(shapeCapacity: 40, vertexCapacity: 400)
        for (id, corridor) in corridors.enumerated() { try store.insert(id: Int32(id), corridor: corridor) }
        var inside = 0, outside = 0, exact = 0
        for (id, corridor) in corridors.enumerated() {
            for _ in 0..<300 {
                let leg = Int(random.uniform(0, Double(corridor.latitudes.count - 1)))
                let p = Geodesy.direct(corridor.latitudes[leg], corridor.longitudes[leg], azimuthDeg: random.uniform(-180, 180),
                                       distanceM: random.uniform(0, 3 * corridor.widthM))
                let point = GeoPoint(latitude: p.latitude, longitude: p.longitude)
                let truth = corridor.locate(latitude: p.latitude, longitude: p.longitude)
                switch store.place(id: Int32(id), point, bandM: 2) {
                case .bounded(let isInside, let lower, let upper, _):
                    #expect(isInside == truth.isInside && lower <= truth.boundaryDistanceM + 1e-6 && truth.boundaryDistanceM <= upper + 1e-6,
                            "corridor \(id): \(isInside) [\(lower), \(upper)], \(truth)")
                    if isInside { inside += 1 } else { outside += 1 }
                case .exact(let located):
                    #expect(located == truth)
                    exact += 1
                }
            }
        }
        // Within a tube's width of the band's edge only (8 mm for legs of 20 km).
        #expect(inside > 1_000 && outside > 4_000 && exact < 3_000, "\(inside) inside, \(outside) outside, \(exact) exactly")
    }

    @Test func removingAShapeKeepsTheOthersWhole() throws {
        var random = SplitMix64(seed: 352)
        let shapes = try Self.polygons(&random, count: 30).filter { $0.radiusM <= 20_000 }
        let vertices = shapes.reduce(0) { $0 + $1.0.count }
        let store = ShapeStore(shapeCapacity: shapes.count, vertexCapacity: vertices)
        for (id, shape) in shapes.enumerated() { try store.insert(id: Int32(id), polygon: shape.0) }
        #expect(store.verticesInUse == vertices)
        let big = GeoPolygonTests.star(&random, latitude: 10, longitude: 20, radiusM: 1_000, count: vertices, counterclockwise: true)
        let bigPolygon = try GeoPolygon(latitudes: big.latitudes, longitudes: big.longitudes)
        // Refused for want of room: the shape it was to replace is gone, the others stay.
        #expect(throws: ShapeStore.Failure.vertexCapacityExceeded(capacity: vertices)) { try store.insert(id: 0, polygon: bigPolygon) }
        #expect(!store.contains(id: 0) && store.verticesInUse == vertices - shapes[0].0.count)
        for id in stride(from: 1, to: shapes.count, by: 3) { #expect(store.remove(id: Int32(id))) }
        #expect(!store.remove(id: 1))
        for (id, shape) in shapes.enumerated() where id % 3 != 1 && id != 0 {
            #expect(store.contains(id: Int32(id)))
            for _ in 0..<20 {
                let p = Geodesy.direct(shape.center.0, shape.center.1, azimuthDeg: random.uniform(-180, 180), distanceM: shape.radiusM * random.uniform(0, 1.2))
                let truth = shape.0.locate(latitude: p.latitude, longitude: p.longitude)
                #expect(store.locate(id: Int32(id), GeoPoint(latitude: p.latitude, longitude: p.longitude)) == truth)
            }
        }
    }

    @Test func placingAllocatesNothing() throws {
        var random = SplitMix64(seed: 353)
        let shapes = try Self.polygons(&random, count: 12)
        let store = ShapeStore(shapeCapacity: shapes.count, vertexCapacity: 400)
        for (id, shape) in shapes.enumerated() { try store.insert(id: Int32(id), polygon: shape.0) }
        // Positions in and around every shape: the cheap test, and the exact one near edges.
        let points = (0..<240).map { index in
            let shape = shapes[index % shapes.count]
            let p = Geodesy.direct(shape.center.0, shape.center.1, azimuthDeg: random.uniform(-180, 180), distanceM: shape.radiusM * random.uniform(0, 1.3))
            return GeoPoint(latitude: p.latitude, longitude: p.longitude)
        }
        var inside = 0
        let count = allocations {
            for position in 0..<points.count { // an index loop: `for in` allocates in debug builds
                for id in 0..<shapes.count {
                    if store.place(id: Int32(id), points[position], bandM: 10).isInside { inside += 1 }
                    _ = store.boundaryBounds(id: Int32(id), points[position])
                }
            }
        }
        #expect(count == 0 && inside > 20, "\(inside) inside")
    }
}
