/// Which places a reverse lookup may answer with.
public enum PlaceScope: Equatable, Sendable {
    /// Every place: the gazetteer's and the site's own.
    case any
    /// The gazetteer's populated places (feature class P) only.
    case populated
    /// The site's own places only.
    case site
}

/// The place nearest a point: which, how far (geodesic, metres) and in which direction the point
/// lies from it (the geodesic's azimuth at the place, degrees clockwise from true north, 0..<360).
public struct PlaceMatch: Equatable, Sendable {
    public var place: Int
    public var distanceM: Double
    public var bearingDeg: Double

    public init(place: Int, distanceM: Double, bearingDeg: Double) {
        self.place = place
        self.distanceM = distanceM
        self.bearingDeg = bearingDeg
    }
}

extension PlaceIndex {
    /// The place nearest `point` by geodesic distance on WGS84 (Karney's inverse, as
    /// `Geodesy.distanceM`, or under 20 km `Geodesy.shortLine`, within 0.3 µm of it), within
    /// `maximumDistanceM`, or nil. Equal distances go to a site's
    /// place, then to the larger population. No allocation: it may label every fix.
    ///
    /// How: a walk of the k-d trees finds the two places with the shortest chords (straight
    /// lines through the Earth between ECEF points); the exact geodesic s of the shortest is
    /// then an upper bound. A geodesic is never shorter than its chord, so only a place whose
    /// chord is at most s (plus the index's centimetre rounding) can be as near. The chord
    /// undershoots the geodesic by about c³/(24R²) (1 mm at 10 km, 1 m at 100 km), so the
    /// second-shortest chord is usually beyond that and the lookup costs one inverse; when it
    /// is not (near-equal places, or far from every place, mid-ocean), a second walk decides
    /// every place within the bound by its geodesic, the bound shrinking to the best found.
    @_noAllocation
    public func nearest(to point: GeoPoint, within maximumDistanceM: Double = .infinity, scope: PlaceScope = .any) -> PlaceMatch? {
        guard point.isValid, !(maximumDistanceM < 0) else { return nil }
        var search = NearestPlaceSearch(index: self, point: point, maximumDistanceM: maximumDistanceM, populatedOnly: scope == .populated)
        if scope != .site { search.shortestChord(0, siteStart) }
        if scope != .populated { search.shortestChord(siteStart, placeCount) }
        guard search.shortest >= 0 else { return nil }
        search.decide(search.shortest)
        search.tightenBound()
        // The second walk only when another place's chord is within reach (near-equal places,
        // or far from every place); usually the second-shortest chord is already beyond it.
        if search.secondSquared <= search.boundSquared {
            if scope != .site { search.decideWithinBound(0, siteStart) }
            if scope != .populated { search.decideWithinBound(siteStart, placeCount) }
        }
        guard search.best >= 0, search.bestDistanceM <= maximumDistanceM else { return nil }
        return PlaceMatch(place: search.best, distanceM: search.bestDistanceM, bearingDeg: search.bestBearingDeg)
    }
}

/// The state of one `nearest` call (see there). Distances in the tree are centimetres.
struct NearestPlaceSearch {
    /// How far a stored coordinate (rounded to 1 cm on each axis) can be from the true one, cm.
    static let roundingCm = 0.87

    let index: PlaceIndex
    let point: GeoPoint
    let qx: Double, qy: Double, qz: Double
    let maximumCm: Double
    let populatedOnly: Bool
    /// Squared chord (cm²) beyond which a place cannot be the nearest.
    var boundSquared: Double
    /// The place with the shortest chord (first walk), that chord squared, and the second-shortest
    /// chord squared (of any other place).
    var shortest = -1
    var shortestSquared = Double.infinity
    var secondSquared = Double.infinity
    var best = -1
    var bestDistanceM = Double.infinity
    var bestBearingDeg = 0.0

    @_noAllocation
    init(index: PlaceIndex, point: GeoPoint, maximumDistanceM: Double, populatedOnly: Bool) {
        self.index = index
        self.point = point
        let scale = PlaceIndexLayout.ecefScale
        (qx, qy, qz) = (point.x * scale, point.y * scale, point.z * scale)
        maximumCm = maximumDistanceM * scale
        self.populatedOnly = populatedOnly
        // A place whose stored chord exceeds the limit by more than the rounding is farther.
        let limit = maximumCm + Self.roundingCm
        boundSquared = limit.isFinite ? limit * limit : .infinity
    }

    @_noAllocation @inline(__always)
    func accepts(_ record: PlaceRecord) -> Bool {
        !populatedOnly || record.featureClass == UInt8(ascii: "P")
    }

    @_noAllocation @inline(__always)
    func squaredChord(_ record: PlaceRecord) -> (squared: Double, dx: Double, dy: Double, dz: Double) {
        let dx = qx - Double(record.ecef(0)), dy = qy - Double(record.ecef(1)), dz = qz - Double(record.ecef(2))
        return (dx * dx + dy * dy + dz * dz, dx, dy, dz)
    }

    /// How far the point is from a subtree's cell, as the walk knows it: the squared distance
    /// (cm²) to the box the split planes on the way down bound, and the offset along each axis
    /// that makes it up (Arya and Mount's incremental distance). Far from every place, where the
    /// ball around the point is thousands of kilometres wide, this prunes far more subtrees than
    /// the distance to the last split plane alone.
    struct CellDistance {
        var squared = 0.0
        var x = 0.0, y = 0.0, z = 0.0

