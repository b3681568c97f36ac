import LocusCore
import LocusDevices

/// The GNSS receiver's configuration, owned by the agent: the site's `[updates]` preset and
/// accuracy tier as receiver commands (`ReceiverPlan`), sent when the port opens, again after
/// every reopen (a replugged receiver has lost its RAM configuration), resent until answered
/// (`AcknowledgementTracker`: 1 s, 3 attempts) and reported once settled.
///
/// It never touches the port itself: `apply`, `sleep` and `wake` only queue, and the agent's
/// turn writes what is queued with `service(now:write:)` and feeds every byte read from the
/// port to `consume(_:)`. generic-nmea receivers get no commands.
struct ReceiverControl {
    static let timeoutMs: Int64 = 1_000
    static let maximumAttempts = 3
    /// A write the port's buffer had no room for (EAGAIN) is retried this much later.
    static let writeRetryNs: Int64 = 20_000_000
    /// u-blox and MediaTek receivers wake on activity on their UART RX line; the bytes
    /// themselves are lost while the receiver starts, so they are ones no parser acts on.
    static let wakeByte: UInt8 = 0xFF

    let receiver: BoardConfig.Receiver
    private(set) var preset: LiveConfiguration
    private(set) var tier: TierPolicy
    private(set) var commands: ReceiverCommandSequence
    private(set) var tracker = ReceiverControl.newTracker()
    private(set) var portOpen = false
    /// Put to sleep by `sleep` and not woken since.
    private(set) var asleep = false
    /// Writes of the current plan's commands, resends included.
    private(set) var sent = 0
    /// The last settled plan's report (without the `locus: gnss: ` prefix).
    private(set) var lastReport: String? = nil

    /// Commands before this index have been sent once (and are in the tracker, in order).
    private var nextFirstSend = 0
    /// Commands the tracker wants resent that are not written yet (bit per index).
    private var resendMask: UInt8 = 0
    private var wakePending = false
    private var sleepCommand: ReceiverCommand? = nil
    /// A u-blox backup request ends by itself after its duration.
    private var asleepUntilNs: Int64? = nil
    /// Set by a write that could not finish: nothing is written before this time.
    private var writeRetryAtNs: Int64? = nil
    /// When `apply`, `sleep` or `wake` queued something.
    private var queuedAtNs: Int64 = 0
    /// The current plan has not been reported yet.
    private var reportDue = false
    private var ubxAcknowledgements = UBXAckParser()
    private var pmtkLines = PMTKLineFinder()
    private var startupMessage = StartupMessageFinder()
    /// The receiver announced a start (a reset, a brown-out) since `takeRestart` was last asked.
    private var restartSeen = false

    init(receiver: BoardConfig.Receiver, preset: LiveConfiguration, tier: TierPolicy) {
        self.receiver = receiver
        self.preset = preset
        self.tier = tier
        commands = ReceiverPlan.commands(preset: preset, tier: tier, receiver: receiver)
    }

    static func newTracker() -> AcknowledgementTracker {
        AcknowledgementTracker(timeoutMs: timeoutMs, maximumAttempts: maximumAttempts)
    }

    /// "fitness/hundredMeters".
    var planName: String { "\(preset.preset)/\(tier.tier)" }

    // MARK: the rest of the agent's API

    /// Replaces the plan (a preset or tier change): the new commands are sent from the start with
    /// a new tracker. A sleeping receiver gets them when it is woken.
    mutating func apply(preset: LiveConfiguration, tier: TierPolicy, now: Int64) {
        self.preset = preset
        self.tier = tier
        commands = ReceiverPlan.commands(preset: preset, tier: tier, receiver: receiver)
        restartPlan()
        queuedAtNs = now
    }

