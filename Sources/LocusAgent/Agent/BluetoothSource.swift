import LocusCore
import LocusDevices

/// How an adapter is scanned once decided: HCI commands on a raw socket, or the kernel's
/// advertisement monitor (mgmt). An enum, not a protocol value: the device build has no
/// existentials. The scanners are move-only (each owns its socket and buffers), so each sits in
/// a box the loop mutates in place: moving them in and out of the enum on every call cost the
/// device binary several kilobytes.
enum AdapterScan {
    final class Box<Scanner: ~Copyable> {
        var scanner: Scanner
        init(_ scanner: consuming Scanner) { self.scanner = scanner }
    }

    case undecided
    case raw(Box<HCIScanner<LibBluetoothHCI>>)
    case kernel(Box<KernelScanner<MgmtSocket>>)
}

/// The Bluetooth side: a BlueZ adapter scanned through a raw HCI socket or through the kernel's
/// management interface (beside bluetoothd), or an HCI feed (H4 framed events from a file, a
/// pseudo-terminal, a UART), all read into one sighting buffer the loop takes sightings from
/// (`sightingCount`, `sighting(_:)`).
///
/// The scan mode is decided at the first start (`decide`). A raw adapter is checked every
/// `adapterCheckIntervalNs` (a raw socket goes quiet rather than failing when its adapter goes
/// down) and restarted with backoff; the kernel mode hears of its adapter through mgmt events; a
/// feed is reopened with backoff. Sightings beyond the buffer are counted and logged, never
/// dropped silently.
final class BluetoothSource: LoopComponent {
    enum Kind { case none, adapter(Int), feed(String) }

    /// Sightings one turn can hand the loop; more are counted in `droppedSightings`.
    static let sightingCapacity = 64
    static let adapterCheckIntervalNs: Int64 = 10_000_000_000

    let kind: Kind
    /// The adapter's scanner (`.adapter`), decided at its first start.
    private var scan = AdapterScan.undecided
    private let scanMode: BoardConfig.ScanMode
    private let powerOn: Bool
    private let monitorStatePath: String
    /// Other programs with a Bluetooth socket open when the mode was decided ("'bluetoothd' (mgmt)").
    private var coUsers: [String] = []
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
    /// Advertising reports of any advertiser since start: the adapter's sign of life.
    private(set) var reportsHeard = 0
    /// An adapter that falls silent while beacons are expected is healed step by step.
    private var healing: AdapterHealing
    /// A power cut the healing asked for (taken by the loop for `Outputs`).
    private var lineRequest: ReceiverHealing.LineRequest? = nil
    /// Whether the last turn expected the adapter to hear (its healing's deadline counts then).
    private var healthExpected = false

    init(board: BoardConfig, stateDirectory: String, tier: AccuracyTier, health: SiteConfig.Health = SiteConfig.Health(),
         now: MonotonicInstant = MonotonicClock.instant) {
        let settings = TierPolicy(tier: tier).scanSettings
        tierSettings = settings
        switch board.bluetooth {
        case .hci(let index)?:
            kind = .adapter(index)
            feed = nil
        case .feed(let path)?:
            let resolved = Paths.resolve(path, relativeTo: stateDirectory)
            kind = .feed(resolved)
            feed = SerialReader(path: resolved, baud: 115200)
        case nil:
            kind = .none
            feed = nil
        }
        scanMode = board.scanMode
        powerOn = board.powerOn
        monitorStatePath = Paths.resolve("bluetooth-monitor", relativeTo: stateDirectory)
        healing = AdapterHealing(lines: board.bluetoothLines, health: health, now: now)
        sightings = .allocate(capacity: BluetoothSource.sightingCapacity)
    }

    deinit { sightings.deallocate() }

    // MARK: the loop's surface

    var maximumDescriptors: Int { 1 }

    func register(in poll: inout PollSet) {
        switch kind {
        case .adapter: readIndex = poll.add(scan.descriptor)
        case .feed: readIndex = poll.add(feed?.descriptor)
        case .none: readIndex = nil
        }
    }

