import LocusCore
import LocusDevices

/// `locus run`: one poll(2) loop, no threads. With nothing arriving the agent sleeps until its
/// next deadline (an engine timeout, a pulse ending, a device retry, the watchdog, a log sync).
///
/// The loop composes components that own their state (see docs/architecture.md); each offers
/// the same surface (`LoopComponent`: descriptors, deadlines, status, reload, shutdown) and its
/// own service entry. The passes over that surface go through one list, `forEachComponent`. The
/// components never reach into each other: the loop passes values between them (fixes,
/// sightings, events, the turn's `now`), in this order each turn:
///
///     open what is due -> register -> wait -> signals -> GNSS fixes -> sightings -> motion
///     -> control requests -> engine tick -> update ticks -> events (log, then act: outputs,
///     subscribers) -> pulses -> uplink (the log to the broker) -> subscribers catching up
///     -> receiver writes -> housekeeping
///
/// "Log, then act": an event is appended (and synced per policy) before the GPIO lines move and
/// subscribers get it, and only then does it become its record's lastEvent.
///
/// Its stored properties are the loop's own state (the configuration, the engine, the clock,
/// the poll set) and its components: fifteen, the limit a type here keeps to.
final class Agent {
    let loaded: LoadedConfig
    let engine: MonitorEngine
    /// UTC from GNSS once fixes arrive (CLOCK_REALTIME before).
    private var clock = AgentClock()
    /// The descriptors of one turn; its capacity is the components' `maximumDescriptors` summed.
    private var poll: PollSet
    let loop: LoopHousekeeping
    let gnss: GNSSSource
    let bluetooth: BluetoothSource
    let log: EventLog
    let outputs: Outputs
    let updates: LiveUpdates
    /// The control socket's connections; the requests they carry go to `ControlOperations`.
    let control: ControlConnections
    /// The geocoding requests' index, search and buffer.
    let places: PlaceQueries
    let ranging: Ranging
    let starter: ClientStarter
    /// Present for a site with `[uplink]`.
    let uplink: Uplink?

    init(loaded: LoadedConfig, engine: MonitorEngine, loop: LoopHousekeeping, gnss: GNSSSource, bluetooth: BluetoothSource,
         log: EventLog, outputs: Outputs, updates: LiveUpdates, control: ControlConnections, ranging: Ranging, starter: ClientStarter,
         uplink: Uplink?) {
        self.loaded = loaded
        self.engine = engine
        self.loop = loop
        self.gnss = gnss
        self.bluetooth = bluetooth
        self.log = log
        self.outputs = outputs
        self.updates = updates
        self.control = control
        places = PlaceQueries(loaded)
        self.ranging = ranging
        self.starter = starter
        self.uplink = uplink
        // Limits tied together: the poll set holds what every component can register (a turn
        // that finds it full counts and logs it), and a stream's lines fit a connection's buffer.
        // (The set is sized once the components are in place: the list that sums them is self's.)
        poll = PollSet(capacity: 1)
        var descriptors = 0
        forEachComponent { descriptors += $0.maximumDescriptors }
        poll = PollSet(capacity: descriptors)
        precondition(poll.capacity >= loop.maximumDescriptors + control.capacity, "the poll set holds the loop's own descriptors and every connection")
        precondition(LiveUpdates.streamBytes <= ControlConnections.outputBytes, "a stream's lines must fit a connection's output buffer")
        precondition(Ranging.lineBytes <= ControlConnections.outputBytes, "a ranging line must fit a connection's output buffer")
        precondition(Ranging.beaconsPerLine * RangingJSON.maximumBeaconBytes + RangingJSON.maximumFrameBytes <= Ranging.lineBytes,
                     "a ranging line's beacons fit its buffer")
    }

    /// Why the agent could not be set up.
    enum OpenError: Error {
        /// The site or board file did not check (the diagnostics have been printed).
        case config
        /// Another process holds a monitor of the state directory (printed).
        case locked
        case loop(LoopHousekeeping.Failure)
        case gpio(GPIOError)
        case uplink(String)
    }

