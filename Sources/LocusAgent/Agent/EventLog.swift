import LocusCore
import LocusDevices

/// The one writer of the log (the state directory's `StateSession`): the start and stop records,
/// the site file's conditions reconciled into it, events, the GPIO changes and latches they cause,
/// condition changes (the agent's and `locus monitor NAME add|remove`'s), consumers'
/// acknowledgements, fix and visit records. Every reader reads through a `LogCursor`, except the
/// uplink and a replay printing events, which follow the log with a `LogTail`.
///
/// "Log, then act": an event is appended (and synced per `[log] sync`) before any other sink
/// sees it; an append that fails leaves the event pending (nothing is acknowledged that is not
/// in the log) and is retried with backoff (`initialRetryNs` doubling to `maximumRetryNs`); a log
/// that failed a sync is reopened first. Without a state directory the log is in memory: events
/// are numbered here, say `persistenceUnavailable`, and cannot be replayed.
final class EventLog: LoopComponent {
    static let initialRetryNs: Int64 = 1_000_000_000
    static let maximumRetryNs: Int64 = 30_000_000_000

    /// Why the state directory stops the start: another process has one of its monitors open.
    struct Locked: Error {}

    /// An event as appended: its sequence number, the event as delivered (privacy-filtered, the
    /// diagnostics the log added), and those diagnostics for the engine's record.
    struct Appended {
        let sequence: UInt64
        let event: MonitorEvent
        let added: EventDiagnostics
    }

    /// nil: the state directory cannot be written; the log is in memory.
    private let session: StateSession?
    private var privacy: SiteConfig.FixPrivacy
    private var fixIntervalNs: Int64
    /// Fix time (UTC ns) before which no fix record is written (one per `[log] fix_interval`).
    private var nextFixLogNs: Int64 = 0
    /// What the log holds in memory when there is no log on disk.
    private var memory = InMemory()
    /// A failing tail read (the uplink, a replay printing events) is reported once, until a read
    /// succeeds again.
    private var tailReadFailing = false
    /// The start could not be logged (the disk failed at start): the site file's conditions and
    /// the start record are written first when the log takes records again, and no event is
    /// appended before them. The records rebuilt from the log stay meanwhile (none starts over).
    private var pendingStart: PendingStart? = nil
    /// A GPIO change the log could not take (`takeLevelsToState`).
    private(set) var levelsUnlogged = false
    /// A failing log's retry: when, and the backoff after it.
    private var retry = Retry()
    /// Appends fail now (said once a streak; nothing is acknowledged meanwhile).
    var failing: Bool { retry.failing }
    /// Events appended since start.
    private(set) var events = 0
    /// The event lines of the diagnostic log, written without a String (room for a place).
    private var line = JSONWriter(capacity: 2048 + PlaceLabels.maximumMemberBytes)
    /// `[geocoding] annotate`: an event line ends with the place nearest the event's position.
    private let places: PlaceLabels?

    private init(session: StateSession?, privacy: SiteConfig.FixPrivacy, fixIntervalMs: Int64, places: PlaceLabels?) {
        precondition(fixIntervalMs >= 0, "a fix interval is not negative")
        precondition(EventLog.initialRetryNs <= EventLog.maximumRetryNs, "the retry backoff starts below its ceiling")
        self.session = session
        self.places = places
        self.privacy = privacy
        fixIntervalNs = fixIntervalMs * 1_000_000
    }

    private convenience init(session: StateSession?, site: SiteConfig, places: PlaceLabels?) {
        self.init(session: session, privacy: site.fixPrivacy, fixIntervalMs: site.log.fixIntervalMs, places: places)
    }

    /// The log of a state directory no agent runs on, for the tools that change its conditions
    /// (`locus monitor NAME add|remove`): the caller holds the monitor's lock and rebuilt its
    /// engine from `persistence`. They write through here like the agent does.
    static func offline(_ persistence: Persistence) -> EventLog {
        EventLog(session: StateSession(persistence: persistence), privacy: .full, fixIntervalMs: SiteConfig.Log().fixIntervalMs, places: nil)
    }

    /// Makes what was appended durable now (a tool's change, before it says it is done).
    func sync() throws(LogStoreError) { try session?.persistence.sync() }

