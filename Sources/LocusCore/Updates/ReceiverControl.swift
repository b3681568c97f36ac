/// The GNSS receiver's configuration, owned by the agent: the site's `[updates]` preset and
/// accuracy tier as receiver commands (`ReceiverPlan`), sent when the port opens, again after
/// every reopen (a replugged receiver has lost its RAM configuration), resent until answered
/// (`AcknowledgementTracker`: 1 s, 3 attempts) and reported once settled.
///
/// It never touches the port itself: `apply`, `sleep` and `wake` only queue, and the GNSS
/// source writes what is queued with `service(now:write:)` and feeds every byte read from the
/// port to `consume(_:)`. generic-nmea receivers get no commands. Its clock is the monotonic
/// one: every `now` and deadline is a `MonotonicInstant`.
public struct ReceiverControl {
    /// What a write to the port did (the port's own error type stays with the port).
    public enum PortWrite: Equatable, Sendable {
        case written
        /// The port's output buffer had no room (EAGAIN): retried `writeRetryNs` later.
        case full
        /// Any other failure: the port is going away; retried much later (the reopen resends all).
        case failed
    }

    public static let timeoutMs: Int64 = 1_000
    public static let maximumAttempts = 3
    /// A write the port's buffer had no room for (EAGAIN) is retried this much later.
    public static let writeRetryNs: Int64 = 20_000_000
    /// u-blox and MediaTek receivers wake on activity on their UART RX line; the bytes
    /// themselves are lost while the receiver starts, so they are ones no parser acts on.
    public static let wakeByte: UInt8 = 0xFF

    public let receiver: BoardConfig.Receiver
    public private(set) var preset: LiveConfiguration
    public private(set) var tier: TierPolicy
    public private(set) var commands: ReceiverCommandSequence
    public private(set) var tracker = ReceiverControl.newTracker()
    public private(set) var portOpen = false
    /// Put to sleep by `sleep` and not woken since.
    public private(set) var asleep = false
    /// Writes of the current plan's commands, resends included.
    public private(set) var sent = 0
    /// The last settled plan's report (without the `locus: gnss: ` prefix).
    public private(set) var lastReport: String? = nil

    /// Commands before this index have been sent once (and are in the tracker, in order).
    private var nextFirstSend = 0
    /// Commands the tracker wants resent that are not written yet (bit per index).
    private var resendMask: UInt8 = 0
    private var wakePending = false
    private var sleepCommand: ReceiverCommand? = nil
    /// A restart request from the self-healing (not acknowledged: the start-up message answers).
    private var resetCommand: ReceiverCommand? = nil
    /// A u-blox backup request ends by itself after its duration.
    private var asleepUntil: MonotonicInstant? = nil
    /// Set by a write that could not finish: nothing is written before this time.
    private var writeRetryAt: MonotonicInstant? = nil
    /// When `apply`, `sleep` or `wake` queued something.
    private var queuedAt = MonotonicInstant(nanoseconds: 0)
    /// The current plan has not been reported yet.
    private var reportDue = false
    private var ubxAcknowledgements = UBXAckParser()
    private var pmtkLines = PMTKLineFinder()
    private var startupMessage = StartupMessageFinder()
    /// The receiver announced a start (a reset, a brown-out) since `takeRestart` was last asked.
    private var restartSeen = false

    public init(receiver: BoardConfig.Receiver, preset: LiveConfiguration, tier: TierPolicy) {
        self.receiver = receiver
        self.preset = preset
        self.tier = tier
        commands = ReceiverPlan.commands(preset: preset, tier: tier, receiver: receiver)
    }

    static func newTracker() -> AcknowledgementTracker {
        AcknowledgementTracker(timeoutMs: timeoutMs, maximumAttempts: maximumAttempts)
    }

    /// "fitness/hundredMeters".
    public var planName: String { "\(preset.preset)/\(tier.tier)" }

    // MARK: the rest of the agent's API

    /// Replaces the plan (a preset or tier change): the new commands are sent from the start with
    /// a new tracker. A sleeping receiver gets them when it is woken.
    public mutating func apply(preset: LiveConfiguration, tier: TierPolicy, now: MonotonicInstant) {
        self.preset = preset
        self.tier = tier
        commands = ReceiverPlan.commands(preset: preset, tier: tier, receiver: receiver)
        restartPlan()
        queuedAt = now
    }

