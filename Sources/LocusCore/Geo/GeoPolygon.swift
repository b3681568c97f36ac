// A polygon on WGS84 whose edges are geodesics: inside or outside, and how far from the
// boundary, exact to nanometres. The exact decision behind the polygon conditions; the
// monitor's index narrows which polygons a fix is tested against.

/// Why a ring of vertices is not a polygon the agent accepts.
public enum ShapeError: Error, Equatable, Sendable {
    /// Fewer than three distinct vertices.
    case tooFewVertices(Int)
    /// More than `GeoPolygon.maximumVertices`.
    case tooManyVertices(Int)
    /// Vertex `index` is not a position (latitude beyond ±90°, not finite).
    case invalidVertex(index: Int)
    /// Vertex `index` repeats the one before it.
    case repeatedVertex(index: Int)
    /// The ring turns straight back at vertex `index` (a spike of no width).
    case doublesBack(index: Int)
    /// The edge from vertex `index` is longer than a quarter meridian (about 10,000 km): such
    /// an edge is ambiguous to draw and beyond the exact edge query's reach.
    case edgeTooLong(index: Int, lengthM: Double)
    /// Edges `edge` and `other` (each from that vertex to the next) cross: the ring is not simple.
    case selfIntersecting(edge: Int, other: Int)
    /// The ring turns as much left as right: it encloses no side more than the other (a
    /// degenerate ring, or one as large as a hemisphere).
    case noInterior
}

/// Where a position lies with respect to a polygon.
public struct PolygonLocation: Equatable, Sendable {
    /// Inside, or on the boundary.
    public var isInside: Bool
    /// The geodesic distance to the nearest point of the boundary, metres.
    public var boundaryDistanceM: Double
    /// The edge that point is on (from vertex `nearestEdge` to the next).
    public var nearestEdge: Int
}

/// A simple polygon with geodesic edges, given as its ring of vertices (not repeating the first
/// at the end; either orientation). The interior is the side the ring turns toward (the
/// smaller of the two regions, for rings smaller than a hemisphere).
public struct GeoPolygon: Equatable, Sendable {
    public let latitudes: [Double]
    public let longitudes: [Double]
    /// The interior is left of each edge (the ring runs counterclockwise seen from above).
    let interiorOnLeft: Bool
    /// At each vertex, the ring turns toward the interior: a convex corner.
    let convex: [Bool]

    public var count: Int { latitudes.count }

    public init(latitudes: [Double], longitudes: [Double]) throws(ShapeError) {
        precondition(latitudes.count == longitudes.count, "a latitude and a longitude per vertex")
        var lats = latitudes, lons = longitudes
        // A ring closed by repeating its first vertex is taken as written once.
        if lats.count > 3, lats.first == lats.last, lons.first == lons.last {
            lats.removeLast()
            lons.removeLast()
        }
        guard lats.count >= 3 else { throw .tooFewVertices(lats.count) }
        guard lats.count <= GeoPolygon.maximumVertices else { throw .tooManyVertices(lats.count) }
        for index in lats.indices where !GeoPoint(latitude: lats[index], longitude: lons[index]).isValid {
            throw .invalidVertex(index: index)
        }
        // The turn at each vertex: the outgoing edge's azimuth less the incoming one's (azimuths
        // run clockwise, so a right turn is positive).
        var turns = [Double](repeating: 0, count: lats.count)
        var lengths = [Double](repeating: 0, count: lats.count)
        var arriving = 0.0
        for index in 0...lats.count {
            let from = index % lats.count, to = (index + 1) % lats.count
            let edge = Geodesy.inverseSolution(lats[from], lons[from], lats[to], lons[to])
            if index < lats.count {
                guard edge.distanceM > 0 else { throw .repeatedVertex(index: to) }
                guard edge.distanceM <= GeoPolygon.longestEdgeM else { throw .edgeTooLong(index: from, lengthM: edge.distanceM) }
                lengths[from] = edge.distanceM
            }
            if index > 0 { turns[from] = Geodesy.angleNormalize(edge.azimuth1Deg - arriving) }
            arriving = edge.azimuth2Deg
        }
        if let spike = turns.firstIndex(where: { abs($0) > 180 - 1e-9 }) { throw .doublesBack(index: spike) }
        if let (edge, other) = GeoPolygon.crossing(lats, lons, lengths: lengths) { throw .selfIntersecting(edge: edge, other: other) }
        let total = turns.reduce(0, +)
        // A simple ring turns through about ±360° (less the enclosed area's excess).
        guard abs(total) > 180 else { throw .noInterior }
        self.latitudes = lats
        self.longitudes = lons
        let onLeft = total < 0
        interiorOnLeft = onLeft
        convex = turns.map { onLeft ? $0 < 0 : $0 > 0 }
    }

    /// A ring checked before (the shape store's copy).
    init(checked latitudes: [Double], _ longitudes: [Double], interiorOnLeft: Bool, convex: [Bool]) {
        self.latitudes = latitudes
        self.longitudes = longitudes
        self.interiorOnLeft = interiorOnLeft
        self.convex = convex
    }

