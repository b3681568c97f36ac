import Foundation
import Testing
@testable import LocusCore

/// The fleet's messages as the gateway reads them (docs/remote.md): the signature line split off,
/// `[fleet]` and `[command]` read, and a configuration laid over a site file with the site
/// schema's own rules and messages. (The signature itself is checked by mbedTLS against OpenSSL's
/// in RemoteSteeringTests.)
@Suite struct FleetMessageTests {
    static let site = """
        board = "board.toml"
        [uplink]
        broker = "mqtt://127.0.0.1"
        [remote]
        key = "fleet.pub"
        settable = ["monitor", "action"]
        commands = ["pulse"]
        [[monitor.road.condition]]
        id = "fence"
        circle = { lat = 45.0, lon = 7.0, radius = 30.0 }
        [[action]]
        when = "road/fence"
        gpio = "relay1"
        """

    static func split(_ text: String) -> Result<FleetMessage, FleetRefusal> {
        Array(text.utf8).withUnsafeBytes { FleetMessage.split($0) }
    }

    /// The site with `fragment` (a configuration's body) over it: the site, or every diagnostic.
    struct Diagnostics: Error { let lines: [String] }

    static func overlaid(_ fragment: String, settable: [String] = ["monitor", "action"]) -> Result<SiteConfig, Diagnostics> {
        // The fragment first: bare keys after [fleet] would be [fleet]'s.
        let body = fragment + "\n[fleet]\nkind = \"config\"\ngateway = \"gw\"\nversion = 2\n"
        guard case .success(let (header, report)) = FleetMessage.header(Array(body.utf8), name: "fleet configuration") else {
            return .failure(Diagnostics(lines: ["the header does not read"]))
        }
        #expect(header.version == 2 && header.gateway == "gw" && header.kind == .config)
        do throws(ConfigError) {
            return .success(try SiteConfig.parse(Array(site.utf8), file: "site.toml", fleet: SiteConfig.FleetFragment(report: report, settable: settable)))
        } catch {
            return .failure(Diagnostics(lines: error.diagnostics.map { $0.description }))
        }
    }

    @Test func theSignatureLineIsTheLastAndCoversEveryByteBeforeIt() throws {
        let body = "[fleet]\nkind = \"config\"\n"
        let message = body + "# locus-signature: ecdsa-p256-sha256 TUVVQ0lR\n"
        let split = try Self.split(message).get()
        #expect(split.bodyCount == body.utf8.count)
        #expect(String(decoding: Array(message.utf8)[split.signature], as: UTF8.self) == "TUVVQ0lR")
        #expect(throws: FleetRefusal.self) { try Self.split(body + "# locus-signature: ecdsa-p256-sha256 TUVVQ0lR").get() }
        #expect(throws: FleetRefusal.self) { try Self.split(body).get() }
        #expect(throws: FleetRefusal.self) { try Self.split(body + "# locus-signature: ed25519 TUVVQ0lR\n").get() }
        #expect(throws: FleetRefusal.self) { try Self.split("").get() }
        // A signature line in the middle signs nothing: the last line is the one.
        #expect(throws: FleetRefusal.self) { try Self.split("# locus-signature: ecdsa-p256-sha256 TUVV\n" + body).get() }
    }

    @Test func aConfigurationReplacesTheKeysItHasWholeAndLeavesTheRestToTheSiteFile() throws {
        let yard = "[[monitor.yard.condition]]\nid = \"gate\"\ncircle = { lat = 45.5, lon = 7.5, radius = 40.0 }\n"
        let road = "[[monitor.road.condition]]\nid = \"fence\"\ncircle = { lat = 45.1, lon = 7.0, radius = 30.0 }\n"
        let monitors = try Self.overlaid(yard + road).get()
        #expect(monitors.monitors.map { $0.name } == ["yard", "road"])
        #expect(monitors.monitors.last?.conditions.first?.location.line == 4, "the fleet's own lines")
        #expect(monitors.actions.count == 1, "the site's action stays")
        // ... and is checked against the fleet's monitors: one naming a monitor the fleet removed
        // does not check.
        guard case .failure(let orphan) = Self.overlaid(yard) else { Issue.record("an action on a removed monitor was accepted"); return }
        #expect(orphan.lines == ["site.toml:12:8: 'action[1].when' names monitor 'road', which has no conditions in this file"])
        let nothing = try Self.overlaid("").get()
        #expect(nothing.monitors.map { $0.name } == ["road"], "a version with only [fleet] is the site file")
        let empty = try Self.overlaid("monitor = {}\naction = []\n").get()
        #expect(empty.monitors.isEmpty && empty.actions.isEmpty)
    }

    @Test func whatIsNotSettableOrUnknownIsRefusedWithTheSchemasMessage() {
        guard case .failure(let unknownDiagnostics) = Self.overlaid("[monitr.x]\n") else { Issue.record("accepted an unknown key"); return }
        let unknown = unknownDiagnostics.lines
        #expect(unknown == ["fleet configuration:1:2: unknown key 'monitr' (did you mean 'monitor'?)"])
        guard case .failure(let uplinkDiagnostics) = Self.overlaid("[uplink]\nbroker = \"mqtt://x\"\n") else { Issue.record("accepted [uplink]"); return }
        let uplink = uplinkDiagnostics.lines
        #expect(uplink.first?.hasPrefix("fleet configuration:1:2: 'uplink' cannot be set by the fleet on this gateway") == true, "\(uplink)")
        guard case .failure(let privacyDiagnostics) = Self.overlaid("[privacy]\nfixes = \"none\"\n") else { Issue.record("accepted [privacy]"); return }
        let privacy = privacyDiagnostics.lines
        #expect(privacy.first?.contains("it may set only monitor, action ([remote] settable)") == true, "\(privacy)")
        guard case .failure(let badDiagnostics) = Self.overlaid("[[monitor.yard.condition]]\nid = \"gate\"\ncircle = { lat = 95.0, lon = 7.5, radius = 40.0 }\n") else {
            Issue.record("accepted a latitude of 95"); return
        }
        let bad = badDiagnostics.lines
        #expect(bad.first?.hasPrefix("fleet configuration:3:") == true, "the fleet's own line: \(bad)")
    }