    /// Puts the receiver to sleep: u-blox into backup for `durationMs` (RXM-PMREQ; it wakes by
    /// itself after that, or on `wake`), MediaTek into standby (PMTK161; until `wake`). Returns
    /// whether a sleep request was queued: false for generic-nmea receivers, a closed port, or a
    /// non-positive u-blox duration. Resends stop while the receiver sleeps.
    public mutating func sleep(durationMs: Int64, now: MonotonicInstant) -> Bool {
        guard ReceiverControl.canSleep(receiver, portOpen: portOpen, durationMs: durationMs) else { return false }
        switch receiver {
        case .genericNMEA:
            return false
        case .ublox:
            guard let command = ReceiverPlan.sleep(durationMs: durationMs, receiver: receiver) else { return false }
            sleepCommand = command
            asleepUntil = now + durationMs * 1_000_000
        case .mediatek:
            sleepCommand = .pmtk(PMTK.standby())
            asleepUntil = nil
        }
        asleep = true
        wakePending = false
        resendMask = 0
        queuedAt = now
        return true
    }

    /// Whether `sleep(durationMs:now:)` queues a request, for a caller that decides before
    /// asking (the live updates, from a `ReceiverState` value).
    public static func canSleep(_ receiver: BoardConfig.Receiver, portOpen: Bool, durationMs: Int64) -> Bool {
        guard portOpen else { return false }
        switch receiver {
        case .genericNMEA: return false
        case .ublox: return ReceiverPlan.sleep(durationMs: durationMs, receiver: receiver) != nil
        case .mediatek: return true
        }
    }

    /// Wakes the receiver (a few bytes on its RX line), then sends the current plan again from
    /// the start: a receiver that was in backup may have lost its RAM configuration. A sleep
    /// request not written yet is simply dropped. Nothing for generic-nmea receivers.
    public mutating func wake(now: MonotonicInstant) {
        guard receiver != .genericNMEA else { return }
        if sleepCommand != nil {
            sleepCommand = nil
        } else {
            wakePending = true
        }
        asleep = false
        asleepUntil = nil
        restartPlan()
        queuedAt = now
    }

    // MARK: self-healing (a receiver that went silent)

    /// Sends the whole plan again from the start (the first step for a silent receiver: a
    /// receiver that lost its configuration may have lost its sentence rates with it).
    public mutating func resendPlan(now: MonotonicInstant) {
        guard receiver != .genericNMEA else { return }
        restartPlan()
        queuedAt = now
    }

    /// Queues a restart: u-blox CFG-RST (hardware reset; a cold start when `cold`), MediaTek
    /// PMTK101 hot start or, when `cold`, PMTK104 full cold start (factory settings). The
    /// receiver's start-up message then brings the plan again (`takeRestart`). Returns the
    /// command's name, or nil for a generic-nmea receiver (which has no command for it).
    public mutating func reset(cold: Bool, now: MonotonicInstant) -> StaticString? {
        switch receiver {
        case .genericNMEA:
            return nil
        case .ublox:
            resetCommand = .ubx(UBX.cfgRst(coldStart: cold))
        case .mediatek:
            resetCommand = .pmtk(cold ? PMTK.fullColdStart() : PMTK.hotStart())
        }
        asleep = false
        asleepUntil = nil
        sleepCommand = nil
        queuedAt = now
        switch (receiver, cold) {
        case (.ublox, false): return "UBX CFG-RST hardware reset, hot start"
        case (.ublox, true): return "UBX CFG-RST hardware reset, cold start"
        case (_, false): return "PMTK101 hot start"
        case (_, true): return "PMTK104 full cold start"
        }
    }

    /// The longest the receiver is silent by design under the plan: the period of a duty
    /// cycle that fixes once per period (0 when it reports continuously, or has no plan).
    public var quietPeriodMs: Int64 {
        guard receiver != .genericNMEA else { return 0 }
        switch tier.dutyCycle {
        case .continuous: return preset.fixIntervalMs
        case .cyclicTracking(let periodMs), .onOff(let periodMs): return periodMs
        }
    }