    /// Opens the state directory: locks, the log, the engine rebuilt from it and reconciled with
    /// the site file. A directory that cannot be written means a log in memory (said once, here);
    /// one held by another process stops the start (`Locked`; the reason has been printed).
    static func open(directory: String, loaded: LoadedConfig, engine: MonitorEngine, now: UTCTime) -> Result<EventLog, Locked> {
        switch StateSession.openSession(directory: directory, loaded: loaded, engine: engine) {
        case .success(let session):
            if let newest = session.newestTimeNs, newest > now.totalNanoseconds {
                // A gateway without a real-time clock after a power cut, or a clock set back:
                // the records' times are ahead of now. Time remembered for dwells and beacon
                // exits moves back with the clock, so those count from this start instead of
                // waiting for the clock to catch up with the log.
                engine.clockStepped(byNs: now.totalNanoseconds - newest)
                AgentLog.warning("locus: clock: the system clock (\(now.iso8601)) is behind the log's newest record (\(UTCTime(nanoseconds: newest).iso8601)); timeouts count from now")
            }
            let log = EventLog(session: session, site: loaded.site, places: loaded.placeLabels)
            log.pendingStart = PendingStart(site: loaded.site, engine: engine)
            if let error = log.writeStart(now) {
                AgentLog.error("locus: log: cannot write the start in \(directory): \(error); monitoring goes on from the log's records, and no event is acknowledged until the log takes records again")
                log.retry.failing = true   // said just now
                log.failed(error, AgentTime(monotonic: MonotonicClock.instant, utc: now), waiting: nil)
            }
            return .success(log)
        case .failure(.locked):
            return .failure(Locked())
        case .failure(.unwritable):
            return .success(inMemory(loaded, engine: engine, now: now))
        }
    }

    /// The log in memory, for a state directory that cannot be written (said once, here).
    private static func inMemory(_ loaded: LoadedConfig, engine: MonitorEngine, now: UTCTime) -> EventLog {
        AgentLog.warning("locus: persistenceUnavailable: monitoring in memory only; events are not logged and records start over at the next start")
        for (name, result) in EngineSetup.addConfigured(loaded.site, to: engine, now: now) {
            AgentLog.error("locus: condition \(name) not added: \(result == .limitExceeded ? "capacity.conditions is full" : "too many monitors") (conditionLimitExceeded)")
        }
        return EventLog(session: nil, site: loaded.site, places: loaded.placeLabels)
    }

    var isAvailable: Bool { session != nil }

    /// Appends that failed are retried with backoff.
    struct Retry {
        var at: MonotonicInstant? = nil
        var delayNs = EventLog.initialRetryNs
        var failing = false
    }

    /// A log in memory (the state directory cannot be written): events numbered here, the
    /// consumers' and the uplink's cursors kept here.
    struct InMemory {
        var sequence: UInt64 = 0
        var consumers: [(FixedName, UInt64)] = []
        var uplinkCursor: UplinkCursor? = nil
    }

    /// What a start that could not be logged still has to write.
    struct PendingStart {
        var site: SiteConfig
        let engine: MonitorEngine
        /// The condition change made to the engine whose record failed: written first.
        var unlogged: ConditionChange? = nil
    }

    enum ConditionChange {
        case added(LogPayload.ConditionEntry)
        case removed(FixedName, FixedName)
    }

    /// A reconcile stopped by the log: the change it made to the engine and could not log.
    struct ReconcileFailure: Error {
        var error: LogStoreError
        var unlogged: ConditionChange
    }

    /// The site file's conditions (after the change left unlogged, if any) and the start record.
    /// nil when written; the error otherwise (the start stays pending).
    private func writeStart(_ now: UTCTime) -> LogStoreError? {
        guard var start = pendingStart, let persistence = session?.persistence else { return nil }
        do throws(LogStoreError) {
            switch start.unlogged {
            case .added(let entry)?: try persistence.conditionAdded(entry, time: now)
            case .removed(let monitor, let identifier)?: try persistence.conditionRemoved(monitor: monitor, identifier: identifier, time: now)
            case nil: break
            }
            start.unlogged = nil
            pendingStart = start
            do throws(ReconcileFailure) { try EventLog.reconcile(start.site, engine: start.engine, now: now, persistence: persistence) } catch {
                pendingStart?.unlogged = error.unlogged
                throw error.error
            }
            try persistence.marker(.start, time: now, text: "locus \(LocusVersion.string) pid \(Process.id)")
        } catch {
            return error
        }
        pendingStart = nil
        precondition(persistence.lastSequence > 0, "a written start is a record in the log")
        return nil
    }

