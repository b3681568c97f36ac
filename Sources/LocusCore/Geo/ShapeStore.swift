/// The monitor's polygons and corridors, with what the hot loop needs precomputed, in storage
/// allocated once: a fix is placed against a shape in a few dozen instructions per edge, and the
/// exact edge query (`GeoPolygon.locate`, about a hundred thousand instructions per edge) runs
/// only for a fix within a millimetre or so of an edge, or whose decision threshold falls inside
/// the cheap bracket.
///
/// Shapes are stored under the monitor's slot numbers (`0..<shapeCapacity`, 104 bytes each),
/// their vertices in one pool of `vertexCapacity` records (120 bytes each), packed: removing a
/// shape moves the vertices after it down.
///
/// **The bracket.** Each edge's geodesic, and the plane section of the ellipsoid through the
/// centre and its ends (the "great ellipse" arc), both lie within a tube of radius τ around the
/// straight chord between the ends: a curve of length L whose curvature is at most κ strays at
/// most (1 − cos(κL/2))/κ from its chord, and both curves lie on the ellipsoid, whose curvature
/// is at most a/b² (their lengths differ by less than 1 %). So the straight-line distance c from
/// a fix to the chord brackets its distance to the edge: c − τ <= distance <= c + τ, and the
/// geodesic distance is within the chord bounds of that. τ is 0.2 mm for a 100 m edge.
///
/// **Inside or out** (farther than 2τ + 0.1 mm from every edge's chord): the crossing number of
/// the arc from the fix to a reference point outside the shape, with each edge taken as its
/// great-ellipse arc (exact plane-side tests in Earth-centred coordinates). The arcs differ from
/// the geodesic edges only inside their tubes, a thin sliver between the same two ends, so the
/// count's parity is the geodesic polygon's whenever neither the fix nor the reference point is
/// in a sliver. Each vertex's side of the arc's plane is computed once and shared by its two
/// edges, so a vertex on that plane counts consistently (as if moved a rounding error off it).
public final class ShapeStore {
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// The vertex pool is full ([capacity] vertices).
        case vertexCapacityExceeded(capacity: Int)

