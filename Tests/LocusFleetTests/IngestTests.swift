import Foundation
import LocusCore
@testable import LocusFleet
import Testing
import TestSupport

/// `locus-fleet ingest` between Debian's mosquitto and PostgreSQL 15, both real, on 127.0.0.1:
/// a real gateway's uplink drained into the store, acknowledgement only after the commit (a
/// worker killed while its batch waits on a lock loses nothing), duplicates and reordering,
/// malformed and oversized messages, two workers sharing the topics, and restarts of the
/// broker and of PostgreSQL under a running ingest. The ingest runs as its own process.
@Suite(.serialized) struct IngestTests {
    /// A running `locus-fleet ingest`; its standard error is kept in a file.
    final class Worker {
        let process = Process()
        let errorFile: String

        convenience init(broker: UInt16, database: String, _ extra: [String] = [], name: String = "ingest", waiting: Bool = true) throws {
            try self.init(["--broker", "mqtt://127.0.0.1:\(broker)", "--database", database] + extra, name: name,
                          ready: waiting ? "subscribed at QoS 1" : nil)
        }

        /// A worker on a NATS cluster's nodes (`--nats`), ready when it has found its consumer.
        convenience init(nats nodes: String, database: String, _ extra: [String] = [], name: String = "ingest") throws {
            try self.init(["--nats", nodes, "--database", database] + extra, name: name, ready: "messages waiting")
        }

        private init(_ arguments: [String], name: String, ready: String?) throws {
            errorFile = try Fleet.temporaryDirectory(name) + "/ingest.err"
            _ = FileManager.default.createFile(atPath: errorFile, contents: nil)
            process.executableURL = URL(fileURLWithPath: try Fleet.binary("locus-fleet"))
            process.arguments = ["ingest"] + arguments
            process.standardError = FileHandle(forWritingAtPath: errorFile)
            process.standardOutput = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            try process.run()
            if let ready { try wait(for: ready) }
        }

        deinit {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }

        var said: String { (try? String(contentsOfFile: errorFile, encoding: .utf8)) ?? "" }

        /// Its last progress line's totals (`N messages: R records stored, ...`); 0 and 0 without one.
        var totals: (messages: Int, stored: Int) {
            let last = said.split(separator: "\n").last { $0.contains(" messages: ") } ?? ""
            let words = last.split(separator: " ")
            guard let at = words.firstIndex(of: "messages:"), at > 0, at + 1 < words.count else { return (0, 0) }
            return (Int(words[at - 1]) ?? 0, Int(words[at + 1]) ?? 0)
        }

        /// Waits (at most 20 s) until the worker has said `text` `times` times.
        func wait(for text: String, times: Int = 1) throws {
            for _ in 0..<400 {
                if said.components(separatedBy: text).count - 1 >= times { return }
                guard process.isRunning else { break }
                usleep(50_000)
            }
            throw TestPostgres.PostgresFailure("the ingest did not say '\(text)' \(times) times: \(said)")
        }

