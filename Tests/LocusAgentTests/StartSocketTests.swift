import Foundation
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
        defer { feeder.terminate(); feeder.waitUntilExit() }
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
}