    /// Puts the receiver to sleep: u-blox into backup for `durationMs` (RXM-PMREQ; it wakes by
    /// itself after that, or on `wake`), MediaTek into standby (PMTK161; until `wake`). Returns
    /// whether a sleep request was queued: false for generic-nmea receivers, a closed port, or a
    /// non-positive u-blox duration. Resends stop while the receiver sleeps.
    mutating func sleep(durationMs: Int64, now: Int64) -> Bool {
        guard portOpen else { return false }
        switch receiver {
        case .genericNMEA:
            return false
        case .ublox:
            guard let command = ReceiverPlan.sleep(durationMs: durationMs, receiver: receiver) else { return false }
            sleepCommand = command
            asleepUntilNs = now + durationMs * 1_000_000
        case .mediatek:
            sleepCommand = .pmtk(PMTK.standby())
            asleepUntilNs = nil
        }
        asleep = true
        wakePending = false
        resendMask = 0
        queuedAtNs = now
        return true
    }

    /// Wakes the receiver (a few bytes on its RX line), then sends the current plan again from
    /// the start: a receiver that was in backup may have lost its RAM configuration. A sleep
    /// request not written yet is simply dropped. Nothing for generic-nmea receivers.
    mutating func wake(now: Int64) {
        guard receiver != .genericNMEA else { return }
        if sleepCommand != nil {
            sleepCommand = nil
        } else {
            wakePending = true
        }
        asleep = false
        asleepUntilNs = nil
        restartPlan()
        queuedAtNs = now
    }

    /// `"receiver"` in `locus status`.
    var statusJSON: String {
        var json = JSONText()
        json.string("family", receiver.description)
        json.string("plan", planName)
        json.integer("commands", commands.count)
        json.integer("confirmed", tracker.count(.confirmed))
        json.integer("refused", tracker.count(.refused))
        json.integer("timedOut", tracker.count(.timedOut))
        json.integer("pending", pending)
        json.integer("sent", sent)
        json.boolean("asleep", asleep)
        return json.closed
    }

    /// Commands not yet confirmed, refused or given up on, unsent ones included.
    var pending: Int { tracker.count(.pending) + commands.count - nextFirstSend }

    // MARK: the agent's turn

    /// The port opened (first open or a reopen): the plan is sent from the start.
    mutating func portOpened(now: Int64) {
        portOpen = true
        asleep = false
        asleepUntilNs = nil
        wakePending = false
        sleepCommand = nil
        writeRetryAtNs = nil
        ubxAcknowledgements = UBXAckParser()
        pmtkLines = PMTKLineFinder()
        restartPlan()
        queuedAtNs = now
    }

    /// Whether the receiver announced a start since the last call. A receiver that restarted
    /// without its port going away (a reset, a power glitch on the module) has lost its RAM
    /// configuration too: the caller then calls `restarted(now:)`.
    mutating func takeRestart() -> Bool {
        defer { restartSeen = false }
        return restartSeen
    }

    /// The receiver restarted: it is awake, and gets the plan from the start.
    mutating func restarted(now: Int64) {
        asleep = false
        asleepUntilNs = nil
        wakePending = false
        sleepCommand = nil
        restartPlan()
        queuedAtNs = now
    }

