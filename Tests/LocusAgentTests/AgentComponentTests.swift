import Foundation
import Glibc
@testable import LocusAgent
import LocusCore
import LocusDevices
import Testing

/// The agent's components one at a time, each driven as the loop drives it (register, wait,
/// service, with the turn's `now` passed in) but without the others: what one would hand
/// another is checked as a value.
enum ComponentHarness {
    /// A fresh directory under the temporary directory.
    static func directory(_ name: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("locus-component-\(name)-\(getpid())").path
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func board(_ text: String) throws -> BoardConfig {
        try BoardConfig.parse(Array(("[board]\nname = \"test\"\n" + text).utf8), file: "board.toml")
    }

    /// A site file (on the simulated board unless it names another) checked as `locus run` checks it.
    static func loaded(_ directory: String, _ text: String) throws -> LoadedConfig {
        let path = directory + "/site.toml"
        let source = "board = \"\(repositoryRoot)/Boards/sim.toml\"\n" + text
        try source.write(toFile: path, atomically: true, encoding: .utf8)
        guard case .success(let loaded) = LoadedConfig.check(Array(source.utf8), path: path) else { throw ConfigRefused() }
        return loaded
    }

    struct ConfigRefused: Error {}

    static func now() -> AgentTime { AgentTime(monotonic: MonotonicClock.instant, utc: UTCTime(nanoseconds: Clock.realtimeNs())) }

    /// A scripted moment: monotonic and UTC both `seconds` after 2024-03-15T10:00:00Z.
    static func at(_ seconds: Double) -> AgentTime {
        let nanoseconds = Int64(seconds * 1e9)
        return AgentTime(monotonic: MonotonicInstant(nanoseconds: nanoseconds),
                         utc: UTCTime(nanoseconds: Int64(AgentEndToEndTests.trackStart) * 1_000_000_000 + nanoseconds))
    }

    /// A 3D fix `metresNorth` of 45°N 7°E at `seconds` into the track, 4 m accurate.
    static func fix(_ seconds: Double, metresNorth: Double) -> Fix {
        var fix = Fix(timeOfDayNs: 0)
        fix.time = at(seconds).utc
        fix.mode = .threeDimensional
        fix.latitude = 45.0 + metresNorth / 111_132.0
        fix.longitude = 7.0
        fix.latitudeSigmaM = 2.8
        fix.longitudeSigmaM = 2.8
        return fix
    }

    static func openPTY() throws -> (master: Int32, slave: String) {
        guard case .success(let pair) = Files.openPseudoTerminal() else { throw POSIXError(.EIO) }
        return pair
    }

    static func write(_ master: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.write(master, $0.baseAddress! + offset, $0.count - offset) }
            if count <= 0 { break }
            offset += count
        }
    }

    /// Waits (up to 2 s) until the terminal `slave` holds `count` bytes for its reader: the kernel
    /// moves a master's writes to the slave's line discipline in the background, so a reader may
    /// otherwise see a stream in pieces.
    static func waitUntilBuffered(_ slave: String, _ count: Int) {
        let fd = open(slave, O_RDONLY | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var buffered: Int32 = 0
        for _ in 0..<200 {
            if ioctl(fd, UInt(FIONREAD), &buffered) == 0 && Int(buffered) >= count { return }
            usleep(10_000)
        }
    }

    /// What the master side of a pseudo-terminal has to read within `timeoutMs`.
    static func read(_ master: Int32, timeoutMs: Int32 = 1_000) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while Files.waitUntilReadable(master, timeoutMs: bytes.isEmpty ? timeoutMs : 100) {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(master, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes += chunk[0..<count]
        }
        return bytes
    }

    /// A component's `status(into:)` as an object.
    static func status<Component: LoopComponent>(_ component: Component) throws -> [String: Any] {
        var line = JSONWriter(capacity: 8192)
        line.beginObject()
        component.status(into: &line)
        line.endObject()
        return try #require(JSONSerialization.jsonObject(with: Data(line.string.utf8)) as? [String: Any])
    }

    static func json(_ line: Substring) -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    }
}

/// The GNSS source over a real pseudo-terminal: fixes out, the receiver's plan written, a port
/// that goes away reported and reopened.
@Suite(.serialized) struct GNSSSourceTests {
    typealias H = ComponentHarness

