/// Core Location's `CLBeaconIdentityConstraint`: a UUID, optionally narrowed by major, then
/// minor. The same three shapes as a beacon condition, so it is the same type.
public typealias BeaconIdentityConstraint = BeaconIdentityCondition

/// One beacon in a ranging frame (CLBeacon): its identity, the filtered RSSI, the estimated
/// distance and its category, and when it was last heard.
public struct RangedBeacon: Equatable, Sendable {
    public var identity: BeaconIdentity
    /// The monitor's filtered RSSI (trimmed mean over the window), dBm; nil when the beacon was
    /// not heard within `BeaconRanger.recentMs` (CLBeacon's rssi 0).
    public var rssi: Double?
    /// Estimated metres; nil when unknown (CLBeacon's accuracy -1): not heard recently, or a
    /// frame without a usable measured power.
    public var distanceM: Double?
    public var proximity: BeaconProximity
    public var lastHeard: UTCTime

    public init(identity: BeaconIdentity, rssi: Double?, distanceM: Double?, proximity: BeaconProximity, lastHeard: UTCTime) {
        self.identity = identity
        self.rssi = rssi
        self.distanceM = distanceM
        self.proximity = proximity
        self.lastHeard = lastHeard
    }
}

/// Beacon ranging (CLLocationManager's `startRangingBeacons(satisfying:)`): the beacons that
/// match a constraint, once a second, nearest first, with the monitor's own proximity filter.
///
/// One table of beacons serves every ranging client: a beacon is tracked while some client's
/// constraint matches it. Per beacon it keeps the monitor's `RSSIFilter` (20 s trimmed mean),
/// the last measured power its frames carried, when it was last heard and its previous
/// proximity category (for `BeaconProximity`'s hysteresis). Each client (`slot`) has one
/// constraint. The distance is the monitor's: `DistanceModel.freeSpace` (log-distance, n = 2)
/// on the filtered RSSI and the frame's measured power.
///
/// Core Location's behaviours it keeps:
/// - a beacon not heard within `recentMs` stays listed with an unknown proximity and no
///   estimate (CLBeacon: proximity unknown, accuracy -1, rssi 0);
/// - a beacon silent for `silenceMs` (the monitor's beacon exit timeout, 30 s) drops out;
/// - the list is ordered by estimated distance, nearest first; unknown ones last.
///
/// Capacity is fixed at init (`beaconCapacity` beacons, `slots` clients). A new beacon that
/// finds the table full is not tracked: its sightings are counted per client
/// (`refusedSightings`) and the frame says so. `observe` and `range` allocate nothing, and
/// with no constraint set `observe` returns at once: ranging with no client costs nothing.
///
/// Time: UTC nanoseconds, from the sightings and the caller's `now` (nothing reads a clock).
/// Single-threaded (the agent's loop owns it).
public final class BeaconRanger {
    /// Beacons the table tracks unless the caller says otherwise.
    public static let defaultBeaconCapacity = 512
    /// A beacon not heard for this long is listed as unknown (two ranging intervals: one missed
    /// advertisement of a beacon sending once a second does not blank it).
    public static let recentMs: Int64 = 2_000
    /// A beacon silent this long drops out: the monitor's beacon exit timeout.
    public static let silenceMs: Int64 = MonitorEngine.defaultBeaconExitTimeoutMs
    /// The distance model: the monitor's.
    public static let distanceModel = DistanceModel.freeSpace

    struct Entry {
        var filter: RSSIFilter
        var lastHeardNs: Int64
        var identity: BeaconIdentity
        var proximity: BeaconProximity
        var measuredPower: Int8
    }