    /// The sequence number of the newest record (events numbered in memory without a log).
    var newest: UInt64 { session?.persistence.lastSequence ?? memory.sequence }
    /// The newest record a power cut cannot take back (at interval sync, the records since the
    /// last sync can be lost and their sequence numbers given again).
    var durable: UInt64 { session?.persistence.durableSequence ?? memory.sequence }

    /// Outputs latched when the log was last written (the outputs start from them).
    var restoredLatches: [FixedName] { session?.restoredLatches ?? [] }

    // MARK: the loop's surface

    func deadlines(_ next: inout NextDeadline) {
        if let due = session?.persistence.syncDueNs { next.consider(MonotonicInstant(nanoseconds: due)) }
        next.consider(retry.at)
    }

    /// An interval sync policy's sync, when due.
    func housekeeping(_ now: AgentTime) {
        guard let session else { return }
        do { try session.persistence.syncIfDue(now: now.monotonic.nanoseconds) } catch { failed(error, now, waiting: nil) }
    }

    func status(into line: inout JSONWriter) {
        line.beginObject("log")
        line.boolean("available", isAvailable)
        if let session { line.integer("last_seq", session.persistence.lastSequence) }
        line.boolean("failing", failing)
        if uplinkBacklogLimit != nil { line.integer("fixes_held_for_uplink", fixesHeldForUplink) }
        line.endObject()
    }

    func reload(_ config: LoadedConfig, now: AgentTime) {
        precondition(config.site.log.fixIntervalMs >= 0, "a fix interval is not negative")
        privacy = config.site.fixPrivacy
        fixIntervalNs = config.site.log.fixIntervalMs * 1_000_000
    }

    /// SIGHUP: the site file's conditions into the engine and the log. False when the changes
    /// could not be logged (the running configuration stays).
    func reconcile(_ site: SiteConfig, engine: MonitorEngine, now: AgentTime) -> Bool {
        if pendingStart != nil {
            // Still to be logged: the start writes the new file's conditions when it can.
            pendingStart?.site = site
            return true
        }
        do throws(ReconcileFailure) { try EventLog.reconcile(site, engine: engine, now: now.utc, persistence: session?.persistence) } catch {
            AgentLog.error("locus: reload: cannot log the changes: \(error.error)")
            return false
        }
        return true
    }

    /// The site file stays authoritative for the conditions it declares: a changed one is
    /// replaced (its record starts over), a new one added, and one that was declared before but
    /// is gone from the file removed. Conditions added at run time are left alone. Without a log
    /// (`persistence` nil) only the engine changes.
    private static func reconcile(_ site: SiteConfig, engine: MonitorEngine, now: UTCTime, persistence: Persistence?) throws(ReconcileFailure) {
        struct Key: Hashable { var monitor: FixedName; var identifier: FixedName }
        var declared = Set<Key>()
        declared.reserveCapacity(site.conditionCount)
        for monitor in site.monitors {
            guard let name = FixedName(monitor.name) else { continue }
            for entry in monitor.conditions {
                guard let identifier = FixedName(entry.identifier) else { continue }
                declared.insert(Key(monitor: name, identifier: identifier))
                let condition = EngineSetup.condition(entry)
                let settings = EngineSetup.settings(entry)
                if let record = engine.record(monitor: name, identifier: identifier),
                   record.condition == condition, record.settings == settings, record.fromSiteFile, record.assumed == entry.assuming {
                    continue
                }
                let result = engine.add(monitor: name, identifier: identifier, condition: condition, settings: settings,
                                        assuming: entry.assuming == .unknown ? nil : entry.assuming, fromSiteFile: true, now: now)
                if result == .limitExceeded || result == .monitorLimitExceeded {
                    Console.error("locus: condition \(monitor.name)/\(entry.identifier) not added: capacity is full (conditionLimitExceeded)\n")
                    continue
                }
                let added = LogPayload.ConditionEntry(monitor: name, identifier: identifier, condition: condition, settings: settings,
                                                      assuming: entry.assuming, fromSiteFile: true)
                do { try persistence?.conditionAdded(added, time: now) } catch { throw ReconcileFailure(error: error, unlogged: .added(added)) }
            }
        }
        var stale: [(FixedName, FixedName)] = []
        engine.forEachRecord { monitor, identifier, record in
            if record.fromSiteFile && !declared.contains(Key(monitor: monitor, identifier: identifier)) { stale.append((monitor, identifier)) }
        }
        for (monitor, identifier) in stale {
            engine.remove(monitor: monitor, identifier: identifier)
            do { try persistence?.conditionRemoved(monitor: monitor, identifier: identifier, time: now) } catch {
                throw ReconcileFailure(error: error, unlogged: .removed(monitor, identifier))
            }
        }
    }

