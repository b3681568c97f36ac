import LocusCore
import LocusDevices

/// Starting a program on an event (Core Location's background launch, gateway-shaped): a monitor
/// whose site entry names `start_socket` has a client that systemd starts by socket activation.
/// When an event of that monitor is logged and no connection has the monitor open (its consumer),
/// the agent connects to the socket and hangs up at once; systemd starts the socket's service,
/// which opens the monitor through control.sock and drains its events from its consumer cursor.
///
/// The connect never blocks the loop (a non-blocking AF_UNIX connect). At most one connection per
/// monitor per `intervalNs` while its events wait untaken and nobody has it open; a socket that
/// is missing or refuses is retried with backoff (`firstRetryNs` doubling to `maximumRetryNs`).
/// A monitor's events count as taken once its consumer cursor has passed them: the log says so,
/// across restarts too (at start, events a consumer had not taken before are pending again).
///
/// `[updates] start_socket` is started the same way for location (CLLocationManager's relaunch
/// for a visit or a significant change): on a visit logged, or when the device moves again after
/// standing still, while no connection has an update stream open; it waits until one opens. The
/// started program reads what it missed from the log (`visits`, `recentVisits`) and opens its
/// stream.
final class ClientStarter: LoopComponent {
    /// At most one start per monitor this often while its events wait and it has no consumer: a
    /// client that starts but does not take them is not started again and again.
    static let intervalNs: Int64 = 10_000_000_000
    static let firstRetryNs: Int64 = 1_000_000_000
    static let maximumRetryNs: Int64 = 60_000_000_000

    struct Target {
        let monitor: FixedName
        let path: String
        /// `[updates] start_socket`'s target (its `monitor` is only a name for the log).
        var isUpdates = false
        /// The newest event of the monitor that may not have been taken (0: none waits).
        var pendingSequence: UInt64 = 0
        /// Not before then (nil: at once).
        var nextAttempt: MonotonicInstant? = nil
        var retryNs: Int64 = 0
        /// A connection had the monitor open when last looked at: no deadline while it has.
        var consumerConnected = false
        var starts = 0
        var failures = 0
        var lastError: SystemError? = nil
    }

    private(set) var targets: [Target]
    /// Targets with an event waiting (the turn looks at none while this is 0).
    private var pendingCount = 0

    init(monitors: [MonitorConfig], updates: SiteConfig.Updates) {
        targets = ClientStarter.targets(monitors, updates)
    }

    private static func targets(_ monitors: [MonitorConfig], _ updates: SiteConfig.Updates) -> [Target] {
        var targets: [Target] = []
        for monitor in monitors {
            guard let path = monitor.startSocket, let name = FixedName(monitor.name) else { continue }
            targets.append(Target(monitor: name, path: path))
        }
        if let path = updates.startSocket, let name = FixedName("updates") { targets.append(Target(monitor: name, path: path, isUpdates: true)) }
        return targets
    }

    /// At start: events of a started monitor that its consumer had not taken wait again.
    func restore(_ log: EventLog) {
        for index in targets.indices where !targets[index].isUpdates {
            let monitor = targets[index].monitor
            var newest: UInt64 = 0
            do {
                try log.forEachEvent(after: log.consumerPosition(monitor)) { sequence, event in
                    if event.monitor == monitor { newest = sequence }
                    return true
                }
            } catch {
                AgentLog.warning("locus: start \(monitor): reading the log for untaken events: \(error)")
            }
            if newest > 0 { markPending(index, newest) }
        }
    }

    // MARK: the loop's surface

    /// The next attempt of each monitor whose events wait with nobody to take them.
    func deadlines(_ next: inout NextDeadline) {
        guard pendingCount > 0 else { return }
        for target in targets where target.pendingSequence > 0 && !target.consumerConnected { next.consider(target.nextAttempt) }
    }

    func status(into line: inout JSONWriter) {
        line.beginArray("start_sockets")
        for target in targets {
            line.beginObject()
            if target.isUpdates { line.boolean("updates", true) } else { line.string("monitor", target.monitor) }
            line.string("socket", target.path)
            line.integer("pending_seq", target.pendingSequence)
            line.integer("starts", target.starts)
            line.integer("failures", target.failures)
            if let error = target.lastError { line.string("last_error", error.description) }
            line.endObject()
        }
        line.endArray()
    }

