import LocusCore
import LocusDevices

/// The control protocol's operations, one function per request kind (docs/control-protocol.md).
/// Each is a function of the request and only what it uses: the components it reads or changes
/// are its arguments, passed by the loop (`Agent.answer`), and `connections` is where it answers
/// and keeps what the connection does (its subscription, its claim, its streams). None keeps
/// state of its own and none waits on I/O other than the log append a change needs.
///
/// A change is logged before it is answered, and one that cannot be logged is not made
/// (`unavailable`). The operations that change conditions or outputs return true when they did:
/// the loop then refreshes the GPIO lines.
enum ControlOperations {
    typealias Request = ControlConnections.Request

    static let noPositions = "this site does not give out positions ([privacy] fixes = \"none\")"

    // MARK: operations that read

    static func hello(_ request: Request, _ connections: ControlConnections, monitors: [FixedName], persistence: Bool) {
        let grants = connections[request.slot].grants
        connections.reply(request) { line in
            line.integer("protocol", ControlProtocol.version)
            line.string("version", LocusVersion.string)
            ControlReply.names("monitors", monitors, into: &line)
            line.boolean("persistence", persistence)
            line.beginArray("access")
            for (_, grant) in AccessGrants.names where grants.contains(grant) { line.string(grant.name) }
            line.endArray()
        }
    }

    static func identifiers(_ request: Request, _ connections: ControlConnections, _ identifiers: [FixedName]) {
        connections.reply(request) { line in ControlReply.names("identifiers", identifiers, into: &line) }
    }

    static func record(_ request: Request, _ connections: ControlConnections, _ monitor: FixedName, _ identifier: FixedName,
                       _ engine: MonitorEngine, _ log: EventLog) {
        guard var record = engine.record(monitor: monitor, identifier: identifier) else {
            return connections.refuse(request, .notFound, "no condition '\(identifier)' in monitor '\(monitor)'")
        }
        if connections[request.slot].claim == monitor { record = consumerViews(monitor, [(identifier, record)], log)[0].1 }
        let (privacy, labels) = (connections.privacy, connections.labels)
        connections.reply(request) { line in
            line.key("record")
            ControlReply.record(identifier, record, privacy, places: labels, into: &line)
        }
    }

    static func records(_ request: Request, _ connections: ControlConnections, _ monitor: FixedName, _ engine: MonitorEngine,
                        _ log: EventLog) {
        var records: [(FixedName, MonitorEngine.Record)] = []
        for identifier in engine.identifiers(monitor: monitor) {
            if let record = engine.record(monitor: monitor, identifier: identifier) { records.append((identifier, record)) }
        }
        if connections[request.slot].claim == monitor { records = consumerViews(monitor, records, log) }
        let (privacy, labels) = (connections.privacy, connections.labels)
        connections.reply(request) { line in
            line.beginArray("records")
            for (identifier, record) in records { ControlReply.record(identifier, record, privacy, places: labels, into: &line) }
            line.endArray()
        }
    }

    /// CLMonitor's rule for the connection that opened `monitor`: an event is a record's
    /// lastEvent only once the consumer took it. A record with events the consumer has not taken
    /// shows the newest one it did take (read back from the log), or, if it took none, its
    /// assumed state at the date it was added. Without a log every event counts as taken.
    private static func consumerViews(_ monitor: FixedName, _ records: [(FixedName, MonitorEngine.Record)], _ log: EventLog)
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

    /// `visits`: the log's visit records (arrivals and departures) from `sinceNs` on, the newest
    /// `limit`, oldest first, each with its log sequence number.
    static func visits(_ request: Request, _ connections: ControlConnections, sinceNs: Int64?, limit: Int, _ log: EventLog) {
        guard connections.privacy != .none else { return connections.refuse(request, .permissionDenied, noPositions) }
        var found: [(UInt64, Visit)] = []
        found.reserveCapacity(limit)
        do {
            try log.forEachVisit { sequence, visit in
                if let sinceNs, (visit.departure ?? visit.arrival).totalNanoseconds < sinceNs { return }
                if found.count == limit { found.removeFirst() }
                found.append((sequence, visit))
            }
        } catch {
            return connections.refuse(request, .unavailable, "the log could not be read: \(error)")
        }
        let labels = connections.labels
        connections.reply(request) { line in
            line.beginArray("visits")
            for (sequence, visit) in found { ControlReply.visitRecord(visit, sequence: sequence, places: labels, into: &line) }
            line.endArray()
        }
    }

    // MARK: operations that change conditions and outputs (true: the loop refreshes the outputs)