    @Test func fixesComeFromThePortAndALostPortIsReopened() throws {
        let (master, slave) = try H.openPTY()
        let gnss = GNSSSource(board: try H.board("[gnss]\ndevice = \"\(slave)\"\nbaud = 9600\nreceiver = \"generic-nmea\"\n"),
                              stateDirectory: "/", settings: LiveUpdateSettings())
        #expect(gnss.isConfigured && gnss.descriptor == nil)
        gnss.openIfDue(H.now())
        #expect(gnss.descriptor != nil)
        H.write(master, Array(syntheticTrack(seconds: 6, startLatitude: 45.0, longitude: 7.0, speedMps: 10).utf8))
        var poll = PollSet(capacity: gnss.maximumDescriptors)
        var fixes: [Fix] = []
        for _ in 0..<20 where fixes.count < 4 {
            poll.removeAll()
            gnss.register(in: &poll)
            _ = poll.wait(timeoutMs: 1_000)
            gnss.read(poll, H.now())
            for index in 0..<gnss.fixCount { fixes.append(gnss.fix(index)) }
            #expect(!gnss.endRead(H.now()))
        }
        // The decoder holds back the first, partial cycle; every fix after it has its second.
        let seconds = fixes.compactMap { $0.time.map { Int($0.seconds) - AgentEndToEndTests.trackStart } }
        #expect(seconds.count >= 4 && seconds == Array(seconds[0]..<(seconds[0] + seconds.count)), "\(seconds)")
        #expect(fixes.last?.latitude.map { abs($0 - (45.0 + Double(seconds.last!) * 10 / 111_132.0)) < 1e-7 } == true)
        let status = try #require(try H.status(gnss)["gnss"] as? [String: Any])
        #expect(status["open"] as? Bool == true && status["fixes"] as? Int == fixes.count && status["device"] as? String == slave)

        // The writer side closes: the read fails, the port is closed, a reopen is due.
        close(master)
        for _ in 0..<10 where gnss.descriptor != nil {
            poll.removeAll()
            gnss.register(in: &poll)
            _ = poll.wait(timeoutMs: 1_000)
            gnss.read(poll, H.now())
            _ = gnss.endRead(H.now())
        }
        #expect(gnss.descriptor == nil)
        var next = NextDeadline(now: H.now())
        gnss.deadlines(&next)
        #expect(next.earliest != nil, "a reopen is scheduled")
    }

    @Test func aUBloxReceiverIsSentItsPlanWhenThePortOpens() throws {
        let (master, slave) = try H.openPTY()
        defer { close(master) }
        let gnss = GNSSSource(board: try H.board("[gnss]\ndevice = \"\(slave)\"\nbaud = 9600\nreceiver = \"ublox\"\n"),
                              stateDirectory: "/", settings: LiveUpdateSettings(preset: .fitness, tier: .hundredMeters))
        let now = H.now()
        gnss.openIfDue(now)
        gnss.writeReceiverQueue(now)
        let written = H.read(master)
        let plan = ReceiverPlan.commands(preset: LiveConfiguration(preset: .fitness), tier: TierPolicy(tier: .hundredMeters), receiver: .ublox)
            .map(ReceiverBytes.bytes)
        #expect(written == plan.flatMap { $0 }, "CFG-NAV5, CFG-RATE, CFG-PM2, CFG-RXM in order")
        // Nothing more until the resend time.
        gnss.writeReceiverQueue(now)
        #expect(H.read(master, timeoutMs: 50).isEmpty)
        // An order from the live updates: the receiver into backup.
        #expect(gnss.receiverState.canSleep(durationMs: 30_000))
        gnss.apply(.sleep(durationMs: 30_000), now)
        gnss.writeReceiverQueue(now)
        #expect(Array(H.read(master).prefix(4)) == [0xB5, 0x62, 0x02, 0x41], "RXM-PMREQ")
    }
}

/// The Bluetooth source over an HCI feed (a pseudo-terminal carrying H4-framed events, as
/// `locus feed` plays a capture): sightings out, malformed events and sightings beyond the
/// buffer counted.
@Suite(.serialized) struct BluetoothSourceTests {
    typealias H = ComponentHarness