    /// The stop record, synced.
    func shutdown(now: AgentTime) {
        guard let session else { return }
        do {
            try session.persistence.marker(.stop, time: now.utc, text: "stop")
            try session.persistence.sync()
        } catch {
            Console.error("locus: could not write the stop record: \(error)\n")
        }
    }

    // MARK: events

    /// Whether events may be appended this turn: not while a failed append waits for its retry.
    /// Called every turn, so a failed log is reopened on its retry's schedule whether or not an
    /// event waits: records acknowledged before a sync failed (at interval sync) are in the page
    /// cache only until the reopen syncs them.
    func acceptsEvents(_ now: AgentTime) -> Bool {
        if let due = retry.at, now.monotonic < due { return false }
        retry.at = nil
        if let persistence = session?.persistence, persistence.needsReopen {
            do { try persistence.reopen() } catch {
                AgentLog.error("locus: log: reopening failed: \(error)")
                scheduleRetry(now)
                return false
            }
            retry = Retry()
            AgentLog.notice("locus: log: reopened and synced; appending again")
        }
        if pendingStart != nil, let error = writeStart(now.utc) {
            failed(error, now, waiting: nil)
            return false
        }
        precondition(retry.at == nil, "no retry is due while the log takes records")
        return true
    }

    /// Appends `pending` (privacy-filtered), after the latches it sets (`latching`: logged first,
    /// so a crash in between latches again rather than losing the latch). nil when the log
    /// failed: the event stays pending, and the append is retried later.
    func appendEvent(_ pending: MonitorEvent, latching outputs: [FixedName], waiting: Int, _ now: AgentTime) -> Appended? {
        precondition(waiting >= 1, "an event to append is one of those pending")
        precondition(pending.state != .unknown, "an event reports satisfied or unsatisfied")
        precondition(pendingStart == nil, "no event is appended before the start is logged")
        let event = PrivacyFilter.event(pending, privacy)
        var added = EventDiagnostics()
        let newestBefore = newest
        let sequence: UInt64
        if let session {
            do {
                for output in outputs {
                    let change = LogPayload.GPIOChange(output: output, value: true, cause: .latchSet, monitor: pending.monitor,
                                                       identifier: pending.identifier)
                    try session.persistence.gpio(change, time: pending.date)
                }
                sequence = try session.persistence.event(event)
            } catch {
                failed(error, now, waiting: waiting)
                return nil
            }
            if retry.failing {
                retry = Retry()
                AgentLog.notice("locus: log: appending again")
            }
        } else {
            memory.sequence += 1
            sequence = memory.sequence
            added.insert(.persistenceUnavailable)
        }
        // Sequence numbers only increase, and the event is the newest record: a reader that takes
        // it has everything before it.
        precondition(sequence > newestBefore, "an appended event's sequence number follows the log's newest")
        precondition(sequence == newest, "an appended event is the log's newest record")
        precondition(!retry.failing, "an append that succeeded ends a failure streak")
        var delivered = event
        delivered.diagnostics.formUnion(added)
        events += 1
        AgentLog.begin(.info, into: &line)
        line.text("locus: event ")
        EventText.write(delivered, sequence: Int64(sequence), places: places, into: &line)
        AgentLog.finish(&line)
        return Appended(sequence: sequence, event: delivered, added: added)
    }

    /// A failed append: reported once per failure streak; retried with backoff. A log that
    /// failed a sync (or says it is unusable) is reopened first.
    private func failed(_ error: LogStoreError, _ now: AgentTime, waiting: Int?) {
        if !retry.failing {
            let what = waiting.map { "\($0) event(s) wait, nothing is acknowledged until they are logged" }
                ?? "nothing is acknowledged until it is logged"
            AgentLog.error("locus: log: cannot append: \(error); \(what)")
        }
        retry.failing = true
        var mustReopen = error == .unusable
        if case .system(.sync, _) = error { mustReopen = true }
        if mustReopen {
            do { try session?.persistence.reopen() } catch {
                AgentLog.error("locus: log: reopening failed: \(error)")
            }
        }
        scheduleRetry(now)
    }

