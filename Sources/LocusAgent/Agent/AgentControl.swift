import LocusCore
import LocusDevices

/// The control socket's requests, served inside the loop: each is answered at once (none waits
/// on I/O other than the log append a change needs).
extension Agent {
    func accept(_ control: ControlServer, on listening: Int32) {
        let busy = ControlReply.error(nil, ControlError(.busy, "all \(control.capacity) control connections are in use (capacity.subscribers)")) + "\n"
        for slot in control.acceptWaiting(on: listening, busyLine: busy) {
            subscriptions[slot] = Subscription()
            claims[slot] = nil
            // A connection the server closed by itself may have left its stream (and its tier).
            endStream(slot, now: MonotonicClock.now())
        }
    }

    func serve(_ control: ControlServer, _ slot: Int, _ now: Int64) {
        let outcome = control.read(slot) { line in
            guard !line.isEmpty else { return }
            let (id, decoded) = ControlProtocol.decode(line)
            let reply: String
            switch decoded {
            case .success(let request): reply = handle(request, id: id, slot: slot, now: now)
            case .failure(let error): reply = ControlReply.error(id, error)
            }
            if !control.send(slot, reply + "\n") { hangUp(control, slot) }
        }
        switch outcome {
        case .open: control.flush(slot)
        case .closed:
            hangUp(control, slot)
        case .tooLarge:
            _ = control.send(slot, ControlReply.error(nil, ControlError(.tooLarge, "a request is at most \(control.requestLimit) bytes, newline included")) + "\n")
            control.closeWhenFlushed(slot)
            subscriptions[slot] = Subscription()
            claims[slot] = nil
            endStream(slot, now: now)
        }
    }

    /// A connection ends: its subscription and the monitor it had open are released.
    func hangUp(_ control: ControlServer, _ slot: Int) {
        control.close(slot)
        subscriptions[slot] = Subscription()
        claims[slot] = nil
        endStream(slot, now: MonotonicClock.now())
    }

