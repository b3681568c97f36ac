import LocusCore
import LocusDevices

/// The control socket's sessions: the listeners (control.sock, and read.sock for clients that
/// may only read), one `ClientSlot` per connection, the requests read from each connection and
/// answered at once (none waits on I/O other than the log append a change needs), one function
/// per operation, and what goes out to subscribers and streams.
///
/// The loop reads requests with `nextRequest` and hands each operation to its function here,
/// with the components that operation needs; replies are rendered into one buffer and sent as
/// bytes (`ControlServer.send`). Each connection's grants (read, positions, change) are decided
/// at accept from its peer credentials and socket (`AccessPolicy`), and a request that needs a
/// grant the connection lacks is refused here (`ControlRequest.requiredGrant`).
final class ControlSessions: LoopComponent {
    /// Output buffer per connection: a subscriber that falls further behind than this catches
    /// up from the log; a reply larger than this cannot be sent (the connection is closed).
    static let outputBytes = 64 << 10

    /// A request read from a connection.
    struct Request {
        let slot: Int
        let id: Int64?
        let operation: ControlRequest
    }

    /// One connection's state beside its socket. `reset` is the one place it starts over.
    struct ClientSlot {
        /// Its subscription's place in the log, if it subscribed.
        var subscription: LogCursor? = nil
        /// The monitor it opened (CLMonitor: one open instance per name).
        var claim: FixedName? = nil
        /// It asked for updates: its stream ends with it.
        var streaming = false
        /// The stream of the connection that used this slot before has to be ended.
        var streamEnded = false
        /// It asked for beacon ranging: its ranging ends with it (through `streamEnded`).
        var ranging = false
        /// A location request of this connection is waiting (its reply comes later).
        var locating = false
        /// What the connection may do, decided at accept (and again on SIGHUP).
        var grants = AccessGrants()

        /// The connection ended (or a new one takes the slot): it starts over.
        mutating func reset() {
            subscription = nil
            claim = nil
            grants = []
            if streaming || ranging || locating { streamEnded = true }
            streaming = false
            ranging = false
            locating = false
        }
    }

    /// A connection registered this turn: its slot and its place in the poll set.
    struct Registration {
        var slot: Int
        var index: PollSet.Index?
    }

    /// nil: the socket could not be created (the agent runs without it, and said why).
    private let server: ControlServer?
    private var slots: [ClientSlot]
    private var privacy: SiteConfig.FixPrivacy
    /// Who may do what (the site's `[access]`, groups resolved).
    private var access: AccessPolicy
    /// Replies and subscribers' events, one line at a time.
    private var line = JSONWriter(capacity: ControlSessions.outputBytes)
    private var listenIndex: PollSet.Index? = nil
    private var readOnlyIndex: PollSet.Index? = nil
    /// The connections registered this turn (allocated once: a turn allocates nothing, and an
    /// idle agent's turn looks at no slot).
    private let registered: UnsafeMutableBufferPointer<Registration>
    /// Connections registered this turn, in `registered`.
    private(set) var registeredCount = 0
    /// Slots whose stream is to be ended (`nextEndedStream`).
    private var endedStreams = 0
    /// Replies larger than a connection's buffer (the connection was closed), and clients
    /// dismissed for not reading their events or updates, since start.
    private(set) var oversizedReplies = 0
    private(set) var dismissed = 0
    // MARK: geocoding (state)
    /// The place index with the site's defaults, for `reverse_geocode`, `geocode` and circles
    /// added around a place (nil: the site has no index).
    private let places: PlaceLabels?
    private let placeIndexPath: String
    /// `[geocoding] annotate`: events, records and visits carry the place nearest them.
    private let labels: PlaceLabels?
    private let search = PlaceNameSearch()
    /// A `geocode` reply's places (allocated once: `ControlProtocol.geocodeLimit`).
    private let candidates: UnsafeMutableBufferPointer<PlaceCandidate>

