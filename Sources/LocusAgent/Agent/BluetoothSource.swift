import LocusCore
import LocusDevices

/// The Bluetooth side: a BlueZ adapter scanned through a raw HCI socket or through the kernel's
/// management interface (beside bluetoothd), or an HCI feed (H4 framed events from a file, a
/// pseudo-terminal, a UART), all read into one sighting buffer the loop takes sightings from
/// (`sightingCount`, `sighting(_:)`).
///
/// Its parts, each in a type of its own: the adapter's scan (`BluetoothAdapter`: the mode decided
/// at the first start, the adapter checked every `BluetoothAdapter.checkIntervalNs`, since a raw
/// socket goes quiet rather than failing when its adapter goes down, and restarted with backoff;
/// the kernel mode hears of its adapter through mgmt events), the feed (`HCIFeed`, reopened with
/// backoff), the sightings (`SightingBuffer`: those beyond it are counted and logged, never
/// dropped silently). What stays here is the loop's surface and the adapter's self-healing.
final class BluetoothSource: LoopComponent {
    enum Kind { case none, adapter(Int), feed(String) }

    /// Sightings one turn can hand the loop; more are counted in `droppedSightings`.
    static let sightingCapacity = 64

    let kind: Kind
    /// The adapter's scan (`.adapter`; its timing is also kept for the others, which ignore it).
    private var adapter: BluetoothAdapter
    /// The feed (`.feed`), or nil.
    private var feed: HCIFeed?
    private var sightings = SightingBuffer(capacity: BluetoothSource.sightingCapacity)
    private var readIndex: PollSet.Index? = nil
    /// Advertising reports of any advertiser since start: the adapter's sign of life.
    private(set) var reportsHeard = 0
    /// An adapter that falls silent while beacons are expected is healed step by step.
    private var healing: AdapterHealing
    /// A power cut the healing asked for (taken by the loop for `Outputs`).
    private var lineRequest: ReceiverHealing.LineRequest? = nil
    /// Whether the last turn expected the adapter to hear (its healing's deadline counts then).
    private var healthExpected = false
    /// The phones file's keys (`[phones]`): reports from those phones' private addresses become
    /// sightings of their identities.
    var phones: PhoneResolution? = nil {
        didSet { phonesReference = phones.map { Unmanaged.passUnretained($0) } }
    }
    /// `phones` for the allocation-free gather (held by `phones`).
    private var phonesReference: Unmanaged<PhoneResolution>? = nil

    init(board: BoardConfig, stateDirectory: String, tier: AccuracyTier, health: SiteConfig.Health = SiteConfig.Health(),
         advertisement: BeaconAdvertisement? = nil, now: MonotonicInstant = MonotonicClock.instant) {
        switch board.bluetooth {
        case .hci(let index)?:
            kind = .adapter(index)
            feed = nil
        case .feed(let path)?:
            let resolved = Paths.resolve(path, relativeTo: stateDirectory)
            kind = .feed(resolved)
            feed = HCIFeed(path: resolved)
        case nil:
            kind = .none
            feed = nil
        }
        adapter = BluetoothAdapter(board: board, stateDirectory: stateDirectory, settings: TierPolicy(tier: tier).scanSettings,
                                   advertisement: advertisement)
        healing = AdapterHealing(lines: board.bluetoothLines, health: health, now: now)
    }

    /// Sightings the last `read` gathered, in `sighting(_:)`.
    var sightingCount: Int { sightings.count }
    /// Since start: sightings handed on, events that were not well-formed HCI, and sightings
    /// that did not fit the buffer.
    var sightingsGathered: Int { sightings.gathered }
    var rejectedEvents: Int { sightings.rejectedEvents }
    var droppedSightings: Int { sightings.dropped }

    // MARK: the loop's surface

    var maximumDescriptors: Int { 1 }

    func register(in poll: inout PollSet) {
        switch kind {
        case .adapter: readIndex = poll.add(adapter.scan.descriptor)
        case .feed: readIndex = poll.add(feed?.descriptor)
        case .none: readIndex = nil
        }
    }

    func deadlines(_ next: inout NextDeadline) {
        switch kind {
        case .adapter:
            if healthExpected { next.consider(healing.ladder.nextDeadline) }
            adapter.deadlines(&next)
        case .feed:
            if let attempt = feed?.nextAttemptAtNs { next.consider(MonotonicInstant(nanoseconds: attempt)) }
        case .none:
            break
        }
    }

