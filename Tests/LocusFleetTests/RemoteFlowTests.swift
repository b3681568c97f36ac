import Foundation
import LocusCore
@testable import LocusFleet
import Testing
import TestSupport

/// The fleet steering gateways end to end: versions, groups, the retained messages a gateway
/// would receive (read with Debian's mosquitto_sub, verified with openssl), and the gateways'
/// `config` and `command` records (published as their uplinks would) read back as status.
@Suite(.serialized) struct RemoteFlowTests {
    /// A broker, a migrated database, a running ingest, a key pair: what every test here needs.
    final class Fleetside {
        let broker: TestBroker
        let port: UInt16
        let url: String
        let worker: IngestTests.Worker
        let key: String
        let publicKey: String
        /// The next seq of each gateway's log.
        var seqs: [String: Int] = [:]

        init(_ name: String) throws {
            broker = try IngestTests.broker()
            port = broker.ports[0]
            url = try Fleet.migratedDatabase(name)
            worker = try IngestTests.Worker(broker: port, database: url)
            let directory = try Fleet.temporaryDirectory(name)
            key = directory + "/fleet.key"
            publicKey = directory + "/fleet.pub"
            #expect(try Fleet.fleet(["config", "keygen", "--out", key]).status == 0)
        }

        var publishing: [String] { ["--database", url, "--broker", "mqtt://127.0.0.1:\(port)", "--key", key] }

        func fleet(_ arguments: [String]) throws -> Fleet.Run { try Fleet.fleet(arguments) }

        /// Publishes a record as the gateway's uplink would (its seq and prev following its
        /// earlier ones) and waits until the ingest stored it.
        func record(_ gateway: String, _ kind: String, _ members: String) throws {
            let seq = seqs[gateway, default: 1]
            seqs[gateway] = seq + 1
            let payload = #"{"gateway":"\#(gateway)","seq":\#(seq),"prev":\#(seq - 1),"time":"2026-11-28T14:00:\#(String(format: "%02d", seq % 60)).000Z",\#(members)}"#
            try IngestTests.publish(port, "locus/\(gateway)/\(kind)", [payload])
            let stored = try IngestTests.waitCount(url, "select count(*) from records where gateway = '\(gateway)' and seq = \(seq)", 1)
            #expect(stored == 1, "the \(kind) record \(seq) of \(gateway) is stored: \(worker.said)")
        }

        /// The retained message on a gateway's config topic, or nil when there is none within 2 s.
        /// (coreutils' timeout, not mosquitto_sub -W: the test process's signal dispositions,
        /// which its children inherit, keep -W's alarm from firing.)
        func retainedConfig(_ gateway: String) throws -> String? {
            let run = try Fleet.run("/usr/bin/timeout", ["-s", "KILL", "2", "/usr/bin/mosquitto_sub", "-h", "127.0.0.1", "-p", String(port), "-C", "1",
                                                         "-t", "locus/\(gateway)/remote/config"])
            return run.status == 0 ? String(run.output.dropLast()) : nil  // mosquitto_sub ends each message with a newline
        }

        /// The signed message a command was published as (`commands.body`).
        func commandBody(_ id: String) throws -> String? {
            try Fleet.connect(url).execute("select body from commands where id = $1", [id]).scalar
        }

        /// The message verifies with openssl and the public key.
        func verifies(_ message: String) throws -> Bool {
            guard let (body, signature) = RemoteTests.split(message) else { return false }
            return try RemoteTests.opensslVerifies(body, signature, publicKey: publicKey)
        }
    }

    static let fragment = """
        # the yard's fence drives the gate relay
        [[action]]
        when = "yard.fence"
        output = "gate"

        """

