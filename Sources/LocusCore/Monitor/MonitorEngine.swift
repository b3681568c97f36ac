/// The monitor engine: CLMonitor's semantics over fixed-capacity storage.
///
/// Every capacity (conditions, monitors, pending events) is fixed at init; after that, observing
/// fixes, sightings and ticks allocates nothing. Conditions live in slots; an index finds the
/// slots a fix or sighting can concern, and an "attention" set holds the few slots that must be
/// looked at on every observation (undetermined, satisfied, or waiting out a dwell), so a fix
/// costs the nearby circles plus the attention set, not all 10,000 conditions.
///
/// Events follow CLMonitor's rule: one is produced only when the observed state differs from the
/// record's `lastEvent`, it waits in a fixed ring until every sink has handled it, and only
/// `acknowledgeOldest()` makes it the record's `lastEvent`. A full ring defers detection (the
/// condition is decided again on the next observation) instead of dropping anything.
///
/// Single-threaded by design (the agent's poll loop owns it), so its stored properties opt out of
/// dynamic exclusivity checks, which would otherwise cost more than the work on a fix.
public final class MonitorEngine {
    public struct Capacity: Sendable {
        public var conditions: Int
        public var events: Int
        public var monitors: Int
        /// Spatial index cell size; `CircleIndex.suggestedCellSizeM` for the typical radius.
        public var circleCellSizeM: Double
        /// Vertices of all polygons and corridors together (`ShapeStore`, 120 bytes each,
        /// reserved: pages never used cost no memory).
        public var vertices: Int
        /// Distinct phone names the phone conditions may name (`PhoneCondition`).
        public var phones: Int

        public init(conditions: Int, events: Int, monitors: Int = 64, circleCellSizeM: Double = 1_000, vertices: Int = Capacity.defaultVertices,
                    phones: Int = Capacity.defaultPhones) {
            self.conditions = conditions
            self.events = events
            self.monitors = monitors
            self.circleCellSizeM = circleCellSizeM
            self.vertices = vertices
            self.phones = phones
        }

        /// `[capacity] phones` when the site file does not say; a phone's number is a beacon
        /// identity's minor, so there can be at most 65,536.
        public static let defaultPhones = 256
        public static let maximumPhones = 65_536

        /// `[capacity] vertices` when the site file does not say.
        public static let defaultVertices = 4_096
        public static let maximumVertices = 4_000_000
    }

    public enum AddResult: Equatable, Sendable {
        case added, replaced
        case limitExceeded
        case monitorLimitExceeded
    }

    /// Beacon conditions without a configured exit timeout become unsatisfied after this long
    /// without a sighting: iOS's region exit takes about 30 s for the same reason (a few missed
    /// advertisements must not end a visit).
    public static let defaultBeaconExitTimeoutMs: Int64 = 30_000
    /// The accuracy assumed for a fix that carries none (no GST, no HDOP).
    public static let unknownAccuracyM = 1_000.0

    /// What a slot holds. A circle's centre and radius live in the circle index (which needs them
    /// anyway, with the centre's Earth-centred coordinates), a beacon's identity in the slot's
    /// `BeaconState`, a polygon's or corridor's vertices in the shape store: the slot itself
    /// carries no geometry.
    enum Kind: UInt8 {
        case circle, beacon, shape
    }

    /// One record, hot fields only: 112 bytes (10,000 records take 1.25 MB). Fields ordered by
    /// alignment (8, 4, 2, 1 bytes), the last event's explanation last among the 8-byte ones so
    /// the smaller fields fill its tail. Settings are interned (`SettingsTable`), a beacon's
    /// state is in `beaconStates`, and a candidate's explanation in `candidateExplanations` (only
    /// while a dwell or a full ring holds it back).
    struct Slot {
        /// An observed state different from the current one, and since when (UTC ns).
        var candidateSinceNs: Int64 = 0
        /// The last handled event, stored without the names the slot already holds (its
        /// refinement, a beacon's only, in `BeaconState`).
        var lastEventSeconds: Int64 = 0
        var lastExplanation: Explanation
        var lastEventNanoseconds: Int32 = 0
        var generation: UInt32 = 0
        /// Position in the attention set, or -1.
        var attentionIndex: Int32 = -1
        /// The settings' entry in `settingsTable`.
        var settingsIndex: Int32 = 0
        var monitor: Int16 = 0
        /// Events of this slot waiting in the ring.
        var pendingEvents: Int16 = 0
        /// The identifier: whole when it has at most 15 bytes, else `longNames` holds it whole
        /// (`MonitorEngine.identifier(of:)`).
        var shortName: ShortName
        var kind: Kind = .circle
        private var flags: UInt8 = Slot.fromSiteFileFlag
        /// The state the pending events lead to (valid while `pendingEvents > 0`).
        var pendingState: ConditionState = .unknown
        var candidate: ConditionState = .unknown
        var lastState: ConditionState = .unknown
        /// The state the condition was added with (logged with it).
        var assumed: ConditionState = .unknown
        var lastDiagnostics: EventDiagnostics = []

        private static let inUseFlag: UInt8 = 1
        private static let accuracyLimitedFlag: UInt8 = 2
        private static let fromSiteFileFlag: UInt8 = 4

        init(identifier: FixedName) {
            shortName = ShortName(identifier)
            lastExplanation = Explanation(source: .assumption)
        }

        @inline(__always)
        private mutating func set(_ flag: UInt8, _ value: Bool) { flags = value ? flags | flag : flags & ~flag }

        var inUse: Bool {
            @inline(__always) get { flags & Slot.inUseFlag != 0 }
            set { set(Slot.inUseFlag, newValue) }
        }

        var accuracyLimited: Bool {
            @inline(__always) get { flags & Slot.accuracyLimitedFlag != 0 }
            set { set(Slot.accuracyLimitedFlag, newValue) }
        }

        /// Declared in the site file (as opposed to added at run time).
        var fromSiteFile: Bool {
            @inline(__always) get { flags & Slot.fromSiteFileFlag != 0 }
            set { set(Slot.fromSiteFileFlag, newValue) }
        }

        var lastEventDate: UTCTime { UTCTime(seconds: lastEventSeconds, nanoseconds: lastEventNanoseconds) }

        /// The state the record is in once pending events are handled.
        var effectiveState: ConditionState { pendingEvents > 0 ? pendingState : lastState }

        /// The last event, all but its names and refinement.
        mutating func setLastEvent(_ event: MonitorEvent) {
            lastState = event.state
            lastEventSeconds = event.date.seconds
            lastEventNanoseconds = event.date.nanoseconds
            lastDiagnostics = event.diagnostics
            lastExplanation = event.explanation
        }
    }

    /// A beacon slot's own state, beside the slot (`beaconStates`, one per slot, written only
    /// for beacon slots: the pages of a site without beacons are never touched).
    struct BeaconState {
        var filter = RSSIFilter()
        var lastSeenNs: Int64 = 0
        var condition: BeaconIdentityCondition
        /// The last handled event's refinement (wildcard conditions).
        var refinement: BeaconIdentity? = nil
    }

    struct PendingEvent {
        var slot: Int32
        var generation: UInt32
        var event: MonitorEvent
    }

