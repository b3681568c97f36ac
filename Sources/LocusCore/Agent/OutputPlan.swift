/// What the site's `[[action]]` entries want the GPIO outputs to be. Pure decisions; the agent
/// moves the lines and logs.
///
/// An output is active while any of these holds:
/// - `level`: a record the action watches is in the action's state (`when = "gate/*"` watches
///   every record of the monitor; `state = "any"` counts as satisfied, the usual relay);
/// - `latch`: an event in the action's state latched it, and `locus gpio clear NAME` has not
///   cleared it since (the latch survives restarts through the log);
/// - `pulse`: an event in the action's state started a pulse that has not ended (a new event
///   restarts it; a pulse cut by a restart is not resumed).
/// Otherwise it is inactive. Active means the line's logical value 1 (the board's `active_low`
/// decides the electrical level).
public struct OutputPlan {
    public struct Action: Equatable {
        public var monitor: FixedName
        /// nil for "monitor/*".
        public var identifier: FixedName?
        public var trigger: ActionConfig.Trigger
        public var mode: ActionConfig.Mode
        public var output: Int
        public var pulseNs: Int64

        /// Whether an event of `monitor/identifier` going to `state` concerns this action.
        public func matches(monitor: FixedName, identifier: FixedName, state: ConditionState) -> Bool {
            guard self.monitor == monitor, self.identifier == nil || self.identifier == identifier else { return false }
            switch trigger {
            case .any: return state != .unknown
            case .satisfied: return state == .satisfied
            case .unsatisfied: return state == .unsatisfied
            }
        }

        /// The state a `level` action's records must be in for the line to be active.
        public var levelState: ConditionState { trigger == .unsatisfied ? .unsatisfied : .satisfied }
    }

    /// What the radios' self-healing does with a board output (`BoardConfig.RadioLines`).
    public enum RadioRole: Equatable, Sendable {
        /// Active (powered) except while cut.
        case power
        /// Inactive except while pulsed.
        case reset
    }

    public let names: [FixedName]
    public let actions: [Action]
    private var levelDemand: [Bool]
    public private(set) var latched: [Bool]
    private var pulseEndNs: [Int64]
    /// Per output: its radio role (nil for the actions' outputs), and the end of its cut or pulse.
    public let radioRoles: [RadioRole?]
    private var radioUntilNs: [Int64]

    /// `outputs` are the board's output names; actions naming another output are a config error
    /// caught by `SiteConfig.problems(with:)`, and are ignored here, as are actions naming a
    /// radio line (`radioLines`: the board's, with their roles).
    public init(actions configured: [ActionConfig], outputs: [String], radioLines: [(name: String, role: RadioRole)] = []) {
        names = outputs.compactMap { FixedName($0) }
        radioRoles = outputs.map { name in radioLines.first { $0.name == name }?.role }
        radioUntilNs = Array(repeating: 0, count: outputs.count)
        var actions: [Action] = []
        for action in configured {
            guard let monitor = FixedName(action.monitor), let output = outputs.firstIndex(of: action.gpio),
                  radioRoles[output] == nil else { continue }
            let identifier = action.identifier.flatMap { FixedName($0) }
            if action.identifier != nil && identifier == nil { continue }
            actions.append(Action(monitor: monitor, identifier: identifier, trigger: action.state, mode: action.mode,
                                  output: output, pulseNs: action.pulseMs * 1_000_000))
        }
        self.actions = actions
        levelDemand = Array(repeating: false, count: actions.count)
        latched = Array(repeating: false, count: names.count)
        pulseEndNs = Array(repeating: 0, count: names.count)
    }

    public func index(of name: FixedName) -> Int? { names.firstIndex(of: name) }

    /// The logical value each output should have at `nowNs` (monotonic).
    public func value(_ output: Int, nowNs: Int64) -> Bool {
        switch radioRoles[output] {
        case .power?: return radioUntilNs[output] <= nowNs
        case .reset?: return radioUntilNs[output] > nowNs
        case nil: break
        }
        if latched[output] || pulseEndNs[output] > nowNs { return true }
        for (index, action) in actions.enumerated() where action.output == output && action.mode == .level && levelDemand[index] {
            return true
        }
        return false
    }

    /// Re-reads the level actions' demand: `inState(action)` says whether any record the action
    /// watches is in `action.levelState` now. Called after every handled event, add and remove.
    public mutating func refreshLevels(_ inState: (Action) -> Bool) {
        for (index, action) in actions.enumerated() where action.mode == .level {
            levelDemand[index] = inState(action)
        }
    }

    /// The outputs `event` will latch that are not latched yet: the agent logs these before the
    /// event, so a crash in between re-detects the event and latches again, never the reverse.
    public func latches(for event: MonitorEvent) -> [Int] {
        var result: [Int] = []
        for action in actions where action.mode == .latch && !latched[action.output]
            && action.matches(monitor: event.monitor, identifier: event.identifier, state: event.state) {
            if !result.contains(action.output) { result.append(action.output) }
        }
        return result
    }

    /// A handled (logged) event: starts pulses and sets latches. Level demand is refreshed
    /// separately, from the records.
    public mutating func apply(_ event: MonitorEvent, nowNs: Int64) {
        for action in actions where action.matches(monitor: event.monitor, identifier: event.identifier, state: event.state) {
            switch action.mode {
            case .pulse: pulseEndNs[action.output] = max(pulseEndNs[action.output], nowNs + action.pulseNs)
            case .latch: latched[action.output] = true
            case .level: break
            }
        }
    }

    public mutating func setLatch(_ output: Int, _ value: Bool) { latched[output] = value }

    /// An output active until `untilNs` (a command's pulse; a longer pulse running stays).
    public mutating func pulse(_ output: Int, untilNs: Int64) {
        precondition(radioRoles[output] == nil, "radio lines are the self-healing's")
        pulseEndNs[output] = max(pulseEndNs[output], untilNs)
    }

    /// The self-healing's cut of a power line, or pulse of a reset line, until `untilNs`.
    public mutating func driveRadioLine(_ output: Int, untilNs: Int64) {
        precondition(radioRoles[output] != nil, "only radio lines are driven by the self-healing")
        radioUntilNs[output] = max(radioUntilNs[output], untilNs)
    }

    /// The earliest pulse (or radio cut) end after `nowNs`, for the loop's timer.
    public func nextPulseEnd(after nowNs: Int64) -> Int64? {
        var earliest: Int64? = nil
        for end in pulseEndNs where end > nowNs { earliest = min(earliest ?? end, end) }
        for end in radioUntilNs where end > nowNs { earliest = min(earliest ?? end, end) }
        return earliest
    }

    /// Every output's value, as the lines should be set now.
    public func values(nowNs: Int64) -> [Bool] { (0..<names.count).map { value($0, nowNs: nowNs) } }
}