    /// `"receiver"` in `locus status`: an object value (the caller wrote its key).
    public func status(into line: inout JSONWriter) {
        line.beginObject()
        line.string("family", receiver.description)
        line.string("plan", planName)
        line.integer("commands", commands.count)
        line.integer("confirmed", tracker.count(.confirmed))
        line.integer("refused", tracker.count(.refused))
        line.integer("timedOut", tracker.count(.timedOut))
        line.integer("pending", pending)
        line.integer("sent", sent)
        line.boolean("asleep", asleep)
        line.endObject()
    }

    /// The same as a String (tests, and a technician's debugging).
    public var statusJSON: String {
        var line = JSONWriter(capacity: 512)
        status(into: &line)
        return line.string
    }

    /// Commands not yet confirmed, refused or given up on, unsent ones included.
    public var pending: Int { tracker.count(.pending) + commands.count - nextFirstSend }

    // MARK: the agent's turn

    /// The port opened (first open or a reopen): the plan is sent from the start.
    public mutating func portOpened(now: MonotonicInstant) {
        portOpen = true
        asleep = false
        asleepUntil = nil
        wakePending = false
        sleepCommand = nil
        resetCommand = nil
        writeRetryAt = nil
        ubxAcknowledgements = UBXAckParser()
        pmtkLines = PMTKLineFinder()
        restartPlan()
        queuedAt = now
    }

    /// Whether the receiver announced a start since the last call. A receiver that restarted
    /// without its port going away (a reset, a power glitch on the module) has lost its RAM
    /// configuration too: the caller then calls `restarted(now:)`.
    public mutating func takeRestart() -> Bool {
        defer { restartSeen = false }
        return restartSeen
    }

    /// The receiver restarted: it is awake, and gets the plan from the start.
    public mutating func restarted(now: MonotonicInstant) {
        asleep = false
        asleepUntil = nil
        wakePending = false
        sleepCommand = nil
        restartPlan()
        queuedAt = now
    }

    /// The port went away: nothing is written until it opens again (and then all is resent).
    public mutating func portLost() {
        portOpen = false
        writeRetryAt = nil
    }

    private mutating func restartPlan() {
        tracker = ReceiverControl.newTracker()
        nextFirstSend = 0
        resendMask = 0
        sent = 0
        reportDue = commands.count > 0
    }

    /// Every byte read from the port: UBX ACK-ACK/ACK-NAK (u-blox) or PMTK001 lines (MediaTek)
    /// go to the tracker. The NMEA decoder reads the same bytes separately.
    @_noAllocation
    public mutating func consume(_ bytes: UnsafeRawBufferPointer) {
        switch receiver {
        case .genericNMEA:
            return
        case .ublox:
            for byte in bytes {
                if let acknowledgement = ubxAcknowledgements.push(byte) { tracker.observe(acknowledgement) }
                if startupMessage.push(byte, StartupMessageFinder.ublox) { restartSeen = true }
            }
        case .mediatek:
            for byte in bytes {
                if startupMessage.push(byte, StartupMessageFinder.mediatek) { restartSeen = true }
                guard pmtkLines.push(byte) else { continue }
                if let acknowledgement = pmtkLines.acknowledgement() { tracker.observe(acknowledgement) }
            }
        }
    }

    /// Writes what is due, in order: wake bytes, commands not sent yet, resends the tracker asks
    /// for, a sleep request. A write that finds the port's buffer full stops here and is retried
    /// `writeRetryNs` later. Returns true once per plan, when it has settled: `settledReport()`
    /// then says how (for the log). Not a hot path (it returns at once unless something is
    /// due), so it is not `@_noAllocation`: it calls the port's write.
    public mutating func service(now: MonotonicInstant, write: (UnsafeRawBufferPointer) -> PortWrite) -> Bool {
        guard portOpen, receiver != .genericNMEA else { return false }
        if let retry = writeRetryAt {
            guard now >= retry else { return false }
            writeRetryAt = nil
        }
        if let until = asleepUntil, now >= until {
            // The backup period is over: the receiver restarted by itself.
            asleep = false
            asleepUntil = nil
        }
        let time = ReceiverControl.time(now)
        if let command = resetCommand {
            guard send(command, write, now: now) else { return false }
            resetCommand = nil
        }
        if wakePending {
            guard send(wakeUp: write, now: now) else { return false }
            wakePending = false
        }
        if !asleep {
            while nextFirstSend < commands.count {
                let command = commands[nextFirstSend]
                guard send(command, write, now: now) else { return false }
                tracker.sent(command, now: time)
                nextFirstSend += 1
                sent += 1
            }
            var due = resendMask
            tracker.resends(now: time) { index in due |= UInt8(1) << UInt8(index) }
            resendMask = due
            for index in 0..<commands.count where resendMask & (UInt8(1) << UInt8(index)) != 0 {
                guard send(commands[index], write, now: now) else { return false }
                resendMask &= ~(UInt8(1) << UInt8(index))
                sent += 1
            }
        }
        if let command = sleepCommand {
            guard send(command, write, now: now) else { return false }
            sleepCommand = nil
        }
        guard reportDue, !asleep, nextFirstSend == commands.count, tracker.isSettled else { return false }
        reportDue = false
        return true
    }