        /// The cell across a split at `delta` (cm) along `axis`.
        @_noAllocation @inline(__always)
        func across(axis: Int, delta: Double) -> CellDistance {
            var cell = self
            switch axis {
            case 0: cell.squared += delta * delta - x * x; cell.x = delta
            case 1: cell.squared += delta * delta - y * y; cell.y = delta
            default: cell.squared += delta * delta - z * z; cell.z = delta
            }
            return cell
        }
    }

    /// Subtrees of at most this many places are scanned in order, not walked.
    static let leafSize = 8

    /// Keeps `place` (its chord squared `squared`) if it is among the two shortest so far.
    @_noAllocation @inline(__always)
    mutating func consider(_ place: Int, _ squared: Double, _ record: PlaceRecord) {
        guard squared < secondSquared && squared <= boundSquared && accepts(record) else { return }
        if squared < shortestSquared {
            secondSquared = shortestSquared
            shortestSquared = squared
            shortest = place
        } else {
            secondSquared = squared
        }
    }

    /// First walk over the tree [lo, hi): the accepted places with the two shortest chords within
    /// the bound (of equal chords, the first met is `shortest`; the second walk then sees both).
    @_noAllocation
    mutating func shortestChord(_ lo: Int, _ hi: Int, _ cell: CellDistance = CellDistance()) {
        if hi - lo <= Self.leafSize {
            for place in lo..<hi {
                let record = index.record(place)
                consider(place, squaredChord(record).squared, record)
            }
            return
        }
        let mid = (lo + hi) >> 1
        let record = index.record(mid)
        let (squared, dx, dy, dz) = squaredChord(record)
        consider(mid, squared, record)
        let axis = record.axis
        let delta = axis == 0 ? dx : axis == 1 ? dy : dz
        // The subtree across the split only if its cell may hold a chord among the two shortest.
        let far = cell.across(axis: axis, delta: delta)
        if delta < 0 {
            shortestChord(lo, mid, cell)
            if far.squared < secondSquared && far.squared <= boundSquared { shortestChord(mid + 1, hi, far) }
        } else {
            shortestChord(mid + 1, hi, cell)
            if far.squared < secondSquared && far.squared <= boundSquared { shortestChord(lo, mid, far) }
        }
    }

    /// The bound after a place was decided: a place is as near as the best only if its stored
    /// chord is within the best geodesic plus the rounding.
    @_noAllocation @inline(__always)
    mutating func tightenBound() {
        let limit = bestDistanceM * PlaceIndexLayout.ecefScale + Self.roundingCm
        if limit * limit < boundSquared { boundSquared = limit * limit }
    }

    /// Second walk over [lo, hi): every accepted place within the bound but the one already
    /// decided, decided by its geodesic; the bound shrinks to the best geodesic so far.
    @_noAllocation
    mutating func decideWithinBound(_ lo: Int, _ hi: Int, _ cell: CellDistance = CellDistance()) {
        if hi - lo <= Self.leafSize {
            for place in lo..<hi {
                let record = index.record(place)
                guard squaredChord(record).squared <= boundSquared && place != shortest && accepts(record) else { continue }
                decide(place)
                tightenBound()
            }
            return
        }
        let mid = (lo + hi) >> 1
        let record = index.record(mid)
        let (squared, dx, dy, dz) = squaredChord(record)
        if squared <= boundSquared && mid != shortest && accepts(record) {
            decide(mid)
            tightenBound()
        }
        let axis = record.axis
        let delta = axis == 0 ? dx : axis == 1 ? dy : dz
        let far = cell.across(axis: axis, delta: delta)
        if delta < 0 {
            decideWithinBound(lo, mid, cell)
            if far.squared <= boundSquared { decideWithinBound(mid + 1, hi, far) }
        } else {
            decideWithinBound(mid + 1, hi, cell)
            if far.squared <= boundSquared { decideWithinBound(lo, mid, far) }
        }
    }

    /// Stored chords up to this (cm²) take the short-line solution: `Geodesy.shortLineLimitM`
    /// less the rounding, so the exact chord is within its limit too.
    @inline(__always)
    static var shortLineSquared: Double {
        let limit = Geodesy.shortLineLimitM * PlaceIndexLayout.ecefScale - 2 * roundingCm
        return limit * limit
    }

    /// The geodesic from place to point; kept when it is the nearest so far. Under 20 km (most
    /// lookups: a gateway is seldom far from a town) the short-line solution, within 0.3 µm and
    /// 3e-7° of Karney's and a fifth of its cost; beyond, Karney's inverse.
    @_noAllocation
    mutating func decide(_ place: Int) {
        let record = index.record(place)
        var distance: Double, bearing: Double
        if squaredChord(record).squared <= Self.shortLineSquared,
           let short = Geodesy.shortLine(fromLatitude: record.latitude, longitude: record.longitude, to: point) {
            (distance, bearing) = short
        } else {
            let solution = Geodesy.inverseSolution(record.latitude, record.longitude, point.latitude, point.longitude)
            distance = solution.distanceM
            bearing = solution.azimuth1Deg < 0 ? solution.azimuth1Deg + 360 : solution.azimuth1Deg
            if bearing >= 360 { bearing = 0 }
        }
        guard distance < bestDistanceM || (distance == bestDistanceM && preferred(place, over: best)) else { return }
        best = place
        bestDistanceM = distance
        bestBearingDeg = bearing
    }

    /// Between two places at the same distance: the site's, then the more populous, then the first.
    @_noAllocation
    func preferred(_ place: Int, over other: Int) -> Bool {
        guard other >= 0 else { return true }
        let a = index.record(place), b = index.record(other)
        if a.isSite != b.isSite { return a.isSite }
        if a.population != b.population { return a.population > b.population }
        return place < other
    }
}
