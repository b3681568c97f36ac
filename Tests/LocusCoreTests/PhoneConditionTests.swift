import AllocCounter
import Foundation
import LocusCore
import TestSupport
import Testing

/// Phone conditions: the phones file, the site file's `phone = "NAME"`, the engine deciding a
/// phone as it decides a beacon, the log, and resolution from an advertising report.
@Suite struct PhoneConditionTests {
    static let aliceKey = "ec0234a357c8ad05341010a60a397d9b"
    static let t0 = UTCTime(seconds: 1_710_496_800)

    static func keys(_ text: String) throws -> PhoneKeys { try PhoneKeys.parse(Array(text.utf8), file: "phones") }

    static func errors(_ text: String) -> [String] {
        do {
            _ = try keys(text)
            return []
        } catch let error as ConfigError {
            return error.diagnostics.map(\.description)
        } catch {
            return ["\(error)"]
        }
    }

    /// An LE Advertising Report event from `address` (random), without its H4 type byte.
    static func event(from address: UInt64, rssi: Int8) -> [UInt8] {
        var event: [UInt8] = [0x3E, 0x17, 0x02, 0x01, 0x00, 0x01]
        for index in 0..<6 { event.append(UInt8(truncatingIfNeeded: address >> (8 * UInt64(index)))) }
        return event + [0x0B, 0x02, 0x01, 0x1A, 0x07, 0xFF, 0x4C, 0x00, 0x10, 0x02, 0x0B, 0x00, UInt8(bitPattern: rssi)]
    }

