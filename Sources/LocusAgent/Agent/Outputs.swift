import LocusCore
import LocusDevices

/// The board's GPIO output lines and what the site's `[[action]]`s want of them (`OutputPlan`):
/// moved only after the log has the event that moves them, each change logged (through the
/// `record` the loop passes), set to their safe values at shutdown, and restored at start to the
/// levels the log's last handled events give them.
final class Outputs: LoopComponent {
    private(set) var plan: OutputPlan
    /// nil on a board without outputs.
    private let lines: GPIOOutputs?
    /// The board's outputs that power or reset a radio (the self-healing's, not the actions').
    private let radioLines: [(name: String, role: OutputPlan.RadioRole)]

    private init(plan: OutputPlan, lines: GPIOOutputs?, radioLines: [(name: String, role: OutputPlan.RadioRole)]) {
        self.plan = plan
        self.lines = lines
        self.radioLines = radioLines
    }

    static func radioLines(_ board: BoardConfig) -> [(name: String, role: OutputPlan.RadioRole)] {
        var roles: [(name: String, role: OutputPlan.RadioRole)] = []
        if let power = board.gnss?.lines.power { roles.append((power, .power)) }
        if let reset = board.gnss?.lines.reset { roles.append((reset, .reset)) }
        if let power = board.bluetoothLines.power { roles.append((power, .power)) }
        return roles
    }

    /// Requests the lines with the levels the log's last handled events give them (latches from
    /// the log, levels from the records), so a restart or a power cut does not pass through the
    /// safe state before the first new event.
    static func open(board: BoardConfig, site: SiteConfig, stateDirectory: String, latched: [FixedName], engine: MonitorEngine,
                     now: AgentTime) throws(GPIOError) -> Outputs {
        let radioLines = Outputs.radioLines(board)
        var plan = OutputPlan(actions: site.actions, outputs: board.gpio?.outputs.map { $0.name } ?? [], radioLines: radioLines)
        for name in latched { if let index = plan.index(of: name) { plan.setLatch(index, true) } }
        guard let gpio = board.gpio, !gpio.outputs.isEmpty else { return Outputs(plan: plan, lines: nil, radioLines: radioLines) }
        Outputs.refreshLevels(&plan, engine, pending: nil)
        let initial = plan.values(nowNs: now.monotonic.nanoseconds)
        if case .simulated = gpio.chip { _ = Files.makeDirectory(Paths.join(stateDirectory, "sim"), mode: 0o750) }
        let lines = try GPIOOutputs(chip: gpio.chip, outputs: gpio.outputs, initial: initial, simulationFile: Paths.join(stateDirectory, "sim/gpio"))
        for (index, output) in gpio.outputs.enumerated() where initial[index] && plan.radioRoles[index] == nil {
            AgentLog.info("locus: gpio \(output.name) on (restored from the log)")
        }
        return Outputs(plan: plan, lines: lines, radioLines: radioLines)
    }

    // MARK: the loop's surface

    /// The end of the earliest pulse.
    func deadlines(_ next: inout NextDeadline) {
        if let end = plan.nextPulseEnd(after: next.now.monotonic.nanoseconds) { next.consider(MonotonicInstant(nanoseconds: end)) }
    }

    /// `"gpio":{"relay1":1,...}`: each line's logical value (the names are the board's).
    func status(into line: inout JSONWriter) {
        var object = JSONWriter(capacity: 32 + plan.names.count * (FixedName.capacity + 6))
        object.text("{")
        if let lines {
            for index in plan.names.indices {
                if index > 0 { object.text(",") }
                object.text("\"")
                object.text(plan.names[index])
                object.text("\":")
                object.text(lines.values[index] ? 1 : 0)
            }
        }
        object.text("}")
        line.raw("gpio", object.bytes)
    }

    /// SIGHUP: the new actions take effect at once; latches stay. The loop refreshes the lines.
    func reload(_ config: LoadedConfig, now: AgentTime) {
        let latched = latchedNames
        plan = OutputPlan(actions: config.site.actions, outputs: lines?.outputs.map { $0.name } ?? [], radioLines: radioLines)
        for name in latched { if let index = plan.index(of: name) { plan.setLatch(index, true) } }
    }

    /// Every line's level into the log (`restored` at start: what the log's records gave them,
    /// whatever the last GPIO records said before a power cut; and again when the log takes
    /// records after it could not take a line's change), or, with `.safe` before the lines
    /// are released at shutdown, the lines that leave their level for their safe value. The log's
    /// GPIO records then always give the lines' levels: a subscriber or the fleet's store that
    /// follows them is right after a restart too.
    func recordLevels(_ cause: LogPayload.GPIOCause, record: (LogPayload.GPIOChange) -> Void) {
        guard let lines else { return }
        for (index, name) in plan.names.enumerated() {
            let value = cause == .safe ? lines.outputs[index].safe != 0 : lines.values[index]
            guard cause != .safe || value != lines.values[index] else { continue }
            record(LogPayload.GPIOChange(output: name, value: value, cause: cause))
        }
    }

    func shutdown(now: AgentTime) {
        guard let lines else { return }
        lines.release()
        AgentLog.info("locus: gpio: outputs set to their safe values")
    }

    // MARK: events and changes

    /// The outputs `event` will latch that are not latched yet: logged with the event, before it.
    func latches(for event: MonitorEvent) -> [FixedName] {
        let outputs = plan.latches(for: event)
        guard !outputs.isEmpty else { return [] }
        return outputs.map { plan.names[$0] }
    }