    /// `add` (and `add` around a place, once `PlaceQueries` found its circle): the condition into
    /// the engine and the log together (`EventLog.addCondition`, which puts the engine back when
    /// the log cannot take it).
    static func add(_ request: Request, _ connections: ControlConnections, _ entry: LogPayload.ConditionEntry, _ engine: MonitorEngine,
                    _ log: EventLog, capacity: Int, _ now: AgentTime) -> Bool {
        switch log.addCondition(entry, to: engine, now) {
        case .success(.limitExceeded):
            connections.refuse(request, .conditionLimitExceeded,
                               "conditionLimitExceeded: all \(capacity) condition slots are in use (capacity.conditions; takes effect at restart)")
            return false
        case .success(.monitorLimitExceeded):
            connections.refuse(request, .conditionLimitExceeded, "conditionLimitExceeded: too many monitors")
            return false
        case .failure(let error):
            connections.refuse(request, .unavailable, "the change could not be logged: \(error)")
            return false
        case .success(let result):
            AgentLog.info("locus: control: \(result == .added ? "added" : "replaced") \(entry.monitor)/\(entry.identifier)")
            connections.ok(request, result: result == .added ? "added" : "replaced")
            return true
        }
    }

    static func remove(_ request: Request, _ connections: ControlConnections, _ monitor: FixedName, _ identifier: FixedName,
                       _ engine: MonitorEngine, _ log: EventLog, _ now: AgentTime) -> Bool {
        guard engine.record(monitor: monitor, identifier: identifier) != nil else {
            connections.refuse(request, .notFound, "no condition '\(identifier)' in monitor '\(monitor)'")
            return false
        }
        do { try log.removeCondition(monitor, identifier, from: engine, now) } catch {
            connections.refuse(request, .unavailable, "the removal could not be logged: \(error)")
            return false
        }
        AgentLog.info("locus: control: removed \(monitor)/\(identifier)")
        connections.ok(request, result: "removed")
        return true
    }

    static func gpioClear(_ request: Request, _ connections: ControlConnections, _ name: FixedName, _ outputs: Outputs, _ log: EventLog,
                          _ now: AgentTime) -> Bool {
        guard let index = outputs.index(of: name) else {
            connections.refuse(request, .notFound, "no GPIO output '\(name)' (the board's outputs: \(ControlReply.list(outputs.plan.names)))")
            return false
        }
        guard outputs.isLatched(index) else {
            connections.ok(request, result: "not latched")
            return false
        }
        do { try log.appendLatch(name, set: false, level: outputs.level(index, latched: false, now), now) } catch {
            connections.refuse(request, .unavailable, "the clear could not be logged: \(error)")
            return false
        }
        outputs.setLatch(index, false)
        log.setLatched(outputs.latchedNames)
        AgentLog.info("locus: control: latch \(name) cleared")
        connections.ok(request, result: "cleared")
        return true
    }

    // MARK: subscribers and consumers

    static func subscribe(_ request: Request, _ connections: ControlConnections, _ monitor: FixedName?, _ after: UInt64?, consumer: Bool,
                          _ log: EventLog) {
        var after = after
        if consumer, let monitor {
            guard connections[request.slot].claim == monitor else {
                return connections.refuse(request, .badRequest, "open monitor '\(monitor)' on this connection before subscribing as its consumer")
            }
            after = log.consumerPosition(monitor)
        }
        guard let cursor = log.cursor(monitor: monitor, after: after) else {
            return connections.refuse(request, .unavailable,
                                      "no log (persistenceUnavailable): only new events can be delivered; subscribe without after_seq")
        }
        connections[request.slot].subscription = cursor
        let newest = log.newest
        connections.reply(request) { line in
            line.integer("last_seq", newest)
            if consumer { line.integer("after_seq", after ?? newest) }
        }
    }

    static func open(_ request: Request, _ connections: ControlConnections, _ monitor: FixedName, _ engine: MonitorEngine, _ log: EventLog) {
        if let holder = connections.holder(of: monitor), holder != request.slot {
            return connections.refuse(request, .inUse,
                                      "monitor '\(monitor)' is already open in another client (one open instance per name); close it first")
        }
        connections[request.slot].claim = monitor
        let position = log.consumerPosition(monitor)
        let identifiers = engine.identifiers(monitor: monitor)
        connections.reply(request) { line in
            line.integer("consumer_seq", position)
            ControlReply.names("identifiers", identifiers, into: &line)
        }
    }

