import LocusCore
import LocusDevices

/// The Bluetooth adapter's self-healing, owned by `BluetoothSource`: an adapter that scans while
/// beacons are expected and hears no advertisement at all for `[health] ble_silence` (or whose
/// command goes unanswered) is climbed out of step by step (`HealLadder`):
///
///   1. the scan restarted (raw: disabled and enabled again; kernel: the monitor removed and
///      added again, which makes the kernel restart its passive scan),
///   2. the controller reset by the kernel (mgmt Set Powered off and on: HCI_Reset and the whole
///      initialisation),
///   3. the adapter taken down and up (HCIDEVDOWN/HCIDEVUP, which works when mgmt is stuck),
///   4. its power cut through the board's `bluetooth.power_line` (a USB hub port, an enable pin),
///
/// each logged with its reason and counted in `locus status`; a recovery is credited to the step
/// before it, and a give-up is logged once with what to check. "Heard" is any advertising report,
/// a beacon's or not: the radio works even where no beacon of the site is in range.
struct AdapterHealing {
    enum Step: Equatable {
        case rescan, resetController, downUp, powerCycle

        var name: StaticString {
            switch self {
            case .rescan: return "rescan"
            case .resetController: return "reset"
            case .downUp: return "down_up"
            case .powerCycle: return "power"
            }
        }

        var description: String {
            switch self {
            case .rescan: return "scan restart"
            case .resetController: return "controller reset"
            case .downUp: return "adapter down and up"
            case .powerCycle: return "power cycle"
            }
        }
    }

    let steps: [Step]
    let lines: BoardConfig.RadioLines
    private(set) var ladder: HealLadder
    /// Advertising reports counted so far, to notice new ones.
    private var reportsSeen = 0
    private(set) var commandTimeouts = 0

    init(lines: BoardConfig.RadioLines, health: SiteConfig.Health, now: MonotonicInstant) {
        var steps: [Step] = [.rescan, .resetController, .downUp]
        if lines.power != nil { steps.append(.powerCycle) }
        self.steps = steps
        self.lines = lines
        ladder = HealLadder(silenceMs: health.bleSilenceMs, settleMs: health.settleMs, rounds: health.rounds, stepCount: steps.count, now: now)
    }

    /// After a read: new reports mean the radio hears (a recovery is logged).
    mutating func observe(reports: Int, now: MonotonicInstant, adapter: String) {
        guard reports != reportsSeen else { return }
        reportsSeen = reports
        guard let recovery = ladder.heard(now) else { return }
        AgentLog.notice("locus: bluetooth: " + adapter + ": advertisements again " + recovery.text { steps[$0].description })
    }

    /// A command to the adapter went unanswered: the first step is due at once.
    mutating func commandTimedOut(_ now: MonotonicInstant) {
        commandTimeouts += 1
        ladder.unanswered(now)
    }

    /// Every turn: the step to take now, if any, logged with its reason (the caller takes it).
    mutating func check(_ now: MonotonicInstant, expected: Bool, adapter: String) -> Step? {
        guard expected else {
            ladder.hold(now)
            return nil
        }
        switch ladder.decide(now) {
        case .step(let index, let round, let silentNs)?:
            let step = steps[index]
            var what = step.description
            if step == .powerCycle, let line = lines.power { what += " (gpio " + line + ", " + Quantity.formatMs(lines.powerOffMs) + " off)" }
            let why = commandTimeouts > 0 && silentNs < ladder.silenceMs * 1_000_000 ? "a command went unanswered"
                : "no advertising report for " + Quantity.describe(nanoseconds: silentNs)
            AgentLog.warning("locus: bluetooth: " + adapter + ": " + why + "; " + what + " (step " + String(index + 1) + " of "
                             + String(steps.count) + ", round " + String(round) + " of " + String(ladder.rounds) + ")")
            return step
        case .giveUp(let silentNs)?:
            AgentLog.error("locus: bluetooth: " + adapter + ": no advertising report for " + Quantity.describe(nanoseconds: silentNs)
                            + "; gave up after " + String(ladder.rounds) + (ladder.rounds == 1 ? " round of " : " rounds of ") + steps.map { $0.description }.joined(separator: ", ")
                           + ". Check the antenna or dongle, 'rfkill list', 'dmesg' for the controller's errors, then run 'locus doctor'; "
                           + "scanning goes on and an advertisement ends this")
            return nil
        case nil:
            return nil
        }
    }

    /// `"health"` in the bluetooth status.
    func status(into line: inout JSONWriter, now: MonotonicInstant) {
        ladder.status(into: &line, names: steps.map { $0.name }, now: now)
        line.integer("command_timeouts", commandTimeouts)
    }

    mutating func reset(_ now: MonotonicInstant) { ladder.reset(now) }

    /// The step just taken needs longer before its settle counts (a power cut's off time).
    mutating func postpone(_ time: MonotonicInstant) { ladder.postpone(time) }
}