    /// A complete agent, set up in order, each step failing with one reason: config -> engine ->
    /// state directory (locks, log, records rebuilt) -> the loop's timer and signals -> GPIO
    /// lines requested with the levels the log says they had -> motion input -> the sources ->
    /// the control socket, last: its appearance tells clients (and tests) the agent is set up.
    /// Start-up's temporaries (the parsed site file, the log scan) are gone when it returns.
    static func open(configPath: String, stateDirectory: String?) -> Result<Agent, OpenError> {
        Process.mapLargeBlocks()
        guard case .success(let loaded) = LoadedConfig.load(configPath) else { return .failure(.config) }
        let directory = stateDirectory ?? Paths.resolve(loaded.site.stateDirectory, relativeTo: Paths.directory(of: configPath))
        return open(loaded, directory: directory)
    }

    /// The same from a configuration already loaded (`locus replay` swaps the board's devices for
    /// simulated ones first).
    static func open(_ config: LoadedConfig, directory: String) -> Result<Agent, OpenError> {
        var loaded = config
        // The fleet's configuration over the site file, from before the engine exists: its
        // conditions are the engine's from the start.
        var gateway = ""
        if let settings = loaded.site.uplink, loaded.site.remote != nil {
            do { gateway = try Uplink.gateway(settings, machineID: Uplink.machineID) } catch { return .failure(.uplink(error.description)) }
            loaded = RemoteSteering.overlay(loaded, directory: directory, gateway: gateway)
        }
        // Parsing freed what it used; give those pages back before the engine's tables are carved
        // out of the same heap, or the tables' untouched parts would stay resident.
        Process.releaseFreeMemory()
        let engine = EngineSetup.engine(for: loaded.site, board: loaded.board)
        // Before the log's conditions: the file's phones take the engine's first phone numbers.
        let phones = phones(loaded, engine)
        let start = AgentTime(monotonic: MonotonicClock.instant, utc: UTCTime(nanoseconds: Clock.realtimeNs()))
        guard case .success(let log) = EventLog.open(directory: directory, loaded: loaded, engine: engine, now: start.utc) else {
            return .failure(.locked)
        }
        let loop: LoopHousekeeping
        do { loop = try LoopHousekeeping() } catch { return .failure(.loop(error)) }
        let starter = ClientStarter(monitors: loaded.site.monitors, updates: loaded.site.updates)
        starter.restore(log)
        // The declared conditions now live in the engine; the parsed copy would only hold memory
        // (a SIGHUP reads the file again).
        loaded.site.monitors = []
        let outputs: Outputs
        let updates: LiveUpdates
        do {
            outputs = try Outputs.open(board: loaded.board, site: loaded.site, stateDirectory: directory, latched: log.restoredLatches,
                                       engine: engine, now: start)
            updates = try LiveUpdates(loaded: loaded, slots: loaded.site.capacity.subscribers, stateDirectory: directory)
        } catch {
            log.shutdown(now: start)
            return .failure(.gpio(error))
        }
        let gnss = GNSSSource(board: loaded.board, stateDirectory: directory, settings: updates.siteUpdater.settings,
                              health: loaded.site.health, now: start.monotonic)
        let bluetooth = BluetoothSource(board: loaded.board, stateDirectory: directory, tier: loaded.site.updates.accuracy,
                                        health: loaded.site.health, advertisement: loaded.site.advertising?.beacon, now: start.monotonic)
        bluetooth.phones = phones
        let control = ControlConnections(directory: directory, capacity: loaded.site.capacity.subscribers, privacy: loaded.site.fixPrivacy,
                                         access: loaded.accessPolicy, labels: loaded.placeLabels)
        let ranging = Ranging(slots: control.capacity)
        ranging.phones = phones
        var uplink: Uplink? = nil
        if let settings = loaded.site.uplink {
            // The log is the uplink's outbox: without one there is nothing durable to send from.
            guard log.isAvailable else {
                log.shutdown(now: start)
                return .failure(.uplink("[uplink] needs the log, and the state directory \(directory) cannot be written"))
            }
            log.uplinkBacklogLimit = loaded.site.log.retainBytes / 2
            log.startUplink()
            do {
                var remote: RemoteSteering? = nil
                if let remoteSettings = loaded.site.remote {
                    remote = try openRemote(remoteSettings, loaded, gateway: gateway, directory: directory, log: log, now: start)
                }
                uplink = try Uplink(settings, cursor: log.uplinkCursor, places: loaded.placeLabels, remote: remote, machineID: Uplink.machineID)
                uplink?.phones = phones.map { Unmanaged.passUnretained($0) }
            } catch {
                log.shutdown(now: start)
                return .failure(.uplink(error.description))
            }
        }
        return .success(Agent(loaded: loaded, engine: engine, loop: loop, gnss: gnss, bluetooth: bluetooth, log: log, outputs: outputs,
                              updates: updates, control: control, ranging: ranging, starter: starter, uplink: uplink))
    }

