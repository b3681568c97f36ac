import LocusCore
import LocusDevices

/// The Bluetooth side: a BlueZ adapter scanned through a raw HCI socket, or an HCI feed (H4
/// framed events from a file, a pseudo-terminal, a UART), both read through one path into one
/// sighting buffer the loop takes sightings from (`sightingCount`, `sighting(_:)`).
///
/// An adapter is checked every `adapterCheckIntervalNs` (a raw socket goes quiet rather than
/// failing when its adapter goes down) and restarted with backoff; a feed is reopened with
/// backoff. Sightings beyond the buffer are counted and logged, never dropped silently.
final class BluetoothSource: LoopComponent {
    enum Kind { case none, adapter(Int), feed(String) }

    /// Sightings one turn can hand the loop; more are counted in `droppedSightings`.
    static let sightingCapacity = 64
    static let adapterCheckIntervalNs: Int64 = 10_000_000_000

    let kind: Kind
    /// The adapter's scanner (`.adapter`), or nil.
    private var scanner: HCIScanner<LibBluetoothHCI>?
    /// The feed's reader (`.feed`), or nil.
    private var feed: SerialReader?
    private var h4 = H4Framer()
    private let sightings: UnsafeMutableBufferPointer<Sighting>
    /// Sightings the last `read` gathered, in `sighting(_:)`.
    private(set) var sightingCount = 0
    private var nextAdapterCheck = MonotonicInstant(nanoseconds: 0)
    private var feedOpenFailures = 0
    private var readIndex: PollSet.Index? = nil
    /// Since start: sightings handed on, events that were not well-formed HCI, and sightings
    /// that did not fit the buffer (the last count reported in the log, so a flood is one line
    /// per doubling, not one per turn).
    private(set) var sightingsGathered = 0
    private(set) var rejectedEvents = 0
    private(set) var droppedSightings = 0
    private var droppedReported = 0
    /// The scan the radios' tier asks for (`reconfigure`); while a client ranges beacons the
    /// scan runs at the finest tier's instead (`scanForRanging`).
    private var tierSettings: ScanSettings
    private var rangingScan = false

    init(board: BoardConfig, stateDirectory: String, tier: AccuracyTier) {
        let settings = TierPolicy(tier: tier).scanSettings
        tierSettings = settings
        switch board.bluetooth {
        case .hci(let index)?:
            kind = .adapter(index)
            scanner = HCIScanner(adapterIndex: index, settings: settings)
            feed = nil
        case .feed(let path)?:
            let resolved = Paths.resolve(path, relativeTo: stateDirectory)
            kind = .feed(resolved)
            scanner = nil
            feed = SerialReader(path: resolved, baud: 115200)
        case nil:
            kind = .none
            scanner = nil
            feed = nil
        }
        sightings = .allocate(capacity: BluetoothSource.sightingCapacity)
    }

    deinit { sightings.deallocate() }

    // MARK: the loop's surface

    var maximumDescriptors: Int { 1 }

    func register(in poll: inout PollSet) {
        switch kind {
        case .adapter: readIndex = poll.add(scanner?.descriptor)
        case .feed: readIndex = poll.add(feed?.descriptor)
        case .none: readIndex = nil
        }
    }

    func deadlines(_ next: inout NextDeadline) {
        switch kind {
        case .adapter:
            if scanner?.isOpen == true { next.consider(nextAdapterCheck) }
            if let attempt = scanner?.nextAttemptAtNs { next.consider(MonotonicInstant(nanoseconds: attempt)) }
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
            guard let event = scanner?.startIfDue(now: now.monotonic.nanoseconds) else { return }
            switch event {
            case .started: AgentLog.info("locus: bluetooth: hci\(index): \(event)")
            default: AgentLog.warning("locus: bluetooth: \(event)")
            }
            nextAdapterCheck = now.monotonic + BluetoothSource.adapterCheckIntervalNs
        case .feed(let path):
            switch feed?.openIfDue(now: now.monotonic.nanoseconds) {
            case .opened?:
                AgentLog.info("locus: bluetooth: reading the HCI feed \(path)\(OpenFailureReport.afterFailures(feedOpenFailures))")
                feedOpenFailures = 0
            case .openFailed(let error, let retry)?:
                feedOpenFailures += 1
                if let text = OpenFailureReport.text(feedOpenFailures, error, retryMs: retry) {
                    AgentLog.warning("locus: bluetooth: cannot open the HCI feed \(path): \(text)")
                }
            case .lost?, nil:
                break
            }
        case .none:
            break
        }
    }

