import LocusCore
import LocusDevices

/// `locus run`: one poll(2) loop over the GNSS port, the Bluetooth source, the control socket,
/// a timerfd and a signalfd. No threads; with nothing arriving the agent sleeps until its next
/// deadline (an engine timeout, a pulse ending, a device retry, the watchdog, a log sync).
///
/// Each turn: read what is ready, feed fixes and sightings to the engine, tick it, then hand
/// every pending event to the sinks in order, log first ("log, then act"): latches it sets are
/// logged, the event is appended (and synced per policy), GPIO lines move, subscribers get it,
/// and only then does it become its record's lastEvent.
final class Agent {
    enum BluetoothKind { case none, adapter(Int), feed(String) }

    let loaded: LoadedConfig
    let engine: MonitorEngine
    /// nil when the state directory cannot be written: monitoring goes on in memory and every
    /// event says `persistenceUnavailable`.
    let session: StateSession?
    var clock = AgentClock()
    let stateDirectory: String

    // Sources.
    var gnss: SerialReader
    let hasGNSS: Bool
    var decoder: NMEADecoder
    /// The receiver's configuration for the site's `[updates]` preset and tier.
    var receiver: ReceiverControl
    let fixes: UnsafeMutableBufferPointer<Fix>
    var fixCount = 0
    let bluetoothKind: BluetoothKind
    var scanner: HCIScanner<LibBluetoothHCI>
    var feed: SerialReader
    var h4 = H4Framer()
    let sightings: UnsafeMutableBufferPointer<Sighting>
    var sightingCount = 0
    var nextAdapterCheckNs: Int64 = 0
    var gnssOpenFailures = 0
    var feedOpenFailures = 0
    static let adapterCheckIntervalNs: Int64 = 10_000_000_000

    // Sinks.
    var plan: OutputPlan
    var outputs: GPIOOutputs?
    var privacy: SiteConfig.FixPrivacy
    var fixIntervalNs: Int64
    var nextFixLogNs: Int64 = 0
    var memorySequence: Int64 = 0
    var logRetryAtNs: Int64? = nil
    var logRetryDelayNs: Int64 = 1_000_000_000
    var logFailing = false

    // Live updates (AgentUpdates.swift).
    let siteUpdater: LiveUpdater
    /// Each control slot's update stream, if it asked for one.
    var streams: [UpdateStream?] = []
    var pause: PauseController
    /// The tier the receiver and the BLE scan run at.
    var radioTier: AccuracyTier
    /// `[updates] motion_input`: wakes the paused receiver.
    var motion: GPIOInput?
    /// Boundary-aware sampling: when the receiver, off between fixes, is to be woken (agent clock).
    var sampleWakeAtNs: Int64? = nil
    /// u-blox M8 hot start is about 1 s ([M8] data sheet, "Acquisition"): woken this early.
    static let hotStartLeadMs: Int64 = 2_000
    static let minimumSampleSleepMs: Int64 = 5_000

    // Control.
    var control: ControlServer?
    var subscriptions: [Subscription]
    /// The monitor each control connection has opened (CLMonitor: one open instance per name).
    var claims: [FixedName?] = []
    /// Consumers' cursors when there is no log.
    var memoryConsumers: [(FixedName, UInt64)] = []
    /// Each control slot's index in this turn's poll set (allocated once: a turn allocates nothing).
    let clientPollIndex = UnsafeMutableBufferPointer<Int>.allocate(capacity: PollSet.capacity)

    // Loop.
    var timer: DeadlineTimer
    let signals: SignalSource
    let notifier = ServiceNotifier()
    var nextWatchdogNs: Int64? = nil
    var pollSet = PollSet()
    var running = true
    var statistics = Statistics()

    struct Statistics {
        var fixes = 0
        var sightings = 0
        var events = 0
        var lastFix: Fix? = nil
        var hciRejected = 0
    }