    public let beaconCapacity: Int
    public let slotCapacity: Int
    private let entries: UnsafeMutableBufferPointer<Entry>
    /// Open addressing over entry numbers (-1 empty), at most half full.
    private let table: UnsafeMutableBufferPointer<Int32>
    private let mask: Int
    private let constraints: UnsafeMutableBufferPointer<BeaconIdentityConstraint>
    /// The slots with a constraint, `activeCount` of them (a sighting looks at these only).
    private let active: UnsafeMutableBufferPointer<Int32>
    /// Per slot: sightings of beacons it matches that found the table full, since its last frame.
    private let refused: UnsafeMutableBufferPointer<Int>
    /// `range`'s output and its sort keys.
    private let results: UnsafeMutableBufferPointer<RangedBeacon>
    private let keys: UnsafeMutableBufferPointer<Double>
    @exclusivity(unchecked)
    public private(set) var activeCount = 0
    /// Beacons tracked now.
    @exclusivity(unchecked)
    public private(set) var count = 0
    /// Since start: sightings refused because the table was full (any client).
    @exclusivity(unchecked)
    public private(set) var refusedSightings = 0

    public init(beaconCapacity: Int = BeaconRanger.defaultBeaconCapacity, slots: Int) {
        precondition(beaconCapacity >= 1 && beaconCapacity <= Int(Int32.max / 4) && slots >= 1)
        self.beaconCapacity = beaconCapacity
        slotCapacity = slots
        entries = .allocate(capacity: beaconCapacity)
        var size = 16
        while size < beaconCapacity * 2 { size <<= 1 }
        table = .allocate(capacity: size)
        table.initialize(repeating: -1)
        mask = size - 1
        constraints = .allocate(capacity: slots)
        constraints.initialize(repeating: BeaconIdentityConstraint(uuid: BeaconUUID(high: 0, low: 0)))
        active = .allocate(capacity: slots)
        active.initialize(repeating: -1)
        refused = .allocate(capacity: slots)
        refused.initialize(repeating: 0)
        results = .allocate(capacity: beaconCapacity)
        keys = .allocate(capacity: beaconCapacity)
    }

    deinit {
        entries.baseAddress!.deinitialize(count: count)
        entries.deallocate()
        table.deallocate()
        constraints.deallocate()
        active.deallocate()
        refused.deallocate()
        results.deallocate()
        keys.deallocate()
    }

    // MARK: clients

    /// `slot`'s constraint (meaningful while it ranges).
    public func constraint(_ slot: Int) -> BeaconIdentityConstraint { constraints[slot] }

    /// Whether `slot` ranges.
    public func isRanging(_ slot: Int) -> Bool { activePosition(slot) != nil }

    /// `slot` ranges beacons matching `constraint` (replacing the one it had).
    public func start(slot: Int, _ constraint: BeaconIdentityConstraint) {
        precondition(slot >= 0 && slot < slotCapacity)
        constraints[slot] = constraint
        refused[slot] = 0
        if activePosition(slot) == nil {
            active[activeCount] = Int32(slot)
            activeCount += 1
        }
        dropUnmatched()
    }

    /// `slot` stops ranging; beacons no other client wants are forgotten.
    public func stop(slot: Int) {
        guard let position = activePosition(slot) else { return }
        activeCount -= 1
        active[position] = active[activeCount]
        dropUnmatched()
    }

    private func activePosition(_ slot: Int) -> Int? {
        for position in 0..<activeCount where active[position] == Int32(slot) { return position }
        return nil
    }

    // MARK: sightings and time

    /// A sighting: tracked when some client's constraint matches it.
    @_noAllocation
    public func observe(_ sighting: Sighting) {
        guard activeCount > 0, matchesAny(sighting.identity) else { return }
        let nowNs = sighting.time.totalNanoseconds
        var index = find(sighting.identity)
        if index < 0 {
            guard count < beaconCapacity else {
                refuse(sighting.identity)
                return
            }
            index = insert(sighting.identity)
        }
        let entry = entries.baseAddress! + index
        if let rssi = sighting.rssi { entry.pointee.filter.add(rssi: rssi, atMs: nowNs / 1_000_000) }
        // A sighting stamped before the last one (a replay out of order) does not move it back.
        if nowNs > entry.pointee.lastHeardNs { entry.pointee.lastHeardNs = nowNs }
        entry.pointee.measuredPower = sighting.measuredPower
    }