    /// Reads what the adapter or the feed has, if ready: HCI event packets (H4 indicator
    /// first) from the adapter's socket, or from the feed through the H4 framer, go through one
    /// gather into the sighting buffer, stamped with the turn's UTC time.
    func read(_ poll: borrowing PollSet, _ now: AgentTime) {
        sightingCount = 0
        guard poll.readable(readIndex) else { return }
        // Locals, not `self`, in the gather: the framer's allocation-free path may not retain.
        let time = now.utc, buffer = sightings
        var count = 0, rejected = 0, dropped = 0
        switch kind {
        case .adapter:
            let event = scanner?.read(now: now.monotonic.nanoseconds) { packet in
                SightingGather.gather(packet, time, buffer, &count, &rejected, &dropped)
            }
            if let event { AgentLog.warning("locus: bluetooth: \(event)") }
        case .feed(let path):
            let event = feed?.read(now: now.monotonic.nanoseconds) { bytes in
                h4.consume(bytes) { packet in SightingGather.gather(packet, time, buffer, &count, &rejected, &dropped) }
            }
            if case .lost? = event { AgentLog.warning("locus: bluetooth: the HCI feed \(path) closed; reopening") }
        case .none:
            break
        }
        sightingCount = count
        sightingsGathered += count
        rejectedEvents += rejected
        droppedSightings += dropped
        if dropped > 0 && droppedSightings >= 2 * droppedReported {
            droppedReported = droppedSightings
            AgentLog.warning("locus: bluetooth: \(droppedSightings) sightings dropped since start: more than \(BluetoothSource.sightingCapacity) in one read")
        }
    }

    func sighting(_ index: Int) -> Sighting {
        precondition(index >= 0 && index < sightingCount)
        return sightings[index]
    }

    /// Asks the kernel whether the adapter is still up, every `adapterCheckIntervalNs`.
    func checkAdapter(_ now: AgentTime) {
        guard case .adapter = kind, scanner?.isOpen == true, now.monotonic >= nextAdapterCheck else { return }
        nextAdapterCheck = now.monotonic + BluetoothSource.adapterCheckIntervalNs
        if let event = scanner?.checkAdapter(now: now.monotonic.nanoseconds) { AgentLog.warning("locus: bluetooth: \(event)") }
    }

    /// The radios' tier changed: the scan's duty cycle follows (a feed has none), unless beacon
    /// ranging holds it at the finest.
    func reconfigure(_ settings: ScanSettings) {
        tierSettings = settings
        applyScan()
    }

    /// The scan the adapter runs now (nil for a feed or no Bluetooth).
    var scanSettings: ScanSettings? { scanner?.settings }

    private func applyScan() {
        let settings = rangingScan ? TierPolicy(tier: .best).scanSettings : tierSettings
        guard case .adapter = kind, let problem = scanner?.reconfigure(settings) else { return }
        AgentLog.warning("locus: bluetooth: restarting the scan at the new duty cycle: \(problem)")
    }

    // MARK: beacon ranging

    /// Whether a client ranges beacons: Core Location ranges with the radio fully on, and a
    /// beacon advertising once a second is heard every second only by a continuous scan (at
    /// hundredMeters' 30/120 ms about one advertisement in four). Called every turn; the scan
    /// restarts only when it changes.
    func scanForRanging(_ active: Bool) {
        guard active != rangingScan else { return }
        rangingScan = active
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
            line.boolean("scanning", scanner?.isOpen ?? false)
            line.integer("losses", scanner?.losses ?? 0)
        case .feed(let path):
            line.string("source", path)
            line.boolean("open", feed?.isOpen ?? false)
        }
        line.integer("sightings", sightingsGathered)
        line.integer("rejected_events", rejectedEvents)
        line.integer("dropped_sightings", droppedSightings)
        line.boolean("ranging_scan", rangingScan)
        line.endObject()
    }

    func reload(_ config: LoadedConfig, now: AgentTime) {}

    func shutdown(now: AgentTime) {
        if let problem = scanner?.stop() { AgentLog.warning("locus: bluetooth: stopping the scan: \(problem)") }
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
                       _ count: inout Int, _ rejected: inout Int, _ dropped: inout Int) {
        var stored = count
        var over = 0
        let result = HCIEvents.forEachReport(in: HCIEvents.withoutPacketType(packet)) { report in
            guard let sighting = Sighting.from(report, time: time) else { return }
            guard stored < buffer.count else {
                over += 1
                return
            }
            buffer[stored] = sighting
            stored += 1
        }
        count = stored
        dropped += over
        if case .failure = result { rejected += 1 }
    }
}