        /// SIGTERM: it writes what it holds and exits 0 (its last line, the totals, read back
        /// within 2 s: a loaded machine has been seen to show the file before the exit's write).
        func stop() -> Int32 {
            kill(process.processIdentifier, SIGTERM)
            // At most 30 s: a worker that does not stop is a failure, not a hung suite.
            for _ in 0..<600 where process.isRunning { usleep(50_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            for _ in 0..<40 where !said.contains(" messages: ") { usleep(50_000) }
            return process.terminationStatus
        }

        func crash() {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    static func broker() throws -> TestBroker { try TestBroker(listeners: [[]], persistence: true) }

    /// Publishes each line as one QoS 1 message to `topic` (`mosquitto_pub -l`, Debian's client).
    static func publish(_ port: UInt16, _ topic: String, _ lines: [String]) throws {
        let file = try Fleet.temporaryDirectory("publish") + "/lines"
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let run = try Fleet.run("/bin/sh", ["-c", "mosquitto_pub -h 127.0.0.1 -p \(port) -q 1 -t '\(topic)' -l < '\(file)'"])
        #expect(run.status == 0, "mosquitto_pub: \(run.error)")
    }

    /// An event payload as the uplink writes it (`UplinkJSON.event`).
    static func event(_ gateway: String, seq: Int, prev: Int?) -> String {
        let state = seq % 2 == 0 ? "satisfied" : "unsatisfied"
        let date = String(format: "2024-03-15T%02d:%02d:%02d.000Z", seq / 3600 % 24, seq / 60 % 60, seq % 60)
        return #"{"monitor":"yard","identifier":"fence","state":"\#(state)","date":"\#(date)","refinement":null,"#
            + #""gateway":"\#(gateway)","seq":\#(seq),"prev":\#(prev.map(String.init) ?? "null")}"#
    }

    /// Events 1...count of one gateway, each prev the seq before.
    static func events(_ gateway: String, _ count: Int) -> [String] {
        (1...count).map { event(gateway, seq: $0, prev: $0 - 1) }
    }

    static func count(_ url: String, _ sql: String) throws -> Int { Int(try Fleet.connect(url).execute(sql).scalar ?? "") ?? -1 }

    /// Waits (at most `seconds`) until `sql` counts `expected`.
    static func waitCount(_ url: String, _ sql: String, _ expected: Int, seconds: Int = 30) throws -> Int {
        var last = -1
        for _ in 0..<(seconds * 20) {
            last = try count(url, sql)
            if last == expected { return last }
            usleep(50_000)
        }
        return last
    }

    // MARK: a real gateway

    /// The demo's log (events, GPIO changes, visits) drained by a real `locus run` through its
    /// uplink: the store holds exactly the export's published seqs, and the same rows as the
    /// import of that export (the payload, the columns and prev; only `source` differs).
    @Test func aGatewaysUplinkIsStoredExactlyAsItsLogsExportImports() throws {
        let broker = try Self.broker()
        let port = broker.ports[0]
        let url = try Fleet.migratedDatabase("ingest-gateway")
        let imported = try Fleet.migratedDatabase("ingest-gateway-import")
        let demo = try Fleet.demoLog.get()
        let work = try Fleet.temporaryDirectory("gateway")
        #expect(try Fleet.run("/bin/cp", ["-a", demo.state, work + "/state"]).status == 0)
        var site = try String(contentsOfFile: Fleet.repositoryRoot + "/Examples/demo/site.toml", encoding: .utf8)
        site = site.replacingOccurrences(of: "board = \"../../Boards/sim.toml\"", with: "board = \"\(Fleet.repositoryRoot)/Boards/sim.toml\"")
        site = site.replacingOccurrences(of: "state_dir = \"/tmp/locus-demo\"", with: "state_dir = \"\(work)/state\"")
        site += "\n[uplink]\nbroker = \"mqtt://127.0.0.1:\(port)\"\ngateway = \"gw-demo\"\n"
        try site.write(toFile: work + "/site.toml", atomically: true, encoding: .utf8)

        let worker = try Worker(broker: port, database: url)
        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: try Fleet.binary("locus"))
        agent.arguments = ["run", "--config", work + "/site.toml", "--state", work + "/state"]
        agent.standardError = FileHandle.nullDevice
        agent.standardOutput = FileHandle.nullDevice
        try agent.run()
        defer {
            kill(agent.processIdentifier, SIGKILL)
            agent.waitUntilExit()
        }
        // The demo's records, and what this start added: each output's level, logged at start.
        var gateway = demo
        for _ in 0..<100 {
            gateway = try GatewayLog.export(state: work + "/state", into: try Fleet.temporaryDirectory("gateway-export"))
            if gateway.publishedSeqs.count >= demo.publishedSeqs.count + 3 { break }
            usleep(100_000)
        }
        let published = gateway.publishedSeqs
        #expect(Array(published.prefix(demo.publishedSeqs.count)) == demo.publishedSeqs)
        #expect(try Self.waitCount(url, "select count(*) from records", published.count) == published.count)
        #expect(try ImportTests.stored(url, "gw-demo").map(\.seq) == published)
        #expect(try Fleet.fleet(["status", "--database", url]).status == 0, "no gap")
        #expect(try Fleet.fleet(["import", "--database", imported, gateway.directory]).status == 0)
        let columns = "seq, prev, kind, time, monitor, identifier, state, output, value, payload"
        let rows = "select md5(string_agg(r::text, '|' order by seq)) from (select \(columns) from records) r"
        #expect(try Fleet.connect(url).execute(rows).scalar == (try Fleet.connect(imported).execute(rows).scalar))
        #expect(try Self.count(url, "select count(*) from gateways where gateway = 'gw-demo' and online") == 1, "its status: online")
        #expect(worker.stop() == 0)
        #expect(worker.said.contains("\(published.count) records stored"), "\(worker.said)")
    }

    // MARK: acknowledged after the commit

    /// A batch held by a lock on `records` is not acknowledged: the worker killed then loses
    /// nothing, and the next worker of the same session stores it.
    @Test func aMessageIsAcknowledgedOnlyAfterItsBatchHasCommitted() throws {
        let broker = try Self.broker()
        let port = broker.ports[0]
        let url = try Fleet.migratedDatabase("ingest-ack")
        let first = try Worker(broker: port, database: url, ["--client-id", "ack-test"])
        let lock = try Fleet.connect(url)
        _ = try lock.execute("begin")
        _ = try lock.execute("lock table records in access exclusive mode")
        try Self.publish(port, "locus/gw-ack/event/yard/fence", Self.events("gw-ack", 20))
        // The worker's batch now waits on the lock, its messages read and not acknowledged.
        #expect(try Self.waitCount(url, "select count(*) from pg_stat_activity where wait_event_type = 'Lock'", 1) == 1)
        first.crash()
        _ = try lock.execute("rollback")
        #expect(try Self.count(url, "select count(*) from records") == 0, "nothing committed")
        let second = try Worker(broker: port, database: url, ["--client-id", "ack-test"])
        #expect(second.said.contains("the broker kept this client's session"), "\(second.said)")
        #expect(try Self.waitCount(url, "select count(*) from records where gateway = 'gw-ack'", 20) == 20)
        #expect(second.stop() == 0)
        #expect(second.said.contains("20 messages: 20 records stored"), "\(second.said)")
    }

    // MARK: input

    /// Each record delivered three times, in reverse order, is one row; the chain is whole.
    @Test func duplicatedAndReorderedDeliveriesAreStoredOnce() throws {
        let broker = try Self.broker()
        let port = broker.ports[0]
        let url = try Fleet.migratedDatabase("ingest-duplicates")
        let worker = try Worker(broker: port, database: url)
        let events = Array(Self.events("gw-dup", 300).reversed())
        try Self.publish(port, "locus/gw-dup/event/yard/fence", events + events + events.shuffled())
        #expect(try Self.waitCount(url, "select count(*) from records", 300) == 300)
        #expect(try ImportTests.stored(url, "gw-dup").map(\.seq) == Array(1...300))
        #expect(try Fleet.fleet(["status", "--database", url]).status == 0, "no gap")
        #expect(worker.stop() == 0)
        #expect(worker.said.contains("900 messages: 300 records stored, 600 already stored, 0 quarantined"), "\(worker.said)")
    }

    /// What is not a record goes to the quarantine with the topic and the reason, once however
    /// often it comes; the good messages around it are stored; nothing stops the worker.
    @Test func malformedAndOversizedMessagesAreQuarantinedOnce() throws {
        let broker = try Self.broker()
        let port = broker.ports[0]
        let url = try Fleet.migratedDatabase("ingest-quarantine")
        let worker = try Worker(broker: port, database: url)
        let bad: [(String, String, String)] = [
            ("locus/gw-q/event/yard/fence", "not json", "not JSON: "),
            ("locus/gw-q/event/yard/fence", #"{"gateway":"gw-q","prev":0}"#, "event payload: no seq"),
            ("locus/gw-q/event/yard/fence", Self.event("gw-q", seq: 7, prev: 9), "event payload 7: prev 9 is not a sequence number below seq 7"),
            ("locus/gw-q/event/yard/fence", #"{"gateway":"gw-q","seq":99999999999999999999}"#, "event payload: seq 1e+20 is not a sequence number (1 to 2^53)"),
            ("locus/gw-q/gpio/relay1", #"{"gateway":"gw-q","seq":3,"prev":0,"output":"relay1","value":"on","time":"2024-03-15T00:00:00.000Z"}"#,
             "gpio payload 3: value is not true or false"),
            ("locus/gw-q/event/yard/fence", Self.event("gw-q", seq: 8, prev: 7).replacingOccurrences(of: "yard", with: #"ya\u0000rd"#),
             "holds U+0000"),
            ("locus/gw-q/status", "maybe", "a status that is neither online nor offline"),
        ]
        for (topic, payload, _) in bad + bad { try Self.publish(port, topic, [payload]) }
        let oversized = try Fleet.temporaryDirectory("oversized") + "/payload"
        try String(repeating: "x", count: 1_500_000).write(toFile: oversized, atomically: true, encoding: .utf8)
        #expect(try Fleet.run("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", "\(port)", "-q", "1", "-t", "locus/gw-q/visit", "-f", oversized]).status == 0)
        try Self.publish(port, "locus/gw-q/event/yard/fence", Self.events("gw-q", 5))
        #expect(try Self.waitCount(url, "select count(*) from records", 5) == 5, "the good messages after the bad ones")
        #expect(try Self.waitCount(url, "select count(*) from quarantine", bad.count + 1) == bad.count + 1)
        let kept = try Fleet.connect(url).execute("select origin, reason, length(payload) from quarantine order by id").rows
        for (topic, _, reason) in bad {
            #expect(kept.contains { $0[0] == topic && $0[1]!.contains(reason) }, "\(reason) in \(kept)")
        }
        #expect(kept.contains { $0[0] == "locus/gw-q/visit" && $0[1]!.hasPrefix("a payload of 1500000 bytes, over the ingest's limit") && $0[2] == "65536" },
                "\(kept)")
        #expect(worker.process.isRunning)
        #expect(worker.stop() == 0)
    }

    // MARK: identity

    /// The topic names the gateway (the broker's ACL ties it to the login): a payload naming
    /// another is quarantined, never stored as the other's. A second record for a (gateway, seq)
    /// already stored, with other contents (two gateways cloned from one image), is kept in
    /// `conflicts` once, and `status` says so loudly and exits 1; the stored record stays.
    @Test func aGatewayWritesOnlyItsOwnRecordsAndAConflictIsShownNotMerged() throws {
        let broker = try Self.broker()
        let port = broker.ports[0]
        let url = try Fleet.migratedDatabase("ingest-identity")
        let worker = try Worker(broker: port, database: url)
        try Self.publish(port, "locus/gw-a/event/yard/fence", Self.events("gw-a", 5))
        #expect(try Self.waitCount(url, "select count(*) from records", 5) == 5)
        // gw-b writes as gw-a.
        try Self.publish(port, "locus/gw-b/event/yard/fence", [Self.event("gw-a", seq: 6, prev: 5)])
        #expect(try Self.waitCount(url, "select count(*) from quarantine", 1) == 1)
        let reason = try Fleet.connect(url).execute("select reason from quarantine").scalar ?? ""
        #expect(reason == "the payload names gateway 'gw-a' but came under gateway 'gw-b''s topic: a gateway writes only its own records", "\(reason)")
        #expect(try Self.count(url, "select count(*) from records where gateway = 'gw-a' and seq = 6") == 0)
        // A clone of gw-a numbers its own records: seq 3 again, other contents, twice over.
        let clone = Self.event("gw-a", seq: 3, prev: 2).replacingOccurrences(of: "fence", with: "gate")
        try Self.publish(port, "locus/gw-a/event/yard/gate", [clone, clone])
        #expect(try Self.waitCount(url, "select count(*) from conflicts", 1) == 1)
        #expect(try Self.count(url, "select count(*) from records where gateway = 'gw-a' and payload ->> 'identifier' = 'fence'") == 5,
                "the stored record stays")
        // Two versions of one key in one batch: the one stored and the other both named.
        let first = Self.event("gw-a", seq: 9, prev: 5), second = first.replacingOccurrences(of: "fence", with: "gate")
        try Self.publish(port, "locus/gw-a/event/yard/fence", [first, second])
        #expect(try Self.waitCount(url, "select count(*) from records", 6) == 6)
        // In one batch both are named (each differs from the other); across two, the second.
        #expect(try Self.waitCount(url, "select least(count(*), 1) from conflicts where seq = 9", 1) == 1)
        let status = try Fleet.fleet(["status", "--database", url])
        #expect(status.status == 1, "a conflict makes status fail: \(status.output)")
        #expect(status.output.contains("CONFLICT gw-a: seq 3 came again with other contents (1 version in table conflicts)"), "\(status.output)")
        #expect(status.output.contains("CONFLICT gw-a: seq 9 came again"), "\(status.output)")
        let json = try Fleet.fleet(["status", "--database", url, "--json"])
        #expect(json.output.contains(#""conflicts":[{"gateway":"gw-a","seq":3,"versions":1}"#), "\(json.output)")
        #expect(worker.stop() == 0)
    }

    // MARK: scale and faults

    /// Two workers in one share group split the messages; together they store each once.
    @Test func twoWorkersInAShareGroupStoreEachRecordOnce() throws {
        let broker = try Self.broker()
        let port = broker.ports[0]
        let url = try Fleet.migratedDatabase("ingest-share")
        let one = try Worker(broker: port, database: url, ["--share", "fleet", "--client-id", "fleet-1"], name: "one")
        let two = try Worker(broker: port, database: url, ["--share", "fleet", "--client-id", "fleet-2"], name: "two")
        #expect(one.said.contains("$share/fleet/locus/+/event/#"), "\(one.said)")
        for gateway in ["gw-a", "gw-b", "gw-c", "gw-d"] {
            try Self.publish(port, "locus/\(gateway)/event/yard/fence", Self.events(gateway, 500))
        }
        #expect(try Self.waitCount(url, "select count(*) from records", 2_000) == 2_000)
        #expect(try Self.count(url, "select count(distinct (gateway, seq)) from records") == 2_000)
        #expect(try Fleet.fleet(["status", "--database", url]).status == 0, "no gap")
        #expect(one.stop() == 0 && two.stop() == 0)
        let shares = [one.totals.messages, two.totals.messages]
        #expect(shares.allSatisfy { $0 > 0 } && shares.reduce(0, +) >= 2_000, "each worker took a share: \(shares)")
    }

    /// The broker restarted (its persistence kept the session) and PostgreSQL restarted under a
    /// running worker: it connects again to each, and every record is stored once.
    @Test func aWorkerSurvivesRestartsOfTheBrokerAndOfPostgreSQL() throws {
        let cluster = try RestartTests.cluster.get()
        let url = try RestartTests.migrated("ingest-restarts")
        let broker = try Self.broker()
        let port = broker.ports[0]
        let worker = try Worker(broker: port, database: url)
        try Self.publish(port, "locus/gw-r/event/yard/fence", Array(Self.events("gw-r", 3_000)[0..<1_000]))
        try cluster.restart()
        try Self.publish(port, "locus/gw-r/event/yard/fence", Array(Self.events("gw-r", 3_000)[1_000..<2_000]))
        #expect(try Self.waitCount(url, "select count(*) from records", 2_000) == 2_000)
        broker.terminate()
        try broker.start()
        try worker.wait(for: "subscribed at QoS 1", times: 2)
        try Self.publish(port, "locus/gw-r/event/yard/fence", Array(Self.events("gw-r", 3_000)[2_000...]))
        #expect(try Self.waitCount(url, "select count(*) from records", 3_000) == 3_000)
        #expect(try ImportTests.stored(url, "gw-r").map(\.seq) == Array(1...3_000))
        #expect(worker.said.contains("the broker kept this client's session"), "\(worker.said)")
        #expect(worker.stop() == 0)
    }

    /// Started while PostgreSQL is down (a host's boot), the worker waits for it, then works.
    @Test func aWorkerStartedBeforePostgreSQLWaitsForIt() throws {
        let cluster = try RestartTests.cluster.get()
        let url = try RestartTests.migrated("ingest-boot")
        let broker = try Self.broker()
        try cluster.stop()
        let worker = try Worker(broker: broker.ports[0], database: url, waiting: false)
        defer { try? cluster.start() }
        try worker.wait(for: "connecting again in 2 s")
        try cluster.start()
        try worker.wait(for: "subscribed at QoS 1")
        try Self.publish(broker.ports[0], "locus/gw-boot/event/yard/fence", Self.events("gw-boot", 10))
        #expect(try Self.waitCount(url, "select count(*) from records", 10) == 10)
        #expect(worker.stop() == 0)
    }

    /// A broker that wants a password: the one in --password-file (its line end not part of
    /// it) is let in; a wrong one is refused with the reason, and the worker keeps trying.
    @Test func aPasswordFromItsFileIsLetInAndAWrongOneRefused() throws {
        let directory = try Fleet.temporaryDirectory("password")
        let passwords = directory + "/passwords"
        _ = FileManager.default.createFile(atPath: passwords, contents: nil)
        #expect(try Fleet.run("/usr/bin/mosquitto_passwd", ["-b", passwords, "fleet", "s3cret"]).status == 0)
        chmod(directory, 0o755)
        chmod(passwords, 0o644)
        let broker = try TestBroker(listeners: [["allow_anonymous false", "password_file \(passwords)"]], persistence: true)
        let url = try Fleet.migratedDatabase("ingest-password")
        try "s3cret\n".write(toFile: directory + "/right", atomically: true, encoding: .utf8)
        try "wrong\n".write(toFile: directory + "/wrong", atomically: true, encoding: .utf8)
        let refused = try Worker(broker: broker.ports[0], database: url, ["--username", "fleet", "--password-file", directory + "/wrong"],
                                 name: "wrong", waiting: false)
        try refused.wait(for: "CONNECT refused (code 5)", times: 2)
        refused.crash()
        let worker = try Worker(broker: broker.ports[0], database: url, ["--username", "fleet", "--password-file", directory + "/right"])
        let run = try Fleet.run("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", "\(broker.ports[0])", "-u", "fleet", "-P", "s3cret", "-q", "1",
                                                            "-t", "locus/gw-pw/event/yard/fence", "-m", Self.event("gw-pw", seq: 1, prev: 0)])
        #expect(run.status == 0, "\(run.error)")
        #expect(try Self.waitCount(url, "select count(*) from records where gateway = 'gw-pw'", 1) == 1)
        #expect(worker.stop() == 0)
    }

    // MARK: the command line

    @Test func theCommandLineSaysWhatIsWrong() throws {
        let url = try Fleet.migratedDatabase("ingest-usage")
        let cases: [([String], String)] = [
            (["ingest", "--database", url], "no broker: give --broker mqtt[s]://HOST[:PORT] or set LOCUS_FLEET_BROKER"),
            (["ingest", "--database", url, "--broker", "tcp://x"], "the broker 'tcp://x' starts with mqtts:// (TLS) or mqtt:// (plain)"),
            (["ingest", "--database", url, "--broker", "mqtt://x", "--prefix", "locus/#"], "--prefix 'locus/#' may hold one '+'"),
            (["ingest", "--database", url, "--broker", "mqtt://x", "--share", "a/b"], "--share 'a/b' is a group name"),
            (["ingest", "--database", url, "--broker", "mqtt://x", "--password-file", "/p"], "--password-file needs --username"),
            (["ingest", "--database", url, "--broker", "mqtt://x", "--batch", "0"], "--batch takes a number of messages from 1 to 65535"),
        ]
        for (arguments, message) in cases {
            let run = try Fleet.fleet(arguments)
            #expect(run.status == 2 && run.error.contains(message), "\(arguments): \(run.error)")
        }
    }

    @Test func topicsAreClassifiedByThePrefix() throws {
        let topics = try IngestTopics(prefix: "site/+/locus", share: nil)
        #expect(topics.filters == ["site/+/locus/event/#", "site/+/locus/gpio/+", "site/+/locus/visit", "site/+/locus/config", "site/+/locus/command",
                                  "site/+/locus/status"])
        #expect(topics.classify("site/gw-1/locus/event/yard/fence") == .record(.event, gateway: "gw-1"))
        #expect(topics.classify("site/gw-1/locus/gpio/relay1") == .record(.gpio, gateway: "gw-1"))
        #expect(topics.classify("site/gw-1/locus/visit") == .record(.visit, gateway: "gw-1"))
        #expect(try IngestTopics(prefix: "site/gw-1", share: nil).classify("site/gw-1/visit") == .record(.visit, gateway: nil),
                "a prefix without + names no gateway: the payload's stands")
        #expect(topics.classify("site/gw-1/locus/status") == .status(gateway: "gw-1"))
        #expect(topics.classify("site/gw-1/other/status") == .foreign)
        #expect(topics.classify("site/gw-1/locus/gpio") == .foreign)
        #expect(try IngestTopics(prefix: "locus/+", share: "g").filters
                == ["$share/g/locus/+/event/#", "$share/g/locus/+/gpio/+", "$share/g/locus/+/visit", "$share/g/locus/+/config",
                    "$share/g/locus/+/command", "locus/+/status"])
        #expect(FleetJSON.timestampMs("2024-03-15T00:00:01.250Z") == 1_710_460_801_250)
        #expect(FleetJSON.timestampMs("1970-01-01T00:00:00Z") == 0)
        #expect(FleetJSON.timestampMs("2024-03-15T00:00:01.2Z") == 1_710_460_801_200)
        #expect(FleetJSON.timestampMs("1969-12-31T23:59:59.999999999Z") == -1)
        #expect(FleetJSON.timestampMs("2023-02-29T00:00:00Z") == nil)
        #expect([850, 12_500, 200_000, 12_000_000, 3_542_400_000].map(FleetStatus.duration) == ["850 ms", "12.5 s", "3 min 20 s", "3 h 20 min", "41 d"])
    }
}