    static func acknowledge(_ request: Request, _ connections: ControlConnections, _ monitor: FixedName, _ sequence: UInt64,
                            _ log: EventLog, _ now: AgentTime) {
        guard connections[request.slot].claim == monitor else {
            return connections.refuse(request, .badRequest, "open monitor '\(monitor)' on this connection before acknowledging its events")
        }
        let position = log.consumerPosition(monitor)
        let newest = log.newest
        guard sequence <= newest else {
            return connections.refuse(request, .badArgument, "no event \(sequence) yet (the newest record is \(newest))")
        }
        if sequence > position {
            do { try log.acknowledge(monitor, sequence, now) } catch {
                return connections.refuse(request, .unavailable, "the acknowledgement could not be logged: \(error)")
            }
        }
        connections.reply(request) { line in line.integer("consumer_seq", max(position, sequence)) }
    }

    // MARK: live updates

    static func updates(_ request: Request, _ connections: ControlConnections, _ stream: UpdateStreamRequest, _ updates: LiveUpdates) {
        if let batchCount = stream.batchCount, batchCount > updates.streamBatchCapacity {
            return connections.refuse(request, .badArgument, "'batch_count' is at most \(updates.streamBatchCapacity) on this site")
        }
        let (settings, radios) = updates.startStream(request.slot, stream)
        connections[request.slot].streaming = true
        let coarse = connections.privacy == .coarse
        connections.reply(request) { line in
            line.string("preset", settings.configuration.preset.description)
            line.string("accuracy", settings.tier.tier.description)
            line.string("radios", radios.description)
            line.string("model", updates.receiverModel.description)
            line.boolean("coarse", coarse)
            if stream.significantChangeM != nil { line.number("significant_change_m", settings.significantChangeM, decimals: 1) }
            line.number("distance_filter_m", settings.distanceFilterM, decimals: 1)
            line.integer("batch_count", settings.batchCount)
            line.number("batch_age_s", Double(settings.batchAgeMs) / 1_000, decimals: 1)
            line.boolean("pauses", settings.pausesAutomatically)
            if stream.quiet { line.boolean("quiet", true) }
        }
    }

    static func updatesStop(_ request: Request, _ connections: ControlConnections, _ updates: LiveUpdates) {
        updates.endStream(request.slot)
        connections[request.slot].streaming = false
        connections.ok(request, result: "stopped")
    }

    /// `locate`: answered now (the last fix is recent and accurate enough) or when the live
    /// updates have a fix or reach the timeout (`ControlConnections.sendReply`). Positions follow
    /// `[privacy]`.
    static func locate(_ request: Request, _ connections: ControlConnections, _ accuracy: AccuracyTier?, maxAgeMs: Int64, timeoutMs: Int64,
                       _ updates: LiveUpdates, _ now: AgentTime, receiver: ReceiverState) {
        let privacy = connections.privacy
        guard privacy != .none else { return connections.refuse(request, .permissionDenied, noPositions) }
        switch updates.locate(request.slot, id: request.id, accuracy: accuracy, maxAgeMs: maxAgeMs, timeoutMs: timeoutMs, now, receiver: receiver) {
        case .answered(let fix, let ageMs):
            let labels = connections.labels
            let simulated = updates.isSimulated
            connections.send(request.slot) { line in
                ControlReply.located(request.id, PrivacyFilter.shownFix(fix, privacy), ageMs: ageMs, accuracyLimited: false, places: labels,
                                     simulated: simulated, into: &line)
            }
        case .waiting:
            connections[request.slot].locating = true
        case .busy:
            connections.refuse(request, .busy, "this connection has a location request waiting already; wait for its reply (or use another connection)")
        }
    }

    // MARK: beacon ranging

    /// `range`: this connection ranges beacons matching `constraint` (a second `range` replaces
    /// the constraint); a line a second follows.
    static func range(_ request: Request, _ connections: ControlConnections, _ constraint: BeaconIdentityConstraint, _ ranging: Ranging,
                      _ now: AgentTime) {
        ranging.start(request.slot, constraint, now)
        connections[request.slot].ranging = true
        let phones = ranging.phonesReference
        connections.reply(request) { line in
            line.key("constraint")
            RangingJSON.constraint(constraint, into: &line, phones: phones)
            line.integer("interval_ms", Ranging.intervalNs / 1_000_000)
            line.integer("beacons_per_line", Ranging.beaconsPerLine)
            line.integer("silence_ms", BeaconRanger.silenceMs)
        }
    }

    static func rangeStop(_ request: Request, _ connections: ControlConnections, _ ranging: Ranging) {
        ranging.end(request.slot)
        connections[request.slot].ranging = false
        connections.ok(request, result: "stopped")
    }
}