    /// The port went away: nothing is written until it opens again (and then all is resent).
    mutating func portLost() {
        portOpen = false
        writeRetryAtNs = nil
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
    mutating func consume(_ bytes: UnsafeRawBufferPointer) {
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
    mutating func service(now: Int64, write: (UnsafeRawBufferPointer) -> SystemError?) -> Bool {
        guard portOpen, receiver != .genericNMEA else { return false }
        if let retry = writeRetryAtNs {
            guard now >= retry else { return false }
            writeRetryAtNs = nil
        }
        if let until = asleepUntilNs, now >= until {
            // The backup period is over: the receiver restarted by itself.
            asleep = false
            asleepUntilNs = nil
        }
        let time = ReceiverControl.time(now)
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
    mutating func settledReport() -> (text: String, allConfirmed: Bool) {
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
    var nextDeadlineNs: Int64? {
        guard portOpen, receiver != .genericNMEA else { return nil }
        if let retry = writeRetryAtNs { return retry }
        if wakePending || sleepCommand != nil || (!asleep && (nextFirstSend < commands.count || resendMask != 0)) {
            return queuedAtNs
        }
        if reportDue && !asleep && tracker.isSettled { return queuedAtNs }
        var deadline = asleepUntilNs
        if !asleep {
            for index in 0..<tracker.count {
                let entry = tracker.entry(index)
                guard entry.status == .pending else { continue }
                let due = entry.lastSentNs + ReceiverControl.timeoutMs * 1_000_000
                deadline = min(deadline ?? due, due)
            }
        }
        return deadline
    }

    // MARK: helpers

    /// The tracker's clock is the agent's monotonic clock (only differences matter).
    @_noAllocation
    static func time(_ monotonicNs: Int64) -> UTCTime {
        UTCTime(seconds: monotonicNs / 1_000_000_000, nanoseconds: Int32(monotonicNs % 1_000_000_000))
    }

    private mutating func send(_ command: ReceiverCommand, _ write: (UnsafeRawBufferPointer) -> SystemError?, now: Int64) -> Bool {
        let error: SystemError?
        switch command {
        case .ubx(let frame): error = frame.withUnsafeBytes { write($0) }
        case .pmtk(let sentence): error = sentence.withUnsafeBytes { write($0) }
        }
        return finished(error, now: now)
    }

    private mutating func send(wakeUp write: (UnsafeRawBufferPointer) -> SystemError?, now: Int64) -> Bool {
        let bytes = InlineArray<8, UInt8>(repeating: ReceiverControl.wakeByte)
        let error = bytes.span.withUnsafeBytes { write($0) }
        return finished(error, now: now)
    }

    /// A full buffer is retried shortly; any other failure means the port is going away (the
    /// read side notices and the reopen sends everything again), so it is retried much later.
    private mutating func finished(_ error: SystemError?, now: Int64) -> Bool {
        guard let error else { return true }
        writeRetryAtNs = now + (error == .wouldBlock ? ReceiverControl.writeRetryNs : ReceiverControl.timeoutMs * 1_000_000)
        return false
    }

    /// A command as a technician looks it up: "CFG-PM2", "PMTK886".
    static func name(_ command: ReceiverCommand) -> String {
        switch command {
        case .ubx(let frame):
            switch frame.message {
            case .cfgNav5: return "CFG-NAV5"
            case .cfgRate: return "CFG-RATE"
            case .cfgRxm: return "CFG-RXM"
            case .cfgPm2: return "CFG-PM2"
            case .cfgMsg: return "CFG-MSG"
            case .rxmPmreq: return "RXM-PMREQ"
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
struct PMTKLineFinder {
    static let capacity = 82
    static let prefix: StaticString = "$PMTK001,"

    private var storage = InlineArray<82, UInt8>(repeating: 0)
    private var count = 0
    private var collecting = false

    /// Feeds one byte; true when it ended a candidate line, which `acknowledgement()` then reads
    /// ('$' up to the line end, without CR/LF).
    @_noAllocation
    mutating func push(_ byte: UInt8) -> Bool {
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
    func acknowledgement() -> PMTKAcknowledgement? {
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
struct StartupMessageFinder {
    static let ublox: StaticString = "u-blox.com"
    static let mediatek: StaticString = "$PMTK010,001"
    private var matched = 0

    /// True when `byte` completes `marker`.
    @_noAllocation
    mutating func push(_ byte: UInt8, _ marker: StaticString) -> Bool {
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

extension Agent {
    /// Writes what the receiver control has queued and logs a settled plan. Called after the
    /// port may have opened and at the end of each turn.
    func serviceReceiver(_ now: Int64) {
        guard hasGNSS, gnss.isOpen else { return }
        guard receiver.service(now: now, write: { gnss.write($0) }) else { return }
        let report = receiver.settledReport()
        if report.allConfirmed {
            AgentLog.info("locus: gnss: \(report.text)")
        } else {
            AgentLog.warning("locus: gnss: \(report.text)")
        }
    }
}
