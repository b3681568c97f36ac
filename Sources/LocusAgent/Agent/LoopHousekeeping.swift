import LocusCore
import LocusDevices

/// The loop's own state: the timer it sleeps on until the next deadline, the signals it stops
/// and reloads on (SIGTERM, SIGINT, SIGHUP as a descriptor), systemd's notifications and
/// watchdog, and its counters (turns, descriptors the poll set had no room for).
final class LoopHousekeeping: LoopComponent {
    /// Why the loop cannot start.
    enum Failure: Error {
        case timer(SystemError)
        case signals(SystemError)
    }

    private var timer: DeadlineTimer
    private let signals: SignalSource
    let notifier = ServiceNotifier()
    private var nextWatchdog: MonotonicInstant? = nil
    private var signalIndex: PollSet.Index? = nil
    private var timerIndex: PollSet.Index? = nil
    /// False once SIGTERM or SIGINT arrived, or poll(2) failed: the loop ends after this turn.
    private(set) var running = true
    /// The loop ended to restart the agent (a fleet configuration a restart applies): the exit
    /// status asks the service manager for it (`Agent.restartStatus`).
    private(set) var restarting = false
    private(set) var turns = 0
    /// The poll set's refusals already logged (each new one is logged: it means a component
    /// registered more than its `maximumDescriptors`).
    private var overflowsLogged = 0

    init() throws(Failure) {
        do { timer = try DeadlineTimer() } catch { throw .timer(error) }
        do { signals = try SignalSource() } catch { throw .signals(error) }
    }

    // MARK: the loop's surface

    var maximumDescriptors: Int { 2 }

    func register(in poll: inout PollSet) {
        signalIndex = poll.add(signals.descriptor)
        timerIndex = poll.add(timer.descriptor)
    }

    func deadlines(_ next: inout NextDeadline) { next.consider(nextWatchdog) }

    func status(into line: inout JSONWriter) {
        line.beginObject("memory")
        let heap = Process.heapUsage
        line.integer("heap_in_use", heap.inUse)
        line.integer("heap_free", heap.free)
        line.endObject()
        line.beginObject("loop")
        line.integer("turns", turns)
        line.integer("poll_overflows", overflowsLogged)
        line.endObject()
    }

    func shutdown(now: AgentTime) { notifier.notify("STOPPING=1") }

    // MARK: the turn

    /// The loop starts: systemd hears READY (and the watchdog's first deadline is set).
    func start(_ now: AgentTime, status: String) {
        precondition(turns == 0, "the loop starts before its first turn")
        if let interval = notifier.watchdogIntervalNs {
            precondition(interval > 0, "the watchdog's interval is a positive duration")
            nextWatchdog = now.monotonic + interval
        }
        notifier.notify("READY=1\nSTATUS=\(status)")
    }

    /// Checks the set the components registered: a refusal (a component registered more than it
    /// said it would) is counted and logged.
    func check(_ poll: borrowing PollSet) {
        precondition(poll.count <= poll.capacity, "the poll set holds at most its capacity")
        guard poll.overflows > overflowsLogged else { return }
        overflowsLogged = poll.overflows
        AgentLog.error("locus: loop: \(overflowsLogged) descriptor(s) found the poll set full (capacity \(poll.capacity)) and were not watched")
    }

    /// Arms the timer for `deadline` and waits in poll(2) until a descriptor is ready. False when
    /// poll failed (other than by a signal): the loop stops.
    func wait(_ poll: borrowing PollSet, until deadline: MonotonicInstant?, now: AgentTime) -> Bool {
        turns += 1
        timer.arm(at: deadline, now: now.monotonic)
        let ready = poll.wait(timeoutMs: -1)
        if ready < 0 && SystemError(code: -ready) != .interrupted {
            AgentLog.error("locus: poll failed: \(SystemError(code: -ready))")
            running = false
            return false
        }
        return true
    }

    /// Ends the loop after this turn, for the service manager to start the agent again.
    func restart(_ why: String) {
        AgentLog.notice("locus: restarting: \(why)")
        running = false
        restarting = true
    }

    /// Takes the timer's expiry and the signals that arrived. SIGTERM and SIGINT end the loop;
    /// true when a SIGHUP asks for a reload.
    func service(_ poll: borrowing PollSet) -> Bool {
        if poll.readable(timerIndex) { timer.acknowledge() }
        guard poll.readable(signalIndex) else { return false }
        var reload = false
        while let signal = signals.next() {
            switch signal {
            case .terminate, .interrupt:
                AgentLog.notice("locus: \(signal == .terminate ? "SIGTERM" : "SIGINT"): stopping")
                running = false
            case .hangUp:
                reload = true
            }
        }
        return reload
    }

    /// The watchdog's ping, when due.
    func housekeeping(_ now: AgentTime) {
        guard let due = nextWatchdog, now.monotonic >= due, let interval = notifier.watchdogIntervalNs else { return }
        notifier.notify("WATCHDOG=1")
        nextWatchdog = now.monotonic + interval
        precondition(nextWatchdog! > now.monotonic, "the watchdog's next ping is after this one")
    }
}