    /// SIGHUP: monitors gain, change or lose their `start_socket`; one that keeps its socket keeps
    /// its state (pending events, counters).
    func reload(_ config: LoadedConfig, now: AgentTime) {
        var fresh = ClientStarter.targets(config.site.monitors, config.site.updates)
        for index in fresh.indices {
            if let old = targets.first(where: { $0.monitor == fresh[index].monitor && $0.path == fresh[index].path && $0.isUpdates == fresh[index].isUpdates }) {
                fresh[index] = old
            }
        }
        targets = fresh
        pendingCount = targets.reduce(0) { $0 + ($1.pendingSequence > 0 ? 1 : 0) }
    }

    // MARK: events and starts

    /// An event of `monitor` was logged (the events path: allocates nothing).
    func eventLogged(_ monitor: FixedName, sequence: UInt64) {
        for index in targets.indices where targets[index].monitor == monitor && !targets[index].isUpdates { markPending(index, sequence) }
    }

    /// A visit was logged (its sequence number), or the device moved again (`sequence` 0: the
    /// newest record then): `[updates] start_socket`'s program is wanted.
    func locationWanted(sequence: UInt64) {
        for index in targets.indices where targets[index].isUpdates { markPending(index, max(1, sequence)) }
    }

    private func markPending(_ index: Int, _ sequence: UInt64) {
        precondition(sequence > 0, "a logged event has a sequence number")
        if targets[index].pendingSequence == 0 { pendingCount += 1 }
        targets[index].pendingSequence = max(targets[index].pendingSequence, sequence)
        precondition(pendingCount <= targets.count, "at most one pending start a client")
    }

    /// Each monitor whose events wait: taken since (its consumer cursor, from `consumer`)? has a
    /// connection open (`consumer`)? due? then its client's socket is connected to. `consumer`
    /// gives a monitor's (open in a connection, consumer cursor).
    /// `[updates] start_socket`'s program counts as there once an update stream is open
    /// (`updateStreams`).
    func service(_ now: AgentTime, updateStreams: Int = 0, consumer: (FixedName) -> (open: Bool, position: UInt64)) {
        guard pendingCount > 0 else { return }
        for index in targets.indices where targets[index].pendingSequence > 0 {
            let (open, position) = targets[index].isUpdates ? (false, updateStreams > 0 ? UInt64.max : 0) : consumer(targets[index].monitor)
            if position >= targets[index].pendingSequence {
                targets[index].pendingSequence = 0
                pendingCount -= 1
                precondition(pendingCount >= 0, "pending starts are never negative")
                continue
            }
            targets[index].consumerConnected = open
            if open { continue }
            if let next = targets[index].nextAttempt, now.monotonic < next { continue }
            start(index, now)
        }
    }

    private func start(_ index: Int, _ now: AgentTime) {
        let target = targets[index]
        if let error = SocketActivation.touch(target.path) {
            targets[index].failures += 1
            targets[index].retryNs = min(ClientStarter.maximumRetryNs, max(ClientStarter.firstRetryNs, target.retryNs * 2))
            precondition(targets[index].retryNs > 0, "a failed start is retried after a pause")
            targets[index].nextAttempt = now.monotonic + targets[index].retryNs
            // Said once per kind of failure, not every retry.
            if target.lastError != error {
                AgentLog.warning("locus: start \(target.monitor): cannot connect to \(target.path): \(error); retrying with backoff while \(target.isUpdates ? "a visit or a move waits" : "its events wait")")
            }
            targets[index].lastError = error
            return
        }
        targets[index].starts += 1
        targets[index].retryNs = 0
        targets[index].lastError = nil
        targets[index].nextAttempt = now.monotonic + ClientStarter.intervalNs
        if target.isUpdates {
            AgentLog.info("locus: start updates: connected to \(target.path) (a visit or a move, no update stream open)")
        } else {
            AgentLog.info("locus: start \(target.monitor): connected to \(target.path) (events up to \(target.pendingSequence) wait, no consumer connected)")
        }
    }
}