    @Test func aCommandHasItsIdExpiryAndAction() throws {
        let body = "[fleet]\nkind = \"command\"\ngateway = \"gw\"\nid = \"c-1\"\nexpires = 1800000000\n[command]\naction = \"pulse\"\noutput = \"relay1\"\nduration = \"500ms\"\n"
        let (header, _) = try FleetMessage.header(Array(body.utf8), name: "fleet command").get()
        #expect(header.id == "c-1" && header.expires == 1_800_000_000)
        #expect(header.command == { var command = FleetCommand(action: .pulse); command.output = "relay1"; command.durationMs = 500; return command }())
        let badID = body.replacingOccurrences(of: "\"c-1\"", with: "\"c 1/\"")
        #expect(throws: FleetRefusal.self) { try FleetMessage.header(Array(badID.utf8), name: "fleet command").get() }
        let unknown = body.replacingOccurrences(of: "\"pulse\"", with: "\"reboot\"")
        do {
            _ = try FleetMessage.header(Array(unknown.utf8), name: "fleet command").get()
            Issue.record("an action no version runs was accepted")
        } catch {
            #expect(error.reason.contains("'command.action'") && error.reason.contains("pulse | set | locate | snapshot | republish"), "\(error.reason)")
        }
    }

    /// Each action's keys, read into the command; the defaults of those that have one.
    @Test func eachActionReadsItsKeys() throws {
        func command(_ keys: String) throws(FleetRefusal) -> FleetCommand {
            let body = "[fleet]\nkind = \"command\"\ngateway = \"gw\"\nid = \"c-1\"\nexpires = 1800000000\n[command]\n\(keys)\n"
            return try FleetMessage.header(Array(body.utf8), name: "fleet command").get().0.command!
        }
        let set = try command("action = \"set\"\noutput = \"relay2\"\nvalue = \"on\"")
        #expect(set.action == .set && set.output == "relay2" && set.value)
        let locate = try command("action = \"locate\"\naccuracy = \"hundredMeters\"")
        #expect(locate.accuracy == .hundredMeters && locate.timeoutMs == 30_000)
        let snapshot = try command("action = \"snapshot\"\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nmajor = 100\nduration = \"2s\"")
        #expect(snapshot.constraint?.major == 100 && snapshot.constraint?.minor == nil && snapshot.durationMs == 2_000)
        let republish = try command("action = \"republish\"\nfrom = 10\nto = 20")
        #expect(republish.from == 10 && republish.to == 20)
        for (keys, complaint) in [("action = \"set\"\noutput = \"relay2\"\nvalue = \"maybe\"", "'command.value'"),
                                  ("action = \"snapshot\"\nuuid = \"nope\"", "is not a UUID"),
                                  ("action = \"snapshot\"\nuuid = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0\"\nminor = 3", "needs a major"),
                                  ("action = \"republish\"\nfrom = 20\nto = 10", "is before 'from'"),
                                  ("action = \"locate\"\ntimeout = \"1h\"", "'command.timeout'")] {
            do {
                _ = try command(keys)
                Issue.record("accepted: \(keys)")
            } catch {
                #expect(error.reason.contains(complaint), "\(keys): \(error.reason)")
            }
        }
    }

    @Test func theRemoteRecordReadsBackAsWritten() {
        var remote = LogPayload.RemoteResult(kind: .command, result: .refused)
        remote.id = Array("c-42".utf8)
        remote.action = Array("pulse".utf8)
        remote.digest = Array(repeating: 0xAB, count: 32)
        remote.reason = Array("expired 3 s before it arrived".utf8)
        remote.detail = Array("{\"from\":1,\"through\":9}".utf8)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: LogPayload.RemoteResult.maximumSize, alignment: 8)
        defer { buffer.deallocate() }
        var writer = ByteWriter(buffer)
        LogPayload.write(remote, &writer)
        var reader = ByteReader(writer.written)
        #expect(LogPayload.readRemote(&reader) == remote)
        #expect(reader.isAtEnd)
    }

    @Test func theRemoteSectionIsChecked() {
        let errors = { (text: String) -> [String] in
            do throws(ConfigError) { _ = try SiteConfig.parse(Array(("board = \"b.toml\"\n" + text).utf8), file: "site.toml"); return [] } catch {
                return error.diagnostics.map { $0.description }
            }
        }
        #expect(errors("[remote]\nkey = \"fleet.pub\"\n") == ["site.toml:2:1: [remote] needs [uplink]: the fleet's configurations and commands come through its broker"])
        #expect(errors("[uplink]\nbroker = \"mqtt://x\"\n[remote]\nkey = \"k\"\nsettable = [\"updates\", \"geocoding\"]\n").isEmpty)
        let uplink = errors("[uplink]\nbroker = \"mqtt://x\"\n[remote]\nkey = \"k\"\nsettable = [\"uplink\"]\n")
        #expect(uplink.first?.contains("'uplink' is the site's own") == true, "\(uplink)")
        let command = errors("[uplink]\nbroker = \"mqtt://x\"\n[remote]\nkey = \"k\"\ncommands = [\"puls\"]\n")
        #expect(command.first?.contains("(did you mean \"pulse\"?)") == true, "\(command)")
    }
}
