/// A fixed-capacity hash index from beacon identities to condition slots, with the three key
/// shapes CLMonitor allows: UUID+major+minor (exact), UUID+major, and UUID alone (wildcards).
/// A sighting is three lookups. Each table entry heads a chain of slots threaded through
/// `next`, so any number of conditions may share a key. Open addressing with linear probing and
/// backward-shift deletion (no tombstones, so lookups stay short after many removals).
public struct BeaconIndex: ~Copyable {
    /// `major`/`minor` hold 0...65535, or `wildcard`.
    struct Key: Equatable {
        var high: UInt64
        var low: UInt64
        var major: UInt32
        var minor: UInt32
        static let wildcard: UInt32 = 0x1_0000
    }

    /// The memory of the three tables (`TableBlock`).
    private let block: UnsafeMutableRawPointer
    private let keys: UnsafeMutableBufferPointer<Key>
    /// Chain head per table entry, stored + 1: 0 = empty entry (calloc's zeros, so the table costs
    /// no memory until beacon conditions fill it). Read through `head(_:)`.
    private let heads: UnsafeMutableBufferPointer<Int32>
    /// Next slot in the chain, per condition slot (written when the slot joins a chain).
    private let next: UnsafeMutableBufferPointer<Int32>
    private let mask: Int
    public private(set) var count = 0

    /// `slots`: the engine's condition capacity (slot numbers are 0..<slots).
    public init(slots: Int) {
        var size = 16
        while size < slots * 2 { size <<= 1 }
        // Keys are written when an entry is filled and read only where `heads` says one is, `next`
        // only for slots in a chain: left uninitialized (and `heads` zero from calloc), a table
        // sized for 10,000 conditions costs no memory until it is used.
        var layout = TableBlock()
        let at = (keys: layout.reserve(Key.self, count: size), heads: layout.reserve(Int32.self, count: size),
                  next: layout.reserve(Int32.self, count: max(slots, 1)))
        block = layout.allocate()
        keys = TableBlock.table(block, at.keys, count: size)
        heads = TableBlock.table(block, at.heads, count: size)
        next = TableBlock.table(block, at.next, count: max(slots, 1))
        mask = size - 1
    }

    deinit {
        TableBlock.deallocate(block)
    }

    static func key(_ condition: BeaconIdentityCondition) -> Key {
        Key(high: condition.uuid.high, low: condition.uuid.low,
            major: condition.major.map { UInt32($0) } ?? Key.wildcard,
            minor: condition.minor.map { UInt32($0) } ?? Key.wildcard)
    }

    /// A cheap, well-mixed hash of the key (no Hasher: SipHash costs more than the whole lookup).
    @inline(__always)
    private static func hash(_ key: Key) -> Int {
        var x = key.high ^ (key.low &* 0x9E37_79B9_7F4A_7C15) ^ (UInt64(key.major) << 17 | UInt64(key.minor) << 40)
        x ^= x >> 33
        x = x &* 0xFF51_AFD7_ED55_8CCD
        x ^= x >> 33
        return Int(truncatingIfNeeded: x)
    }

    @inline(__always)
    private func find(_ key: Key) -> Int? {
        var index = BeaconIndex.hash(key) & mask
        // Bounded: the table is at most half full, so an empty entry is reached.
        while heads[index] != 0 {
            if keys[index] == key { return index }
            index = (index + 1) & mask
        }
        return nil
    }

    public mutating func insert(slot: Int32, condition: BeaconIdentityCondition) {
        precondition(slot >= 0, "a slot number")
        precondition(Int(slot) < next.count, "a slot within the engine's capacity")
        let key = BeaconIndex.key(condition)
        if let index = find(key) {
            next[Int(slot)] = heads[index] - 1
            heads[index] = slot + 1
            return
        }
        var index = BeaconIndex.hash(key) & mask
        while heads[index] != 0 { index = (index + 1) & mask }
        keys[index] = key
        heads[index] = slot + 1
        next[Int(slot)] = -1
        count += 1
        precondition(count * 2 <= heads.count, "the table is at most half full, so a probe ends")
    }

    public mutating func remove(slot: Int32, condition: BeaconIdentityCondition) {
        let key = BeaconIndex.key(condition)
        guard let index = find(key) else { preconditionFailure("a removed beacon condition is in the index") }
        if heads[index] - 1 == slot {
            heads[index] = next[Int(slot)] + 1
        } else {
            var previous = heads[index] - 1
            while previous >= 0 && next[Int(previous)] != slot { previous = next[Int(previous)] }
            precondition(previous >= 0, "a removed slot is in its key's chain")
            next[Int(previous)] = next[Int(slot)]
        }
        next[Int(slot)] = -1
        if heads[index] == 0 { deleteEntry(at: index) }
    }

    /// Backward-shift deletion: moves later entries of the probe run into the hole.
    private mutating func deleteEntry(at start: Int) {
        count -= 1
        var hole = start
        var index = (start + 1) & mask
        while heads[index] != 0 {
            let home = BeaconIndex.hash(keys[index]) & mask
            // Move the entry if its home is not in (hole, index] cyclically.
            let moves = hole <= index ? (home <= hole || home > index) : (home <= hole && home > index)
            if moves {
                keys[hole] = keys[index]
                heads[hole] = heads[index]
                heads[index] = 0
                hole = index
            }
            index = (index + 1) & mask
        }
        heads[hole] = 0
        precondition(count >= 0, "the index's key count is never negative")
    }

    /// Visits every slot whose condition matches `identity`: exact, UUID+major, UUID-only.
    @_noAllocation
    public func forEachMatch(_ identity: BeaconIdentity, _ body: (Int32) -> Void) {
        let major = UInt32(identity.major)
        let minor = UInt32(identity.minor)
        visit(Key(high: identity.uuid.high, low: identity.uuid.low, major: major, minor: minor), body)
        visit(Key(high: identity.uuid.high, low: identity.uuid.low, major: major, minor: Key.wildcard), body)
        visit(Key(high: identity.uuid.high, low: identity.uuid.low, major: Key.wildcard, minor: Key.wildcard), body)
    }

    @inline(__always)
    private func visit(_ key: Key, _ body: (Int32) -> Void) {
        guard let index = find(key) else { return }
        var slot = heads[index] - 1
        while slot >= 0 {
            body(slot)
            slot = next[Int(slot)]
        }
    }
}
