import Foundation
@testable import LocusAgent
import LocusCore
import Testing
import TestSupport

/// A receiver whose port stays open while it stops talking, on a real pseudo-terminal: the fake
/// receiver hangs (`--wedge-after`), and `locus run` must notice, climb its healing steps in
/// order (each decoded by the fake: pyubx2 for UBX, the NMEA checksum for PMTK), and read fixes
/// again once the fake is freed, without a restart.
@Suite(.serialized) struct ReceiverHealingTests {
    typealias E2E = ReceiverControlEndToEndTests

    /// A continuous tier (the receiver talks every second), a short silence limit and settle.
    static func extra(rounds: Int) -> String {
        "[updates]\npreset = \"fitness\"\naccuracy = \"best\"\n[health]\ngnss_silence = \"3s\"\nsettle = \"3s\"\nrounds = \(rounds)\n"
    }

    static func health(_ site: AgentEndToEndTests.Site) throws -> [String: Any] {
        let (gnss, receiver) = try E2E.status(site)
        _ = receiver
        return gnss["health"] as? [String: Any] ?? [:]
    }

    static func fixes(_ site: AgentEndToEndTests.Site) throws -> Int { try E2E.status(site).gnss["fixes"] as? Int ?? -1 }

    /// Reports of `event` that came while the fake was hung.
    static func whileWedged(_ fake: E2E.Fake, _ event: String) -> [[String: Any]] {
        fake.reports.filter { $0["event"] as? String == event && $0["wedged"] as? Bool == true }
    }

    @Test func aHungUBloxReceiverGetsItsPlanThenAResetAndItsFixesComeBack() throws {
        let site = try AgentEndToEndTests.site("heal-ublox", extra: Self.extra(rounds: 2), board: E2E.board("ublox"))
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let fake = try E2E.startFake(site, ["--family", "ublox", "--wedge-after", "5", "--line-interval", "0.333"])
        defer { fake.stop() }
        try AgentEndToEndTests.waitFor("the first plan", seconds: 20) { agent.log.contains("receiver configured for fitness/best") }
        try AgentEndToEndTests.waitFor("the healing", seconds: 40) { agent.log.contains("healed by the receiver reset (round 1)") }

        let log = agent.log
        let resend = try #require(log.range(of: "; sending the receiver plan (fitness/best) again (step 1 of 2, round 1 of 2)"))
        let reset = try #require(log.range(of: "; resetting the receiver (UBX CFG-RST hardware reset, hot start) (step 2 of 2, round 1 of 2)"))
        #expect(resend.lowerBound < reset.lowerBound, "\(log)")
        #expect(log.contains("locus: gnss: \(site.state)/sim/gnss: no NMEA for 3 s; sending"), "\(log)")
        #expect(log.contains("the receiver restarted (its start-up message); configuring it again"), "\(log)")

        // What the hung receiver was sent: the whole plan again, then CFG-RST as pyubx2 reads it
        // (navBbrMask 0: a hot start, resetMode 0: hardware reset by the watchdog).
        let wedged = Self.whileWedged(fake, "ubx").compactMap { $0["identity"] as? String }
        #expect(Array(wedged.prefix(3)) == ["CFG-NAV5", "CFG-RATE", "CFG-RXM"], "\(wedged)")
        #expect(wedged.last == "CFG-RST" && wedged.filter { $0 == "CFG-RST" }.count == 1, "\(wedged)")
        let rst = try #require(fake.messages("CFG-RST").first?["fields"] as? [String: Any])
        #expect(rst["resetMode"] as? Int == 0, "\(rst)")
        let cleared = rst.filter { $0.key != "resetMode" && $0.key != "reserved1" }.compactMap { $0.value as? Int }
        #expect(!cleared.isEmpty && cleared.allSatisfy { $0 == 0 }, "hot start: no battery-backed data cleared: \(rst)")
        // After the restart banner, the plan once more, answered. The fake reports what it reads
        // as it reads it: on a loaded machine the agent's "healed" may be logged first.
        func planAfterRestart() -> [String] {
            let reports = fake.reports
            guard let unwedged = reports.firstIndex(where: { $0["event"] as? String == "unwedged" }) else { return [] }
            return reports[unwedged...].filter { $0["event"] as? String == "ubx" }.prefix(3).compactMap { $0["identity"] as? String }
        }
        try AgentEndToEndTests.waitFor("the plan after the restart", seconds: 10) { planAfterRestart().count == 3 }
        #expect(planAfterRestart() == ["CFG-NAV5", "CFG-RATE", "CFG-RXM"], "\(planAfterRestart())")

        let fixesThen = try Self.fixes(site)
        try AgentEndToEndTests.waitFor("fixes again", seconds: 10) { try Self.fixes(site) > fixesThen + 2 }
        let health = try Self.health(site)
        #expect(health["steps"] as? [String: Int] == ["plan": 1, "reset": 1], "\(health)")
        #expect(health["healed_by"] as? [String: Int] == ["plan": 0, "reset": 1], "\(health)")
        #expect(health["episodes"] as? Int == 1 && health["given_up"] as? Bool == false && health["healing"] as? Bool == false, "\(health)")
        #expect(health["silence_limit_s"] as? Int == 3 && (health["silent_s"] as? Int ?? 99) < 3, "\(health)")
        #expect(agent.process.isRunning)
    }