    private func scheduleRetry(_ now: AgentTime) {
        precondition(retry.delayNs >= EventLog.initialRetryNs, "a retry waits at least the initial backoff")
        precondition(retry.delayNs <= EventLog.maximumRetryNs, "a retry waits at most the longest backoff")
        retry.at = now.monotonic + retry.delayNs
        retry.delayNs = min(retry.delayNs * 2, EventLog.maximumRetryNs)
        // The loop's deadline for the retry lies ahead: a retry due at once would make it spin.
        precondition(retry.at! > now.monotonic, "a retry is due after now")
    }

    // MARK: other records

    /// The fleet's configuration version the log says is applied (0: none).
    var remoteApplied: UInt64 { session?.persistence.remoteApplied ?? 0 }
    /// The fleet's commands the log held at start.
    var restoredCommandIDs: Set<String> { session?.commandIDs ?? [] }
    /// The configurations the log held as refused at start (their SHA-256).
    var restoredRefusals: Set<[UInt8]> { session?.refusedDigests ?? [] }

    /// What the gateway did with a configuration or a command from the fleet, appended and synced
    /// before anything acts on it. False when the log cannot take it (or there is no log to keep
    /// the fleet's word in): nothing may act then, and the broker's message stays unacknowledged.
    func appendRemote(_ remote: LogPayload.RemoteResult, _ now: AgentTime) -> Bool {
        guard let session, acceptsEvents(now) else { return false }
        do { try session.persistence.remote(remote, time: now.utc) } catch {
            failed(error, now, waiting: nil)
            return false
        }
        return true
    }

    /// A GPIO line moved (the latch an event sets is logged with the event, not here).
    func appendGPIO(_ change: LogPayload.GPIOChange, _ now: AgentTime) {
        guard let session else { return }
        do { try session.persistence.gpio(change, time: now.utc) } catch {
            levelsUnlogged = true
            failed(error, now, waiting: nil)
        }
    }

    /// True once the log takes records again after it could not take a line's change: the
    /// caller then states every line's level (`restored`), so the log's GPIO records give the
    /// lines' levels again.
    func takeLevelsToState(_ now: AgentTime) -> Bool {
        guard levelsUnlogged, acceptsEvents(now) else { return false }
        levelsUnlogged = false
        return true
    }

    /// A fix the site updater delivered: a fix record, at most one per `[log] fix_interval`, as
    /// `[privacy]` allows. Informative: a failing log is reported by the event path.
    func appendFix(_ fix: Fix) {
        guard fix.hasPosition, let timeNs = fix.time?.totalNanoseconds, timeNs >= nextFixLogNs else { return }
        guard let session, let logged = PrivacyFilter.fix(fix, privacy) else { return }
        guard !holdsFixesForUplink(session) else { return }
        nextFixLogNs = timeNs + fixIntervalNs
        precondition(nextFixLogNs >= timeNs, "the next fix record is not due before this one")
        try? session.persistence.fix(logged)
    }

    /// With an uplink, fix records stop while its undelivered backlog is past half of `[log]
    /// retain`: when the broker stays away, fixes give way first, so the events outlast the
    /// outage (retention deletes undelivered records only past `retain`, counted).
    var uplinkBacklogLimit: Int64? = nil
    /// Fix records not written because of the backlog, since start.
    private(set) var fixesHeldForUplink = 0
    private var holdingFixes = false

    /// An uplink starts: from the log's first record when it has never delivered anything, and
    /// what retention deletes before delivery is counted from now on.
    func startUplink() {
        guard let session, session.persistence.uplinkCursor == nil else { return }
        session.persistence.uplinkCursor = UplinkCursor(delivered: 0, chained: 0)
        precondition(uplinkDelivered == 0, "an uplink that never delivered starts before the log's first record")
    }