    struct Subscription {
        var active = false
        var monitor: FixedName? = nil
        /// The last sequence number delivered.
        var cursor: UInt64 = 0
        /// Behind: events are read from the log until the subscriber has them all.
        var catchingUp = false
    }

    init(loaded: LoadedConfig, engine: MonitorEngine, session: StateSession?, stateDirectory: String, outputs: GPIOOutputs?,
         plan: OutputPlan, control: ControlServer?, timer: consuming DeadlineTimer, signals: consuming SignalSource) {
        self.loaded = loaded
        self.engine = engine
        self.session = session
        self.stateDirectory = stateDirectory
        self.outputs = outputs
        self.plan = plan
        self.control = control
        self.timer = timer
        self.signals = signals
        privacy = loaded.site.fixPrivacy
        fixIntervalNs = loaded.site.log.fixIntervalMs * 1_000_000
        subscriptions = Array(repeating: Subscription(), count: control?.capacity ?? 0)
        let board = loaded.board
        let updates = loaded.site.updates
        siteUpdater = LiveUpdater(settings: LiveUpdateSettings(updates))
        pause = PauseController(siteUpdater.settings.configuration, siteUpdater.settings.tier)
        radioTier = updates.accuracy
        let scanSettings = TierPolicy(tier: updates.accuracy).scanSettings
        if let gnss = board.gnss {
            self.gnss = SerialReader(path: Paths.resolve(gnss.device, relativeTo: stateDirectory), baud: gnss.baud)
            hasGNSS = true
            decoder = NMEADecoder(allowMissingChecksum: gnss.allowMissingChecksum)
        } else {
            self.gnss = SerialReader(path: "", baud: 9600, bufferSize: 1)
            hasGNSS = false
            decoder = NMEADecoder()
        }
        // The same preset and tier the site updater and `applyReceiverPlan` use.
        receiver = ReceiverControl(receiver: board.gnss?.receiver ?? .genericNMEA, preset: siteUpdater.settings.configuration,
                                   tier: siteUpdater.settings.tier)
        fixes = .allocate(capacity: 4096 / 6 + 2)
        sightings = .allocate(capacity: 64)
        switch board.bluetooth {
        case .hci(let index)?:
            bluetoothKind = .adapter(index)
            scanner = HCIScanner(adapterIndex: index, settings: scanSettings)
            feed = SerialReader(path: "", baud: 9600, bufferSize: 1)
        case .feed(let path)?:
            let resolved = Paths.resolve(path, relativeTo: stateDirectory)
            bluetoothKind = .feed(resolved)
            scanner = HCIScanner(adapterIndex: 0, settings: scanSettings)
            feed = SerialReader(path: resolved, baud: 115200)
        case nil:
            bluetoothKind = .none
            scanner = HCIScanner(adapterIndex: 0, settings: scanSettings)
            feed = SerialReader(path: "", baud: 9600, bufferSize: 1)
        }
    }

    deinit {
        clientPollIndex.deallocate()
        fixes.deallocate()
        sightings.deallocate()
    }

    // MARK: the loop

    /// Runs until SIGTERM or SIGINT; returns the exit status.
    func run() -> Int32 {
        let started = MonotonicClock.now()
        if let interval = notifier.watchdogIntervalNs { nextWatchdogNs = started + interval }
        Process.releaseFreeMemory()
        notifier.notify("READY=1\nSTATUS=monitoring \(engine.conditionCount) conditions")
        AgentLog.notice("locus \(LocusVersion.string): running: \(engine.conditionCount) conditions in \(engine.monitorNames.count) monitors, board \(loaded.board.name)")
        while running {
            turn()
        }
        shutdown()
        return 0
    }

    func utcNow(_ monotonicNs: Int64) -> UTCTime {
        clock.now(monotonicNs: monotonicNs, realtimeNs: Clock.realtimeNs())
    }