    /// The scan mode is decided at the first start. Here the monitor channel cannot be read (no
    /// Bluetooth in this kernel, or no CAP_NET_RAW), so `auto` takes the kernel mode, which is safe
    /// beside anyone; `raw` stays raw. Neither can start without an adapter: both say why.
    @Test func theScanModeIsDecidedAtTheFirstStart() throws {
        for (text, mode) in [("", "kernel"), ("scan = \"raw\"\n", "raw"), ("scan = \"kernel\"\n", "kernel")] {
            let bluetooth = BluetoothSource(board: try H.board("[bluetooth]\nhci = 0\n" + text), stateDirectory: "/", tier: .hundredMeters)
            var status = try H.status(bluetooth)["bluetooth"] as? [String: Any]
            #expect(status?["mode"] as? String == "undecided")
            bluetooth.openIfDue(H.at(0))
            status = try H.status(bluetooth)["bluetooth"] as? [String: Any]
            #expect(status?["mode"] as? String == mode && status?["scanning"] as? Bool == false)
            #expect(status?["co_users"] as? [String] == [] && status?["monitor_readds"] as? Int == 0)
            #expect((bluetooth.scanSettings == nil) == (mode == "kernel"))
        }
    }

    /// `locus status` shows the gateway's own beacon: off without `[bluetooth] advertise`; with
    /// it, the beacon and its settings, and off while no adapter could be opened.
    @Test func theAdvertisingStateIsInTheStatus() throws {
        let plain = BluetoothSource(board: try H.board("[bluetooth]\nhci = 0\n"), stateDirectory: "/", tier: .hundredMeters)
        let none = try H.status(plain)["bluetooth"] as? [String: Any]
        #expect((none?["advertising"] as? [String: Any])?["state"] as? String == "off")
        let beacon = try #require(BeaconAdvertisement("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/3/4", measuredPower: -61, intervalUnits: 800))
        let bluetooth = BluetoothSource(board: try H.board("[bluetooth]\nhci = 0\nscan = \"raw\"\n"), stateDirectory: "/",
                                        tier: .hundredMeters, advertisement: beacon)
        bluetooth.openIfDue(H.at(0))
        let status = try H.status(bluetooth)["bluetooth"] as? [String: Any]
        let advertising = status?["advertising"] as? [String: Any]
        #expect(advertising?["state"] as? String == "off", "no adapter here")
        #expect(advertising?["beacon"] as? String == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/3/4")
        #expect(advertising?["refusals"] as? Int == 0)
    }

    @Test func anHCIFeedBecomesSightingsAndWhatDoesNotFitIsCounted() throws {
        let (master, slave) = try H.openPTY()
        defer { close(master) }
        let bluetooth = BluetoothSource(board: try H.board("[bluetooth]\nfeed = \"\(slave)\"\n"), stateDirectory: "/", tier: .hundredMeters)
        bluetooth.openIfDue(H.now())
        let event = HexText.bytes(AgentEndToEndTests.iBeaconEvent)!
        // A malformed LE Meta event (its length says more than it has), then 80 good ones: one
        // read's worth, more than the buffer holds.
        var stream: [UInt8] = [0x04, 0x3E, 0x05, 0x02, 0x01, 0x00, 0x01, 0x43]
        for _ in 0..<80 { stream += event }
        H.write(master, stream)
        H.waitUntilBuffered(slave, stream.count)
        var poll = PollSet(capacity: bluetooth.maximumDescriptors)
        var sightings: [Sighting] = []
        for _ in 0..<20 where bluetooth.sightingsGathered + bluetooth.droppedSightings < 80 {
            poll.removeAll()
            bluetooth.register(in: &poll)
            _ = poll.wait(timeoutMs: 1_000)
            bluetooth.read(poll, H.now())
            for index in 0..<bluetooth.sightingCount { sightings.append(bluetooth.sighting(index)) }
        }
        #expect(sightings.count + bluetooth.droppedSightings == 80, "\(sightings.count) + \(bluetooth.droppedSightings)")
        #expect(bluetooth.droppedSightings > 0 && sightings.count >= BluetoothSource.sightingCapacity, "the buffer fills first")
        #expect(bluetooth.rejectedEvents == 1)
        #expect(sightings.allSatisfy { $0.identity.major == 100 && $0.identity.minor == 0 })
        let status = try #require(try H.status(bluetooth)["bluetooth"] as? [String: Any])
        #expect(status["source"] as? String == slave && status["open"] as? Bool == true)
        #expect(status["dropped_sightings"] as? Int == bluetooth.droppedSightings && status["rejected_events"] as? Int == 1)
    }
}