    /// Listens on STATE/control.sock and STATE/read.sock (`capacity` connections; none when 0).
    /// Last in the agent's start: the socket's appearance tells clients (and tests) it is set up.
    init(directory: String, capacity: Int, privacy: SiteConfig.FixPrivacy, access: AccessPolicy, config: LoadedConfig? = nil) {
        var server: ControlServer? = nil
        if capacity > 0 {
            let path = Paths.join(directory, "control.sock")
            do {
                server = try ControlServer(path: path, mode: 0o660, readOnlyPath: Paths.join(directory, "read.sock"), capacity: capacity,
                                           requestLimit: ControlProtocol.maximumRequestBytes, outputBytes: ControlSessions.outputBytes)
            } catch {
                AgentLog.warning("locus: control: cannot listen on \(path): \(error); 'locus monitor' and 'locus events' will work on the state directory only while the agent is stopped")
            }
        }
        self.server = server
        self.privacy = privacy
        self.access = access
        slots = Array(repeating: ClientSlot(), count: server?.capacity ?? 0)
        registered = .allocate(capacity: max(1, slots.count))
        registered.initialize(repeating: Registration(slot: 0, index: nil))
        // The places of the configuration the agent started with (its index stays mapped).
        places = config?.placeLookup
        placeIndexPath = config?.places?.path ?? ""
        labels = config?.placeLabels
        candidates = .allocate(capacity: ControlProtocol.geocodeLimit)
        candidates.initialize(repeating: PlaceCandidate(place: 0, distanceM: .nan))
    }

    deinit {
        registered.deallocate()
        candidates.deallocate()
    }

    /// Connection slots (0 without a socket).
    var capacity: Int { slots.count }

    // MARK: the loop's surface

    /// The two listeners and every connection.
    var maximumDescriptors: Int { 2 + slots.count }

    func register(in poll: inout PollSet) {
        registeredCount = 0
        guard let server else { return }
        server.startTurn()
        listenIndex = poll.add(server.listener)
        readOnlyIndex = poll.add(server.readOnlyListener)
        let registered = self.registered
        var count = 0
        server.forEachConnection { slot, descriptor, wantsWrite in
            registered[count] = Registration(slot: slot, index: poll.add(descriptor, write: wantsWrite))
            count += 1
        }
        registeredCount = count
    }

    func deadlines(_ next: inout NextDeadline) {}

    func status(into line: inout JSONWriter) {
        line.beginObject("control")
        var connections = 0, subscribers = 0
        for slot in slots.indices where server?.isConnected(slot) == true {
            connections += 1
            if slots[slot].subscription != nil { subscribers += 1 }
        }
        line.integer("connections", connections)
        line.integer("subscribers", subscribers)
        line.integer("capacity", slots.count)
        line.integer("oversized_replies", oversizedReplies)
        line.integer("dismissed", dismissed)
        clients(into: &line)
        line.endObject()
    }

    func reload(_ config: LoadedConfig, now: AgentTime) {
        privacy = config.site.fixPrivacy
        access = config.accessPolicy
        // Grants follow the new file at once, for connections already open too.
        for slot in slots.indices where server?.isConnected(slot) == true { decideGrants(slot) }
    }

    func shutdown(now: AgentTime) {}

    // MARK: connections and requests

    /// New connections on either listener; one beyond capacity is told so and closed.
    func accept(_ poll: borrowing PollSet) {
        guard let server else { return }
        if poll.readable(listenIndex) { accept(server, on: server.listener) }
        if poll.readable(readOnlyIndex), let listener = server.readOnlyListener { accept(server, on: listener) }
    }

    private func accept(_ server: ControlServer, on listener: Descriptor) {
        line.reset()
        ControlReply.error(nil, ControlError(.busy, "all \(slots.count) control connections are in use (capacity.subscribers)"), into: &line)
        // A connection the server closed by itself may have left its stream (and its tier).
        server.acceptWaiting(on: listener, busyLine: line.bytes) { slot in
            reset(slot)
            decideGrants(slot)
        }
    }

    /// Registered connection `connection` (`0..<registeredCount`): what it has queued is written
    /// if its socket has room; its slot when it has sent something (or hung up), else nil.
    func readySlot(_ connection: Int, _ poll: borrowing PollSet) -> Int? {
        let registration = registered[connection]
        if poll.writable(registration.index) { server?.flush(registration.slot) }
        return poll.readable(registration.index) ? registration.slot : nil
    }