    func turn() {
        var now = MonotonicClock.now()
        openSources(now)
        serviceReceiver(now)
        let deadline = nextDeadline(now)
        timer.arm(at: deadline, now: now)
        pollSet.removeAll()
        let signalIndex = pollSet.add(signals.descriptor)
        let timerIndex = pollSet.add(timer.descriptor)
        let gnssIndex = pollSet.add(gnss.descriptor)
        let feedIndex = pollSet.add(feed.descriptor)
        let scannerIndex = pollSet.add(scanner.descriptor)
        let listenIndex = pollSet.add(control?.listener ?? -1)
        let readOnlyIndex = pollSet.add(control?.readOnlyListener ?? -1)
        let motionIndex = pollSet.add(motion?.descriptor ?? -1)
        if let control {
            for slot in 0..<control.capacity { clientPollIndex[slot] = pollSet.add(control.descriptor(slot), write: control.wantsWrite(slot)) }
        }
        let ready = pollSet.wait(timeoutMs: -1)
        if ready < 0 && SystemError(code: -ready) != .interrupted {
            AgentLog.error("locus: poll failed: \(SystemError(code: -ready))")
            running = false
            return
        }
        now = MonotonicClock.now()
        if pollSet.readable(signalIndex) { handleSignals() }
        if pollSet.readable(timerIndex) { timer.acknowledge() }
        if pollSet.readable(gnssIndex) { readGNSS(now) }
        if pollSet.readable(feedIndex) { readFeed(now) }
        if pollSet.readable(scannerIndex) { readScanner(now) }
        if pollSet.readable(motionIndex), let motion, motion.readEdges() > 0 { motionInput(now) }
        if case .adapter = bluetoothKind, scanner.isOpen, now >= nextAdapterCheckNs {
            nextAdapterCheckNs = now + Agent.adapterCheckIntervalNs
            if let event = scanner.checkAdapter(now: now) { AgentLog.warning("locus: bluetooth: \(event)") }
        }
        if let control {
            if pollSet.readable(listenIndex) { accept(control, on: control.listener) }
            if pollSet.readable(readOnlyIndex) { accept(control, on: control.readOnlyListener) }
            for slot in 0..<control.capacity where clientPollIndex[slot] >= 0 {
                if pollSet.writable(clientPollIndex[slot]) { control.flush(slot) }
                if pollSet.readable(clientPollIndex[slot]) { serve(control, slot, now) }
            }
        }
        engine.tick(now: utcNow(now))
        tickUpdates(now)
        drainEvents(now)
        updateOutputs(now)
        catchUpSubscribers()
        serviceReceiver(now)
        housekeeping(now)
    }

    /// The earliest monotonic time something must happen, or nil for "only when input arrives".
    func nextDeadline(_ now: Int64) -> Int64? {
        var deadline: Int64? = nil
        func consider(_ time: Int64?) {
            guard let time else { return }
            deadline = min(deadline ?? time, time)
        }
        let current = utcNow(now).totalNanoseconds
        if let utc = engine.nextDeadline() { consider(now + max(0, utc.totalNanoseconds - current)) }
        if let utc = updatesDeadlineNs { consider(now + max(0, utc - current)) }
        consider(plan.nextPulseEnd(after: now))
        if hasGNSS {
            consider(gnss.nextAttemptAtNs)
            consider(receiver.nextDeadline?.nanoseconds)
        }
        switch bluetoothKind {
        case .adapter: consider(scanner.isOpen ? nextAdapterCheckNs : scanner.nextAttemptAtNs)
        case .feed: consider(feed.nextAttemptAtNs)
        case .none: break
        }
        consider(nextWatchdogNs)
        consider(session?.persistence.syncDueNs)
        consider(logRetryAtNs)
        return deadline
    }

