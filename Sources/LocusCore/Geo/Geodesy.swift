/// The WGS84 ellipsoid (NIMA TR8350.2), the datum GNSS receivers report positions in.
public enum WGS84 {
    /// Equatorial radius a, metres.
    public static let equatorialRadiusM = 6_378_137.0
    /// Flattening f = (a - b) / a.
    public static let flattening = 1 / 298.257_223_563
    /// Polar radius b = a (1 - f), metres.
    public static let polarRadiusM = 6_378_137.0 * (1 - 1 / 298.257_223_563)
    /// First eccentricity squared e² = f (2 - f).
    public static let eccentricitySquared = (1 / 298.257_223_563) * (2 - 1 / 298.257_223_563)
    /// Second eccentricity squared e'² = e² / (1 - f)².
    public static let secondEccentricitySquared = eccentricitySquared / ((1 - flattening) * (1 - flattening))
    /// Third flattening n = f / (2 - f), the expansion parameter of the geodesic series.
    public static let thirdFlattening = flattening / (2 - flattening)
    /// The smallest radius of curvature anywhere on the ellipsoid: the meridional radius at the
    /// equator, b² / a ≈ 6 335 439 m. Every curve on the surface that is a geodesic bends no more
    /// sharply than a circle of this radius; the chord bound below rests on that.
    public static let minimumRadiusOfCurvatureM = polarRadiusM * polarRadiusM / equatorialRadiusM
}

/// A position on the ellipsoid surface, with its Earth-centred, Earth-fixed coordinates computed
/// once, so that comparing it with many circle centres costs a few multiplications each.
public struct GeoPoint: Equatable, Sendable {
    /// Geodetic latitude and longitude, degrees.
    public let latitude: Double
    public let longitude: Double
    /// ECEF coordinates of the point at height 0, metres.
    public let x: Double
    public let y: Double
    public let z: Double

    @_noAllocation
    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
        let (sinPhi, cosPhi) = Geodesy.sinCosDegrees(latitude)
        let (sinLambda, cosLambda) = Geodesy.sinCosDegrees(longitude)
        (x, y, z) = GeoPoint.ecef(primeVertical: GeoPoint.primeVerticalRadius(sinPhi: sinPhi),
                                  sinPhi: sinPhi, cosPhi: cosPhi, sinLambda: sinLambda, cosLambda: cosLambda)
    }

    /// The radius of curvature in the prime vertical, N = a / sqrt(1 − e² sin²φ).
    @inline(__always)
    static func primeVerticalRadius(sinPhi: Double) -> Double {
        WGS84.equatorialRadiusM / LibM.sqrt(1 - WGS84.eccentricitySquared * sinPhi * sinPhi)
    }

    /// ECEF coordinates at height 0 from N and the sines and cosines of latitude and longitude.
    @inline(__always)
    static func ecef(primeVertical: Double, sinPhi: Double, cosPhi: Double, sinLambda: Double, cosLambda: Double)
        -> (x: Double, y: Double, z: Double) {
        return (primeVertical * cosPhi * cosLambda, primeVertical * cosPhi * sinLambda, primeVertical * (1 - WGS84.eccentricitySquared) * sinPhi)
    }

    /// Whether this is a position at all: finite, latitude within ±90°.
    public var isValid: Bool {
        latitude.isFinite && longitude.isFinite && abs(latitude) <= 90
    }
}

/// The solution of the inverse geodesic problem between two points: the geodesic's length and its
/// direction at both ends.
public struct GeodesicInverse: Equatable, Sendable {
    /// Length of the geodesic (the shortest path on the ellipsoid), metres.
    public var distanceM: Double
    /// Forward azimuth at point 1 toward point 2: degrees clockwise from north, in [-180, 180]
    /// (GeographicLib's azi1).
    public var azimuth1Deg: Double
    /// Forward azimuth at point 2, the direction of travel on arriving there (GeographicLib's
    /// azi2); the bearing back to point 1 is this ± 180°.
    public var azimuth2Deg: Double

    public init(distanceM: Double, azimuth1Deg: Double, azimuth2Deg: Double) {
        self.distanceM = distanceM
        self.azimuth1Deg = azimuth1Deg
        self.azimuth2Deg = azimuth2Deg
    }
}

/// Distances and directions on the WGS84 ellipsoid.
///
/// Exact: `distanceM` is Karney's solution of the inverse geodesic problem (C. F. F. Karney,
/// "Algorithms for geodesics", J. Geodesy 87, 43–55, 2013; the method of GeographicLib's
/// Geodesic::Inverse, series to order 6), accurate to about 15 nm on WGS84 and convergent for every
/// pair of points, antipodal ones included. It costs a few thousand instructions.
/// `inverseSolution` is the same solution with the azimuths at both ends (GeographicLib's azi1
/// and azi2), for a bearing: "2.1 km NE of".
///
/// Cheap: the straight-line (chord) distance c between the two points' ECEF coordinates, a few
/// multiplications once both points are `GeoPoint`s. It brackets the geodesic distance s:
///
///     c  <=  s  <=  c + c³ / (23 ρ²) + 1 µm        for c <= 1000 km,   ρ = b²/a ≈ 6 335 439 m
///
/// i.e. relative error ε(c) = c² / (23 ρ²): 1.1e-9 at 1 km (1 µm), 1.1e-7 at 10 km (1.1 mm),
/// 1.1e-5 at 100 km, 1.1e-3 at 1000 km. Why:
/// - c <= s: a straight line is the shortest curve in space.
/// - s <= 2ρ asin(c / 2ρ): the geodesic is a space curve whose curvature is its normal curvature,
///   at most the largest principal curvature of the ellipsoid, a / b² = 1/ρ (meridional, at the
///   equator). By Schur's comparison theorem its chord is at least that of a circular arc of
///   radius ρ and the same length s, 2ρ sin(s / 2ρ), as long as s <= πρ. And s <= πρ whenever
///   c <= 1000 km: the plane through both points and the centre cuts the ellipsoid in an ellipse
///   whose shorter arc between them is at most 1.0000057·a·ψ long, with the central angle ψ <=
///   2 asin(c / 2b) < 0.158 rad, so s < 1010 km.
/// - asin(x) / x <= 1 + 0.1672 x² for x <= 0.079, so 2ρ asin(c / 2ρ) <= c (1 + c² / (23.9 ρ²)).
/// - 1 µm covers rounding: the ECEF coordinates carry errors of a few ulp of 6.4e6 m (~1e-9 m).
/// The tests check the bracket on the repository's corpus (Tests/Corpus) and on random pairs, and `compare` relies on
/// it: it decides inside/outside from the bracket and computes the exact distance only when the
/// bracket straddles a threshold, so its decisions are those of the exact distance.
public enum Geodesy {
    /// Where the chord's upper bound stops being claimed (see above).
    public static let chordBoundLimitM = 1_000_000.0
    /// Absolute slack for rounding in the chord, metres.
    public static let chordSlackM = 1e-6
    static let chordCubicFactor = 1 / (23 * WGS84.minimumRadiusOfCurvatureM * WGS84.minimumRadiusOfCurvatureM)