    static func fragmentFile(_ text: String) throws -> String {
        let path = try Fleet.temporaryDirectory("fragment") + "/fragment.toml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test func aGroupsVersionReachesOnlyItsGatewaysAndTheirRecordsBecomeStatus() throws {
        let fleet = try Fleetside("remote-group")
        for gateway in ["gw-a", "gw-b", "gw-c"] { try fleet.record(gateway, "event/yard/fence", #""monitor":"yard","identifier":"fence","state":"satisfied","date":"2026-11-28T13:00:00.000Z","refinement":null"#) }
        let group = try fleet.fleet(["group", "set", "north", "gw-a", "gw-b", "--database", fleet.url])
        #expect(group.status == 0 && group.output == "north: gw-a gw-b\n", "\(group.output)\(group.error)")
        let set = try fleet.fleet(["config", "set", "--group", "north", "--note", "gate relay"] + fleet.publishing + [try Self.fragmentFile(Self.fragment)])
        #expect(set.status == 0, "\(set.error)")
        #expect(set.output == "version 1 for group north: stored; 2 gateways targeted\nversion 1: published to 2 of 2 gateways (retained, acknowledged by the broker)\n", "\(set.output)")
        for gateway in ["gw-a", "gw-b"] {
            let message = try #require(try fleet.retainedConfig(gateway), "\(gateway) has its retained configuration")
            #expect(message.hasPrefix("[fleet]\nkind = \"config\"\ngateway = \"\(gateway)\"\nversion = 1\nissued = \"20"), "\(message)")
            #expect(message.contains("\n\n" + Self.fragment + FleetSigner.signaturePrefix + "ecdsa-p256-sha256 "), "\(message)")
            #expect(try fleet.verifies(message), "openssl verifies \(gateway)'s message")
            #expect(try !fleet.verifies(message.replacingOccurrences(of: "gate", with: "door")), "a changed message does not verify")
        }
        #expect(try fleet.retainedConfig("gw-c") == nil, "gw-c is not in the group")
        #expect(try IngestTests.count(fleet.url, "select count(*) from config_deliveries where version = 1") == 2)

        let pending = try fleet.fleet(["config", "status", "--database", fleet.url])
        #expect(pending.status == 0)
        #expect(pending.output.contains("gw-a: desired 1, applied none, pending (published 20"), "\(pending.output)")
        #expect(pending.output.contains("gw-c: desired none, applied none\n"), "\(pending.output)")

        try fleet.record("gw-a", "config", #""version":1,"result":"applied","digest":"00""#)
        try fleet.record("gw-b", "config", #""version":1,"result":"refused","reason":"fleet v1:3:1: unknown key 'when'""#)
        let status = try fleet.fleet(["config", "status", "--database", fleet.url])
        #expect(status.status == 1, "a refusal makes status fail")
        #expect(status.output.contains("gw-a: desired 1, applied 1 (2026-11-28T14:00:02.000Z)\n"), "\(status.output)")
        #expect(status.output.contains("gw-b: desired 1, applied none, REFUSED version 1: fleet v1:3:1: unknown key 'when'\n"), "\(status.output)")
        let json = try fleet.fleet(["config", "status", "--database", fleet.url, "--json"])
        #expect(json.status == 1 && json.output.contains(#"{"gateway":"gw-b","desired":1,"applied":null,"applied_at":null,"pending":false,"refused":true,"refused_version":1,"refused_reason":"fleet v1:3:1: unknown key 'when'""#), "\(json.output)")
        // The config records take part in the gateways' chains: no gap.
        #expect(try fleet.fleet(["status", "--database", fleet.url]).status == 0)

        // Version 2 for every gateway, then a rollback of gw-c to version 1's fragment.
        let all = try fleet.fleet(["config", "set", "--all"] + fleet.publishing + [try Self.fragmentFile("monitor = {}\n")])
        #expect(all.status == 0 && all.output.hasSuffix("version 2: published to 3 of 3 gateways (retained, acknowledged by the broker)\n"), "\(all.output)\(all.error)")
        let allMessage = try #require(try fleet.retainedConfig("gw-c"))
        #expect(allMessage.hasPrefix("monitor = {}\n\n[fleet]\nkind = \"config\"\ngateway = \"gw-c\"\nversion = 2\n"), "\(allMessage)")
        #expect(try fleet.verifies(allMessage))
        let rollback = try fleet.fleet(["config", "rollback", "--to", "1", "--gateway", "gw-c"] + fleet.publishing)
        #expect(rollback.status == 0 && rollback.output.hasPrefix("version 3 for gateway gw-c: stored; 1 gateway targeted\n"), "\(rollback.output)\(rollback.error)")
        let rolledBack = try #require(try fleet.retainedConfig("gw-c"))
        #expect(rolledBack.contains("version = 3\n") && rolledBack.contains(Self.fragment), "\(rolledBack)")
        #expect(try fleet.retainedConfig("gw-a")?.contains("version = 2\n") == true)
        let show = try fleet.fleet(["config", "show", "--database", fleet.url])
        #expect(show.output.contains("version 1: ") && show.output.contains("group north, desired by 0 gateways, note: gate relay\n"), "\(show.output)")
        #expect(show.output.contains("version 3: ") && show.output.contains("gateway gw-c, desired by 1 gateway, note: rollback to version 1\n"), "\(show.output)")
        let one = try fleet.fleet(["config", "show", "--database", fleet.url, "--gateway", "gw-c"])
        #expect(one.output.hasPrefix("# version 3, ") && one.output.hasSuffix(Self.fragment), "\(one.output)")
        let diff = try fleet.fleet(["config", "diff", "1", "2", "--database", fleet.url])
        #expect(diff.status == 0 && diff.output.contains("@@ -1,4 +1,1 @@\n-# the yard's fence drives the gate relay\n-[[action]]\n-when = \"yard.fence\"\n-output = \"gate\"\n+monitor = {}\n"),
                "\(diff.output)")
        #expect(try fleet.fleet(["config", "diff", "1", "3", "--database", fleet.url]).output == "versions 1 and 3 have the same fragment\n")

        // A broker that lost its retained messages gets every desired version again.
        let again = try fleet.fleet(["config", "publish"] + fleet.publishing)
        #expect(again.status == 0 && again.output == "published the desired version of 3 of 3 gateways (retained, acknowledged by the broker)\n", "\(again.output)\(again.error)")
        #expect(fleet.worker.stop() == 0)
    }

    @Test func aCommandIsSignedSentOnceAndItsRecordIsItsResult() throws {
        let fleet = try Fleetside("remote-command")
        let subscriber = Process()
        subscriber.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        subscriber.arguments = ["-s", "KILL", "20", "/usr/bin/mosquitto_sub", "-h", "127.0.0.1", "-p", String(fleet.port), "-C", "1", "-q", "1",
                                "-t", "locus/gw-a/remote/command"]
        let output = Pipe()
        subscriber.standardOutput = output
        try subscriber.run()
        usleep(500_000)
        let send = try fleet.fleet(["command", "send", "--gateway", "gw-a", "--expires", "5min"] + fleet.publishing + ["pulse", "gate", "500ms"])
        #expect(send.status == 0, "\(send.error)")
        let id = String(send.output.split(separator: " ")[1])
        #expect(id.hasPrefix("c-") && id.count == 18 && send.output.hasSuffix("(pulse) for gw-a: published, acknowledged by the broker; expires in 5min\n"), "\(send.output)")
        subscriber.waitUntilExit()
        let message = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).dropLast()
        #expect(message.hasPrefix("[fleet]\nkind = \"command\"\ngateway = \"gw-a\"\nid = \"\(id)\"\nexpires = "), "\(message)")
        #expect(message.contains("\n\n[command]\naction = \"pulse\"\noutput = \"gate\"\nduration = \"500ms\"\n# locus-signature: "), "\(message)")
        #expect(try fleet.verifies(String(message)))
        #expect(try fleet.fleet(["command", "status", "--database", fleet.url]).output.hasPrefix("\(id) gw-a pulse: pending (sent "))

        try fleet.record("gw-a", "command", #""id":"\#(id)","action":"pulse","result":"done""#)
        let status = try fleet.fleet(["command", "status", "--database", fleet.url])
        #expect(status.status == 0 && status.output == "\(id) gw-a pulse: done (answered 2026-11-28T14:00:01.000Z)\n", "\(status.output)")
        let json = try fleet.fleet(["command", "status", "--database", fleet.url, "--json"])
        #expect(json.output.contains(#""state":"done","reason":null"#), "\(json.output)")

        let refused = try fleet.fleet(["command", "send", "--gateway", "gw-a"] + fleet.publishing + ["republish", "5", "9"])
        let refusedID = String(refused.output.split(separator: " ")[1])
        try fleet.record("gw-a", "command", #""id":"\#(refusedID)","action":"republish","result":"refused","reason":"republish is not in [remote] commands""#)
        #expect(try fleet.fleet(["command", "status", "--database", fleet.url, "--gateway", "gw-a"]).output
                .contains("\(refusedID) gw-a republish: refused: republish is not in [remote] commands (answered "))

        // A snapshot's answer: its detail, as JSON, in both forms of the status.
        let snapshot = try fleet.fleet(["command", "send", "--gateway", "gw-a"] + fleet.publishing
                                       + ["snapshot", "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "100", "--duration", "2s"])
        #expect(snapshot.status == 0, "\(snapshot.error)")
        let snapshotID = String(snapshot.output.split(separator: " ")[1])
        let body = try #require(try fleet.commandBody(snapshotID))
        #expect(body.contains("[command]\naction = \"snapshot\"\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 100\nduration = \"2s\"\n"), "\(body)")
        try fleet.record("gw-a", "command", #""id":"\#(snapshotID)","action":"snapshot","result":"done","detail":{"beacons":[],"more":0}"#)
        #expect(try fleet.fleet(["command", "status", "--database", fleet.url, "--gateway", "gw-a"]).output
                .contains("\(snapshotID) gw-a snapshot: done: {\"more\": 0, \"beacons\": []} (answered "))
        #expect(try fleet.fleet(["command", "status", "--database", fleet.url, "--json"]).output.contains(#""detail":{"more": 0, "beacons": []}"#))
        #expect(fleet.worker.stop() == 0)
    }

    @Test(arguments: [
        (["config", "set", "--database", "fleet", "--broker", "mqtt://127.0.0.1:1", "f.toml"], "config set: give one of --gateway ID, --group NAME and --all"),
        (["config", "set", "--all", "--group", "g", "--database", "fleet", "--broker", "mqtt://127.0.0.1:1", "f.toml"], "config set: give one of --gateway ID, --group NAME and --all"),
        (["config", "set", "--gateway", "gw/1", "--database", "fleet", "f.toml"], "config set: 'gw/1' is not a gateway id (1 to 64 letters, digits, '-', '_' or '.')"),
        (["config", "set", "--all", "--database", "fleet", "--broker", "mqtt://127.0.0.1:1"], "config set: give one fragment file (TOML without [fleet])"),
        (["config", "rollback", "--all", "--database", "fleet"], "config rollback: --to VERSION is needed"),
        (["config", "keygen"], "config keygen: --out FILE is needed (the private key's path)"),
        (["config", "diff", "1", "--database", "fleet"], "config diff: expected VERSION VERSION"),
        (["config", "frob"], "config: unknown command 'frob' (keygen, set, publish, rollback, show, diff or status)"),
        (["group", "set", "north", "--database", "fleet"], "group set: expected NAME GATEWAY..."),
        (["command", "send", "--gateway", "gw-1", "--database", "fleet", "--broker", "mqtt://127.0.0.1:1", "--expires", "10m", "pulse", "o", "1s"],
         "command send: --expires '10m': unknown unit 'm'; use ms, s, min, h or d (\"m\" is ambiguous: write \"min\")"),
        (["command", "send", "--gateway", "gw-1", "--database", "fleet", "pulse", "o"], "command send: pulse takes OUTPUT DURATION (pulse relay1 500ms)"),
        (["command", "send", "--gateway", "gw-1", "--database", "fleet", "locate", "--accuracy", "exact"],
         "command send: --accuracy 'exact' is not a tier (best, nearestTenMeters, hundredMeters, kilometer, threeKilometers)"),
        (["command", "send", "--gateway", "gw-1", "--database", "fleet", "republish", "9", "5"], "command send: republish takes FROM TO: log sequence numbers, 1 <= FROM <= TO"),
        (["command", "send", "--gateway", "gw-1", "--database", "fleet", "set", "relay1", "yes"], "command send: set takes OUTPUT on|off (set relay1 on)"),
        (["command", "send", "--gateway", "gw-1", "--database", "fleet", "snapshot", "E2C5"],
         "command send: snapshot takes UUID [MAJOR [MINOR]] (snapshot E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 100)"),
        (["command", "send", "--gateway", "gw-1", "--database", "fleet", "pulse", "o", "1s", "--duration", "2s"], "command send: --duration is for snapshot"),
    ])
    func usageErrorsSayWhatIsWrong(_ arguments: [String], _ message: String) throws {
        let run = try Fleet.fleet(arguments)
        #expect(run.status == 2)
        #expect(run.error.hasPrefix("locus-fleet: \(message)\n"), "\(run.error)")
    }

    @Test func aFailureBeforePublishingStoresNothingAndSaysWhy() throws {
        let url = try Fleet.migratedDatabase("remote-failures")
        let directory = try Fleet.temporaryDirectory("remote-failures")
        #expect(try Fleet.fleet(["config", "keygen", "--out", directory + "/k"]).status == 0)
        let broker = try IngestTests.broker()
        let common = ["--database", url, "--broker", "mqtt://127.0.0.1:\(broker.ports[0])", "--key", directory + "/k"]
        let bad = try Self.fragmentFile("[fleet]\nversion = 9\n")
        let refused = try Fleet.fleet(["config", "set", "--all"] + common + [bad])
        #expect(refused.status == 1 && refused.error.hasSuffix("the fragment has a 'fleet' key: [fleet] is written by locus-fleet config set, not by the fragment\n"), "\(refused.error)")
        let empty = try Fleet.fleet(["config", "set", "--group", "nobody"] + common + [try Self.fragmentFile(Self.fragment)])
        #expect(empty.status == 1 && empty.error.contains("group 'nobody' has no gateways (locus-fleet group set nobody GATEWAY...); no version stored"), "\(empty.error)")
        let noKey = try Fleet.fleet(["config", "set", "--gateway", "gw-1", "--database", url, "--broker", "mqtt://127.0.0.1:\(broker.ports[0])",
                                     try Self.fragmentFile(Self.fragment)])
        #expect(noKey.status == 1 && noKey.error == "locus-fleet: config set: --key FILE is needed: the fleet's private key that signs the message\n", "\(noKey.error)")
        let noBroker = try Fleet.fleet(["config", "set", "--gateway", "gw-1", "--database", url, "--broker", "mqtt://127.0.0.1:\(try TestBroker.freePort())",
                                        "--key", directory + "/k", try Self.fragmentFile(Self.fragment)])
        #expect(noBroker.status == 1 && noBroker.error.contains("cannot connect"), "\(noBroker.error)")
        #expect(try IngestTests.count(url, "select count(*) from config_versions") == 0)
    }
}
