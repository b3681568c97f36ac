import LocusCore
import LocusDevices

/// The agent `locus run` starts, for the simulator (Sources/locus-sim): opened on whatever kernel
/// is installed (a `SimulatedKernel`), turned one step at a time, dropped without a word (a power
/// cut: no stop record, no safe state, no last sync) and opened again on what the disk kept, and
/// looked into between turns for the invariants. Nothing here decides anything: every decision is
/// the `Agent`'s.
public final class SimulatedAgent {
    let config: LoadedConfig
    public let directory: String
    private var agent: Agent? = nil
    /// The simulator's reader of the log, as a subscriber reads it.
    private var tail: LogTail? = nil

    /// The site at `sitePath` and its board, checked (nil: the problems are on standard error).
    public init?(sitePath: String, directory: String) {
        guard case .success(let loaded) = LoadedConfig.load(sitePath) else { return nil }
        config = loaded
        self.directory = directory
    }

    /// Opens and starts the agent; the reason when it cannot.
    public func open() -> String? {
        precondition(agent == nil, "one agent at a time on a state directory")
        switch Agent.open(config, directory: directory) {
        case .success(let opened):
            agent = opened
            opened.start()
            return nil
        case .failure(let error):
            return "\(error)"
        }
    }

    public var isOpen: Bool { agent != nil }

    /// One turn of the loop (false: the loop has stopped).
    public func turn() -> Bool {
        guard let agent, agent.loop.running else { return false }
        agent.turn()
        return agent.loop.running
    }

    /// The orderly stop `locus run` makes on SIGTERM.
    public func shutdown() {
        agent?.shutdown()
        agent = nil
        tail = nil
    }

    /// The process is gone: nothing more is written or synced. What the agent held on Linux (the
    /// log's files and lock, the control socket) is closed as its objects go.
    public func crash() {
        agent = nil
        tail = nil
    }

    // MARK: looking in

    /// Events detected and not yet logged and acknowledged.
    public var pendingEvents: Int { agent?.engine.pendingEventCount ?? 0 }

    /// Nothing pending and no timeout (dwell, beacon exit) still to come.
    public var settled: Bool {
        guard let engine = agent?.engine else { return true }
        return engine.pendingEventCount == 0 && engine.nextDeadline() == nil
    }

    /// The log is on disk (false: the agent keeps it in memory and says so).
    public var logOnDisk: Bool { agent?.log.isAvailable ?? false }
    /// Writes to the log fail now (it retries; nothing is acknowledged meanwhile).
    public var logFailing: Bool { agent?.log.failing ?? false }
    /// A line's change the log could not take waits for the log: the levels are stated again
    /// when it takes records.
    public var levelsAwaitLog: Bool { agent?.log.levelsUnlogged ?? false }
    /// The newest sequence number in the log.
    public var newestSequence: UInt64 { agent?.log.newest ?? 0 }

    /// The records the log took after `sequence` the first time, then after the last one handed
    /// over, in order (nothing without a log on disk).
    public func readRecords(after sequence: UInt64, _ body: (LogRecordHeader, UnsafeRawBufferPointer) -> Void) {
        guard let agent else { return }
        if tail == nil { tail = agent.log.tail(after: sequence) }
        guard let tail else { return }
        _ = agent.log.readTail(tail) { header, payload in
            body(header, payload)
            return true
        }
    }

    /// Every record's last event: what the agent has acknowledged, monitor by monitor.
    public func forEachRecord(_ body: (_ monitor: String, _ identifier: String, _ lastEvent: MonitorEvent) -> Void) {
        agent?.engine.forEachRecord { monitor, identifier, record in body(monitor.description, identifier.description, record.lastEvent) }
    }

    /// The fleet's configuration version running (0: the site file alone) and the actions it
    /// runs (`[remote]`, docs/remote.md).
    public var remoteApplied: UInt64 { agent?.uplink?.remote?.applied ?? 0 }
    public var actionCount: Int { agent?.outputs.plan.actions.count ?? 0 }

    /// The board's outputs and the levels the lines have now.
    public var outputs: [(name: String, value: Bool)] {
        guard let agent, let values = agent.outputs.lineValues else { return [] }
        return zip(agent.loaded.board.gpio?.outputs ?? [], values).map { ($0.name, $1) }
    }
}