    /// The next request a connection sent, decoded; protocol errors, refusals on read.sock, a
    /// request over the limit and a closed connection are dealt with here (nil: none left).
    func nextRequest(_ slot: Int) -> Request? {
        guard let server else { return nil }
        while true {
            switch server.nextLine(slot) {
            case .waiting:
                return nil
            case .closed:
                hangUp(slot)
                return nil
            case .tooLarge:
                line.reset()
                ControlReply.error(nil, ControlError(.tooLarge, "a request is at most \(server.requestLimit) bytes, newline included"), into: &line)
                _ = server.send(slot, line.bytes)
                server.closeWhenFlushed(slot)
                reset(slot)
                return nil
            case .line(let bytes):
                guard !bytes.isEmpty else { continue }
                // The simplest requests (a flat `locate`) are read without a parse's allocations.
                if let flat = FlatRequest.decode(bytes), slots[slot].grants.isSuperset(of: flat.request.requiredGrant) {
                    return Request(slot: slot, id: flat.id, operation: flat.request)
                }
                let (id, decoded) = ControlProtocol.decode(Array(bytes))
                switch decoded {
                case .failure(let error):
                    refuse(slot, id, error.code, error.message)
                case .success(let operation) where !slots[slot].grants.isSuperset(of: operation.requiredGrant):
                    refuse(slot, id, .permissionDenied, access.refusal(operation.requiredGrant, held: slots[slot].grants, socket: socket(slot)))
                case .success(let operation):
                    return Request(slot: slot, id: id, operation: operation)
                }
            }
        }
    }

    /// Sends what the connection's requests queued.
    func flush(_ slot: Int) { server?.flush(slot) }

    /// A slot whose connection ended with a stream (updates or ranging) open: the loop ends its
    /// streams (nil: none).
    func nextEndedStream() -> Int? {
        guard endedStreams > 0 else { return nil }
        for slot in slots.indices where slots[slot].streamEnded {
            slots[slot].streamEnded = false
            endedStreams -= 1
            return slot
        }
        preconditionFailure("an ended stream without its slot")
    }

    /// A connection ends: its subscription, its claim and its stream with it.
    private func hangUp(_ slot: Int) {
        server?.close(slot)
        reset(slot)
    }

    private func reset(_ slot: Int) {
        let ended = slots[slot].streamEnded
        slots[slot].reset()
        if slots[slot].streamEnded && !ended { endedStreams += 1 }
    }

    // MARK: replies

    private func begin(_ request: Request) {
        line.reset()
        ControlReply.ok(request.id, into: &line)
    }

    private func finish(_ request: Request) {
        ControlReply.end(into: &line)
        send(request.slot)
    }

    private func ok(_ request: Request, result: StaticString) {
        line.reset()
        ControlReply.ok(request.id, result: result, into: &line)
        send(request.slot)
    }

    private func refuse(_ slot: Int, _ id: Int64?, _ code: ControlError.Code, _ message: String) {
        line.reset()
        ControlReply.error(id, ControlError(code, message), into: &line)
        send(slot)
    }

    private func refuse(_ request: Request, _ code: ControlError.Code, _ message: String) {
        refuse(request.slot, request.id, code, message)
    }

    /// The line to the connection; one that cannot take it (its buffer full, or a reply larger
    /// than a buffer) is hung up.
    private func send(_ slot: Int) {
        guard let server else { return }
        if line.overflowed {
            oversizedReplies += 1
            AgentLog.warning("locus: control: a reply larger than \(ControlSessions.outputBytes) bytes; closing the connection (\(oversizedReplies) since start)")
        }
        if line.overflowed || !server.send(slot, line.bytes) { hangUp(slot) }
    }

    /// The last thing a connection that cannot keep up is told (if its buffer has room for it)
    /// before it is closed once what it has queued is written.
    private func dismiss(_ slot: Int, _ message: String) {
        guard let server else { return }
        dismissed += 1
        line.reset()
        ControlReply.error(nil, ControlError(.busy, message), into: &line)
        _ = server.send(slot, line.bytes)
        server.closeWhenFlushed(slot)
    }

    // MARK: operations that read

    func hello(_ request: Request, monitors: [FixedName], persistence: Bool) {
        begin(request)
        line.integer("protocol", ControlProtocol.version)
        line.string("version", LocusVersion.string)
        ControlReply.names("monitors", monitors, into: &line)
        line.boolean("persistence", persistence)
        grantNames("access", slots[request.slot].grants)
        finish(request)
    }