    func openSources(_ now: Int64) {
        if hasGNSS {
            switch gnss.openIfDue(now: now) {
            case .opened?:
                AgentLog.info("locus: gnss: reading \(gnss.path) at \(gnss.baud) baud\(Agent.afterFailures(gnssOpenFailures))")
                gnssOpenFailures = 0
                receiver.portOpened(now: MonotonicInstant(nanoseconds: now))
            case .openFailed(let error, let retry)?:
                gnssOpenFailures += 1
                if let text = Agent.openFailure(gnssOpenFailures, error, retryMs: retry) { AgentLog.warning("locus: gnss: cannot open \(gnss.path): \(text)") }
            default: break
            }
        }
        switch bluetoothKind {
        case .adapter:
            if let event = scanner.startIfDue(now: now) {
                switch event {
                case .started: AgentLog.info("locus: bluetooth: hci\(scanner.adapterIndex): \(event)")
                default: AgentLog.warning("locus: bluetooth: \(event)")
                }
                nextAdapterCheckNs = now + Agent.adapterCheckIntervalNs
            }
        case .feed:
            switch feed.openIfDue(now: now) {
            case .opened?:
                AgentLog.info("locus: bluetooth: reading the HCI feed \(feed.path)\(Agent.afterFailures(feedOpenFailures))")
                feedOpenFailures = 0
            case .openFailed(let error, let retry)?:
                feedOpenFailures += 1
                if let text = Agent.openFailure(feedOpenFailures, error, retryMs: retry) { AgentLog.warning("locus: bluetooth: cannot open the HCI feed \(feed.path): \(text)") }
            default: break
            }
        case .none:
            break
        }
    }

    /// A device that cannot be opened is reported on the first failure and once more when the
    /// retries reach their slowest pace, not every ten seconds for as long as it is missing.
    static func openFailure(_ failures: Int, _ error: SystemError, retryMs: Int64) -> String? {
        if failures == 1 { return "\(error); retrying" }
        if retryMs >= SerialReader.maximumBackoffNs / 1_000_000 && failures == 7 {
            return "\(error) (still); retrying every \(retryMs / 1000) s, reported again when it opens"
        }
        return nil
    }

    static func afterFailures(_ failures: Int) -> String {
        failures > 1 ? " (after \(failures) failed attempts)" : ""
    }

    // MARK: sources

    func readGNSS(_ now: Int64) {
        let lost = gnss.read(now: now) { bytes in
            receiver.consume(bytes)
            decoder.consume(bytes) { fix in
                fixes[fixCount] = fix
                fixCount += 1
            }
        }
        for index in 0..<fixCount { observe(fixes[index], now) }
        fixCount = 0
        if receiver.takeRestart() {
            AgentLog.warning("locus: gnss: the receiver restarted (its start-up message); configuring it again")
            receiver.restarted(now: MonotonicInstant(nanoseconds: now))
            pause.receiverRestarted(nowNs: utcNow(now).totalNanoseconds)
            sampleWakeAtNs = nil
        }
        if case .lost(let error)? = lost {
            receiver.portLost()
            AgentLog.warning("locus: gnss: \(gnss.path) went away (\(error.map { "\($0)" } ?? "end of file")); reopening")
        }
    }

    func observe(_ fix: Fix, _ now: Int64) {
        guard let time = fix.time else { return }
        let first = !clock.followsGNSS
        if let step = clock.anchor(fixNs: time.totalNanoseconds, monotonicNs: now, realtimeNs: Clock.realtimeNs()) {
            engine.clockStepped(byNs: step)
            if first {
                AgentLog.info("locus: clock: following GNSS time from \(time.iso8601) (\(Quantity.describe(nanoseconds: abs(step))) \(step < 0 ? "behind" : "ahead of") the system clock)")
            } else {
                AgentLog.warning("locus: clock: GNSS time jumped \(step < 0 ? "back" : "ahead") \(Quantity.describe(nanoseconds: abs(step))) to \(time.iso8601) (receiver reset?)")
            }
        } else if first {
            AgentLog.info("locus: clock: following GNSS time from \(time.iso8601)")
        }
        statistics.fixes += 1
        statistics.lastFix = fix
        engine.observe(fix)
        updateWithFix(fix, now)
    }

