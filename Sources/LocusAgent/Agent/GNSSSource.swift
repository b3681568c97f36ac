import LocusCore
import LocusDevices

/// The GNSS receiver's port: opened (and reopened with backoff when it goes away), read one
/// buffer a turn, its bytes decoded into fixes (NMEA) and watched for the receiver control's
/// answers; the receiver configured for the radios' preset and tier (`ReceiverControl`, which
/// only queues: `writeReceiverQueue` writes what it queued).
///
/// Fixes go to a buffer the loop takes them from (`fixCount`, `fix(_:)`): they are decided, logged
/// and streamed by other components, in the loop, never from inside a read. The port itself, its
/// path, its failed opens and its losses are a type of their own (`GNSSPort`).
final class GNSSSource: LoopComponent {
    /// The shortest sentence that can complete an epoch: "$GPGGA" and a line end (the framer
    /// passes no less, even with `allow_missing_checksum`).
    static let shortestSentenceBytes = 7
    /// Fixes one read can produce: a full read buffer of the shortest sentences, and the epoch
    /// the first of them closes. `read` reads one buffer a turn, so this bounds a turn.
    static let fixCapacity = SerialReader.defaultBufferSize / shortestSentenceBytes + 1

    /// nil on a board without a receiver (no `[gnss]`).
    private var port: GNSSPort?
    /// The port's path ("" without one): a constant here, so the calls that log with it (every
    /// turn's health check and read) take it without copying it out of the port.
    private let path: String
    private var decoder: NMEADecoder
    /// The receiver's configuration for the radios' preset and tier.
    private(set) var receiver: ReceiverControl
    private let fixes: UnsafeMutableBufferPointer<Fix>
    /// Timed fixes the last `read` decoded, in `fix(_:)`.
    private(set) var fixCount = 0
    private var readIndex: PollSet.Index? = nil
    /// Timed fixes since start, and the newest.
    private(set) var fixesDecoded = 0
    private(set) var lastFix: Fix? = nil
    /// A port that stays open while the receiver falls silent is healed step by step.
    private(set) var healing: ReceiverHealing
    /// A board line the healing wants driven (taken by the loop for `Outputs`).
    private var lineRequest: ReceiverHealing.LineRequest? = nil

    init(board: BoardConfig, stateDirectory: String, settings: LiveUpdateSettings, health: SiteConfig.Health = SiteConfig.Health(),
         now: MonotonicInstant = MonotonicClock.instant) {
        if let gnss = board.gnss {
            path = Paths.resolve(gnss.device, relativeTo: stateDirectory)
            port = GNSSPort(path: path, baud: gnss.baud)
            decoder = NMEADecoder(allowMissingChecksum: gnss.allowMissingChecksum)
        } else {
            path = ""
            port = nil
            decoder = NMEADecoder()
        }
        // The same preset and tier the site updater uses (`LiveUpdates` changes them by order).
        receiver = ReceiverControl(receiver: board.gnss?.receiver ?? .genericNMEA, preset: settings.configuration, tier: settings.tier)
        healing = ReceiverHealing(receiver: receiver.receiver, lines: board.gnss?.lines ?? BoardConfig.RadioLines(), health: health, now: now)
        precondition((port?.reader.bufferSize ?? 0) <= SerialReader.defaultBufferSize, "the fix buffer is sized for one default read buffer")
        fixes = .allocate(capacity: GNSSSource.fixCapacity)
    }

    deinit { fixes.deallocate() }

    var isConfigured: Bool { port != nil }

    /// The port while it is open.
    var descriptor: Descriptor? { port?.descriptor }

    /// What `LiveUpdates` needs to know to ask the receiver to sleep.
    var receiverState: ReceiverState { ReceiverState(receiver: receiver.receiver, portOpen: receiver.portOpen) }

    // MARK: the loop's surface

    var maximumDescriptors: Int { 1 }

    func register(in poll: inout PollSet) { readIndex = poll.add(port?.descriptor) }

    func deadlines(_ next: inout NextDeadline) {
        guard isConfigured else { return }
        if let attempt = port?.reader.nextAttemptAtNs { next.consider(MonotonicInstant(nanoseconds: attempt)) }
        next.consider(receiver.nextDeadline)
        if receiverShouldTalk { next.consider(healing.ladder.nextDeadline) }
    }

    /// The port is open and the receiver awake: it should be sending sentences.
    private var receiverShouldTalk: Bool { (port?.isOpen ?? false) && !receiver.asleep }

    /// Every turn, after the read: a silent receiver's next healing step when it is due.
    func checkHealth(_ now: AgentTime) {
        guard isConfigured else { return }
        if let request = healing.check(now.monotonic, expected: receiverShouldTalk, receiver: &receiver, path: path,
                                       baud: port?.reader.baud ?? 0) {
            lineRequest = request
        }
    }

    /// A reset pulse or power cut the healing asked for, once.
    func takeLineRequest() -> ReceiverHealing.LineRequest? {
        defer { lineRequest = nil }
        return lineRequest
    }

    /// Opens the port when its retry time has come; a port just opened gets the plan from the start.
    func openIfDue(_ now: AgentTime) {
        if port?.openIfDue(now) == true { receiver.portOpened(now: now.monotonic) }
    }