    /// `status`: the members `body` writes (the loop's and every component's).
    func status(_ request: Request, _ body: (inout JSONWriter) -> Void) {
        begin(request)
        body(&line)
        finish(request)
    }

    func identifiers(_ request: Request, _ identifiers: [FixedName]) {
        begin(request)
        ControlReply.names("identifiers", identifiers, into: &line)
        finish(request)
    }

    func record(_ request: Request, _ monitor: FixedName, _ identifier: FixedName, _ engine: MonitorEngine, _ log: EventLog) {
        guard var record = engine.record(monitor: monitor, identifier: identifier) else {
            return refuse(request, .notFound, "no condition '\(identifier)' in monitor '\(monitor)'")
        }
        if slots[request.slot].claim == monitor { record = consumerViews(monitor, [(identifier, record)], log)[0].1 }
        begin(request)
        line.key("record")
        ControlReply.record(identifier, record, privacy, places: labels, into: &line)
        finish(request)
    }

    func records(_ request: Request, _ monitor: FixedName, _ engine: MonitorEngine, _ log: EventLog) {
        var records: [(FixedName, MonitorEngine.Record)] = []
        for identifier in engine.identifiers(monitor: monitor) {
            if let record = engine.record(monitor: monitor, identifier: identifier) { records.append((identifier, record)) }
        }
        if slots[request.slot].claim == monitor { records = consumerViews(monitor, records, log) }
        begin(request)
        line.beginArray("records")
        for (identifier, record) in records { ControlReply.record(identifier, record, privacy, places: labels, into: &line) }
        line.endArray()
        finish(request)
    }

    /// CLMonitor's rule for the connection that opened `monitor`: an event is a record's
    /// lastEvent only once the consumer took it. A record with events the consumer has not taken
    /// shows the newest one it did take (read back from the log), or, if it took none, its
    /// assumed state at the date it was added. Without a log every event counts as taken.
    private func consumerViews(_ monitor: FixedName, _ records: [(FixedName, MonitorEngine.Record)], _ log: EventLog)
        -> [(FixedName, MonitorEngine.Record)] {
        let cursor = log.consumerPosition(monitor)
        guard log.isAvailable, cursor < log.newest else { return records }
        var untaken: [FixedName] = []
        var taken: [(FixedName, MonitorEvent)] = []
        do {
            try log.forEachEvent(after: cursor) { _, event in
                if event.monitor == monitor && !untaken.contains(event.identifier) { untaken.append(event.identifier) }
                return true
            }
            guard !untaken.isEmpty else { return records }
            try log.forEachEvent(after: 0) { sequence, event in
                guard sequence <= cursor else { return false }
                if event.monitor == monitor && untaken.contains(event.identifier) { Persistence.set(&taken, event.identifier, event) }
                return true
            }
        } catch {
            AgentLog.warning("locus: control: reading the log for a consumer's records: \(error)")
            return records
        }
        return records.map { identifier, record in
            guard untaken.contains(identifier) else { return (identifier, record) }
            var view = record
            if let event = taken.first(where: { $0.0 == identifier })?.1 {
                view.lastEvent = event
            } else {
                view.lastEvent.state = record.assumed
                view.lastEvent.refinement = nil
                view.lastEvent.diagnostics = EventDiagnostics()
            }
            return (identifier, view)
        }
    }

    // MARK: operations that change conditions and outputs (true: the loop refreshes the outputs)