    // MARK: the loop

    /// Runs until SIGTERM or SIGINT; returns the exit status. The loop is meant never to end
    /// otherwise: only a signal, a failing poll(2) or a restart the fleet's configuration needs
    /// clears `running`.
    func run() -> Int32 {
        start()
        while loop.running {
            turn()
        }
        shutdown()
        return loop.restarting ? Agent.restartStatus : 0
    }

    /// The exit status of a stop to be started again (EX_TEMPFAIL): the service's
    /// `Restart=always` starts the agent again, which applies what a SIGHUP cannot.
    static let restartStatus: Int32 = 75

    /// Before the first turn: start-up's freed memory back to the kernel, systemd told.
    func start() {
        Process.releaseFreeMemory()
        let start = now()
        outputs.recordLevels(.restored) { log.appendGPIO($0, start) }
        loop.start(start, status: "monitoring \(engine.conditionCount) conditions")
        AgentLog.notice("locus \(LocusVersion.string): running: \(engine.conditionCount) conditions in \(engine.monitorNames.count) monitors, board \(loaded.board.name)")
    }

    func turn() {
        let start = now()
        gnss.openIfDue(start)
        bluetooth.openIfDue(start)
        gnss.writeReceiverQueue(start)
        poll.removeAll()
        forEachComponent { $0.register(in: &poll) }
        loop.check(poll)
        guard loop.wait(poll, until: nextDeadline(start), now: start) else { return }
        var now = self.now()
        precondition(now.monotonic >= start.monotonic, "the monotonic clock does not go back within a turn")
        if loop.service(poll) { reload() }
        gnss.read(poll, now)
        for index in 0..<gnss.fixCount { now = observe(gnss.fix(index), now) }
        if gnss.endRead(now) { updates.receiverRestarted(now) }
        gnss.checkHealth(now)
        if let line = gnss.takeLineRequest() { outputs.driveRadioLine(line.name, forMs: line.forMs, now) }
        bluetooth.read(poll, now)
        for index in 0..<bluetooth.sightingCount { engine.observe(bluetooth.sighting(index)) }
        if ranging.isActive { for index in 0..<bluetooth.sightingCount { ranging.observe(bluetooth.sighting(index)) } }
        if let uplink { for index in 0..<bluetooth.sightingCount { uplink.observe(bluetooth.sighting(index), now) } }
        bluetooth.checkAdapter(now)
        bluetooth.checkHealth(now, beaconsExpected: engine.beaconConditionCount > 0 || ranging.isActive)
        if let line = bluetooth.takeLineRequest() { outputs.driveRadioLine(line.name, forMs: line.forMs, now) }
        if updates.readMotion(poll, now, receiver: gnss.receiverState) { takeUpdates(now) }
        serveControl(now)
        engine.tick(now: now.utc)
        updates.tick(now, receiver: gnss.receiverState)
        takeUpdates(now)
        sendRanging(now)
        bluetooth.scanForRanging(ranging.isActive)
        handleEvents(now)
        starter.service(now, updateStreams: updates.streamCount) { monitor in (control.isOpen(monitor), log.consumerPosition(monitor)) }
        outputs.update(now) { log.appendGPIO($0, now) }
        if log.takeLevelsToState(now) { outputs.recordLevels(.restored) { log.appendGPIO($0, now) } }
        // The interval sync before the uplink: it publishes only what a sync made durable.
        log.housekeeping(now)
        uplink?.service(poll, now, log: log, engine: engine, outputs: outputs.plan.names)
        if let uplink, let remote = uplink.remote { serveRemote(uplink, remote, now) }
        control.catchUp(log)
        gnss.writeReceiverQueue(now)
        loop.housekeeping(now)
    }