    private let capacity: Capacity
    /// The memory of the tables below sized by the capacity (`TableBlock`).
    private let block: UnsafeMutableRawPointer
    private let slots: UnsafeMutableBufferPointer<Slot>
    /// Slots 0..<slotsInitialized have been used at least once (free slots are handed out
    /// lowest first, so the used ones are always a prefix).
    @exclusivity(unchecked)
    private var slotsInitialized = 0
    /// Slots released below `slotsInitialized`, the last released on top (handed out first;
    /// then the never-used ones from `slotsInitialized` on).
    @exclusivity(unchecked)
    private var releasedSlots: UnsafeMutableBufferPointer<Int32>
    @exclusivity(unchecked)
    private var releasedCount = 0
    @exclusivity(unchecked)
    private var freeCount: Int
    /// The distinct settings of the records (`Slot.settingsIndex`).
    @exclusivity(unchecked)
    private var settingsTable: SettingsTable
    /// Beacon slots' filters, last sightings and identities, one per slot, written by beacon
    /// slots only. Allocated uninitialized: the pages of slots that never hold a beacon condition
    /// are never touched, so they cost no memory.
    private let beaconStates: UnsafeMutableBufferPointer<BeaconState>
    /// The observation that started a slot's candidate state, written only when the candidate is
    /// not reported at once (a dwell, or a full ring): a dwell completed by the timer is
    /// explained by it. Untouched (no memory) for slots without a dwell.
    private let candidateExplanations: UnsafeMutableBufferPointer<Explanation>
    /// Identifiers longer than a slot's 15 bytes, whole, by slot: written for those only.
    private let longNames: UnsafeMutableBufferPointer<FixedName>
    /// (monitor, identifier) -> slot: open addressing over slot numbers + 1 (0 empty: calloc's
    /// zeros, so unused capacity costs no memory), at most half full, the names themselves read
    /// from the slots. 8 bytes a condition instead of a dictionary's copy of every name.
    private let nameTable: UnsafeMutableBufferPointer<Int32>
    private let nameMask: Int
    private let attention: UnsafeMutableBufferPointer<Int32>
    @exclusivity(unchecked)
    private var attentionCount = 0
    private let ring: UnsafeMutableBufferPointer<PendingEvent>
    @exclusivity(unchecked)
    private var ringHead = 0
    @exclusivity(unchecked)
    private var ringCount = 0
    @exclusivity(unchecked)
    private var monitors: [FixedName] = []
    /// The names phone conditions have named, each numbered by its position for good (a phone's
    /// sightings carry its number: `PhoneCondition.identity(number:)`).
    private var phoneNames: [FixedName] = []
    private let circleIndex: CircleIndex
    /// The same index, accessed without reference counting in the hot path (`circleIndex` owns it
    /// for the engine's whole life).
    private let circles: Unmanaged<CircleIndex>
    /// A circle record's condition, from the circle index (which holds the centre and radius).
    @inline(__always)
    private func circle(of index: Int32) -> CircularGeographicCondition {
        guard let found = circles._withUnsafeGuaranteedRef({ $0.circle(id: index) }) else {
            preconditionFailure("a circle record is in the circle index")
        }
        return CircularGeographicCondition(latitude: found.center.latitude, longitude: found.center.longitude, radiusM: found.radiusM)
    }

    /// Polygons and corridors under their slot numbers; their bounding circles are in `circleIndex`.
    private let shapeStore: ShapeStore
    private let shapes: Unmanaged<ShapeStore>
    /// Scratch space for the slots one observation concerns: gathered first, processed after, so
    /// no index callback ever runs engine code.
    private let scratch: UnsafeMutableBufferPointer<Int32>
    @exclusivity(unchecked)
    private var beacons: BeaconIndex
    @exclusivity(unchecked)
    private var previousFix: (latitude: Double, longitude: Double, timeNs: Int64)? = nil
    @exclusivity(unchecked)
    private var startedNs: Int64? = nil
    /// Whether a Bluetooth source exists; beacon conditions are `conditionUnsupported` without one.
    @exclusivity(unchecked)
    public var beaconsSupported: Bool
    /// Detections postponed because the event ring was full (they are decided again later).
    @exclusivity(unchecked)
    public private(set) var deferredDetections = 0
    @exclusivity(unchecked)
    public private(set) var conditionCount = 0
    /// Beacon conditions: while there is one, the adapter is expected to hear advertisements.
    public var beaconConditionCount: Int { beacons.count }
    /// Circles with `transit` on: no transit search at all while there are none.
    @exclusivity(unchecked)
    private var transitCount = 0
    /// Consecutive fixes farther apart than this are a jump (an outage, a receiver reset), not a
    /// path: no transit is inferred across them.
    public static let maximumTransitSegmentM = 10_000.0

    public init(capacity: Capacity, beaconsSupported: Bool = true) {
        precondition(capacity.conditions >= 1, "an engine holds at least one condition")
        precondition(capacity.conditions <= Int(Int32.max), "slot numbers fit an Int32")
        precondition(capacity.events >= 2, "the event ring holds a transit's two events")
        precondition(capacity.monitors >= 1, "an engine holds at least one monitor")
        precondition(capacity.monitors <= Int(Int16.max), "monitor numbers fit an Int16")
        self.capacity = capacity
        self.beaconsSupported = beaconsSupported
        // Nothing sized by a capacity is written here: slots are initialized when first used
        // (`slotsInitialized`), the attention set, the ring and the side tables as they fill, and
        // the name table's empty value is calloc's zero, so the memory of a capacity that is never
        // filled is never touched. All of them are one block (`TableBlock`).
        let conditions = capacity.conditions
        var tableSize = 16
        while tableSize < conditions * 2 { tableSize <<= 1 }
        var layout = TableBlock()
        let at = (slots: layout.reserve(Slot.self, count: conditions), released: layout.reserve(Int32.self, count: conditions),
                  beacons: layout.reserve(BeaconState.self, count: conditions),
                  explanations: layout.reserve(Explanation.self, count: conditions), names: layout.reserve(FixedName.self, count: conditions),
                  nameTable: layout.reserve(Int32.self, count: tableSize), attention: layout.reserve(Int32.self, count: conditions),
                  ring: layout.reserve(PendingEvent.self, count: capacity.events), scratch: layout.reserve(Int32.self, count: conditions))
        block = layout.allocate()
        slots = TableBlock.table(block, at.slots, count: conditions)
        releasedSlots = TableBlock.table(block, at.released, count: conditions)
        freeCount = conditions
        settingsTable = SettingsTable(capacity: conditions)
        beaconStates = TableBlock.table(block, at.beacons, count: conditions)
        candidateExplanations = TableBlock.table(block, at.explanations, count: conditions)
        longNames = TableBlock.table(block, at.names, count: conditions)
        nameTable = TableBlock.table(block, at.nameTable, count: tableSize)
        nameMask = tableSize - 1
        precondition(tableSize >= 2 * conditions, "the name table is at most half full, so a probe ends")
        attention = TableBlock.table(block, at.attention, count: conditions)
        ring = TableBlock.table(block, at.ring, count: capacity.events)
        scratch = TableBlock.table(block, at.scratch, count: conditions)
        monitors.reserveCapacity(capacity.monitors)
        precondition((0...Capacity.maximumPhones).contains(capacity.phones), "a phone's number fits a minor")
        phoneNames.reserveCapacity(capacity.phones)
        circleIndex = CircleIndex(capacity: capacity.conditions, cellSizeM: capacity.circleCellSizeM)
        circles = Unmanaged.passUnretained(circleIndex)
        shapeStore = ShapeStore(shapeCapacity: capacity.conditions, vertexCapacity: min(max(0, capacity.vertices), Capacity.maximumVertices))
        shapes = Unmanaged.passUnretained(shapeStore)
        circleIndex.shapes = shapes
        beacons = BeaconIndex(slots: capacity.conditions)
    }