    /// The first pair of edges that are not neighbours and cross, if any: each edge's ends lie on
    /// opposite sides of the other's geodesic (the sides exact: `edgeProximity`), or one edge
    /// passes through an end of the other. A pair whose chords are farther apart than their
    /// tubes (`ShapeStore.tubeM`: each geodesic is within its tube of its chord) cannot meet and
    /// is skipped on a few dozen multiplications. Every pair is looked at: for the vertices of a
    /// site's shapes, once at load.
    static func crossing(_ lats: [Double], _ lons: [Double], lengths: [Double]) -> (Int, Int)? {
        let count = lats.count
        guard count > 3 else { return nil }
        let points = lats.indices.map { GeoPoint(latitude: lats[$0], longitude: lons[$0]) }
        let tubes = lengths.map { ShapeStore.tubeM(lengthM: $0) }
        func side(_ index: Int, _ edge: Int) -> (distanceM: Double, isLeft: Bool) {
            let next = (edge + 1) % count
            let proximity = Geodesy.edgeProximity(lats[index], lons[index], lats[edge], lons[edge], lats[next], lons[next])
            return (proximity.distanceM, proximity.isLeft)
        }
        for edge in 0..<(count - 2) {
            for other in (edge + 2)..<count where !(edge == 0 && other == count - 1) {
                let apart = ShapeStore.segmentDistanceM(points[edge], points[(edge + 1) % count], points[other], points[(other + 1) % count])
                if apart > tubes[edge] + tubes[other] { continue }
                let (a, b) = (side(other, edge), side((other + 1) % count, edge))
                let (c, d) = (side(edge, other), side((edge + 1) % count, other))
                if a.distanceM == 0 || b.distanceM == 0 || c.distanceM == 0 || d.distanceM == 0 { return (edge, other) }
                if a.isLeft != b.isLeft && c.isLeft != d.isLeft { return (edge, other) }
            }
        }
        return nil
    }

    /// The most vertices a polygon (or points a corridor) may have: a shape, with its record's
    /// other fields and last event, fits one log record (16 bytes a vertex), and its JSON (about 25
    /// bytes a vertex) a control reply.
    public static let maximumVertices = 1_000

    /// A quarter meridian, rounded down: the longest edge accepted.
    public static let longestEdgeM = 10_000_000.0

    /// Inside or out, and the distance to the boundary: the nearest point of every edge (exact),
    /// the side of the nearest edge, or at a corner the sides of both edges that meet there.
    public func locate(latitude: Double, longitude: Double) -> PolygonLocation {
        GeoPolygon.locate(latitude, longitude, count: count, interiorOnLeft: interiorOnLeft,
                          vertex: { (latitudes[$0], longitudes[$0]) }, convex: { convex[$0] })
    }

    /// `locate` over any store of a ring's vertices (the monitor's shape store keeps its own).
    @inline(__always)
    static func locate(_ latitude: Double, _ longitude: Double, count: Int, interiorOnLeft: Bool,
                       vertex: (Int) -> (latitude: Double, longitude: Double), convex: (Int) -> Bool) -> PolygonLocation {
        func proximity(_ from: Int, _ to: Int) -> EdgeProximity {
            let (a, b) = (vertex(from), vertex(to))
            return Geodesy.edgeProximity(latitude, longitude, a.latitude, a.longitude, b.latitude, b.longitude)
        }
        var best = EdgeProximity(latitude: 0, longitude: 0, distanceM: .infinity, fraction: 0, isLeft: false)
        var bestEdge = 0
        for edge in 0..<count {
            let candidate = proximity(edge, (edge + 1) % count)
            if candidate.distanceM < best.distanceM {
                best = candidate
                bestEdge = edge
            }
        }
        if best.distanceM == 0 { return PolygonLocation(isInside: true, boundaryDistanceM: 0, nearestEdge: bestEdge) }
        // The nearest point is a corner when it is an end of the edge: decide with both edges.
        let corner: Int? = best.fraction == 0 ? bestEdge : best.fraction == 1 ? (bestEdge + 1) % count : nil
        guard let corner else {
            return PolygonLocation(isInside: best.isLeft == interiorOnLeft, boundaryDistanceM: best.distanceM, nearestEdge: bestEdge)
        }
        let before = (corner + count - 1) % count, after = (corner + 1) % count
        let insideIncoming = proximity(before, corner).isLeft == interiorOnLeft
        let insideOutgoing = proximity(corner, after).isLeft == interiorOnLeft
        // A convex corner's inside is both edges' inner sides; a reflex corner's, either one's.
        let inside = convex(corner) ? insideIncoming && insideOutgoing : insideIncoming || insideOutgoing
        return PolygonLocation(isInside: inside, boundaryDistanceM: best.distanceM, nearestEdge: bestEdge)
    }
}
