import LocusCore
import LocusDevices

/// The state directory in use: monitor locks held, the log open, the engine rebuilt from it and
/// reconciled with the site file. Shared by `locus replay --state` and `locus run`.
final class StateSession {
    let persistence: Persistence
    private var locks: [MonitorLock] = []
    /// GPIO outputs latched when the log was last written.
    private(set) var restoredLatches: [FixedName] = []

    private init(persistence: Persistence) {
        self.persistence = persistence
    }

    /// Why the state directory cannot be used. `locked` stops the agent (another process has a
    /// monitor open); `unwritable` lets it run in memory (persistenceUnavailable).
    enum Failure: Error {
        case locked
        case unwritable
    }

    /// Opens the state directory; the reason for a failure has been printed.
    static func openSession(directory: String, loaded: LoadedConfig, engine: MonitorEngine, now: UTCTime) -> Result<StateSession, Failure> {
        var locks: [MonitorLock] = []
        if let error = Files.makeDirectory(directory, mode: 0o750) {
            Console.error("locus: cannot use the state directory \(directory): \(error)\n")
            return .failure(.unwritable)
        }
        for monitor in loaded.site.monitors {
            do {
                locks.append(try MonitorLock(directory: directory, name: monitor.name))
            } catch {
                Console.error("locus: \(error)\n")
                if case .held = error { return .failure(.locked) }
                return .failure(.unwritable)
            }
        }
        let persistence: Persistence
        do {
            persistence = try Persistence(directory: directory, log: loaded.site.log, engine: engine)
        } catch {
            Console.error("locus: cannot open the log in \(directory): \(error)\n")
            return .failure(.unwritable)
        }
        let session = StateSession(persistence: persistence)
        session.locks = locks
        let summary = persistence.rebuild()
        session.restoredLatches = summary.latched
        persistence.latched = summary.latched
        persistence.consumers = summary.consumers
        persistence.uplinkCursor = summary.uplinkCursor
        for cut in summary.recovery {
            Console.error("locus: log: cut \(cut.length) bytes at \(cut.fileName):\(cut.offset) (\(cut.reason)); records before it are kept\n")
        }
        for skipped in summary.skipped {
            Console.error("locus: log: skipped \(skipped.length) corrupt bytes at \(skipped.fileName):\(skipped.offset) (\(skipped.reason))\n")
        }
        do {
            try session.reconcile(loaded.site, engine: engine, now: now)
            try persistence.marker(.start, time: now, text: "locus \(LocusVersion.string) pid \(Process.id)")
        } catch {
            Console.error("locus: cannot append to the log in \(directory): \(error)\n")
            return .failure(.unwritable)
        }
        return .success(session)
    }

    /// The site file stays authoritative for the conditions it declares: a changed one is
    /// replaced (its record starts over), a new one added, and one that was declared before but
    /// is gone from the file removed. Conditions added at run time are left alone.
    func reconcile(_ site: SiteConfig, engine: MonitorEngine, now: UTCTime) throws(LogStoreError) {
        try StateSession.reconcile(site, engine: engine, now: now, persistence: persistence)
    }

    /// The same without a log (`persistence` nil: the agent runs in memory).
    static func reconcile(_ site: SiteConfig, engine: MonitorEngine, now: UTCTime, persistence: Persistence?) throws(LogStoreError) {
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
                try persistence?.conditionAdded(LogPayload.ConditionEntry(monitor: name, identifier: identifier, condition: condition,
                                                                         settings: settings, assuming: entry.assuming, fromSiteFile: true), time: now)
            }
        }
        var stale: [(FixedName, FixedName)] = []
        engine.forEachRecord { monitor, identifier, record in
            if record.fromSiteFile && !declared.contains(Key(monitor: monitor, identifier: identifier)) { stale.append((monitor, identifier)) }
        }
        for (monitor, identifier) in stale {
            engine.remove(monitor: monitor, identifier: identifier)
            try persistence?.conditionRemoved(monitor: monitor, identifier: identifier, time: now)
        }
    }

    func close(time: UTCTime) {
        do {
            try persistence.marker(.stop, time: time, text: "stop")
            try persistence.sync()
        } catch {
            Console.error("locus: could not write the stop record: \(error)\n")
        }
    }
}