    deinit {
        slots.baseAddress!.deinitialize(count: slotsInitialized)
        // The other tables hold trivial values: nothing to deinitialize.
        TableBlock.deallocate(block)
    }

    // MARK: conditions (CLMonitor add/remove/records)

    /// `add(_:identifier:assuming:)`: an existing identifier is replaced and its record starts
    /// over (at `assuming`, or unknown).
    @discardableResult
    public func add(monitor: FixedName, identifier: FixedName, condition: Condition, settings: ConditionSettings = ConditionSettings(),
                    assuming: ConditionState? = nil, fromSiteFile: Bool = true, now: UTCTime) -> AddResult {
        let freeWithin = (0...capacity.conditions).contains(freeCount)
        precondition(freeWithin, "free slots within the capacity")
        guard let monitorIndex = monitorIndex(monitor, create: true) else { return .monitorLimitExceeded }
        var condition = condition
        if case .phone(let phone) = condition {
            guard let number = phoneNumber(phone.name, create: true) else { return .limitExceeded }
            let identity = PhoneCondition.identity(number: number)
            condition = .beacon(BeaconIdentityCondition(uuid: identity.uuid, major: identity.major, minor: identity.minor))
        }
        var result = AddResult.added
        if let existing = slotIndex(monitor: monitorIndex, identifier: identifier) {
            release(existing)
            result = .replaced
        }
        guard let index = takeSlot(identifier) else { return .limitExceeded }
        var diagnostics: EventDiagnostics = []
        if case .beacon = condition, !beaconsSupported { diagnostics.insert(.conditionUnsupported) }
        var slot = slots[Int(index)]
        precondition(!slot.inUse, "a free slot is not in use")
        precondition(slot.attentionIndex == -1, "a free slot is not in the attention set")
        slot.inUse = true
        slot.generation &+= 1
        slot.monitor = Int16(monitorIndex)
        slot.shortName = ShortName(identifier)
        if !slot.shortName.isWhole { (longNames.baseAddress! + Int(index)).initialize(to: identifier) }
        switch condition {
        case .circle: slot.kind = .circle
        case .beacon: slot.kind = .beacon
        case .polygon, .corridor: slot.kind = .shape
        case .phone: preconditionFailure("a phone condition is stored as its identity's beacon condition")
        }
        slot.settingsIndex = settingsTable.intern(settings)
        slot.setLastEvent(MonitorEvent(monitor: monitor, identifier: identifier, state: assuming ?? .unknown, date: now,
                                       refinement: nil, diagnostics: diagnostics, explanation: Explanation(source: .assumption)))
        slot.pendingEvents = 0
        slot.candidate = slot.lastState
        slot.candidateSinceNs = now.totalNanoseconds
        slot.accuracyLimited = false
        slot.fromSiteFile = fromSiteFile
        slot.assumed = assuming ?? .unknown
        slot.attentionIndex = -1
        slots[Int(index)] = slot
        insertName(index)
        guard indexCondition(index, condition, settings, now: now) else {
            giveBack(index, monitor: Int16(monitorIndex), identifier: identifier)
            return .limitExceeded
        }
        conditionCount += 1
        updateAttention(index)
        let accounted = conditionCount + freeCount == capacity.conditions
        precondition(accounted, "every slot is in use or free")
        let fresh = slots[Int(index)].inUse ? slots[Int(index)].pendingEvents == 0 : false
        precondition(fresh, "a new record has no pending event")
        assert(slotIndex(monitor: monitorIndex, identifier: identifier) == index, "a new record is found by its name")
        return result
    }

    /// A free slot for a new record, the lowest one first (initialized the first time it is
    /// used); nil when none is free.
    private func takeSlot(_ identifier: FixedName) -> Int32? {
        guard freeCount > 0 else { return nil }
        freeCount -= 1
        let index: Int32
        if releasedCount > 0 {
            releasedCount -= 1
            index = releasedSlots[releasedCount]
        } else {
            index = Int32(slotsInitialized)
        }
        precondition(Int(index) <= slotsInitialized, "free slots are handed out lowest first")
        precondition(index >= 0, "a free slot number is a slot")
        if Int(index) == slotsInitialized {
            (slots.baseAddress! + Int(index)).initialize(to: Slot(identifier: identifier))
            slotsInitialized += 1
        }
        precondition(slotsInitialized <= capacity.conditions, "initialized slots within the capacity")
        return index
    }

    /// A new record whose condition found no room in its index, undone: the slot free again.
    private func giveBack(_ index: Int32, monitor: Int16, identifier: FixedName) {
        removeName(monitor: monitor, identifier: identifier)
        settingsTable.release(slots[Int(index)].settingsIndex)
        slots[Int(index)].inUse = false
        releasedSlots[releasedCount] = index
        releasedCount += 1
        freeCount += 1
    }

    /// A new record's condition into its index (the circles' or the beacons', a shape's store
    /// and bounding circle); false when the circle index or the vertex pool is full.
    private func indexCondition(_ index: Int32, _ condition: Condition, _ settings: ConditionSettings, now: UTCTime) -> Bool {
        let margin = max(settings.enterMarginM, settings.exitMarginM)
        switch condition {
        case .polygon, .corridor:
            let cap: ShapeStore.Cap
            do throws(ShapeStore.Failure) {
                if case .polygon(let polygon) = condition { cap = try shapeStore.insert(id: index, polygon: polygon) }
                else if case .corridor(let corridor) = condition { cap = try shapeStore.insert(id: index, corridor: corridor) }
                else { return false }
            } catch {
                return false
            }
            do {
                try circleIndex.insert(id: index, latitude: cap.center.latitude, longitude: cap.center.longitude,
                                       radiusM: cap.radiusM, maxMarginM: margin, shape: true)
            } catch {
                shapeStore.remove(id: index)
                return false
            }
            if settings.transit { transitCount += 1 }
        case .circle(let circle):
            do {
                try circleIndex.insert(id: index, latitude: circle.latitude, longitude: circle.longitude,
                                       radiusM: circle.radiusM, maxMarginM: margin)
            } catch {
                return false
            }
            if settings.transit { transitCount += 1 }
        case .beacon(let beacon):
            (beaconStates.baseAddress! + Int(index)).initialize(to: BeaconState(lastSeenNs: now.totalNanoseconds, condition: beacon))
            beacons.insert(slot: index, condition: beacon)
        case .phone:
            preconditionFailure("add stores a phone as its identity's beacon condition")
        }
        return true
    }

    /// `remove(_:)`: deletes the record. Events of it still in the ring are discarded when reached.
    @discardableResult
    public func remove(monitor: FixedName, identifier: FixedName) -> Bool {
        guard let monitorIndex = monitorIndex(monitor, create: false),
              let index = slotIndex(monitor: monitorIndex, identifier: identifier) else { return false }
        release(index)
        assert(slotIndex(monitor: monitorIndex, identifier: identifier) == nil, "a removed record is not found by its name")
        return true
    }