    /// Two rounds (a hot start, then a full cold start), then one give-up line; the receiver
    /// coming back by itself later ends it.
    @Test func aMediaTekReceiverThatStaysHungIsGivenUpOnAndWelcomedBack() throws {
        let site = try AgentEndToEndTests.site("heal-mediatek", extra: Self.extra(rounds: 2), board: E2E.board("mediatek"))
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let fake = try E2E.startFake(site, ["--family", "mediatek", "--wedge-after", "4", "--wedge-heals-on", "power", "--line-interval", "0.333"])
        defer { fake.stop() }
        try AgentEndToEndTests.waitFor("the give-up", seconds: 60) { agent.log.contains("gave up after 2 rounds of plan resend, receiver reset") }
        let log = agent.log
        #expect(log.contains("(PMTK101 hot start) (step 2 of 2, round 1 of 2)") && log.contains("(PMTK104 full cold start) (step 2 of 2, round 2 of 2)"), "\(log)")
        #expect(log.contains("then run 'locus doctor'"), "\(log)")
        let restarts = Self.whileWedged(fake, "pmtk").compactMap { $0["type"] as? Int }.filter { [101, 103, 104].contains($0) }
        #expect(restarts == [101, 104], "\(restarts)")
        #expect(Self.whileWedged(fake, "pmtk").allSatisfy { $0["checksum_ok"] as? Bool == true })
        let health = try Self.health(site)
        #expect(health["steps"] as? [String: Int] == ["plan": 2, "reset": 2] && health["given_up"] as? Bool == true, "\(health)")

        // Given up, it still reads: the receiver back (power restored by hand) ends the episode.
        kill(fake.process.processIdentifier, SIGUSR2)
        try AgentEndToEndTests.waitFor("the receiver back", seconds: 20) { agent.log.contains("(by itself, after the self-healing gave up)") }
        let back = try Self.health(site)
        #expect(back["given_up"] as? Bool == false && back["healed_by"] as? [String: Int] == ["plan": 0, "reset": 0], "\(back)")
        #expect(agent.process.isRunning)
    }

    /// A generic receiver has no commands: its power line (a board output) is cut for
    /// `power_off`, logged in the event log with cause `heal`, and the fake (freed when the test
    /// sees the line go low, as a module would restart when its supply returns) talks again.
    @Test func aGenericReceiverIsPowerCycledThroughTheBoardsPowerLine() throws {
        let board = "[board]\nname = \"powered\"\n[gnss]\ndevice = \"sim/gnss\"\nbaud = 9600\nreceiver = \"generic-nmea\"\n"
            + "power_line = \"gnss_power\"\npower_off = \"1500ms\"\n[gpio]\nsimulated = true\n"
            + AgentEndToEndTests.boardOutputs + "gnss_power = { line = 9, safe = 1 }\n"
        let site = try AgentEndToEndTests.site("heal-power", extra: Self.extra(rounds: 1), board: board)
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let fake = try E2E.startFake(site, ["--family", "ublox", "--wedge-after", "4", "--wedge-heals-on", "power", "--line-interval", "0.333"])
        defer { fake.stop() }
        let gpio = site.state + "/sim/gpio"
        func line() -> String? {
            (try? String(contentsOfFile: gpio, encoding: .utf8))?.split(separator: "\n").first { $0.hasPrefix("gnss_power ") }.map(String.init)
        }
        try AgentEndToEndTests.waitFor("the receiver powered at start", seconds: 10) { line() == "gnss_power 1" }
        try AgentEndToEndTests.waitFor("the power cut", seconds: 30) { line() == "gnss_power 0" }
        #expect(agent.log.contains("; cutting its power (gpio gnss_power) for 1500ms (step 1 of 1, round 1 of 1)"), "\(agent.log)")
        try AgentEndToEndTests.waitFor("the power back", seconds: 10) { line() == "gnss_power 1" }
        kill(fake.process.processIdentifier, SIGUSR2)
        try AgentEndToEndTests.waitFor("the healing", seconds: 20) { agent.log.contains("healed by the power cycle (round 1)") }
        #expect(agent.log.contains("locus: gpio gnss_power off (radio self-healing)") && agent.log.contains("locus: gpio gnss_power on (radio self-healing)"))
        #expect(!agent.log.contains("gnss_power on (restored"), "a power line is not an action's output: \(agent.log)")
        let health = try Self.health(site)
        #expect(health["steps"] as? [String: Int] == ["power": 1] && health["healed_by"] as? [String: Int] == ["power": 1], "\(health)")

        // The event log has the line's level at start (on, cause "restored") and both moves of
        // the line, cause "heal".
        let export = try locus(["log", "export", "--state", site.state, "--format", "jsonl"])
        let records = export.output.split(separator: "\n").filter { $0.contains("\"gnss_power\"") }
        let moves = records.filter { !$0.contains("\"cause\":\"restored\"") }
        #expect(records.count - moves.count == 1 && records.first.map { $0.contains("\"value\":true") } == true, "\(export.output)")
        #expect(moves.count == 2 && moves.allSatisfy { $0.contains("\"cause\":\"heal\"") }, "\(export.output)")
    }
}