    /// The report of the plan that `service` just said has settled, kept in `lastReport`.
    public mutating func settledReport() -> (text: String, allConfirmed: Bool) {
        let confirmed = tracker.count(.confirmed)
        var text = "receiver configured for \(planName): \(confirmed) of \(commands.count) commands confirmed"
        for index in 0..<tracker.count {
            let entry = tracker.entry(index)
            let name = ReceiverControl.name(commands[index])
            switch entry.status {
            case .refused:
                switch entry.pmtkFlag {
                case .unsupported?: text += "; \(name) not supported by this firmware (PMTK001 flag 1)"
                case .invalid?: text += "; \(name) rejected as invalid (PMTK001 flag 0)"
                case .failed?: text += "; \(name) accepted but failed (PMTK001 flag 2)"
                case .succeeded?, nil: text += "; \(name) refused (ACK-NAK)"
                }
            case .timedOut:
                text += "; \(name) not answered after \(entry.attempts) attempts"
            case .pending, .confirmed:
                break
            }
        }
        lastReport = text
        return (text, confirmed == commands.count)
    }

    /// When the agent must turn next for the receiver: a queued or retried write, the oldest
    /// pending command's resend time, the end of a backup period. Nil when nothing waits.
    /// A mutating get although it changes nothing: the agent asks this of the control it keeps in a
    /// class every turn, and a plain getter would be handed a copy of the whole control (1.3 KB).
    public var nextDeadline: MonotonicInstant? {
        mutating get {
            guard portOpen, receiver != .genericNMEA else { return nil }
            if let retry = writeRetryAt { return retry }
            if wakePending || sleepCommand != nil || resetCommand != nil || (!asleep && (nextFirstSend < commands.count || resendMask != 0)) {
                return queuedAt
            }
            if reportDue && !asleep && tracker.isSettled { return queuedAt }
            var deadline = asleepUntil
            if !asleep {
                for index in 0..<tracker.count {
                    let entry = tracker.entry(index)
                    guard entry.status == .pending else { continue }
                    let due = MonotonicInstant(nanoseconds: entry.lastSentNs + ReceiverControl.timeoutMs * 1_000_000)
                    deadline = min(deadline ?? due, due)
                }
            }
            return deadline
        }
    }

    // MARK: helpers

    /// The tracker keeps its times as `UTCTime`s but only ever subtracts them: it runs on the
    /// monotonic clock here, the instant's nanoseconds standing in for a time.
    @_noAllocation
    static func time(_ instant: MonotonicInstant) -> UTCTime {
        UTCTime(seconds: instant.nanoseconds / 1_000_000_000, nanoseconds: Int32(instant.nanoseconds % 1_000_000_000))
    }

    private mutating func send(_ command: ReceiverCommand, _ write: (UnsafeRawBufferPointer) -> PortWrite, now: MonotonicInstant) -> Bool {
        let result: PortWrite
        switch command {
        case .ubx(let frame): result = frame.withUnsafeBytes { write($0) }
        case .pmtk(let sentence): result = sentence.withUnsafeBytes { write($0) }
        }
        return finished(result, now: now)
    }

    private mutating func send(wakeUp write: (UnsafeRawBufferPointer) -> PortWrite, now: MonotonicInstant) -> Bool {
        let bytes = InlineArray<8, UInt8>(repeating: ReceiverControl.wakeByte)
        let result = bytes.span.withUnsafeBytes { write($0) }
        return finished(result, now: now)
    }

    /// A full buffer is retried shortly; any other failure means the port is going away (the
    /// read side notices and the reopen sends everything again), so it is retried much later.
    private mutating func finished(_ result: PortWrite, now: MonotonicInstant) -> Bool {
        switch result {
        case .written: return true
        case .full: writeRetryAt = now + ReceiverControl.writeRetryNs
        case .failed: writeRetryAt = now + ReceiverControl.timeoutMs * 1_000_000
        }
        return false
    }