/// The log and the outputs with a temporary state directory and the simulated GPIO chip
/// (Boards/sim.toml): log, then act; latches and consumers' cursors survive a restart; a log in
/// memory says so and cannot replay.
@Suite(.serialized) struct EventLogAndOutputsTests {
    typealias H = ComponentHarness

    static let site = """
    [[monitor.road.condition]]
    id = "fence"
    circle = { lat = 45.0, lon = 7.0, radius = 100.0 }
    exit_margin = 0.0
    accuracy_gate = false

    [[action]]
    when = "road/fence"
    state = "satisfied"
    gpio = "relay1"
    mode = "level"

    [[action]]
    when = "road/fence"
    state = "satisfied"
    gpio = "relay2"
    mode = "latch"

    """

    /// What the loop does with pending events, without the control sessions.
    static func handleEvents(_ engine: MonitorEngine, _ log: EventLog, _ outputs: Outputs, _ now: AgentTime,
                             changes: inout [LogPayload.GPIOChange]) throws -> [EventLog.Appended] {
        var appended: [EventLog.Appended] = []
        while let pending = engine.oldestPendingEvent() {
            let logged = try #require(log.appendEvent(pending, latching: outputs.latches(for: pending), waiting: engine.pendingEventCount, now))
            if outputs.apply(pending, now) { log.setLatched(outputs.latchedNames) }
            outputs.refresh(engine, now, pending: pending, cause: .level) { change in
                changes.append(change)
                log.appendGPIO(change, now)
            }
            engine.acknowledgeOldest(adding: logged.added)
            appended.append(logged)
        }
        return appended
    }

    static func gpio(_ state: String) -> String { (try? String(contentsOfFile: state + "/sim/gpio", encoding: .utf8)) ?? "" }

    @Test func eventsAreLoggedBeforeTheLinesMoveAndLatchesAndCursorsSurviveARestart() throws {
        let directory = try H.directory("log")
        let state = directory + "/state"
        let loaded = try H.loaded(directory, Self.site)
        let fence = FixedName("fence")!, road = FixedName("road")!
        do {
            let engine = EngineSetup.engine(for: loaded.site, board: loaded.board)
            guard case .success(let log) = EventLog.open(directory: state, loaded: loaded, engine: engine, now: H.at(0).utc) else {
                Issue.record("the state directory did not open")
                return
            }
            let outputs = try Outputs.open(board: loaded.board, site: loaded.site, stateDirectory: state, latched: log.restoredLatches,
                                           engine: engine, now: H.at(0))
            #expect(Self.gpio(state) == "relay1 0\nrelay2 0\nbuzzer 0\n")
            engine.observe(H.fix(1, metresNorth: 10))
            var changes: [LogPayload.GPIOChange] = []
            let appended = try Self.handleEvents(engine, log, outputs, H.at(1), changes: &changes)
            #expect(appended.map { "\($0.event.identifier) \($0.event.state)" } == ["fence satisfied"])
            // The latch was logged with the event; the level line's move is logged after it.
            #expect(changes.map { "\($0.output) \($0.value) \($0.cause)" } == ["relay1 true level"])
            #expect(Self.gpio(state) == "relay1 1\nrelay2 1\nbuzzer 0\n")
            // Every reader reads through a cursor: from the start, this monitor's events.
            var cursor = try #require(log.cursor(monitor: road, after: 0))
            #expect(cursor.behind)
            var read: [UInt64] = []
            #expect(log.read(&cursor) { sequence, _ in read.append(sequence); return true })
            #expect(read == [appended[0].sequence] && !cursor.behind && cursor.position == log.newest)
            try log.acknowledge(road, appended[0].sequence, H.at(2))
            #expect(log.consumerPosition(road) == appended[0].sequence)
            // Leaving: the level line drops, the latch holds.
            engine.observe(H.fix(3, metresNorth: 150))
            _ = try Self.handleEvents(engine, log, outputs, H.at(3), changes: &changes)
            #expect(Self.gpio(state) == "relay1 0\nrelay2 1\nbuzzer 0\n")
            let status = try H.status(log)["log"] as? [String: Any]
            #expect(status?["available"] as? Bool == true && status?["failing"] as? Bool == false)
            outputs.shutdown(now: H.at(4))
            log.shutdown(now: H.at(4))
            #expect(Self.gpio(state) == "relay1 0\nrelay2 0\nbuzzer 0\n", "safe values at shutdown (relay2 is active-low: 0 logical)")
        }
        // A restart: the latch and the consumer's cursor come back from the log, and the latched
        // line starts active without passing through the safe state.
        let engine = EngineSetup.engine(for: loaded.site, board: loaded.board)
        guard case .success(let log) = EventLog.open(directory: state, loaded: loaded, engine: engine, now: H.at(5).utc) else {
            Issue.record("the state directory did not open again")
            return
        }
        #expect(log.restoredLatches == [FixedName("relay2")!])
        #expect(log.consumerPosition(road) > 0)
        let restored = try Outputs.open(board: loaded.board, site: loaded.site, stateDirectory: state, latched: log.restoredLatches,
                                        engine: engine, now: H.at(5))
        #expect(Self.gpio(state) == "relay1 0\nrelay2 1\nbuzzer 0\n")
        #expect(restored.latchedNames == [FixedName("relay2")!])
        #expect(engine.record(monitor: road, identifier: fence)?.lastEvent.state == .unsatisfied)
        log.shutdown(now: H.at(6))
    }

