import LocusCore
import LocusDevices
import TestSupport

/// The fleet steering the simulated gateway (docs/remote.md): configurations, pulse and set commands
/// signed with a key of the simulator's, sent by the simulated broker, through its faults (drops,
/// refusals) and the gateway's power cuts.
///
/// What is drawn: configurations at moments of the run, each a good version (the site's actions
/// replaced by one of three sets) or a bad one (a key no site file has, another gateway's, another
/// key's signature, an older version replayed); pulses and latches set or cleared, some expired, some delivered again
/// later. What is checked (`SeedRun`): the versions applied only increase, and only good ones are;
/// every refusal is of a bad one; the running actions are always exactly one version's (or the
/// site file's), never a mix, after every power cut too; each command has at most one record, and
/// each that was not expired ran by the end.
struct RemotePlan {
    /// A good version replaces the site's actions with `actionSets[actions]`; `older` is an
    /// earlier good version's message replayed, byte for byte.
    enum Kind: Equatable { case good(actions: Int), unknownKey, otherGateway, otherKey, older(actions: Int) }

    struct Configuration {
        var atS: Int
        var version: Int
        var kind: Kind
    }

    struct Command {
        var atS: Int
        var id: String
        var output: String
        var expired: Bool
        /// A `set` of the output's latch (on or off) rather than a pulse.
        var latch: Bool? = nil
    }

    var configurations: [Configuration] = []
    var commands: [Command] = []
    /// Commands (indices) sent a second time, at these seconds: the fleet repeating itself.
    var repeats: [(index: Int, atS: Int)] = []

    /// The three action sets a good version chooses from (one of them empty), by output count.
    static let actionSets = [
        "action = []\n",
        "[[action]]\nwhen = \"m0/*\"\nstate = \"any\"\ngpio = \"out0\"\nmode = \"pulse\"\npulse = \"1s\"\n",
        "[[action]]\nwhen = \"m0/place0\"\nstate = \"satisfied\"\ngpio = \"out1\"\nmode = \"level\"\n"
            + "[[action]]\nwhen = \"m0/place0\"\nstate = \"unsatisfied\"\ngpio = \"out2\"\nmode = \"latch\"\n",
    ]
    static let actionCounts = [0, 1, 2]

    static func draw(_ random: inout SplitMix64, durationS: Int) -> RemotePlan {
        var plan = RemotePlan()
        var version = 0
        var atS = 0
        for _ in 0..<(1 + random.below(5)) {
            atS += random.below(max(1, durationS / 3))
            let goods = plan.configurations.filter { if case .good = $0.kind { return true } else { return false } }
            switch random.below(10) {
            case 0: version += 1; plan.configurations.append(Configuration(atS: atS, version: version, kind: .unknownKey))
            case 1: version += 1; plan.configurations.append(Configuration(atS: atS, version: version, kind: .otherGateway))
            case 2: version += 1; plan.configurations.append(Configuration(atS: atS, version: version, kind: .otherKey))
            case 3 where !goods.isEmpty:
                let earlier = random.pick(goods)
                guard case .good(let actions) = earlier.kind else { break }
                plan.configurations.append(Configuration(atS: atS, version: earlier.version, kind: .older(actions: actions)))
            default:
                version += 1 + random.below(2)
                plan.configurations.append(Configuration(atS: atS, version: version, kind: .good(actions: random.below(actionSets.count))))
            }
        }
        for index in 0..<random.below(6) {
            plan.commands.append(Command(atS: random.below(durationS), id: "c-\(index)", output: random.pick(Scenario.outputs),
                                         expired: random.chance(15)))
        }
        for index in plan.commands.indices where random.chance(30) { plan.repeats.append((index, random.below(durationS))) }
        // Drawn last, so the seeds kept as tests draw what they drew before.
        for index in plan.commands.indices where random.chance(40) { plan.commands[index].latch = random.chance(60) }
        return plan
    }

    /// The actions a version runs (nil: no good version has it).
    func actionCount(version: UInt64) -> Int? {
        for configuration in configurations where UInt64(configuration.version) == version {
            switch configuration.kind {
            case .good(let actions), .older(let actions): return RemotePlan.actionCounts[actions]
            default: continue
            }
        }
        return nil
    }