    /// A logged event: pulses start, latches set. True when the latched outputs changed (the
    /// log's checkpoints state them: `latchedNames`).
    func apply(_ event: MonitorEvent, _ now: AgentTime) -> Bool {
        let before = plan.latched
        plan.apply(event, nowNs: now.monotonic.nanoseconds)
        return plan.latched != before
    }

    var latchedNames: [FixedName] {
        var names: [FixedName] = []
        for index in plan.names.indices where plan.latched[index] { names.append(plan.names[index]) }
        return names
    }

    func index(of name: FixedName) -> Int? { plan.index(of: name) }

    /// The lines' levels now, in the board's order (nil: the board has no outputs).
    var lineValues: [Bool]? { lines?.values }

    func isLatched(_ output: Int) -> Bool { plan.latched[output] }

    /// The self-healing's power cut (`power_line`) or reset pulse (`reset_line`) of `forMs`; the
    /// line moves (and is logged, cause `heal`) in the loop's `update`.
    func driveRadioLine(_ name: String, forMs: Int64, _ now: AgentTime) {
        guard let fixed = FixedName(name), let index = plan.index(of: fixed) else { return }
        plan.driveRadioLine(index, untilNs: now.monotonic.nanoseconds + forMs * 1_000_000)
    }

    /// Whether output `index` powers or resets a radio (the self-healing's alone).
    func isRadioLine(_ index: Int) -> Bool { plan.radioRoles[index] != nil }

    /// The fleet's `pulse` command (logged by the caller): the output active for `forMs`; it
    /// moves in the loop's `update`.
    func pulse(_ index: Int, forMs: Int64, _ now: AgentTime) {
        precondition(forMs > 0, "a pulse lasts")
        plan.pulse(index, untilNs: now.monotonic.nanoseconds + forMs * 1_000_000)
    }

    /// `locus gpio clear`, the fleet's `set`: the caller has logged it.
    func setLatch(_ output: Int, _ value: Bool) { plan.setLatch(output, value) }

    /// The level output `output` will have once its latch is `latched` (a level action or a
    /// pulse may hold it on when the latch is cleared): the value its latch record states.
    func level(_ output: Int, latched: Bool, _ now: AgentTime) -> Bool {
        let was = plan.latched[output]
        plan.setLatch(output, latched)
        defer { plan.setLatch(output, was) }
        return plan.value(output, nowNs: now.monotonic.nanoseconds)
    }

    /// Level actions follow the records' states (`pending`, when given, counts as handled), then
    /// the lines move (`update`).
    func refresh(_ engine: MonitorEngine, _ now: AgentTime, pending: MonitorEvent? = nil, cause: LogPayload.GPIOCause,
                 record: (LogPayload.GPIOChange) -> Void) {
        Outputs.refreshLevels(&plan, engine, pending: pending)
        update(now, event: pending, cause: cause, record: record)
    }

    /// Moves every line whose wanted value changed and hands each change to `record` (the log).
    /// `event` is the event that caused it; without one, `cause` says why (a pulse ended, a latch
    /// was cleared, a condition was removed). A line that cannot be set is reported; the event is
    /// still handled (it is in the log) and the line is set again on its next change.
    func update(_ now: AgentTime, event: MonitorEvent? = nil, cause: LogPayload.GPIOCause = .pulseEnd,
                record: (LogPayload.GPIOChange) -> Void) {
        guard let lines else { return }
        for index in plan.names.indices {
            let wanted = plan.value(index, nowNs: now.monotonic.nanoseconds)
            guard lines.values[index] != wanted else { continue }
            if let error = lines.set(index, wanted) {
                AgentLog.error("locus: gpio: \(error)")
                continue
            }
            let radio = plan.radioRoles[index] != nil
            let why = event.map { "\($0.monitor)/\($0.identifier) \($0.state)" } ?? (radio ? "radio self-healing" : cause.description)
            AgentLog.info("locus: gpio \(plan.names[index]) \(wanted ? "on" : "off") (\(why))")
            let logged = event.map { gpioCause(index, $0) } ?? (radio ? .heal : cause)
            // A latch was logged before its event; the line moving says nothing new.
            guard logged != .latchSet || event == nil else { continue }
            record(LogPayload.GPIOChange(output: plan.names[index], value: wanted, cause: logged, monitor: event?.monitor,
                                         identifier: event?.identifier))
        }
    }

    private func gpioCause(_ index: Int, _ event: MonitorEvent) -> LogPayload.GPIOCause {
        for action in plan.actions where action.output == index && action.matches(monitor: event.monitor, identifier: event.identifier, state: event.state) {
            switch action.mode {
            case .pulse: return .pulseStart
            case .latch: return .latchSet
            case .level: return .level
            }
        }
        return .level
    }

    /// The level actions' demand from the records' states; `pending` counts as handled.
    private static func refreshLevels(_ plan: inout OutputPlan, _ engine: MonitorEngine, pending: MonitorEvent?) {
        plan.refreshLevels { action in
            let wanted = action.levelState
            func state(_ identifier: FixedName, _ record: MonitorEngine.Record) -> ConditionState {
                if let pending, pending.monitor == action.monitor, pending.identifier == identifier { return pending.state }
                return record.lastEvent.state
            }
            if let identifier = action.identifier {
                guard let record = engine.record(monitor: action.monitor, identifier: identifier) else { return false }
                return state(identifier, record) == wanted
            }
            var found = false
            engine.forEachRecord { monitor, identifier, record in
                if !found && monitor == action.monitor && state(identifier, record) == wanted { found = true }
            }
            return found
        }
    }
}