    @Test func thePhonesFileIsReadWithItsErrorsWhereTheyAreAndNoKeyQuoted() throws {
        let keys = try Self.keys("[alice]\nirk = \"\(Self.aliceKey)\"\npower = -62\n\n[bob-watch]\nirk = \"MtP+wigLPlXs1x693sRDAQ==\"\n")
        #expect(keys.phones.map(\.name.description) == ["alice", "bob-watch"])
        #expect(keys.phones.map(\.measuredPowerDBm) == [-62, PhoneKeys.defaultMeasuredPowerDBm])
        #expect(keys.phones[0].key == IdentityResolvingKey(text: Self.aliceKey))
        #expect(keys.number(of: "bob-watch") == 1 && keys.number(of: "carol") == nil)
        let problems = Self.errors("[alice]\nirk = \"ec0234a357c8ad05341010a60a397d9\"\n[bob]\npower = -200\nirk = \"\(Self.aliceKey)\"\n[\"b c\"]\nirk = \"x\"\n")
        #expect(problems.contains("phones:2:7: 'alice.irk' is not an identity resolving key (32 hexadecimal digits, or the keychain's 24-character base64)"),
                "\(problems)")
        #expect(problems.contains { $0.hasPrefix("phones:4:9: 'bob.power'") }, "\(problems)")
        #expect(problems.contains { $0.hasPrefix("phones:6:") && $0.contains("a phone's name must be") }, "\(problems)")
        #expect(!problems.joined().contains("ec0234a357c8ad05341010a60a397d9"), "a key is never quoted")
        #expect(Self.errors("[alice]\npower = -60\n").contains { $0.contains("'alice.irk'") })
    }

    @Test func thePhonesFileMustBeTheAgentsOrRootsAndUnreadableByOthers() {
        #expect(PhoneKeys.permissionProblem(mode: 0o600, owner: 0, agentUser: 999) == nil)
        #expect(PhoneKeys.permissionProblem(mode: 0o640, owner: 999, agentUser: 999) == nil)
        #expect(PhoneKeys.permissionProblem(mode: 0o644, owner: 0, agentUser: 999) == "may be read by anyone (mode 0644; chmod 600 or 640)")
        #expect(PhoneKeys.permissionProblem(mode: 0o660, owner: 0, agentUser: 999)?.hasPrefix("may be changed by others (mode 0660") == true)
        #expect(PhoneKeys.permissionProblem(mode: 0o600, owner: 1000, agentUser: 999) == "is owned by uid 1000, neither root nor the agent's user")
    }

    @Test func theSiteFileNamesAPhoneAndItsChecksSayWhatIsWrong() throws {
        let text = """
            board = "b.toml"
            [phones]
            keys = "phones"
            [[monitor.home.condition]]
            id = "alice"
            phone = "alice"
            exit_timeout = "10s"
            proximity = "near"
            [[monitor.home.condition]]
            id = "bob"
            phone = "bobb"
            """
        let site = try SiteConfig.parse(Array(text.utf8), file: "site.toml")
        let conditions = site.monitors[0].conditions
        #expect(conditions.map(\.kind.phoneName) == ["alice", "bobb"])
        #expect(conditions[0].exitTimeoutMs == 10_000 && conditions[0].proximity == .near)
        let keys = try Self.keys("[alice]\nirk = \"\(Self.aliceKey)\"\n[bob]\nirk = \"\(Self.aliceKey)\"\n")
        let problems = site.phoneProblems(keys, keysPath: "/etc/locus/phones", file: "site.toml").map(\.description)
        #expect(problems == ["site.toml:9:1: phone 'bobb' is not in the phones file /etc/locus/phones (did you mean 'bob'?)"], "\(problems)")
        #expect(site.phoneProblems(nil, keysPath: "", file: "site.toml").count == 2)
        for (bad, expected) in [("phone = \"alice\"\ncircle = { lat = 1, lon = 2, radius = 3 }", "not several"),
                                ("phone = \"alice\"\ndwell = \"5s\"", "applies to circle conditions, but this one is a phone"),
                                ("phone = \"a b\"", "a phone's name must be")] {
            do {
                _ = try SiteConfig.parse(Array("board = \"b.toml\"\n[[monitor.m.condition]]\nid = \"c\"\n\(bad)\n".utf8), file: "s.toml")
                Issue.record("\(bad) was taken")
            } catch {
                #expect(error.description.contains(expected), "\(error)")
            }
        }
    }

    @Test func theEngineDecidesAPhoneAsABeaconAndGivesItsConditionBack() throws {
        let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: 8, events: 16, phones: 2))
        let home = FixedName("home")!, alice = FixedName("alice")!
        var settings = ConditionSettings()
        settings.exitTimeoutMs = 5_000
        #expect(engine.add(monitor: home, identifier: alice, condition: .phone(PhoneCondition(name: alice)), settings: settings, now: Self.t0) == .added)
        #expect(engine.record(monitor: home, identifier: alice)?.condition == .phone(PhoneCondition(name: alice)))
        let number = try #require(engine.phoneNumber(alice))
        #expect(engine.phoneName(number: number) == alice)
        // Two more names fill the capacity of two: the third is refused.
        #expect(engine.add(monitor: home, identifier: FixedName("b")!, condition: .phone(PhoneCondition(name: FixedName("bob")!)), now: Self.t0) == .added)
        #expect(engine.add(monitor: home, identifier: FixedName("c")!, condition: .phone(PhoneCondition(name: FixedName("carol")!)), now: Self.t0) == .limitExceeded)
        _ = drain(engine)
        engine.observe(Sighting(identity: PhoneCondition.identity(number: number), rssi: -60, measuredPower: -62,
                                address: BLEAddress(value: 0x70_8194_0D_FBAA), time: UTCTime(seconds: Self.t0.seconds + 1)))
        engine.tick(now: UTCTime(seconds: Self.t0.seconds + 1))
        let seen = drain(engine)
        #expect(seen.map { "\($0.identifier) \($0.state)" } == ["alice satisfied"])
        #expect(seen.first?.refinement == nil, "a phone condition names one phone: no refinement")
        engine.tick(now: UTCTime(seconds: Self.t0.seconds + 7))
        #expect(drain(engine).map { "\($0.identifier) \($0.state)" }.contains("alice unsatisfied"))
    }

    @Test func aPhoneConditionSurvivesTheLog() {
        let entry = LogPayload.ConditionEntry(monitor: FixedName("home")!, identifier: FixedName("a")!,
                                              condition: .phone(PhoneCondition(name: FixedName("alice-iphone")!)),
                                              settings: ConditionSettings(), assuming: .unknown, fromSiteFile: true)
        #expect(throughTheLog(entry) == entry)
        var line = JSONWriter(capacity: 256)
        ConditionJSON.write(entry.condition, into: &line)
        #expect(String(decoding: line.bytes, as: UTF8.self) == "{\"phone\":\"alice-iphone\"}")
    }

    @Test func aReportFromAPhonesAddressBecomesASightingOfItsIdentityWithoutAllocating() throws {
        let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: 4, events: 4))
        _ = engine.phoneNumber(FixedName("earlier")!, create: true)
        let keys = try Self.keys("[alice]\nirk = \"\(Self.aliceKey)\"\npower = -62\n")
        let phones = PhoneResolution(keys: keys, engine: engine)
        var found: [Sighting] = []
        found.reserveCapacity(4)
        // The specification's address of the key, then one it does not resolve, then the first again.
        let events = [0x70_8194_0D_FBAA, 0x70_8194_0D_FBAB, 0x70_8194_0D_FBAA].map { Self.event(from: $0, rssi: -58) }
        let allocated = allocations {
            for index in 0..<3 {
                events[index].withUnsafeBytes { raw in
                    _ = HCIEvents.forEachReport(in: raw) { report in
                        if let sighting = phones.sighting(report, time: Self.t0) { found.append(sighting) }
                    }
                }
            }
        }
        #expect(allocated == 0)
        #expect(found.count == 2)
        #expect(found.first?.identity == PhoneCondition.identity(number: 1), "alice got the engine's next number")
        #expect(found.first?.measuredPower == -62 && found.first?.rssi == -58)
        #expect(phones.name(engineNumber: 1) == FixedName("alice") && phones.name(engineNumber: 0) == nil)
        #expect(phones.resolver.addressesTried == 2, "the second report of the address came from the cache")
    }
}
