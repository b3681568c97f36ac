/// A fixed-capacity spatial index of circles (geofences), allocated once when the agent starts
/// and never again: `insert`, `remove` and the query allocate nothing.
///
/// A query returns a superset of the circles whose reach (radius + the largest margin the caller
/// will use) plus the query's accuracy contains the point, already thinned by the chord bound
/// (a circle is reported only if the straight-line distance to its centre is within that reach;
/// the geodesic distance is never shorter). The caller then decides exactly with
/// `Geodesy.compare`.
///
/// Layout: the sphere is cut into latitude bands of about `cellSizeM` height, each band into
/// about cellSizeM-wide columns (fewer towards the poles, one at each pole), so cells are
/// roughly square everywhere. Columns wrap at the antimeridian by index arithmetic, and a cell
/// that touches a pole spans all longitudes, so neither needs special cases. A circle is listed
/// in every cell its reach's bounding box touches, up to `maxCellsPerCircle`; larger circles (or
/// any circle once the cell-entry pool is used up) go to an overflow list that every query scans.
/// Cells live in a hash table of fixed size (chained through a pool of entries).
///
/// Why the superset is complete: if the point P is within reach + accuracy of a centre C, then
/// some point Q on the geodesic between them is within reach of C and within accuracy of P. Q's
/// cell is among the circle's cells (they cover every point within reach, with a margin for
/// rounding) and among the cells the query visits (they cover every point within the accuracy
/// of P). A geodesic of length d moves at most d / ρ in latitude (ρ = b²/a, the smallest
/// meridional radius) and at most d / (a cos φmax) in longitude, which is how the boxes are sized.
public final class CircleIndex {
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// The index holds `capacity` circles already ([capacity] conditions in the site file).
        case capacityExceeded(capacity: Int)
        /// Latitude outside ±90°, a non-finite coordinate, or a negative or non-finite radius or margin.
        case invalidCircle

