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
    /// `Geodesy.distanceM`), within `maximumDistanceM`, or nil. Equal distances go to a site's
    /// place, then to the larger population. No allocation: it may label every fix.
    ///
    /// How: the k-d tree finds the place with the shortest chord (straight line through the
    /// Earth between ECEF points), pruning with a bound slightly above that chord; every place
    /// whose chord is within the bound is kept as a candidate. The bound is the largest geodesic
    /// distance that chord allows (`Geodesy.distanceBounds`, plus the index's centimetre
    /// rounding), and a geodesic is never shorter than its chord, so the nearest place by
    /// geodesic distance is among the candidates; each gets the exact inverse (usually one).
    @_noAllocation
    public func nearest(to point: GeoPoint, within maximumDistanceM: Double = .infinity, scope: PlaceScope = .any) -> PlaceMatch? {
        guard point.isValid, !(maximumDistanceM < 0) else { return nil }
        var search = NearestPlaceSearch(index: self, point: point, maximumDistanceM: maximumDistanceM, populatedOnly: scope == .populated)
        if scope != .site { search.collect(0, siteStart) }
        if scope != .populated { search.collect(siteStart, placeCount) }
        if search.overflowed {
            // More near-equal candidates than the buffer holds (a point over 1,000 km from every
            // place, or many places at one spot): every place within the bound, decided exactly.
            search.resetForExactPass()
            if scope != .site { search.decideAll(0, siteStart) }
            if scope != .populated { search.decideAll(siteStart, placeCount) }
        } else {
            search.decideCandidates()
        }
        guard search.best >= 0, search.bestDistanceM <= maximumDistanceM else { return nil }
        return PlaceMatch(place: search.best, distanceM: search.bestDistanceM, bearingDeg: search.bestBearingDeg)
    }
}

/// The state of one `nearest` call (see there). Distances in the tree are centimetres.
struct NearestPlaceSearch {
    static let capacity = 8
    /// How far a stored coordinate (rounded to 1 cm on each axis) can be from the true one, cm.
    static let roundingCm = 0.87