    func add(_ request: Request, _ monitor: FixedName, _ identifier: FixedName, _ condition: Condition, _ settings: ConditionSettings,
             _ assuming: ConditionState, _ engine: MonitorEngine, _ log: EventLog, capacity: Int, _ now: AgentTime) -> Bool {
        let previous = engine.record(monitor: monitor, identifier: identifier)
        let result = engine.add(monitor: monitor, identifier: identifier, condition: condition, settings: settings,
                                assuming: assuming == .unknown ? nil : assuming, fromSiteFile: false, now: now.utc)
        switch result {
        case .limitExceeded:
            refuse(request, .conditionLimitExceeded, "conditionLimitExceeded: all \(capacity) condition slots are in use (capacity.conditions; takes effect at restart)")
            return false
        case .monitorLimitExceeded:
            refuse(request, .conditionLimitExceeded, "conditionLimitExceeded: too many monitors")
            return false
        case .added, .replaced:
            break
        }
        let entry = LogPayload.ConditionEntry(monitor: monitor, identifier: identifier, condition: condition, settings: settings,
                                              assuming: assuming, fromSiteFile: false)
        do { try log.appendConditionAdded(entry, now) } catch {
            // Not logged, so not done: put the record back as it was.
            engine.remove(monitor: monitor, identifier: identifier)
            if let previous {
                engine.add(monitor: monitor, identifier: identifier, condition: previous.condition, settings: previous.settings,
                           assuming: previous.assumed == .unknown ? nil : previous.assumed, fromSiteFile: previous.fromSiteFile, now: now.utc)
                engine.restore(previous.lastEvent)
            }
            refuse(request, .unavailable, "the change could not be logged: \(error)")
            return false
        }
        AgentLog.info("locus: control: \(result == .added ? "added" : "replaced") \(monitor)/\(identifier)")
        ok(request, result: result == .added ? "added" : "replaced")
        return true
    }

    func remove(_ request: Request, _ monitor: FixedName, _ identifier: FixedName, _ engine: MonitorEngine, _ log: EventLog,
                _ now: AgentTime) -> Bool {
        guard engine.record(monitor: monitor, identifier: identifier) != nil else {
            refuse(request, .notFound, "no condition '\(identifier)' in monitor '\(monitor)'")
            return false
        }
        do { try log.appendConditionRemoved(monitor, identifier, now) } catch {
            refuse(request, .unavailable, "the removal could not be logged: \(error)")
            return false
        }
        engine.remove(monitor: monitor, identifier: identifier)
        AgentLog.info("locus: control: removed \(monitor)/\(identifier)")
        ok(request, result: "removed")
        return true
    }

    func gpioClear(_ request: Request, _ name: FixedName, _ outputs: Outputs, _ log: EventLog, _ now: AgentTime) -> Bool {
        guard let index = outputs.index(of: name) else {
            refuse(request, .notFound, "no GPIO output '\(name)' (the board's outputs: \(ControlReply.list(outputs.plan.names)))")
            return false
        }
        guard outputs.isLatched(index) else {
            ok(request, result: "not latched")
            return false
        }
        do { try log.appendLatchCleared(name, now) } catch {
            refuse(request, .unavailable, "the clear could not be logged: \(error)")
            return false
        }
        outputs.clearLatch(index)
        log.setLatched(outputs.latchedNames)
        AgentLog.info("locus: control: latch \(name) cleared")
        ok(request, result: "cleared")
        return true
    }

    // MARK: subscribers and consumers

    func subscribe(_ request: Request, _ monitor: FixedName?, _ after: UInt64?, consumer: Bool, _ log: EventLog) {
        var after = after
        if consumer, let monitor {
            guard slots[request.slot].claim == monitor else {
                return refuse(request, .badRequest, "open monitor '\(monitor)' on this connection before subscribing as its consumer")
            }
            after = log.consumerPosition(monitor)
        }
        guard let cursor = log.cursor(monitor: monitor, after: after) else {
            return refuse(request, .unavailable, "no log (persistenceUnavailable): only new events can be delivered; subscribe without after_seq")
        }
        slots[request.slot].subscription = cursor
        begin(request)
        line.integer("last_seq", log.newest)
        if consumer { line.integer("after_seq", after ?? log.newest) }
        finish(request)
    }

    func open(_ request: Request, _ monitor: FixedName, _ engine: MonitorEngine, _ log: EventLog) {
        // A claim lasts as long as its connection (a slot closed by a failed write keeps a stale one).
        if let holder = slots.indices.first(where: { slots[$0].claim == monitor && server?.isConnected($0) == true }), holder != request.slot {
            return refuse(request, .inUse, "monitor '\(monitor)' is already open in another client (one open instance per name); close it first")
        }
        slots[request.slot].claim = monitor
        begin(request)
        line.integer("consumer_seq", log.consumerPosition(monitor))
        ControlReply.names("identifiers", engine.identifiers(monitor: monitor), into: &line)
        finish(request)
    }