    private func release(_ index: Int32) {
        precondition(index >= 0, "a slot number")
        precondition(Int(index) < slotsInitialized, "a released slot was handed out")
        let slot = slots[Int(index)]
        precondition(slot.inUse, "a released slot was in use")
        let releasable = conditionCount > 0 ? freeCount < capacity.conditions : false
        precondition(releasable, "a slot to release")
        switch slot.kind {
        case .circle, .shape:
            _ = circleIndex.remove(id: index)
            if slot.kind == .shape { shapeStore.remove(id: index) }
            if settingsTable[slot.settingsIndex].transit { transitCount -= 1 }
        case .beacon: beacons.remove(slot: index, condition: beaconStates[Int(index)].condition)
        }
        removeAttention(index)
        removeName(monitor: slot.monitor, identifier: identifier(of: index))
        settingsTable.release(slot.settingsIndex)
        slots[Int(index)].inUse = false
        slots[Int(index)].generation &+= 1
        slots[Int(index)].pendingEvents = 0
        releasedSlots[releasedCount] = index
        releasedCount += 1
        freeCount += 1
        conditionCount -= 1
        precondition(conditionCount >= 0, "a condition count is never negative")
        let accounted = conditionCount + freeCount == capacity.conditions
        precondition(accounted, "every slot is in use or free")
        let unattended = slots[Int(index)].attentionIndex == -1
        precondition(unattended, "a free slot needs no attention")
    }

    /// One record: the condition, its settings and its last handled event.
    public struct Record: Equatable, Sendable {
        public var condition: Condition
        public var settings: ConditionSettings
        public var lastEvent: MonitorEvent
        public var accuracyLimited: Bool
        public var fromSiteFile: Bool
        public var assumed: ConditionState
    }

    public func record(monitor: FixedName, identifier: FixedName) -> Record? {
        guard let monitorIndex = monitorIndex(monitor, create: false),
              let index = slotIndex(monitor: monitorIndex, identifier: identifier) else { return nil }
        return makeRecord(index)
    }

    private func makeRecord(_ index: Int32) -> Record {
        let slot = slots[Int(index)]
        return Record(condition: condition(of: index), settings: settingsTable[slot.settingsIndex], lastEvent: lastEvent(of: index),
                      accuracyLimited: slot.accuracyLimited, fromSiteFile: slot.fromSiteFile, assumed: slot.assumed)
    }

    /// A record's identifier: in its slot, or in `longNames` when longer than 15 bytes.
    @inline(__always)
    private func identifier(of index: Int32) -> FixedName {
        let short = slots[Int(index)].shortName
        return short.isWhole ? short.name : longNames[Int(index)]
    }

    /// A record's last handled event, with the names the slot holds.
    private func lastEvent(of index: Int32) -> MonitorEvent {
        let slot = slots[Int(index)]
        return MonitorEvent(monitor: monitors[Int(slot.monitor)], identifier: identifier(of: index), state: slot.lastState, date: slot.lastEventDate,
                            refinement: slot.kind == .beacon ? beaconStates[Int(index)].refinement : nil, diagnostics: slot.lastDiagnostics,
                            explanation: slot.lastExplanation)
    }

    /// Makes `event` the record's last handled event. A refinement is kept for beacon records
    /// (only a beacon sighting refines an event).
    private func setLastEvent(_ index: Int32, _ event: MonitorEvent) {
        slots[Int(index)].setLastEvent(event)
        if slots[Int(index)].kind == .beacon { beaconStates[Int(index)].refinement = event.refinement }
    }

    /// The identifiers of a monitor's records, sorted.
    public func identifiers(monitor: FixedName) -> [FixedName] {
        guard let monitorIndex = monitorIndex(monitor, create: false) else { return [] }
        var result: [FixedName] = []
        for index in 0..<slotsInitialized where slots[index].inUse && Int(slots[index].monitor) == monitorIndex {
            result.append(identifier(of: Int32(index)))
        }
        precondition(result.count <= conditionCount, "a monitor's records are among the engine's")
        return result.sorted()
    }

    public var monitorNames: [FixedName] { monitors }

    /// Every record, for checkpoints.
    public func forEachRecord(_ body: (FixedName, FixedName, Record) -> Void) {
        // The records in use are counted: a body that changes the engine would break the walk.
        let count = conditionCount
        defer { precondition(conditionCount == count, "a walk over the records does not add or remove one") }
        for index in 0..<slotsInitialized where slots[index].inUse {
            let slot = slots[index]
            body(monitors[Int(slot.monitor)], identifier(of: Int32(index)), makeRecord(Int32(index)))
        }
    }

    /// A slot's condition as it was added (a shape's from the shape store).
    private func condition(of index: Int32) -> Condition {
        switch slots[Int(index)].kind {
        case .circle: return .circle(circle(of: index))
        case .beacon:
            let beacon = beaconStates[Int(index)].condition
            if beacon.uuid == PhoneCondition.uuid, let minor = beacon.minor, Int(minor) < phoneNames.count {
                return .phone(PhoneCondition(name: phoneNames[Int(minor)]))
            }
            return .beacon(beacon)
        case .shape: return shapeStore.condition(id: index)
        }
    }

    /// The number of a phone's name (its sightings' `PhoneCondition.identity`): a new name gets
    /// the next number when `create` is set and the capacity has room, else nil.
    public func phoneNumber(_ name: FixedName, create: Bool = false) -> Int? {
        if let number = phoneNames.firstIndex(of: name) { return number }
        guard create, phoneNames.count < capacity.phones else { return nil }
        phoneNames.append(name)
        return phoneNames.count - 1
    }

    /// The name a phone identity's minor stands for.
    public func phoneName(number: Int) -> FixedName? {
        number >= 0 && number < phoneNames.count ? phoneNames[number] : nil
    }

    /// Restores a record's last event from the log (start-up), without producing an event.
    public func restore(_ event: MonitorEvent) {
        guard let monitorIndex = monitorIndex(event.monitor, create: false),
              let index = slotIndex(monitor: monitorIndex, identifier: event.identifier) else { return }
        // Restored at start-up or when a change is undone: before any event of the record is pending.
        precondition(slots[Int(index)].pendingEvents == 0, "a record is restored with no event pending")
        setLastEvent(index, event)
        slots[Int(index)].candidate = event.state
        slots[Int(index)].candidateSinceNs = event.date.totalNanoseconds
        if slots[Int(index)].kind == .beacon { beaconStates[Int(index)].lastSeenNs = event.date.totalNanoseconds }
        updateAttention(index)
    }

    private func monitorIndex(_ name: FixedName, create: Bool) -> Int? {
        for (index, existing) in monitors.enumerated() where existing == name { return index }
        guard create, monitors.count < capacity.monitors else { return nil }
        monitors.append(name)
        precondition(monitors.count <= capacity.monitors, "monitors within the capacity")
        return monitors.count - 1
    }

    private func slotIndex(monitor: Int, identifier: FixedName) -> Int32? {
        precondition(monitor >= 0, "a monitor number")
        precondition(monitor < monitors.count, "a monitor the engine has")
        let position = namePosition(monitor: Int16(monitor), identifier: identifier)
        let index = nameTable[position] - 1
        guard index >= 0 else { return nil }
        precondition(slots[Int(index)].inUse, "the name table holds records in use only")
        return index
    }