    func handle(_ request: ControlRequest, id: Int64?, slot: Int, now: Int64) -> String {
        if control?.isReadOnly(slot) == true && ControlReply.changesState(request) {
            return ControlReply.error(id, ControlError(.permissionDenied, "this is the read-only socket (read.sock); changes go through control.sock, open to the locus user, root and group locus"))
        }
        switch request {
        case .hello:
            var json = ControlReply.ok(id)
            json.integer("protocol", ControlProtocol.version)
            json.string("version", LocusVersion.string)
            json.raw("monitors", ControlReply.names(engine.monitorNames))
            json.boolean("persistence", session != nil)
            return json.closed
        case .status:
            return status(id, now)
        case .identifiers(let monitor):
            var json = ControlReply.ok(id)
            json.raw("identifiers", ControlReply.names(engine.identifiers(monitor: monitor)))
            return json.closed
        case .record(let monitor, let identifier):
            guard var record = engine.record(monitor: monitor, identifier: identifier) else {
                return ControlReply.error(id, ControlError(.notFound, "no condition '\(identifier)' in monitor '\(monitor)'"))
            }
            if claims[slot] == monitor { record = consumerViews(monitor, [(identifier, record)])[0].1 }
            var json = ControlReply.ok(id)
            json.raw("record", ControlReply.record(identifier, record, privacy))
            return json.closed
        case .records(let monitor):
            var records: [(FixedName, MonitorEngine.Record)] = []
            for identifier in engine.identifiers(monitor: monitor) {
                if let record = engine.record(monitor: monitor, identifier: identifier) { records.append((identifier, record)) }
            }
            if claims[slot] == monitor { records = consumerViews(monitor, records) }
            var list = "["
            for (index, (identifier, record)) in records.enumerated() {
                list += (index == 0 ? "" : ",") + ControlReply.record(identifier, record, privacy)
            }
            var json = ControlReply.ok(id)
            json.raw("records", list + "]")
            return json.closed
        case .add(let monitor, let identifier, let condition, let settings, let assuming):
            return add(id, monitor, identifier, condition, settings, assuming, now)
        case .remove(let monitor, let identifier):
            guard engine.record(monitor: monitor, identifier: identifier) != nil else {
                return ControlReply.error(id, ControlError(.notFound, "no condition '\(identifier)' in monitor '\(monitor)'"))
            }
            if let session {
                do { try session.persistence.conditionRemoved(monitor: monitor, identifier: identifier, time: utcNow(now)) } catch {
                    return ControlReply.error(id, ControlError(.unavailable, "the removal could not be logged: \(error)"))
                }
            }
            engine.remove(monitor: monitor, identifier: identifier)
            AgentLog.info("locus: control: removed \(monitor)/\(identifier)")
            refreshLevels()
            updateOutputs(now, cause: .level)
            var json = ControlReply.ok(id)
            json.string("result", "removed")
            return json.closed
        case .subscribe(let monitor, var after, let consumer):
            if consumer, let monitor {
                guard claims[slot] == monitor else {
                    return ControlReply.error(id, ControlError(.badRequest, "open monitor '\(monitor)' on this connection before subscribing as its consumer"))
                }
                after = consumerCursor(monitor)
            }
            if let requested = after, session == nil, requested < UInt64(memorySequence) {
                return ControlReply.error(id, ControlError(.unavailable, "no log (persistenceUnavailable): only new events can be delivered; subscribe without after_seq"))
            }
            let last = session?.persistence.lastSequence ?? UInt64(memorySequence)
            subscriptions[slot] = Subscription(active: true, monitor: monitor, cursor: after ?? last, catchingUp: (after ?? last) < last)
            var json = ControlReply.ok(id)
            json.integer("last_seq", Int(last))
            if consumer { json.integer("after_seq", Int(after ?? last)) }
            return json.closed
        case .open(let monitor):
            // A claim lasts as long as its connection (a slot closed by a failed write keeps a stale one).
            if let holder = claims.indices.first(where: { claims[$0] == monitor && control?.descriptor($0) ?? -1 >= 0 }), holder != slot {
                return ControlReply.error(id, ControlError(.inUse, "monitor '\(monitor)' is already open in another client (one open instance per name); close it first"))
            }
            claims[slot] = monitor
            var json = ControlReply.ok(id)
            json.integer("consumer_seq", Int(consumerCursor(monitor)))
            json.raw("identifiers", ControlReply.names(engine.identifiers(monitor: monitor)))
            return json.closed
        case .ack(let monitor, let sequence):
            guard claims[slot] == monitor else {
                return ControlReply.error(id, ControlError(.badRequest, "open monitor '\(monitor)' on this connection before acknowledging its events"))
            }
            let cursor = consumerCursor(monitor)
            let last = session?.persistence.lastSequence ?? UInt64(memorySequence)
            guard sequence <= last else {
                return ControlReply.error(id, ControlError(.badArgument, "no event \(sequence) yet (the newest record is \(last))"))
            }
            if sequence > cursor {
                if let session {
                    do { try session.persistence.consumer(monitor: monitor, sequence: sequence, time: utcNow(now)) } catch {
                        return ControlReply.error(id, ControlError(.unavailable, "the acknowledgement could not be logged: \(error)"))
                    }
                }
                Persistence.set(&memoryConsumers, monitor, sequence)
            }
            var json = ControlReply.ok(id)
            json.integer("consumer_seq", Int(max(cursor, sequence)))
            return json.closed
        case .updates(let preset, let accuracy):
            guard privacy != .none else {
                return ControlReply.error(id, ControlError(.permissionDenied, "this site does not give out positions ([privacy] fixes = \"none\")"))
            }
            let (chosenPreset, chosenTier) = startStream(slot, preset: preset, accuracy: accuracy, now)
            var json = ControlReply.ok(id)
            json.string("preset", "\(chosenPreset)")
            json.string("accuracy", "\(chosenTier)")
            json.string("radios", "\(radioTier)")
            json.boolean("coarse", privacy == .coarse)
            return json.closed
        case .updatesStop:
            endStream(slot, now: now)
            var json = ControlReply.ok(id)
            json.string("result", "stopped")
            return json.closed
        case .gpioClear(let name):
            guard let index = plan.index(of: name) else {
                return ControlReply.error(id, ControlError(.notFound, "no GPIO output '\(name)' (the board's outputs: \(ControlReply.list(plan.names)))"))
            }
            guard plan.latched[index] else {
                var json = ControlReply.ok(id)
                json.string("result", "not latched")
                return json.closed
            }
            if let session {
                let change = LogPayload.GPIOChange(output: name, value: false, cause: .latchCleared)
                do { try session.persistence.gpio(change, time: utcNow(now)) } catch {
                    return ControlReply.error(id, ControlError(.unavailable, "the clear could not be logged: \(error)"))
                }
            }
            plan.setLatch(index, false)
            session?.persistence.latched = latchedNames()
            AgentLog.info("locus: control: latch \(name) cleared")
            updateOutputs(now, cause: .latchCleared)
            var json = ControlReply.ok(id)
            json.string("result", "cleared")
            return json.closed
        }
    }

