/// Where a straight path between two fixes crosses a circle, if it does.
///
/// Both ends are projected on the plane tangent to the WGS84 ellipsoid at the circle's centre
/// (north and east metres from the meridional and prime-vertical radii of curvature). For the
/// distances between consecutive fixes (metres to a few kilometres) the projection error is far
/// below GNSS accuracy.
enum Transit {
    struct Crossing {
        /// Fractions of the path (0 = first fix, 1 = second) where it enters and leaves.
        var entry: Double
        var exit: Double
        /// How deep the path went: radius minus the closest approach, metres.
        var depthM: Double
    }

    static func crossing(center: CircularGeographicCondition, fromLatitude: Double, fromLongitude: Double,
                         toLatitude: Double, toLongitude: Double) -> Crossing? {
        let (northPerDegree, eastPerDegree) = metresPerDegree(latitude: center.latitude)
        let x1 = longitudeDelta(fromLongitude, center.longitude) * eastPerDegree
        let y1 = (fromLatitude - center.latitude) * northPerDegree
        let x2 = longitudeDelta(toLongitude, center.longitude) * eastPerDegree
        let y2 = (toLatitude - center.latitude) * northPerDegree
        let dx = x2 - x1
        let dy = y2 - y1
        let a = dx * dx + dy * dy
        guard a > 0 else { return nil }
        let b = 2 * (x1 * dx + y1 * dy)
        let c = x1 * x1 + y1 * y1 - center.radiusM * center.radiusM
        guard c > 0 else { return nil } // the first fix is inside: not a transit
        let discriminant = b * b - 4 * a * c
        guard discriminant > 0 else { return nil }
        let root = LibM.sqrt(discriminant)
        let entry = (-b - root) / (2 * a)
        let exit = (-b + root) / (2 * a)
        guard entry > 0, exit < 1 else { return nil }
        // Rounding can make the two equal for a path that grazes the circle, never reverse them.
        precondition(entry <= exit, "a path enters a circle before it leaves it")
        let closest = -b / (2 * a)
        let px = x1 + closest * dx
        let py = y1 + closest * dy
        return Crossing(entry: entry, exit: exit, depthM: center.radiusM - LibM.sqrt(px * px + py * py))
    }

    /// Metres per degree of latitude and of longitude at `latitude` on WGS84.
    static func metresPerDegree(latitude: Double) -> (north: Double, east: Double) {
        let a = 6_378_137.0
        let e2 = 0.006_694_379_990_141_316_9
        let phi = latitude * Double.pi / 180
        let sine = LibM.sin(phi)
        let w = LibM.sqrt(1 - e2 * sine * sine)
        let meridional = a * (1 - e2) / (w * w * w)
        let primeVertical = a / w
        return (meridional * Double.pi / 180, primeVertical * LibM.cos(phi) * Double.pi / 180)
    }

    /// Longitude difference in -180...180 (paths across the antimeridian).
    static func longitudeDelta(_ a: Double, _ b: Double) -> Double {
        var delta = a - b
        if delta > 180 { delta -= 360 }
        if delta < -180 { delta += 360 }
        return delta
    }
}