        public var description: String {
            switch self {
            case .capacityExceeded(let capacity): "more than \(capacity) circular conditions; raise [capacity] conditions"
            case .invalidCircle: "a circle needs a latitude within ±90°, a finite longitude and a finite radius and margin >= 0"
            }
        }
    }

    /// A circle listed in more cells than this goes to the overflow list.
    public static let maxCellsPerCircle = 16
    /// A query whose accuracy box covers more cells than this scans every circle instead.
    public static let maxQueryCells = 64
    /// Rounding margin added to every reach, in metres.
    static let reachSlackM = 1e-3

    /// A cell size suited to circles of about this reach (radius + margin): each circle then
    /// lands in 1–4 cells and a query with a small accuracy visits one.
    public static func suggestedCellSizeM(typicalReachM: Double) -> Double {
        guard typicalReachM.isFinite, typicalReachM > 0 else { return 1_000 }
        return min(max(4 * typicalReachM, 100), 1_000_000)
    }

    struct Circle {
        var center: GeoPoint
        /// Negated for a shape's bounding circle (`isShape`): it has no edge of its own.
        var radiusM: Double
        var reachM: Double
        var id: Int32
        /// This circle's first cell entry (chained through `sibling`), -1 if none.
        var firstEntry: Int32
        /// Position in the overflow list, -1 if the circle is in cells.
        var overflowIndex: Int32
        /// The query that last visited this circle (deduplicates circles seen in several cells).
        var stamp: UInt32

        /// A shape's bounding circle: its edge distance is the shape's (`shapes`). Kept in the
        /// radius's sign, so a circle takes 72 bytes, not 80.
        var isShape: Bool { radiusM.sign == .minus }
    }

    struct Entry {
        var tag: UInt32
        var slot: Int32
        var next: Int32
        /// The previous entry in the bucket, or -(bucket + 1) for the head of a bucket.
        var previous: Int32
        var sibling: Int32
    }

    // Scalars are `@exclusivity(unchecked)`: the index is used from one thread, and dynamic
    // exclusivity checks on class properties would cost more than the query itself.
    public let capacity: Int
    public let cellSizeM: Double
    /// Bytes allocated at initialisation; nothing more is ever allocated.
    public let allocatedBytes: Int
    /// Circles in the index.
    @exclusivity(unchecked) public private(set) var count = 0
    /// Circles scanned by every query (too big for cells, or the entry pool ran out).
    @exclusivity(unchecked) public private(set) var overflowCount = 0
    /// Cell entries in use, of `entryCapacity`.
    @exclusivity(unchecked) public private(set) var entriesInUse = 0
    public let entryCapacity: Int

    /// The memory of the tables below.
    private let block: UnsafeMutableRawPointer
    private let circles: UnsafeMutablePointer<Circle>
    private let idTable: UnsafeMutablePointer<Int32> // slot + 1, 0 = empty
    private let idMask: Int
    private let idShift: UInt64
    private let buckets: UnsafeMutablePointer<Int32> // first entry + 1, 0 = empty
    private let bucketShift: UInt64
    private let entries: UnsafeMutablePointer<Entry>
    @exclusivity(unchecked) private var freeEntry: Int32 = -1
    /// Entries at and above this index have never been used (and never initialized).
    @exclusivity(unchecked) private var entriesNeverUsed = 0
    private let overflow: UnsafeMutablePointer<Int32>
    @exclusivity(unchecked) private var epoch: UInt32 = 0
    private let grid: CellGrid
    /// The shapes whose bounding circles are listed with `shape: true` (owned by the caller,
    /// which keeps it alive as long as the index; held without reference counting).
    public var shapes: Unmanaged<ShapeStore>? = nil

    /// - Parameters:
    ///   - capacity: the most circles the index will hold.
    ///   - cellSizeM: the target cell edge (see `suggestedCellSizeM`), clamped to 10 m – 10 000 km.
    ///   - entriesPerCircle: cell entries reserved per circle on average (circles needing more go
    ///     to the overflow list once the pool is used up). With the suggested cell size a circle
    ///     takes 1–4, about 2.3 on average.
    ///
    /// Memory: about 76 bytes per circle, 20 per entry and 16 of hash tables: 1.6 MB for 10 000
    /// circles with the defaults (`allocatedBytes` has the exact figure), reserved: only what is
    /// written becomes resident (docs/memory.md).
    public init(capacity: Int, cellSizeM: Double = 1_000, entriesPerCircle: Int = 3) {
        // Slots and entries are addressed by Int32.
        let capacity = min(max(0, capacity), 1 << 26)
        self.capacity = capacity
        let cell = cellSizeM.isFinite ? min(max(cellSizeM, 10), 10_000_000) : 1_000
        self.cellSizeM = cell
        grid = CellGrid(cellSizeM: cell)

        let idSize = CircleIndex.powerOfTwo(atLeast: max(16, 2 * capacity))
        idMask = idSize - 1
        idShift = UInt64(64 - idSize.trailingZeroBitCount)
        let pool = capacity * max(1, entriesPerCircle)
        entryCapacity = pool
        let bucketSize = CircleIndex.powerOfTwo(atLeast: max(16, 2 * capacity))
        bucketShift = UInt64(64 - bucketSize.trailingZeroBitCount)

        // Nothing is written here but the zeros calloc gives for free: circles, entries and the
        // overflow list are initialized as they are used (slots and the list are dense prefixes,
        // entries come from the never-used rest of the pool), and the hash tables' empty value is
        // 0, so a capacity that is never filled costs no resident memory.
        // One block (`TableBlock`): the tables that stay empty cost nothing.
        var layout = TableBlock()
        let at = (circles: layout.reserve(Circle.self, count: capacity), ids: layout.reserve(Int32.self, count: idSize),
                  buckets: layout.reserve(Int32.self, count: bucketSize), entries: layout.reserve(Entry.self, count: pool),
                  overflow: layout.reserve(Int32.self, count: capacity))
        block = layout.allocate()
        circles = TableBlock.table(block, at.circles, count: capacity).baseAddress!
        idTable = TableBlock.table(block, at.ids, count: idSize).baseAddress!
        buckets = TableBlock.table(block, at.buckets, count: bucketSize).baseAddress!
        entries = TableBlock.table(block, at.entries, count: pool).baseAddress!
        freeEntry = -1
        overflow = TableBlock.table(block, at.overflow, count: capacity).baseAddress!
        allocatedBytes = max(1, capacity) * (MemoryLayout<Circle>.stride + MemoryLayout<Int32>.stride)
            + idSize * MemoryLayout<Int32>.stride + bucketSize * MemoryLayout<Int32>.stride
            + max(1, pool) * MemoryLayout<Entry>.stride
    }

    deinit {
        TableBlock.deallocate(block)
    }

    static func powerOfTwo(atLeast value: Int) -> Int {
        var size = 1
        while size < value { size <<= 1 }
        return size
    }

    // MARK: - Insert and remove

    /// Adds the circle under `id`, replacing any circle already there. `maxMarginM` is the widest
    /// band the caller will ever test around the edge (enter/exit margins). With `shape`, the
    /// circle bounds the shape of that id in `shapes`, which then gives the edge distances.
    @_noAllocation
    public func insert(id: Int32, latitude: Double, longitude: Double, radiusM: Double, maxMarginM: Double = 0, shape: Bool = false) throws(Failure) {
        guard latitude.isFinite, longitude.isFinite, abs(latitude) <= 90,
              radiusM.isFinite, radiusM >= 0, maxMarginM.isFinite, maxMarginM >= 0 else { throw .invalidCircle }
        _ = remove(id: id)
        guard count < capacity else { throw .capacityExceeded(capacity: capacity) }
        let slot = count
        count += 1
        (circles + slot).initialize(to: Circle(center: GeoPoint(latitude: latitude, longitude: longitude), radiusM: shape ? -max(radiusM, 1e-9) : radiusM,
                                               reachM: radiusM + maxMarginM, id: id, firstEntry: -1, overflowIndex: -1, stamp: epoch))
        idInsert(id, slot: slot)
        place(slot)
    }

    /// Removes the circle under `id`; false if there was none.
    @_noAllocation
    @discardableResult
    public func remove(id: Int32) -> Bool {
        guard let position = idFind(id) else { return false }
        let slot = Int(idTable[position]) - 1
        unplace(slot)
        idDelete(at: position)
        let last = count - 1
        if slot != last {
            // Keep slots dense: move the last circle into the hole and repoint what refers to it.
            circles[slot] = circles[last]
            if let moved = idFind(circles[slot].id) { idTable[moved] = Int32(slot + 1) }
            if circles[slot].overflowIndex >= 0 {
                overflow[Int(circles[slot].overflowIndex)] = Int32(slot)
            } else {
                var entry = circles[slot].firstEntry
                while entry >= 0 {
                    entries[Int(entry)].slot = Int32(slot)
                    entry = entries[Int(entry)].sibling
                }
            }
        }
        count -= 1
        return true
    }

    public func contains(id: Int32) -> Bool { idFind(id) != nil }

    /// The circle stored under `id`.
    public func circle(id: Int32) -> (center: GeoPoint, radiusM: Double, maxMarginM: Double)? {
        guard let position = idFind(id) else { return nil }
        let circle = circles[Int(idTable[position]) - 1]
        return (circle.center, abs(circle.radiusM), circle.reachM - abs(circle.radiusM))
    }

    /// Empties the index (keeps its storage).
    public func removeAll() {
        while count > 0 { remove(id: circles[count - 1].id) }
    }

    private func place(_ slot: Int) {
        let circle = circles[slot]
        let range = grid.cellRange(circle.center.latitude, circle.center.longitude, radiusM: circle.reachM + CircleIndex.reachSlackM)
        let cells = grid.cellCount(range, limit: CircleIndex.maxCellsPerCircle)
        guard cells <= CircleIndex.maxCellsPerCircle, cells <= entryCapacity - entriesInUse else {
            circles[slot].overflowIndex = Int32(overflowCount)
            overflow[overflowCount] = Int32(slot)
            overflowCount += 1
            return
        }
        var walk = CellWalk(grid, range)
        while let key = walk.next() {
            let entry: Int32
            if freeEntry >= 0 {
                entry = freeEntry
                freeEntry = entries[Int(entry)].next
            } else {
                entry = Int32(entriesNeverUsed)
                entriesNeverUsed += 1
            }
            entriesInUse += 1
            let (bucket, tag) = cellHash(key, shift: bucketShift)
            let head = buckets[bucket] - 1
            (entries + Int(entry)).initialize(to: Entry(tag: tag, slot: Int32(slot), next: head, previous: -Int32(bucket) - 1,
                                                         sibling: circles[slot].firstEntry))
            if head >= 0 { entries[Int(head)].previous = entry }
            buckets[bucket] = entry + 1
            circles[slot].firstEntry = entry
        }
    }

    private func unplace(_ slot: Int) {
        let overflowIndex = Int(circles[slot].overflowIndex)
        if overflowIndex >= 0 {
            let lastIndex = overflowCount - 1
            if overflowIndex != lastIndex {
                let movedSlot = Int(overflow[lastIndex])
                overflow[overflowIndex] = Int32(movedSlot)
                circles[movedSlot].overflowIndex = Int32(overflowIndex)
            }
            overflowCount -= 1
            circles[slot].overflowIndex = -1
            return
        }
        var entry = circles[slot].firstEntry
        while entry >= 0 {
            let current = entries[Int(entry)]
            if current.previous >= 0 {
                entries[Int(current.previous)].next = current.next
            } else {
                buckets[Int(-current.previous - 1)] = current.next + 1
            }
            if current.next >= 0 { entries[Int(current.next)].previous = current.previous }
            entries[Int(entry)].next = freeEntry
            entries[Int(entry)].slot = -1
            freeEntry = entry
            entriesInUse -= 1
            entry = current.sibling
        }
        circles[slot].firstEntry = -1
    }

    // MARK: - Query

    /// Calls `body` once with the id of every circle whose reach plus `accuracyM` may contain
    /// `point` (a superset, thinned by the chord; decide with `Geodesy.compare`). `body` must not
    /// insert into or remove from the index. A non-finite or negative accuracy scans all circles.
    @_noAllocation
    public func forEachCandidate(near point: GeoPoint, accuracyM: Double, _ body: (Int32) -> Void) {
        let stamp = nextStamp()
        let accuracy = accuracyM >= 0 && accuracyM.isFinite ? accuracyM : Double.infinity
        for index in 0..<overflowCount {
            visit(Int(overflow[index]), point, accuracy, stamp, body)
        }
        guard accuracy.isFinite, point.isValid else {
            for slot in 0..<count { visit(slot, point, accuracy, stamp, body) }
            return
        }
        let range = grid.cellRange(point.latitude, point.longitude, radiusM: accuracy + CircleIndex.reachSlackM)
        guard grid.cellCount(range, limit: CircleIndex.maxQueryCells) <= CircleIndex.maxQueryCells else {
            for slot in 0..<count { visit(slot, point, accuracy, stamp, body) }
            return
        }
        var walk = CellWalk(grid, range)
        while let key = walk.next() {
            let (bucket, tag) = cellHash(key, shift: bucketShift)
            var entry = buckets[bucket] - 1
            while entry >= 0 {
                let current = entries[Int(entry)]
                if current.tag == tag { visit(Int(current.slot), point, accuracy, stamp, body) }
                entry = current.next
            }
        }
    }

    /// A fresh stamp for one query: circles carrying it have been visited by that query.
    @inline(__always)
    private func nextStamp() -> UInt32 {
        epoch &+= 1
        if epoch == 0 {
            for slot in 0..<count { circles[slot].stamp = 0 }
            epoch = 1
        }
        return epoch
    }

    @inline(__always)
    private func visit(_ slot: Int, _ point: GeoPoint, _ accuracy: Double, _ stamp: UInt32, _ body: (Int32) -> Void) {
        guard circles[slot].stamp != stamp else { return }
        circles[slot].stamp = stamp
        let circle = circles[slot]
        let limit = circle.reachM + accuracy + Geodesy.chordSlackM
        if Geodesy.chordSquaredM2(point, circle.center) <= limit * limit { body(circle.id) }
    }

    /// A lower bound of the distance from `point` to the nearest circle edge (radius, without
    /// margins), in metres; infinity if the index is empty. Exact to the chord bound's error
    /// (under 1.1 mm while the nearest edge is within 10 km of a point, the circle's centre is
    /// within 10 km too); looser, but still a lower bound, for edges hundreds of kilometres away.
    /// Scans every circle (a few instructions each, the exact distance for an edge the chord
    /// bound cannot place): for policy decisions such as how long the receiver may sleep, not
    /// for every fix.
    @_noAllocation
    public func nearestEdgeDistanceM(_ point: GeoPoint) -> Double {
        var nearest = Double.infinity
        for slot in 0..<count {
            let circle = circles[slot]
            if circle.isShape, let shapes {
                nearest = min(nearest, shapes._withUnsafeGuaranteedRef { $0.boundaryBounds(id: circle.id, point).lower })
                continue
            }
            let bounds = Geodesy.distanceBounds(chordM: Geodesy.chordM(point, circle.center))
            let gap: Double
            if bounds.lower > circle.radiusM {
                gap = bounds.lower - circle.radiusM
            } else if bounds.upper < circle.radiusM {
                gap = circle.radiusM - bounds.upper
            } else {
                gap = abs(Geodesy.distanceM(point, circle.center) - circle.radiusM)
            }
            nearest = min(nearest, gap)
        }
        return nearest
    }

    @_noAllocation
    public func nearestEdgeDistanceM(latitude: Double, longitude: Double) -> Double {
        nearestEdgeDistanceM(GeoPoint(latitude: latitude, longitude: longitude))
    }

    // MARK: - Nearest edge

    /// The distance from `point` to the nearest circle edge, in metres: the smallest
    /// |geodesic distance to the centre − radius| over every circle (the radius alone, without
    /// margins; from inside a circle that is radius − distance). Exactly the value
    /// `abs(Geodesy.distanceM(point, centre) - radius)` has for the nearest circle (what
    /// `FenceEdges` computes) whenever it is below `limitM`; `limitM` itself when no edge is
    /// nearer than that. nil when the index is empty. A NaN `limitM` means no limit; an invalid
    /// point (see `GeoPoint.isValid`) gives `limitM`.
    ///
    /// `limitM` is the distance beyond which the caller's decision no longer changes (for the
    /// sampling planner: maximum speed × longest interval + accuracy). It lets the search stop
    /// early: with a limit of a few cells, a query visits a few cells whatever else the index
    /// holds.
    ///
    /// Search: P's own cells, the overflow list, then rings of cells around P, ring k adding the
    /// cells within Rₖ = min(k · cellSizeM, B) of P (the cells of that range not in ring k−1's
    /// range), B being an upper bound of the nearest edge seen so far (at most `limitM`). It stops
    /// once Rₖ reaches B.
    /// Each circle is priced with the chord bracket first (see `EdgeSearch`), so that the exact
    /// distance, a few thousand instructions, is computed about once per query: for the circle
    /// that stays nearest, and for others only when their brackets overlap (edges within
    /// micrometres of each other, or circles hundreds of kilometres away). When a ring's range
    /// would hold more cells than there are circles, the remaining circles are scanned one by
    /// one instead.
    ///
    /// Why stopping is safe: once every cell within R of P has been visited, every circle whose
    /// edge is nearer than R has been seen. Let C be its centre, r its radius, d the distance.
    /// - d <= r (P inside, however far the edge): P is within the circle's reach, so P's cell is
    ///   among the circle's cells, and P's cells are visited first.
    /// - d > r and d − r < R: the point Q on the geodesic from C to P at distance r from C is
    ///   within the circle's reach, so Q's cell is among the circle's cells; and Q is within
    ///   d − r < R of P, so Q's cell is among the visited ones. The centre may lie arbitrarily far
    ///   away (a huge circle): only Q matters.
    /// - Circles too big for cells (or that found no free cell entry) are in the overflow list,
    ///   which is always scanned.
    /// - A shape's bounding circle holds all of the shape, its edges included: the same two cases
    ///   hold with the shape's boundary for the circle's edge.
    /// Every circle not yet seen thus has its edge at least R >= B away: the nearest seen edge is
    /// the nearest edge (or none is nearer than `limitM`). Ranges are built for R + 1 mm
    /// (`reachSlackM`), which covers the nanometres of rounding in the computed distances.
    @_noAllocation
    public func nearestEdgeM(_ point: GeoPoint, limitM: Double = .infinity) -> Double? {
        guard count > 0 else { return nil }
        let limit = limitM.isNaN ? Double.infinity : limitM
        guard point.isValid, limit > 0 else { return limit }
        let stamp = nextStamp()
        var search = EdgeSearch(best: limit)
        var previous = grid.cellRange(point.latitude, point.longitude, radiusM: CircleIndex.reachSlackM)
        visitRing(previous, excluding: nil, point, stamp, &search)
        for index in 0..<overflowCount { consider(Int(overflow[index]), point, stamp, &search) }
        let budget = max(CircleIndex.maxQueryCells, count)
        var covered = 0.0
        var ring = 0.0
        while covered < search.bound {
            ring += 1
            covered = min(ring * cellSizeM, search.bound)
            let range = grid.cellRange(point.latitude, point.longitude, radiusM: covered + CircleIndex.reachSlackM)
            guard grid.cellCount(range, limit: budget) <= budget else {
                for slot in 0..<count { consider(slot, point, stamp, &search) }
                break
            }
            visitRing(range, excluding: previous, point, stamp, &search)
            previous = range
        }
        if search.leader >= 0 { search.settle(gap(search.leader, point)) }
        return search.best
    }

    /// The state of one nearest-edge search. The chord bounds l <= d <= u bracket a circle's edge
    /// distance g = |d − r|: lower = max(0, l − r, r − u) <= g <= upper = max(u − r, r − l).
    /// The nearest edge among the circles seen is min(best, g of the leader): `best` is the
    /// smallest exact g computed (or the limit), the leader the circle with the smallest upper
    /// whose g is not computed yet. A new circle is
    /// - dropped if its lower >= best or >= the leader's upper (its g is no smaller);
    /// - the new leader if its upper is below the leader's; the old leader is then dropped if its
    ///   lower >= the new upper, else its exact g goes into `best`;
    /// - otherwise computed exactly into `best` (its bracket overlaps the leader's).
    /// At the end the leader's exact g goes into `best`, which is then the nearest edge exactly
    /// (or the limit). min(best, leader's upper) bounds the nearest edge from above throughout.
    struct EdgeSearch {
        var best: Double
        var leader = -1
        var leaderLower = Double.infinity
        var leaderUpper = Double.infinity

        init(best: Double) { self.best = best }

        var bound: Double { min(best, leaderUpper) }

        @inline(__always)
        mutating func settle(_ gap: Double) {
            if gap < best { best = gap }
        }
    }

    /// The exact edge distance of one circle, as `FenceEdges` computes it, or of a shape.
    @inline(__always)
    private func gap(_ slot: Int, _ point: GeoPoint) -> Double {
        if circles[slot].isShape, let shapes {
            let id = circles[slot].id
            return shapes._withUnsafeGuaranteedRef { $0.locate(id: id, point).boundaryDistanceM }
        }
        return abs(Geodesy.distanceM(point, circles[slot].center) - circles[slot].radiusM)
    }

    @_noAllocation
    public func nearestEdgeM(latitude: Double, longitude: Double, limitM: Double = .infinity) -> Double? {
        nearestEdgeM(GeoPoint(latitude: latitude, longitude: longitude), limitM: limitM)
    }

    /// Considers the circles of every cell of `range` that is not also a cell of `previous`.
    @inline(__always)
    private func visitRing(_ range: CellGrid.CellRange, excluding previous: CellGrid.CellRange?, _ point: GeoPoint,
                           _ stamp: UInt32, _ search: inout EdgeSearch) {
        var band = range.bandLow
        while band <= range.bandHigh {
            let columns = grid.columns(band)
            let span = grid.columnSpan(range, columns: columns)
            // The previous range's columns in this band (unwrapped: old.last may be >= columns),
            // or an empty span.
            var old = (first: 1, last: 0)
            if let previous, band >= previous.bandLow, band <= previous.bandHigh { old = grid.columnSpan(previous, columns: columns) }
            var column = span.first
            while column <= span.last {
                let wrapped = column >= columns ? column - columns : column
                // Skip the run of columns the previous range had (visited then).
                if wrapped >= old.first && wrapped <= old.last {
                    column += old.last - wrapped + 1
                    continue
                }
                if wrapped + columns >= old.first && wrapped + columns <= old.last {
                    column += old.last - wrapped - columns + 1
                    continue
                }
                let (bucket, tag) = cellHash(Int64(band) << 32 | Int64(wrapped), shift: bucketShift)
                var entry = buckets[bucket] - 1
                while entry >= 0 {
                    let current = entries[Int(entry)]
                    if current.tag == tag { consider(Int(current.slot), point, stamp, &search) }
                    entry = current.next
                }
                column += 1
            }
            band += 1
        }
    }

    /// Adds this circle to the search (once per query; see `EdgeSearch`).
    @inline(__always)
    private func consider(_ slot: Int, _ point: GeoPoint, _ stamp: UInt32, _ search: inout EdgeSearch) {
        guard circles[slot].stamp != stamp else { return }
        circles[slot].stamp = stamp
        let lower: Double, upper: Double
        if circles[slot].isShape, let shapes {
            let id = circles[slot].id
            (lower, upper) = shapes._withUnsafeGuaranteedRef { $0.boundaryBounds(id: id, point) }
        } else {
            let radius = circles[slot].radiusM
            let bounds = Geodesy.distanceBounds(chordM: Geodesy.chordM(point, circles[slot].center))
            lower = bounds.lower > radius ? bounds.lower - radius : bounds.upper < radius ? radius - bounds.upper : 0
            upper = max(bounds.upper - radius, radius - bounds.lower)
        }
        guard lower < search.best, lower < search.leaderUpper else { return }
        if upper < search.leaderUpper {
            if search.leader >= 0 && search.leaderLower < upper { search.settle(gap(search.leader, point)) }
            search.leader = slot
            search.leaderLower = lower
            search.leaderUpper = upper
        } else {
            search.settle(gap(slot, point))
        }
    }

    // MARK: - Ids (open addressing, linear probing, backward-shift deletion)

    @inline(__always)
    private func home(_ id: Int32) -> Int {
        var z = UInt64(UInt32(bitPattern: id)) &* 0x9E37_79B9_7F4A_7C15
        z ^= z >> 32
        return Int(truncatingIfNeeded: (z &* 0x9E37_79B9_7F4A_7C15) >> idShift) & idMask
    }

    private func idFind(_ id: Int32) -> Int? {
        var position = home(id)
        // Bounded: the table is never more than half full, so an empty slot ends every probe.
        for _ in 0...idMask {
            let value = idTable[position]
            if value == 0 { return nil }
            if circles[Int(value) - 1].id == id { return position }
            position = (position + 1) & idMask
        }
        return nil
    }

    private func idInsert(_ id: Int32, slot: Int) {
        var position = home(id)
        while idTable[position] != 0 { position = (position + 1) & idMask }
        idTable[position] = Int32(slot + 1)
    }

    private func idDelete(at start: Int) {
        var hole = start
        var probe = start
        while true {
            probe = (probe + 1) & idMask
            let value = idTable[probe]
            if value == 0 { break }
            let wanted = home(circles[Int(value) - 1].id)
            // The entry at `probe` may stay only if its home lies cyclically in (hole, probe].
            let stays = hole <= probe ? (hole < wanted && wanted <= probe) : (hole < wanted || wanted <= probe)
            if !stays {
                idTable[hole] = value
                hole = probe
            }
        }
        idTable[hole] = 0
    }
}

