import LocusCore
import LocusDevices

/// The running agent's loop, turn by turn, for Benchmarks/LocusBench (host, release, under
/// callgrind): a site with one circular fence on a board whose GNSS port is a pseudo-terminal the
/// benchmark writes NMEA into. Everything else is the real loop: the poll set, the timer, the
/// control socket, the log in `directory/state`, the live updater.
///
/// Two workloads: an idle turn (the systemd watchdog set to fire every turn, nothing else to do)
/// and a turn with a fix and an event (one NMEA epoch written, alternately inside and outside the
/// fence: the fix is decided, the event is logged and handled). With `brokerPort` the site has an
/// `[uplink]` to an MQTT broker on 127.0.0.1 at that port (Scripts/bench starts mosquitto), so
/// the fix turn also publishes the event and its state at QoS 1 and reads earlier PUBACKs. With
/// `placeIndex` the site has `[geocoding]` over that index with `annotate = true`: events, their
/// log lines and what subscribers and streams get name the place nearest them. With `remoteKey`
/// (and a broker) the site has `[remote]` with that public key: the fleet may set its monitors.
public final class AgentBenchmark {
    let agent: Agent
    let master: Int32
    let directory: String

    /// nil (with the reason on standard error) when the site cannot be set up.
    public init?(directory: String, brokerPort: Int? = nil, placeIndex: String? = nil, remoteKey: String? = nil) {
        self.directory = directory
        let state = Paths.join(directory, "state")
        _ = Files.makeDirectory(directory, mode: 0o750)
        _ = Files.makeDirectory(state, mode: 0o750)
        let board = "[board]\nname = \"bench\"\n[gnss]\ndevice = \"gnss\"\nbaud = 9600\nreceiver = \"generic-nmea\"\n"
        let site = """
        board = "board.toml"
        [log]
        fix_interval = "1s"
        [[monitor.bench.condition]]
        id = "fence"
        circle = { lat = 45.0, lon = 7.0, radius = 100.0 }
        exit_margin = 0.0
        dwell = "0s"
        accuracy_gate = false

        """ + (brokerPort.map { "[uplink]\nbroker = \"mqtt://127.0.0.1:\($0)\"\ngateway = \"bench\"\nmax_inflight = 16\n" } ?? "")
            + (placeIndex.map { "[geocoding]\nindex = \"\($0)\"\nannotate = true\n" } ?? "")
            + (remoteKey.map { "[remote]\nkey = \"\($0)\"\nsettable = [\"monitor\"]\ncommands = [\"pulse\"]\n" } ?? "")
        _ = Files.replace(Paths.join(directory, "board.toml"), contents: board)
        _ = Files.replace(Paths.join(directory, "site.toml"), contents: site)
        guard case .success(let (master, slave)) = Files.openPseudoTerminal(), Files.symlink(slave, at: Paths.join(state, "gnss")) == nil else {
            Console.error("bench: cannot open a pseudo-terminal for the GNSS port\n")
            return nil
        }
        self.master = master
        guard case .success(let agent) = Agent.open(configPath: Paths.join(directory, "site.toml"), stateDirectory: state) else { return nil }
        self.agent = agent
        // The port open before the first write (a turn would open it too, but would wait first).
        agent.start()
        agent.gnss.openIfDue(AgentTime(monotonic: MonotonicClock.instant, utc: UTCTime(nanoseconds: Clock.realtimeNs())))
    }

    /// One turn of the loop (it waits in poll(2) for something to do).
    public func turn() { agent.turn() }

    /// Writes NMEA to the port and waits (at most 1 s) until the agent's end of it is readable, so
    /// the next turn reads it whole.
    public func write(_ bytes: [UInt8]) {
        _ = Files.writeSome(master, bytes[...])
        if let port = agent.gnss.descriptor { _ = Files.waitUntilReadable(port.rawValue, timeoutMs: 1_000) }
    }

    public var fixes: Int { agent.gnss.fixesDecoded }

    // MARK: uplink

    /// The uplink has its CONNACK (false without `[uplink]`).
    public var uplinkConnected: Bool { agent.uplink?.isConnected ?? false }
    /// QoS 1 messages published and acknowledged (PUBACK) since start.
    public var uplinkPublished: Int { agent.uplink?.counters.published ?? 0 }
    public var uplinkAcknowledged: Int { agent.uplink?.counters.acknowledged ?? 0 }
    /// The fleet's configuration version applied (0: none).
    public var remoteApplied: UInt64 { agent.uplink?.remote?.applied ?? 0 }
    public var conditions: Int { agent.engine.conditionCount }

    // MARK: single location request

    /// A control connection for `locate` requests (false: the socket is not there).
    private var client: ControlConnection? = nil

    public func connect() -> Bool {
        client = ControlConnection(path: Paths.join(Paths.join(directory, "state"), "control.sock"))
        return client != nil
    }

    /// Sends a request line (a Unix socket: the agent's end has it when this returns).
    public func send(_ line: String) {
        _ = client?.send(line)
    }

    public func reply() -> [UInt8]? { client?.readLine(timeoutMs: 1_000) }

    /// Every line the connection has been sent, waiting at most `timeoutMs` for each.
    public func replies(timeoutMs: Int32 = 0) -> [[UInt8]] {
        var lines: [[UInt8]] = []
        while let line = client?.readLine(timeoutMs: timeoutMs) { lines.append(line) }
        return lines
    }
    public var events: Int { agent.log.events }
}
