import Foundation
@testable import LocusFleet
import TestSupport
import Testing

/// Areas as conditions of the fleet's commands: the plan's `[[rule]]` tables read with their
/// errors, the rule book's decisions on changes, and `presence run --key` signing, storing and
/// publishing what the rules fire (mosquitto, PostgreSQL, the signature checked by openssl).
@Suite(.serialized) struct PresenceRuleTests {
    static func plan(_ rules: String) throws(PresenceFloorPlan.ParseError) -> PresenceFloorPlan {
        try PresenceFloorPlan.parse(toml: PresenceSimulation.Plans.house + "\n" + rules)
    }

    static let rules = """
        [[rule]]
        name = "study lamp"
        when = "enters"
        area = "study"
        tag = "phone:alice"
        gateway = "gw-light"
        command = "pulse lamp 2s"
        [[rule]]
        when = "occupied"
        area = "kitchen"
        gateway = "gw-light"
        command = "set fan on"
        expires = "30s"
        [[rule]]
        when = "vacated"
        area = "kitchen"
        gateway = "gw-light"
        command = "set fan off"
        [[rule]]
        when = "leaves"
        area = "study"
        tag = "e2c56db5-dffb-48d2-b060-d0f5a71096e0/1/2"
        gateway = "gw-light"
        command = "snapshot E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 1 --duration 3s"
        """

    @Test func rulesAreReadWithTheirCommands() throws {
        let plan = try Self.plan(Self.rules)
        #expect(plan.rules.count == 4)
        let lamp = plan.rules[0]
        #expect(lamp.label == "rule 1 (study lamp)" && lamp.when == .enters && lamp.tag == "phone:alice" && lamp.expiresMs == 60_000)
        #expect(lamp.action == "pulse" && lamp.keys.map(\.0) == ["output", "duration"] && lamp.keys[0].1 == .string("lamp"))
        #expect(plan.rules[1].tag == nil && plan.rules[1].expiresMs == 30_000 && plan.rules[1].keys[1].1 == .string("on"))
        #expect(plan.rules[3].tag == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/1/2" && plan.rules[3].action == "snapshot")
        #expect(plan.rules[3].keys.last?.1 == .string("3s"))
    }

    @Test(arguments: [
        ("when = \"enter\"\narea = \"study\"\ngateway = \"g\"\ncommand = \"set fan on\"", "rule 1: when must be enters, leaves, occupied, vacated, got \"enter\" (did you mean 'enters'?)"),
        ("when = \"enters\"\narea = \"studdy\"\ngateway = \"g\"\ncommand = \"set fan on\"", "rule 1: area \"studdy\" is not an [[area]] of the plan (did you mean 'study'?)"),
        ("when = \"enters\"\narea = \"study\"\ngateway = \"g\"\ncommand = \"set fan maybe\"", "rule 1: command \"set fan maybe\": set takes OUTPUT on|off (set relay1 on)"),
        ("when = \"enters\"\narea = \"study\"\ngateway = \"g\"\ncommand = \"open gate\"", "rule 1: command \"open gate\": unknown action 'open'"),
        ("when = \"enters\"\narea = \"study\"\ngateway = \"g w\"\ncommand = \"set fan on\"", "rule 1: 'g w' is not a gateway id"),
        ("when = \"enters\"\narea = \"study\"\ntag = \"alice\"\ngateway = \"g\"\ncommand = \"set fan on\"", "rule 1: tag must be \"phone:NAME\" or \"UUID/MAJOR/MINOR\""),
        ("when = \"enters\"\narea = \"study\"\ngateway = \"g\"\ncommand = \"set fan on\"\nexpires = \"0s\"", "rule 1: expires must be a duration of a second or more"),
        ("when = \"enters\"\narea = \"study\"\ngateway = \"g\"\ncommand = \"set fan on\"\nlater = 1", "rule 1: unknown field 'later'"),
        ("when = \"enters\"\narea = \"study\"\ncommand = \"set fan on\"", "rule 1 needs gateway = \"...\""),
    ])
    func aBrokenRuleIsRefusedAtItsPlace(_ body: String, _ message: String) throws {
        do {
            _ = try Self.plan("[[rule]]\n" + body)
            Issue.record("accepted: \(body)")
        } catch {
            #expect(error.description.contains(message), "\(error.description)")
            // The line is the rule's (the house plan has its own lines before it).
            let houseLines = PresenceSimulation.Plans.house.split(separator: "\n", omittingEmptySubsequences: false).count
            #expect(error.location.line > houseLines, "\(error.location)")
        }
    }

