import Foundation
import LocusCore
import LocusMonitor
import Testing

/// Phones behind rotating private addresses, through `locus run` on the simulated board: the
/// phones file's key resolves each address the feed plays, the phone condition holds across a
/// change of address, a stranger's addresses resolve to nothing, and the key never reaches the
/// log or the agent's output.
@Suite(.serialized) struct PhoneAgentTests {
    /// The specification's sample key (Vol 3 Part H, D.7) and one of our own for a phone that
    /// is never heard.
    static let aliceKey = "ec0234a357c8ad05341010a60a397d9b"
    static let bobKey = "00112233445566778899aabbccddeeff"
    static let strangerKey = "0f0e0d0c0b0a09080706050403020100"

    /// A resolvable private address of `key` for `prand` (its top bits set to 0b01 here).
    static func address(_ key: String, prand: UInt32) -> UInt64 {
        let aes = AES128()
        var words = [UInt32](repeating: 0, count: AES128.roundKeyWords)
        words.withUnsafeMutableBufferPointer { aes.expand(IdentityResolvingKey(text: key)!, into: $0) }
        let random = prand & 0x3F_FFFF | 0x40_0000
        let hash = words.withUnsafeBufferPointer { aes.addressHash(prand: random, $0) }
        return UInt64(random) << 24 | UInt64(hash)
    }

    /// An LE Advertising Report (legacy ADV_IND) from a random address, with flags and Apple's
    /// manufacturer data as an iPhone sends them: an HCI event's hex.
    static func report(from address: UInt64, rssi: Int8 = -60) -> String {
        let data: [UInt8] = [0x02, 0x01, 0x1A, 0x07, 0xFF, 0x4C, 0x00, 0x10, 0x02, 0x0B, 0x00]
        var body: [UInt8] = [0x02, 0x01, 0x00, 0x01]
        for index in 0..<6 { body.append(UInt8(truncatingIfNeeded: address >> (8 * UInt64(index)))) }
        body.append(UInt8(data.count))
        body += data
        body.append(UInt8(bitPattern: rssi))
        let event: [UInt8] = [0x04, 0x3E, UInt8(body.count)] + body
        return event.map { String(format: "%02x", $0) }.joined()
    }

    static func site(_ name: String, phonesMode: Int = 0o600) throws -> AgentEndToEndTests.Site {
        let extra = """
            [phones]
            keys = "phones"

            [[monitor.home.condition]]
            id = "alice"
            phone = "alice"
            exit_timeout = "3s"
            """
        let site = try AgentEndToEndTests.site(name, extra: extra)
        let phones = site.directory + "/phones"
        try "[alice]\nirk = \"\(aliceKey)\"\npower = -62\n\n[bob]\nirk = \"\(bobKey)\"\n".write(toFile: phones, atomically: true, encoding: .utf8)
        chmod(phones, mode_t(phonesMode))
        return site
    }

    @Test func aPhoneIsFollowedAcrossItsAddressesAndAStrangerIsNot() throws {
        let site = try Self.site("phone")
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        // Alice from 5 s to 9 s on one address, from 10 s to 14 s on the next; a stranger all along.
        let first = Self.address(Self.aliceKey, prand: 0x12_3456), second = Self.address(Self.aliceKey, prand: 0x2A_BCDE)
        let stranger = Self.address(Self.strangerKey, prand: 0x11_1111)
        var lines: [String] = []
        for second_ in 2...14 {
            let time = AgentEndToEndTests.trackStart + second_
            if second_ >= 5 { lines.append("\(time).200 \(Self.report(from: second_ < 10 ? first : second))") }
            lines.append("\(time).600 \(Self.report(from: stranger, rssi: -70))")
        }
        let track = syntheticTrack(seconds: 30, startLatitude: 45.0, longitude: 7.0, speedMps: 0)
        let feeder = try AgentEndToEndTests.feed(site, nmea: track, hci: lines.joined(separator: "\n") + "\n")
        feeder.waitUntilExit()
        try AgentEndToEndTests.waitFor("alice's departure", seconds: 15) {
            AgentEndToEndTests.events(try AgentEndToEndTests.records(site.state)).contains { $0.name == "home/alice" && $0.state == "unsatisfied" }
        }
        var summary = AgentEndToEndTests.events(try AgentEndToEndTests.records(site.state)).filter { $0.name == "home/alice" }.map(\.state)
        // Unheard since the start for 3 s may come first (as for the beacon in the end-to-end tests).
        if summary.first == "unsatisfied" { summary.removeFirst() }
        #expect(summary == ["satisfied", "unsatisfied"], "one visit across the change of address: \(summary)")
        let export = try locus(["log", "export", "--state", site.state]).output
        #expect(export.contains("\"phone\":\"alice\""))
        for key in [Self.aliceKey, Self.bobKey] {
            #expect(!export.lowercased().contains(key) && !agent.log.lowercased().contains(key), "the key stays in the phones file")
        }
    }

