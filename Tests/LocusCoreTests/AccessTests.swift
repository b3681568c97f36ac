import Testing
@testable import LocusCore

/// `[access]` in the site file and the decision `AccessPolicy` makes from a peer's credentials.
@Suite struct AccessPolicyTests {
    static let agent: UInt32 = 998
    static let technician: UInt32 = 1001
    static let (ops, adm, readers, other): (UInt32, UInt32, UInt32, UInt32) = (2000, 4, 2001, 3000)

    static func policy(_ privacy: SiteConfig.FixPrivacy = .full) -> AccessPolicy {
        var policy = AccessPolicy(agentUser: agent, privacy: privacy)
        policy.readGroups = [readers, adm]
        policy.positionsGroups = [readers]
        policy.changeGroups = [ops]
        return policy
    }

    @Test func theSocketsKeepTheirMeaningAndGroupsAddGrants() {
        let policy = Self.policy()
        // Whoever reaches control.sock (its mode lets only group locus in) has everything.
        #expect(policy.grants(user: Self.technician, group: Self.other, groups: [], socket: .control) == .all)
        // read.sock: read and positions for anyone by default; change only through a group.
        #expect(policy.grants(user: Self.technician, group: Self.other, groups: [], socket: .readOnly) == [.read, .positions])
        #expect(policy.grants(user: Self.technician, group: Self.other, groups: [Self.ops], socket: .readOnly) == .all)
        #expect(policy.grants(user: Self.technician, group: Self.ops, groups: [], socket: .readOnly) == .all, "the primary group counts")
        // Root and the agent's own user have every grant on either socket.
        #expect(policy.grants(user: 0, group: 0, groups: [], socket: .readOnly) == .all)
        #expect(policy.grants(user: Self.agent, group: Self.other, groups: [], socket: .readOnly) == .all)
    }

    @Test func aClosedReadSocketGrantsOnlyByGroup() {
        var policy = Self.policy()
        policy.readSocket = []
        #expect(policy.grants(user: Self.technician, group: Self.other, groups: [], socket: .readOnly) == [])
        #expect(policy.grants(user: Self.technician, group: Self.other, groups: [Self.adm], socket: .readOnly) == .read)
        #expect(policy.grants(user: Self.technician, group: Self.other, groups: [Self.adm, Self.readers], socket: .readOnly) == [.read, .positions])
    }

    @Test func privacyNoneGivesPositionsToNobody() {
        let policy = Self.policy(.none)
        #expect(policy.grants(user: 0, group: 0, groups: [], socket: .control) == [.read, .change])
        #expect(policy.grants(user: Self.technician, group: Self.other, groups: [Self.readers], socket: .readOnly) == .read)
        let message = policy.refusal(.positions, held: .read, socket: .readOnly)
        #expect(message.contains("'positions'") && message.contains("[privacy] fixes = \"none\""), "\(message)")
    }

    @Test func aRefusalNamesTheMissingGrantAndHowToGetIt() {
        let policy = Self.policy()
        let change = policy.refusal(.change, held: [.read, .positions], socket: .readOnly)
        #expect(change == "this needs the 'change' grant; this connection (read.sock) has: read, positions. Changes go through control.sock (the locus user, root and group locus), or through read.sock for members of a group in the site's [access] change")
        let read = policy.refusal(.read, held: [], socket: .readOnly)
        #expect(read.hasPrefix("this needs the 'read' grant; this connection (read.sock) has: none. Ask for a group in the site's [access] read list"), "\(read)")
    }

    /// Every operation's grant, the one switch other operations join.
    @Test func everyOperationNeedsItsGrant() throws {
        func grant(_ line: String) -> AccessGrants? {
            guard case .success(let request) = ControlProtocol.decode(Array(line.utf8)).request else { return nil }
            return request.requiredGrant
        }
        #expect(grant(#"{"op":"hello"}"#) == [])
        for op in [#""status""#, #""identifiers","monitor":"m""#, #""records","monitor":"m""#, #""record","monitor":"m","identifier":"i""#,
                   #""subscribe""#, #""subscribe","monitor":"m","after_seq":3"#] {
            #expect(grant(#"{"op":"# + op + "}") == .read, "\(op)")
        }
        #expect(grant(#"{"op":"updates"}"#) == .positions)
        #expect(grant(#"{"op":"updates-stop"}"#) == .positions)
        for op in [#""add","monitor":"m","identifier":"i","circle":{"lat":1,"lon":2,"radius":3}"#, #""remove","monitor":"m","identifier":"i""#,
                   #""open","monitor":"m""#, #""ack","monitor":"m","seq":1"#, #""gpio-clear","gpio":"relay1""#,
                   #""subscribe","monitor":"m","consumer":true"#] {
            #expect(grant(#"{"op":"# + op + "}") == .change, "\(op)")
        }
    }
}

@Suite struct AccessSchemaTests {
    @Test func accessAndStartSocketAreRead() throws {
        let site = try SiteConfig.parse(Array("""
        board = "b.toml"
        [access]
        read = ["adm", "locus-read"]
        positions = ["locus-read"]
        change = ["locus-ops"]
        read_socket = ["read"]
        [monitor.gate]
        start_socket = "/run/monitor-greeter.sock"
        [[monitor.gate.condition]]
        id = "depot"
        circle = { lat = 1.0, lon = 2.0, radius = 3.0 }
        """.utf8), file: "site.toml")
        #expect(site.access.read.map { $0.name } == ["adm", "locus-read"])
        #expect(site.access.read[1].location == SourceLocation(line: 3, column: 16))
        #expect(site.access.positions.map { $0.name } == ["locus-read"])
        #expect(site.access.change.map { $0.name } == ["locus-ops"])
        #expect(site.access.readSocket == .read)
        #expect(site.monitors.first?.startSocket == "/run/monitor-greeter.sock")
    }

    @Test func defaultsKeepTodaysSockets() throws {
        let site = try SiteConfig.parse(Array("board = \"b.toml\"\n".utf8), file: "site.toml")
        #expect(site.access.readSocket == [.read, .positions])
        #expect(site.access.read.isEmpty && site.access.change.isEmpty)
    }

    @Test func mistakesAreLocatedWithSuggestions() {
        let errors = siteErrors("""
        board = "b.toml"
        [access]
        raed = ["adm"]
        change = "locus"
        positions = ["ok", "bad name", 5]
        read_socket = ["change", "positoins"]
        [monitor.gate]
        start_sock = "/run/x.sock"
        """)
        #expect(errors == [
            "site.toml:3:1: unknown key 'access.raed' (did you mean 'read'?)",
            "site.toml:4:10: 'access.change' must be an array of strings, not string",
            "site.toml:5:32: 'access.positions' must hold strings, not integer",
            "site.toml:6:16: 'access.read_socket' cannot give 'change' to everyone who reaches read.sock; name a group in 'change' instead",
            "site.toml:6:26: 'access.read_socket' has \"positoins\", which is not one of: read | positions (did you mean \"positions\"?)",
            "site.toml:8:1: unknown key 'monitor.gate.start_sock' (did you mean 'start_socket'?)",
        ], "\(errors)")
        let names = siteErrors("board = \"b.toml\"\n[access]\nread = [\"ok\", \"bad name\", \"-x\"]\n")
        #expect(names == [
            "site.toml:3:15: 'access.read' has \"bad name\", which is not a group name (1...32 letters, digits, '_', '-', '.')",
            "site.toml:3:27: 'access.read' has \"-x\", which is not a group name (1...32 letters, digits, '_', '-', '.')",
        ], "\(names)")
    }
}
