import Foundation
import LocusFleet
import Testing
import TestSupport

/// `locus-fleet broker-acl` against Debian's mosquitto 2.0.11: the files it writes, served by a
/// real broker on a TLS listener (certificates from Tests/Fixtures/make-test-certs.sh) with
/// `allow_anonymous false`, tried with mosquitto_pub and mosquitto_sub as gateways and as the
/// fleet; and what a rerun keeps, adds and removes; the ids it refuses.
@Suite(.serialized) struct BrokerACLTests {
    /// The certificates, the files broker-acl wrote for gw-a, gw-b and the fleet, and a broker
    /// serving them over TLS; made once for the suite.
    final class Setup: @unchecked Sendable {
        let certificates: String
        let out: String
        let broker: TestBroker
        var port: UInt16 { broker.ports[0] }

        init() throws {
            certificates = try Fleet.temporaryDirectory("acl-certs")
            let make = try Fleet.run(Fleet.repositoryRoot + "/Tests/Fixtures/make-test-certs.sh", [certificates])
            guard make.status == 0 else { throw TestBroker.BrokerError("make-test-certs.sh failed: \(make.error)") }
            let work = try Fleet.temporaryDirectory("acl")
            try "gw-a\ngw-b\n".write(toFile: work + "/gateways", atomically: true, encoding: .utf8)
            out = work + "/broker"
            let made = try Fleet.fleet(["broker-acl", "--gateways", work + "/gateways", "--out", out])
            guard made.status == 0 else { throw TestBroker.BrokerError("broker-acl: \(made.error)") }
            broker = try TestBroker(listeners: [[
                "cafile \(certificates)/ca.crt", "certfile \(certificates)/server.crt", "keyfile \(certificates)/server.key",
                "allow_anonymous false", "password_file \(out)/passwords", "acl_file \(out)/acl",
            ]])
        }

        func password(_ login: String) throws -> String {
            try String(contentsOfFile: "\(out)/credentials/\(login).password", encoding: .utf8).trimmingCharacters(in: .newlines)
        }

        /// mosquitto_pub or mosquitto_sub over TLS to the broker, as `login` (nil: anonymous),
        /// killed after `seconds`. (Not mosquitto_sub's -W: it relies on SIGALRM, which the test
        /// process's children inherit blocked, so it never fires.)
        func client(_ tool: String, _ login: String?, password: String? = nil, _ arguments: [String], seconds: Double = 20) throws -> Fleet.Run {
            let running = try start(tool, login, password: password, arguments)
            let deadline = Date().addingTimeInterval(seconds)
            while running.process.isRunning && Date() < deadline { usleep(10_000) }
            let killed = running.process.isRunning
            return running.stop(note: killed ? "(killed after \(seconds) s)" : "")
        }

        func start(_ tool: String, _ login: String?, password: String? = nil, _ arguments: [String]) throws -> Client {
            var common = ["-h", "localhost", "-p", "\(port)", "--cafile", "\(certificates)/ca.crt"]
            if let login { common += ["-u", login, "-P", try password ?? self.password(login)] }
            return try Client("/usr/bin/" + tool, common + arguments, directory: out)
        }

        /// A gateway's subscriber, running until stopped, once it receives what the fleet
        /// publishes to `locus/<login>/remote/probe` (so it has subscribed).
        func subscriber(_ login: String, _ topics: [String]) throws -> Client {
            let subscriber = try start("mosquitto_sub", login, ["-v"] + topics.flatMap { ["-t", $0] })
            for _ in 0..<100 {
                _ = try client("mosquitto_pub", "fleet", ["-q", "1", "-t", "locus/\(login)/remote/probe", "-m", "probe"])
                if subscriber.output.contains("locus/\(login)/remote/probe probe\n") { return subscriber }
                usleep(100_000)
            }
            let run = subscriber.stop(note: "")
            throw TestBroker.BrokerError("\(login)'s subscriber did not subscribe: \(run.output)\(run.error)")
        }
    }

    /// A client process whose output goes to files (read while it runs); SIGKILL stops it.
    final class Client {
        let process = Process()
        let outputPath: String
        let errorPath: String

        init(_ executable: String, _ arguments: [String], directory: String) throws {
            let name = "\(directory)/client-\(UInt32.random(in: 0...UInt32.max))"
            (outputPath, errorPath) = (name + ".out", name + ".err")
            _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
            _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle(forWritingAtPath: outputPath)
            process.standardError = FileHandle(forWritingAtPath: errorPath)
            try process.run()
        }

        var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

        func stop(note: String) -> Fleet.Run {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            let error = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
            return Fleet.Run(status: process.terminationStatus, output: output, error: error + note)
        }
    }

