import LocusCore
import LocusDevices

/// The agent's sinks, in the order an event meets them: the log, the GPIO lines, the
/// subscribers; then the engine is told the event was handled.
extension Agent {
    func drainEvents(_ now: Int64) {
        if let retry = logRetryAtNs, now < retry { return }
        logRetryAtNs = nil
        if engine.oldestPendingEvent() != nil { flushUpdatesForEvent(now) }
        while let pending = engine.oldestPendingEvent() {
            let event = PrivacyFilter.event(pending, privacy)
            let sequence: Int64
            var added = EventDiagnostics()
            if let session {
                do {
                    for output in plan.latches(for: pending) {
                        try session.persistence.gpio(LogPayload.GPIOChange(output: plan.names[output], value: true, cause: .latchSet,
                                                                           monitor: pending.monitor, identifier: pending.identifier), time: pending.date)
                    }
                    sequence = Int64(try session.persistence.event(event))
                } catch {
                    logFailure(error, now)
                    return
                }
                if logFailing {
                    logFailing = false
                    logRetryDelayNs = 1_000_000_000
                    AgentLog.notice("locus: log: appending again")
                }
            } else {
                memorySequence += 1
                sequence = memorySequence
                added.insert(.persistenceUnavailable)
            }
            var delivered = event
            delivered.diagnostics.formUnion(added)
            statistics.events += 1
            AgentLog.info("locus: event \(EventText.line(delivered, sequence: sequence))")
            plan.apply(pending, nowNs: now)
            session?.persistence.latched = latchedNames()
            refreshLevels(pending: pending)
            updateOutputs(now, event: pending)
            publish(delivered, sequence: UInt64(sequence))
            engine.acknowledgeOldest(adding: added)
        }
    }

    /// A log append failed: the event stays pending (nothing is acknowledged that is not in the
    /// log) and the append is retried with backoff. A log that failed a sync is reopened first.
    func logFailure(_ error: LogStoreError, _ now: Int64) {
        if !logFailing {
            AgentLog.error("locus: log: cannot append: \(error); \(engine.pendingEventCount) event(s) wait, nothing is acknowledged until they are logged")
        }
        logFailing = true
        if error == .unusable || { if case .system(.sync, _) = error { return true } else { return false } }() {
            do { try session?.persistence.reopen() } catch {
                AgentLog.error("locus: log: reopening failed: \(error)")
            }
        }
        logRetryAtNs = now + logRetryDelayNs
        logRetryDelayNs = min(logRetryDelayNs * 2, 30_000_000_000)
    }

    func latchedNames() -> [FixedName] {
        var names: [FixedName] = []
        for index in plan.names.indices where plan.latched[index] { names.append(plan.names[index]) }
        return names
    }

    /// Level actions follow the records' states; `pending`, when given, counts as handled.
    func refreshLevels(pending: MonitorEvent? = nil) {
        let engine = self.engine
        plan.refreshLevels { action in
            let wanted = action.levelState
            func state(_ identifier: FixedName, _ record: MonitorEngine.Record) -> ConditionState {
                if let pending, pending.monitor == action.monitor, pending.identifier == identifier { return pending.state }
                return record.lastEvent.state
            }
            if let identifier = action.identifier {
                guard let record = engine.record(monitor: action.monitor, identifier: identifier) else { return false }
                return state(identifier, record) == wanted
            }
            var found = false
            engine.forEachRecord { monitor, identifier, record in
                if !found && monitor == action.monitor && state(identifier, record) == wanted { found = true }
            }
            return found
        }
    }

    /// Moves every line whose wanted value changed, and logs the change. `event` is the event
    /// that caused it; without one, `cause` says why (a pulse ended, a latch was cleared, a
    /// condition was removed). A line that cannot be set is reported; the event is still handled
    /// (it is in the log) and the line is set again on its next change.
    func updateOutputs(_ now: Int64, event: MonitorEvent? = nil, cause: LogPayload.GPIOCause = .pulseEnd) {
        guard let outputs else { return }
        for index in plan.names.indices {
            let wanted = plan.value(index, nowNs: now)
            guard outputs.values[index] != wanted else { continue }
            if let error = outputs.set(index, wanted) {
                AgentLog.error("locus: gpio: \(error)")
                continue
            }
            let why = event.map { "\($0.monitor)/\($0.identifier) \($0.state)" } ?? cause.description
            AgentLog.info("locus: gpio \(plan.names[index]) \(wanted ? "on" : "off") (\(why))")
            let logged = event.map { gpioCause(index, $0) } ?? cause
            // A latch was logged before its event (see drainEvents); the line moving says nothing new.
            guard let session, logged != .latchSet || event == nil else { continue }
            let change = LogPayload.GPIOChange(output: plan.names[index], value: wanted, cause: logged,
                                               monitor: event?.monitor, identifier: event?.identifier)
            do { try session.persistence.gpio(change, time: utcNow(now)) } catch { logFailure(error, now) }
        }
    }

    func gpioCause(_ index: Int, _ event: MonitorEvent) -> LogPayload.GPIOCause {
        for action in plan.actions where action.output == index && action.matches(monitor: event.monitor, identifier: event.identifier, state: event.state) {
            switch action.mode {
            case .pulse: return .pulseStart
            case .latch: return .latchSet
            case .level: return .level
            }
        }
        return .level
    }

    // MARK: subscribers

    func publish(_ event: MonitorEvent, sequence: UInt64) {
        guard let control else { return }
        let line = ControlReply.event(event, sequence: sequence)
        for slot in subscriptions.indices where subscriptions[slot].active && !subscriptions[slot].catchingUp {
            if let monitor = subscriptions[slot].monitor, monitor != event.monitor {
                subscriptions[slot].cursor = sequence
                continue
            }
            if control.send(slot, line) {
                subscriptions[slot].cursor = sequence
                control.flush(slot)
            } else if session != nil {
                // Too slow to keep up: the log has the event; read it from there when there is room.
                subscriptions[slot].catchingUp = true
            } else {
                _ = control.send(slot, ControlReply.error(nil, ControlError(.busy, "events came faster than this client read them, and without a log they cannot be replayed; subscribe again")))
                control.closeWhenFlushed(slot)
                subscriptions[slot] = Subscription()
            }
        }
    }

    /// Subscribers that are behind get events from the log while their output has room.
    func catchUpSubscribers() {
        guard let control, let session else { return }
        for slot in subscriptions.indices where subscriptions[slot].active && subscriptions[slot].catchingUp {
            guard control.descriptor(slot) >= 0 else { subscriptions[slot] = Subscription(); continue }
            // Only once it has read everything queued: a stuck client costs no log scans.
            guard !control.wantsWrite(slot) else { continue }
            let last = session.persistence.lastSequence
            var cursor = subscriptions[slot].cursor
            var complete = true
            do {
                try session.persistence.forEachEvent(afterSequence: cursor) { sequence, event in
                    if let monitor = subscriptions[slot].monitor, monitor != event.monitor {
                        cursor = sequence
                        return true
                    }
                    guard control.send(slot, ControlReply.event(PrivacyFilter.event(event, privacy), sequence: sequence)) else {
                        complete = false
                        return false
                    }
                    cursor = sequence
                    return true
                }
            } catch {
                AgentLog.warning("locus: control: reading the log for a subscriber: \(error)")
                complete = false
            }
            subscriptions[slot].cursor = complete ? max(cursor, last) : cursor
            if complete { subscriptions[slot].catchingUp = false }
            control.flush(slot)
        }
    }
}
