import LocusCore
import LocusDevices

/// The state directory in use: monitor locks held, the log open, the engine rebuilt from it. It
/// writes nothing: `EventLog`, the log's one writer, reconciles the site file into it and writes
/// the start and stop records.
final class StateSession {
    let persistence: Persistence
    private var locks: [MonitorLock] = []
    /// GPIO outputs latched when the log was last written.
    private(set) var restoredLatches: [FixedName] = []
    /// The newest record's time (UTC ns), nil for an empty log.
    private(set) var newestTimeNs: Int64? = nil
    /// The fleet's commands the log holds (`Persistence.Summary.commandIDs`).
    var commandIDs: Set<String> = []
    var refusedDigests: Set<[UInt8]> = []

    /// A log opened by its caller, who holds the locks it needs (`locus monitor NAME add`).
    init(persistence: Persistence) {
        self.persistence = persistence
    }

    /// Why the state directory cannot be used. `locked` stops the agent (another process has a
    /// monitor open); `unwritable` lets it run in memory (persistenceUnavailable).
    enum Failure: Error {
        case locked
        case unwritable
    }

    /// Opens the state directory; the reason for a failure has been printed.
    static func openSession(directory: String, loaded: LoadedConfig, engine: MonitorEngine) -> Result<StateSession, Failure> {
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
        session.newestTimeNs = summary.newestTimeNs
        persistence.latched = summary.latched
        persistence.consumers = summary.consumers
        persistence.uplinkCursor = summary.uplinkCursor
        persistence.remoteApplied = summary.remoteApplied
        session.commandIDs = summary.commandIDs
        session.refusedDigests = summary.refusedDigests
        for cut in summary.recovery {
            Console.error("locus: log: cut \(cut.length) bytes at \(cut.fileName):\(cut.offset) (\(cut.reason)); records before it are kept\n")
        }
        for skipped in summary.skipped {
            Console.error("locus: log: skipped \(skipped.length) corrupt bytes at \(skipped.fileName):\(skipped.offset) (\(skipped.reason))\n")
        }
        return .success(session)
    }
}