    nonisolated(unsafe) static var shared: Setup? = nil
    static func setup() throws -> Setup {
        if let shared { return shared }
        let made = try Setup()
        shared = made
        return made
    }

    @Test func aGatewayPublishesOnlyUnderItsOwnPrefixAndTheBrokerDropsTheForgery() throws {
        let setup = try Self.setup()
        // The fleet's persistent session subscribes (and leaves), so the broker queues for it
        // everything it may read from here on, in order.
        let session = ["-c", "-q", "1", "-i", "acl-fleet-\(UInt32.random(in: 0...UInt32.max))"]
        let subscribed = try setup.client("mosquitto_sub", "fleet", session + ["-t", "locus/+/event/#", "-E"])
        #expect(subscribed.status == 0, "\(subscribed.error)")
        for (topic, message) in [("locus/gw-a/event/m/c", "own-1"), ("locus/gw-b/event/m/c", "forged"), ("locus/gw-a/event/m/c", "own-2")] {
            // QoS 1 and exit 0 even for the forgery: mosquitto acknowledges it and drops it.
            let sent = try setup.client("mosquitto_pub", "gw-a", ["-q", "1", "-t", topic, "-m", message])
            #expect(sent.status == 0, "\(topic): \(sent.error)")
        }
        let received = try setup.client("mosquitto_sub", "fleet", session + ["-t", "locus/+/event/#", "-v", "-C", "2"])
        #expect(received.output == "locus/gw-a/event/m/c own-1\nlocus/gw-a/event/m/c own-2\n", "\(received.output)\(received.error)")
    }

    @Test func aGatewayReadsItsOwnRemoteConfigurationAndNotAnothers() throws {
        let setup = try Self.setup()
        for gateway in ["gw-a", "gw-b"] {
            let sent = try setup.client("mosquitto_pub", "fleet", ["-q", "1", "-r", "-t", "locus/\(gateway)/remote/config", "-m", "config of \(gateway)"])
            #expect(sent.status == 0, "\(sent.error)")
        }
        // Every subscription is granted (mosquitto 2.0.11 checks read access per message); only
        // gw-a's own retained configuration is delivered, before the probe that ends the wait.
        let probe = { (login: String) in "locus/\(login)/remote/probe probe\n" }
        let read = try setup.subscriber("gw-a", ["locus/gw-b/remote/#", "locus/gw-a/remote/#"]).stop(note: "")
        #expect(read.output.hasPrefix("locus/gw-a/remote/config config of gw-a\n" + probe("gw-a")), "\(read.output)\(read.error)")
        #expect(!read.output.contains("gw-b"), "\(read.output)")
        let everything = try setup.subscriber("gw-b", ["#"]).stop(note: "")
        #expect(everything.output.hasPrefix("locus/gw-b/remote/config config of gw-b\n" + probe("gw-b")), "\(everything.output)\(everything.error)")
        #expect(!everything.output.contains("gw-a"), "\(everything.output)")
        // A gateway cannot write another's configuration either.
        let forged = try setup.client("mosquitto_pub", "gw-a", ["-q", "1", "-r", "-t", "locus/gw-b/remote/config", "-m", "forged"])
        #expect(forged.status == 0)
        let still = try setup.client("mosquitto_sub", "fleet", ["-v", "-t", "locus/gw-b/remote/config", "-C", "1"])
        #expect(still.output == "locus/gw-b/remote/config config of gw-b\n", "\(still.output)\(still.error)")
    }

    @Test func aWrongPasswordAnonymousAndPlainTCPAreRefused() throws {
        let setup = try Self.setup()
        let wrong = try setup.client("mosquitto_pub", "gw-a", password: "not-the-password", ["-q", "1", "-t", "locus/gw-a/x", "-m", "x"])
        #expect(wrong.status != 0 && wrong.error.contains("not authorised"), "\(wrong.status) \(wrong.error)")
        let anotherLogin = try setup.client("mosquitto_pub", "gw-a", password: try setup.password("gw-b"), ["-q", "1", "-t", "locus/gw-a/x", "-m", "x"])
        #expect(anotherLogin.status != 0 && anotherLogin.error.contains("not authorised"), "\(anotherLogin.error)")
        let anonymous = try setup.client("mosquitto_pub", nil, ["-q", "1", "-t", "locus/gw-a/x", "-m", "x"])
        #expect(anonymous.status != 0 && anonymous.error.contains("not authorised"), "\(anonymous.status) \(anonymous.error)")
        let unknown = try setup.client("mosquitto_pub", "gw-z", password: "whatever", ["-q", "1", "-t", "locus/gw-z/x", "-m", "x"])
        #expect(unknown.status != 0 && unknown.error.contains("not authorised"), "\(unknown.error)")
        // The password never crosses in clear: the listener speaks only TLS.
        let plain = try Fleet.run("/usr/bin/mosquitto_pub", ["-h", "127.0.0.1", "-p", "\(setup.port)", "-u", "gw-a", "-P", try setup.password("gw-a"),
                                                            "-q", "1", "-t", "locus/gw-a/x", "-m", "x"])
        #expect(plain.status != 0, "\(plain.error)")
    }