    /// Writes what the receiver control has queued, and logs a plan once it has settled.
    func writeReceiverQueue(_ now: AgentTime) {
        // Nothing is due before the receiver control's deadline (most turns, and always for a
        // generic-nmea receiver).
        guard let due = receiver.nextDeadline, now.monotonic >= due, let portDescriptor = port?.descriptor else { return }
        guard receiver.service(now: now.monotonic, write: { SerialReader.write($0, to: portDescriptor) }) else { return }
        let report = receiver.settledReport()
        if report.allConfirmed {
            AgentLog.info("locus: gnss: \(report.text)")
        } else {
            AgentLog.warning("locus: gnss: \(report.text)")
        }
    }

    /// Reads one buffer if the port is ready: the receiver control sees every byte, the decoder
    /// turns them into fixes for the loop to take.
    func read(_ poll: borrowing PollSet, _ now: AgentTime) {
        fixCount = 0
        guard poll.readable(readIndex) else { return }
        let event = port?.reader.read(now: now.monotonic.nanoseconds, maximumReads: 1) { bytes in
            receiver.consume(bytes)
            decoder.consume(bytes) { fix in store(fix) }
        }
        healing.observe(intactSentences: decoder.statistics.intact, now: now.monotonic, path: path)
        if case .lost(let error)? = event { port?.lost(error) }
    }

    func fix(_ index: Int) -> Fix {
        precondition(index >= 0, "a fix of the last read")
        precondition(index < fixCount, "a fix of the last read")
        return fixes[index]
    }

    /// After the loop has taken the fixes: a receiver that announced a restart is configured
    /// again (true: the pause is told too), and a lost port is reported; it reopens later.
    func endRead(_ now: AgentTime) -> Bool {
        let restarted = receiver.takeRestart()
        if restarted {
            AgentLog.warning("locus: gnss: the receiver restarted (its start-up message); configuring it again")
            receiver.restarted(now: now.monotonic)
        }
        if case .some(let error) = port?.takeLoss() {
            receiver.portLost()
            AgentLog.warning("locus: gnss: \(path) went away (\(error.map { "\($0)" } ?? "end of file")); reopening")
        }
        return restarted
    }

    /// What `LiveUpdates` decided for the receiver (queued; written by `writeReceiverQueue`).
    func apply(_ order: ReceiverOrder, _ now: AgentTime) {
        switch order {
        case .sleep(let durationMs): _ = receiver.sleep(durationMs: durationMs, now: now.monotonic)
        case .wake: receiver.wake(now: now.monotonic)
        case .plan(let preset, let tier): receiver.apply(preset: preset, tier: tier, now: now.monotonic)
        }
    }

    func status(into line: inout JSONWriter) {
        line.beginObject("gnss")
        line.boolean("configured", isConfigured)
        if isConfigured {
            line.string("device", path)
            line.boolean("open", port?.isOpen ?? false)
            line.integer("bytes", port?.reader.bytesRead ?? 0)
            line.integer("losses", port?.reader.losses ?? 0)
            line.integer("fixes", fixesDecoded)
            if let time = lastFix?.time { line.string("last_fix", time.iso8601) }
            let counts = decoder.statistics
            line.integer("sentences", counts.read)
            line.integer("rejected", counts.rejected)
            line.key("receiver")
            receiver.status(into: &line)
            healing.status(into: &line, now: MonotonicClock.instant)
        }
        line.endObject()
    }

    /// SIGHUP: a healing that gave up starts afresh ([health] itself is read at start).
    func reload(_ config: LoadedConfig, now: AgentTime) { healing.reset(now.monotonic) }

    func shutdown(now: AgentTime) { port?.reader.close() }

    // MARK: the fix buffer

    /// A fix the decoder completed; one without a time is of no use to the agent (it decides,
    /// logs and streams on fix time).
    private func store(_ fix: Fix) {
        guard fix.time != nil else { return }
        // Locals, not `self`, in the autoclosure: capturing self would retain it.
        let count = fixCount, capacity = fixes.count
        precondition(count < capacity, "more fixes in one read than GNSSSource.fixCapacity")
        fixes[fixCount] = fix
        fixCount += 1
        fixesDecoded += 1
        lastFix = fix
    }
}

/// What the receiver can do now, for `LiveUpdates` to decide with (a value the loop passes).
struct ReceiverState {
    let receiver: BoardConfig.Receiver
    let portOpen: Bool

    /// Whether a sleep request for `durationMs` would be queued (see `ReceiverControl.sleep`).
    func canSleep(durationMs: Int64) -> Bool {
        ReceiverControl.canSleep(receiver, portOpen: portOpen, durationMs: durationMs)
    }
}

/// What `LiveUpdates` asks of the receiver, in order; the loop hands each to the GNSS source.
enum ReceiverOrder {
    /// Into its lowest-power mode (u-blox backup for the duration, MediaTek standby).
    case sleep(durationMs: Int64)
    case wake
    /// The radios' preset and tier changed.
    case plan(LiveConfiguration, TierPolicy)
}