    @Test func aLogInMemoryNumbersEventsSaysSoAndCannotReplay() throws {
        let directory = try H.directory("memory-log")
        let loaded = try H.loaded(directory, Self.site)
        // A file where the state directory should be: it cannot be used.
        let state = directory + "/state"
        try "not a directory".write(toFile: state, atomically: true, encoding: .utf8)
        let engine = EngineSetup.engine(for: loaded.site, board: loaded.board)
        guard case .success(let log) = EventLog.open(directory: state, loaded: loaded, engine: engine, now: H.at(0).utc) else {
            Issue.record("a log in memory is not a failure")
            return
        }
        #expect(!log.isAvailable && engine.conditionCount == 1)
        engine.observe(H.fix(1, metresNorth: 10))
        let pending = try #require(engine.oldestPendingEvent())
        let appended = try #require(log.appendEvent(pending, latching: [], waiting: 1, H.at(1)))
        #expect(appended.sequence == 1 && appended.event.diagnostics.contains(.persistenceUnavailable))
        #expect(log.cursor(monitor: nil, after: 0) == nil, "no log: only new events")
        #expect(log.cursor(monitor: nil, after: nil)?.position == 1)
    }
}

/// The control connections over the socket a client connects to: replies, the read-only socket,
/// a request over the limit, a subscriber that falls behind and catches up from the log.
@Suite(.serialized) struct ControlConnectionsTests {
    typealias H = ComponentHarness

    /// One turn of the loop's control part; `answer` gets each request.
    static func turn(_ sessions: ControlConnections, _ answer: (ControlConnections.Request) -> Void = { _ in }) {
        var poll = PollSet(capacity: sessions.maximumDescriptors)
        sessions.register(in: &poll)
        _ = poll.wait(timeoutMs: 200)
        sessions.accept(poll)
        for connection in 0..<sessions.registeredCount {
            guard let slot = sessions.readySlot(connection, poll) else { continue }
            while let request = sessions.nextRequest(slot) { answer(request) }
            sessions.flush(slot)
        }
    }

