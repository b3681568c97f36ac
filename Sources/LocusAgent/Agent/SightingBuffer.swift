import LocusCore

/// The sightings a turn's read gathered, owned by `BluetoothSource`: a fixed buffer allocated at
/// start and never grown, how many sightings the last read stored in it, and the counts since
/// start: sightings handed on, events that were not well-formed HCI, and sightings that did not
/// fit (with the count last reported in the log, so a flood is one line per doubling, not one
/// per turn).
struct SightingBuffer: ~Copyable {
    /// What the gathers (`SightingGather`) write into: a plain buffer, so the hot path holds no
    /// reference to the source.
    let storage: UnsafeMutableBufferPointer<Sighting>
    /// Sightings the last read stored, in `subscript`.
    private(set) var count = 0
    private(set) var gathered = 0
    private(set) var rejectedEvents = 0
    private(set) var dropped = 0
    private var droppedReported = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a read holds at least one sighting")
        storage = .allocate(capacity: capacity)
    }

    deinit { storage.deallocate() }

    var capacity: Int { storage.count }

    subscript(index: Int) -> Sighting {
        precondition(index >= 0, "a sighting of the last read")
        precondition(index < count, "a sighting of the last read")
        return storage[index]
    }

    /// A read begins: the last one's sightings are gone.
    mutating func clear() { count = 0 }

    /// What a read gathered into `storage`: `stored` sightings, `rejected` events, `over`
    /// sightings dropped. True when the drops are to be logged (their total has doubled since
    /// it was last).
    mutating func record(stored: Int, rejected: Int, dropped over: Int) -> Bool {
        precondition(stored >= 0, "sightings stored are not negative")
        precondition(stored <= capacity, "sightings stored within the buffer's capacity")
        precondition(rejected >= 0, "rejected events are not negative")
        precondition(over >= 0, "dropped sightings are not negative")
        count = stored
        gathered += stored
        rejectedEvents += rejected
        dropped += over
        guard over > 0 && dropped >= 2 * droppedReported else { return false }
        droppedReported = dropped
        return true
    }
}