/// Latitude bands of about `cellSizeM` height, each cut into about cellSizeM-wide columns; a
/// cell is (band, column), keyed as band << 32 | column.
struct CellGrid {
    /// Rounding margin added to every box, in degrees (about 1 cm).
    static let boxSlackDegrees = 1e-7

    let cellSizeM: Double
    let bandCount: Int
    let bandHeightDegrees: Double

    init(cellSizeM: Double) {
        self.cellSizeM = cellSizeM
        bandCount = max(1, min(2_000_000, Int(Double.pi * WGS84.minimumRadiusOfCurvatureM / cellSizeM)))
        bandHeightDegrees = 180 / Double(bandCount)
    }

    struct CellRange {
        var bandLow: Int
        var bandHigh: Int
        var allLongitudes: Bool
        /// Western edge, normalised to [-180, 180], and the width, in degrees.
        var west: Double
        var width: Double
    }

    /// The cells covering every point within `radiusM` of (latitude, longitude), as a box.
    @_noAllocation
    func cellRange(_ latitude: Double, _ longitude: Double, radiusM: Double) -> CellRange {
        let degreesPerRadian = 180 / Double.pi
        let dLat = radiusM / WGS84.minimumRadiusOfCurvatureM * degreesPerRadian * (1 + 1e-9) + CellGrid.boxSlackDegrees
        let south = latitude - dLat, north = latitude + dLat
        var range = CellRange(bandLow: band(south), bandHigh: band(north), allLongitudes: true, west: -180, width: 360)
        guard south > -90, north < 90 else { return range }
        let parallelRadius = WGS84.equatorialRadiusM * CellGrid.cosineLowerBound(max(abs(south), abs(north)))
        guard parallelRadius > 0 else { return range }
        let dLon = radiusM / parallelRadius * degreesPerRadian * (1 + 1e-9) + CellGrid.boxSlackDegrees
        guard dLon < 180 else { return range }
        range.allLongitudes = false
        range.west = Geodesy.reduce(longitude - dLon, by: 360).remainder
        range.width = 2 * dLon
        return range
    }