    /// Starts the scan or opens the feed when its retry time has come.
    func openIfDue(_ now: AgentTime) {
        switch kind {
        case .adapter(let index):
            if adapter.startIfDue(index, now: now) { healing.commandTimedOut(now.monotonic) }
        case .feed:
            feed?.openIfDue(now)
        case .none:
            break
        }
    }

    /// Reads what the adapter or the feed has, if ready: HCI event packets (H4 indicator
    /// first) from the adapter's socket, or from the feed through the H4 framer, go through one
    /// gather into the sighting buffer, stamped with the turn's UTC time.
    func read(_ poll: borrowing PollSet, _ now: AgentTime) {
        sightings.clear()
        guard poll.readable(readIndex) else { return }
        // Locals, not `self`, in the gather: the framer's allocation-free path may not retain.
        let time = now.utc, buffer = sightings.storage, phones = phonesReference
        var count = 0, rejected = 0, dropped = 0, reports = 0
        switch kind {
        case .adapter(let index):
            if let text = adapter.scan.read(now.monotonic.nanoseconds, time, buffer, phones, &count, &rejected, &dropped, &reports) {
                AgentLog.warning("locus: bluetooth: \(text)")
            }
            reportsHeard += reports
            healing.observe(reports: reportsHeard, now: now.monotonic, adapter: "hci" + String(index))
        case .feed:
            feed?.read(now, time, buffer, phones, &count, &rejected, &dropped, &reports)
        case .none:
            break
        }
        if sightings.record(stored: count, rejected: rejected, dropped: dropped) {
            AgentLog.warning("locus: bluetooth: \(sightings.dropped) sightings dropped since start: more than \(BluetoothSource.sightingCapacity) in one read")
        }
    }

    func sighting(_ index: Int) -> Sighting { sightings[index] }

    /// Asks the kernel whether the adapter is still up, every `BluetoothAdapter.checkIntervalNs`.
    func checkAdapter(_ now: AgentTime) {
        guard case .adapter = kind else { return }
        adapter.checkIfDue(now: now)
    }

    /// The radios' tier changed: the scan's duty cycle follows (a feed has none), unless beacon
    /// ranging holds it at the finest.
    func reconfigure(_ settings: ScanSettings) {
        adapter.followTier(settings)
        applyScan()
    }

    /// The scan timing a raw scan runs with (nil for a feed, no Bluetooth, or the kernel mode,
    /// where the kernel times the scan).
    var scanSettings: ScanSettings? {
        guard case .adapter = kind, !adapter.scan.isKernel else { return nil }
        return adapter.wantedSettings
    }

    private func applyScan() {
        guard case .adapter = kind else { return }
        adapter.applyScan()
    }

    // MARK: beacon ranging