    @Test func theFilesAreWhatTheBrokerNeeds() throws {
        let setup = try Self.setup()
        let acl = try String(contentsOfFile: setup.out + "/acl", encoding: .utf8)
        for block in ["user fleet\ntopic read locus/+/#\ntopic write locus/+/remote/#\n",
                      "user gw-a\ntopic write locus/gw-a/#\ntopic read locus/gw-a/remote/#\ntopic write homeassistant/binary_sensor/#\ntopic read homeassistant/status\n"] {
            #expect(acl.contains(block), "\(acl)")
        }
        #expect(!acl.contains("pattern"))
        let passwords = try String(contentsOfFile: setup.out + "/passwords", encoding: .utf8).split(separator: "\n")
        #expect(passwords.map { $0.split(separator: ":").first.map(String.init) ?? "" } == ["fleet", "gw-a", "gw-b"])
        #expect(passwords.allSatisfy { $0.contains(":$7$101$") })
        for login in ["fleet", "gw-a", "gw-b"] {
            let path = "\(setup.out)/credentials/\(login).password"
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
            let password = try setup.password(login)
            #expect(password.count == 24 && password.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }, "\(password)")
        }
        #expect(Set(try ["fleet", "gw-a", "gw-b"].map { try setup.password($0) }).count == 3)
    }

    @Test func aRerunKeepsThePasswordsAddsNewGatewaysAndSaysWhichItRemoved() throws {
        let work = try Fleet.temporaryDirectory("acl-rerun")
        let list = work + "/gateways"
        try "gw-1\ngw-2\ngw-3\n".write(toFile: list, atomically: true, encoding: .utf8)
        let first = try Fleet.fleet(["broker-acl", "--gateways", list, "--out", work + "/out"])
        #expect(first.status == 0, "\(first.error)")
        #expect(first.output.contains("3 gateways and the fleet's login 'fleet' (new password)"), "\(first.output)")
        #expect(first.output.contains("acl_file \(work)/out/acl\n") && first.output.contains("allow_anonymous false\n"), "\(first.output)")
        let read = { (login: String) in try String(contentsOfFile: "\(work)/out/credentials/\(login).password", encoding: .utf8) }
        let before = try ["fleet", "gw-1", "gw-3"].map(read)
        try "gw-1\r\ngw-3\r\ngw-4\r\n".write(toFile: list, atomically: true, encoding: .utf8)
        let second = try Fleet.fleet(["broker-acl", "--gateways", list, "--out", work + "/out"])
        #expect(second.status == 0, "\(second.error)")
        #expect(second.output.contains("(password kept)") && second.output.contains("2 kept their passwords, 1 new (gw-4)"), "\(second.output)")
        #expect(second.output.contains("removed 1 logins no longer named (gw-2)"), "\(second.output)")
        #expect(try ["fleet", "gw-1", "gw-3"].map(read) == before)
        #expect(!FileManager.default.fileExists(atPath: "\(work)/out/credentials/gw-2.password"))
        let acl = try String(contentsOfFile: work + "/out/acl", encoding: .utf8)
        #expect(acl.contains("user gw-4\n") && !acl.contains("gw-2"))
        #expect(!FileManager.default.fileExists(atPath: "\(work)/out/passwords.hashing"), "no clear passwords left beside the file")
    }

    @Test(arguments: [
        ("gw-1\ngw 2\n", "GATEWAYS:2: 'gw 2' is no gateway id: it holds whitespace (U+0020)"),
        ("gw-1\n\ngw-3\n", "GATEWAYS:2: '' is no gateway id: it is empty"),
        ("gw-1\nsite/gw-2\n", "GATEWAYS:2: 'site/gw-2' is no gateway id: it holds '/' (a topic level separator)"),
        ("gw-+\n", "GATEWAYS:1: 'gw-+' is no gateway id: it holds '+' (an MQTT wildcard)"),
        ("gw-1\ngw-#\n", "GATEWAYS:2: 'gw-#' is no gateway id: it holds '#' (an MQTT wildcard)"),
        ("gw:1\n", "GATEWAYS:1: 'gw:1' is no gateway id: it holds ':' (the separator of mosquitto's password file)"),
        ("gw-1\ngw-2\ngw-1\n", "GATEWAYS:3: gateway 'gw-1' again (first on line 1)"),
        ("gw-1\nfleet\n", "gateway 'fleet' has the fleet's own login name: give --fleet-user another name"),
        ("", "the gateways file GATEWAYS names no gateway (one id a line)"),
    ])
    func idsThatCannotBeLoginsAreRefusedNamingTheLine(_ contents: String, _ message: String) throws {
        let work = try Fleet.temporaryDirectory("acl-bad")
        try contents.write(toFile: work + "/gateways", atomically: true, encoding: .utf8)
        let run = try Fleet.fleet(["broker-acl", "--gateways", work + "/gateways", "--out", work + "/out"])
        #expect(run.status == 1)
        #expect(run.error == "locus-fleet: broker-acl: " + message.replacingOccurrences(of: "GATEWAYS", with: work + "/gateways") + "\n", "\(run.error)")
        #expect(!FileManager.default.fileExists(atPath: work + "/out/acl"))
    }

