import LocusAgent
import LocusCore
import LocusDevices
import TestSupport

/// One seed: the real agent on the simulated kernel through the scenario and its faults, with
/// the invariants checked after every turn, at every power cut and at the end.
///
/// The invariants:
/// - the log: sequence numbers follow one another; a condition's events alternate (an event only
///   on a change of state), from its addition on, across restarts;
/// - the outputs: after every turn each line's level is the one the log's GPIO records last gave
///   it (except while a change waits for a log that refuses records: stated again after);
/// - nothing acknowledged is lost: after a power cut and a restart, every record's last event is
///   the one it had before the cut, when the log was synced at every event (or when that event
///   is older than the sync interval); and what the disk kept of the log is a prefix of what was
///   written, byte for byte, with nothing to repair at the next open;
/// - bounded: pending events within the capacity; the agent's descriptors all closed when it
///   stops or dies; the loop never stops by itself; every event logged once the run settles.
final class SeedRun {
    struct Failure: Error, CustomStringConvertible {
        var atS: Double
        var what: String
        var description: String { "at \(SeedRun.seconds(atS)) s: \(what)" }
    }

    /// What one run did, added up over a batch of seeds.
    struct Tally {
        var turns = 0
        var simulatedS = 0.0
        var restarts = 0
        var records = 0
        var events = 0
        var gpioChanges = 0
        var checks: [String: Int] = [:]
        var injected: [String: Int] = [:]

        mutating func add(_ other: Tally) {
            turns += other.turns
            simulatedS += other.simulatedS
            restarts += other.restarts
            records += other.records
            events += other.events
            gpioChanges += other.gpioChanges
            for (name, count) in other.checks { checks[name, default: 0] += count }
            for (name, count) in other.injected { injected[name, default: 0] += count }
        }
    }

    /// A record of the log as the simulator read it.
    struct Record: Equatable {
        var sequence: UInt64
        var typeCode: UInt8
        var time: Int64
        var payload: [UInt8]