    func acknowledge(_ request: Request, _ monitor: FixedName, _ sequence: UInt64, _ log: EventLog, _ now: AgentTime) {
        guard slots[request.slot].claim == monitor else {
            return refuse(request, .badRequest, "open monitor '\(monitor)' on this connection before acknowledging its events")
        }
        let position = log.consumerPosition(monitor)
        let newest = log.newest
        guard sequence <= newest else { return refuse(request, .badArgument, "no event \(sequence) yet (the newest record is \(newest))") }
        if sequence > position {
            do { try log.acknowledge(monitor, sequence, now) } catch {
                return refuse(request, .unavailable, "the acknowledgement could not be logged: \(error)")
            }
        }
        begin(request)
        line.integer("consumer_seq", max(position, sequence))
        finish(request)
    }

    /// A logged event to every subscriber that keeps up; one that cannot take it reads it from
    /// the log later (or, without a log, is told and hung up: events cannot be replayed).
    func publish(_ event: MonitorEvent, sequence: UInt64, _ log: EventLog) {
        guard let server else { return }
        var rendered = false
        for slot in slots.indices {
            guard var cursor = slots[slot].subscription, !cursor.behind else { continue }
            guard cursor.wants(event) else {
                cursor.took(sequence)
                slots[slot].subscription = cursor
                continue
            }
            if !rendered {
                line.reset()
                ControlReply.event(event, sequence: sequence, places: labels, into: &line)
                rendered = true
            }
            if server.send(slot, line.bytes) {
                cursor.took(sequence)
                slots[slot].subscription = cursor
                server.flush(slot)
            } else if log.isAvailable {
                // Too slow to keep up: the log has the event; read it from there when there is room.
                cursor.fellBehind()
                slots[slot].subscription = cursor
            } else {
                dismiss(slot, "events came faster than this client read them, and without a log they cannot be replayed; subscribe again")
                slots[slot].subscription = nil
                rendered = false
            }
        }
    }

    /// Subscribers that are behind get events from the log while their output has room, once
    /// they have read everything queued (a stuck client costs no log scans).
    func catchUp(_ log: EventLog) {
        guard let server, log.isAvailable else { return }
        for connection in 0..<registeredCount {
            let slot = registered[connection].slot
            guard var cursor = slots[slot].subscription, cursor.behind else { continue }
            guard server.isConnected(slot) else {
                slots[slot].subscription = nil
                continue
            }
            guard !server.wantsWrite(slot) else { continue }
            _ = log.read(&cursor) { sequence, event in
                line.reset()
                ControlReply.event(PrivacyFilter.event(event, privacy), sequence: sequence, places: labels, into: &line)
                return server.send(slot, line.bytes)
            }
            slots[slot].subscription = cursor
            server.flush(slot)
        }
    }

    // MARK: live updates

    func updates(_ request: Request, _ preset: LivePreset?, _ accuracy: AccuracyTier?, significantChangeM: Double?, _ updates: LiveUpdates) {
        let (chosenPreset, chosenTier, radios) = updates.startStream(request.slot, preset: preset, accuracy: accuracy,
                                                                     significantChangeM: significantChangeM)
        slots[request.slot].streaming = true
        begin(request)
        line.string("preset", chosenPreset.description)
        line.string("accuracy", chosenTier.description)
        line.string("radios", radios.description)
        line.boolean("coarse", privacy == .coarse)
        if let significantChangeM { line.number("significant_change_m", significantChangeM, decimals: 1) }
        finish(request)
    }

    func updatesStop(_ request: Request, _ updates: LiveUpdates) {
        updates.endStream(request.slot)
        slots[request.slot].streaming = false
        ok(request, result: "stopped")
    }

    /// A stream's lines to its connection. False when they do not fit (nil: more than a buffer):
    /// updates are not replayable, so the client is told, hung up, and the loop ends the stream.
    func sendStream(_ slot: Int, _ bytes: UnsafeRawBufferPointer?) -> Bool {
        guard let server else { return false }
        if let bytes, server.send(slot, bytes) {
            server.flush(slot)
            return true
        }
        dismiss(slot, "updates came faster than this client read them; request updates again")
        slots[slot].streaming = false
        return false
    }

    // MARK: beacon ranging