    @Test func anIdStartingWithDollarIsRefusedWhenItWouldStartTheTopic() throws {
        let work = try Fleet.temporaryDirectory("acl-dollar")
        try "gw-1\n$gw-2\n".write(toFile: work + "/gateways", atomically: true, encoding: .utf8)
        let first = try Fleet.fleet(["broker-acl", "--gateways", work + "/gateways", "--prefix", "+/locus", "--out", work + "/out"])
        #expect(first.status == 1 && first.error.contains("gateway '$gw-2' would make topics that start with '$'"), "\(first.error)")
        let inside = try Fleet.fleet(["broker-acl", "--gateways", work + "/gateways", "--out", work + "/out"])
        #expect(inside.status == 0, "\(inside.error)")
    }

    @Test(arguments: [
        (["--gateways", "g"], "give --out DIR (where the acl, passwords and credentials go)"),
        (["--out", "d"], "give the gateways: --gateways FILE (one id a line) or --from-database"),
        (["--out", "d", "--gateways", "g", "--from-database"], "--gateways FILE and --from-database exclude each other: give one"),
        (["--out", "d", "--gateways", "g", "--database", "fleet"], "--database goes with --from-database"),
        (["--out", "d", "--gateways", "g", "--prefix", "locus/#"], "--prefix 'locus/#' must have one level that is '+', where the gateway id stands (locus/+)"),
        (["--out", "d", "--gateways", "g", "--prefix", "+/x/+"], "--prefix '+/x/+' must have one level that is '+', where the gateway id stands (locus/+)"),
        (["--out", "d", "--gateways", "g", "--prefix", "a//+"], "--prefix 'a//+': the level '' is empty or holds a wildcard; only the gateway's level is '+'"),
        (["--out", "d", "--gateways", "g", "--fleet"], "unknown option '--fleet'"),
    ])
    func usageErrorsExitTwo(_ arguments: [String], _ message: String) throws {
        let run = try Fleet.fleet(["broker-acl"] + arguments)
        #expect(run.status == 2)
        #expect(run.error.hasPrefix("locus-fleet: broker-acl: \(message)\nusage: "), "\(run.error)")
    }

    @Test func theGatewaysComeFromTheDatabaseAndThePrefixCanBeAnother() throws {
        let url = try Fleet.migratedDatabase("acl")
        let empty = try Fleet.fleet(["broker-acl", "--from-database", "--database", url, "--out", try Fleet.temporaryDirectory("acl-db-empty")])
        #expect(empty.status == 1 && empty.error.contains("the gateways table is empty (nothing stored yet): give --gateways FILE"), "\(empty.error)")
        let connection = try Fleet.connect(url)
        _ = try connection.execute("insert into gateways (gateway) values ('depot-7'), ('depot-3')")
        let out = try Fleet.temporaryDirectory("acl-db") + "/out"
        let run = try Fleet.fleet(["broker-acl", "--from-database", "--out", out, "--prefix", "sites/+/locus", "--fleet-user", "collector"],
                                  environment: ["LOCUS_FLEET_DATABASE": url])
        #expect(run.status == 0, "\(run.error)")
        let acl = try String(contentsOfFile: out + "/acl", encoding: .utf8)
        #expect(acl.contains("user collector\ntopic read sites/+/locus/#\ntopic write sites/+/locus/remote/#\n"), "\(acl)")
        #expect(acl.contains("user depot-3\ntopic write sites/depot-3/locus/#\ntopic read sites/depot-3/locus/remote/#\n"), "\(acl)")
        #expect(acl.range(of: "user depot-3")!.lowerBound < acl.range(of: "user depot-7")!.lowerBound)
        #expect(FileManager.default.fileExists(atPath: out + "/credentials/collector.password"))
    }
}