    /// Drops the beacons silent for `silenceMs` or more at `now`.
    @_noAllocation
    public func expire(now: UTCTime) {
        let nowNs = now.totalNanoseconds
        var index = 0
        while index < count {
            if nowNs &- entries[index].lastHeardNs >= BeaconRanger.silenceMs * 1_000_000 {
                remove(index)   // the last entry moved here: look at this index again
            } else {
                index += 1
            }
        }
    }

    /// The agent's clock was stepped: every stored time moves with it.
    public func clockStepped(byNs deltaNs: Int64) {
        for index in 0..<count {
            entries[index].lastHeardNs &+= deltaNs
            entries[index].filter.shift(byMs: deltaNs / 1_000_000)
        }
    }

    // MARK: frames

    /// What `range` found for one client at one moment.
    public struct Frame {
        /// The beacons matching the constraint, nearest first (`beacon(_:)`).
        public var count: Int
        /// Sightings of matching beacons the full table refused since the client's last frame.
        public var refused: Int
    }

    /// The beacons matching `slot`'s constraint at `now`, nearest first, read with
    /// `beacon(_:)` until the next call. Updates each beacon's proximity (its hysteresis
    /// state) and clears the client's refused count. Call `expire(now:)` first.
    @_noAllocation
    public func range(slot: Int, now: UTCTime) -> Frame {
        // Locals in preconditions: an autoclosure capturing `self` would retain it.
        let slots = slotCapacity
        precondition(slot >= 0 && slot < slots)
        let constraint = constraints[slot]
        let nowNs = now.totalNanoseconds
        let nowMs = nowNs / 1_000_000
        var found = 0
        let base = entries.baseAddress!
        for index in 0..<count {
            // Through the pointer: a copy of the entry (its filter's rings) is not needed to read it.
            let entry = base + index
            guard constraint.matches(entry.pointee.identity) else { continue }
            var rssi: Double? = nil
            var distance: Double? = nil
            if nowNs &- entry.pointee.lastHeardNs < BeaconRanger.recentMs * 1_000_000 {
                rssi = entry.pointee.filter.value(nowMs: nowMs)
                if let filtered = rssi {
                    distance = BeaconRanger.distanceModel.distance(rssi: filtered, measuredPower: MeasuredPower(atOneMeter: entry.pointee.measuredPower))
                }
            }
            let proximity = BeaconProximity.category(distance: distance, previous: entry.pointee.proximity)
            entry.pointee.proximity = proximity
            results[found] = RangedBeacon(identity: entry.pointee.identity, rssi: rssi, distanceM: distance, proximity: proximity,
                                          lastHeard: UTCTime(nanoseconds: entry.pointee.lastHeardNs))
            keys[found] = distance ?? .infinity
            found += 1
        }
        sort(found)
        let frame = Frame(count: found, refused: refused[slot])
        refused[slot] = 0
        return frame
    }

    /// Beacon `index` (`0..<frame.count`) of the last `range`.
    @_noAllocation
    public func beacon(_ index: Int) -> RangedBeacon {
        results[index]
    }

    // MARK: internals

    @_noAllocation
    private func matchesAny(_ identity: BeaconIdentity) -> Bool {
        for position in 0..<activeCount where constraints[Int(active[position])].matches(identity) { return true }
        return false
    }

    @_noAllocation
    private func refuse(_ identity: BeaconIdentity) {
        refusedSightings += 1
        for position in 0..<activeCount where constraints[Int(active[position])].matches(identity) {
            refused[Int(active[position])] += 1
        }
    }

    /// Forgets the beacons no client's constraint matches any more.
    private func dropUnmatched() {
        var index = 0
        while index < count {
            if matchesAny(entries[index].identity) { index += 1 } else { remove(index) }
        }
    }

    /// The table position holding `identity`'s entry number, or of the empty place it would go.
    @inline(__always)
    private func position(_ identity: BeaconIdentity) -> Int {
        var position = RangerHash.hash(identity) & mask
        // Bounded: the table is at most half full, so an empty place is reached.
        while table[position] >= 0 {
            if entries[Int(table[position])].identity == identity { return position }
            position = (position + 1) & mask
        }
        return position
    }

