import LocusCore
import LocusDevices

/// Beacon ranging in the agent (CLLocationManager.startRangingBeacons(satisfying:)): one
/// constraint per control connection that sent `range`, one `BeaconRanger` table for all of
/// them, and once a second per connection a line listing the matching beacons nearest first.
///
/// The loop hands it sightings only while a connection ranges (`isActive`), so an agent
/// without ranging clients does no ranging work at all. Each connection's lines are due on the
/// UTC clock, a second apart from when it asked (the sightings, the filters and `last_heard`
/// are UTC too); the loop takes due lines with `nextLine` and sends them like the live updates'
/// stream lines. Nothing is written here.
final class Ranging: LoopComponent {
    /// Time between a connection's lines (Core Location ranges once a second).
    static let intervalNs: Int64 = 1_000_000_000
    /// Beacons one line lists (about 190 bytes each); the rest are counted in its `more`.
    static let beaconsPerLine = 100
    /// One line: the beacons above plus the frame's own members (asserted at start, so a line
    /// can never overflow its buffer).
    static let lineBytes = 24 << 10

    let ranger: BeaconRanger
    /// Per control slot: when its next line is due (UTC ns); nil when it does not range.
    private var due: [Int64?]
    /// `nextLine`'s place: the slot it looks at next.
    private var nextSlot = 0
    /// Whether the silent beacons have been dropped for this turn's lines.
    private var expiredAtNs: Int64 = Int64.min
    private var line = JSONWriter(capacity: Ranging.lineBytes)
    /// The phones file's names, for lines that show a phone by its name.
    var phones: PhoneResolution? = nil {
        didSet { phonesReference = phones.map { Unmanaged.passUnretained($0) } }
    }
    /// `phones` for the allocation-free rendering (held by `phones`).
    private(set) var phonesReference: Unmanaged<PhoneResolution>? = nil
    /// Lines sent since start (for status).
    private(set) var lines = 0

    /// One ranger slot per control connection, and one more for the fleet's `snapshot`.
    init(slots: Int, beaconCapacity: Int = BeaconRanger.defaultBeaconCapacity) {
        ranger = BeaconRanger(beaconCapacity: beaconCapacity, slots: max(1, slots) + 1)
        due = Array(repeating: nil, count: max(1, slots))
    }

    /// The fleet's snapshot's ranger slot: the one past the control connections'.
    private var snapshotSlot: Int { due.count }

    /// Whether any connection ranges: the loop passes sightings only then.
    var isActive: Bool { ranger.activeCount > 0 }

    // MARK: the loop's surface

    /// Each ranging connection's next line, on the UTC clock.
    func deadlines(_ next: inout NextDeadline) {
        guard isActive else { return }
        for slot in due.indices { if let at = due[slot] { next.consider(UTCTime(nanoseconds: at)) } }
    }

    func status(into line: inout JSONWriter) {
        line.beginObject("ranging")
        line.integer("streams", ranger.activeCount - (ranger.isRanging(snapshotSlot) ? 1 : 0))
        line.boolean("snapshot", ranger.isRanging(snapshotSlot))
        line.integer("beacons", ranger.count)
        line.integer("capacity", ranger.beaconCapacity)
        line.integer("refused_sightings", ranger.refusedSightings)
        line.integer("lines", lines)
        line.endObject()
    }

    // MARK: streams

    /// Control slot `slot` ranges `constraint` (a second `range` replaces its constraint); its
    /// first line is due a second from now.
    func start(_ slot: Int, _ constraint: BeaconIdentityConstraint, _ now: AgentTime) {
        precondition(due.indices.contains(slot), "a control connection's slot")
        let first = !ranger.isRanging(slot)
        ranger.start(slot: slot, constraint)
        due[slot] = now.utc.totalNanoseconds + Ranging.intervalNs
        if first { AgentLog.info("locus: ranging: stream \(slot) opened (\(ranger.activeCount) ranging)") }
    }

    /// Slot `slot`'s ranging ends (`range-stop`, its connection closed, or it could not keep up).
    func end(_ slot: Int) {
        guard slot < due.count, due[slot] != nil else { return }
        due[slot] = nil
        ranger.stop(slot: slot)
        AgentLog.info("locus: ranging: stream \(slot) closed")
    }

    /// The fleet's `snapshot`: ranged like a connection's, with no lines due; `takeSnapshot`
    /// renders it at its end.
    func startSnapshot(_ constraint: BeaconIdentityConstraint) {
        ranger.start(slot: snapshotSlot, constraint)
        AgentLog.info("locus: ranging: the fleet's snapshot started (\(ranger.activeCount) ranging)")
    }

    /// The snapshot's frame as one JSON object (its `beacons` nearest first, at most `beacons`;
    /// the others counted in `more`), and its ranging ended.
    func takeSnapshot(beacons: Int, _ now: AgentTime) -> UnsafeRawBufferPointer {
        let slot = snapshotSlot
        precondition(ranger.isRanging(slot), "the fleet's snapshot is ranging")
        ranger.expire(now: now.utc)
        expiredAtNs = now.utc.totalNanoseconds
        line.reset()
        let frame = ranger.range(slot: slot, now: now.utc)
        RangingJSON.frame(ranger.constraint(slot), time: now.utc, frame, ranger, beaconsPerLine: beacons, into: &line, phones: phonesReference)
        ranger.stop(slot: slot)
        let bytes = line.bytes
        // The frame without its line's newline.
        return UnsafeRawBufferPointer(rebasing: bytes[0..<(bytes.count - 1)])
    }

    // MARK: values from the loop

    /// A sighting from the Bluetooth source (the loop calls this only while `isActive`).
    @inline(__always)
    func observe(_ sighting: Sighting) { ranger.observe(sighting) }

    /// The agent's clock was stepped: stored times and due times move with it.
    func clockStepped(byNs deltaNs: Int64) {
        ranger.clockStepped(byNs: deltaNs)
        for slot in due.indices { if let at = due[slot] { due[slot] = at &+ deltaNs } }
    }

    /// The next due line, rendered, for the loop to send (nil: none due now). A connection
    /// whose line is late by more than an interval (the agent was busy or asleep) gets one
    /// line now and the next a second later, not a burst.
    func nextLine(_ now: AgentTime) -> (slot: Int, line: UnsafeRawBufferPointer)? {
        guard isActive else { return nil }
        let nowNs = now.utc.totalNanoseconds
        while nextSlot < due.count {
            let slot = nextSlot
            nextSlot += 1
            guard let at = due[slot], at <= nowNs else { continue }
            if expiredAtNs != nowNs {
                ranger.expire(now: now.utc)
                expiredAtNs = nowNs
            }
            let next = at + Ranging.intervalNs
            due[slot] = next > nowNs ? next : nowNs + Ranging.intervalNs
            // The next line is never already due: a late connection gets one line, not a burst.
            precondition(due[slot]! > nowNs, "a connection's next ranging line is due after this one")
            render(slot, now.utc)
            lines += 1
            return (slot, line.bytes)
        }
        nextSlot = 0
        return nil
    }

    /// Slot `slot`'s frame at `time` into `line`.
    @inline(__always)
    private func render(_ slot: Int, _ time: UTCTime) {
        line.reset()
        let frame = ranger.range(slot: slot, now: time)
        RangingJSON.frame(ranger.constraint(slot), time: time, frame, ranger, beaconsPerLine: Ranging.beaconsPerLine, into: &line,
                          phones: phonesReference)
        precondition(!line.overflowed, "a ranging line fits Ranging.lineBytes")
    }
}