    static func reply(_ connection: inout ControlConnection) -> [String: Any]? {
        connection.readLine(timeoutMs: 2_000).flatMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }
    }

    /// The test runs as root (or as the agent's own user): every grant on either socket. What an
    /// unprivileged user may do on each socket is `AccessTests`'s, with a user of its own.
    @Test func requestsAreAnsweredAndTheAgentsOwnUserMayChangeThroughEitherSocket() throws {
        let directory = try H.directory("control")
        let sessions = ControlConnections(directory: directory, capacity: 2, privacy: .full, access: AccessPolicy(agentUser: Accounts.currentUser, privacy: .full))
        guard var client = ControlConnection(path: directory + "/control.sock"), var reader = ControlConnection(path: directory + "/read.sock") else {
            Issue.record("cannot connect")
            return
        }
        Self.turn(sessions)   // both accepted
        let sentHello = client.send("{\"id\":1,\"op\":\"hello\"}")
        #expect(sentHello == nil)
        let sentRemove = reader.send("{\"id\":2,\"op\":\"remove\",\"monitor\":\"road\",\"identifier\":\"x\"}")
        #expect(sentRemove == nil)
        let sentBogus = reader.send("{\"id\":3,\"op\":\"bogus\"}")
        #expect(sentBogus == nil)
        let sentReaderHello = reader.send("{\"id\":4,\"op\":\"hello\"}")
        #expect(sentReaderHello == nil)
        var answered: [Int64?] = []
        for _ in 0..<3 {
            Self.turn(sessions) { request in
                answered.append(request.id)
                if case .hello = request.operation { ControlOperations.hello(request, sessions, monitors: [FixedName("road")!], persistence: false) }
            }
        }
        #expect(answered == [1, 2, 4], "the unknown op is refused by the sessions; the remove reaches its operation")
        let helloLine = Self.reply(&client)
        let hello = try #require(helloLine)
        #expect(hello["id"] as? Int == 1 && hello["ok"] as? Bool == true && hello["monitors"] as? [String] == ["road"])
        #expect(hello["access"] as? [String] == ["read", "positions", "change"])
        let unknownLine = Self.reply(&reader)
        let unknown = try #require(unknownLine)
        #expect((unknown["error"] as? [String: Any])?["code"] as? String == "unknown_op")
        let readerHelloLine = Self.reply(&reader)
        let readerHello = try #require(readerHelloLine)
        #expect(readerHello["access"] as? [String] == ["read", "positions", "change"], "root and the agent's user have every grant on read.sock too")
        // One line over the limit: told, and hung up.
        let sentLong = client.send(String(repeating: "x", count: ControlProtocol.maximumRequestBytes + 10))
        #expect(sentLong == nil)
        for _ in 0..<3 { Self.turn(sessions) }
        let tooLargeLine = Self.reply(&client)
        let tooLarge = try #require(tooLargeLine)
        #expect((tooLarge["error"] as? [String: Any])?["code"] as? String == "too_large")
        let afterClose = client.readLine(timeoutMs: 1_000)
        #expect(afterClose == nil, "closed")
    }

    @Test func aSubscriberThatFallsBehindCatchesUpFromTheLog() throws {
        let directory = try H.directory("subscriber")
        let loaded = try H.loaded(directory, EventLogAndOutputsTests.site)
        let engine = EngineSetup.engine(for: loaded.site, board: loaded.board)
        guard case .success(let log) = EventLog.open(directory: directory + "/state", loaded: loaded, engine: engine, now: H.at(0).utc) else {
            Issue.record("the state directory did not open")
            return
        }
        let sessions = ControlConnections(directory: directory, capacity: 1, privacy: .full, access: AccessPolicy(agentUser: Accounts.currentUser, privacy: .full))
        guard var client = ControlConnection(path: directory + "/control.sock") else {
            Issue.record("cannot connect")
            return
        }
        Self.turn(sessions)
        let sentSubscribe = client.send("{\"id\":1,\"op\":\"subscribe\"}")
        #expect(sentSubscribe == nil)
        for _ in 0..<2 {
            Self.turn(sessions) { request in
                if case .subscribe(let monitor, let after, let consumer) = request.operation {
                    ControlOperations.subscribe(request, sessions, monitor, after, consumer: consumer, log)
                }
            }
        }
        let subscribedLine = Self.reply(&client)
        let subscribed = try #require(subscribedLine)
        #expect(subscribed["ok"] as? Bool == true)
        // Events far beyond what the connection's buffer holds, while the client reads nothing.
        var published = 0
        for second in 1...400 {
            engine.observe(H.fix(Double(second), metresNorth: second % 2 == 0 ? 10 : 150))
            while let pending = engine.oldestPendingEvent() {
                let logged = try #require(log.appendEvent(pending, latching: [], waiting: 1, H.at(Double(second))))
                sessions.publish(logged.event, sequence: logged.sequence, log)
                engine.acknowledgeOldest(adding: logged.added)
                published += 1
            }
        }
        // Reading now, the client gets every event once, in order: live, then from the log.
        var sequences: [Int] = []
        for _ in 0..<200 where sequences.count < published {
            sessions.catchUp(log)
            Self.turn(sessions)
            while let line = client.readLine(timeoutMs: 20) {
                guard let event = (try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])?["event"] as? [String: Any] else { continue }
                sequences.append(event["seq"] as? Int ?? -1)
            }
        }
        #expect(sequences.count == published && sequences == sequences.sorted() && Set(sequences).count == sequences.count,
                "\(sequences.count) of \(published)")
        log.shutdown(now: H.at(500))
    }
}

/// The live updates with a scripted clock: fixes in; fix records, stream lines, receiver
/// orders and the scan's timing out as values for the loop.
@Suite struct LiveUpdatesComponentTests {
    typealias H = ComponentHarness

