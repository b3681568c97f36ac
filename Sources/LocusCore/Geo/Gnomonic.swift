// The ellipsoidal gnomonic projection (Karney, "Algorithms for geodesics", J. Geodesy 87, 2013,
// section 8) and what the shapes build on it: the point of a geodesic edge nearest a position,
// the distance to it, and the side of the edge the position is on, exact on WGS84.

/// A point in the gnomonic projection about a centre, metres. Geodesics through the centre are
/// straight lines in it, and others nearly so near the centre: the property the edge query's
/// iteration relies on.
public struct GnomonicPoint: Equatable, Sendable {
    public var x: Double
    public var y: Double
}

/// The ellipsoidal gnomonic projection about `center`.
public struct Gnomonic: Equatable, Sendable {
    public var latitude: Double
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }

    /// The projection of a point; nil when it lies 90° or more (of the geodesic's arc) from the
    /// centre, where the projection does not reach.
    @_noAllocation
    public func forward(_ latitude: Double, _ longitude: Double) -> GnomonicPoint? {
        let line = Geodesy.inverseSolution(self.latitude, self.longitude, latitude, longitude)
        guard line.distanceM.isFinite else { return nil }
        if line.distanceM == 0 { return GnomonicPoint(x: 0, y: 0) }
        let end = Geodesy.direct(self.latitude, self.longitude, azimuthDeg: line.azimuth1Deg, distanceM: line.distanceM)
        guard end.scale12 > 0 else { return nil }
        let rho = end.reducedLengthM / end.scale12
        let (s, c) = Geodesy.sinCosDegrees(line.azimuth1Deg)
        return GnomonicPoint(x: rho * s, y: rho * c)
    }

    /// The position of a projected point (GeographicLib's Gnomonic::Reverse: Newton's method on
    /// the geodesic's length until ρ = m12 / M12, at most 10 steps).
    @_noAllocation
    public func reverse(_ point: GnomonicPoint) -> (latitude: Double, longitude: Double) {
        let a = WGS84.equatorialRadiusM
        let azimuth = Geodesy.atan2Degrees(point.x, point.y)
        var rho = Geodesy.hypot(point.x, point.y, .libm)
        if rho == 0 { return (latitude, longitude) }
        var s = a * LibM.atan(rho / a)
        let little = rho <= a
        if !little { rho = 1 / rho }
        var end = Geodesy.direct(latitude, longitude, azimuthDeg: azimuth, distanceM: s)
        for _ in 0..<10 {
            let m = end.reducedLengthM, scale = end.scale12
            // Small ρ: solve ρ(s) = ρ (dρ/ds = 1/M²); large: 1/ρ(s) = 1/ρ (d(1/ρ)/ds = -1/m²).
            let step = little ? (m - rho * scale) * scale : (rho * m - scale) * m
            s -= step
            end = Geodesy.direct(latitude, longitude, azimuthDeg: azimuth, distanceM: s)
            if !(abs(step) >= Gnomonic.tolerance * a) { break }
        }
        return (end.latitude, end.longitude)
    }

    /// GeographicLib's: 0.01 √ε (ε = 2⁻⁵²) of the radius, about a nanometre. A literal, so that
    /// it needs no initializer on the allocation-free path.
    static let tolerance = 1.490_116_119_384_765_6e-10
}

/// A position's relation to one geodesic edge: the nearest point of the edge, the distance to
/// it, and the side.
public struct EdgeProximity: Equatable, Sendable {
    public var latitude: Double
    public var longitude: Double
    /// The geodesic distance from the position to `latitude`, `longitude`, metres.
    public var distanceM: Double
    /// Where along the edge the nearest point lies: 0 at its start, 1 at its end (either one when
    /// the nearest point is an end).
    public var fraction: Double
    /// The position is left of the edge, looking from its start to its end (false on it).
    public var isLeft: Bool
}

extension Geodesy {
    /// The point of the geodesic edge from 1 to 2 nearest the position `p` (the interception
    /// problem: Karney's gnomonic iteration, the centre moved to the foot of the perpendicular in
    /// the projection until it stays within a nanometre, at most 8 steps), the distance to it and
    /// the side. The edge must be shorter than a quarter meridian and the position within a
    /// quarter meridian of it (the shapes' edges are: longer ones are refused). Exact to
    /// nanometres, checked against GeographicLib by the tests.
    @_noAllocation
    public static func edgeProximity(_ pLatitude: Double, _ pLongitude: Double,
                                     _ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> EdgeProximity {
        let edge = inverseSolution(lat1, lon1, lat2, lon2)
        // The edge's midpoint: a centre from which both ends and the position project.
        let middle = direct(lat1, lon1, azimuthDeg: edge.azimuth1Deg, distanceM: edge.distanceM / 2)
        var center = Gnomonic(latitude: middle.latitude, longitude: middle.longitude)
        var fraction = 0.5
        var cross = 0.0
        for _ in 0..<8 {
            guard let a = center.forward(lat1, lon1), let b = center.forward(lat2, lon2),
                  let p = center.forward(pLatitude, pLongitude) else { break }
            let dx = b.x - a.x, dy = b.y - a.y
            let length2 = dx * dx + dy * dy
            guard length2 > 0 else {
                fraction = 0
                center = Gnomonic(latitude: lat1, longitude: lon1)
                break
            }
            fraction = min(1, max(0, ((p.x - a.x) * dx + (p.y - a.y) * dy) / length2))
            cross = dx * (p.y - a.y) - dy * (p.x - a.x)
            let foot = GnomonicPoint(x: a.x + fraction * dx, y: a.y + fraction * dy)
            let moved = hypot(foot.x, foot.y, .libm)
            let next = center.reverse(foot)
            center = Gnomonic(latitude: next.latitude, longitude: next.longitude)
            if moved < 1e-9 { break }
        }
        // The ends themselves, not their reverse projections, when the foot is an end.
        if fraction == 0 { center = Gnomonic(latitude: lat1, longitude: lon1) }
        if fraction == 1 { center = Gnomonic(latitude: lat2, longitude: lon2) }
        return EdgeProximity(latitude: center.latitude, longitude: center.longitude,
                             distanceM: distanceM(pLatitude, pLongitude, center.latitude, center.longitude),
                             fraction: fraction, isLeft: cross > 0)
    }
}