    /// CLMonitor's rule for the connection that opened `monitor`: an event is a record's
    /// lastEvent only once the consumer took it. A record with events the consumer has not taken
    /// shows the newest one it did take (read back from the log), or, if it took none, its
    /// assumed state at the date it was added. Without a log every event counts as taken.
    func consumerViews(_ monitor: FixedName, _ records: [(FixedName, MonitorEngine.Record)]) -> [(FixedName, MonitorEngine.Record)] {
        guard let session else { return records }
        let cursor = consumerCursor(monitor)
        guard cursor < session.persistence.lastSequence else { return records }
        var untaken: [FixedName] = []
        var taken: [(FixedName, MonitorEvent)] = []
        do {
            try session.persistence.forEachEvent(afterSequence: cursor) { _, event in
                if event.monitor == monitor && !untaken.contains(event.identifier) { untaken.append(event.identifier) }
                return true
            }
            guard !untaken.isEmpty else { return records }
            try session.persistence.forEachEvent(afterSequence: 0) { sequence, event in
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

    /// The sequence number of the last event of `monitor` its consumer took (0: none yet).
    func consumerCursor(_ monitor: FixedName) -> UInt64 {
        let cursors = session?.persistence.consumers ?? memoryConsumers
        return cursors.first { $0.0 == monitor }?.1 ?? 0
    }

    func add(_ id: Int64?, _ monitor: FixedName, _ identifier: FixedName, _ condition: Condition, _ settings: ConditionSettings,
             _ assuming: ConditionState, _ now: Int64) -> String {
        let previous = engine.record(monitor: monitor, identifier: identifier)
        let time = utcNow(now)
        let result = engine.add(monitor: monitor, identifier: identifier, condition: condition, settings: settings,
                                assuming: assuming == .unknown ? nil : assuming, fromSiteFile: false, now: time)
        switch result {
        case .limitExceeded:
            return ControlReply.error(id, ControlError(.conditionLimitExceeded, "conditionLimitExceeded: all \(loaded.site.capacity.conditions) condition slots are in use (capacity.conditions; takes effect at restart)"))
        case .monitorLimitExceeded:
            return ControlReply.error(id, ControlError(.conditionLimitExceeded, "conditionLimitExceeded: too many monitors"))
        case .added, .replaced:
            break
        }
        if let session {
            let entry = LogPayload.ConditionEntry(monitor: monitor, identifier: identifier, condition: condition, settings: settings,
                                                  assuming: assuming, fromSiteFile: false)
            do { try session.persistence.conditionAdded(entry, time: time) } catch {
                // Not logged, so not done: put the record back as it was.
                engine.remove(monitor: monitor, identifier: identifier)
                if let previous {
                    engine.add(monitor: monitor, identifier: identifier, condition: previous.condition, settings: previous.settings,
                               assuming: previous.assumed == .unknown ? nil : previous.assumed, fromSiteFile: previous.fromSiteFile, now: time)
                    engine.restore(previous.lastEvent)
                }
                return ControlReply.error(id, ControlError(.unavailable, "the change could not be logged: \(error)"))
            }
        }
        AgentLog.info("locus: control: \(result == .added ? "added" : "replaced") \(monitor)/\(identifier)")
        refreshLevels()
        updateOutputs(now, cause: .level)
        var json = ControlReply.ok(id)
        json.string("result", result == .added ? "added" : "replaced")
        return json.closed
    }

    func status(_ id: Int64?, _ now: Int64) -> String {
        var json = ControlReply.ok(id)
        json.string("version", LocusVersion.string)
        json.string("board", loaded.board.name)
        json.string("time", utcNow(now).iso8601)
        json.boolean("clock_follows_gnss", clock.followsGNSS)
        var gnssJSON = JSONText()
        gnssJSON.boolean("configured", hasGNSS)
        if hasGNSS {
            gnssJSON.string("device", gnss.path)
            gnssJSON.boolean("open", gnss.isOpen)
            gnssJSON.integer("bytes", Int(gnss.bytesRead))
            gnssJSON.integer("losses", gnss.losses)
            gnssJSON.integer("fixes", statistics.fixes)
            if let fix = statistics.lastFix, let time = fix.time { gnssJSON.string("last_fix", time.iso8601) }
            let counts = decoder.statistics
            gnssJSON.integer("sentences", counts.read)
            gnssJSON.integer("rejected", counts.rejected)
            gnssJSON.raw("receiver", receiver.statusJSON)
        }
        json.raw("gnss", gnssJSON.closed)
        var bluetoothJSON = JSONText()
        switch bluetoothKind {
        case .none: bluetoothJSON.string("source", "none")
        case .adapter(let index):
            bluetoothJSON.string("source", "hci\(index)")
            bluetoothJSON.boolean("scanning", scanner.isOpen)
            bluetoothJSON.integer("losses", scanner.losses)
        case .feed(let path):
            bluetoothJSON.string("source", path)
            bluetoothJSON.boolean("open", feed.isOpen)
        }
        bluetoothJSON.integer("sightings", statistics.sightings)
        bluetoothJSON.integer("rejected_events", statistics.hciRejected)
        json.raw("bluetooth", bluetoothJSON.closed)
        var engineJSON = JSONText()
        engineJSON.integer("conditions", engine.conditionCount)
        engineJSON.integer("capacity", loaded.site.capacity.conditions)
        engineJSON.integer("pending_events", engine.pendingEventCount)
        engineJSON.integer("deferred_detections", engine.deferredDetections)
        engineJSON.integer("events", statistics.events)
        json.raw("engine", engineJSON.closed)
        var logJSON = JSONText()
        logJSON.boolean("available", session != nil)
        if let session { logJSON.integer("last_seq", Int(session.persistence.lastSequence)) }
        logJSON.boolean("failing", logFailing)
        json.raw("log", logJSON.closed)
        var gpioJSON = JSONText()
        if let outputs {
            for index in plan.names.indices { gpioJSON.integer(plan.names[index].description, outputs.values[index] ? 1 : 0) }
        }
        json.raw("gpio", gpioJSON.closed)
        var updatesJSON = JSONText()
        updatesJSON.string("preset", "\(loaded.site.updates.preset)")
        updatesJSON.string("accuracy", "\(loaded.site.updates.accuracy)")
        updatesJSON.string("radios", "\(radioTier)")
        updatesJSON.boolean("stationary", siteUpdater.isStationary)
        updatesJSON.string("pause", PauseText.phase(pause.phase))
        updatesJSON.integer("probes", pause.probes)
        updatesJSON.integer("motion_wakes", pause.motionWakes)
        updatesJSON.integer("filtered", siteUpdater.filteredCount)
        updatesJSON.integer("streams", streams.reduce(0) { $0 + ($1 == nil ? 0 : 1) })
        json.raw("updates", updatesJSON.closed)
        var memoryJSON = JSONText()
        let heap = Process.heapUsage
        memoryJSON.integer("heap_in_use", Int(heap.inUse))
        memoryJSON.integer("heap_free", Int(heap.free))
        json.raw("memory", memoryJSON.closed)
        return json.closed
    }

    // MARK: SIGHUP

    /// Reloads the site file: conditions it declares are added, replaced or removed (CLMonitor's
    /// rules, as at start), actions and privacy take effect at once. Capacities, the board and the
    /// log settings are fixed until restart; a change to them is reported. A file that does not
    /// check leaves everything as it was.
    func reload() {
        AgentLog.notice("locus: SIGHUP: reloading \(loaded.sitePath)")
        let fresh: LoadedConfig
        switch LoadedConfig.load(loaded.sitePath) {
        case .success(let value): fresh = value
        case .failure:
            AgentLog.error("locus: reload: \(loaded.sitePath) has errors (above); keeping the running configuration")
            return
        }
        let now = MonotonicClock.now()
        let time = utcNow(now)
        if let session {
            do { try session.reconcile(fresh.site, engine: engine, now: time) } catch {
                AgentLog.error("locus: reload: cannot log the changes: \(error)")
                return
            }
        } else {
            _ = try? StateSession.reconcile(fresh.site, engine: engine, now: time, persistence: nil)
        }
        if fresh.site.capacity.conditions != loaded.site.capacity.conditions || fresh.site.capacity.events != loaded.site.capacity.events
            || fresh.site.capacity.subscribers != loaded.site.capacity.subscribers {
            AgentLog.warning("locus: reload: [capacity] changes take effect at the next start")
        }
        let (was, new) = (loaded.site.updates, fresh.site.updates)
        if was.preset != new.preset || was.accuracy != new.accuracy || was.batchCount != new.batchCount || was.batchAgeMs != new.batchAgeMs
            || was.distanceFilterM != new.distanceFilterM || was.significantChange != new.significantChange
            || was.visitMinimumMs != new.visitMinimumMs || was.stationaryWindowMs != new.stationaryWindowMs || was.motionInput != new.motionInput {
            AgentLog.warning("locus: reload: [updates] changes take effect at the next start")
        }
        if fresh.boardPath != loaded.boardPath {
            AgentLog.warning("locus: reload: a different board file takes effect at the next start")
        }
        let latched = latchedNames()
        plan = OutputPlan(actions: fresh.site.actions, outputs: outputs?.outputs.map { $0.name } ?? [])
        for name in latched { if let index = plan.index(of: name) { plan.setLatch(index, true) } }
        privacy = fresh.site.fixPrivacy
        fixIntervalNs = fresh.site.log.fixIntervalMs * 1_000_000
        refreshLevels()
        updateOutputs(now, cause: .level)
        AgentLog.notice("locus: reloaded: \(engine.conditionCount) conditions, \(plan.actions.count) actions")
    }
}

/// Replies and stream items of the control protocol, as JSON lines.
enum ControlReply {
    static func ok(_ id: Int64?) -> JSONText {
        var json = JSONText()
        if let id { json.integer("id", Int(id)) }
        json.boolean("ok", true)
        return json
    }

    static func error(_ id: Int64?, _ error: ControlError) -> String {
        var json = JSONText()
        if let id { json.integer("id", Int(id)) } else { json.raw("id", "null") }
        json.boolean("ok", false)
        var inner = JSONText()
        inner.string("code", error.code.rawValue)
        inner.string("message", error.message)
        json.raw("error", inner.closed)
        return json.closed
    }

    static func event(_ event: MonitorEvent, sequence: UInt64) -> String {
        "{\"event\":" + EventJSON.line(event, sequence: Int64(sequence)) + "}\n"
    }

    /// Requests the read-only socket refuses: changes to conditions, outputs and consumer cursors.
    static func changesState(_ request: ControlRequest) -> Bool {
        switch request {
        case .add, .remove, .gpioClear, .open, .ack: return true
        case .subscribe(_, _, let consumer): return consumer
        case .hello, .status, .identifiers, .record, .records, .updates, .updatesStop: return false
        }
    }

    static func names(_ names: [FixedName]) -> String {
        var text = "["
        for (index, name) in names.enumerated() { text += (index == 0 ? "\"" : ",\"") + name.description + "\"" }
        return text + "]"
    }

    static func list(_ names: [FixedName]) -> String {
        var text = ""
        for (index, name) in names.enumerated() { text += (index == 0 ? "" : ", ") + name.description }
        return text.isEmpty ? "none" : text
    }

    static func record(_ identifier: FixedName, _ record: MonitorEngine.Record, _ privacy: SiteConfig.FixPrivacy) -> String {
        var filtered = record
        filtered.lastEvent = PrivacyFilter.event(record.lastEvent, privacy)
        return RecordJSON.line(identifier, filtered)
    }
}

enum PauseText {
    static func phase(_ phase: PauseController.Phase) -> String {
        switch phase {
        case .active: return "active"
        case .asleep: return "paused"
        case .probing: return "probing"
        case .held: return "held awake (motion input)"
        }
    }
}