    /// The loop's components, each once, in one order: every pass over their common surface
    /// (descriptors, register, deadlines, status, reload, shutdown) goes through this list, so a
    /// component added here takes part in all of them. The order is the order of registration, of
    /// `locus status` and of the end: the loop's own descriptors first (and systemd told it
    /// stops), the log last, so that what the others do as they stop can still be logged. Inlined
    /// with its closure, each call is a direct one (the idle turn's budget holds it so).
    @inline(__always)
    func forEachComponent(_ body: (any LoopComponent) -> Void) {
        body(loop)
        body(gnss)
        body(bluetooth)
        body(outputs)
        body(updates)
        body(control)
        body(ranging)
        body(starter)
        if let uplink { body(uplink) }
        body(log)
    }

    /// The turn's `now` on both clocks.
    func now() -> AgentTime {
        let monotonic = MonotonicClock.instant
        return AgentTime(monotonic: monotonic, utc: clock.now(monotonicNs: monotonic.nanoseconds, realtimeNs: Clock.realtimeNs()))
    }

    /// The earliest moment something must happen, or nil for "only when input arrives".
    private func nextDeadline(_ now: AgentTime) -> MonotonicInstant? {
        var next = NextDeadline(now: now)
        next.consider(engine.nextDeadline())
        forEachComponent { $0.deadlines(&next) }
        next.consider(uplink?.remote?.running?.endsAt)
        return next.earliest
    }

    // MARK: values between components

    /// A fix: it sets the agent's UTC clock, then the engine and the updaters see it. Returns the
    /// turn's `now` on the clock it set.
    private func observe(_ fix: Fix, _ now: AgentTime) -> AgentTime {
        guard let time = fix.time else { return now }
        let first = !clock.followsGNSS
        if let step = clock.anchor(fixNs: time.totalNanoseconds, monotonicNs: now.monotonic.nanoseconds, realtimeNs: Clock.realtimeNs()) {
            engine.clockStepped(byNs: step)
            ranging.clockStepped(byNs: step)
            let size = Quantity.describe(nanoseconds: abs(step))
            if first {
                AgentLog.info("locus: clock: following GNSS time from \(time.iso8601) (\(size) \(step < 0 ? "behind" : "ahead of") the system clock)")
            } else {
                AgentLog.warning("locus: clock: GNSS time jumped \(step < 0 ? "back" : "ahead") \(size) to \(time.iso8601) (receiver reset?)")
            }
        } else if first {
            AgentLog.info("locus: clock: following GNSS time from \(time.iso8601)")
        }
        let anchored = AgentTime(monotonic: now.monotonic, utc: clock.now(monotonicNs: now.monotonic.nanoseconds, realtimeNs: Clock.realtimeNs()))
        engine.observe(fix)
        let wasStationary = updates.siteUpdater.isStationary
        updates.observe(fix, anchored, receiver: gnss.receiverState, engine: engine)
        if wasStationary && !updates.siteUpdater.isStationary { starter.locationWanted(sequence: 0) }
        takeUpdates(anchored)
        return anchored
    }