    private func holdsFixesForUplink(_ session: StateSession) -> Bool {
        guard let limit = uplinkBacklogLimit else { return false }
        let backlog = session.persistence.bytes(after: session.persistence.uplinkDelivered ?? 0)
        if backlog > limit {
            if !holdingFixes {
                AgentLog.warning("locus: log: the uplink's backlog (\(Quantity.describe(bytes: backlog))) is past half of [log] retain: fix records are not logged until it drains (events still are)")
            }
            holdingFixes = true
            fixesHeldForUplink += 1
            return true
        }
        if holdingFixes {
            AgentLog.notice("locus: log: the uplink's backlog is below half of [log] retain: fix records are logged again (\(fixesHeldForUplink) held back so far)")
            holdingFixes = false
        }
        return false
    }

    func appendVisit(_ visit: Visit, _ now: AgentTime) {
        guard let session, let logged = PrivacyFilter.visit(visit, privacy) else { return }
        do { try session.persistence.visit(logged) } catch { failed(error, now, waiting: nil) }
    }

    /// The latched outputs every checkpoint states.
    /// Every visit record the log holds (none without a log), for `visits`.
    func forEachVisit(_ body: (UInt64, Visit) -> Void) throws(LogStoreError) {
        try session?.persistence.forEachVisit(body)
    }

    func setLatched(_ names: [FixedName]) { session?.persistence.latched = names }

    // Changes made over the control socket, logged before they are answered (the caller
    // answers with the error). Nothing to log without a log. A condition changes in the engine
    // and the log together, here, as the site file's do in `reconcile`.

    /// A condition added at run time: into the engine, then into the log. A full engine changes
    /// nothing (its result says which limit). When the log cannot take it the engine is put back
    /// as it was, the record it replaced with its last event: not logged, not done. This is the
    /// one place a change is undone.
    func addCondition(_ entry: LogPayload.ConditionEntry, to engine: MonitorEngine, _ now: AgentTime)
        -> Result<MonitorEngine.AddResult, LogStoreError> {
        let previous = engine.record(monitor: entry.monitor, identifier: entry.identifier)
        let result = engine.add(monitor: entry.monitor, identifier: entry.identifier, condition: entry.condition, settings: entry.settings,
                                assuming: entry.assuming == .unknown ? nil : entry.assuming, fromSiteFile: entry.fromSiteFile, now: now.utc)
        guard result == .added || result == .replaced else { return .success(result) }
        do { try session?.persistence.conditionAdded(entry, time: now.utc) } catch {
            engine.remove(monitor: entry.monitor, identifier: entry.identifier)
            if let previous {
                engine.add(monitor: entry.monitor, identifier: entry.identifier, condition: previous.condition, settings: previous.settings,
                           assuming: previous.assumed == .unknown ? nil : previous.assumed, fromSiteFile: previous.fromSiteFile, now: now.utc)
                engine.restore(previous.lastEvent)
            }
            return .failure(error)
        }
        return .success(result)
    }

    /// A condition removed at run time: logged, then out of the engine (one that cannot be
    /// logged stays).
    func removeCondition(_ monitor: FixedName, _ identifier: FixedName, from engine: MonitorEngine, _ now: AgentTime) throws(LogStoreError) {
        try session?.persistence.conditionRemoved(monitor: monitor, identifier: identifier, time: now.utc)
        engine.remove(monitor: monitor, identifier: identifier)
    }

    /// A latch set (the fleet's `set ... on`) or cleared (`locus gpio clear`, `set ... off`),
    /// logged before the output moves, with the level the output has after it (`level`: on for
    /// a latch set; a cleared one stays on while a level action or a pulse holds it).
    func appendLatch(_ output: FixedName, set: Bool, level: Bool, _ now: AgentTime) throws(LogStoreError) {
        try session?.persistence.gpio(LogPayload.GPIOChange(output: output, value: level, cause: set ? .latchSet : .latchCleared), time: now.utc)
    }

    // MARK: readers

    /// A reader's cursor after `after` (nil: from the newest record on). nil when the reader
    /// asks for events the log cannot replay (no log: only new events).
    func cursor(monitor: FixedName?, after: UInt64?) -> LogCursor? {
        let newest = self.newest
        if let after, session == nil, after < newest { return nil }
        return LogCursor(monitor: monitor, after: min(after ?? newest, newest), newest: newest)
    }

