import LocusCore
import LocusDevices

/// The GNSS receiver's self-healing, owned by `GNSSSource`: a port that stays open while the
/// receiver stops talking (a firmware hang, a brown-out that left it mute, a loose TX wire) is
/// noticed after `[health] gnss_silence` and climbed out of step by step (`HealLadder`):
///
///   1. the receiver plan sent again (u-blox, MediaTek),
///   2. the receiver reset: UBX CFG-RST / PMTK101 (a cold start, PMTK104, from the second
///      round), and the board's `gnss.reset_line` pulsed when it has one,
///   3. its power cut for `gnss.power_off` through the board's `gnss.power_line`,
///
/// each logged with its reason and counted in `locus status`, a recovery logged with the step
/// that brought it, and a give-up logged once with what to check. Steps the board or receiver
/// cannot do are left out (a generic-nmea receiver has no commands).
struct ReceiverHealing {
    enum Step: Equatable {
        case resendPlan, resetReceiver, powerCycle

        var name: StaticString {
            switch self {
            case .resendPlan: return "plan"
            case .resetReceiver: return "reset"
            case .powerCycle: return "power"
            }
        }

        var description: String {
            switch self {
            case .resendPlan: return "plan resend"
            case .resetReceiver: return "receiver reset"
            case .powerCycle: return "power cycle"
            }
        }
    }

    /// A board line the loop hands to `Outputs` (a reset pulse, a power cut).
    struct LineRequest: Equatable {
        var name: String
        var forMs: Int64
    }

    let steps: [Step]
    private let lines: BoardConfig.RadioLines
    private let configuredSilenceMs: Int64
    private(set) var ladder: HealLadder
    /// Sentences with a good checksum seen so far (the decoder's count), to notice new ones.
    private var intactSeen = 0

    init(receiver: BoardConfig.Receiver, lines: BoardConfig.RadioLines, health: SiteConfig.Health, now: MonotonicInstant) {
        var steps: [Step] = []
        if receiver != .genericNMEA { steps.append(.resendPlan) }
        if receiver != .genericNMEA || lines.reset != nil { steps.append(.resetReceiver) }
        if lines.power != nil { steps.append(.powerCycle) }
        self.steps = steps
        self.lines = lines
        configuredSilenceMs = health.gnssSilenceMs
        ladder = HealLadder(silenceMs: health.gnssSilenceMs, settleMs: health.settleMs, rounds: health.rounds, stepCount: steps.count, now: now)
    }

    /// After a read: new intact sentences mean the receiver talks (a recovery is logged).
    mutating func observe(intactSentences: Int, now: MonotonicInstant, path: String) {
        guard intactSentences != intactSeen else { return }
        intactSeen = intactSentences
        guard let recovery = ladder.heard(now) else { return }
        AgentLog.notice("locus: gnss: " + path + ": NMEA again " + recovery.text { steps[$0].description })
    }

    /// Every turn: while the receiver should talk (`expected`), the next step when due; a line
    /// to drive is returned for the loop to hand to `Outputs`.
    mutating func check(_ now: MonotonicInstant, expected: Bool, receiver: inout ReceiverControl, path: String, baud: Int) -> LineRequest? {
        guard expected else {
            ladder.hold(now)
            return nil
        }
        // A plan that fixes once a period is silent in between by design.
        if configuredSilenceMs > 0 { ladder.silenceMs = max(configuredSilenceMs, 2 * receiver.quietPeriodMs) }
        switch ladder.decide(now) {
        case .step(let index, let round, let silentNs)?:
            return take(steps[index], index, round: round, silence: Quantity.describe(nanoseconds: silentNs), &receiver, now, path: path)
        case .giveUp(let silentNs)?:
            let tried = steps.isEmpty ? "nothing to try (a generic-nmea receiver and no gnss.power_line)"
                : "\(ladder.rounds) round\(ladder.rounds == 1 ? "" : "s") of " + steps.map { $0.description }.joined(separator: ", ")
            AgentLog.error("locus: gnss: \(path): no NMEA for \(Quantity.describe(nanoseconds: silentNs)); gave up after \(tried). "
                           + "Check the receiver's power, antenna and wiring and gnss.baud (\(baud)), then run 'locus doctor'; "
                           + "reading goes on and a sentence ends this")
            return nil
        case nil:
            return nil
        }
    }

    private func take(_ step: Step, _ index: Int, round: Int, silence: String, _ receiver: inout ReceiverControl, _ now: MonotonicInstant,
                      path: String) -> LineRequest? {
        var request: LineRequest? = nil
        var what: String
        switch step {
        case .resendPlan:
            receiver.resendPlan(now: now)
            what = "sending the receiver plan (\(receiver.planName)) again"
        case .resetReceiver:
            what = "resetting the receiver"
            if let command = receiver.reset(cold: round > 1, now: now) { what += " (\(command))" }
            if let line = lines.reset {
                request = LineRequest(name: line, forMs: BoardConfig.RadioLines.resetPulseMs)
                what += ", pulsing gpio \(line)"
            }
        case .powerCycle:
            guard let line = lines.power else { return nil }
            request = LineRequest(name: line, forMs: lines.powerOffMs)
            what = "cutting its power (gpio \(line)) for \(Quantity.formatMs(lines.powerOffMs))"
        }
        AgentLog.warning("locus: gnss: \(path): no NMEA for \(silence); \(what) (step \(index + 1) of \(steps.count), round \(round) of \(ladder.rounds))")
        return request
    }

    /// `"health"` in the gnss status.
    func status(into line: inout JSONWriter, now: MonotonicInstant) {
        ladder.status(into: &line, names: steps.map { $0.name }, now: now)
    }

    /// A reload: a ladder that gave up starts afresh.
    mutating func reset(_ now: MonotonicInstant) { ladder.reset(now) }
}