    let index: PlaceIndex
    let point: GeoPoint
    let qx: Double, qy: Double, qz: Double
    let maximumCm: Double
    let populatedOnly: Bool
    /// Squared chord (cm²) beyond which a place cannot be the nearest.
    var boundSquared: Double
    var shortestChordCm = Double.infinity
    var candidates: (Int32, Int32, Int32, Int32, Int32, Int32, Int32, Int32) = (0, 0, 0, 0, 0, 0, 0, 0)
    var chords: (Double, Double, Double, Double, Double, Double, Double, Double) = (0, 0, 0, 0, 0, 0, 0, 0)
    var candidateCount = 0
    var overflowed = false
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
        let limit = maximumCm + 2 * Self.roundingCm
        boundSquared = limit.isFinite ? limit * limit : .infinity
    }

    /// The largest chord (cm) a place may have and still be nearer by geodesic distance than a
    /// place whose chord is `chordCm`.
    @_noAllocation
    static func reach(ofChordCm chordCm: Double) -> Double {
        let scale = PlaceIndexLayout.ecefScale
        let upper = Geodesy.distanceBounds(chordM: (chordCm + roundingCm) / scale).upper
        // Beyond 1,000 km the bracket is not claimed: a geodesic is at most a half ellipse, under
        // 1.6 times its chord.
        let geodesicCm = upper.isFinite ? upper * scale : 1.6 * (chordCm + roundingCm)
        return geodesicCm + roundingCm
    }

    @_noAllocation
    func accepts(_ record: PlaceRecord) -> Bool {
        !populatedOnly || record.featureClass == UInt8(ascii: "P")
    }

    @_noAllocation
    func squaredChord(_ record: PlaceRecord) -> (squared: Double, dx: Double, dy: Double, dz: Double) {
        let dx = qx - Double(record.ecef(0)), dy = qy - Double(record.ecef(1)), dz = qz - Double(record.ecef(2))
        return (dx * dx + dy * dy + dz * dz, dx, dy, dz)
    }

    /// Walks the tree over [lo, hi): the shortest chord and every place within its reach.
    @_noAllocation
    mutating func collect(_ lo: Int, _ hi: Int) {
        guard lo < hi else { return }
        let mid = (lo + hi) >> 1
        let record = index.record(mid)
        let (squared, dx, dy, dz) = squaredChord(record)
        if squared <= boundSquared && accepts(record) {
            let chord = LibM.sqrt(squared)
            if chord < shortestChordCm {
                shortestChordCm = chord
                let reach = Self.reach(ofChordCm: chord)
                boundSquared = min(boundSquared, reach * reach)
            }
            remember(mid, chord)
        }
        let axis = record.axis
        let delta = axis == 0 ? dx : axis == 1 ? dy : dz
        if delta < 0 {
            collect(lo, mid)
            if delta * delta <= boundSquared { collect(mid + 1, hi) }
        } else {
            collect(mid + 1, hi)
            if delta * delta <= boundSquared { collect(lo, mid) }
        }
    }

    @_noAllocation
    mutating func remember(_ place: Int, _ chord: Double) {
        // Entries the shrinking bound has passed are dropped to make room.
        if candidateCount == Self.capacity { compact() }
        guard candidateCount < Self.capacity else {
            overflowed = true
            return
        }
        withUnsafeMutableBytes(of: &candidates) { $0.storeBytes(of: Int32(place), toByteOffset: candidateCount * 4, as: Int32.self) }
        withUnsafeMutableBytes(of: &chords) { $0.storeBytes(of: chord, toByteOffset: candidateCount * 8, as: Double.self) }
        candidateCount += 1
    }

    @_noAllocation
    mutating func compact() {
        let bound = LibM.sqrt(boundSquared)
        var kept = 0
        withUnsafeMutableBytes(of: &candidates) { places in
            withUnsafeMutableBytes(of: &chords) { chords in
                for slot in 0..<candidateCount {
                    let chord = chords.load(fromByteOffset: slot * 8, as: Double.self)
                    guard chord <= bound else { continue }
                    places.storeBytes(of: places.load(fromByteOffset: slot * 4, as: Int32.self), toByteOffset: kept * 4, as: Int32.self)
                    chords.storeBytes(of: chord, toByteOffset: kept * 8, as: Double.self)
                    kept += 1
                }
            }
        }
        candidateCount = kept
    }

    /// The exact geodesic for every candidate still within reach of the shortest chord.
    @_noAllocation
    mutating func decideCandidates() {
        compact()
        let count = candidateCount
        var slot = 0
        while slot < count {
            let place = withUnsafeBytes(of: candidates) { Int($0.load(fromByteOffset: slot * 4, as: Int32.self)) }
            decide(place)
            slot += 1
        }
    }

    @_noAllocation
    mutating func resetForExactPass() {
        candidateCount = 0
        let reach = shortestChordCm.isFinite ? Self.reach(ofChordCm: shortestChordCm) : maximumCm + 2 * Self.roundingCm
        boundSquared = reach.isFinite ? reach * reach : .infinity
    }

    /// Every place over [lo, hi) within the bound, decided by its geodesic; the bound shrinks to
    /// the best geodesic found so far.
    @_noAllocation
    mutating func decideAll(_ lo: Int, _ hi: Int) {
        guard lo < hi else { return }
        let mid = (lo + hi) >> 1
        let record = index.record(mid)
        let (squared, dx, dy, dz) = squaredChord(record)
        if squared <= boundSquared && accepts(record) {
            decide(mid)
            let limit = bestDistanceM * PlaceIndexLayout.ecefScale + Self.roundingCm
            boundSquared = min(boundSquared, limit * limit)
        }
        let axis = record.axis
        let delta = axis == 0 ? dx : axis == 1 ? dy : dz
        if delta < 0 {
            decideAll(lo, mid)
            if delta * delta <= boundSquared { decideAll(mid + 1, hi) }
        } else {
            decideAll(mid + 1, hi)
            if delta * delta <= boundSquared { decideAll(lo, mid) }
        }
    }

    /// The geodesic from place to point; kept when it is the nearest so far.
    @_noAllocation
    mutating func decide(_ place: Int) {
        let record = index.record(place)
        let solution = Geodesy.inverseSolution(record.latitude, record.longitude, point.latitude, point.longitude)
        let distance = solution.distanceM
        guard distance < bestDistanceM || (distance == bestDistanceM && preferred(place, over: best)) else { return }
        best = place
        bestDistanceM = distance
        let bearing = solution.azimuth1Deg < 0 ? solution.azimuth1Deg + 360 : solution.azimuth1Deg
        bestBearingDeg = bearing >= 360 ? 0 : bearing
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