    /// A visit of the site's updater: its record, and `[updates] start_socket`'s program wanted.
    private func visitFound(_ visit: Visit, _ now: AgentTime) {
        log.appendVisit(visit, now)
        starter.locationWanted(sequence: 0)
    }

    /// What the live updates produced: fix and visit records to the log, stream lines to their
    /// connections, orders to the receiver, the scan's timing to the Bluetooth source.
    private func takeUpdates(_ now: AgentTime) {
        while updates.siteUpdater.hasOutput, updates.takeSiteOutput(fix: { log.appendFix($0.pointee) }, visit: { visitFound($0, now) }) {}
        while let item = updates.nextItem() {
            switch item {
            case .fix(let fix): log.appendFix(fix)
            case .visit(let visit): visitFound(visit, now)
            case .stream(let slot, let line): if !control.sendStream(slot, line) { updates.endStream(slot) }
            case .reply(let slot, let line): control.sendReply(slot, line)
            case .fleetLocated(let detail): fleetLocated(detail, now)
            }
        }
        var orders = 0
        while let order = updates.nextReceiverOrder() {
            gnss.apply(order, now)
            orders += 1
        }
        precondition(orders <= RadioOrders.capacity, "the receiver's orders of one call fit the queue")
        if let settings = updates.takeScanSettings() { bluetooth.reconfigure(settings) }
    }

    /// Every pending event to the sinks in order: the log (with the latches it sets), the GPIO
    /// lines, the subscribers; then the engine is told it was handled. The live updates' batches
    /// go out first, so the log reads in the order things happened.
    private func handleEvents(_ now: AgentTime) {
        guard log.acceptsEvents(now), engine.hasPendingEvent() else { return }
        updates.flushForEvent(now)
        takeUpdates(now)
        // Bounded: each pass hands one event on, and the ring holds at most its capacity.
        var previous: UInt64 = 0
        while let pending = engine.oldestPendingEvent() {
            let waiting = engine.pendingEventCount
            precondition(waiting <= engine.eventCapacity, "pending events within the ring's capacity")
            guard let logged = log.appendEvent(pending, latching: outputs.latches(for: pending), waiting: waiting, now) else { return }
            precondition(logged.sequence > previous, "events are logged in increasing sequence numbers")
            previous = logged.sequence
            if outputs.apply(pending, now) { log.setLatched(outputs.latchedNames) }
            outputs.refresh(engine, now, pending: pending, cause: .level) { log.appendGPIO($0, now) }
            control.publish(logged.event, sequence: logged.sequence, log)
            starter.eventLogged(logged.event.monitor, sequence: logged.sequence)
            engine.acknowledgeOldest(adding: logged.added)
            precondition(engine.pendingEventCount < waiting, "a handled event leaves the ring")
        }
        precondition(engine.pendingEventCount == 0, "every pending event was handed on")
    }

    /// The control socket: new connections, output with room to go, each request answered.
    private func serveControl(_ now: AgentTime) {
        control.accept(poll)
        for connection in 0..<control.registeredCount {
            guard let slot = control.readySlot(connection, poll) else { continue }
            while let request = control.nextRequest(slot) { answer(request, now) }
            control.flush(slot)
        }
        var ended = 0
        while let slot = control.nextEndedStream() {
            updates.connectionEnded(slot, now)
            ranging.end(slot)
            takeUpdates(now)
            ended += 1
            precondition(ended <= control.capacity, "at most one ended stream a connection slot")
        }
    }

