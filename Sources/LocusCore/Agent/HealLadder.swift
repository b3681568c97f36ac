/// A radio's self-healing, as decisions: the source that owns the radio takes the steps and
/// logs them. Pure and allocation-free, so it is tested on its own with a made-up clock.
///
/// While the radio is expected to speak (a GNSS port open with its receiver awake; an adapter
/// scanning while beacons are expected) and stays silent for `silenceMs`, the owner's steps are
/// taken in order (resend, reset, power cycle...), each given `settleMs` to show an effect before
/// the next. After the last step the next round starts again from the first; after `rounds`
/// rounds the ladder gives up (the owner says so once, with what to check) until the radio is
/// heard again or the owner resets it (a reload). The first sign of life after a step is a
/// recovery, and that step is credited with it.
///
/// While the radio is not expected to speak (`hold`), silence does not count; a ladder in the
/// middle of its steps keeps its place and gives the radio `settleMs` once it is expected again,
/// so a power cycle that takes a USB receiver's port away does not restart the ladder from the
/// first step (which could then cycle for ever).
public struct HealLadder {
    /// At most this many steps (the longest ladder: rescan, reset, down/up, power cycle).
    public static let maximumSteps = 4

    public enum Decision: Equatable, Sendable {
        /// Take `step` (0-based) in `round` (1-based); the radio has been silent `silentNs`.
        case step(Int, round: Int, silentNs: Int64)
        /// Every round of every step was taken and the radio is still silent.
        case giveUp(silentNs: Int64)
    }

    /// The radio was heard again after `step` of `round` (nil: before any step), `silentNs`
    /// after it was last heard; `afterGivingUp`: by itself, once the ladder had given up.
    public struct Recovery: Equatable, Sendable {
        public var step: Int?
        public var round: Int
        public var silentNs: Int64
        public var afterGivingUp: Bool
    }

    /// Silence that starts the ladder, ms; 0 turns healing off. The owner may change it (a
    /// receiver whose tier fixes once in ten minutes is silent for longer between fixes).
    public var silenceMs: Int64
    public let settleMs: Int64
    public let rounds: Int
    public let stepCount: Int
    /// When the radio was last heard, or when it became expected to speak.
    public private(set) var heardAt: MonotonicInstant
    /// The step taken last in this episode of silence (nil: none yet).
    public private(set) var lastStep: Int? = nil
    public private(set) var round = 1
    public private(set) var givenUp = false
    /// When the next step is due, while an episode is under way.
    private var dueAt: MonotonicInstant? = nil
    /// An unanswered command's time: the first step is due then, whatever the silence.
    private var startAt: MonotonicInstant? = nil
    /// Steps taken and recoveries credited, per step; episodes of silence; give-ups.
    public private(set) var taken = InlineArray<4, Int>(repeating: 0)
    public private(set) var healed = InlineArray<4, Int>(repeating: 0)
    public private(set) var episodes = 0
    public private(set) var giveUps = 0

    public init(silenceMs: Int64, settleMs: Int64, rounds: Int, stepCount: Int, now: MonotonicInstant) {
        precondition(stepCount <= HealLadder.maximumSteps && rounds >= 1 && settleMs > 0)
        self.silenceMs = silenceMs
        self.settleMs = settleMs
        self.rounds = rounds
        self.stepCount = stepCount
        heardAt = now
    }

    /// Whether an episode of silence is under way (a step was taken, or the ladder gave up).
    public var isHealing: Bool { lastStep != nil || givenUp }

    /// The radio spoke: a recovery when an episode was under way (the last step taken is credited).
    @_noAllocation
    public mutating func heard(_ now: MonotonicInstant) -> Recovery? {
        defer { heardAt = now }
        startAt = nil
        guard isHealing else { return nil }
        let recovery = Recovery(step: lastStep, round: min(round, rounds), silentNs: now.nanoseconds - heardAt.nanoseconds,
                                afterGivingUp: givenUp)
        if let step = lastStep, !givenUp { healed[step] += 1 }
        endEpisode()
        return recovery
    }