    private static func nameHash(monitor: Int16, identifier: FixedName) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ UInt64(UInt16(bitPattern: monitor))
        for index in 0..<identifier.count { hash = (hash ^ UInt64(identifier[index])) &* 0x0100_0000_01b3 }
        return Int(truncatingIfNeeded: hash ^ (hash >> 29))
    }

    /// The table position holding the name, or the empty position where it would go.
    private func namePosition(monitor: Int16, identifier: FixedName) -> Int {
        var position = MonitorEngine.nameHash(monitor: monitor, identifier: identifier) & nameMask
        // Bounded: the table is at most half full.
        while nameTable[position] != 0 {
            let slot = slots[Int(nameTable[position]) - 1]
            if slot.monitor == monitor && slot.shortName.matches(identifier)
                && (slot.shortName.isWhole || longNames[Int(nameTable[position]) - 1] == identifier) { return position }
            position = (position + 1) & nameMask
        }
        return position
    }

    private func insertName(_ index: Int32) {
        let slot = slots[Int(index)]
        let position = namePosition(monitor: slot.monitor, identifier: identifier(of: index))
        precondition(nameTable[position] == 0, "a name is in the table once")
        nameTable[position] = index + 1
    }

    /// Backward-shift deletion, as in BeaconIndex: no tombstones.
    private func removeName(monitor: Int16, identifier: FixedName) {
        var hole = namePosition(monitor: monitor, identifier: identifier)
        guard nameTable[hole] != 0 else { return }
        nameTable[hole] = 0
        var position = (hole + 1) & nameMask
        while nameTable[position] != 0 {
            let slot = slots[Int(nameTable[position]) - 1]
            let home = MonitorEngine.nameHash(monitor: slot.monitor, identifier: self.identifier(of: nameTable[position] - 1)) & nameMask
            let moves = hole <= position ? (home <= hole || home > position) : (home <= hole && home > position)
            if moves {
                nameTable[hole] = nameTable[position]
                nameTable[position] = 0
                hole = position
            }
            position = (position + 1) & nameMask
        }
        assert(nameTable[namePosition(monitor: monitor, identifier: identifier)] == 0, "a removed name is not found")
    }

    /// The agent's clock jumped by `deltaNs` (a gateway without a real-time clock receiving its
    /// first GNSS time, or a receiver reset): every remembered time moves with it, so a dwell or
    /// a beacon's exit timeout measures real elapsed time, not the jump. Event dates stay.
    public func clockStepped(byNs deltaNs: Int64) {
        for index in 0..<slotsInitialized where slots[index].inUse {
            slots[index].candidateSinceNs &+= deltaNs
            if slots[index].kind == .beacon {
                beaconStates[index].lastSeenNs &+= deltaNs
                beaconStates[index].filter.shift(byMs: deltaNs / 1_000_000)
            }
        }
        if let previous = previousFix { previousFix = (previous.latitude, previous.longitude, previous.timeNs &+ deltaNs) }
        if let started = startedNs { startedNs = started &+ deltaNs }
    }

    // MARK: the event ring

    public var pendingEventCount: Int { ringCount }
    public var eventCapacity: Int { capacity.events }

    /// An event waits for the sinks (`oldestPendingEvent` would return one), without copying it.
    public func hasPendingEvent() -> Bool {
        dropStale()
        return ringCount > 0
    }

    /// The oldest event not yet handled by every sink.
    public func oldestPendingEvent() -> MonitorEvent? {
        dropStale()
        return ringCount > 0 ? ring[ringHead].event : nil
    }

    /// Every sink has handled the oldest event: it becomes its record's `lastEvent`, with
    /// `diagnostics` added (the agent adds `persistenceUnavailable` when it could not log it).
    public func acknowledgeOldest(adding diagnostics: EventDiagnostics = EventDiagnostics()) {
        dropStale()
        guard ringCount > 0 else { return }
        var pending = ring[ringHead]
        let index = Int(pending.slot)
        let live = slots[index].inUse ? slots[index].generation == pending.generation : false
        precondition(live, "the oldest event is of a live record")
        let counted = slots[index].pendingEvents > 0
        precondition(counted, "a record's pending events are counted")
        let changes = pending.event.state != slots[index].lastState
        precondition(changes, "an event changes its record's state")
        precondition(pending.event.state != .unknown, "an event reports satisfied or unsatisfied")
        pending.event.diagnostics.formUnion(diagnostics)
        ringHead = (ringHead + 1) % capacity.events
        ringCount -= 1
        setLastEvent(pending.slot, pending.event)
        slots[index].pendingEvents -= 1
        precondition(slots[index].pendingEvents >= 0, "a record's pending events are never negative")
        let settled = slots[index].pendingEvents > 0 ? true : slots[index].pendingState == pending.event.state
        precondition(settled, "the last pending event leads to the pending state")
        updateAttention(pending.slot)
    }

    /// Events of removed or replaced conditions are skipped, never delivered.
    private func dropStale() {
        while ringCount > 0 {
            let pending = ring[ringHead]
            let slot = slot(pending.slot)
            if slot.pointee.inUse && slot.pointee.generation == pending.generation { return }
            ringHead = (ringHead + 1) % capacity.events
            ringCount -= 1
        }
        precondition(ringCount >= 0, "the event ring's count is never negative")
        precondition(ringHead < capacity.events, "the ring's head is within the ring")
    }

    private func emit(_ index: Int32, _ event: MonitorEvent) {
        let full = ringCount >= capacity.events
        precondition(!full, "event ring overflow")
        let live = slots[Int(index)].inUse
        precondition(live, "an event of a live record")
        // Events only on change: against the state after the record's events still pending.
        let changes = event.state != slots[Int(index)].effectiveState
        precondition(changes, "an event changes the state")
        let decided = event.state != .unknown
        precondition(decided, "an event reports satisfied or unsatisfied")
        let countable = slots[Int(index)].pendingEvents < Int16(clamping: capacity.events)
        precondition(countable, "a record's pending events fit the ring")
        (ring.baseAddress! + (ringHead + ringCount) % capacity.events).initialize(to: PendingEvent(slot: index, generation: slots[Int(index)].generation, event: event))
        ringCount += 1
        slots[Int(index)].pendingEvents += 1
        slots[Int(index)].pendingState = event.state
        updateAttention(index)
    }

    private func hasRoom(_ count: Int) -> Bool {
        // One event, or a transit's two.
        precondition(count >= 1, "room for at least one event")
        precondition(count <= 2, "room for at most a transit's two events")
        if capacity.events - ringCount >= count { return true }
        deferredDetections += 1
        return false
    }

    /// A slot in place: reading a field through it copies that field, not the whole slot.
    @inline(__always)
    private func slot(_ index: Int32) -> UnsafeMutablePointer<Slot> { slots.baseAddress! + Int(index) }

    // MARK: attention set

    /// A slot needs a look on every observation unless it is settled: its state (after pending
    /// events) is unsatisfied and nothing is in flight. Undetermined, satisfied and dwelling
    /// conditions stay in the set.
    private func needsAttention(_ slot: UnsafeMutablePointer<Slot>) -> Bool {
        let effective = slot.pointee.effectiveState
        return slot.pointee.inUse && (effective != .unsatisfied || slot.pointee.candidate != effective)
    }

    private func updateAttention(_ index: Int32) {
        let slot = slot(index)
        if needsAttention(slot) {
            if slot.pointee.attentionIndex < 0 {
                let room = attentionCount < slotsInitialized
                precondition(room, "the attention set holds each slot once")
                attention[attentionCount] = index
                slot.pointee.attentionIndex = Int32(attentionCount)
                attentionCount += 1
            }
            let member = Int(slot.pointee.attentionIndex) < attentionCount
            precondition(member, "a slot that needs attention is in the attention set")
        } else {
            removeAttention(index)
            let settled = slot.pointee.attentionIndex == -1
            precondition(settled, "a settled slot is not in the attention set")
        }
    }

    private func removeAttention(_ index: Int32) {
        let position = Int(slots[Int(index)].attentionIndex)
        guard position >= 0 else { return }
        let placed = position < attentionCount ? attention[position] == index : false
        precondition(placed, "the attention set knows its members' places")
        attentionCount -= 1
        let moved = attention[attentionCount]
        attention[position] = moved
        slots[Int(moved)].attentionIndex = Int32(position)
        slots[Int(index)].attentionIndex = -1
        let counted = attentionCount >= 0
        precondition(counted, "the attention set's count is never negative")
    }

    // MARK: observations

    /// A fix: nearby circles and the attention set's circles are decided.
    @_noAllocation
    public func observe(_ fix: Fix) {
        guard fix.hasPosition, let latitude = fix.latitude, let longitude = fix.longitude, let time = fix.time else { return }
        let nowNs = time.totalNanoseconds
        if startedNs == nil { startedNs = nowNs }
        // A fix without an accuracy estimate is treated as 1 km: it can still settle far-away
        // conditions but never flips one at an edge.
        let accuracy = fix.horizontalAccuracyM ?? MonitorEngine.unknownAccuracyM
        let point = GeoPoint(latitude: latitude, longitude: longitude)
        let found = gatherCircles(near: point, accuracyM: accuracy)
        for position in 0..<found { evaluateGeofence(scratch[position], point: point, accuracyM: accuracy, time: time) }
        var position = 0
        // The attention set can shrink while it is walked (a settled slot leaves it), so walk by
        // position and re-read the count.
        while position < attentionCount {
            let index = attention[position]
            evaluateGeofence(index, point: point, accuracyM: accuracy, time: time)
            if position < attentionCount {
                if attention[position] == index { position += 1 }
            }
        }
        if transitCount > 0, let previous = previousFix {
            detectTransits(from: previous, toLatitude: latitude, longitude: longitude, timeNs: nowNs)
        }
        previousFix = (latitude, longitude, nowNs)
        let bounded = ringCount <= capacity.events
        precondition(bounded, "pending events within the ring's capacity")
    }

    /// A fix against one geographic condition (beacon slots are left alone).
    @inline(__always)
    private func evaluateGeofence(_ index: Int32, point: GeoPoint, accuracyM: Double, time: UTCTime) {
        switch slots[Int(index)].kind {
        case .circle: evaluateCircle(index, point: point, accuracyM: accuracyM, time: time)
        case .shape: evaluateShape(index, point: point, accuracyM: accuracyM, time: time)
        case .beacon: break
        }
    }

    /// The geofence decision for one circle and one fix (see README "Geofence decisions").
    ///
    /// With the accuracy gate, the fix must be inside `radius - enterMargin` or outside
    /// `radius + exitMargin` by its whole accuracy to change the state; in between, the state
    /// holds. Without the gate, the margins are pure hysteresis: entering needs
    /// `distance <= radius - enterMargin`, leaving needs `distance > radius + exitMargin`, and a
    /// first decision is `distance <= radius`. The exact geodesic distance is computed only when
    /// the cheap chord bound cannot classify the fix.
    private func evaluateCircle(_ index: Int32, point: GeoPoint, accuracyM: Double, time: UTCTime) {
        precondition(index >= 0, "a slot number")
        let handedOut = Int(index) < slotsInitialized
        precondition(handedOut, "a circle's slot was handed out")
        let slot = slot(index)
        guard slot.pointee.inUse, slot.pointee.kind == .circle,
              let circle = circles._withUnsafeGuaranteedRef({ $0.circle(id: index) }) else { return }
        let settings = settingsTable[slot.pointee.settingsIndex]
        let current = slot.pointee.effectiveState
        let spread = settings.accuracyGate ? accuracyM : 0
        let low = circle.radiusM - settings.enterMarginM - spread
        let high = circle.radiusM + settings.exitMarginM + spread
        var observed: ConditionState
        var exact: Double? = nil
        switch Geodesy.compare(point, center: circle.center, radiusM: (low + high) / 2, marginM: (high - low) / 2) {
        case .inside:
            observed = .satisfied
        case .outside:
            observed = .unsatisfied
        case .near(let distance):
            exact = distance
            if distance <= low { observed = .satisfied }
            else if distance > high { observed = .unsatisfied }
            else if settings.accuracyGate { observed = current }
            else if current == .unknown { observed = distance <= circle.radiusM ? .satisfied : .unsatisfied }
            else { observed = current }
        }
        let limited = settings.accuracyGate && spread > circle.radiusM
        if slot.pointee.accuracyLimited != limited { slot.pointee.accuracyLimited = limited }
        guard observed != current || slot.pointee.candidate != current else { return }
        var explanation = Explanation(source: .fix)
        explanation.latitude = point.latitude
        explanation.longitude = point.longitude
        explanation.accuracyM = accuracyM.isFinite ? accuracyM : -1
        // The chord is within a micrometre of the geodesic for fences and fixes a few kilometres
        // apart, and within metres for far ones: good enough to explain, and the exact distance is
        // used when it was computed to decide.
        explanation.edgeDistanceM = (exact ?? Geodesy.chordM(point, circle.center)) - circle.radiusM
        decide(index, observed: observed, time: time, explanation: explanation, refinement: nil)
    }

    /// The geofence decision for one polygon or corridor: the circle's rules (above) with the
    /// signed distance to the boundary (negative inside) for the distance to the circle's edge.
    /// The shape store brackets that distance cheaply (to a fraction of a millimetre near short
    /// edges); only a threshold inside the bracket, or a fix within a millimetre or so of the
    /// boundary, needs the exact location.
    private func evaluateShape(_ index: Int32, point: GeoPoint, accuracyM: Double, time: UTCTime) {
        precondition(index >= 0, "a slot number")
        let handedOut = Int(index) < slotsInitialized
        precondition(handedOut, "a shape's slot was handed out")
        let slot = slot(index)
        guard slot.pointee.inUse, slot.pointee.kind == .shape else { return }
        let settings = settingsTable[slot.pointee.settingsIndex]
        let current = slot.pointee.effectiveState
        let spread = settings.accuracyGate ? accuracyM : 0
        let low = -settings.enterMarginM - spread
        let high = settings.exitMarginM + spread
        // The signed distance's bracket, the side and the nearest edge; exact when it was needed.
        var signed = SignedBoundary(shapes._withUnsafeGuaranteedRef { $0.place(id: index, point, bandM: max(-low, high)) })
        // A threshold within the bracket: decided exactly.
        if (signed.low <= low && low < signed.high) || (signed.low <= high && high < signed.high) {
            signed = SignedBoundary(shapes._withUnsafeGuaranteedRef { $0.locate(id: index, point) })
        }
        var observed: ConditionState
        if signed.high <= low { observed = .satisfied }
        else if signed.low > high { observed = .unsatisfied }
        else if settings.accuracyGate { observed = current }
        else if current == .unknown { observed = signed.inside ? .satisfied : .unsatisfied }
        else { observed = current }
        let reach = shapes._withUnsafeGuaranteedRef { $0.insideReachM(id: index) }
        let limited = settings.accuracyGate && spread > reach
        if slot.pointee.accuracyLimited != limited { slot.pointee.accuracyLimited = limited }
        guard observed != current || slot.pointee.candidate != current else { return }
        // A change (or a dwell going on) is explained with the distance to a centimetre: the
        // bracket's middle when it is that tight (placed again through the edges when the fix
        // was beyond the bounding circle), else the exact location.
        if !signed.isTight { signed = SignedBoundary(shapes._withUnsafeGuaranteedRef { $0.place(id: index, point, bandM: .infinity) }) }
        if !signed.isTight { signed = SignedBoundary(shapes._withUnsafeGuaranteedRef { $0.locate(id: index, point) }) }
        var explanation = Explanation(source: .fix)
        explanation.latitude = point.latitude
        explanation.longitude = point.longitude
        explanation.accuracyM = accuracyM.isFinite ? accuracyM : -1
        explanation.edgeDistanceM = (signed.low + signed.high) / 2
        explanation.nearestEdge = signed.edge + 1
        decide(index, observed: observed, time: time, explanation: explanation, refinement: nil)
    }

    /// A shape's signed distance to its boundary (negative inside) as a bracket, the side and the
    /// nearest edge: from the shape store's cheap placement or its exact location.
    struct SignedBoundary {
        var low: Double
        var high: Double
        var inside: Bool
        var edge: Int

        @inline(__always)
        init(_ placement: ShapeStore.Placement) {
            switch placement {
            case .bounded(let inside, let lower, let upper, let edge):
                low = inside ? -upper : lower
                high = inside ? -lower : upper
                self.inside = inside
                self.edge = edge
            case .exact(let location):
                self = SignedBoundary(location)
            }
        }

        @inline(__always)
        init(_ location: PolygonLocation) {
            let distance = location.isInside ? -location.boundaryDistanceM : location.boundaryDistanceM
            (low, high, inside, edge) = (distance, distance, location.isInside, location.nearestEdge)
        }

        /// Within a centimetre: enough to explain an event.
        var isTight: Bool { high - low <= 0.01 }
    }

    /// Dwell, then the event: the observed state must hold `dwell` before it is reported.
    private func decide(_ index: Int32, observed: ConditionState, time: UTCTime, explanation: Explanation, refinement: BeaconIdentity?) {
        let slot = slot(index)
        let inUse = slot.pointee.inUse
        precondition(inUse, "a decision is about a record in use")
        let nowNs = time.totalNanoseconds
        let effective = slot.pointee.effectiveState
        if observed == effective || observed == .unknown {
            if slot.pointee.candidate != effective {
                slot.pointee.candidate = effective
                updateAttention(index)
            }
            return
        }
        let started = slot.pointee.candidate != observed
        if started {
            slot.pointee.candidate = observed
            slot.pointee.candidateSinceNs = nowNs
            updateAttention(index)
        }
        let heldMs = (nowNs - slot.pointee.candidateSinceNs) / 1_000_000
        guard heldMs >= settingsTable[slot.pointee.settingsIndex].dwellMs, hasRoom(1) else {
            // The candidate waits (a dwell, or a full ring): `tick` explains its event by the
            // observation that started it.
            if started { (candidateExplanations.baseAddress! + Int(index)).initialize(to: explanation) }
            return
        }
        var reason = explanation
        // A timeout's explanation carries how long the beacon was unseen instead.
        if reason.source != .timeout { reason.dwellMs = heldMs }
        var diagnostics: EventDiagnostics = slot.pointee.lastDiagnostics.intersection(.conditionUnsupported)
        if slot.pointee.accuracyLimited { diagnostics.insert(.accuracyLimited) }
        emit(index, MonitorEvent(monitor: monitors[Int(slot.pointee.monitor)], identifier: identifier(of: index), state: observed, date: time,
                                 refinement: observed == .satisfied ? refinement : nil, diagnostics: diagnostics, explanation: reason))
    }

    /// Transit: two fixes outside a circle whose straight path crosses it. The crossing is
    /// computed on a local tangent plane at the circle's centre (segments between fixes are short
    /// against the Earth's radius), times interpolated along the segment; a shape's, by
    /// `ShapeStore.transit`.
    private func detectTransits(from previous: (latitude: Double, longitude: Double, timeNs: Int64), toLatitude latitude: Double, longitude: Double, timeNs: Int64) {
        let length = Geodesy.distanceM(previous.latitude, previous.longitude, latitude, longitude)
        guard length > 1, length <= MonitorEngine.maximumTransitSegmentM else { return }
        let middle = GeoPoint(latitude: (previous.latitude + latitude) / 2,
                              longitude: previous.longitude + Transit.longitudeDelta(longitude, previous.longitude) / 2)
        let found = gatherCircles(near: middle, accuracyM: length / 2)
        for position in 0..<found {
            let index = scratch[position]
            let slot = slots[Int(index)]
            guard slot.inUse, settingsTable[slot.settingsIndex].transit, slot.effectiveState == .unsatisfied, slot.candidate == .unsatisfied else { continue }
            let crossing: (entry: Double, exit: Double, depthM: Double)
            switch slot.kind {
            case .circle:
                guard let found = Transit.crossing(center: circle(of: index), fromLatitude: previous.latitude, fromLongitude: previous.longitude,
                                                   toLatitude: latitude, toLongitude: longitude) else { continue }
                crossing = (found.entry, found.exit, found.depthM)
            case .shape:
                let from = GeoPoint(latitude: previous.latitude, longitude: previous.longitude)
                let to = GeoPoint(latitude: latitude, longitude: longitude)
                guard let found = shapes._withUnsafeGuaranteedRef({ $0.transit(id: index, from: from, to: to) }) else { continue }
                crossing = (found.entry, found.exit, found.depthM)
            case .beacon:
                continue
            }
            guard hasRoom(2) else { continue }
            let span = Double(timeNs - previous.timeNs)
            let entered = UTCTime(nanoseconds: previous.timeNs + Int64(span * crossing.entry))
            let left = UTCTime(nanoseconds: previous.timeNs + Int64(span * crossing.exit))
            var explanation = Explanation(source: .transit)
            explanation.latitude = latitude
            explanation.longitude = longitude
            explanation.edgeDistanceM = -crossing.depthM
            let monitor = monitors[Int(slot.monitor)]
            emit(index, MonitorEvent(monitor: monitor, identifier: identifier(of: index), state: .satisfied, date: entered,
                                     refinement: nil, diagnostics: EventDiagnostics(), explanation: explanation))
            emit(index, MonitorEvent(monitor: monitor, identifier: identifier(of: index), state: .unsatisfied, date: left,
                                     refinement: nil, diagnostics: EventDiagnostics(), explanation: explanation))
        }
    }

    /// The circles near `point` into `scratch`; returns how many.
    private func gatherCircles(near point: GeoPoint, accuracyM: Double) -> Int {
        let buffer = scratch
        var count = 0
        circles._withUnsafeGuaranteedRef { index in
            index.forEachCandidate(near: point, accuracyM: accuracyM) { id in
                precondition(count < buffer.count, "the scratch space holds every slot once")
                buffer[count] = id
                count += 1
            }
        }
        return count
    }

    /// The distance from a position to the nearest edge of a circular condition (every monitor's),
    /// in metres, for boundary-aware sampling: `CircleIndex.nearestEdgeM` over the conditions in
    /// use. Exact below `limitM`, `limitM` beyond it; nil when there is no circular condition.
    @_noAllocation
    public func nearestFenceEdgeM(latitude: Double, longitude: Double, limitM: Double = .infinity) -> Double? {
        circles._withUnsafeGuaranteedRef { index in
            index.nearestEdgeM(GeoPoint(latitude: latitude, longitude: longitude), limitM: limitM)
        }
    }

    /// A beacon sighting: matching conditions are satisfied (refined to the concrete identity
    /// for wildcards), subject to their proximity requirement.
    @_noAllocation
    public func observe(_ sighting: Sighting) {
        let nowNs = sighting.time.totalNanoseconds
        if startedNs == nil { startedNs = nowNs }
        let nowMs = nowNs / 1_000_000
        let buffer = scratch
        var found = 0
        beacons.forEachMatch(sighting.identity) { index in
            precondition(found < buffer.count, "the scratch space holds every slot once")
            buffer[found] = index
            found += 1
        }
        for position in 0..<found {
            let index = scratch[position]
            let slot = slot(index)
            guard slot.pointee.inUse, slot.pointee.kind == .beacon else { continue }
            let beacon = beaconStates.baseAddress! + Int(index)
            if let rssi = sighting.rssi { beacon.pointee.filter.add(rssi: rssi, atMs: nowMs) }
            // The RSSI statistics cost a sort of the window: computed only when they decide
            // something (a proximity requirement) or explain something (a state change).
            let changing = slot.pointee.effectiveState != .satisfied
            let proximity = settingsTable[slot.pointee.settingsIndex].proximity
            if !changing && proximity == nil && slot.pointee.candidate == .satisfied {
                // The common case: a beacon that is already satisfied was seen again.
                beacon.pointee.lastSeenNs = nowNs
                continue
            }
            var explanation = Explanation(source: .sighting)
            if changing || proximity != nil, let statistics = beacon.pointee.filter.statistics(nowMs: nowMs) {
                explanation.rssiFiltered = statistics.filtered
                explanation.rssiMinimum = statistics.minimum
                explanation.rssiMaximum = statistics.maximum
                explanation.rssiSamples = statistics.count
                explanation.distanceM = DistanceModel.freeSpace.distance(rssi: statistics.filtered,
                                                                          measuredPower: MeasuredPower(atOneMeter: sighting.measuredPower)) ?? -1
            }
            if let required = proximity {
                let category = BeaconProximity.category(distance: explanation.distanceM >= 0 ? explanation.distanceM : nil)
                guard category.isWithin(BeaconProximity(required)) else { continue }
            }
            beacon.pointee.lastSeenNs = nowNs
            guard changing || slot.pointee.candidate != .satisfied else { continue }
            decide(index, observed: .satisfied, time: sighting.time, explanation: explanation,
                   refinement: beacon.pointee.condition.isWildcard ? sighting.identity : nil)
        }
        let bounded = ringCount <= capacity.events
        precondition(bounded, "pending events within the ring's capacity")
    }

    /// Timers: beacon exits after their timeout, dwell completions between fixes, and beacon
    /// conditions never seen since start becoming unsatisfied.
    @_noAllocation
    public func tick(now: UTCTime) {
        let nowNs = now.totalNanoseconds
        if startedNs == nil { startedNs = nowNs }
        let supported = beaconsSupported
        var position = 0
        while position < attentionCount {
            let index = attention[position]
            let slot = slots[Int(index)]
            let settings = settingsTable[slot.settingsIndex]
            switch slot.kind {
            case .beacon:
                let timeoutNs = (settings.exitTimeoutMs ?? MonitorEngine.defaultBeaconExitTimeoutMs) * 1_000_000
                // After a restart a beacon gets a whole timeout to be seen again, so a tag that
                // never left does not flap unsatisfied/satisfied across the restart.
                let lastSeenNs = beaconStates[Int(index)].lastSeenNs
                let seenNs = max(lastSeenNs, startedNs ?? lastSeenNs)
                if supported, slot.effectiveState != .unsatisfied, nowNs - seenNs >= timeoutNs {
                    var explanation = Explanation(source: .timeout)
                    explanation.dwellMs = (nowNs - seenNs) / 1_000_000
                    let date = UTCTime(nanoseconds: seenNs + timeoutNs)
                    decide(index, observed: .unsatisfied, time: date, explanation: explanation, refinement: nil)
                }
            case .circle, .shape:
                // A dwell that completed between fixes is reported at its completion time.
                if slot.candidate != slot.effectiveState && slot.candidate != .unknown,
                   nowNs - slot.candidateSinceNs >= settings.dwellMs * 1_000_000 {
                    let explanation = candidateExplanations[Int(index)]
                    decide(index, observed: slot.candidate, time: UTCTime(nanoseconds: slot.candidateSinceNs + settings.dwellMs * 1_000_000),
                           explanation: explanation, refinement: nil)
                }
            }
            if position < attentionCount {
                if attention[position] == index { position += 1 }
            }
        }
        let attended = attentionCount <= slotsInitialized
        precondition(attended, "the attention set holds each slot once")
        let bounded = ringCount <= capacity.events
        precondition(bounded, "pending events within the ring's capacity")
    }

    /// The earliest time `tick` has something to do (a beacon exit or a dwell completing), for
    /// the poll loop's timer.
    public func nextDeadline() -> UTCTime? {
        // With the event ring full, no deadline can produce an event until the pending ones are
        // handled (the log's retry wakes the loop for that): a deadline already past would only
        // make the loop spin.
        guard ringCount < capacity.events else { return nil }
        var earliest = Int64.max
        for position in 0..<attentionCount {
            let index = Int(attention[position])
            let slot = slots[index]
            let settings = settingsTable[slot.settingsIndex]
            switch slot.kind {
            case .beacon:
                if slot.effectiveState != .unsatisfied && beaconsSupported {
                    let lastSeenNs = beaconStates[index].lastSeenNs
                    let seenNs = max(lastSeenNs, startedNs ?? lastSeenNs)
                    earliest = min(earliest, seenNs + (settings.exitTimeoutMs ?? MonitorEngine.defaultBeaconExitTimeoutMs) * 1_000_000)
                }
            case .circle, .shape:
                if slot.candidate != slot.effectiveState && slot.candidate != .unknown {
                    earliest = min(earliest, slot.candidateSinceNs + settings.dwellMs * 1_000_000)
                }
            }
        }
        return earliest == Int64.max ? nil : UTCTime(nanoseconds: earliest)
    }
}

extension UTCTime {
    public init(nanoseconds: Int64) {
        let seconds = floorDivide(nanoseconds, 1_000_000_000)
        self.init(seconds: seconds, nanoseconds: Int32(nanoseconds - seconds * 1_000_000_000))
    }
}