    static func change(_ tag: String, _ from: String?, _ to: String?, away: Bool = false) -> PresenceService.Change {
        PresenceService.Change(tag: tag, from: from, to: to, away: away, x: nil, y: nil, spreadM: nil, timeMs: 0)
    }

    @Test func rulesFireOnTheChangeThatMeetsThemOnce() throws {
        var book = PresenceRuleBook(try Self.plan(Self.rules).rules)
        func fired(_ changes: [PresenceService.Change]) -> [String] { book.fire(changes).map { "\($0.rule.number) \($0.change.tag)" } }
        let beacon = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/1/2"
        // alice into the study: rule 1; bob into the kitchen: occupied (rule 2).
        #expect(fired([Self.change("phone:alice", nil, "study"), Self.change("phone:bob", nil, "kitchen")]) == ["1 phone:alice", "2 phone:bob"])
        // carol joins bob: the kitchen was already occupied; bob leaves: not vacated while carol stays.
        #expect(fired([Self.change("phone:carol", "living", "kitchen")]) == [])
        #expect(fired([Self.change("phone:bob", "kitchen", "living")]) == [])
        #expect(book.occupants("kitchen") == ["phone:carol"])
        // carol goes away: the kitchen is vacated (rule 3).
        #expect(fired([Self.change("phone:carol", "kitchen", nil, away: true)]) == ["3 phone:carol"])
        // alice into the study again without leaving: nothing; the beacon leaves the study: rule 4 only for it.
        #expect(fired([Self.change("phone:alice", "study", "study")]) == [])
        #expect(fired([Self.change(beacon, nil, "study"), Self.change(beacon, "study", "bedroom")]) == ["4 \(beacon)"])
        #expect(fired([Self.change("phone:alice", "study", "bedroom"), Self.change("phone:alice", "bedroom", "study")]) == ["1 phone:alice"])
    }

    @Test func presenceRunSignsStoresAndSendsWhatItsRulesFire() throws {
        let broker = try TestBroker(listeners: [[]])
        let work = try Fleet.temporaryDirectory("presence-rules")
        let key = work + "/fleet.key"
        #expect(try Fleet.fleet(["config", "keygen", "--out", key]).status == 0)
        try (PresenceSimulation.Plans.house + "\n" + Self.rules).write(toFile: work + "/plan.toml", atomically: true, encoding: .utf8)
        let database = try Fleet.migratedDatabase("presence_rules")
        let arguments = ["presence", "run", "--broker", "mqtt://127.0.0.1:\(broker.ports[0])", "--plan", work + "/plan.toml", "--database", database]

        // Without the key, rules cannot be sent: refused before anything runs.
        let keyless = try Fleet.fleet(arguments + ["--seconds", "1"])
        #expect(keyless.status == 2 && keyless.error.contains("the plan has 4 [[rule]]: --key FILE (the fleet's signing key) is needed"), "\(keyless.error)")

        let collector = try TestCollector(port: broker.ports[0], filters: ["locus/gw-light/remote/command"])
        let (exit, text) = try PresenceServiceTests.presenceRun(Array(arguments.dropFirst(2)) + ["--key", key, "--seconds", "10"], port: broker.ports[0])
        #expect(exit == 0, "\(text)")
        // alice entered the study: rule 1 alone (nobody in the kitchen), once.
        let lines = text.split(separator: "\n").filter { $0.contains("rule") }
        #expect(lines.count == 2 && lines[0].hasPrefix("  rule 1 (study lamp): phone:alice enters study: command c-") && lines[0].hasSuffix(" (pulse lamp 2s) for gw-light: published"), "\(text)")
        #expect(lines.last == "rules: 4, 1 commands sent, 0 not sent", "\(text)")
        // The signed command on the gateway's topic, verified by openssl with the public key.
        #expect(collector.wait(seconds: 5) { $0.count == 1 })
        let message = collector.messages.first.map { String(decoding: $0.payload, as: UTF8.self) } ?? ""
        #expect(message.contains("[fleet]\nkind = \"command\"\ngateway = \"gw-light\"\n") && message.contains("[command]\naction = \"pulse\"\noutput = \"lamp\"\nduration = \"2s\"\n"), "\(message)")
        let (body, signature) = try #require(RemoteTests.split(message))
        #expect(try RemoteTests.opensslVerifies(body, signature, publicKey: work + "/fleet.pub"))
        // Stored as command send stores it: command status shows it pending its answer.
        let status = try Fleet.fleet(["command", "status", "--database", database])
        #expect(status.status == 0 && status.output.contains(" gw-light pulse: pending (sent "), "\(status.output)")
    }
}