    /// A command as a technician looks it up: "CFG-PM2", "PMTK886".
    public static func name(_ command: ReceiverCommand) -> String {
        switch command {
        case .ubx(let frame):
            switch frame.message {
            case .cfgNav5: return "CFG-NAV5"
            case .cfgRate: return "CFG-RATE"
            case .cfgRxm: return "CFG-RXM"
            case .cfgPm2: return "CFG-PM2"
            case .cfgMsg: return "CFG-MSG"
            case .rxmPmreq: return "RXM-PMREQ"
            case .cfgRst: return "CFG-RST"
            default:
                return "UBX \(hex(frame.message.messageClass)) \(hex(frame.message.id))"
            }
        case .pmtk(let sentence):
            // "$PMTKnnn": the name is the packet type's three digits after the prefix.
            return String(decoding: sentence[1..<8], as: UTF8.self)
        }
    }

    static func hex(_ byte: UInt8) -> String {
        let digits: StaticString = "0123456789ABCDEF"
        return "0x" + String(decoding: [digits.utf8Start[Int(byte >> 4)], digits.utf8Start[Int(byte & 0x0F)]], as: UTF8.self)
    }
}

/// Finds `$PMTK001,...` lines in the receiver's output, one byte at a time, in fixed storage:
/// a line is dropped as soon as it cannot be one (another sentence, or longer than NMEA's 82
/// bytes), so NMEA and UBX traffic costs a comparison per byte.
public struct PMTKLineFinder {
    public static let capacity = 82
    public static let prefix: StaticString = "$PMTK001,"

    private var storage = InlineArray<82, UInt8>(repeating: 0)
    private var count = 0
    private var collecting = false

    public init() {}

    /// Feeds one byte; true when it ended a candidate line, which `acknowledgement()` then reads
    /// ('$' up to the line end, without CR/LF).
    @_noAllocation
    public mutating func push(_ byte: UInt8) -> Bool {
        if byte == UInt8(ascii: "$") {
            storage[0] = byte
            count = 1
            collecting = true
            return false
        }
        guard collecting else { return false }
        if byte == 0x0D || byte == 0x0A {
            collecting = false
            return count > PMTKLineFinder.prefix.utf8CodeUnitCount
        }
        if count < PMTKLineFinder.prefix.utf8CodeUnitCount && byte != PMTKLineFinder.prefix.utf8Start[count] {
            collecting = false
            return false
        }
        guard count < PMTKLineFinder.capacity else {
            collecting = false
            return false
        }
        storage[count] = byte
        count += 1
        return false
    }

    /// The candidate line ('$' up to the line end, without CR/LF) as a PMTK001, if it is one.
    /// Not generic: a generic closure would need type metadata on the hot path.
    @_noAllocation
    public func acknowledgement() -> PMTKAcknowledgement? {
        let count = self.count
        var copy = storage
        return withUnsafeBytes(of: &copy) { raw in
            PMTKAcknowledgement(sentence: UnsafeBufferPointer(start: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), count: count))
        }
    }
}

/// Finds a receiver's start-up announcement in its output, byte by byte: u-blox's boot banner
/// (`$GxTXT,01,01,02,u-blox AG - www.u-blox.com*..`, [M8] "UBX-INF / NMEA-Standard-TXT" at power
/// up) and MediaTek's `$PMTK010,001` ([PMTK] "Packet Type: 010 PMTK_SYS_MSG", 001 = startup).
/// Each marker's first character occurs in it only once, so a mismatch can restart at that
/// character without missing an overlapping match.
public struct StartupMessageFinder {
    public static let ublox: StaticString = "u-blox.com"
    public static let mediatek: StaticString = "$PMTK010,001"
    private var matched = 0

    public init() {}

    /// True when `byte` completes `marker`.
    @_noAllocation
    public mutating func push(_ byte: UInt8, _ marker: StaticString) -> Bool {
        let text = marker.utf8Start
        if byte == text[matched] {
            matched += 1
        } else {
            matched = byte == text[0] ? 1 : 0
        }
        guard matched == marker.utf8CodeUnitCount else { return false }
        matched = 0
        return true
    }
}