        public var description: String {
            switch self {
            case .vertexCapacityExceeded(let capacity): "more than \(capacity) vertices in polygons and corridors; raise [capacity] vertices"
            }
        }
    }

    /// Where a fix lies against a shape.
    public enum Placement: Equatable, Sendable {
        /// Inside or out, the distance to the boundary between `lowerM` and `upperM` (a few tenths
        /// of a millimetre apart near edges of a hundred metres; `upperM` is infinite beyond the
        /// bounding circle), and the edge (or corridor segment) whose lower bound is least, or -1.
        case bounded(inside: Bool, lowerM: Double, upperM: Double, edge: Int)
        /// Within an edge's tube (a millimetre or so of the boundary), where the cheap test cannot
        /// tell, or a shape too large for it: the exact location.
        case exact(PolygonLocation)

        /// Inside, as the cheap test or the exact one says.
        public var isInside: Bool {
            switch self {
            case .bounded(let inside, _, _, _): return inside
            case .exact(let location): return location.isInside
            }
        }

        /// A lower bound of the distance to the boundary (the exact one when exact).
        public var clearanceM: Double {
            switch self {
            case .bounded(_, let lower, _, _): return lower
            case .exact(let location): return location.boundaryDistanceM
            }
        }
    }

    public enum Kind: UInt8, Sendable { case polygon, corridor }

    /// A shape's bounding circle: every point of it (of a corridor, of its band) is inside.
    public struct Cap: Equatable, Sendable {
        public var center: GeoPoint
        public var radiusM: Double
    }

    /// One vertex and the edge leaving it (a corridor's last point has no edge).
    struct Edge {
        var ax: Double, ay: Double, az: Double
        /// To the next vertex.
        var dx: Double, dy: Double, dz: Double
        /// The unit normal of the plane through the Earth's centre and the edge, turned so that
        /// the shape's reference point is on its positive side.
        var nx: Double, ny: Double, nz: Double
        var inverseLengthSquared: Double
        /// τ: the geodesic and the great-ellipse arc are within this of the chord.
        var tubeM: Double
        /// The chord's length plus 2τ and the slack: a position farther than this plus d from the
        /// vertex is farther than d + 2τ from the edge's chord (the triangle inequality).
        var reachM: Double
        var latitude: Double, longitude: Double
        /// The normal was turned: for the crossing test the edge runs from the next vertex.
        var flipped: Bool
        /// Polygons: the ring turns toward the interior at this vertex.
        var convex: Bool

        /// The squared straight-line distance from a position (`w` from this vertex) to the
        /// edge's chord: its foot clamped to the chord's ends.
        @inline(__always)
        func chordSquared(_ wx: Double, _ wy: Double, _ wz: Double) -> Double {
            let t = min(max((wx * dx + wy * dy + wz * dz) * inverseLengthSquared, 0), 1)
            let (fx, fy, fz) = (wx - t * dx, wy - t * dy, wz - t * dz)
            return fx * fx + fy * fy + fz * fz
        }
    }

    struct Shape {
        var cap: Cap
        var halfWidthM: Double
        /// How deep inside a fix can be (a lower bound of the largest inscribed circle's radius).
        var insideReachM: Double
        var rx: Double, ry: Double, rz: Double
        var firstEdge: Int32
        var count: Int32
        var kind: Kind
        var interiorOnLeft: Bool
        /// Too large for the cheap test (a bounding circle beyond 6,000 km): always exact.
        var exactOnly: Bool
        var inUse: Bool
    }

    public let shapeCapacity: Int
    public let vertexCapacity: Int
    @exclusivity(unchecked) public private(set) var verticesInUse = 0
    @exclusivity(unchecked) public private(set) var count = 0
    private let shapes: UnsafeMutablePointer<Shape>
    private let edges: UnsafeMutablePointer<Edge>
    /// Bytes reserved; pages of slots and vertices never used are never touched.
    public var reservedBytes: Int { shapeCapacity * MemoryLayout<Shape>.stride + vertexCapacity * MemoryLayout<Edge>.stride }

    /// Beyond this bounding radius a shape is always decided exactly: the arcs to its reference
    /// point would near half the globe.
    static let cheapRadiusLimitM = 6_000_000.0
    /// Rounding allowance of the cheap test, metres: its differences of nearby Earth-centred
    /// coordinates are exact to nanometres.
    static let slackM = 1e-4
    /// a/b²: the largest curvature of a curve on the ellipsoid that is a geodesic or plane section.
    static let curvature = WGS84.equatorialRadiusM / (WGS84.polarRadiusM * WGS84.polarRadiusM)

    public init(shapeCapacity: Int, vertexCapacity: Int) {
        self.shapeCapacity = max(0, shapeCapacity)
        self.vertexCapacity = max(0, vertexCapacity)
        shapes = .allocate(capacity: max(1, self.shapeCapacity))
        edges = .allocate(capacity: max(1, self.vertexCapacity))
        // Slots are marked unused lazily: `inUse` is read only for ids below `marked`.
    }

    deinit {
        shapes.deallocate()
        edges.deallocate()
    }

    /// Slots 0..<marked have their `inUse` written.
    @exclusivity(unchecked) private var marked = 0

    private func mark(upTo id: Int) {
        while marked <= id {
            (shapes + marked).initialize(to: Shape(cap: Cap(center: GeoPoint(latitude: 0, longitude: 0), radiusM: 0), halfWidthM: 0, insideReachM: 0,
                                                   rx: 0, ry: 0, rz: 0, firstEdge: 0, count: 0, kind: .polygon,
                                                   interiorOnLeft: true, exactOnly: true, inUse: false))
            marked += 1
        }
    }

    public func contains(id: Int32) -> Bool { Int(id) < marked && id >= 0 && shapes[Int(id)].inUse }

    public func cap(id: Int32) -> Cap? { contains(id: id) ? shapes[Int(id)].cap : nil }

    public func kind(id: Int32) -> Kind? { contains(id: id) ? shapes[Int(id)].kind : nil }

    // MARK: - Insert and remove

    @discardableResult
    public func insert(id: Int32, polygon: GeoPolygon) throws(Failure) -> Cap {
        try insert(id: id, kind: .polygon, latitudes: polygon.latitudes, longitudes: polygon.longitudes, halfWidthM: 0,
                   interiorOnLeft: polygon.interiorOnLeft, convex: polygon.convex)
    }

    @discardableResult
    public func insert(id: Int32, corridor: GeoCorridor) throws(Failure) -> Cap {
        try insert(id: id, kind: .corridor, latitudes: corridor.latitudes, longitudes: corridor.longitudes, halfWidthM: corridor.widthM / 2,
                   interiorOnLeft: true, convex: [])
    }

    private func insert(id: Int32, kind: Kind, latitudes: [Double], longitudes: [Double], halfWidthM: Double,
                        interiorOnLeft: Bool, convex: [Bool]) throws(Failure) -> Cap {
        precondition(id >= 0 && Int(id) < shapeCapacity, "a shape's id is a slot number")
        remove(id: id)
        let vertices = latitudes.count
        guard vertices <= vertexCapacity - verticesInUse else { throw .vertexCapacityExceeded(capacity: vertexCapacity) }
        mark(upTo: Int(id))
        let first = verticesInUse
        let segments = kind == .polygon ? vertices : vertices - 1
        var widestTube = 0.0
        for index in 0..<vertices {
            let a = GeoPoint(latitude: latitudes[index], longitude: longitudes[index])
            var edge = Edge(ax: a.x, ay: a.y, az: a.z, dx: 0, dy: 0, dz: 0, nx: 0, ny: 0, nz: 0, inverseLengthSquared: 0, tubeM: 0, reachM: 0,
                            latitude: a.latitude, longitude: a.longitude, flipped: false, convex: index < convex.count ? convex[index] : false)
            if index < segments {
                let next = (index + 1) % vertices
                let b = GeoPoint(latitude: latitudes[next], longitude: longitudes[next])
                (edge.dx, edge.dy, edge.dz) = (b.x - a.x, b.y - a.y, b.z - a.z)
                let lengthSquared = edge.dx * edge.dx + edge.dy * edge.dy + edge.dz * edge.dz
                edge.inverseLengthSquared = 1 / lengthSquared
                // A × (B − A): the plane's normal, computed from the short difference for precision.
                let (nx, ny, nz) = (a.y * edge.dz - a.z * edge.dy, a.z * edge.dx - a.x * edge.dz, a.x * edge.dy - a.y * edge.dx)
                let norm = LibM.sqrt(nx * nx + ny * ny + nz * nz)
                (edge.nx, edge.ny, edge.nz) = (nx / norm, ny / norm, nz / norm)
                edge.tubeM = ShapeStore.tubeM(lengthM: ShapeStore.lengthBoundM(a, b))
                edge.reachM = LibM.sqrt(lengthSquared) + 2 * edge.tubeM + ShapeStore.slackM
                widestTube = max(widestTube, edge.tubeM)
            }
            (edges + first + index).initialize(to: edge)
        }
        verticesInUse += vertices
        var shape = Shape(cap: Cap(center: GeoPoint(latitude: 0, longitude: 0), radiusM: 0), halfWidthM: halfWidthM, insideReachM: halfWidthM,
                          rx: 0, ry: 0, rz: 0,
                          firstEdge: Int32(first), count: Int32(vertices), kind: kind, interiorOnLeft: interiorOnLeft,
                          exactOnly: kind == .polygon, inUse: true)
        shape.cap = ShapeStore.boundingCap(edges + first, count: vertices, reachM: widestTube + halfWidthM)
        if kind == .polygon, shape.cap.radiusM <= ShapeStore.cheapRadiusLimitM, let reference = chooseReference(shape, widestTube: widestTube) {
            (shape.rx, shape.ry, shape.rz) = (reference.x, reference.y, reference.z)
            shape.exactOnly = false
            for index in 0..<segments {
                let edge = edges + first + index
                let side = edge.pointee.nx * (reference.x - edge.pointee.ax) + edge.pointee.ny * (reference.y - edge.pointee.ay)
                    + edge.pointee.nz * (reference.z - edge.pointee.az)
                if side < 0 {
                    (edge.pointee.nx, edge.pointee.ny, edge.pointee.nz) = (-edge.pointee.nx, -edge.pointee.ny, -edge.pointee.nz)
                    edge.pointee.flipped = true
                }
            }
        }
        shapes[Int(id)] = shape
        count += 1
        if kind == .polygon { shapes[Int(id)].insideReachM = estimateInsideReach(id) }
        return shape.cap
    }

    /// The deepest of up to 49 sample positions inside a polygon (the bounding circle's centre,
    /// and a tenth, four tenths and seven tenths of the way from 16 of the vertices to it), by
    /// the cheap clearance: a lower bound of the largest inscribed circle's radius, for
    /// `accuracyLimited`. The positions are straight-line blends projected on the ellipsoid: any
    /// positions do, and these cost no geodesic.
    private func estimateInsideReach(_ id: Int32) -> Double {
        let shape = shapes[Int(id)]
        let center = shape.cap.center
        var deepest = 0.0
        func sample(_ x: Double, _ y: Double, _ z: Double) {
            let placement = place(id: id, GeoPoint.onSurface(x, y, z), bandM: 0)
            if placement.isInside { deepest = max(deepest, placement.clearanceM) }
        }
        sample(center.x, center.y, center.z)
        let stride = max(1, Int(shape.count) / 16)
        for vertex in Swift.stride(from: 0, to: Int(shape.count), by: stride) {
            let edge = edges[Int(shape.firstEdge) + vertex]
            for fraction in [0.1, 0.4, 0.7] {
                sample(edge.ax + fraction * (center.x - edge.ax), edge.ay + fraction * (center.y - edge.ay), edge.az + fraction * (center.z - edge.az))
            }
        }
        return deepest
    }

    // MARK: - Transit

    /// Where the straight path between two positions outside the shape passes through it.
    public struct PathCrossing: Equatable, Sendable {
        /// Fractions of the path (0 = first position, 1 = second) where it first enters and last
        /// leaves.
        public var entry: Double
        public var exit: Double
        /// How deep inside the path went (at the deepest position looked at), metres.
        public var depthM: Double
    }

    /// Transit between sparse fixes: whether the path from `from` to `to` (both outside shape
    /// `id`; the chord between them, on the ellipsoid, at most `MonitorEngine.maximumTransitSegmentM`)
    /// enters the shape, and where. A piece of the path whose ends are farther from the boundary,
    /// together, than the piece is long cannot reach inside (an inside point would have the
    /// boundary within its distance of each end), so pieces are halved only while they could;
    /// the first and last inside positions found are then bisected to the boundary, to a
    /// ten-thousandth of the path. Nil when the path stays outside (a graze within 1 cm counts
    /// as outside).
    @_noAllocation
    public func transit(id: Int32, from: GeoPoint, to: GeoPoint) -> PathCrossing? {
        let start = clearance(id, from), end = clearance(id, to)
        guard !start.inside, !end.inside else { return nil }
        let length = Geodesy.chordM(from, to)
        guard let first = firstInside(id, from, to, length, 0, start.distanceM, 1, end.distanceM, fromStart: true, depth: 0),
              let last = firstInside(id, from, to, length, 0, start.distanceM, 1, end.distanceM, fromStart: false, depth: 0) else { return nil }
        let entry = boundary(id, from, to, outside: 0, inside: first.t)
        let exit = boundary(id, from, to, outside: 1, inside: last.t)
        return PathCrossing(entry: entry, exit: exit, depthM: max(first.depthM, last.depthM))
    }

    /// Inside or out, and the distance to the boundary (exact, or a lower bound far from it).
    @inline(__always)
    private func clearance(_ id: Int32, _ point: GeoPoint) -> (inside: Bool, distanceM: Double) {
        let placement = place(id: id, point, bandM: 0)
        return (placement.isInside, placement.clearanceM)
    }

    /// The first (or last) inside position of the path between fractions t0 and t1, whose ends
    /// are outside at distances d0 and d1.
    private func firstInside(_ id: Int32, _ from: GeoPoint, _ to: GeoPoint, _ length: Double, _ t0: Double, _ d0: Double,
                             _ t1: Double, _ d1: Double, fromStart: Bool, depth: Int) -> (t: Double, depthM: Double)? {
        let span = (t1 - t0) * length
        guard d0 + d1 <= span, span > 0.01, depth < 30 else { return nil }
        let t = (t0 + t1) / 2
        let middle = clearance(id, GeoPoint.along(from, to, t))
        if middle.inside {
            // An earlier (later) inside stretch may still lie before (after) this one.
            let nearer = fromStart ? firstInside(id, from, to, length, t0, d0, t, 0, fromStart: true, depth: depth + 1)
                : firstInside(id, from, to, length, t, 0, t1, d1, fromStart: false, depth: depth + 1)
            return nearer ?? (t, middle.distanceM)
        }
        if fromStart {
            if let found = firstInside(id, from, to, length, t0, d0, t, middle.distanceM, fromStart: true, depth: depth + 1) { return found }
            return firstInside(id, from, to, length, t, middle.distanceM, t1, d1, fromStart: true, depth: depth + 1)
        }
        if let found = firstInside(id, from, to, length, t, middle.distanceM, t1, d1, fromStart: false, depth: depth + 1) { return found }
        return firstInside(id, from, to, length, t0, d0, t, middle.distanceM, fromStart: false, depth: depth + 1)
    }

    /// The boundary between an outside and an inside fraction of the path, by bisection.
    private func boundary(_ id: Int32, _ from: GeoPoint, _ to: GeoPoint, outside: Double, inside: Double) -> Double {
        var (out, into) = (outside, inside)
        for _ in 0..<14 {
            let t = (out + into) / 2
            if clearance(id, GeoPoint.along(from, to, t)).inside { into = t } else { out = t }
        }
        return (out + into) / 2
    }

    /// How deep inside shape `id` a fix can be (a corridor's half width; a polygon's estimated
    /// inscribed radius): an accuracy beyond it can never place a fix inside.
    @_noAllocation
    public func insideReachM(id: Int32) -> Double { shapes[Int(id)].insideReachM }

    /// At least the geodesic distance between two points: the chord's bound (a few instructions)
    /// within 1,000 km, the distance itself beyond.
    static func lengthBoundM(_ a: GeoPoint, _ b: GeoPoint) -> Double {
        let upper = Geodesy.distanceBounds(chordM: Geodesy.chordM(a, b)).upper
        return upper.isFinite ? upper : Geodesy.distanceM(a, b)
    }

    /// τ for an edge of this geodesic length: how far its geodesic and its great-ellipse arc
    /// (1 % longer at most) can stray from the chord, plus the rounding allowance.
    static func tubeM(lengthM: Double) -> Double {
        let half = min(curvature * lengthM * 1.01 / 2, Double.pi)
        // 1 − cos x written as 2 sin²(x/2), which keeps its digits for short edges.
        let sine = LibM.sin(half / 2)
        return 2 * sine * sine / curvature + slackM
    }

    /// The straight-line distance between segments PQ and RS (their closest points, clamped to
    /// both segments).
    static func segmentDistanceM(_ p: GeoPoint, _ q: GeoPoint, _ r: GeoPoint, _ s: GeoPoint) -> Double {
        let (d1x, d1y, d1z) = (q.x - p.x, q.y - p.y, q.z - p.z)
        let (d2x, d2y, d2z) = (s.x - r.x, s.y - r.y, s.z - r.z)
        let (wx, wy, wz) = (p.x - r.x, p.y - r.y, p.z - r.z)
        let a = d1x * d1x + d1y * d1y + d1z * d1z, e = d2x * d2x + d2y * d2y + d2z * d2z
        let b = d1x * d2x + d1y * d2y + d1z * d2z, c = d1x * wx + d1y * wy + d1z * wz, f = d2x * wx + d2y * wy + d2z * wz
        let denominator = a * e - b * b
        var t1 = denominator > 0 ? min(max((b * f - c * e) / denominator, 0), 1) : 0
        var t2 = (b * t1 + f) / e
        if t2 < 0 {
            t2 = 0
            t1 = min(max(-c / a, 0), 1)
        } else if t2 > 1 {
            t2 = 1
            t1 = min(max((b - c) / a, 0), 1)
        }
        let (x, y, z) = (wx + t1 * d1x - t2 * d2x, wy + t1 * d1y - t2 * d2y, wz + t1 * d1z - t2 * d2z)
        return LibM.sqrt(x * x + y * y + z * z)
    }

    /// Centred on the vertices' mean direction; reaching every vertex, plus the tubes (edges
    /// bulge at most that far beyond their ends' circle) and a corridor's half width.
    static func boundingCap(_ vertices: UnsafeMutablePointer<Edge>, count: Int, reachM: Double) -> Cap {
        var (x, y, z) = (0.0, 0.0, 0.0)
        for index in 0..<count { (x, y, z) = (x + vertices[index].ax, y + vertices[index].ay, z + vertices[index].az) }
        let horizontal = LibM.sqrt(x * x + y * y)
        let norm = LibM.sqrt(horizontal * horizontal + z * z)
        // A mean direction near the centre (a shape around half the globe): no useful circle.
        guard norm > 1e-3 * Double(count) * WGS84.equatorialRadiusM else {
            return Cap(center: GeoPoint(latitude: 90, longitude: 0), radiusM: Double.pi * WGS84.equatorialRadiusM)
        }
        // The geocentric direction's latitude moved to geodetic (tan φ = tan ψ / (1 − e²)).
        let latitude = LibM.atan2(z, horizontal * (1 - WGS84.eccentricitySquared)) * 180 / Double.pi
        let longitude = horizontal > 0 ? LibM.atan2(y, x) * 180 / Double.pi : 0
        let center = GeoPoint(latitude: latitude, longitude: longitude)
        var radius = 0.0
        for index in 0..<count {
            radius = max(radius, lengthBoundM(center, GeoPoint(latitude: vertices[index].latitude, longitude: vertices[index].longitude)))
        }
        return Cap(center: center, radiusM: radius + reachM + 1)
    }

    /// A point outside the shape, well clear of every edge's plane and tube: on the bounding
    /// circle's outside, in the first of eight directions that is at least 1 m from every edge's
    /// plane (nil when none is: the shape is then decided exactly).
    private func chooseReference(_ shape: Shape, widestTube: Double) -> GeoPoint? {
        let margin = max(1_000, 0.05 * shape.cap.radiusM, 4 * widestTube)
        let segments = shape.kind == .polygon ? Int(shape.count) : Int(shape.count) - 1
        var best: (point: GeoPoint, clearance: Double)? = nil
        for step in 0..<8 {
            let end = Geodesy.direct(shape.cap.center.latitude, shape.cap.center.longitude, azimuthDeg: Double(step) * 45,
                                     distanceM: shape.cap.radiusM + margin)
            let point = GeoPoint(latitude: end.latitude, longitude: end.longitude)
            var clearance = Double.infinity
            for index in 0..<segments {
                let edge = edges[Int(shape.firstEdge) + index]
                clearance = min(clearance, abs(edge.nx * (point.x - edge.ax) + edge.ny * (point.y - edge.ay) + edge.nz * (point.z - edge.az)))
            }
            if clearance > 1 && (best == nil || clearance > best!.clearance) { best = (point, clearance) }
            if clearance > 100 { break }
        }
        return best?.point
    }

    /// Removes the shape under `id`; false if there was none.
    @discardableResult
    public func remove(id: Int32) -> Bool {
        guard contains(id: id) else { return false }
        let first = Int(shapes[Int(id)].firstEdge), vertices = Int(shapes[Int(id)].count)
        let after = verticesInUse - first - vertices
        if after > 0 { (edges + first).update(from: edges + first + vertices, count: after) }
        verticesInUse -= vertices
        shapes[Int(id)].inUse = false
        count -= 1
        for other in 0..<marked where shapes[other].inUse && Int(shapes[other].firstEdge) > first {
            shapes[other].firstEdge -= Int32(vertices)
        }
        return true
    }

    /// The condition shape `id` was added as (rebuilt from the stored vertices).
    public func condition(id: Int32) -> Condition {
        let shape = shapes[Int(id)]
        let vertices = UnsafeBufferPointer(start: edges + Int(shape.firstEdge), count: Int(shape.count))
        let latitudes = vertices.map { $0.latitude }, longitudes = vertices.map { $0.longitude }
        switch shape.kind {
        case .polygon:
            return .polygon(GeoPolygon(checked: latitudes, longitudes, interiorOnLeft: shape.interiorOnLeft, convex: vertices.map { $0.convex }))
        case .corridor:
            return .corridor(GeoCorridor(checked: latitudes, longitudes, widthM: 2 * shape.halfWidthM))
        }
    }

    // MARK: - Queries

    /// Where `point` lies against shape `id`. Beyond the bounding circle by more than `bandM`
    /// (the widest band a decision looks at), outside at the cost of one chord. Otherwise every
    /// edge's chord distance brackets the distance to the boundary, and inside or out is the
    /// crossing count (a polygon) or the bracket against half the width (a corridor); within an
    /// edge's tube, or for a shape too large for the cheap test, exactly.
    @_noAllocation
    public func place(id: Int32, _ point: GeoPoint, bandM: Double) -> Placement {
        let shape = shapes[Int(id)]
        let beyond = Geodesy.distanceBounds(chordM: Geodesy.chordM(point, shape.cap.center)).lower - shape.cap.radiusM
        if beyond > bandM { return .bounded(inside: false, lowerM: beyond, upperM: .infinity, edge: -1) }
        guard !shape.exactOnly else { return .exact(locate(shape, point)) }
        let first = Int(shape.firstEdge)
        let vertices = Int(shape.count)
        if shape.kind == .corridor {
            let path = pathBounds(first, vertices - 1, point)
            let half = shape.halfWidthM
            if path.upper < half { return .bounded(inside: true, lowerM: half - path.upper, upperM: half - path.lower, edge: path.segment) }
            if path.lower > half { return .bounded(inside: false, lowerM: path.lower - half, upperM: path.upper - half, edge: path.segment) }
            return .exact(locate(shape, point))
        }
        // m = P × R, the normal of the arc from the point to the reference point.
        let (rx, ry, rz) = (shape.rx - point.x, shape.ry - point.y, shape.rz - point.z)
        let (mx, my, mz) = (point.y * rz - point.z * ry, point.z * rx - point.x * rz, point.x * ry - point.y * rx)
        let firstSide = mx * edges[first].ax + my * edges[first].ay + mz * edges[first].az >= 0
        var fromSide = firstSide
        var crossings = 0
        var lowest = Double.infinity, lowestUpper = Double.infinity, nearestEdge = 0
        for index in 0..<vertices {
            let edge = edges + first + index
            let (wx, wy, wz) = (point.x - edge.pointee.ax, point.y - edge.pointee.ay, point.z - edge.pointee.az)
            // The distance, for the edges that can be nearer than the nearest so far (a skipped
            // one is farther than 2τ from its chord, so it needs no exact query either).
            let bound = max(lowest, 0) + edge.pointee.reachM
            if wx * wx + wy * wy + wz * wz <= bound * bound {
                let chordSquared = edge.pointee.chordSquared(wx, wy, wz)
                let tube = edge.pointee.tubeM
                let within = 2 * tube + ShapeStore.slackM
                if chordSquared <= within * within { return .exact(locate(shape, point)) }
                let chord = LibM.sqrt(chordSquared)
                if chord - tube < lowest {
                    lowest = chord - tube
                    nearestEdge = index
                }
                lowestUpper = min(lowestUpper, chord + tube)
            }
            let next = index + 1 == vertices ? edges + first : edge + 1
            let toSide = index + 1 == vertices ? firstSide : mx * next.pointee.ax + my * next.pointee.ay + mz * next.pointee.az >= 0
            // The arcs can cross only where the edge's ends are on either side of the arc's plane.
            // They cross when the point is on the far side of the edge's plane from the reference
            // point, and the edge (run from its "first" end) goes from the positive to the
            // negative side of the arc's plane.
            if fromSide != toSide {
                let side = wx * edge.pointee.nx + wy * edge.pointee.ny + wz * edge.pointee.nz
                if abs(side) <= ShapeStore.slackM { return .exact(locate(shape, point)) }
                let (start, end) = edge.pointee.flipped ? (toSide, fromSide) : (fromSide, toSide)
                if side < 0 && start && !end { crossings += 1 }
            }
            fromSide = toSide
        }
        return .bounded(inside: crossings & 1 == 1, lowerM: max(0, lowest - Geodesy.chordSlackM),
                        upperM: Geodesy.distanceBounds(chordM: lowestUpper).upper, edge: nearestEdge)
    }

    /// Bounds of the distance from `point` to the nearest edge of a path of `segments` segments
    /// from vertex `first`: lower <= geodesic distance <= upper; the segment with the least lower.
    @inline(__always)
    private func pathBounds(_ first: Int, _ segments: Int, _ point: GeoPoint) -> (lower: Double, upper: Double, segment: Int) {
        var lower = Double.infinity, upper = Double.infinity, segment = 0
        for index in 0..<segments {
            let edge = edges + first + index
            let (wx, wy, wz) = (point.x - edge.pointee.ax, point.y - edge.pointee.ay, point.z - edge.pointee.az)
            let bound = max(lower, 0) + edge.pointee.reachM
            guard wx * wx + wy * wy + wz * wz <= bound * bound else { continue }
            let chord = LibM.sqrt(edge.pointee.chordSquared(wx, wy, wz))
            if chord - edge.pointee.tubeM < lower {
                lower = chord - edge.pointee.tubeM
                segment = index
            }
            upper = min(upper, chord + edge.pointee.tubeM)
        }
        return (max(0, lower - Geodesy.chordSlackM), Geodesy.distanceBounds(chordM: upper).upper, segment)
    }

    /// Bounds of the distance from `point` to shape `id`'s boundary (for the nearest-edge search).
    @_noAllocation
    public func boundaryBounds(id: Int32, _ point: GeoPoint) -> (lower: Double, upper: Double) {
        let shape = shapes[Int(id)]
        let segments = shape.kind == .polygon ? Int(shape.count) : Int(shape.count) - 1
        let (lower, upper, _) = pathBounds(Int(shape.firstEdge), segments, point)
        guard shape.kind == .corridor else { return (lower, upper) }
        let half = shape.halfWidthM
        // Two-argument max: the variadic one builds an array.
        return (max(0, max(lower - half, half - upper)), max(upper - half, half - lower))
    }

    /// The exact location of `point` against shape `id`.
    @_noAllocation
    public func locate(id: Int32, _ point: GeoPoint) -> PolygonLocation {
        locate(shapes[Int(id)], point)
    }

    @inline(__always)
    private func locate(_ shape: Shape, _ point: GeoPoint) -> PolygonLocation {
        let vertices = edges + Int(shape.firstEdge)
        switch shape.kind {
        case .polygon:
            return GeoPolygon.locate(point.latitude, point.longitude, count: Int(shape.count), interiorOnLeft: shape.interiorOnLeft,
                                     vertex: { (vertices[$0].latitude, vertices[$0].longitude) }, convex: { vertices[$0].convex })
        case .corridor:
            return GeoCorridor.locate(point.latitude, point.longitude, count: Int(shape.count), halfWidthM: shape.halfWidthM,
                                      vertex: { (vertices[$0].latitude, vertices[$0].longitude) })
        }
    }
}

extension GeoPoint {
    /// The position on the ellipsoid in the direction of (x, y, z) from the centre, near enough
    /// for sampling (the geocentric direction's latitude moved to geodetic).
    @inline(__always)
    static func onSurface(_ x: Double, _ y: Double, _ z: Double) -> GeoPoint {
        let horizontal = LibM.sqrt(x * x + y * y)
        let latitude = LibM.atan2(z, horizontal * (1 - WGS84.eccentricitySquared)) * 180 / Double.pi
        let longitude = horizontal > 0 ? LibM.atan2(y, x) * 180 / Double.pi : 0
        return GeoPoint(latitude: latitude, longitude: longitude)
    }

    /// The position a fraction `t` of the way along the chord from `from` to `to`, on the ellipsoid.
    @inline(__always)
    static func along(_ from: GeoPoint, _ to: GeoPoint, _ t: Double) -> GeoPoint {
        onSurface(from.x + t * (to.x - from.x), from.y + t * (to.y - from.y), from.z + t * (to.z - from.z))
    }
}
