import Foundation
import Testing

private typealias E2E = AgentEndToEndTests

/// Access levels as a user of the gateway meets them: a system user and group made for the test
/// (useradd and groupadd, as an installer would), the CLI run as that user with `setpriv`, against
/// an agent running as root. Needs root to make users; prints why and skips otherwise.
@Suite(.serialized) struct AccessLevelTests {
    static func run(_ command: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = command
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// `locus ARGUMENTS` as `user` with the groups the group database gives it now.
    static func locusAs(_ user: String, _ arguments: [String]) throws -> LocusRun {
        try locusCommand(["/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(user)", "--init-groups", try locusBinary()] + arguments)
    }

    static func locusCommand(_ command: [String]) throws -> LocusRun {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        let output = Pipe(), error = Pipe()
        process.standardOutput = output
        process.standardError = error
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return LocusRun(status: process.terminationStatus, output: String(decoding: out, as: UTF8.self), error: String(decoding: err, as: UTF8.self))
    }

    @Test func anUnprivilegedUserReadsThroughReadSockAndChangesOnlyWithAGrantedGroup() throws {
        guard geteuid() == 0 else {
            print("AccessLevelTests: skipped: making a user and a group needs root (CI runs as root)")
            return
        }
        let suffix = "\(getpid() % 100_000)"
        let user = "locustest\(suffix)", group = "locusops\(suffix)"
        _ = Self.run(["userdel", user])
        _ = Self.run(["groupdel", group])
        #expect(Self.run(["groupadd", "--system", group]) == 0)
        #expect(Self.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user]) == 0)
        defer {
            _ = Self.run(["userdel", user])
            _ = Self.run(["groupdel", group])
        }
        let site = try E2E.site("access", extra: """
        [access]
        change = ["\(group)", "no-such-group-\(suffix)"]
        """)
        let agent = try E2E.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        // The group that does not exist is a located warning; the agent runs without it.
        #expect(agent.log.contains("warning: group 'no-such-group-\(suffix)' does not exist on this system"), "\(agent.log)")
        // The state directory as a site opens it to local readers (docs/access.md): 0751.
        #expect(chmod(site.state, 0o751) == 0)
        #expect(chmod(site.directory, 0o755) == 0)

        // Reading works through read.sock: status, records, identifiers.
        let status = try Self.locusAs(user, ["status", "--state", site.state])
        #expect(status.status == 0 && status.output.contains("\"control\":{"), "\(status.error)")
        let identifiers = try Self.locusAs(user, ["monitor", "road", "identifiers", "--state", site.state])
        #expect(identifiers.status == 0 && identifiers.output == "fence\n", "\(identifiers.error)")
        let records = try Self.locusAs(user, ["monitor", "road", "records", "--state", site.state])
        #expect(records.status == 0 && records.output.contains("\"identifier\":\"fence\""), "\(records.error)")

        // Changing is refused: control.sock's mode keeps the user out, and on read.sock the user
        // lacks the grant. The refusal names it and says how to get it; nothing changed.
        let add = try Self.locusAs(user, ["monitor", "road", "add", "depot", "--circle", "45.01,7.0,50", "--state", site.state])
        #expect(add.status == 1, "\(add.output)")
        #expect(add.error.hasPrefix("locus: monitor road add: this needs the 'change' grant; this connection (read.sock) has: read, positions."), "\(add.error)")
        #expect(add.error.contains("[access] change"), "\(add.error)")
        let clear = try Self.locusAs(user, ["gpio", "clear", "relay2", "--state", site.state])
        #expect(clear.status == 1 && clear.error.contains("needs the 'change' grant"), "\(clear.error)")
        #expect(try locus(["monitor", "road", "identifiers", "--state", site.state]).output == "fence\n", "the refused add changed nothing")

        // `locus status` lists connected clients with who they are and their grant: a follower
        // of the events, run as the user, is one.
        let follower = Process()
        follower.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        follower.arguments = ["--reuid=\(user)", "--regid=\(user)", "--init-groups", try locusBinary(), "events", "--follow", "--state", site.state]
        follower.standardOutput = FileHandle.nullDevice
        follower.standardError = FileHandle.nullDevice
        try follower.run()
        // SIGKILL: the test runner's threads block SIGTERM, and a spawned process inherits the mask.
        defer { kill(follower.processIdentifier, SIGKILL); follower.waitUntilExit() }
        var client: [String: Any]? = nil
        try E2E.waitFor("the follower in status", seconds: 10) {
            let reply = try locus(["status", "--state", site.state]).output
            let object = try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]
            let clients = (object?["control"] as? [String: Any])?["clients"] as? [[String: Any]] ?? []
            client = clients.first { $0["user"] as? String == user }
            // Connected is not yet subscribed: its request is read in a later turn of the loop.
            return client?["subscribed"] != nil
        }
        #expect(client?["socket"] as? String == "read.sock")
        #expect(client?["access"] as? [String] == ["read", "positions"])
        #expect(client?["subscribed"] as? String == "*")
        #expect(client?["pid"] as? Int == Int(follower.processIdentifier))

        // In the granted group, the same user changes things through read.sock.
        #expect(Self.run(["usermod", "-a", "-G", group, user]) == 0)
        let granted = try Self.locusAs(user, ["monitor", "road", "add", "depot", "--circle", "45.01,7.0,50", "--state", site.state])
        #expect(granted.status == 0 && granted.output == "added road/depot\n", "\(granted.error)")

        // A site that closes read.sock to everyone but its groups: reading is refused too.
        try (String(contentsOfFile: site.sitePath, encoding: .utf8) + "\nread_socket = []\n").write(toFile: site.sitePath, atomically: true, encoding: .utf8)
        kill(agent.process.processIdentifier, SIGHUP)
        try E2E.waitFor("the reload", seconds: 10) { agent.log.contains("reloaded:") }
        // The grants are separate: the user's group may change, and now may not read.
        let closed = try Self.locusAs(user, ["status", "--state", site.state])
        #expect(closed.status == 1 && closed.error.contains("this needs the 'read' grant; this connection (read.sock) has: change"), "\(closed.error)")
        // Root still reads and changes through either socket.
        #expect(try locus(["status", "--state", site.state]).status == 0)
    }

    /// A group `[access]` names that this system does not have: a located warning, the file is
    /// still accepted (access stays closed for it; monitoring and relays are not at stake).
    @Test func checkConfigWarnsAboutAGroupThatDoesNotExist() throws {
        let path = try temporaryFile("access-missing-group.toml", """
        board = "\(repositoryRoot)/Boards/sim.toml"
        [access]
        read = ["root", "no-such-group-\(getpid())"]
        """)
        let run = try locus(["check-config", path])
        #expect(run.status == 0 && run.output.hasPrefix("ok: "), "\(run.error)")
        #expect(run.error == "\(path):3:17: warning: group 'no-such-group-\(getpid())' does not exist on this system; access.read grants it nothing (groupadd no-such-group-\(getpid()), or remove it)\n")
    }
}