        /// The event an event record holds (nil for other records, or one that does not read back).
        var event: MonitorEvent? {
            guard typeCode == LogRecordType.event.rawValue else { return nil }
            return payload.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                return LogPayload.readEvent(&reader)
            }
        }
    }

    /// A record's last event, and when (simulated monotonic time) the simulator first saw it.
    struct Acknowledged: Equatable {
        var state: ConditionState
        var dateNs: Int64
        var refinement: BeaconIdentity?
        var persisted: Bool
    }

    static let startNs: Int64 = 1_000_000_000_000
    /// How long after the last recorded byte timeouts may play out.
    static let tailNs: Int64 = 600_000_000_000

    let scenario: Scenario
    let kernel: SimulatedKernel
    let recording: Recording
    let root: String
    let state: String
    let agent: SimulatedAgent
    var tally = Tally()
    /// The log as read so far (after a power cut: what the disk kept, then what followed).
    var log: [Record] = []
    /// The last event state logged per condition ("monitor/identifier").
    var lastLoggedState: [String: ConditionState] = [:]
    /// Each output's level as the log's GPIO records give it.
    var loggedLevels: [String: Bool] = [:]
    /// Each record's last event and since when (monotonic ns) the simulator has seen it.
    var acknowledged: [String: (event: Acknowledged, sinceNs: Int64)] = [:]
    /// Open descriptors before the agent opened.
    let baselineDescriptors: Int
    /// Programs following events over the control socket.
    let clients: [SimulatedClient]
    /// The fleet's broker the uplink publishes to (nil: the site has no `[uplink]`).
    let broker: SimulatedBroker?
    /// The last power cut's moment (events told before it were checked then).
    var previousCutNs: Int64 = 0
    /// The fleet's configuration version the log last says was applied, and the command ids the
    /// log holds (a record each at most).
    var remoteApplied: UInt64 = 0
    var commandRecords: [String: String] = [:]
    /// Timed actions (fault starts and ends), ascending.
    var schedule: [(atNs: Int64, fault: Scenario.Fault, starts: Bool)] = []

    init(_ scenario: Scenario, root: String) throws(Failure) {
        self.scenario = scenario
        self.root = root
        state = root + "/state"
        recording = Recording(scenario, startNs: SeedRun.startNs)
        tally.injected = recording.injected
        _ = Files.makeDirectory(state, mode: 0o750)
        _ = Files.makeDirectory(state + "/sim", mode: 0o750)
        broker = scenario.broker.map { SimulatedBroker($0, startNs: SeedRun.startNs) }
        if let problem = broker?.listen() { throw Failure(atS: 0, what: "the broker cannot listen: \(problem)") }
        if let plan = scenario.remote {
            broker?.remote = RemoteFeed(plan, gateway: "sim-gw", startUTC: scenario.startUTC)
            if let error = Files.replace(root + "/fleet.pub", contents: RemotePlan.publicKey) { throw Failure(atS: 0, what: "cannot write the key: \(error)") }
        }
        let site = scenario.siteText + scenario.uplinkText(port: broker?.port ?? 0)
        if let error = Files.replace(root + "/site.toml", contents: site) ?? Files.replace(root + "/board.toml", contents: scenario.boardText) {
            throw Failure(atS: 0, what: "cannot write the site: \(error)")
        }
        guard let agent = SimulatedAgent(sitePath: root + "/site.toml", directory: state) else {
            throw Failure(atS: 0, what: "the drawn site does not check (above)")
        }
        self.agent = agent
        kernel = SimulatedKernel(monotonicNs: SeedRun.startNs, realtimeNs: scenario.startUTC * 1_000_000_000, speed: nil)
        kernel.addPort(path: state + "/sim/gnss", arrivals: recording.gnss)
        kernel.addPort(path: state + "/sim/ble", arrivals: recording.bluetooth)
        kernel.disk.directory = state
        clients = scenario.clients.map { SimulatedClient($0) }
        kernel.asksLinuxEveryPoll = !clients.isEmpty || broker != nil
        var bits = SplitMix64(seed: scenario.seed)
        kernel.random = { bits.next() }
        baselineDescriptors = SeedRun.openDescriptors() - (broker?.descriptors ?? 0)
        for fault in scenario.faults {
            switch fault {
            case .clockJump(let at, _), .powerCut(let at, _):
                schedule.append((SeedRun.ns(at), fault, true))
            case .diskFull(let from, let until), .syncFails(let from, let until):
                schedule.append((SeedRun.ns(from), fault, true))
                schedule.append((SeedRun.ns(until), fault, false))
            default:
                continue
            }
        }
        schedule.sort { $0.atNs < $1.atNs }
        for action in schedule { kernel.wake(atNs: action.atNs) }
        for moment in broker?.moments ?? [] { kernel.wake(atNs: SeedRun.ns(moment)) }
    }

    static func ns(_ seconds: Int) -> Int64 { startNs + Int64(seconds) * 1_000_000_000 }
    static func seconds(_ value: Double) -> String { "\(Int(value * 10) / 10).\(Int(value * 10) % 10)" }
    var nowS: Double { Double(kernel.monotonicNs - SeedRun.startNs) / 1e9 }

    func fail(_ what: String) -> Failure { Failure(atS: nowS, what: what) }

    /// The whole run; the first invariant broken ends it.
    func run() throws(Failure) {
        kernel.install()
        defer {
            if agent.isOpen { agent.crash() }
            kernel.uninstall()
        }
        try open()
        let endNs = (kernel.lastArrivalNs ?? SeedRun.startNs) + SeedRun.tailNs
        while true {
            guard agent.turn() else { throw fail("the loop stopped by itself") }
            tally.turns += 1
            try checkTimeMoves()
            try readLog()
            try serveClients()
            try serveBroker()
            try checkOutputs()
            try checkActions()
            try checkBounds()
            try act()
            let settled = agent.settled && !agent.levelsAwaitLog
            if kernel.inputsConsumed && schedule.isEmpty && (settled || kernel.idlePolls > 0 || kernel.monotonicNs > endNs) { break }
        }
        try finish()
    }

    private func open() throws(Failure) {
        if let reason = agent.open() { throw fail("the agent did not open: \(reason)") }
    }

    // MARK: the log

    private func readLog() throws(Failure) {
        var failure: Failure? = nil
        agent.readRecords(after: log.last?.sequence ?? 0) { header, payload in
            guard failure == nil else { return }
            do throws(Failure) { try take(Record(sequence: header.sequence, typeCode: header.typeCode, time: header.time, payload: Array(payload))) } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// One record, checked against what came before it.
    private func take(_ record: Record) throws(Failure) {
        if let last = log.last, record.sequence != last.sequence + 1 {
            throw fail("record \(record.sequence) follows record \(last.sequence)")
        }
        tally.checks["log: sequence numbers follow one another", default: 0] += 1
        log.append(record)
        tally.records += 1
        try apply(record, checking: true)
    }

    /// What a record changes in the simulator's picture of the log (events by condition, levels).
    private func apply(_ record: Record, checking: Bool) throws(Failure) {
        let failure: Failure? = record.payload.withUnsafeBytes { raw in
            do throws(Failure) { try apply(record, raw, checking: checking) } catch { return error }
            return nil
        }
        if let failure { throw failure }
    }

    private func apply(_ record: Record, _ payload: UnsafeRawBufferPointer, checking: Bool) throws(Failure) {
        var reader = ByteReader(payload)
        switch LogRecordType(rawValue: record.typeCode) {
        case .event?:
            guard let event = LogPayload.readEvent(&reader) else { throw fail("event record \(record.sequence) does not read back") }
            let key = "\(event.monitor)/\(event.identifier)"
            if checking {
                if lastLoggedState[key] == event.state {
                    throw fail("record \(record.sequence): \(key) \(event.state) again, with no change of state between")
                }
                tally.checks["events only on a change of state", default: 0] += 1
                tally.events += 1
            }
            lastLoggedState[key] = event.state
        case .conditionAdded?:
            guard let entry = LogPayload.readCondition(&reader) else { throw fail("condition record \(record.sequence) does not read back") }
            lastLoggedState["\(entry.monitor)/\(entry.identifier)"] = nil
        case .conditionRemoved?:
            guard let (monitor, identifier) = LogPayload.readRemoval(&reader) else { throw fail("removal record \(record.sequence) does not read back") }
            lastLoggedState["\(monitor)/\(identifier)"] = nil
        case .remote?:
            guard let remote = LogPayload.readRemote(&reader) else { throw fail("remote record \(record.sequence) does not read back") }
            try checkRemote(remote, record.sequence, checking: checking)
        case .gpio?:
            guard let change = LogPayload.readGPIO(&reader) else { throw fail("gpio record \(record.sequence) does not read back") }
            loggedLevels[change.output.description] = change.value
            if checking { tally.gpioChanges += 1 }
        default:
            break
        }
    }

    // MARK: the control socket's clients

    /// Each client connects, reads or hangs up as its plan says; every event it gets is checked
    /// against the log.
    private func serveClients() throws(Failure) {
        for client in clients {
            client.vanishIfDue(nowNs: kernel.monotonicNs, startNs: SeedRun.startNs)
            if agent.isOpen { client.connectIfDue(socket: state + "/control.sock", nowNs: kernel.monotonicNs, startNs: SeedRun.startNs) }
            if let problem = client.read(nowNs: kernel.monotonicNs, check: checkDelivered) { throw fail(problem) }
        }
    }

    /// What a client was told is what the log says for that sequence number.
    private func checkDelivered(_ delivered: SimulatedClient.Delivered) -> String? {
        guard let first = log.first?.sequence, delivered.sequence >= first, Int(delivered.sequence - first) < log.count else {
            return "a client was told event \(delivered.sequence), which the log does not hold"
        }
        let record = log[Int(delivered.sequence - first)]
        guard let event = record.event else {
            return "a client was told event \(delivered.sequence), which is a record of type \(record.typeCode) in the log"
        }
        let key = "\(event.monitor)/\(event.identifier)"
        guard key == delivered.key, "\(event.state)" == delivered.state else {
            return "a client was told event \(delivered.sequence) is \(delivered.key) \(delivered.state); the log says \(key) \(event.state)"
        }
        tally.checks["what a client is told is what the log says", default: 0] += 1
        return nil
    }

    /// The agent's descriptors: the process's, less the clients' and the broker's own.
    private var agentDescriptors: Int { SeedRun.openDescriptors() - clients.filter(\.isConnected).count - (broker?.descriptors ?? 0) }

    // MARK: the broker

    /// The broker answers what the uplink sent this turn; a copy of a record unlike the first,
    /// or records out of log order on a connection, end the run.
    private func serveBroker() throws(Failure) {
        guard let broker else { return }
        if let problem = broker.service(nowNs: kernel.monotonicNs) { throw fail(problem) }
        for due in broker.wakes { kernel.wake(atNs: due) }
        broker.wakes.removeAll()
        tally.checks["the broker gets each record once by seq, in log order", default: 0] += 1
    }

    /// The log's records the uplink publishes and chains (`what` has events, GPIO changes and
    /// visits), in log order.
    private var chainedRecords: [Record] {
        let chained = [LogRecordType.event.rawValue, LogRecordType.gpio.rawValue, LogRecordType.visit.rawValue, LogRecordType.remote.rawValue]
        return log.filter { chained.contains($0.typeCode) }
    }

    /// With the faults over, the backlog drains: every chained record of the log reaches the
    /// broker (within 20 simulated minutes: the reconnect backoff is at most a minute), each with
    /// the previous one's seq as `prev`: the chain the fleet checks for gaps is whole.
    private func drainUplink() throws(Failure) {
        guard let broker else { return }
        broker.healed = true
        let untilNs = kernel.monotonicNs + 1_200_000_000_000
        var missing = chainedRecords.filter { broker.records[$0.sequence] == nil }
        while !missing.isEmpty {
            guard kernel.monotonicNs < untilNs else {
                throw fail("the uplink did not deliver \(missing.count) record(s) in 20 minutes with the broker healthy, the first seq \(missing[0].sequence)")
            }
            guard agent.turn() else { throw fail("the loop stopped by itself") }
            try readLog()
            try serveBroker()
            missing = chainedRecords.filter { broker.records[$0.sequence] == nil }
        }
        var previous: UInt64 = 0
        for record in chainedRecords {
            let published = broker.records[record.sequence]!
            if published.previous != previous {
                throw fail("seq \(record.sequence) reached the broker with prev \(published.previous.map(String.init) ?? "none"); the log's previous chained record is \(previous)")
            }
            previous = record.sequence
        }
        tally.checks["the uplink delivers every record, its prev chain whole", default: 0] += 1
        for (kind, name) in SimulatedBroker.faultKinds where broker.tally[name, default: 0] > 0 { tally.injected[kind] = broker.tally[name] }
    }

    // MARK: the fleet's configurations and commands

    /// A remote record: a version applied is newer than the last and one the fleet drew good; a
    /// refusal is of a bad version or an older one replayed; a command has one record at most, done
    /// unless it had expired.
    private func checkRemote(_ remote: LogPayload.RemoteResult, _ sequence: UInt64, checking: Bool) throws(Failure) {
        guard let plan = scenario.remote else { throw fail("record \(sequence): a remote record, and the fleet sent nothing") }
        let reason = String(decoding: remote.reason, as: UTF8.self)
        switch (remote.kind, remote.result) {
        case (.config, .applied):
            if checking && remote.version <= remoteApplied {
                throw fail("record \(sequence): version \(remote.version) applied after version \(remoteApplied)")
            }
            if plan.actionCount(version: remote.version) == nil { throw fail("record \(sequence): version \(remote.version), a bad one, applied") }
            remoteApplied = remote.version
            tally.checks["the fleet's versions applied only newer, only good", default: 0] += 1
        case (.config, _):
            let replayed = reason.contains("older than the applied version") && remote.version < remoteApplied
            if checking && !replayed && !plan.isBad(version: remote.version) && remote.version != 0 {
                throw fail("record \(sequence): version \(remote.version), a good one, refused: \(reason)")
            }
            tally.checks["the fleet's bad versions refused", default: 0] += 1
        case (.command, _):
            let id = String(decoding: remote.id, as: UTF8.self)
            if let earlier = commandRecords[id] { throw fail("record \(sequence): command \(id) recorded again (\(earlier) before)") }
            commandRecords[id] = "\(remote.result)"
            guard let command = plan.commands.first(where: { $0.id == id }) else { throw fail("record \(sequence): command \(id) was never sent") }
            if (remote.result == .done) == command.expired { throw fail("record \(sequence): command \(id) \(remote.result) (expired: \(command.expired)): \(reason)") }
            tally.checks["the fleet's commands recorded once, run unless expired", default: 0] += 1
        }
    }

    /// Never a mix: the actions running are exactly the applied version's, or the site file's.
    private func checkActions() throws(Failure) {
        guard let plan = scenario.remote, agent.isOpen else { return }
        let applied = agent.remoteApplied
        let expected = applied == 0 ? scenario.siteActionCount : plan.actionCount(version: applied)
        if agent.actionCount != expected {
            throw fail("version \(applied) runs \(agent.actionCount) action(s), not its \(expected.map(String.init) ?? "none (a bad version)")")
        }
        tally.checks["the actions running are one version's, never a mix", default: 0] += 1
    }

    /// With the faults over: every command the fleet sent has its record, and the newest version
    /// published, when good, is the one running.
    private func checkRemoteComplete() throws(Failure) {
        guard let feed = broker?.remote, let plan = scenario.remote else { return }
        /// The newest version published so far, when it is good: the one that must run.
        func newestGood() -> UInt64? {
            guard let last = feed.published.last, case .good = last.kind else { return nil }
            return UInt64(last.version)
        }
        // Until the fleet has sent everything it planned, then until what it sent has arrived (the
        // retained version comes at a subscription, which may be the last thing the drain did).
        let lastPlannedNs = SeedRun.ns((plan.configurations.map(\.atS) + plan.commands.map(\.atS) + plan.repeats.map(\.atS)).max() ?? 0)
        let untilNs = max(kernel.monotonicNs, lastPlannedNs) + 120_000_000_000
        func waiting() -> Bool {
            kernel.monotonicNs <= lastPlannedNs || feed.commandsSent.contains { commandRecords[$0.id] == nil }
                || newestGood().map { agent.remoteApplied != $0 } == true
        }
        while waiting() && kernel.monotonicNs < untilNs {
            kernel.wake(atNs: min(untilNs, kernel.monotonicNs + 1_000_000_000))
            guard agent.turn() else { throw fail("the loop stopped by itself") }
            try readLog()
            try serveBroker()
            try checkActions()
        }
        if let missing = feed.commandsSent.first(where: { commandRecords[$0.id] == nil }) {
            throw fail("command \(missing.id), sent at \(missing.atS) s, has no record with the broker healthy")
        }
        if let newest = newestGood(), agent.remoteApplied != newest {
            throw fail("version \(newest), the newest and good, is not running 2 minutes after it was sent (version \(agent.remoteApplied) is)")
        }
        for (name, count) in feed.tally { tally.injected["remote-" + name] = count }
        tally.checks["the fleet's commands all answered, its newest version running", default: 0] += 1
    }

    // MARK: invariants after a turn

    private func checkOutputs() throws(Failure) {
        // While the log refuses a line's change, the line has moved and its record waits: the
        // levels are stated again when the log takes records (then this holds again).
        guard agent.logOnDisk, !agent.levelsAwaitLog else { return }
        for (name, value) in agent.outputs where value != (loggedLevels[name] ?? false) {
            throw fail("output \(name) is \(value ? "on" : "off"), the log says \((loggedLevels[name] ?? false) ? "on" : "off")")
        }
        tally.checks["outputs equal the log", default: 0] += 1
    }

    /// Turns at one simulated moment: a loop that keeps waking with nothing to do would spin a
    /// core on a gateway (and here never lets time move).
    private var turnsAtThisMoment = 0
    private var moment: Int64 = 0
    static let mostTurnsAtOneMoment = 1_000
    /// The radios' bytes, timers and clients at their busiest take far fewer turns a second.
    static let mostTurnsInOneSecond = 500
    private var turnsThisSecond = 0
    private var turnSecond: Int64 = -1

    private func checkTimeMoves() throws(Failure) {
        if kernel.monotonicNs != moment {
            moment = kernel.monotonicNs
            turnsAtThisMoment = 0
        }
        turnsAtThisMoment += 1
        if turnsAtThisMoment > SeedRun.mostTurnsAtOneMoment {
            throw fail("the loop spins: \(turnsAtThisMoment) turns without time moving")
        }
        // A loop that wakes every millisecond for nothing spins as surely, only slower.
        let second = (kernel.monotonicNs - SeedRun.startNs) / 1_000_000_000
        if second != turnSecond {
            turnSecond = second
            turnsThisSecond = 0
        }
        turnsThisSecond += 1
        if turnsThisSecond > SeedRun.mostTurnsInOneSecond {
            throw fail("the loop busy-waits: \(turnsThisSecond) turns in one simulated second")
        }
        tally.checks["the loop does not spin", default: 0] += 1
    }

    private func checkBounds() throws(Failure) {
        if agent.pendingEvents > scenario.eventCapacity {
            throw fail("\(agent.pendingEvents) events pending, over the capacity of \(scenario.eventCapacity)")
        }
        tally.checks["pending events within capacity", default: 0] += 1
        agent.forEachRecord { monitor, identifier, event in
            let seen = Acknowledged(state: event.state, dateNs: event.date.totalNanoseconds, refinement: event.refinement,
                                    persisted: !event.diagnostics.contains(.persistenceUnavailable))
            let key = "\(monitor)/\(identifier)"
            if acknowledged[key]?.event != seen { acknowledged[key] = (seen, kernel.monotonicNs) }
        }
    }

    // MARK: faults

    /// The scheduled faults whose moment has come.
    private func act() throws(Failure) {
        while let next = schedule.first, next.atNs <= kernel.monotonicNs {
            schedule.removeFirst()
            switch next.fault {
            case .clockJump(_, let bySeconds):
                kernel.realtimeOffsetNs += Int64(bySeconds) * 1_000_000_000
            case .diskFull:
                kernel.disk.full = next.starts
            case .syncFails:
                kernel.disk.syncFails = next.starts
            case .powerCut(_, let downS):
                try powerCut(downS: downS)
            default:
                break
            }
            if next.starts { tally.injected[next.fault.kind, default: 0] += 1 }
        }
    }

    /// The power goes between two turns: the disk keeps what was synced and some of what was not
    /// (a torn tail), the process's state is gone; after `downS` the agent starts on the disk.
    private func powerCut(downS: Int) throws(Failure) {
        var random = SplitMix64(seed: scenario.seed &+ UInt64(kernel.monotonicNs))
        kernel.powerCut { _, synced, size in synced + Int64(random.below(Int(size - synced) + 1)) }
        agent.crash()
        // The programs on the gateway lose power too: what their sockets held is gone, and they
        // start again where they had got to.
        for client in clients { client.close() }
        let open = agentDescriptors
        if open != baselineDescriptors { throw fail("\(open - baselineDescriptors) descriptor(s) still open after the agent died") }
        tally.checks["descriptors closed when the agent goes", default: 0] += 1
        let cutNs = kernel.monotonicNs
        kernel.advance(toNs: cutNs + Int64(downS) * 1_000_000_000)
        let before = acknowledged
        try checkKept(written: log)
        try reopen()
        tally.restarts += 1
        try checkAcknowledged(before, cutNs: cutNs)
        try checkDeliveredSurvived(cutNs: cutNs)
        previousCutNs = cutNs
    }

    /// Opens the agent on what the disk kept and takes the log from the disk: the simulator's
    /// picture starts over from it.
    private func reopen() throws(Failure) {
        if let reason = agent.open() { throw fail("the agent did not start again: \(reason)") }
        let (kept, scan) = try readDisk()
        if !scan.corruptions.isEmpty { throw fail("the log needs repair after the restart: \(scan.corruptions)") }
        log = []
        lastLoggedState = [:]
        loggedLevels = [:]
        remoteApplied = 0
        commandRecords = [:]
        for record in kept {
            log.append(record)
            try apply(record, checking: false)
        }
        acknowledged = [:]
        try readLog()
        try checkBounds()
    }

    /// What the disk kept of the log, up to the new start record, is a prefix of what was written.
    /// Every record the log's files hold now, read without changing them (a torn tail is
    /// reported, not cut).
    private func readDisk() throws(Failure) -> ([Record], LogScan) {
        var records: [Record] = []
        do {
            let scan = try LogStore.scan(directory: state) { header, payload in
                records.append(Record(sequence: header.sequence, typeCode: header.typeCode, time: header.time, payload: Array(payload)))
            }
            return (records, scan)
        } catch {
            throw fail("the log cannot be read: \(error)")
        }
    }

    /// What the disk kept of the log, read before the agent opens it again, is a prefix of what
    /// was written: whole records, byte for byte (a torn one after them is the next open's to cut).
    private func checkKept(written: [Record]) throws(Failure) {
        let (kept, _) = try readDisk()
        for (index, record) in kept.enumerated() {
            guard index < written.count else {
                throw fail("record \(record.sequence) (type \(record.typeCode)) is on the disk after the power cut, but was never read from the log (\(written.count) were)")
            }
            guard written[index] == record else {
                throw fail("record \(record.sequence) (type \(record.typeCode)) after the power cut differs from the one written (type \(written[index].typeCode), sequence \(written[index].sequence))")
            }
        }
        tally.checks["the log after a power cut is a prefix of the log written", default: 0] += 1
    }

    /// Every record's last event survives the cut, unless it was newer than the sync interval
    /// (with sync = "interval") or the log was not on disk.
    private func checkAcknowledged(_ before: [String: (event: Acknowledged, sinceNs: Int64)], cutNs: Int64) throws(Failure) {
        for (key, entry) in before.sorted(by: { $0.key < $1.key }) where entry.event.persisted && entry.event.state != .unknown {
            let window = scenario.syncEveryEvent ? 0 : Int64(scenario.syncIntervalMs + 1_000) * 1_000_000
            guard cutNs - entry.sinceNs >= window else { continue }
            guard let now = acknowledged[key] else { continue }
            if now.event.state != entry.event.state || now.event.dateNs != entry.event.dateNs {
                throw fail("\(key): \(entry.event.state) (acknowledged) came back as \(now.event.state) after the power cut")
            }
            tally.checks["acknowledged events survive a power cut", default: 0] += 1
        }
    }

    /// Every event a client was told survives the cut, unless it was newer than the sync
    /// interval (with sync = "interval"): told is acknowledged.
    private func checkDeliveredSurvived(cutNs: Int64) throws(Failure) {
        let window = scenario.syncEveryEvent ? 0 : Int64(scenario.syncIntervalMs + 1_000) * 1_000_000
        for client in clients {
            // Those told before an earlier cut were judged then (a seq lost then may be reused).
            for delivered in client.delivered where delivered.atNs > previousCutNs && delivered.atNs <= cutNs - window {
                if let problem = checkDelivered(delivered) { throw fail("after the power cut: \(problem)") }
                tally.checks["events a client was told survive a power cut", default: 0] += 1
            }
        }
    }

    /// A prompt client that stayed got every event of its monitor after where it started, once
    /// each (when no power cut could take an event back: syncs at every event, or no cut).
    private func checkClientsComplete() throws(Failure) {
        guard scenario.syncEveryEvent || tally.restarts == 0 else { return }
        for client in clients where !client.gone && client.isConnected {
            guard case .prompt = client.plan.pace, let after = client.firstAfter else { continue }
            var expected: [UInt64] = []
            for record in log where record.sequence > after {
                if let event = record.event, client.plan.monitor == nil || client.plan.monitor == event.monitor.description { expected.append(record.sequence) }
            }
            let got = client.delivered.map(\.sequence).filter { $0 > after }
            if !expected.allSatisfy(Set(got).contains) {
                let missing = expected.filter { !got.contains($0) }
                throw fail("a prompt client following \(client.plan.monitor ?? "every monitor") after \(after) missed event(s) \(missing.prefix(5))")
            }
            tally.checks["a prompt client gets every event once", default: 0] += 1
        }
    }

    // MARK: the end

    private func finish() throws(Failure) {
        kernel.disk.full = false
        kernel.disk.syncFails = false
        let pending = agent.pendingEvents
        // A subscriber is sent what it missed in the turns after it subscribes: a few more turns
        // (nothing left to happen, so no time passes) let the last events reach the clients.
        for _ in 0..<4 {
            guard agent.turn() else { throw fail("the loop stopped by itself") }
            try readLog()
            try serveClients()
        }
        try checkClientsComplete()
        try drainUplink()
        try checkRemoteComplete()
        if agent.levelsAwaitLog { throw fail("a line's change never reached the log, though the disk works again") }
        agent.shutdown()
        for client in clients { client.close() }
        broker?.close()
        if pending > 0 { throw fail("\(pending) event(s) still pending when the run settled") }
        let open = agentDescriptors
        if open != baselineDescriptors { throw fail("\(open - baselineDescriptors) descriptor(s) still open after the agent stopped") }
        tally.checks["descriptors closed when the agent goes", default: 0] += 1
        tally.simulatedS = nowS
    }

    /// The process's open descriptors now.
    static func openDescriptors() -> Int { SystemProbe(root: "/").list("/proc/self/fd").count }
}
