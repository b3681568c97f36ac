import LocusCore
import LocusDevices

/// `locus run [--config SITE.toml] [--state DIR]`: the agent. Sets everything up in order, each
/// step failing with one clear line, then hands over to `Agent.run()`:
/// config -> engine -> state directory (locks, log, records rebuilt) -> GPIO lines requested with
/// the levels the log says they had -> control socket -> the loop.
enum RunCommand {
    static let usage = "usage: locus run [--config SITE.toml] [--state DIR]"
    static let defaultConfig = "/etc/locus/site.toml"
    /// Output buffer per control connection: a subscriber that falls further behind than this
    /// catches up from the log.
    static let controlOutputBytes = 64 << 10

    static func run(_ arguments: [String]) -> Int32 {
        switch setUp(arguments) {
        case .success(let agent): return agent.run()
        case .failure(let status): return status.code
        }
    }

    /// Everything before the loop. Start-up's temporaries (the parsed site file, the log scan)
    /// are gone when it returns, so the loop runs in the memory the agent keeps.
    static func setUp(_ arguments: [String]) -> Result<Agent, ExitStatus> {
        Process.mapLargeBlocks()
        var configPath = defaultConfig
        var stateOverride: String? = nil
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument == "--config" || argument == "--state" else {
                return .failure(ExitStatus(code: CommandLineInterface.usageError("run: unexpected argument '\(argument)'", hint: usage)))
            }
            guard index + 1 < arguments.count else { return .failure(ExitStatus(code: CommandLineInterface.usageError("run: \(argument) needs a value", hint: usage))) }
            if argument == "--config" { configPath = arguments[index + 1] } else { stateOverride = arguments[index + 1] }
            index += 2
        }
        let loaded: LoadedConfig
        switch LoadedConfig.load(configPath) {
        case .success(let value): loaded = value
        case .failure: return .failure(ExitStatus(code: 1))
        }
        let directory = stateOverride ?? Paths.resolve(loaded.site.stateDirectory, relativeTo: Paths.directory(of: configPath))
        // Parsing freed what it used; give those pages back before the engine's tables are carved
        // out of the same heap, or the tables' untouched parts would stay resident.
        Process.releaseFreeMemory()
        let engine = EngineSetup.engine(for: loaded.site, board: loaded.board)
        let start = UTCTime(nanoseconds: Clock.realtimeNs())

        var session: StateSession? = nil
        var latched: [FixedName] = []
        switch StateSession.openSession(directory: directory, loaded: loaded, engine: engine, now: start) {
        case .success(let opened):
            session = opened
            latched = opened.restoredLatches
        case .failure(.locked):
            return .failure(ExitStatus(code: 1))
        case .failure(.unwritable):
            AgentLog.warning("locus: persistenceUnavailable: monitoring in memory only; events are not logged and records start over at the next start")
            for (name, result) in EngineSetup.addConfigured(loaded.site, to: engine, now: start) {
                AgentLog.error("locus: condition \(name) not added: \(result == .limitExceeded ? "capacity.conditions is full" : "too many monitors") (conditionLimitExceeded)")
            }
        }

        let timer: DeadlineTimer
        do { timer = try DeadlineTimer() } catch {
            return .failure(ExitStatus(code: CommandLineInterface.failure("run", "cannot create the loop's timer: \(error)")))
        }
        let signals: SignalSource
        do { signals = try SignalSource() } catch {
            return .failure(ExitStatus(code: CommandLineInterface.failure("run", "cannot receive signals: \(error)")))
        }

        // The declared conditions now live in the engine; the parsed copy would only hold memory
        // (a SIGHUP reads the file again).
        var running = loaded
        running.site.monitors = []
        let names = loaded.board.gpio?.outputs.map { $0.name } ?? []
        var plan = OutputPlan(actions: loaded.site.actions, outputs: names)
        for name in latched { if let index = plan.index(of: name) { plan.setLatch(index, true) } }
        let agent = Agent(loaded: running, engine: engine, session: session, stateDirectory: directory, outputs: nil, plan: plan,
                          control: nil, timer: timer, signals: signals)
        if let gpio = loaded.board.gpio, !gpio.outputs.isEmpty {
            // Lines start at the levels the log's last handled events give them, so a restart or
            // a power cut does not pass through the safe state before the first new event.
            agent.refreshLevels()
            let now = MonotonicClock.now()
            let initial = agent.plan.values(nowNs: now)
            if case .simulated = gpio.chip { _ = Files.makeDirectory(Paths.join(directory, "sim"), mode: 0o750) }
            do {
                agent.outputs = try GPIOOutputs(chip: gpio.chip, outputs: gpio.outputs, initial: initial,
                                                simulationFile: Paths.join(directory, "sim/gpio"))
            } catch {
                session?.close(time: start)
                return .failure(ExitStatus(code: CommandLineInterface.failure("run", error.description)))
            }
            for (index, output) in gpio.outputs.enumerated() where initial[index] {
                AgentLog.info("locus: gpio \(output.name) on (restored from the log)")
            }
        }
        if let name = loaded.site.updates.motionInput, let gpio = loaded.board.gpio, let input = gpio.inputs.first(where: { $0.name == name }) {
            if case .simulated = gpio.chip { _ = Files.makeDirectory(Paths.join(directory, "sim"), mode: 0o750) }
            do {
                agent.motion = try GPIOInput(chip: gpio.chip, input: input, simulationPath: Paths.join(directory, "sim/input-\(name)"))
                AgentLog.info("locus: gpio: input \(name) (line \(input.line)) wakes the paused receiver")
            } catch {
                session?.close(time: start)
                return .failure(ExitStatus(code: CommandLineInterface.failure("run", error.description)))
            }
        }
        // Last: the socket's appearance tells clients (and tests) that the agent is set up.
        if loaded.site.capacity.subscribers > 0 {
            let path = Paths.join(directory, "control.sock")
            do {
                agent.control = try ControlServer(path: path, mode: 0o660, readOnlyPath: Paths.join(directory, "read.sock"),
                                                  capacity: loaded.site.capacity.subscribers,
                                            requestLimit: ControlProtocol.maximumRequestBytes, outputBytes: controlOutputBytes)
            } catch {
                AgentLog.warning("locus: control: cannot listen on \(path): \(error); 'locus monitor' and 'locus events' will work on the state directory only while the agent is stopped")
            }
        }

        agent.subscriptions = Array(repeating: Agent.Subscription(), count: agent.control?.capacity ?? 0)
        agent.claims = Array(repeating: nil, count: agent.control?.capacity ?? 0)
        agent.streams = Array(repeating: nil, count: agent.control?.capacity ?? 0)
        return .success(agent)
    }
}