    /// `range`: this connection ranges beacons matching `constraint` (a second `range` replaces
    /// the constraint); a line a second follows.
    func range(_ request: Request, _ constraint: BeaconIdentityConstraint, _ ranging: Ranging, _ now: AgentTime) {
        ranging.start(request.slot, constraint, now)
        slots[request.slot].ranging = true
        begin(request)
        line.key("constraint")
        RangingJSON.constraint(constraint, into: &line)
        line.integer("interval_ms", Ranging.intervalNs / 1_000_000)
        line.integer("beacons_per_line", Ranging.beaconsPerLine)
        line.integer("silence_ms", BeaconRanger.silenceMs)
        finish(request)
    }

    func rangeStop(_ request: Request, _ ranging: Ranging) {
        ranging.end(request.slot)
        slots[request.slot].ranging = false
        ok(request, result: "stopped")
    }

    /// A ranging line to its connection. False when it does not fit: a client that does not
    /// read its lines is told, hung up, and the loop ends its ranging.
    func sendRanging(_ slot: Int, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let server else { return false }
        if server.send(slot, bytes) {
            server.flush(slot)
            return true
        }
        dismiss(slot, "ranging lines came faster than this client read them; range again")
        slots[slot].ranging = false
        return false
    }
    // MARK: single location request

    /// `locate`: answered now (the last fix is recent and accurate enough) or when the live
    /// updates have a fix or reach the timeout (`sendReply`). Positions follow `[privacy]`.
    func locate(_ request: Request, _ accuracy: AccuracyTier?, maxAgeMs: Int64, timeoutMs: Int64, _ updates: LiveUpdates,
                _ now: AgentTime, receiver: ReceiverState) {
        guard privacy != .none else {
            return refuse(request, .permissionDenied, "this site does not give out positions ([privacy] fixes = \"none\")")
        }
        switch updates.locate(request.slot, id: request.id, accuracy: accuracy, maxAgeMs: maxAgeMs, timeoutMs: timeoutMs, now, receiver: receiver) {
        case .answered(let fix, let ageMs):
            line.reset()
            ControlReply.located(request.id, PrivacyFilter.shownFix(fix, privacy), ageMs: ageMs, accuracyLimited: false, places: labels,
                                 into: &line)
            send(request.slot)
        case .waiting:
            slots[request.slot].locating = true
        case .busy:
            refuse(request, .busy, "this connection has a location request waiting already; wait for its reply (or use another connection)")
        }
    }

    /// The reply to a location request that waited; a connection that cannot take it is hung up.
    func sendReply(_ slot: Int, _ bytes: UnsafeRawBufferPointer) {
        guard let server, slots[slot].locating else { return }
        slots[slot].locating = false
        if server.send(slot, bytes) { server.flush(slot) } else { hangUp(slot) }
    }

    // MARK: visits

    /// `visits`: the log's visit records (arrivals and departures) from `sinceNs` on, the newest
    /// `limit`, oldest first, each with its log sequence number.
    func visits(_ request: Request, sinceNs: Int64?, limit: Int, _ log: EventLog) {
        guard privacy != .none else {
            return refuse(request, .permissionDenied, "this site does not give out positions ([privacy] fixes = \"none\")")
        }
        var found: [(UInt64, Visit)] = []
        found.reserveCapacity(limit)
        do {
            try log.forEachVisit { sequence, visit in
                if let sinceNs, (visit.departure ?? visit.arrival).totalNanoseconds < sinceNs { return }
                if found.count == limit { found.removeFirst() }
                found.append((sequence, visit))
            }
        } catch {
            return refuse(request, .unavailable, "the log could not be read: \(error)")
        }
        begin(request)
        line.beginArray("visits")
        for (sequence, visit) in found { ControlReply.visitRecord(visit, sequence: sequence, places: labels, into: &line) }
        line.endArray()
        finish(request)
    }
}

// MARK: geocoding

extension ControlSessions {
    static let noPlaceIndex = "no place index: add [geocoding] to the site file"

    /// `reverse_geocode`: the place nearest a point, within `withinM` among `scope`'s places (the
    /// site's `[geocoding]` when the request does not say), or `"place": null`.
    func reverseGeocode(_ request: Request, latitude: Double, longitude: Double, withinM: Double?, scope: PlaceScope?) {
        guard let places else { return refuse(request, .unavailable, Self.noPlaceIndex) }
        let match = places.index.nearest(to: GeoPoint(latitude: latitude, longitude: longitude), within: withinM ?? places.maximumDistanceM,
                                         scope: scope ?? places.scope)
        line.reset()
        ControlReply.place(request.id, match, in: places.index, into: &line)
        send(request.slot)
    }