    /// The radio is not expected to speak now: silence does not count (see the type's comment).
    @_noAllocation
    public mutating func hold(_ now: MonotonicInstant) {
        if dueAt != nil {
            dueAt = now + settleMs * 1_000_000
        } else if !givenUp {
            heardAt = now
        }
    }

    /// A command to the radio went unanswered: a radio that does not answer will not speak
    /// either, so the first step is due now instead of after the whole silence. Nothing changes
    /// while an episode is under way (its steps keep their pace) or when healing is off.
    @_noAllocation
    public mutating func unanswered(_ now: MonotonicInstant) {
        guard silenceMs > 0, !isHealing else { return }
        startAt = min(startAt ?? now, now)
    }

    /// The step under way needs until `time` before its settle starts (a power cut that lasts
    /// longer than a moment): the next step is due no earlier than `time` + `settleMs`.
    public mutating func postpone(_ time: MonotonicInstant) {
        guard let due = dueAt else { return }
        dueAt = max(due, time + settleMs * 1_000_000)
    }

    /// Back to a healthy radio heard `now` (a reload; the owner's configuration changed).
    public mutating func reset(_ now: MonotonicInstant) {
        endEpisode()
        heardAt = now
    }

    /// The next step or the give-up, when due (call only while the radio is expected to speak).
    @_noAllocation
    public mutating func decide(_ now: MonotonicInstant) -> Decision? {
        guard silenceMs > 0, !givenUp, let due = nextDeadline, now >= due else { return nil }
        let silent = now.nanoseconds - heardAt.nanoseconds
        var next = 0
        if let step = lastStep {
            next = step + 1
            if next == stepCount {
                next = 0
                round += 1
            }
        } else {
            episodes += 1
            startAt = nil
        }
        guard round <= rounds, stepCount > 0 else {
            givenUp = true
            giveUps += 1
            dueAt = nil
            return .giveUp(silentNs: silent)
        }
        lastStep = next
        taken[next] += 1
        dueAt = now + settleMs * 1_000_000
        return .step(next, round: round, silentNs: silent)
    }

    /// When `decide` has something to say, while the radio is expected to speak.
    public var nextDeadline: MonotonicInstant? {
        guard silenceMs > 0, !givenUp else { return nil }
        if let dueAt { return dueAt }
        let silenceEnds = heardAt + silenceMs * 1_000_000
        guard let startAt else { return silenceEnds }
        return min(startAt, silenceEnds)
    }

    /// `"health":{...}` in `locus status`: silence so far, steps taken and the recoveries they
    /// brought, per step (`names`, one per step), episodes, give-ups.
    public func status(into line: inout JSONWriter, names: [StaticString], now: MonotonicInstant) {
        precondition(names.count == stepCount)
        line.beginObject("health")
        line.integer("silent_s", Int((now.nanoseconds - heardAt.nanoseconds) / 1_000_000_000))
        line.integer("silence_limit_s", Int(silenceMs / 1_000))
        line.integer("episodes", episodes)
        line.beginObject("steps")
        for index in 0..<stepCount { line.integer(names[index], taken[index]) }
        line.endObject()
        line.beginObject("healed_by")
        for index in 0..<stepCount { line.integer(names[index], healed[index]) }
        line.endObject()
        line.boolean("healing", isHealing && !givenUp)
        line.boolean("given_up", givenUp)
        line.endObject()
    }

    private mutating func endEpisode() {
        startAt = nil
        lastStep = nil
        round = 1
        givenUp = false
        dueAt = nil
    }
}

extension HealLadder.Recovery {
    /// "after 47 s of silence; healed by the receiver reset (round 1)", for the owner's log line
    /// (`describe` names a step).
    public func text(_ describe: (Int) -> String) -> String {
        let silence = "after " + Quantity.describe(nanoseconds: silentNs) + " of silence"
        if afterGivingUp { return silence + " (by itself, after the self-healing gave up)" }
        guard let step else { return silence }
        return silence + "; healed by the " + describe(step) + " (round " + String(round) + ")"
    }
}