    static func drain(_ updates: LiveUpdates) -> (fixes: Int, lines: [[String: Any]], orders: [ReceiverOrder]) {
        var fixes = 0
        var lines: [[String: Any]] = []
        while let item = updates.nextItem() {
            switch item {
            case .fix: fixes += 1
            case .visit: break
            case .stream(_, let line):
                guard let line else { continue }
                lines += String(decoding: line, as: UTF8.self).split(separator: "\n").compactMap(H.json)
            case .reply(_, let line):
                lines += String(decoding: line, as: UTF8.self).split(separator: "\n").compactMap(H.json)
            case .fleetLocated(let detail):
                if let detail { lines += [H.json(Substring(String(decoding: detail, as: UTF8.self)))].compactMap { $0 } }
            }
        }
        var orders: [ReceiverOrder] = []
        while let order = updates.nextReceiverOrder() { orders.append(order) }
        return (fixes, lines, orders)
    }

    @Test func aStreamGetsNumberedLinesTheRadiosFollowItsTierAndAStopSleepsTheReceiver() throws {
        let directory = try H.directory("updates")
        let loaded = try H.loaded(directory, "[updates]\nstationary_window = \"10s\"\n")
        let updates = try LiveUpdates(loaded: loaded, slots: 2, stateDirectory: directory)
        let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: 4, events: 4))
        let receiver = ReceiverState(receiver: .ublox, portOpen: true)
        #expect(updates.radioTier == .hundredMeters)

        // A client asks for the finest tier: the radios follow, as orders for the loop.
        var request = UpdateStreamRequest()
        request.preset = .fitness
        request.accuracy = .best
        let (settings, radios) = updates.startStream(1, request)
        #expect(settings.configuration.preset == .fitness && settings.tier.tier == .best && radios == .best)
        let started = Self.drain(updates)
        #expect(started.orders.count == 1 && updates.takeScanSettings() == TierPolicy(tier: .best).scanSettings)
        if case .plan(_, let policy)? = started.orders.first { #expect(policy.tier == .best) } else { Issue.record("no plan order") }

        // Moving for 5 s: a fix record a second, a stream line a second (batch of one).
        var records = 0
        var lines: [[String: Any]] = []
        for second in 0..<5 {
            let now = H.at(Double(second))
            updates.observe(H.fix(Double(second), metresNorth: Double(second) * 5), now, receiver: receiver, engine: engine)
            let taken = Self.drain(updates)
            records += taken.fixes
            lines += taken.lines
        }
        #expect(records == 5)
        let batches = lines.compactMap { ($0["update"] as? [String: Any])?["batch"] as? Int }
        #expect(batches == [1, 2, 3, 4, 5], "\(lines)")
        #expect(lines.allSatisfy { ($0["update"] as? [String: Any])?["flush"] as? String == "count" })

        // Standing still past the stationary window: the receiver is ordered to sleep.
        var orders: [ReceiverOrder] = []
        for second in 5..<30 {
            let now = H.at(Double(second))
            updates.observe(H.fix(Double(second), metresNorth: 25), now, receiver: receiver, engine: engine)
            updates.tick(now, receiver: receiver)
            orders += Self.drain(updates).orders
        }
        #expect(orders.contains { if case .sleep = $0 { return true } else { return false } }, "\(orders)")
        let status = try #require(try H.status(updates)["updates"] as? [String: Any])
        #expect(status["stationary"] as? Bool == true && status["streams"] as? Int == 1 && status["radios"] as? String == "best")

        // The stream ends: the radios go back to the site's tier.
        updates.endStream(1)
        let ended = Self.drain(updates)
        if case .plan(_, let policy)? = ended.orders.last { #expect(policy.tier == .hundredMeters) } else { Issue.record("no plan order") }
        #expect(updates.radioTier == .hundredMeters)
        var next = NextDeadline(now: H.at(30))
        updates.deadlines(&next)
        #expect(next.earliest != nil, "the pause's probe is due")
    }

    /// A stream's own controls: no automatic pause (updates go on while standing still, each
    /// saying so, and the receiver is never put to sleep until the stream closes), a distance
    /// filter, deferred batches, and an activity that sets the receiver's platform model.
    @Test func aStreamsOwnPauseDistanceFilterBatchesAndActivity() throws {
        let directory = try H.directory("stream-controls")
        let loaded = try H.loaded(directory, "[updates]\nstationary_window = \"10s\"\n")
        let updates = try LiveUpdates(loaded: loaded, slots: 3, stateDirectory: directory)
        let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: 4, events: 4))
        let receiver = ReceiverState(receiver: .ublox, portOpen: true)
        var heartbeat = UpdateStreamRequest()
        heartbeat.pausesAutomatically = false
        heartbeat.activity = .automotiveNavigation
        let (settings, _) = updates.startStream(1, heartbeat)
        #expect(!settings.pausesAutomatically && settings.batchCount == 1)
        var sparse = UpdateStreamRequest()
        sparse.distanceFilterM = 12
        sparse.batchCount = 3
        _ = updates.startStream(2, sparse)
        let opened = Self.drain(updates).orders
        // The automotive model reaches the receiver (the site's is the default preset's).
        guard case .plan(let model, _)? = opened.last else { Issue.record("no plan order: \(opened)"); return }
        #expect(model.ubxDynamicModel == .automotive && updates.receiverModel == .automotiveNavigation)

        // Moving 5 m a second for 10 s, then standing still for 40 s.
        var lines: [Int: [[String: Any]]] = [:]
        var orders: [ReceiverOrder] = []
        for second in 0..<50 {
            let now = H.at(Double(second))
            updates.observe(H.fix(Double(second), metresNorth: Double(min(second, 10)) * 5), now, receiver: receiver, engine: engine)
            updates.tick(now, receiver: receiver)
            while let item = updates.nextItem() {
                if case .stream(let slot, let line?) = item {
                    lines[slot, default: []] += String(decoding: line, as: UTF8.self).split(separator: "\n").compactMap(H.json)
                }
            }
            while let order = updates.nextReceiverOrder() { orders.append(order) }
        }
        let isSleep: (ReceiverOrder) -> Bool = { if case .sleep = $0 { return true } else { return false } }
        #expect(!orders.contains(where: isSleep), "kept awake: \(orders)")
        let heartbeats = (lines[1] ?? []).compactMap { $0["update"] as? [String: Any] }
        #expect(heartbeats.count == 50, "an update every second, standing still too: \(heartbeats.count)")
        #expect(heartbeats.last?["isStationary"] as? Bool == true)
        // 12 m between deliveries at 5 m a second: every third fix while moving, in threes.
        let filtered = (lines[2] ?? []).compactMap { $0["update"] as? [String: Any] }
        let batches = filtered.compactMap { $0["batch"] as? Int }
        #expect(filtered.count >= 3 && filtered.count <= 5 && batches.first == 1 && Set(batches).count == (filtered.count + 2) / 3,
                "\(filtered)")

        // The heartbeat stream ends: the pause is back, and the stationary receiver sleeps.
        updates.endStream(1)
        updates.tick(H.at(50), receiver: receiver)
        var after: [ReceiverOrder] = []
        while let order = updates.nextReceiverOrder() { after.append(order) }
        #expect(after.contains(where: isSleep), "\(after)")
        #expect(after.contains { if case .plan(let model, _) = $0 { return model.preset == .default } else { return false } }, "\(after)")
    }
}

/// The loop's own part: the timer it sleeps on fires at the deadline; no signal, no reload.
@Suite struct LoopHousekeepingTests {
    @Test func theTimerWakesTheLoopAtItsDeadline() throws {
        let loop = try LoopHousekeeping()
        var poll = PollSet(capacity: loop.maximumDescriptors)
        let start = ComponentHarness.now()
        loop.register(in: &poll)
        let registered = poll.count, refused = poll.overflows
        #expect(registered == 2 && refused == 0)
        let before = MonotonicClock.instant
        let woke = loop.wait(poll, until: start.monotonic + 20_000_000, now: start)
        #expect(woke)
        #expect(MonotonicClock.instant.nanoseconds(since: before) >= 15_000_000, "slept until the deadline")
        let reload = loop.service(poll)
        #expect(!reload && loop.running && loop.turns == 1)
        // A registration beyond the capacity is refused and counted.
        let index = poll.add(Descriptor(0))
        let overflows = poll.overflows
        #expect(index == nil && overflows == 1)
        loop.check(poll)
        let status = try ComponentHarness.status(loop)
        #expect((status["loop"] as? [String: Any])?["poll_overflows"] as? Int == 1)
    }
}