    func deadlines(_ next: inout NextDeadline) {
        switch kind {
        case .adapter:
            if healthExpected { next.consider(healing.ladder.nextDeadline) }
            if scan.isOpen && !scan.isKernel { next.consider(nextAdapterCheck) }
            if let attempt = scan.nextAttemptAtNs { next.consider(MonotonicInstant(nanoseconds: attempt)) }
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
            if scan.isUndecided { decide(index) }
            guard let (text, started, unanswered) = scan.startIfDue(now: now.monotonic.nanoseconds) else { return }
            if started { AgentLog.info("locus: bluetooth: " + text) } else { AgentLog.warning("locus: bluetooth: " + text) }
            if unanswered { healing.commandTimedOut(now.monotonic) }
            if !started, scanMode == .auto, scan.kernelUnsupported {
                AgentLog.info("locus: bluetooth: scan = auto: the kernel cannot scan for others; using raw HCI commands")
                scan = .raw(.init(HCIScanner(adapterIndex: index, settings: wantedSettings)))
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
        var count = 0, rejected = 0, dropped = 0, reports = 0
        switch kind {
        case .adapter(let index):
            if let text = scan.read(now.monotonic.nanoseconds, time, buffer, &count, &rejected, &dropped, &reports) {
                AgentLog.warning("locus: bluetooth: \(text)")
            }
            reportsHeard += reports
            healing.observe(reports: reportsHeard, now: now.monotonic, adapter: "hci" + String(index))
        case .feed(let path):
            let event = feed?.read(now: now.monotonic.nanoseconds) { bytes in
                h4.consume(bytes) { packet in SightingGather.gather(packet, time, buffer, &count, &rejected, &dropped, &reports) }
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
        guard case .adapter = kind, scan.isOpen, now.monotonic >= nextAdapterCheck else { return }
        nextAdapterCheck = now.monotonic + BluetoothSource.adapterCheckIntervalNs
        if let text = scan.checkAdapter(now: now.monotonic.nanoseconds) { AgentLog.warning("locus: bluetooth: \(text)") }
    }

    /// The radios' tier changed: the scan's duty cycle follows (a feed has none), unless beacon
    /// ranging holds it at the finest.
    func reconfigure(_ settings: ScanSettings) {
        tierSettings = settings
        applyScan()
    }

    /// The scan timing a raw scan runs with (nil for a feed, no Bluetooth, or the kernel mode,
    /// where the kernel times the scan).
    var scanSettings: ScanSettings? {
        guard case .adapter = kind, !scan.isKernel else { return nil }
        return wantedSettings
    }

    private var wantedSettings: ScanSettings { rangingScan ? TierPolicy(tier: .best).scanSettings : tierSettings }

    private func applyScan() {
        guard case .adapter = kind, let problem = scan.reconfigure(wantedSettings) else { return }
        AgentLog.warning("locus: bluetooth: restarting the scan at the new duty cycle: \(problem)")
    }

    /// `scan = "auto"`: the kernel mode when another program has a mgmt socket open (bluetoothd,
    /// btmgmt: they drive this adapter through the kernel, which must then be the one that scans)
    /// or when the monitor replay cannot be read (the kernel mode is safe beside anyone); raw HCI
    /// commands when nobody else uses Bluetooth. An HCI user-channel holder owns the adapter
    /// outright: said in one line, since neither mode can share it.
    private func decide(_ index: Int) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
        defer { buffer.deallocate() }
        let name = "hci" + String(index)
        var reason = "no other program uses Bluetooth"
        switch HCIUsers.read(MgmtSocket(), buffer: buffer) {
        case .success(let users):
            for user in users where user.name != "locus" {
                coUsers.append(user.description)
                if user.channel == .control && coUsers.count == 1 { reason = "beside " + user.name }
                if user.channel == .user && Int(user.index) == index {
                    AgentLog.error("locus: bluetooth: " + name + " is held exclusively through the HCI user channel by '" + user.name + "'; it cannot be shared: stop it or give Locus another adapter")
                }
            }
        case .failure:
            reason = "the monitor channel is not readable"
        }
        let kernel = scanMode == .kernel || (scanMode == .auto && reason != "no other program uses Bluetooth")
        if kernel {
            scan = .kernel(.init(KernelScanner(adapterIndex: index, powerOn: powerOn, statePath: monitorStatePath, driver: MgmtSocket())))
        } else {
            scan = .raw(.init(HCIScanner(adapterIndex: index, settings: wantedSettings)))
        }
        if scanMode == .auto { AgentLog.info("locus: bluetooth: " + name + ": scan = auto: " + (kernel ? "kernel" : "raw") + " mode (" + reason + ")") }
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
            line.string("mode", scan.modeName)
            line.boolean("scanning", scan.isOpen)
            line.integer("losses", scan.losses)
            line.beginArray("co_users")
            for user in coUsers { line.string(user) }
            line.endArray()
            line.integer("monitor_readds", scan.monitorReadds)
            line.integer("reports", reportsHeard)
            healing.status(into: &line, now: MonotonicClock.instant)
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

    /// SIGHUP: a healing that gave up starts afresh ([health] itself is read at start).
    func reload(_ config: LoadedConfig, now: AgentTime) { healing.reset(now.monotonic) }

    // MARK: self-healing

    /// Every turn: while the adapter should hear advertisements (the site has beacon conditions
    /// or a client ranges), the healing's next step when it is due, whether the scan runs or
    /// cannot even start (a controller that answers nothing). Every step stops the scan first;
    /// `openIfDue` starts it again on the next turn.
    func checkHealth(_ now: AgentTime, beaconsExpected: Bool) {
        guard case .adapter(let index) = kind else { return }
        let adapter = "hci" + String(index)
        healthExpected = beaconsExpected && !scan.isUndecided
        guard let step = healing.check(now.monotonic, expected: healthExpected, adapter: adapter) else { return }
        if let problem = scan.stop() { AgentLog.warning("locus: bluetooth: stopping the scan: " + problem) }
        scan.restartSoon()
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
        if let problem { AgentLog.warning("locus: bluetooth: " + adapter + ": " + step.description + ": " + problem) }
    }

    /// A power cut the healing asked for, once.
    func takeLineRequest() -> ReceiverHealing.LineRequest? {
        defer { lineRequest = nil }
        return lineRequest
    }

    func shutdown(now: AgentTime) {
        if let problem = scan.stop() { AgentLog.warning("locus: bluetooth: stopping the scan: \(problem)") }
        feed?.close()
    }
}

/// The loop's calls on whichever scanner was chosen.
extension AdapterScan {
    var isKernel: Bool { if case .kernel = self { return true } else { return false } }
    var isUndecided: Bool { if case .undecided = self { return true } else { return false } }

    var descriptor: Descriptor? {
        switch self {
        case .raw(let box): return box.scanner.descriptor
        case .kernel(let box): return box.scanner.descriptor
        case .undecided: return nil
        }
    }

    var isOpen: Bool { descriptor != nil }

    var nextAttemptAtNs: Int64? {
        switch self {
        case .raw(let box): return box.scanner.nextAttemptAtNs
        case .kernel(let box): return box.scanner.nextAttemptAtNs
        case .undecided: return nil
        }
    }

    var modeName: String {
        switch self {
        case .raw: return "raw"
        case .kernel: return "kernel"
        case .undecided: return "undecided"
        }
    }

    var losses: Int {
        switch self {
        case .raw(let box): return box.scanner.losses
        case .kernel(let box): return box.scanner.losses
        case .undecided: return 0
        }
    }

    var monitorReadds: Int { if case .kernel(let box) = self { return box.scanner.monitorReadds } else { return 0 } }
    var kernelUnsupported: Bool { if case .kernel(let box) = self { return box.scanner.unsupported } else { return false } }

    /// The start's log text, whether scanning started (or the monitor is being added again), and
    /// whether a command went unanswered (the self-healing's cue).
    func startIfDue(now: Int64) -> (String, Bool, Bool)? {
        switch self {
        case .raw(let box):
            guard let event = box.scanner.startIfDue(now: now) else { return nil }
            if case .started = event { return ("hci" + String(box.scanner.adapterIndex) + ": " + event.description, true, false) }
            if case .startFailed(let error, _) = event { return (event.description, false, error.isUnanswered) }
            return (event.description, false, false)
        case .kernel(let box):
            guard let event = box.scanner.startIfDue(now: now) else { return nil }
            switch event {
            case .started: return ("hci" + String(box.scanner.adapterIndex) + ": " + event.description, true, false)
            case .readding: return (event.description, true, false)
            case .startFailed(let error, _): return (event.description, false, error.isUnanswered)
            default: return (event.description, false, false)
            }
        case .undecided:
            return nil
        }
    }

    /// Reads what the scanner has into the sighting buffer; the text of anything to log.
    func read(_ now: Int64, _ time: UTCTime, _ buffer: UnsafeMutableBufferPointer<Sighting>,
              _ count: inout Int, _ rejected: inout Int, _ dropped: inout Int, _ reports: inout Int) -> String? {
        switch self {
        case .raw(let box):
            return box.scanner.read(now: now) { packet in SightingGather.gather(packet, time, buffer, &count, &rejected, &dropped, &reports) }?.description
        case .kernel(let box):
            let before = box.scanner.rejectedEvents
            let event = box.scanner.read(now: now) { report in SightingGather.store(report, time, buffer, &count, &dropped, &reports) }
            rejected += box.scanner.rejectedEvents - before
            return event?.description
        case .undecided:
            return nil
        }
    }

    /// A raw socket goes quiet when its adapter goes down; the kernel mode hears it as mgmt events.
    func checkAdapter(now: Int64) -> String? {
        guard case .raw(let box) = self else { return nil }
        return box.scanner.checkAdapter(now: now)?.description
    }

    /// New raw scan timing; the kernel times its own scan.
    func reconfigure(_ settings: ScanSettings) -> String? {
        guard case .raw(let box) = self else { return nil }
        return box.scanner.reconfigure(settings)?.description
    }

    /// After a self-healing step: start again as soon as possible.
    func restartSoon() {
        switch self {
        case .raw(let box): box.scanner.restartSoon()
        case .kernel(let box): box.scanner.restartSoon()
        case .undecided: break
        }
    }

    func stop() -> String? {
        switch self {
        case .raw(let box): return box.scanner.stop()?.description
        case .kernel(let box): return box.scanner.stop()?.description
        case .undecided: return nil
        }
    }
}

/// The Bluetooth hot path's glue, outside the source's class (no metadata, no reference counting).
enum SightingGather {
    /// The sightings in one HCI event packet (H4 type byte first), into the fixed buffer: a
    /// malformed event is counted in `rejected`, a sighting the buffer has no room for in
    /// `dropped`; none is trusted or lost without a count.
    @_noAllocation
    static func gather(_ packet: UnsafeRawBufferPointer, _ time: UTCTime, _ buffer: UnsafeMutableBufferPointer<Sighting>,
                       _ count: inout Int, _ rejected: inout Int, _ dropped: inout Int, _ reports: inout Int) {
        var stored = count
        var over = 0
        var heard = 0
        let result = HCIEvents.forEachReport(in: HCIEvents.withoutPacketType(packet)) { report in
            store(report, time, buffer, &stored, &over, &heard)
        }
        count = stored
        dropped += over
        reports += heard
        if case .failure = result { rejected += 1 }
    }

    /// One report (from an HCI event or a mgmt Device Found) into the buffer, if it is a beacon;
    /// every report is counted in `reports` (the adapter hears).
    @_noAllocation @inline(__always)
    static func store(_ report: AdvertisingReport, _ time: UTCTime, _ buffer: UnsafeMutableBufferPointer<Sighting>,
                      _ count: inout Int, _ dropped: inout Int, _ reports: inout Int) {
        reports += 1
        guard let sighting = Sighting.from(report, time: time) else { return }
        guard count < buffer.count else {
            dropped += 1
            return
        }
        buffer[count] = sighting
        count += 1
    }
}