    /// A lower bound of cos(latitude) for |latitude| <= 90°, within 4e-8 of it: sin(90° - |φ|) by
    /// its Taylor series cut after a negative term (an alternating series with falling terms, so
    /// the partial sum is below the sum). Cheaper than libm, and boxes built on it only grow.
    @inline(__always)
    static func cosineLowerBound(_ latitude: Double) -> Double {
        let x = (90 - min(abs(latitude), 90)) * (Double.pi / 180)
        let x2 = x * x
        var p = -1.0 / 39_916_800
        p = p * x2 + 1.0 / 362_880
        p = p * x2 - 1.0 / 5_040
        p = p * x2 + 1.0 / 120
        p = p * x2 - 1.0 / 6
        p = p * x2 + 1
        return max(0, x * p - 1e-12)
    }

    @inline(__always)
    func band(_ latitude: Double) -> Int {
        let position = (latitude + 90) / bandHeightDegrees
        guard position > 0 else { return 0 }
        return min(bandCount - 1, Int(position))
    }

    /// Columns in a band: its poleward edge's parallel divided into cellSizeM-wide cells.
    @inline(__always)
    func columns(_ band: Int) -> Int {
        let south = -90 + Double(band) * bandHeightDegrees
        let poleward = min(90, max(abs(south), abs(south + bandHeightDegrees)))
        let circumference = 2 * Double.pi * WGS84.equatorialRadiusM * CellGrid.cosineLowerBound(poleward)
        let columns = circumference / cellSizeM
        return columns < 1 ? 1 : Int(min(columns, 1_073_741_824.0))
    }