    func readFeed(_ now: Int64) {
        let time = utcNow(now)
        let buffer = sightings
        var count = sightingCount
        var rejected = 0
        let lost = feed.read(now: now) { bytes in
            h4.consume(bytes) { packet in SightingGather.gather(packet, time, buffer, &count, &rejected) }
        }
        sightingCount = count
        statistics.hciRejected += rejected
        deliverSightings()
        if case .lost = lost { AgentLog.warning("locus: bluetooth: the HCI feed \(feed.path) closed; reopening") }
    }

    func readScanner(_ now: Int64) {
        let time = utcNow(now)
        let buffer = sightings
        var count = sightingCount
        var rejected = 0
        let event = scanner.read(now: now) { packet in SightingGather.gather(packet, time, buffer, &count, &rejected) }
        sightingCount = count
        statistics.hciRejected += rejected
        deliverSightings()
        if let event { AgentLog.warning("locus: bluetooth: \(event)") }
    }

    func deliverSightings() {
        for index in 0..<sightingCount { engine.observe(sightings[index]) }
        statistics.sightings += sightingCount
        sightingCount = 0
    }

    // MARK: signals and housekeeping

    func handleSignals() {
        while let signal = signals.next() {
            switch signal {
            case .terminate, .interrupt:
                AgentLog.notice("locus: \(signal == .terminate ? "SIGTERM" : "SIGINT"): stopping")
                running = false
            case .hangUp:
                notifier.notify("RELOADING=1")
                reload()
                notifier.notify("READY=1")
            }
        }
    }

    func housekeeping(_ now: Int64) {
        if let due = nextWatchdogNs, now >= due, let interval = notifier.watchdogIntervalNs {
            notifier.notify("WATCHDOG=1")
            nextWatchdogNs = now + interval
        }
        if let session {
            do { try session.persistence.syncIfDue(now: now) } catch { logFailure(error, now) }
        }
    }

    func shutdown() {
        notifier.notify("STOPPING=1")
        switch bluetoothKind {
        case .adapter:
            if let problem = scanner.stop() { AgentLog.warning("locus: bluetooth: stopping the scan: \(problem)") }
        case .feed: feed.close()
        case .none: break
        }
        gnss.close()
        if let outputs {
            outputs.release()
            AgentLog.info("locus: gpio: outputs set to their safe values")
        }
        let now = utcNow(MonotonicClock.now())
        session?.close(time: now)
        AgentLog.notice("locus: stopped: \(statistics.fixes) fixes, \(statistics.sightings) sightings, \(statistics.events) events")
    }
}

extension Agent {
    /// Writes what the receiver control has queued and logs a settled plan. Called after the
    /// port may have opened and at the end of each turn.
    func serviceReceiver(_ now: Int64) {
        guard hasGNSS, gnss.isOpen else { return }
        guard receiver.service(now: MonotonicInstant(nanoseconds: now), write: { gnss.write($0) }) else { return }
        let report = receiver.settledReport()
        if report.allConfirmed {
            AgentLog.info("locus: gnss: \(report.text)")
        } else {
            AgentLog.warning("locus: gnss: \(report.text)")
        }
    }
}

/// The Bluetooth hot path's glue, outside the agent class (no metadata, no reference counting).
enum SightingGather {
    /// The sightings in one HCI event packet (H4 type byte first), into the fixed buffer; a
    /// malformed event is counted, never trusted.
    @_noAllocation
    static func gather(_ packet: UnsafeRawBufferPointer, _ time: UTCTime, _ buffer: UnsafeMutableBufferPointer<Sighting>,
                       _ count: inout Int, _ rejected: inout Int) {
        var stored = count
        let result = HCIEvents.forEachReport(in: HCIEvents.withoutPacketType(packet)) { report in
            guard stored < buffer.count, let sighting = Sighting.from(report, time: time) else { return }
            buffer[stored] = sighting
            stored += 1
        }
        count = stored
        if case .failure = result { rejected += 1 }
    }
}