    /// Whether version `version` was drawn as a bad one (refused by any gateway).
    func isBad(version: UInt64) -> Bool {
        configurations.contains { UInt64($0.version) == version && [Kind.unknownKey, .otherGateway, .otherKey].contains($0.kind) }
    }

    /// The site's `[remote]` (with `fleet.pub` beside it).
    static let siteText = "\n[remote]\nkey = \"fleet.pub\"\nsettable = [\"action\"]\ncommands = [\"pulse\", \"set\"]\n"

    // A key pair made for the simulator (openssl ecparam -name prime256v1 -genkey), and another
    // the gateway does not know. Test keys: they sign nothing outside the simulator.
    static let privateKey = """
        -----BEGIN EC PRIVATE KEY-----
        MHcCAQEEIOJEsGIu6mm6zNG5PML+4Xgk0qQrmwmw59Jof5Rj1jtloAoGCCqGSM49
        AwEHoUQDQgAE/cdFCNy1fm8eamUyWbGA4FNZmxfB2MRcDTuhed8Ig1bCN0ur/9OW
        SyhBxmJPUQgVBPBf0jie6ZhaFiO3deqfrA==
        -----END EC PRIVATE KEY-----

        """
    static let publicKey = """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE/cdFCNy1fm8eamUyWbGA4FNZmxfB
        2MRcDTuhed8Ig1bCN0ur/9OWSyhBxmJPUQgVBPBf0jie6ZhaFiO3deqfrA==
        -----END PUBLIC KEY-----

        """
    static let otherKey = """
        -----BEGIN EC PRIVATE KEY-----
        MHcCAQEEIKbIglOHNRO/18gF1b1+A16XS5miD5MgvX7e7RsrFzpLoAoGCCqGSM49
        AwEHoUQDQgAEmUS3feiD+tcH7zdfnlCSFMWsCyVkSNYAFsuVKGCMHuQCYesW0ENE
        /UNSSZHmLkuIiCYFx27LjSjb3hoJVu1miw==
        -----END EC PRIVATE KEY-----

        """

    /// A message as the fleet signs it (deterministic ECDSA: the same run, the same bytes).
    static func signed(_ body: String, key: String = privateKey) -> [UInt8] {
        let bytes = Array(body.utf8)
        guard case .success(let signature) = bytes.withUnsafeBytes({ Signatures.sign(privateKey: Array(key.utf8), $0) }) else {
            preconditionFailure("the simulator's key signs")
        }
        return bytes + Array((FleetMessage.signaturePrefix + FleetMessage.algorithm + " " + Base64.encode(signature) + "\n").utf8)
    }

    /// The configuration's message for `gateway`.
    static func message(_ configuration: Configuration, gateway: String) -> [UInt8] {
        var fragment = actionSets[0]
        var to = gateway
        var key = privateKey
        switch configuration.kind {
        case .good(let actions), .older(let actions): fragment = actionSets[actions]
        case .unknownKey: fragment = "[actoin]\nwhen = \"m0/*\"\n"
        case .otherGateway: to = "another-gw"
        case .otherKey: key = otherKey
        }
        return signed(fragment + "\n[fleet]\nkind = \"config\"\ngateway = \"\(to)\"\nversion = \(configuration.version)\n", key: key)
    }

    /// The command's message for `gateway`; an expired one expired before the run began.
    static func message(_ command: Command, gateway: String, startUTC: Int64) -> [UInt8] {
        // Beyond the clock faults' reach (a jump of at most 400 days before GNSS time is followed).
        let expires = command.expired ? startUTC - 800 * 86_400 : startUTC + 800 * 86_400
        let what = command.latch.map { "action = \"set\"\nvalue = \"\($0 ? "on" : "off")\"\n" } ?? "action = \"pulse\"\nduration = \"300ms\"\n"
        return signed("[command]\n\(what)output = \"\(command.output)\"\n\n[fleet]\nkind = \"command\"\n"
                      + "gateway = \"\(gateway)\"\nid = \"\(command.id)\"\nexpires = \(expires)\n")
    }
}