    /// The first and last column (unwrapped: last may be >= columns) of a range in a band.
    @inline(__always)
    func columnSpan(_ range: CellRange, columns: Int) -> (first: Int, last: Int) {
        if range.allLongitudes { return (0, columns - 1) }
        let perDegree = Double(columns) / 360
        let first = Int((range.west + 180) * perDegree)
        let last = Int((range.west + range.width + 180) * perDegree)
        if last - first + 1 >= columns { return (0, columns - 1) }
        return (first, last)
    }

    /// The number of cells in a range, counting no further than just past `limit`.
    @_noAllocation
    func cellCount(_ range: CellRange, limit: Int) -> Int {
        var total = 0
        var band = range.bandLow
        while band <= range.bandHigh {
            let span = columnSpan(range, columns: columns(band))
            total += span.last - span.first + 1
            if total > limit { return total }
            band += 1
        }
        return total
    }
}

/// The cells of a range, band by band, west to east (wrapping at the antimeridian).
struct CellWalk {
    let grid: CellGrid
    let range: CellGrid.CellRange
    var band: Int
    var column = 0
    var last = -1
    var columns = 1

    init(_ grid: CellGrid, _ range: CellGrid.CellRange) {
        self.grid = grid
        self.range = range
        band = range.bandLow - 1
    }

    @_noAllocation
    mutating func next() -> Int64? {
        while column > last {
            band += 1
            guard band <= range.bandHigh else { return nil }
            columns = grid.columns(band)
            let span = grid.columnSpan(range, columns: columns)
            column = span.first
            last = span.last
        }
        let wrapped = column >= columns ? column - columns : column
        column += 1
        return Int64(band) << 32 | Int64(wrapped)
    }
}

/// Bucket (top bits) and tag (low bits) of a mixed cell key (SplitMix64's finaliser). A free
/// function: a static method on the class would make the optimizer's allocation check see
/// the class's metatype.
@inline(__always)
func cellHash(_ key: Int64, shift: UInt64) -> (bucket: Int, tag: UInt32) {
    var z = UInt64(bitPattern: key)
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    z ^= z >> 31
    return (Int(truncatingIfNeeded: z >> shift), UInt32(truncatingIfNeeded: z))
}