    /// One request, to its operation with the components it uses (and the connections, to
    /// answer on).
    private func answer(_ request: ControlConnections.Request, _ now: AgentTime) {
        typealias Operations = ControlOperations
        var changed = false
        var cause = LogPayload.GPIOCause.level
        switch request.operation {
        case .hello: Operations.hello(request, control, monitors: engine.monitorNames, persistence: log.isAvailable)
        case .status: control.reply(request) { line in status(now, into: &line) }
        case .identifiers(let monitor): Operations.identifiers(request, control, engine.identifiers(monitor: monitor))
        case .record(let monitor, let identifier): Operations.record(request, control, monitor, identifier, engine, log)
        case .records(let monitor): Operations.records(request, control, monitor, engine, log)
        case .add(let monitor, let identifier, let condition, let settings, let assuming):
            // The phones file as last loaded (a SIGHUP reads it again), not as at start.
            if case .phone(let phone) = condition, bluetooth.phones?.resolves(phone.name) != true {
                control.refuse(request, .notFound, "no phone '\(phone.name)' in the site's phones file ([phones] keys)")
                break
            }
            let entry = LogPayload.ConditionEntry(monitor: monitor, identifier: identifier, condition: condition, settings: settings,
                                                  assuming: assuming, fromSiteFile: false)
            changed = Operations.add(request, control, entry, engine, log, capacity: loaded.site.capacity.conditions, now)
        case .remove(let monitor, let identifier): changed = Operations.remove(request, control, monitor, identifier, engine, log, now)
        case .subscribe(let monitor, let after, let consumer): Operations.subscribe(request, control, monitor, after, consumer: consumer, log)
        case .open(let monitor): Operations.open(request, control, monitor, engine, log)
        case .ack(let monitor, let sequence): Operations.acknowledge(request, control, monitor, sequence, log, now)
        case .updates(let stream):
            Operations.updates(request, control, stream, updates)
        case .updatesStop: Operations.updatesStop(request, control, updates)
        case .gpioClear(let name):
            changed = Operations.gpioClear(request, control, name, outputs, log, now)
            cause = .latchCleared
        // MARK: beacon ranging
        case .range(let constraint): Operations.range(request, control, constraint, ranging, now)
        case .rangePhone(let name):
            guard bluetooth.phones?.resolves(name) == true, let number = engine.phoneNumber(name) else {
                control.refuse(request, .notFound, "no phone '\(name)' in the site's phones file ([phones] keys)")
                break
            }
            let identity = PhoneCondition.identity(number: number)
            Operations.range(request, control, BeaconIdentityConstraint(uuid: identity.uuid, major: identity.major, minor: identity.minor),
                             ranging, now)
        case .rangeStop: Operations.rangeStop(request, control, ranging)
        // MARK: single location request and visits
        case .locate(let accuracy, let maxAgeMs, let timeoutMs):
            Operations.locate(request, control, accuracy, maxAgeMs: maxAgeMs, timeoutMs: timeoutMs, updates, now, receiver: gnss.receiverState)
        case .visits(let sinceNs, let limit): Operations.visits(request, control, sinceNs: sinceNs, limit: limit, log)
        // MARK: geocoding
        case .reverseGeocode(let latitude, let longitude, let withinM, let scope):
            places.reverseGeocode(request, control, latitude: latitude, longitude: longitude, withinM: withinM, scope: scope)
        case .geocode(let name, let limit): places.geocode(request, control, name, limit: limit, near: updates.lastPosition)
        case .addAtPlace(let monitor, let identifier, let place, let radiusM, let settings, let assuming):
            guard let condition = places.circle(request, control, place, radiusM: radiusM) else { break }
            let entry = LogPayload.ConditionEntry(monitor: monitor, identifier: identifier, condition: condition, settings: settings,
                                                  assuming: assuming, fromSiteFile: false)
            changed = Operations.add(request, control, entry, engine, log, capacity: loaded.site.capacity.conditions, now)
        }
        if changed { outputs.refresh(engine, now, cause: cause) { log.appendGPIO($0, now) } }
        takeUpdates(now)
    }

    /// `locus status`: the loop's own members (the engine's among them), then each component's
    /// in the order of `forEachComponent`, then the uplink's backlog (it reads the log).
    private func status(_ now: AgentTime, into line: inout JSONWriter) {
        line.string("version", LocusVersion.string)
        line.string("board", loaded.board.name)
        line.string("time", now.utc.iso8601)
        line.boolean("clock_follows_gnss", clock.followsGNSS)
        line.beginObject("engine")
        line.integer("conditions", engine.conditionCount)
        line.integer("capacity", loaded.site.capacity.conditions)
        line.integer("pending_events", engine.pendingEventCount)
        line.integer("deferred_detections", engine.deferredDetections)
        line.integer("events", log.events)
        line.endObject()
        forEachComponent { $0.status(into: &line) }
        uplink?.backlogStatus(log, now: now, into: &line)
    }