    /// Whether a client ranges beacons: Core Location ranges with the radio fully on, and a
    /// beacon advertising once a second is heard every second only by a continuous scan (at
    /// hundredMeters' 30/120 ms about one advertisement in four). Called every turn; the scan
    /// restarts only when it changes.
    func scanForRanging(_ active: Bool) {
        guard active != adapter.rangingScan else { return }
        adapter.holdForRanging(active)
        if case .adapter = kind { AgentLog.info("locus: bluetooth: \(active ? "continuous scan while beacons are ranged" : "ranging ended; the scan follows the radios' tier")") }
        applyScan()
    }

    func status(into line: inout JSONWriter) {
        line.beginObject("bluetooth")
        switch kind {
        case .none:
            line.string("source", "none")
        case .adapter(let index):
            line.string("source", "hci\(index)")
            line.string("mode", adapter.scan.modeName)
            line.boolean("scanning", adapter.scan.isOpen)
            line.integer("losses", adapter.scan.losses)
            line.beginArray("co_users")
            for user in adapter.coUsers { line.string(user) }
            line.endArray()
            line.integer("monitor_readds", adapter.scan.monitorReadds)
            line.integer("reports", reportsHeard)
            adapter.advertisingStatus(into: &line)
            healing.status(into: &line, now: MonotonicClock.instant)
        case .feed(let path):
            line.string("source", path)
            line.boolean("open", feed?.isOpen ?? false)
        }
        line.integer("sightings", sightings.gathered)
        line.integer("rejected_events", sightings.rejectedEvents)
        line.integer("dropped_sightings", sightings.dropped)
        line.boolean("ranging_scan", adapter.rangingScan)
        if let phones {
            // What resolving costs: addresses whose keys were tried (cache misses), keys tried.
            line.beginObject("phones")
            line.integer("keys", phones.resolver.count)
            line.integer("sightings", phones.phonesHeard)
            line.integer("addresses_tried", phones.resolver.addressesTried)
            line.integer("keys_tried", phones.resolver.keysTried)
            line.endObject()
        }
        line.endObject()
    }

    /// SIGHUP: a healing that gave up starts afresh ([health] itself is read at start).
    func reload(_ config: LoadedConfig, now: AgentTime) { healing.reset(now.monotonic) }

    // MARK: self-healing

    /// Every turn: while the adapter should hear advertisements (the site has beacon conditions
    /// or a client ranges), the healing's next step when it is due, whether the scan runs or
    /// cannot even start (a controller that answers nothing). Every step stops the scan first;
    /// `openIfDue` starts it again on the next turn.
    func checkHealth(_ now: AgentTime, beaconsExpected: Bool) {
        guard case .adapter(let index) = kind else { return }
        let name = "hci" + String(index)
        healthExpected = beaconsExpected && !adapter.scan.isUndecided
        guard let step = healing.check(now.monotonic, expected: healthExpected, adapter: name) else { return }
        if let problem = adapter.scan.stop() { AgentLog.warning("locus: bluetooth: stopping the scan: " + problem) }
        adapter.scan.restartSoon()
        var problem: String? = nil
        switch step {
        case .rescan: break
        case .resetController: problem = AdapterControl.powerCycle(adapterIndex: index)
        case .downUp: problem = AdapterControl.downUp(adapterIndex: index)
        case .powerCycle:
            if let line = healing.lines.power { lineRequest = ReceiverHealing.LineRequest(name: line, forMs: healing.lines.powerOffMs) }
            // The settle starts when the supply is back.
            healing.postpone(now.monotonic + healing.lines.powerOffMs * 1_000_000)
        }
        if let problem { AgentLog.warning("locus: bluetooth: " + name + ": " + step.description + ": " + problem) }
    }

    /// A power cut the healing asked for, once.
    func takeLineRequest() -> ReceiverHealing.LineRequest? {
        defer { lineRequest = nil }
        return lineRequest
    }

    func shutdown(now: AgentTime) {
        if let problem = adapter.scan.stop() { AgentLog.warning("locus: bluetooth: stopping the scan: \(problem)") }
        feed?.close()
    }
}

/// The Bluetooth hot path's glue, outside the source's class (no metadata, no reference counting).
enum SightingGather {
    /// The sightings in one HCI event packet (H4 type byte first), into the fixed buffer: a
    /// malformed event is counted in `rejected`, a sighting the buffer has no room for in
    /// `dropped`; none is trusted or lost without a count.
    @_noAllocation
    static func gather(_ packet: UnsafeRawBufferPointer, _ time: UTCTime, _ buffer: UnsafeMutableBufferPointer<Sighting>,
                       _ phones: Unmanaged<PhoneResolution>?,
                       _ count: inout Int, _ rejected: inout Int, _ dropped: inout Int, _ reports: inout Int) {
        var stored = count
        var over = 0
        var heard = 0
        let result = HCIEvents.forEachReport(in: HCIEvents.withoutPacketType(packet)) { report in
            store(report, time, buffer, phones, &stored, &over, &heard)
        }
        count = stored
        dropped += over
        reports += heard
        if case .failure = result { rejected += 1 }
        precondition(count <= buffer.count, "sightings within the buffer's capacity")
    }

    /// One report (from an HCI event or a mgmt Device Found) into the buffer, if it is a beacon
    /// or a configured phone; every report is counted in `reports` (the adapter hears).
    @_noAllocation @inline(__always)
    static func store(_ report: AdvertisingReport, _ time: UTCTime, _ buffer: UnsafeMutableBufferPointer<Sighting>,
                      _ phones: Unmanaged<PhoneResolution>?,
                      _ count: inout Int, _ dropped: inout Int, _ reports: inout Int) {
        reports += 1
        let sighting: Sighting
        if let beacon = Sighting.from(report, time: time) {
            sighting = beacon
        } else if let phones, let phone = phones._withUnsafeGuaranteedRef({ $0.sighting(report, time: time) }) {
            sighting = phone
        } else {
            return
        }
        guard count < buffer.count else {
            dropped += 1
            return
        }
        buffer[count] = sighting
        count += 1
    }
}
