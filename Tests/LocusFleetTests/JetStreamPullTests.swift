import Foundation
#if canImport(Glibc)
import Glibc
#endif
@testable import LocusFleet
import Testing

/// The ingest's pulls on a NATS cluster when the consumer's leader is lost with a pull waiting at
/// it (a node stalled or killed mid-drain): the worker asks again a second after the pull's
/// expiry, not after its own 10 s timeout, so it is back to work as soon as the cluster elects a
/// new leader. Played against a scripted server on 127.0.0.1 that answers the connection and
/// the consumer's creation, then only what each test says, and notes when each pull arrives.
@Suite struct JetStreamPullTests {
    /// The server's side: one client, its pulls' arrival times and reply subjects.
    final class ScriptedServer: @unchecked Sendable {
        let port: UInt16
        private let listener: Int32
        private var client: Int32 = -1
        private let lock = NSLock()
        private var pullTimes: [Date] = []
        private var pullReplies: [String] = []
        /// Set: the server answers nothing more (a node stalled by SIGSTOP holds its sockets).
        private var stalledFlag = false
        private var thread: Thread? = nil

        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, length) == 0 && listen(fd, 1) == 0 && getsockname(fd, $0, &length) == 0
                }
            }
            guard bound else { close(fd); throw FleetError("the scripted server cannot listen on 127.0.0.1") }
            listener = fd
            port = UInt16(bigEndian: address.sin_port)
            let thread = Thread { [self] in serve() }
            self.thread = thread
            thread.start()
        }

        deinit {
            close(listener)
            if client >= 0 { close(client) }
        }

        var pulls: [Date] { lock.withLock { pullTimes } }
        func stall() { lock.withLock { stalledFlag = true } }

        /// A 408 (the pull expired) on pull `index`'s reply subject, as the server sends it.
        func expire(_ index: Int) {
            let reply = lock.withLock { pullReplies[index] }
            let headers = "NATS/1.0 408 Request Timeout\r\n\r\n"
            send("HMSG \(reply) 1 \(headers.utf8.count) \(headers.utf8.count)\r\n\(headers)\r\n")
        }

        private func send(_ text: String) {
            _ = text.withCString { Glibc.send(client, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        }

        /// INFO; PONG to the CONNECT's PING; the consumer's creation answered; then each
        /// MSG.NEXT noted and left waiting.
        private func serve() {
            client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            send("INFO {\"server_id\":\"scripted\",\"headers\":true,\"max_payload\":1048576,\"proto\":1}\r\n")
            var text = ""
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = recv(client, &buffer, buffer.count, 0)
                guard count > 0 else { return }
                text += String(decoding: buffer[0..<count], as: UTF8.self)
                while let end = text.range(of: "\r\n") {
                    let line = String(text[..<end.lowerBound])
                    text.removeSubrange(..<end.upperBound)
                    take(line)
                }
            }
        }

        private func take(_ line: String) {
            let words = line.split(separator: " ").map(String.init)
            if lock.withLock({ stalledFlag }) { return }
            if line == "PING" { send("PONG\r\n"); return }
            guard words.first == "PUB", words.count == 4 else { return }
            if words[1].hasPrefix("$JS.API.CONSUMER.DURABLE.CREATE.") {
                let answer = #"{"type":"io.nats.jetstream.api.v1.consumer_create_response","num_pending":0}"#
                send("MSG \(words[2]) 1 \(answer.utf8.count)\r\n\(answer)\r\n")
            } else if words[1].hasPrefix("$JS.API.CONSUMER.MSG.NEXT.") {
                lock.withLock {
                    pullTimes.append(Date())
                    pullReplies.append(words[2])
                }
            }
        }
    }

    static func source(_ server: ScriptedServer) throws -> JetStreamSource {
        let node = try NATSAddress.parse("127.0.0.1:\(server.port)")
        let settings = JetStreamSource.Settings(nodes: [node], filter: NATSSubjects.filter(mqtt: "locus/#"), pullExpiresMs: 1_000,
                                                pingIntervalMs: 5_000, pongTimeoutMs: 1_500)
        return try JetStreamSource(settings, node: node)
    }

    /// Reads and keeps the connection alive as the ingest does, for `seconds`.
    static func read(_ source: JetStreamSource, seconds: Double) throws {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            _ = try source.read(timeoutMs: 100)
            try source.keepAlive()
        }
    }

    @Test func aPullLostWithItsLeaderIsAskedAgainASecondAfterItsExpiry() throws {
        let server = try ScriptedServer()
        let source = try Self.source(server)
        try Self.read(source, seconds: 4.5)
        let pulls = server.pulls
        // Pulls at 0, about 2 and about 4 s: each a second past the previous one's expiry.
        #expect(pulls.count == 3, "\(pulls)")
        for (earlier, later) in zip(pulls, pulls.dropFirst()) {
            let gap = later.timeIntervalSince(earlier)
            #expect(gap >= 1.95 && gap < 2.6, "a lost pull asked again after \(gap) s")
        }
    }

    /// A pull's end that came while the worker was committing (not reading) and is read only
    /// after the pull was taken as lost: one new pull, not two.
    @Test func anExpiryThatWaitedUnreadIsReadBeforeThePullIsTakenAsLost() throws {
        let server = try ScriptedServer()
        let source = try Self.source(server)
        try Self.read(source, seconds: 0.3)
        #expect(server.pulls.count == 1)
        server.expire(0)
        usleep(2_500_000) // a long commit: the 408 waits in the socket past the grace
        try Self.read(source, seconds: 0.3)
        #expect(server.pulls.count == 2, "\(server.pulls)")
    }

    /// The worker's own node stalled: the pulls asked again keep the connection busy, so the
    /// PING that goes with each one is what finds the node lost (within the PONG timeout).
    @Test func aStalledNodeIsFoundThoughThePullsKeepTheConnectionBusy() throws {
        let server = try ScriptedServer()
        let source = try Self.source(server)
        server.stall()
        let start = Date()
        #expect(throws: FleetError.self) { try Self.read(source, seconds: 8) }
        let found = Date().timeIntervalSince(start)
        // The first pull lost at 2 s, its PING unanswered 1.5 s later: well before the 5 s
        // interval's own PING would be due.
        #expect(found >= 3.4 && found < 4.5, "the stall found after \(found) s")
    }
}