    /// The entry number of `identity`, or -1.
    @inline(__always)
    private func find(_ identity: BeaconIdentity) -> Int {
        Int(table[position(identity)])
    }

    private func insert(_ identity: BeaconIdentity) -> Int {
        let index = count
        (entries.baseAddress! + index).initialize(to: Entry(filter: RSSIFilter(), lastHeardNs: Int64.min, identity: identity,
                                                            proximity: .unknown, measuredPower: 0))
        table[position(identity)] = Int32(index)
        count += 1
        return index
    }

    /// Removes entry `index`: its table place by backward shift, the last entry moved into it.
    private func remove(_ index: Int) {
        var hole = position(entries[index].identity)
        let table = self.table
        precondition(table[hole] == Int32(index), "a tracked beacon is in the table")
        var next = (hole + 1) & mask
        while table[next] >= 0 {
            let home = RangerHash.hash(entries[Int(table[next])].identity) & mask
            // Move the entry if its home is not in (hole, next] cyclically.
            let moves = hole <= next ? (home <= hole || home > next) : (home <= hole && home > next)
            if moves {
                table[hole] = table[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        table[hole] = -1
        let last = count - 1
        if index != last {
            let moved = position(entries[last].identity)
            entries[index] = entries[last]
            table[moved] = Int32(index)
        }
        (entries.baseAddress! + last).deinitialize(count: 1)
        count -= 1
    }

    /// Heapsort of the first `count` results by (distance, identity): in place, no allocation,
    /// O(n log n) for the 500 beacons a busy site has in range. The identity breaks ties, so the
    /// order does not depend on the table's layout.
    @_noAllocation
    private func sort(_ count: Int) {
        guard count > 1 else { return }
        var start = count / 2
        while start > 0 {
            start -= 1
            siftDown(start, count)
        }
        var end = count - 1
        while end > 0 {
            swapAt(0, end)
            siftDown(0, end)
            end -= 1
        }
    }

    @_noAllocation
    private func siftDown(_ start: Int, _ end: Int) {
        var root = start
        while 2 * root + 1 < end {
            var child = 2 * root + 1
            if child + 1 < end {
                if before(child, child + 1) { child += 1 }
            }
            guard before(root, child) else { return }
            swapAt(root, child)
            root = child
        }
    }

    /// Whether result `a` comes before result `b`: nearer, or as near with the smaller identity.
    @_noAllocation
    private func before(_ a: Int, _ b: Int) -> Bool {
        if keys[a] != keys[b] { return keys[a] < keys[b] }
        let x = results[a].identity, y = results[b].identity
        if x.uuid.high != y.uuid.high { return x.uuid.high < y.uuid.high }
        if x.uuid.low != y.uuid.low { return x.uuid.low < y.uuid.low }
        if x.major != y.major { return x.major < y.major }
        return x.minor < y.minor
    }

    @_noAllocation
    private func swapAt(_ a: Int, _ b: Int) {
        let key = keys[a]
        keys[a] = keys[b]
        keys[b] = key
        let result = results[a]
        results[a] = results[b]
        results[b] = result
    }
}

/// The ranger's hash of an identity (outside the class: a static member would need its metadata
/// on the allocation-free path). The mix is `BeaconIndex`'s: no Hasher, SipHash costs more than
/// the lookup.
enum RangerHash {
    @inline(__always)
    static func hash(_ identity: BeaconIdentity) -> Int {
        var x = identity.uuid.high ^ (identity.uuid.low &* 0x9E37_79B9_7F4A_7C15) ^ (UInt64(identity.major) << 17 | UInt64(identity.minor) << 40)
        x ^= x >> 33
        x = x &* 0xFF51_AFD7_ED55_8CCD
        x ^= x >> 33
        return Int(truncatingIfNeeded: x)
    }
}