    /// Beacon ranging: each connection's line when its second has come; one that cannot take
    /// it is hung up and its ranging ends.
    private func sendRanging(_ now: AgentTime) {
        while let (slot, line) = ranging.nextLine(now) {
            if !control.sendRanging(slot, line) { ranging.end(slot) }
        }
    }

    // MARK: SIGHUP and the end

    /// Reloads the site file: conditions it declares are added, replaced or removed (CLMonitor's
    /// rules, as at start), actions and privacy take effect at once. Capacities, the board and the
    /// log settings are fixed until restart; a change to them is reported. A file that does not
    /// check leaves everything as it was.
    private func reload() {
        loop.notifier.notify("RELOADING=1")
        defer { loop.notifier.notify("READY=1") }
        AgentLog.notice("locus: SIGHUP: reloading \(loaded.sitePath)")
        guard case .success(var fresh) = LoadedConfig.load(loaded.sitePath) else {
            return AgentLog.error("locus: reload: \(loaded.sitePath) has errors (above); keeping the running configuration")
        }
        if let remote = uplink?.remote { fresh = remote.overlay(fresh) }
        guard apply(fresh, self.now(), as: "reload") else { return }
        AgentLog.notice("locus: reloaded: \(engine.conditionCount) conditions, \(outputs.plan.actions.count) actions")
    }

    /// A checked configuration put in place between two turns (a SIGHUP's, or the fleet's): the
    /// conditions reconciled into the engine and the log, then every component reloaded and the
    /// lines refreshed. False, with nothing but the log's reason said, when the log refuses the
    /// conditions' changes. `what` heads the warnings about what waits for a restart.
    func apply(_ fresh: LoadedConfig, _ now: AgentTime, as what: String) -> Bool {
        guard log.reconcile(fresh.site, engine: engine, now: now) else { return false }
        for problem in loaded.changesAtRestart(fresh) { AgentLog.warning("locus: \(what): \(problem)") }
        if fresh.phones != nil || bluetooth.phones != nil {
            bluetooth.phones = Self.phones(fresh, engine)
            ranging.phones = bluetooth.phones
            // Held by the Bluetooth source, which keeps the phones as long as the uplink names them.
            uplink?.phones = bluetooth.phones.map { Unmanaged.passUnretained($0) }
        }
        forEachComponent { $0.reload(fresh, now: now) }
        outputs.refresh(engine, now, cause: .level) { log.appendGPIO($0, now) }
        return true
    }

    /// The phones file's keys ready to resolve, each phone that cannot be numbered said.
    static func phones(_ loaded: LoadedConfig, _ engine: MonitorEngine) -> PhoneResolution? {
        guard let keys = loaded.phones else { return nil }
        let phones = PhoneResolution(keys: keys, engine: engine)
        for name in phones.unnumbered {
            AgentLog.warning("locus: phone '\(name)' is not resolved: the names capacity.phones allows are taken until restart")
        }
        return phones
    }

    /// The end: what the loop logs as it stops first (the lines' safe levels, logged before the
    /// lines move to them; the uplink's delivered position, final since its goodbye reads nothing
    /// from the broker), then each component in the list's order, the log last with its stop
    /// record.
    func shutdown() {
        let now = self.now()
        stopRemote(now)
        outputs.recordLevels(.safe) { log.appendGPIO($0, now) }
        uplink?.commitAtShutdown(log, now: now)
        forEachComponent { $0.shutdown(now: now) }
        AgentLog.notice("locus: stopped: \(gnss.fixesDecoded) fixes, \(bluetooth.sightingsGathered) sightings, \(log.events) events")
    }
}
