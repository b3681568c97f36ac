import Foundation
import LocusCore
@testable import LocusFleet
import Testing
import TestSupport

/// The ingest on the clustered broker (docs/fleet.md, "A clustered broker"): three real NATS 2.9
/// nodes (MQTT on JetStream, replicas 3) and PostgreSQL 15 on 127.0.0.1, two `locus-fleet
/// ingest --nats` workers sharing one durable consumer. Gateways' records published through
/// the nodes' MQTT ports are stored exactly once while a node is killed mid-drain and started
/// again, another is stalled (SIGSTOP) and resumed, and a worker is killed and replaced.
@Suite(.serialized) struct ClusterIngestTests {
    static let gateways = ["gw-a", "gw-b", "gw-c", "gw-d"]
    static let perPhase = 600

    /// Publishes `lines` at QoS 1 through one node, again until mosquitto_pub has every PUBACK
    /// (a node that lost its stream's leader takes a few seconds to have one again; a message
    /// published twice is stored once).
    static func publish(_ port: UInt16, _ topic: String, _ lines: [String]) throws {
        let file = try Fleet.temporaryDirectory("cluster-publish") + "/lines"
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        var last = ""
        for _ in 0..<10 {
            let run = try Fleet.run("/bin/sh", ["-c", "timeout 60 mosquitto_pub -h 127.0.0.1 -p \(port) -q 1 -t '\(topic)' -l < '\(file)'"])
            if run.status == 0 { return }
            last = run.error
            usleep(500_000)
        }
        Issue.record("mosquitto_pub to \(port) kept failing: \(last)")
    }

    static func phase(_ port: UInt16, _ phase: Int) throws {
        for gateway in gateways {
            let events = IngestTests.events(gateway, 3 * perPhase)
            try publish(port, "locus/\(gateway)/event/yard/fence", Array(events[(phase * perPhase)..<((phase + 1) * perPhase)]))
        }
    }