    /// Through the Swift API: a phone of the file is added and read back; a name the file does
    /// not have is refused; after a SIGHUP with a new file, its new phone is taken.
    @Test func phoneConditionsThroughTheLibraryFollowThePhonesFile() async throws {
        let site = try Self.site("phone-api")
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let monitor = try await Monitor("home", stateDirectory: site.state)
        try await monitor.add(LocusMonitor.PhoneCondition(name: "bob", proximity: .near), identifier: "bob")
        let record = try #require(await monitor.record(for: "bob"))
        #expect((record.condition as? LocusMonitor.PhoneCondition) == LocusMonitor.PhoneCondition(name: "bob", proximity: .near))
        do {
            try await monitor.add(LocusMonitor.PhoneCondition(name: "carol"), identifier: "carol")
            Issue.record("a phone the file does not have is refused")
        } catch let error as MonitorError {
            #expect(error.code == "not_found" && error.message.contains("no phone 'carol'"), "\(error)")
        }
        let phones = site.directory + "/phones"
        try "[alice]\nirk = \"\(Self.aliceKey)\"\n[carol]\nirk = \"\(Self.strangerKey)\"\n".write(toFile: phones, atomically: true, encoding: .utf8)
        chmod(phones, 0o600)
        kill(agent.process.processIdentifier, SIGHUP)
        try AgentEndToEndTests.waitFor("the reload", seconds: 10) { agent.log.contains("reloaded:") }
        try await monitor.add(LocusMonitor.PhoneCondition(name: "carol"), identifier: "carol")
        #expect(await monitor.identifiers.contains("carol"))
    }

    @Test func locusMonitorAddsAPhoneConditionAndRefusesANameThatIsNone() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("locus-phone-cli-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: state) }
        let added = try locus(["monitor", "home", "--state", state, "add", "alice", "--phone", "alice"])
        #expect(added.status == 0 && added.output == "added home/alice\n", "\(added.error)")
        #expect(try locus(["monitor", "home", "--state", state, "records"]).output.contains("\"condition\":{\"phone\":\"alice\"}"))
        let bad = try locus(["monitor", "home", "--state", state, "add", "x", "--phone", "a b"])
        #expect(bad.status == 2 && bad.error.contains("--phone takes a phone's name from the site's phones file, not 'a b'"), "\(bad.error)")
    }

    @Test func aPhonesFileOthersMayReadIsRefused() throws {
        let site = try Self.site("phone-mode", phonesMode: 0o644)
        let run = try locus(["check-config", site.sitePath])
        #expect(run.status != 0)
        #expect(run.error.contains("may be read by anyone (mode 0644"), "\(run.error)")
        #expect(!run.error.contains(Self.aliceKey))
    }

    @Test func aConditionNamingNoPhoneOfTheFileIsRefusedWhereItIsWritten() throws {
        let site = try Self.site("phone-name")
        let text = try String(contentsOfFile: site.sitePath, encoding: .utf8).replacingOccurrences(of: "phone = \"alice\"", with: "phone = \"alcie\"")
        try text.write(toFile: site.sitePath, atomically: true, encoding: .utf8)
        let run = try locus(["check-config", site.sitePath])
        #expect(run.status != 0)
        #expect(run.error.contains("phone 'alcie' is not in the phones file") && run.error.contains("did you mean 'alice'?"), "\(run.error)")
    }
}