    /// Events after the cursor's position, in order, while `body` takes them (returns true); the
    /// cursor moves past every event taken and every other monitor's. Returns whether the
    /// reader has caught up with the newest record (false: `body` stopped it, or the log could
    /// not be read).
    func read(_ cursor: inout LogCursor, _ body: (UInt64, MonitorEvent) -> Bool) -> Bool {
        guard let session else {
            cursor.caughtUp(to: memory.sequence)
            return true
        }
        let newest = session.persistence.lastSequence
        precondition(cursor.position <= newest, "a reader's cursor never passes the log's newest record")
        var position = cursor
        var complete = true
        do {
            try session.persistence.forEachEvent(afterSequence: cursor.position) { sequence, event in
                guard position.wants(event) else {
                    position.took(sequence)
                    return true
                }
                guard body(sequence, event) else {
                    complete = false
                    return false
                }
                position.took(sequence)
                return true
            }
        } catch {
            AgentLog.warning("locus: control: reading the log for a subscriber: \(error)")
            complete = false
        }
        if complete { position.caughtUp(to: newest) }
        precondition(position.position >= cursor.position, "a log cursor moves forward only")
        cursor = position
        return complete
    }

    /// Every event after `sequence`, in order, until `body` returns false (a consumer's view).
    func forEachEvent(after sequence: UInt64, _ body: (UInt64, MonitorEvent) -> Bool) throws(LogStoreError) {
        guard let session else { return }
        try session.persistence.forEachEvent(afterSequence: sequence, body)
    }

    /// The position the log keeps for `monitor`'s consumer: the last event it took (0: none).
    func consumerPosition(_ monitor: FixedName) -> UInt64 {
        let cursors = session?.persistence.consumers ?? memory.consumers
        return cursors.first { $0.0 == monitor }?.1 ?? 0
    }

    /// The consumer took every event of `monitor` up to `sequence`: its position, in the log
    /// first (so it survives a restart).
    func acknowledge(_ monitor: FixedName, _ sequence: UInt64, _ now: AgentTime) throws(LogStoreError) {
        precondition(sequence <= newest, "a consumer acknowledges only events the log has")
        precondition(sequence > consumerPosition(monitor), "a consumer's position moves forward only")
        if let session { try session.persistence.consumer(monitor: monitor, sequence: sequence, time: now.utc) }
        Persistence.set(&memory.consumers, monitor, sequence)
        assert(consumerPosition(monitor) == sequence, "a consumer's position is the one it acknowledged")
    }

    // MARK: the uplink

    /// The uplink's cursor, as the log last stated it (nil: nothing delivered yet).
    var uplinkCursor: UplinkCursor? {
        guard let session else { return memory.uplinkCursor }
        return session.persistence.uplinkCursor
    }

    /// The last record the broker acknowledged (nil: none yet).
    var uplinkDelivered: UInt64? { uplinkCursor?.delivered }

    /// The broker acknowledged every record up to `cursor.delivered`: the cursor, in the log first
    /// (so a restart resends only what was not acknowledged).
    func commitUplink(_ cursor: UplinkCursor, _ now: AgentTime) throws(LogStoreError) {
        precondition(cursor.delivered <= newest, "the broker acknowledges only records the log has")
        precondition(cursor.delivered > (uplinkDelivered ?? 0), "the uplink's committed position moves forward only")
        if let session {
            do { try session.persistence.uplink(cursor, time: now.utc) } catch {
                failed(error, now, waiting: nil)
                throw error
            }
        }
        memory.uplinkCursor = cursor
    }

    /// A reader's place after `after`, following the log as it grows; nil without a log.
    func tail(after: UInt64) -> LogTail? {
        session?.persistence.tail(after: after)
    }

    /// The records after the tail's position, in order, until `body` returns false (not taken:
    /// handed again next time) or the log's end. `body` must not append to the log (commit after
    /// this returns). nil when there is no log or it cannot be read (said once per failure streak).
    func readTail(_ tail: LogTail, _ body: (LogRecordHeader, UnsafeRawBufferPointer) -> Bool) -> LogTailRead? {
        guard let session else { return nil }
        do {
            let read = try session.persistence.read(tail, body)
            tailReadFailing = false
            return read
        } catch {
            if !tailReadFailing { AgentLog.warning("locus: log: reading records after \(tail.position): \(error)") }
            tailReadFailing = true
            return nil
        }
    }

    /// Records retention deleted before the uplink delivered them (since start).
    var undeliveredDeleted: UInt64 { session?.persistence.undeliveredDeleted ?? 0 }

    /// About how many bytes of the log lie after `after`: the uplink's backlog on disk.
    func backlogBytes(after: UInt64) -> Int64 { session?.persistence.bytes(after: after) ?? 0 }
}