    @Test func twoWorkersStoreEachRecordOnceThroughANodeKilledAndOneStalled() throws {
        let cluster = try TestNATSCluster()
        let url = try Fleet.migratedDatabase("ingest-cluster")
        let nodes = cluster.natsNodes
        // A short ack_wait: what a lost worker or node held goes again after 3 s; a node that
        // does not answer a PING within 5 s is left.
        let options = ["--ack-wait", "3", "--keepalive", "5"]
        // Each worker's first node comes from its name: fleet-a's is node 3, fleet-c's node 2,
        // fleet-e's node 1.
        let one = try IngestTests.Worker(nats: nodes, database: url, options + ["--client-id", "fleet-a"], name: "cluster-1")
        var two = try IngestTests.Worker(nats: nodes, database: url, options + ["--client-id", "fleet-c"], name: "cluster-2")
        #expect(one.said.contains("node 3 of 3") && two.said.contains("node 2 of 3"), "\(one.said)\n\(two.said)")
        let total = Self.gateways.count * 3 * Self.perPhase

        // A backlog through node 1, and node 2 killed while it drains.
        try Self.phase(cluster.nodes[0].mqttPort, 0)
        cluster.kill(1)
        // More through node 3, and the worker that was on node 2, now on another, killed
        // mid-drain and replaced.
        try Self.phase(cluster.nodes[2].mqttPort, 1)
        try two.wait(for: "connected to", times: 2)
        two.crash()
        two = try IngestTests.Worker(nats: nodes, database: url, options + ["--client-id", "fleet-e"], name: "cluster-3")
        // Node 2 back and caught up; node 3 stalled while the last part goes through node 1.
        try cluster.start(1)
        try cluster.waitUntilCurrent(1)
        cluster.stall(2)
        try Self.phase(cluster.nodes[0].mqttPort, 2)
        try one.wait(for: "the node is lost or stalled")
        try one.wait(for: "connected to", times: 2)
        cluster.resume(2)

        let stored = try IngestTests.waitCount(url, "select count(*) from records", total, seconds: 90)
        #expect(stored == total, "one: \(one.said)\ntwo: \(two.said)")
        #expect(try IngestTests.count(url, "select count(distinct (gateway, seq)) from records") == total)
        for gateway in Self.gateways {
            #expect(try ImportTests.stored(url, gateway).map(\.seq) == (1...Int64(3 * Self.perPhase)).map { $0 }, "\(gateway)")
        }
        #expect(try IngestTests.count(url, "select count(*) from quarantine") == 0)
        #expect(try Fleet.fleet(["status", "--database", url]).status == 0, "no gap")
        #expect(one.stop() == 0 && two.stop() == 0)
        // No record stored twice (the redeliveries after the faults met their rows): the records
        // the two last workers stored add up to no more than the total (messages taken would
        // not: redeliveries count again). And the consumer was shared: the first worker stored
        // part of it, the workers on the other side (the one killed, then its replacement) the
        // rest. (Which of those two stored what depends on which node led the consumer when
        // the third node stalled.)
        let shares = [one.totals.stored, two.totals.stored]
        #expect(shares.reduce(0, +) <= total && shares[0] > 0 && shares[0] < total,
                "records stored by the first worker and the replacement: \(shares) of \(total)\none: \(one.said)\ntwo: \(two.said)")
    }

    /// A gateway's `online` and its `offline` a moment later, stored by the broker within one
    /// millisecond and taken by two workers in either order: the later (to the microsecond)
    /// stays, within a batch and across batches.
    @Test func statusesAreOrderedByTheBrokersTimeToTheMicrosecond() throws {
        let url = try Fleet.migratedDatabase("cluster-status")
        let database = try FleetDatabase(try ConnectionString.parse(url).get()) { _ in }
        let at: Int64 = 1_764_374_400_123_456
        func online(_ gateway: String) throws -> String {
            try Fleet.connect(url).execute("select online::text || ' ' || to_char(status_at at time zone 'UTC', 'HH24:MI:SS.US') from gateways where gateway = $1",
                                           [gateway]).scalar ?? ""
        }
        // One batch, arriving newest first.
        _ = try database.write([], [], statuses: [GatewayStatus(gateway: "gw-1", online: false, receivedUs: at + 1),
                                                  GatewayStatus(gateway: "gw-1", online: true, receivedUs: at)], what: "statuses")
        #expect(try online("gw-1") == "false 00:00:00.123457", "the offline a microsecond after the online, at its own time")
        // Two batches, the newer committed first.
        _ = try database.write([], [], statuses: [GatewayStatus(gateway: "gw-2", online: false, receivedUs: at + 1)], what: "statuses")
        _ = try database.write([], [], statuses: [GatewayStatus(gateway: "gw-2", online: true, receivedUs: at)], what: "statuses")
        #expect(try online("gw-2").hasPrefix("false "))
        _ = try database.write([], [], statuses: [GatewayStatus(gateway: "gw-2", online: true, receivedUs: at + 2)], what: "statuses")
        #expect(try online("gw-2").hasPrefix("true "))
    }

    @Test func theCommandLineSaysWhatIsWrongWithANATSCluster() throws {
        for (arguments, expected) in [
            (["--nats", "127.0.0.1:4222", "--broker", "mqtt://127.0.0.1"], "--nats and --broker"),
            (["--nats", "127.0.0.1:4222", "--share", "g"], "--share is for an MQTT broker"),
            (["--nats", "127.0.0.1:4222,127.0.0.1:4222"], "named twice"),
            (["--nats", "tls://127.0.0.1:4222"], "without TLS"),
            (["--nats", "127.0.0.1:99999"], "not nats://HOST[:PORT]"),
            (["--nats", "127.0.0.1", "--ack-wait", "0"], "--ack-wait takes seconds"),
        ] {
            let run = try Fleet.fleet(["ingest", "--database", "postgres://nobody@127.0.0.1:1/none"] + arguments)
            #expect(run.status == 2, "\(arguments): \(run.error)")
            #expect(run.error.contains(expected), "\(arguments): \(run.error)")
        }
    }

    @Test func subjectsAndTopicsAndTheProtocolAreRead() throws {
        #expect(NATSSubjects.filter(mqtt: "locus/+/#") == "$MQTT.msgs.locus.*.>")
        #expect(NATSSubjects.topic(subject: "$MQTT.msgs.locus.gw-1.event.yard.fence") == "locus/gw-1/event/yard/fence")
        #expect(NATSSubjects.topic(subject: "locus.gw-1.status") == nil)
        let ack = "$JS.ACK.$MQTT_msgs.locus-ingest.2.915.700.1764374400123456789.12"
        #expect(NATSSubjects.storedUs(ackSubject: ack) == 1_764_374_400_123_456)
        #expect(NATSSubjects.deliveries(ackSubject: ack) == 2)
        #expect(try NATSAddress.parse("nats://node-1").port == 4222)
        #expect(try NATSAddress.parse("127.0.0.1:5222").description == "nats://127.0.0.1:5222")

        var parser = NATSParser(maximumPayload: 1024)
        let stream = "INFO {\"server_id\":\"x\"}\r\nPING\r\nMSG a.b 1 $JS.ACK.s.c.1.2.3.4.5 5\r\nhello\r\nHMSG _INBOX.x.pull.1 1 32 32\r\nNATS/1.0 408 Request Timeout\r\n\r\n\r\n-ERR 'Stale Connection'\r\n"
        // Fed a byte at a time: nothing is taken before it is whole.
        var operations: [NATSParser.Operation] = []
        for byte in Array(stream.utf8) {
            [byte].withUnsafeBytes { parser.consume($0) }
            while let operation = try parser.next() { operations.append(operation) }
        }
        #expect(operations.count == 5)
        #expect(operations[1] == .ping)
        #expect(operations[2] == .message(subject: "a.b", sid: "1", reply: "$JS.ACK.s.c.1.2.3.4.5", headers: [], payload: Array("hello".utf8)))
        if case .message(_, _, _, let headers, let payload) = operations[3] {
            #expect(NATSParser.status(headers) == 408 && payload.isEmpty)
        } else {
            Issue.record("the HMSG: \(operations[3])")
        }
        #expect(operations[4] == .error("Stale Connection"))
        // A long stream read in pieces that end inside messages: the parser drops what it has
        // taken as it goes, and every message comes out whole.
        var long = NATSParser(maximumPayload: 4096)
        let body = (0..<1_000).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        var stream2: [UInt8] = []
        for index in 0..<200 { stream2 += Array("MSG s.\(index) 1 \(body.count)\r\n".utf8) + body + [0x0D, 0x0A] }
        var subjects: [String] = []
        for start in stride(from: 0, to: stream2.count, by: 700) {
            stream2[start..<min(start + 700, stream2.count)].withUnsafeBytes { long.consume($0) }
            while case .message(let subject, _, _, _, let payload)? = try long.next() {
                #expect(payload == body)
                subjects.append(subject)
            }
        }
        #expect(subjects == (0..<200).map { "s.\($0)" })
        // A payload that does not end where its size says is a violation, not a guess.
        var bad = NATSParser(maximumPayload: 1024)
        Array("MSG a 1 3\r\nhello\r\n".utf8).withUnsafeBytes { bad.consume($0) }
        #expect(throws: FleetError.self) { try bad.next() }
    }
}
