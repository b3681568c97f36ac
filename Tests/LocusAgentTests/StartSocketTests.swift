import Foundation
import LocusMonitor
import Testing

private typealias E2E = AgentEndToEndTests

/// `start_socket`: the agent starts a monitor's client through systemd socket activation. The
/// test stands in for systemd (a listening socket it owns, at the path the site names) and then
/// for the started client (it opens the monitor and drains the event from its consumer cursor).
@Suite(.serialized) struct StartSocketTests {
    /// A listening Unix socket, non-blocking, as systemd holds one for a `.socket` unit.
    final class Listener {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        init(_ path: String) throws {
            unlink(path)
            guard E2E.withAddress(path, { bind(descriptor, $0, $1) }) == 0, listen(descriptor, 8) == 0 else { throw E2E.WaitTimedOut(what: "listen on \(path)") }
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        }
        deinit { close(descriptor) }
        /// Connections accepted (and closed) now.
        func acceptAll() -> Int {
            var count = 0
            while true {
                let client = accept(descriptor, nil, nil)
                if client < 0 { return count }
                close(client)
                count += 1
            }
        }
    }

    /// Starts `command` with standard output and error to `output`; its pid.
    static func spawn(_ command: [String], output: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, command[0], &actions, nil, &argv, environ) == 0 else { throw E2E.WaitTimedOut(what: "spawn \(command[0])") }
        return pid
    }

    static func starter(_ state: String) throws -> [String: Any] {
        let reply = try locus(["status", "--state", state]).output
        let object = try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]
        return (object?["start_sockets"] as? [[String: Any]])?.first ?? [:]
    }

    @Test func anEventWithNoConsumerStartsTheClientWhichDrainsItFromItsCursor() throws {
        let site = try E2E.site("start-socket")
        let socketPath = site.directory + "/greeter.sock"
        try """
        board = "\(repositoryRoot)/Boards/sim.toml"
        [monitor.cargo]
        start_socket = "\(socketPath)"
        [[monitor.cargo.condition]]
        id = "tag"
        beacon = { uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0" }
        exit_timeout = "3s"
        """.write(toFile: site.sitePath, atomically: true, encoding: .utf8)
        let agent = try E2E.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let control = site.state + "/control.sock"

        // A consumer is connected when the event arrives: it gets it, and nothing is started.
        let consumer = try E2E.Connection(control)
        #expect(consumer.request("{\"id\":1,\"op\":\"open\",\"monitor\":\"cargo\"}")?["consumer_seq"] as? Int == 0)
        #expect(consumer.request("{\"id\":2,\"op\":\"subscribe\",\"monitor\":\"cargo\",\"consumer\":true}")?["ok"] as? Bool == true)
        // The HCI feed opens and stays quiet: the tag is unseen for its exit timeout.
        let feeder = try E2E.feed(site, nmea: nil, hci: "", linger: 40)
        defer { kill(feeder.processIdentifier, SIGKILL); feeder.waitUntilExit() }
        let event = try #require(consumer.event())
        #expect(event.1 == "tag unsatisfied")
        usleep(1_500_000)
        #expect(!agent.log.contains("locus: start cargo"), "no start while a consumer is connected: \(agent.log)")

        // The consumer goes away without taking it: the agent connects to the client's socket,
        // which is missing yet (retried with backoff, said once).
        consumer.hangUp()
        try E2E.waitFor("the failed start", seconds: 10) { agent.log.contains("locus: start cargo: cannot connect to \(socketPath)") }
        let failed = try Self.starter(site.state)
        #expect(failed["pending_seq"] as? Int == event.0 && (failed["failures"] as? Int ?? 0) >= 1, "\(failed)")

        // systemd's socket appears: the next attempt (backoff 1 s, 2 s, ...) connects.
        let listener = try Listener(socketPath)
        var accepted = 0
        try E2E.waitFor("the agent to connect", seconds: 10) {
            accepted += listener.acceptAll()
            return accepted > 0
        }
        #expect(accepted == 1)
        #expect(agent.log.contains("locus: start cargo: connected to \(socketPath)"), "\(agent.log)")

        // The started client opens the monitor and drains the event from its cursor.
        let started = try E2E.Connection(control)
        #expect(started.request("{\"id\":1,\"op\":\"open\",\"monitor\":\"cargo\"}")?["consumer_seq"] as? Int == 0)
        #expect(started.request("{\"id\":2,\"op\":\"subscribe\",\"monitor\":\"cargo\",\"consumer\":true}")?["after_seq"] as? Int == 0)
        let drained = try #require(started.event())
        #expect(drained.0 == event.0 && drained.1 == "tag unsatisfied")
        #expect(started.request("{\"id\":3,\"op\":\"ack\",\"monitor\":\"cargo\",\"seq\":\(drained.0)}")?["consumer_seq"] as? Int == event.0)
        started.hangUp()
        try E2E.waitFor("nothing left waiting", seconds: 10) { try Self.starter(site.state)["pending_seq"] as? Int == 0 }
        #expect(try Self.starter(site.state)["starts"] as? Int == 1)
        // Taken: no further start, however long nobody is connected.
        usleep(2_500_000)
        #expect(listener.acceptAll() == 0)
    }

    /// The example as deployed: systemd's own socket activation tool holds the socket the site
    /// names and starts the greeter on the agent's connection (LISTEN_FDS); the greeter drains
    /// the event it had not taken.
    @Test func theGreeterIsStartedBySocketActivationAndDrainsTheEvent() throws {
        let activate = "/usr/bin/systemd-socket-activate"
        guard FileManager.default.isExecutableFile(atPath: activate) else {
            print("StartSocketTests: greeter under socket activation skipped: \(activate) is missing (package systemd)")
            return
        }
        let greeter = try locusBinary().replacingOccurrences(of: "/locus", with: "/monitor-greeter")
        guard FileManager.default.isExecutableFile(atPath: greeter) else { return }   // a device build under test: host examples are tested with the host build
        let site = try E2E.site("start-greeter")
        let socketPath = site.directory + "/greeter.sock"
        try """
        board = "\(repositoryRoot)/Boards/sim.toml"
        [monitor.gate]
        start_socket = "\(socketPath)"
        [[monitor.gate.condition]]
        id = "tag"
        beacon = { uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0" }
        exit_timeout = "3s"
        """.write(toFile: site.sitePath, atomically: true, encoding: .utf8)
        let outputPath = site.directory + "/greeter.out"
        // posix_spawn, not Foundation's Process: systemd-socket-activate closes every descriptor
        // it does not pass on before it execs the greeter, and Process takes that for an exit
        // and then waits for the process in a way that blocks every other Process.
        let pid = try Self.spawn([activate, "-l", socketPath, greeter, site.state], output: outputPath)
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        try E2E.waitFor("the activation socket", seconds: 10) { FileManager.default.fileExists(atPath: socketPath) }
        let agent = try E2E.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let feeder = try E2E.feed(site, nmea: nil, hci: "", linger: 40)
        defer { kill(feeder.processIdentifier, SIGKILL); feeder.waitUntilExit() }
        var text = ""
        try? E2E.waitFor("the greeter's goodbye", seconds: 30) {
            text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            return text.contains("goodbye, tag")
        }
        #expect(text.contains("goodbye, tag"), "\(text)\n\(agent.log)")
        #expect(agent.log.contains("locus: start gate: connected to \(socketPath)"), "\(agent.log)")
        try E2E.waitFor("the event taken", seconds: 10) { try Self.starter(site.state)["pending_seq"] as? Int == 0 }
    }

    /// `[updates] start_socket`: a visit, or the device moving again, starts the location client
    /// while no update stream is open; once its stream is open nothing more is started, and the
    /// client reads the visit it was started for from the log.
    @Test func aVisitOrAMoveStartsTheLocationClientUntilItHasAStream() async throws {
        let site = try E2E.site("start-updates")
        let socketPath = site.directory + "/tracker.sock"
        try """
        board = "\(repositoryRoot)/Boards/sim.toml"
        [updates]
        stationary_window = "10s"
        visit_minimum = "5s"
        start_socket = "\(socketPath)"
        """.write(toFile: site.sitePath, atomically: true, encoding: .utf8)
        let agent = try E2E.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let listener = try Listener(socketPath)
        #expect(try Self.starter(site.state)["updates"] as? Bool == true)

        // 10 s moving, then standing: a stay, reported as a visit 5 s in; nobody has a stream.
        let feeder = try E2E.feed(site, nmea: segmentedTrack([(10, 10), (30, 0)], startLatitude: 45.0, longitude: 7.0), hci: nil, speed: "5")
        defer { feeder.waitUntilExit() }
        var started = 0
        try E2E.waitFor("the start", seconds: 20) {
            started += listener.acceptAll()
            return started > 0
        }
        #expect(agent.log.contains("locus: start updates: connected to \(socketPath)"), "\(agent.log)")
        // Started, as systemd would start it: the client reads the visit and opens its stream.
        let visits = try await LocationUpdate.recentVisits(stateDirectory: site.state)
        #expect(visits.count == 1 && visits[0].isArrival, "\(visits)")
        var iterator = LocationUpdate.liveUpdates(stateDirectory: site.state).makeAsyncIterator()
        let first = Task { try await iterator.next() }
        try E2E.waitFor("the client's stream", seconds: 10) { LocusMonitorTests.updatesStatus(site.state)["streams"] as? Int == 1 }
        try E2E.waitFor("the start no longer wanted", seconds: 10) { try Self.starter(site.state)["pending_seq"] as? Int == 0 }
        usleep(1_500_000)
        started += listener.acceptAll()
        let starts = try Self.starter(site.state)["starts"] as? Int
        #expect(started == 1 && starts == 1)
        first.cancel()
    }
}