    /// Geodesic (shortest path) distance in metres between two points given in degrees. NaN if a
    /// latitude is outside ±90° or a coordinate is not finite.
    @_noAllocation
    public static func distanceM(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        guard validPair(lat1, lon1, lat2, lon2) else { return .nan }
        return inverse(lat1, lon1, lat2, lon2)
    }

    /// The geodesic from point 1 to point 2 (degrees): its length and the forward azimuths at both
    /// ends, those of GeographicLib's Geodesic::Inverse (azi1, azi2). Every field is NaN if a
    /// latitude is outside ±90° or a coordinate is not finite. The distance is `distanceM`'s to a
    /// few nanometres (this solution rounds as libm does: see `HypotRounding`).
    @_noAllocation
    public static func inverseSolution(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> GeodesicInverse {
        guard validPair(lat1, lon1, lat2, lon2) else { return GeodesicInverse(distanceM: .nan, azimuth1Deg: .nan, azimuth2Deg: .nan) }
        let core = solveInverse(lat1, lon1, lat2, lon2, .libm)
        return GeodesicInverse(distanceM: core.s12, azimuth1Deg: atan2Degrees(core.salp1, core.calp1),
                               azimuth2Deg: atan2Degrees(core.salp2, core.calp2))
    }

    /// The longest chord `shortLine` answers for, metres.
    public static let shortLineLimitM = 20_000.0

    /// The geodesic from p (latitude, longitude) toward `q` when they are at most `shortLineLimitM` apart (chord),
    /// in a few hundred instructions instead of the inverse problem's few thousand: the length
    /// and the forward azimuth at `p`. nil farther, or for coincident points.
    ///
    /// The plane through `p`'s normal and `q` cuts the ellipsoid in the normal section from p to
    /// q; its azimuth at p is exactly the direction of the chord q − p in p's east-north plane,
    /// and its curvature at p is Euler's 1/R = cos²α/M + sin²α/N. A plane curve of curvature κ
    /// is longer than its chord c by κ²c³/24 (+ O(c⁵)). The geodesic differs from the normal
    /// section by terms of order e⁴ in length and e²σ² in azimuth: under 20 km all of it stays
    /// below 2 µm and 1e-6° of Karney's solution for lines of 1 m or more (shorter ones carry the
    /// ECEF coordinates' rounding in their direction: 1e-4° at 1 mm). The tests compare both on
    /// random lines worldwide, poles and the antimeridian included.
    @_noAllocation
    public static func shortLine(fromLatitude latitude: Double, longitude: Double, to q: GeoPoint) -> (distanceM: Double, azimuthDeg: Double)? {
        // p's ECEF coordinates as GeoPoint computes them, from the same sines and cosines the
        // east-north frame needs.
        let (sinPhi, cosPhi) = sinCosDegrees(latitude)
        let (sinLambda, cosLambda) = sinCosDegrees(longitude)
        let primeVertical = GeoPoint.primeVerticalRadius(sinPhi: sinPhi)
        let p = GeoPoint.ecef(primeVertical: primeVertical, sinPhi: sinPhi, cosPhi: cosPhi, sinLambda: sinLambda, cosLambda: cosLambda)
        let dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z
        let chordSquared = dx * dx + dy * dy + dz * dz
        guard chordSquared <= shortLineLimitM * shortLineLimitM else { return nil }
        let east = -sinLambda * dx + cosLambda * dy
        let north = -sinPhi * (cosLambda * dx + sinLambda * dy) + cosPhi * dz
        let horizontal = east * east + north * north
        guard horizontal > 0 else { return nil }
        let meridional = primeVertical * (1 - WGS84.eccentricitySquared) / (1 - WGS84.eccentricitySquared * sinPhi * sinPhi)
        let curvature = (north * north / meridional + east * east / primeVertical) / horizontal
        let chord = LibM.sqrt(chordSquared)
        let distance = chord + curvature * curvature * chord * chordSquared / 24
        var azimuth = atan2Degrees(east, north)
        if azimuth < 0 { azimuth += 360 }
        return (distance, azimuth >= 360 ? 0 : azimuth)
    }

    @inline(__always)
    static func validPair(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Bool {
        lat1.isFinite && lat2.isFinite && lon1.isFinite && lon2.isFinite && abs(lat1) <= 90 && abs(lat2) <= 90
    }

    @_noAllocation
    public static func distanceM(_ p: GeoPoint, _ q: GeoPoint) -> Double {
        distanceM(p.latitude, p.longitude, q.latitude, q.longitude)
    }

    /// The chord between two points: a lower bound of the geodesic distance, and within the
    /// bracket documented on `Geodesy` of it.
    @_noAllocation
    public static func chordM(_ p: GeoPoint, _ q: GeoPoint) -> Double {
        LibM.sqrt(chordSquaredM2(p, q))
    }

    @_noAllocation
    @inline(__always)
    static func chordSquaredM2(_ p: GeoPoint, _ q: GeoPoint) -> Double {
        let dx = p.x - q.x, dy = p.y - q.y, dz = p.z - q.z
        return dx * dx + dy * dy + dz * dz
    }

    /// The cheap approximation: the chord between the points, in metres. The geodesic distance s
    /// satisfies c - 1 µm <= s <= c + c³/(23ρ²) + 1 µm for c <= 1000 km (see `Geodesy`).
    @_noAllocation
    public static func approximateDistanceM(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        chordM(GeoPoint(latitude: lat1, longitude: lon1), GeoPoint(latitude: lat2, longitude: lon2))
    }

    /// Bounds of the geodesic distance given the chord: lower <= s <= upper (upper is infinity
    /// beyond `chordBoundLimitM`).
    @_noAllocation
    public static func distanceBounds(chordM c: Double) -> (lower: Double, upper: Double) {
        let lower = c > chordSlackM ? c - chordSlackM : 0
        guard c <= chordBoundLimitM else { return (lower, .infinity) }
        return (lower, c + c * c * c * chordCubicFactor + chordSlackM)
    }

    /// Where a point lies relative to a circle widened and narrowed by a margin.
    public enum Side: Equatable, Sendable {
        /// distance < radius - margin
        case inside
        /// distance > radius + margin
        case outside
        /// radius - margin <= distance <= radius + margin, with the exact distance.
        case near(distanceM: Double)
    }

    /// Classifies `point` against the circle (`center`, `radiusM`) with a band of ±`marginM`
    /// around its edge, exactly as the geodesic distance would, computing that distance only when
    /// the chord's bracket cannot decide (within about c³/(23ρ²) + 1 µm of the band's edges, or
    /// inside the band). An invalid point or centre (see `GeoPoint.isValid`) gives
    /// `.near(distanceM: .nan)`: validate fixes before deciding with them.
    @_noAllocation
    public static func compare(_ point: GeoPoint, center: GeoPoint, radiusM: Double, marginM: Double) -> Side {
        let low = radiusM - marginM
        let high = radiusM + marginM
        let bounds = distanceBounds(chordM: chordM(point, center))
        if bounds.lower > high { return .outside }
        if bounds.upper < low { return .inside }
        let distance = distanceM(point, center)
        if distance < low { return .inside }
        if distance > high { return .outside }
        return .near(distanceM: distance)
    }
}

// MARK: - Karney's inverse solution
//
// A port of GeographicLib's Geodesic::GenInverse for WGS84 that rounds as GeographicLib does:
// products grouped as it groups them (its sq(x) is one product: (a·b)·(a·b), not a·b·a·b) and, for
// the azimuths, its libm's hypot (see `HypotRounding`). The azimuth of a line a few metres long
// depends on the last bits of nearly every step; so rounded, it is GeographicLib's to 1e-14°.

extension Geodesy {
    static let degree = Double.pi / 180
    /// sqrt(smallest normal double) = 2^-511: keeps cos β positive at the poles.
    static let tiny = 1.491_668_146_240_041_3e-154
    static let tol0 = Double.ulpOfOne
    static let tol1 = 200 * Double.ulpOfOne
    /// sqrt(tol0) = 2^-26.
    static let tol2 = 1.490_116_119_384_765_6e-8
    static let tolb = Double.ulpOfOne
    static let xthresh = 1000 * 1.490_116_119_384_765_6e-8
    /// Newton iterations, then bisection: the loop ends after `maxit2` evaluations whatever
    /// happens (on WGS84 it converges in at most ~16).
    static let maxit1 = 20
    static let maxit2 = 20 + 53 + 10

    /// Six series coefficients c1...c6 (c6 unused by the five-term C3 series).
    struct Series {
        var c1 = 0.0, c2 = 0.0, c3 = 0.0, c4 = 0.0, c5 = 0.0, c6 = 0.0
    }

    /// Error-free sum: u + v = s + t exactly.
    @inline(__always)
    static func sumExact(_ u: Double, _ v: Double) -> (s: Double, t: Double) {
        let s = u + v
        var up = s - v
        var vpp = s - up
        up -= u
        vpp -= v
        return (s, s != 0 ? 0 - (up + vpp) : s)
    }

    /// lon2 - lon1 reduced to [-180, 180] with its rounding error, so that 180 is exact.
    static func angleDifference(_ x: Double, _ y: Double) -> (d: Double, e: Double) {
        var (d, t) = sumExact(reduce(-x, by: 360).remainder, reduce(y, by: 360).remainder)
        (d, t) = sumExact(reduce(d, by: 360).remainder, t)
        if d == 0 || abs(d) == 180 {
            d = Double(signOf: t == 0 ? y - x : -t, magnitudeOf: d)
        }
        return (d, t)
    }

    /// Rounds tiny angles to multiples of 1/2^57 so that nearly-equatorial points are equatorial.
    static func angleRound(_ x: Double) -> Double {
        let z = 1.0 / 16
        var y = abs(x)
        let w = z - y
        y = w > 0 ? z - w : y
        return Double(signOf: x, magnitudeOf: y)
    }

    /// IEEE remainder of x by y (90 or 360 here) and the quotient's low bits: x = n·y + r,
    /// |r| <= y/2, n even at ties. Exact, like libm's remainder, but a few instructions instead of
    /// glibc's hundred for the magnitudes that occur (|x| < 2^50); libm beyond.
    @_noAllocation
    @inline(__always)
    static func reduce(_ x: Double, by y: Double) -> (remainder: Double, quotient: Int) {
        guard abs(x) < 1e15 else {
            let r = LibM.remainder(x, y)
            return (r, Int(truncatingIfNeeded: Int64(LibM.remainder((x - r) / y, 8))))
        }
        let q = x / y
        var n = Int64(q)                            // toward zero
        let fraction = q - Double(n)
        if fraction > 0.5 { n += 1 } else if fraction < -0.5 { n -= 1 }
        // x - n·y is exact: n·y is an integer below 2^53 and x a multiple of its own ulp <= 1.
        var r = x - Double(n) * y
        let half = y / 2
        if r > half { r -= y; n += 1 } else if r < -half { r += y; n -= 1 }
        if abs(r) == half && n & 1 != 0 {           // a tie: the even quotient wins
            if r > 0 { r -= y; n += 1 } else { r += y; n -= 1 }
        }
        return (r, Int(truncatingIfNeeded: n))
    }

    /// sin and cos of an angle in degrees, reduced exactly to [-45°, 45°] first so that 90° and
    /// 180° give exact zeros. NaN for a non-finite angle.
    @_noAllocation
    static func sinCosDegrees(_ x: Double) -> (sin: Double, cos: Double) {
        guard x.isFinite else { return (.nan, .nan) }
        let (r, quotient) = reduce(x, by: 90)       // exact, |r| <= 45
        return quadrant(r * degree, quotient, sign: x)
    }

    /// sin and cos of x + t degrees, where t is a small correction to x (AngRound applied).
    @_noAllocation
    static func sinCosDegrees(_ x: Double, plus t: Double) -> (sin: Double, cos: Double) {
        guard x.isFinite, t.isFinite else { return (.nan, .nan) }
        let (r, quotient) = reduce(x, by: 90)
        return quadrant(angleRound(r + t) * degree, quotient, sign: x)
    }

    /// sin and cos of r + quotient·90°, r in radians.
    @inline(__always)
    static func quadrant(_ r: Double, _ quotient: Int, sign x: Double) -> (sin: Double, cos: Double) {
        let s = LibM.sin(r), c = LibM.cos(r)
        var sinx: Double, cosx: Double
        switch quotient & 3 {
        case 0: sinx = s; cosx = c
        case 1: sinx = c; cosx = -s
        case 2: sinx = -s; cosx = -c
        default: sinx = -c; cosx = s
        }
        cosx += 0
        if sinx == 0 { sinx = Double(signOf: x, magnitudeOf: sinx) }
        return (sinx, cosx)
    }

    /// Which square root of x² + y² the inverse solution normalizes with (see `hypot`).
    enum HypotRounding {
        /// sqrt(x² + y²) directly: a few instructions, at most an ulp off. What distances need.
        case fast
        /// libm's, as GeographicLib uses it: what the azimuths need to be GeographicLib's.
        case libm
    }

    /// (s, c) scaled to unit length, as GeographicLib's norm does: divided by hypot(s, c).
    @inline(__always)
    static func normalize(_ s: inout Double, _ c: inout Double, _ rounding: HypotRounding) {
        let r = hypot(s, c, rounding)
        s /= r
        c /= r
    }

    /// sqrt(x² + y²), as `rounding` says. The distance does not care which: it moves by
    /// nanometres. The azimuth of a line a few metres long does: Newton's method stops anywhere
    /// within its tolerance, where depends on the last bits of every normalization, and an ulp
    /// moves the azimuth by up to 1e-8°. Rounded as libm rounds, it is GeographicLib's.
    @inline(__always)
    static func hypot(_ x: Double, _ y: Double, _ rounding: HypotRounding) -> Double {
        switch rounding {
        case .fast: return hypot(x, y)
        case .libm: return libmHypot(x, y)
        }
    }

    /// sqrt(x² + y²): directly where the squares can neither overflow nor lose precision to
    /// underflow (all but degenerate cases here), libm's careful hypot otherwise.
    @inline(__always)
    static func hypot(_ x: Double, _ y: Double) -> Double {
        let m = max(abs(x), abs(y))
        guard m > 1e-140 && m < 1e140 else { return LibM.hypot(x, y) }
        return LibM.sqrt(x * x + y * y)
    }

    /// sqrt(x² + y²) as glibc (2.35 on) computes it in its x86-64 build, the libm GeographicLib
    /// runs on there: the root of the rounded sum of squares, corrected once for the squares'
    /// rounding errors (C. F. Borges, "An improved algorithm for hypot(a, b)", 2019), which makes
    /// it correctly rounded but in rare cases. Bit for bit glibc's (the tests check), inline here,
    /// libm itself for magnitudes outside [2^-459, 2^511]; a dozen instructions more than `hypot`.
    @inline(__always)
    static func libmHypot(_ x: Double, _ y: Double) -> Double {
        let a = abs(x), b = abs(y)
        let ax = a < b ? b : a, ay = a < b ? a : b
        guard ax <= 0x1p511 && ay >= 0x1p-459 else { return LibM.hypot(x, y) }
        if ay <= ax * 0x1p-54 { return ax + ay }
        let h = LibM.sqrt(ax * ax + ay * ay)
        let t1: Double, t2: Double
        if h <= 2 * ay {
            let delta = h - ay
            t1 = ax * (2 * delta - ax)
            t2 = (delta - 2 * (ax - ay)) * delta
        } else {
            let delta = h - ax
            t1 = 2 * delta * (ax - 2 * ay)
            t2 = (4 * delta - ay) * ay + delta * delta
        }
        return h - (t1 + t2) / (2 * h)
    }

    /// sum(c[i] sin 2iσ, i = 1...6) by Clenshaw summation.
    @inline(__always)
    static func sinSeries(_ sinx: Double, _ cosx: Double, _ c: Series) -> Double {
        let ar = 2 * (cosx - sinx) * (cosx + sinx)
        var y1 = c.c6
        var y0 = ar * y1 + c.c5
        y1 = ar * y0 - y1 + c.c4
        y0 = ar * y1 - y0 + c.c3
        y1 = ar * y0 - y1 + c.c2
        y0 = ar * y1 - y0 + c.c1
        return 2 * sinx * cosx * y0
    }

    /// A1 - 1, the mean of dI1/dσ - 1.
    @inline(__always)
    static func a1m1(_ eps: Double) -> Double {
        let e2 = eps * eps
        let t = e2 * (e2 * (e2 + 4) + 64) / 256
        return (t + eps) / (1 - eps)
    }

    @inline(__always)
    static func c1(_ eps: Double) -> Series {
        let e2 = eps * eps
        var d = eps
        var c = Series()
        c.c1 = d * ((6 - e2) * e2 - 16) / 32
        d *= eps
        c.c2 = d * ((64 - 9 * e2) * e2 - 128) / 2048
        d *= eps
        c.c3 = d * (9 * e2 - 16) / 768
        d *= eps
        c.c4 = d * (3 * e2 - 5) / 512
        d *= eps
        c.c5 = -7 * d / 1280
        d *= eps
        c.c6 = -7 * d / 2048
        return c
    }

    /// A2 - 1, the mean of dI2/dσ - 1.
    @inline(__always)
    static func a2m1(_ eps: Double) -> Double {
        let e2 = eps * eps
        let t = e2 * (e2 * (-11 * e2 - 28) - 192) / 256
        return (t - eps) / (1 + eps)
    }

    @inline(__always)
    static func c2(_ eps: Double) -> Series {
        let e2 = eps * eps
        var d = eps
        var c = Series()
        c.c1 = d * ((e2 + 2) * e2 + 16) / 32
        d *= eps
        c.c2 = d * ((35 * e2 + 64) * e2 + 384) / 2048
        d *= eps
        c.c3 = d * (15 * e2 + 80) / 768
        d *= eps
        c.c4 = d * (7 * e2 + 35) / 512
        d *= eps
        c.c5 = 63 * d / 1280
        d *= eps
        c.c6 = 77 * d / 2048
        return c
    }

    /// A3, the mean of dI3/dσ, for WGS84's n.
    @inline(__always)
    static func a3(_ eps: Double) -> Double {
        let n = WGS84.thirdFlattening
        let x0 = -3.0 / 128
        let x1 = (-2 * n - 3) / 64
        let x2 = ((-n - 3) * n - 1) / 16
        let x3 = ((3 * n - 1) * n - 2) / 8
        let x4 = (n - 1) / 2
        return ((((x0 * eps + x1) * eps + x2) * eps + x3) * eps + x4) * eps + 1
    }

    @inline(__always)
    static func c3(_ eps: Double) -> Series {
        let n = WGS84.thirdFlattening
        // Coefficients of eps^j in C3[l], polynomials in n.
        let x0 = 3.0 / 128, x1 = (2 * n + 5) / 128, x2 = ((3 - n) * n + 3) / 64, x3 = (1 - n * n) / 8, x4 = (1 - n) / 4
        let x5 = 5.0 / 256, x6 = (n + 3) / 128, x7 = ((-3 * n - 2) * n + 3) / 64, x8 = ((n - 3) * n + 2) / 32
        let x9 = 7.0 / 512, x10 = (9 - 10 * n) / 384, x11 = ((5 * n - 9) * n + 5) / 192
        let x12 = 7.0 / 512, x13 = (7 - 14 * n) / 512
        let x14 = 21.0 / 2560
        var c = Series()
        var mult = eps
        c.c1 = mult * ((((x0 * eps + x1) * eps + x2) * eps + x3) * eps + x4)
        mult *= eps
        c.c2 = mult * (((x5 * eps + x6) * eps + x7) * eps + x8)
        mult *= eps
        c.c3 = mult * ((x9 * eps + x10) * eps + x11)
        mult *= eps
        c.c4 = mult * (x12 * eps + x13)
        mult *= eps
        c.c5 = mult * x14
        return c
    }

    /// Distance / b and reduced length / b along the geodesic between σ1 and σ2.
    @inline(__always)
    static func lengths(_ eps: Double, _ sig12: Double,
                        _ ssig1: Double, _ csig1: Double, _ dn1: Double,
                        _ ssig2: Double, _ csig2: Double, _ dn2: Double) -> (s12b: Double, m12b: Double) {
        let a1 = a1m1(eps), a2 = a2m1(eps)
        let coefficients1 = c1(eps), coefficients2 = c2(eps)
        let m0 = a1 - a2
        let A1 = 1 + a1, A2 = 1 + a2
        let b1 = sinSeries(ssig2, csig2, coefficients1) - sinSeries(ssig1, csig1, coefficients1)
        let b2 = sinSeries(ssig2, csig2, coefficients2) - sinSeries(ssig1, csig1, coefficients2)
        let j12 = m0 * sig12 + (A1 * b1 - A2 * b2)
        let m12b = dn2 * (csig1 * ssig2) - dn1 * (ssig1 * csig2) - csig1 * csig2 * j12
        return (A1 * (sig12 + b1), m12b)
    }

    /// Reduced length / b alone (GeographicLib's Lengths asked for the reduced length only): the
    /// C1 and C2 series combined first, two series sums instead of four.
    @inline(__always)
    static func reducedLength(_ eps: Double, _ sig12: Double,
                              _ ssig1: Double, _ csig1: Double, _ dn1: Double,
                              _ ssig2: Double, _ csig2: Double, _ dn2: Double) -> Double {
        let a1 = a1m1(eps), a2 = a2m1(eps)
        let coefficients1 = c1(eps), coefficients2 = c2(eps)
        let m0 = a1 - a2
        let A1 = 1 + a1, A2 = 1 + a2
        var c = Series()
        c.c1 = A1 * coefficients1.c1 - A2 * coefficients2.c1
        c.c2 = A1 * coefficients1.c2 - A2 * coefficients2.c2
        c.c3 = A1 * coefficients1.c3 - A2 * coefficients2.c3
        c.c4 = A1 * coefficients1.c4 - A2 * coefficients2.c4
        c.c5 = A1 * coefficients1.c5 - A2 * coefficients2.c5
        c.c6 = A1 * coefficients1.c6 - A2 * coefficients2.c6
        let j12 = m0 * sig12 + (sinSeries(ssig2, csig2, c) - sinSeries(ssig1, csig1, c))
        return dn2 * (csig1 * ssig2) - dn1 * (ssig1 * csig2) - csig1 * csig2 * j12
    }

    /// The positive root k of k⁴ + 2k³ - (x² + y² - 1)k² - 2y²k - y² = 0.
    static func astroid(_ x: Double, _ y: Double) -> Double {
        let p = x * x, q = y * y
        let r = (p + q - 1) / 6
        guard !(q == 0 && r <= 0) else { return 0 }
        let s = p * q / 4
        let r2 = r * r, r3 = r * r2
        let disc = s * (s + 2 * r3)
        var u = r
        if disc >= 0 {
            var t3 = s + r3
            t3 += t3 < 0 ? -LibM.sqrt(disc) : LibM.sqrt(disc)
            let t = LibM.cbrt(t3)
            u += t + (t != 0 ? r2 / t : 0)
        } else {
            let angle = LibM.atan2(LibM.sqrt(-disc), -(s + r3))
            u += 2 * r * LibM.cos(angle / 3)
        }
        let v = LibM.sqrt(u * u + q)
        let uv = u < 0 ? q / (v - u) : u + v
        let w = (uv - q) / (2 * v)
        return uv / (LibM.sqrt(uv + w * w) + w)
    }

    /// A starting azimuth α1 for Newton's method or, for very short lines, σ12 itself (>= 0) with
    /// the azimuth α2 at the far end (salp2, calp2 are 0 otherwise).
    @inline(__always)
    static func inverseStart(_ sbet1: Double, _ cbet1: Double, _ sbet2: Double, _ cbet2: Double,
                             _ lam12: Double, _ slam12: Double, _ clam12: Double, _ rounding: HypotRounding)
        -> (sig12: Double, salp1: Double, calp1: Double, salp2: Double, calp2: Double, dnm: Double) {
        let f = WGS84.flattening, n = WGS84.thirdFlattening
        var sig12 = -1.0
        var dnm = 0.0
        let sbet12 = sbet2 * cbet1 - cbet2 * sbet1
        let cbet12 = cbet2 * cbet1 + sbet2 * sbet1
        let sbet12a = sbet2 * cbet1 + cbet2 * sbet1
        let shortLine = cbet12 >= 0 && sbet12 < 0.5 && cbet2 * lam12 < 0.5
        let somg12: Double, comg12: Double
        if shortLine {
            var sbetm2 = (sbet1 + sbet2) * (sbet1 + sbet2)
            sbetm2 /= sbetm2 + (cbet1 + cbet2) * (cbet1 + cbet2)
            dnm = LibM.sqrt(1 + WGS84.secondEccentricitySquared * sbetm2)
            let omg12 = lam12 / ((1 - f) * dnm)
            somg12 = LibM.sin(omg12)
            comg12 = LibM.cos(omg12)
        } else {
            somg12 = slam12
            comg12 = clam12
        }
        var salp1 = cbet2 * somg12
        var calp1 = comg12 >= 0
            ? sbet12 + cbet2 * sbet1 * (somg12 * somg12) / (1 + comg12)
            : sbet12a - cbet2 * sbet1 * (somg12 * somg12) / (1 - comg12)
        var salp2 = 0.0, calp2 = 0.0
        let ssig12 = hypot(salp1, calp1, rounding)
        let csig12 = sbet1 * sbet2 + cbet1 * cbet2 * comg12
        // The relative error of the short-line formula is σ12² f (1 - f/2) / 2; below this σ12 it
        // is under 1% of an ulp.
        let etol2 = 0.1 * tol2 / LibM.sqrt(f * (1 - f / 2) / 2)
        if shortLine && ssig12 < etol2 {
            salp2 = cbet1 * somg12
            calp2 = sbet12 - cbet1 * sbet2 * (comg12 >= 0 ? somg12 * somg12 / (1 + comg12) : 1 - comg12)
            normalize(&salp2, &calp2, rounding)
            sig12 = LibM.atan2(ssig12, csig12)
        } else if abs(n) > 0.1 || csig12 >= 0 || ssig12 >= 6 * abs(n) * Double.pi * (cbet1 * cbet1) {
            // The zeroth-order spherical estimate is good enough.
        } else {
            (salp1, calp1) = antipodalStart(sbet1, cbet1, cbet2, sbet12a, slam12, clam12)
        }
        if !(salp1 <= 0) {
            normalize(&salp1, &calp1, rounding)
        } else {
            salp1 = 1
            calp1 = 0
        }
        return (sig12, salp1, calp1, salp2, calp2, dnm)
    }

    /// The starting α1 (unnormalized) of a nearly antipodal pair: scaled so that the antipode is at
    /// the origin, from the astroid, or on the cut near the equator.
    static func antipodalStart(_ sbet1: Double, _ cbet1: Double, _ cbet2: Double, _ sbet12a: Double,
                               _ slam12: Double, _ clam12: Double) -> (salp1: Double, calp1: Double) {
        let f = WGS84.flattening
        let lam12x = LibM.atan2(-slam12, -clam12)
        let k2 = sbet1 * sbet1 * WGS84.secondEccentricitySquared
        let eps = k2 / (2 * (1 + LibM.sqrt(1 + k2)) + k2)
        let lamScale = f * cbet1 * a3(eps) * Double.pi
        let betScale = lamScale * cbet1
        let x = lam12x / lamScale
        let y = sbet12a / betScale
        if y > -tol1 && x > -1 - xthresh {
            let salp1 = min(1, -x)
            return (salp1, -LibM.sqrt(1 - salp1 * salp1))
        }
        let k = astroid(x, y)
        let omg12a = lamScale * (-x * k / (1 + k))
        let somg12 = LibM.sin(omg12a)
        let comg12 = -LibM.cos(omg12a)
        return (cbet2 * somg12, sbet12a - cbet2 * sbet1 * (somg12 * somg12) / (1 - comg12))
    }

    struct LambdaResult {
        var lam12 = 0.0, sig12 = 0.0
        var ssig1 = 0.0, csig1 = 0.0, ssig2 = 0.0, csig2 = 0.0
        var eps = 0.0, dlam12 = 0.0
        /// The azimuth α2 at point 2 of the geodesic leaving point 1 at α1.
        var salp2 = 0.0, calp2 = 0.0
    }

    /// λ12(α1) - λ12 for the azimuth α1 at point 1, and optionally its derivative.
    static func lambda12(_ sbet1: Double, _ cbet1: Double, _ dn1: Double,
                         _ sbet2: Double, _ cbet2: Double, _ dn2: Double,
                         _ salp1: Double, _ calp1In: Double,
                         _ slam120: Double, _ clam120: Double, derivative: Bool, _ rounding: HypotRounding) -> LambdaResult {
        let f = WGS84.flattening
        var calp1 = calp1In
        if sbet1 == 0 && calp1 == 0 { calp1 = -tiny } // break the equatorial degeneracy
        let salp0 = salp1 * cbet1
        let calp0 = hypot(calp1, salp1 * sbet1, rounding)
        var result = LambdaResult()
        var ssig1 = sbet1
        let somg1 = salp0 * sbet1
        var csig1 = calp1 * cbet1
        let comg1 = csig1
        normalize(&ssig1, &csig1, rounding)
        // sin α2 cos β2 = sin α0; where |β2| = -β1 exactly, α2 is α1 (the symmetric case, singular
        // for Newton's method otherwise).
        let salp2 = cbet2 != cbet1 ? salp0 / cbet2 : salp1
        let calp2 = cbet2 != cbet1 || abs(sbet2) != -sbet1
            ? LibM.sqrt((calp1 * cbet1) * (calp1 * cbet1) + (cbet1 < -sbet1 ? (cbet2 - cbet1) * (cbet1 + cbet2) : (sbet1 - sbet2) * (sbet1 + sbet2))) / cbet2
            : abs(calp1)
        var ssig2 = sbet2
        let somg2 = salp0 * sbet2
        var csig2 = calp2 * cbet2
        let comg2 = csig2
        normalize(&ssig2, &csig2, rounding)
        let sig12 = LibM.atan2(max(0, csig1 * ssig2 - ssig1 * csig2) + 0, csig1 * csig2 + ssig1 * ssig2)
        let somg12 = max(0, comg1 * somg2 - somg1 * comg2) + 0
        let comg12 = comg1 * comg2 + somg1 * somg2
        let eta = LibM.atan2(somg12 * clam120 - comg12 * slam120, comg12 * clam120 + somg12 * slam120)
        let k2 = calp0 * calp0 * WGS84.secondEccentricitySquared
        let eps = k2 / (2 * (1 + LibM.sqrt(1 + k2)) + k2)
        let coefficients = c3(eps)
        let b312 = sinSeries(ssig2, csig2, coefficients) - sinSeries(ssig1, csig1, coefficients)
        let domg12 = -f * a3(eps) * salp0 * (sig12 + b312)
        result.lam12 = eta + domg12
        if derivative {
            if calp2 == 0 {
                result.dlam12 = -2 * (1 - f) * dn1 / sbet1
            } else {
                let m12b = reducedLength(eps, sig12, ssig1, csig1, dn1, ssig2, csig2, dn2)
                result.dlam12 = m12b * ((1 - f) / (calp2 * cbet2))
            }
        }
        result.sig12 = sig12
        result.ssig1 = ssig1
        result.csig1 = csig1
        result.ssig2 = ssig2
        result.csig2 = csig2
        result.eps = eps
        result.salp2 = salp2
        result.calp2 = calp2
        return result
    }

    /// The inverse problem's answer before conversion to degrees: the distance in metres and the
    /// sines and cosines of the azimuths at both ends (GeographicLib's salp1, calp1, salp2, calp2;
    /// not necessarily of unit length).
    struct InverseCore {
        var s12: Double
        var salp1: Double, calp1: Double
        var salp2: Double, calp2: Double
    }

    /// Both points in canonical form: reduced latitudes β (sin, cos) and dn = sqrt(1 + e'² sin²β).
    struct InverseEndpoints {
        var sbet1 = 0.0, cbet1 = 0.0, dn1 = 0.0
        var sbet2 = 0.0, cbet2 = 0.0, dn2 = 0.0
        /// How the solution for these points rounds its normalizations.
        var rounding = HypotRounding.fast
    }

    /// Karney's inverse solution, the one implementation behind `distanceM` and `inverseSolution`
    /// (GeographicLib's GenInverse). It brings the points to the canonical form 0 <= lon12 <= 180,
    /// lat1 <= -0, lat1 <= lat2 <= -lat1 (swapping them and reflecting the longitudes and
    /// latitudes), solves there, and undoes the swap and the reflections on the azimuths; the
    /// distance is invariant under them. Inputs finite, latitudes within ±90°.
    @_noAllocation
    @inline(__always)
    static func solveInverse(_ latitude1: Double, _ lon1: Double, _ latitude2: Double, _ lon2: Double,
                             _ rounding: HypotRounding) -> InverseCore {
        var (lon12, lon12s) = angleDifference(lon1, lon2)
        var lonsign = 1.0
        if lon12.sign == .minus {
            lonsign = -1
            lon12 = -lon12
            lon12s = -lon12s
        }
        let (slam12, clam12) = sinCosDegrees(lon12, plus: lon12s)
        lon12s = (180 - lon12) - lon12s // the supplementary longitude difference
        var lat1 = angleRound(latitude1)
        var lat2 = angleRound(latitude2)
        var swapp = 1.0
        if abs(lat1) < abs(lat2) {
            swapp = -1
            lonsign = -lonsign
            swap(&lat1, &lat2)
        }
        var latsign = 1.0
        if lat1.sign != .minus {
            latsign = -1
            lat1 = -lat1
            lat2 = -lat2
        }
        var core = canonicalInverse(inverseEndpoints(lat1, lat2, rounding), pole: lat1 == -90,
                                    lam12: lon12 * degree, slam12, clam12, supplementary: lon12s)
        if swapp < 0 {
            swap(&core.salp1, &core.salp2)
            swap(&core.calp1, &core.calp2)
        }
        core.salp1 *= swapp * lonsign
        core.calp1 *= swapp * latsign
        core.salp2 *= swapp * lonsign
        core.calp2 *= swapp * latsign
        core.s12 = 0 + core.s12 // -0 becomes 0
        return core
    }

    /// The canonical latitudes' reduced latitudes, |β2| forced equal to |β1| where they are equal
    /// to rounding (see Karney's notes).
    @_noAllocation
    @inline(__always)
    static func inverseEndpoints(_ lat1: Double, _ lat2: Double, _ rounding: HypotRounding) -> InverseEndpoints {
        let f1 = 1 - WGS84.flattening, ep2 = WGS84.secondEccentricitySquared
        var p = InverseEndpoints(rounding: rounding)
        (p.sbet1, p.cbet1) = sinCosDegrees(lat1)
        p.sbet1 *= f1
        normalize(&p.sbet1, &p.cbet1, rounding)
        p.cbet1 = max(tiny, p.cbet1)
        (p.sbet2, p.cbet2) = sinCosDegrees(lat2)
        p.sbet2 *= f1
        normalize(&p.sbet2, &p.cbet2, rounding)
        p.cbet2 = max(tiny, p.cbet2)
        if p.cbet1 < -p.sbet1 {
            if p.cbet2 == p.cbet1 { p.sbet2 = Double(signOf: p.sbet2, magnitudeOf: p.sbet1) }
        } else {
            if abs(p.sbet2) == -p.sbet1 { p.cbet2 = p.cbet1 }
        }
        p.dn1 = LibM.sqrt(1 + ep2 * (p.sbet1 * p.sbet1))
        p.dn2 = LibM.sqrt(1 + ep2 * (p.sbet2 * p.sbet2))
        return p
    }

    /// The inverse problem in canonical form, by GenInverse's branches: along a meridian, along
    /// the equator, a very short line (InverseStart answers), or Newton's method.
    @_noAllocation
    @inline(__always)
    static func canonicalInverse(_ p: InverseEndpoints, pole: Bool, lam12: Double, _ slam12: Double, _ clam12: Double,
                                 supplementary lon12s: Double) -> InverseCore {
        if pole || slam12 == 0, let meridian = meridianInverse(p, slam12, clam12) { return meridian }
        if p.sbet1 == 0 && lon12s >= WGS84.flattening * 180 {
            // Along the equator, heading east at both ends.
            return InverseCore(s12: WGS84.equatorialRadiusM * lam12, salp1: 1, calp1: 0, salp2: 1, calp2: 0)
        }
        let start = inverseStart(p.sbet1, p.cbet1, p.sbet2, p.cbet2, lam12, slam12, clam12, p.rounding)
        if start.sig12 >= 0 {
            return InverseCore(s12: start.sig12 * WGS84.polarRadiusM * start.dnm,
                               salp1: start.salp1, calp1: start.calp1, salp2: start.salp2, calp2: start.calp2)
        }
        return newtonInverse(p, start.salp1, start.calp1, slam12, clam12)
    }

    /// Both points on one meridian (possibly through the pole): the geodesic is the meridian,
    /// leaving toward the target longitude and arriving heading north, unless it is too close to
    /// antipodal to be the shortest path (nil then).
    @_noAllocation
    @inline(__always)
    static func meridianInverse(_ p: InverseEndpoints, _ slam12: Double, _ clam12: Double) -> InverseCore? {
        let calp1 = clam12
        let ssig1 = p.sbet1, csig1 = calp1 * p.cbet1
        let ssig2 = p.sbet2, csig2 = p.cbet2 // calp2 = 1
        let sig12 = LibM.atan2(max(0, csig1 * ssig2 - ssig1 * csig2) + 0, csig1 * csig2 + ssig1 * ssig2)
        let (s12b, m12b) = lengths(WGS84.thirdFlattening, sig12, ssig1, csig1, p.dn1, ssig2, csig2, p.dn2)
        guard sig12 < 1 || m12b >= 0 else { return nil }
        // A zero-length line, or one whose rounding made s12 or m12 negative.
        let zero = sig12 < 3 * tiny || (sig12 < tol0 && (s12b < 0 || m12b < 0))
        return InverseCore(s12: zero ? 0 : s12b * WGS84.polarRadiusM, salp1: slam12, calp1: calp1, salp2: 0, calp2: 1)
    }

    /// Newton's method on α1 from inverseStart's estimate, falling back to bisection of a bracket
    /// that always contains the root; bounded by maxit2 evaluations. α1 is the last one evaluated,
    /// α2 where that geodesic arrives.
    @_noAllocation
    @inline(__always)
    static func newtonInverse(_ p: InverseEndpoints, _ salp1Start: Double, _ calp1Start: Double,
                              _ slam12: Double, _ clam12: Double) -> InverseCore {
        var salp1 = salp1Start, calp1 = calp1Start
        var salp1a = tiny, calp1a = 1.0, salp1b = tiny, calp1b = -1.0
        var tripn = false, tripb = false
        var iteration = 0
        var last = LambdaResult()
        while true {
            last = lambda12(p.sbet1, p.cbet1, p.dn1, p.sbet2, p.cbet2, p.dn2, salp1, calp1, slam12, clam12,
                            derivative: iteration < maxit1, p.rounding)
            let v = last.lam12
            if tripb || !(abs(v) >= (tripn ? 8 : 1) * tol0) || iteration >= maxit2 { break }
            if v > 0 && (iteration > maxit1 || calp1 / salp1 > calp1b / salp1b) {
                salp1b = salp1
                calp1b = calp1
            } else if v < 0 && (iteration > maxit1 || calp1 / salp1 < calp1a / salp1a) {
                salp1a = salp1
                calp1a = calp1
            }
            iteration += 1
            if iteration <= maxit1 && last.dlam12 > 0 {
                let dalp1 = -v / last.dlam12
                if abs(dalp1) < Double.pi {
                    let sdalp1 = LibM.sin(dalp1), cdalp1 = LibM.cos(dalp1)
                    let nsalp1 = salp1 * cdalp1 + calp1 * sdalp1
                    if nsalp1 > 0 {
                        calp1 = calp1 * cdalp1 - salp1 * sdalp1
                        salp1 = nsalp1
                        normalize(&salp1, &calp1, p.rounding)
                        tripn = abs(v) <= 16 * tol0
                        continue
                    }
                }
            }
            salp1 = (salp1a + salp1b) / 2
            calp1 = (calp1a + calp1b) / 2
            normalize(&salp1, &calp1, p.rounding)
            tripn = false
            tripb = abs(salp1a - salp1) + (calp1a - calp1) < tolb || abs(salp1 - salp1b) + (calp1 - calp1b) < tolb
        }
        let s12b = lengths(last.eps, last.sig12, last.ssig1, last.csig1, p.dn1, last.ssig2, last.csig2, p.dn2).s12b
        return InverseCore(s12: s12b * WGS84.polarRadiusM, salp1: salp1, calp1: calp1, salp2: last.salp2, calp2: last.calp2)
    }

    /// The distance alone, from the shared solution (valid inputs; `distanceM` checks them). The
    /// solution is inlined here and in `inverseSolution`, each with its rounding fixed.
    @_noAllocation
    static func inverse(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double) -> Double {
        solveInverse(lat1, lon1, lat2, lon2, .fast).s12
    }

    /// atan2(y, x) in degrees, in [-180, 180] (GeographicLib's atan2d): reduced so that libm's
    /// atan2 sees an angle within ±45°, so that multiples of 90° come out exact. -180 for
    /// y = -0, x < 0, as GeographicLib gives it.
    @_noAllocation
    static func atan2Degrees(_ y: Double, _ x: Double) -> Double {
        var y = y, x = x, quadrant = 0
        if abs(y) > abs(x) {
            swap(&x, &y)
            quadrant = 2
        }
        if x.sign == .minus {
            x = -x
            quadrant += 1
        }
        let angle = LibM.atan2(y, x) / degree
        switch quadrant {
        case 1: return Double(signOf: y, magnitudeOf: 180) - angle
        case 2: return 90 - angle
        case 3: return -90 + angle
        default: return angle
        }
    }
}