    /// `geocode`: the places a name names, the site's first, then by population, then by
    /// nearness to `near` (the last fix as clients may see it), the best `limit`.
    func geocode(_ request: Request, _ name: String, limit: Int, near: GeoPoint?) {
        guard let places else { return refuse(request, .unavailable, Self.noPlaceIndex) }
        let room = UnsafeMutableBufferPointer(rebasing: candidates[0..<min(limit, candidates.count)])
        var text = name
        let result = text.withUTF8 { bytes in search.search(UnsafeRawBufferPointer(bytes), in: places.index, near: near, into: room) }
        if let problem = result.problem { return refuse(request, .badArgument, "'name' is \(problem)") }
        line.reset()
        ControlReply.places(request.id, total: result.total, UnsafeMutableBufferPointer(rebasing: room[0..<result.written]), in: places.index,
                            into: &line)
        send(request.slot)
    }

    /// The circle of an `add` centred on a place, found as the site file's are; nil when the
    /// name names no place or several (refused with the nearest spellings or the candidates).
    func placeCircle(_ request: Request, _ name: String, radiusM: Double) -> Condition? {
        guard let places else {
            refuse(request, .unavailable, Self.noPlaceIndex)
            return nil
        }
        let resolution = places.index.resolve(name, search: search)
        guard case .found(let place) = resolution else {
            let problem = resolution.problem(name, index: places.index, indexPath: placeIndexPath, search: search) ?? ""
            let code: ControlError.Code
            if case .notFound = resolution { code = .notFound } else { code = .badArgument }
            refuse(request, code, "'circle.place' \"\(name)\" \(problem)")
            return nil
        }
        let record = places.index.record(place)
        AgentLog.info("locus: control: place \"\(name)\" is \(places.index.displayName(place)) (\(record.latitude), \(record.longitude))")
        return .circle(CircularGeographicCondition(latitude: record.latitude, longitude: record.longitude, radiusM: radiusM))
    }
}

// MARK: access levels

extension ControlSessions {
    /// Whether a connection has `monitor` open (its consumer, CLMonitor's one open instance).
    func isOpen(_ monitor: FixedName) -> Bool {
        guard let server else { return false }
        for slot in slots.indices where slots[slot].claim == monitor && server.isConnected(slot) { return true }
        return false
    }

    private func socket(_ slot: Int) -> ControlSocket { server?.isReadOnly(slot) == true ? .readOnly : .control }

    /// The connection's grants from its credentials and socket.
    private func decideGrants(_ slot: Int) {
        guard let server else { return }
        let peer = server.peer(slot)
        slots[slot].grants = access.grants(user: peer.user, group: peer.group, groups: peer.groups, socket: socket(slot))
    }

    private func grantNames(_ key: StaticString, _ grants: AccessGrants) {
        line.beginArray(key)
        for (_, grant) in AccessGrants.names where grants.contains(grant) { line.string(grant.name) }
        line.endArray()
    }

    /// `status`'s `control.clients`: each connection, who it is, what it may do and what it does.
    /// (User names are looked up here, for a status request, not at accept.)
    private func clients(into line: inout JSONWriter) {
        guard let server else { return }
        line.beginArray("clients")
        for slot in slots.indices where server.isConnected(slot) {
            let peer = server.peer(slot)
            let client = slots[slot]
            line.beginObject()
            line.integer("slot", slot)
            line.string("socket", socket(slot).fileName)
            line.integer("pid", Int(peer.pid))
            line.integer("uid", Int64(peer.user))
            if let name = Accounts.userName(peer.user) { line.string("user", name) }
            line.integer("gid", Int64(peer.group))
            if let name = Accounts.groupName(peer.group) { line.string("group", name) }
            line.beginArray("access")
            for (_, grant) in AccessGrants.names where client.grants.contains(grant) { line.string(grant.name) }
            line.endArray()
            if let claim = client.claim { line.string("consumer_of", claim) }
            if let subscription = client.subscription {
                if let monitor = subscription.monitor { line.string("subscribed", monitor) } else { line.string("subscribed", "*") }
            }
            if client.streaming { line.boolean("updates", true) }
            line.endObject()
        }
        line.endArray()
    }
}
