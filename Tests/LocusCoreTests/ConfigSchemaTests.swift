import Foundation
import Testing
@testable import LocusCore

/// The repository root, found from this file's path (Tests/LocusCoreTests/...).
let repositoryRoot: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/")
}()

func readRepositoryFile(_ relative: String) throws -> [UInt8] {
    let path = repositoryRoot + "/" + relative
    guard let data = FileManager.default.contents(atPath: path) else { throw TestFileError(path: path) }
    return [UInt8](data)
}

struct TestFileError: Error { let path: String }

/// Every diagnostic parsing `text` as a board file gives, as printed; empty when it parses.
func boardErrors(_ text: String) -> [String] {
    do {
        _ = try BoardConfig.parse(Array(text.utf8), file: "board.toml")
        return []
    } catch {
        return error.diagnostics.map { $0.description }
    }
}

@Suite struct BoardFileTests {
    static let boards = ["raspberry-pi-4b", "raspberry-pi-5", "raspberry-pi-zero-2w", "radxa-rock-5b", "sim"]

    @Test(arguments: boards)
    func everyBoardFileIsAccepted(_ name: String) throws {
        let board = try BoardConfig.parse(try readRepositoryFile("Boards/\(name).toml"), file: "\(name).toml")
        #expect(!board.name.isEmpty)
        #expect(board.gnss != nil)
        #expect(board.gpio?.outputs.isEmpty == false)
    }

    @Test func raspberryPi5UsesTheRP1Controller() throws {
        // The Pi 5 header is on the RP1, whose chip number changed between kernels; the label did not.
        let pi5 = try BoardConfig.parse(try readRepositoryFile("Boards/raspberry-pi-5.toml"), file: "pi5")
        let pi4 = try BoardConfig.parse(try readRepositoryFile("Boards/raspberry-pi-4b.toml"), file: "pi4")
        #expect(pi5.gpio?.chip == .label("pinctrl-rp1"))
        #expect(pi4.gpio?.chip == .label("pinctrl-bcm2711"))
        #expect(pi4.gpio?.output(named: "relay2") == BoardConfig.Output(name: "relay2", line: 27, activeLow: true, safe: 0))
        #expect(pi4.gpio?.inputs.first?.bias == .pullDown)
    }

    /// `[bluetooth] scan` picks how an adapter is scanned, `power_on` whether Locus may power it;
    /// a wrong word or a scan mode on a feed is a one-line reason.
    @Test func bluetoothScanModeAndPowerOn() throws {
        let board = { (text: String) in try BoardConfig.parse(Array(("[board]\nname = \"b\"\n[bluetooth]\n" + text).utf8), file: "b.toml") }
        let defaults = try board("hci = 0\n")
        #expect(defaults.scanMode == .auto && defaults.powerOn)
        let kernel = try board("hci = 1\nscan = \"kernel\"\npower_on = false\n")
        #expect(kernel.bluetooth == .hci(1) && kernel.scanMode == .kernel && !kernel.powerOn)
        #expect(try board("hci = 0\nscan = \"raw\"\n").scanMode == .raw)
        #expect(boardErrors("[board]\nname = \"b\"\n[bluetooth]\nhci = 0\nscan = \"kernal\"\n") ==
                ["board.toml:5:8: 'bluetooth.scan' = \"kernal\" is not one of: auto | kernel | raw (did you mean \"kernel\"?)"])
        #expect(boardErrors("[board]\nname = \"b\"\n[bluetooth]\nfeed = \"x\"\nscan = \"raw\"\n") ==
                ["board.toml:5:8: 'bluetooth.scan' applies to an adapter ('hci'), not to a 'feed'"])
        #expect(boardErrors("[board]\nname = \"b\"\n[bluetooth]\nhci = 0\npower_on = 1\n").count == 1)
    }

    @Test func boardErrorsAreLocated() {
        let errors = boardErrors("""
        [board]
        name = "x"
        [gnss]
        device = "/dev/ttyS0"
        baud = 9601
        receiver = "ubolx"
        [gpio]
        chip = "gpiochip0"
        label = "pinctrl"
        [gpio.outputs]
        relay1 = { line = 17, activ_low = true }
        relay2 = { line = 17 }
        """)
        #expect(errors.contains("board.toml:5:8: 'gnss.baud' = 9601 is not a standard UART rate (1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600)"))
        #expect(errors.contains { $0.hasPrefix("board.toml:6:12: 'gnss.receiver' = \"ubolx\" is not one of: ublox | mediatek | generic-nmea (did you mean \"ublox\"?)") })
        #expect(errors.contains { $0.hasPrefix("board.toml:7:1: [gpio] needs exactly one of") })
        #expect(errors.contains("board.toml:11:23: unknown key 'gpio.outputs.relay1.activ_low' (did you mean 'active_low'?)"))
        #expect(errors.contains { $0.contains("'relay2' and 'relay1' both use line 17") })
    }

    @Test func missingBoardTableIsReported() {
        #expect(boardErrors("[gnss]\ndevice = \"/dev/ttyS0\"\n") == ["board.toml:1:1: missing required key 'board'"])
    }
}

@Suite struct SiteFileTests {
    @Test func sampleSiteFileMatchesTheDesignCard() throws {
        let config = try SiteConfig.parse(try readRepositoryFile("Examples/site.toml"), file: "site.toml")
        #expect(config.board == "../Boards/raspberry-pi-4b.toml")
        #expect(config.capacity.conditions == 10000)
        #expect(config.log.segmentSizeBytes == 8 * 1024 * 1024)
        #expect(config.log.retainBytes == 512 * 1024 * 1024)
        #expect(config.log.sync == .everyEvent)
        #expect(config.updates.preset == .automotiveNavigation)
        #expect(config.updates.accuracy == .hundredMeters)
        #expect(config.updates.batchCount == 32 && config.updates.batchAgeMs == 60_000)
        #expect(config.monitors.map { $0.name } == ["gate"])
        let depot = try #require(config.monitors.first?.conditions.first)
        #expect(depot.identifier == "depot" && depot.assuming == .unsatisfied && depot.dwellMs == 5000 && depot.transit)
        guard case .circle(let latitude, let longitude, let radius) = depot.kind else {
            Issue.record("depot is not a circle")
            return
        }
        #expect(latitude == 37.33467 && longitude == -122.00898 && radius == 100)
        let dock = try #require(config.monitors.first?.conditions[1])
        guard case .beacon(let uuid, let major, let minor) = dock.kind else {
            Issue.record("dock is not a beacon")
            return
        }
        #expect(uuid.description == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
        #expect(major == 1 && minor == nil)
        #expect(dock.exitTimeoutMs == 10_000 && dock.proximity == .near)
        #expect(config.actions.count == 2)
        #expect(config.actions[1].identifier == nil && config.actions[1].mode == .pulse && config.actions[1].pulseMs == 500)
    }

    @Test func defaultsApplyWhenSectionsAreOmitted() throws {
        let config = try site("board = \"b.toml\"\n")
        #expect(config.stateDirectory == "/var/lib/locus")
        #expect(config.capacity.events == 256)
        #expect(config.log.sync == .everyEvent)
        #expect(config.fixPrivacy == .full)
        #expect(config.monitors.isEmpty && config.actions.isEmpty)
    }

    @Test func intervalSyncTakesItsInterval() throws {
        let config = try site("board = \"b\"\n[log]\nsync = \"interval\"\nsync_interval = \"250ms\"\n")
        #expect(config.log.sync == .interval(milliseconds: 250))
    }

    @Test func unknownKeysSuggestTheClosestKnownKey() {
        #expect(siteErrors("board = \"b\"\nstate_dri = \"/x\"\n") == ["site.toml:2:1: unknown key 'state_dri' (did you mean 'state_dir'?)"])
        let far = siteErrors("board = \"b\"\n[log]\ncolour = 1\n")
        #expect(far.count == 1 && far[0].hasPrefix("site.toml:3:1: unknown key 'log.colour'; known keys here: segment_size, retain, sync, sync_interval"))
    }

    @Test func conditionMistakesAreAllReported() {
        let errors = siteErrors("""
        board = "b"
        [[monitor.gate.condition]]
        id = "depot"
        circle = { lat = 37.3, lon = -122.0, radius = 0 }
        [[monitor.gate.condition]]
        id = "depot"
        circle = { lat = 37.3, lon = -122.0, radius = 5 }
        [[monitor.gate.condition]]
        id = "bad id!"
        beacon = { uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", major = 70000 }
        [[monitor.gate.condition]]
        id = "both"
        circle = { lat = 1, lon = 1, radius = 1 }
        beacon = { uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0" }
        [[monitor.gate.condition]]
        id = "neither"
        """)
        #expect(errors.contains("site.toml:4:47: 'monitor.gate.condition[1].circle.radius' must be greater than 0 metres"))
        #expect(errors.contains { $0.hasPrefix("site.toml:9:6: 'monitor.gate.condition[3].id' = \"bad id!\"") })
        #expect(errors.contains("site.toml:10:67: 'monitor.gate.condition[3].beacon.major' = 70000 is out of range (0...65535)"))
        #expect(errors.contains("site.toml:11:1: a condition is either a 'circle' or a 'beacon', not both"))
        #expect(errors.contains { $0.hasPrefix("site.toml:15:1: a condition needs 'circle") })
        // Sorted by position, the order a person fixes them in.
        #expect(errors == errors.sorted { lineOf($0) < lineOf($1) || (lineOf($0) == lineOf($1) && $0 < $1) })
    }

    @Test func duplicateConditionIdsInOneMonitorAreRejected() {
        let errors = siteErrors("""
        board = "b"
        [[monitor.gate.condition]]
        id = "a"
        circle = { lat = 1, lon = 1, radius = 1 }
        [[monitor.gate.condition]]
        id = "a"
        circle = { lat = 2, lon = 2, radius = 2 }
        """)
        #expect(errors == ["site.toml:5:1: condition id 'a' appears twice in monitor 'gate' (first at line 2)"])
    }

    @Test func capacityIsEnforced() {
        var text = "board = \"b\"\n[capacity]\nconditions = 2\n"
        for index in 0..<3 { text += "[[monitor.m.condition]]\nid = \"c\(index)\"\ncircle = { lat = 1, lon = 1, radius = 1 }\n" }
        let errors = siteErrors(text)
        #expect(errors.count == 1 && errors[0].contains("3 conditions exceed capacity.conditions = 2"))
    }

    @Test func actionsMustNameKnownConditionsAndOutputs() throws {
        let errors = siteErrors("""
        board = "b"
        [[monitor.gate.condition]]
        id = "depot"
        circle = { lat = 1, lon = 1, radius = 1 }
        [[action]]
        when = "gaet/depot"
        gpio = "relay1"
        [[action]]
        when = "gate/depto"
        gpio = "relay1"
        [[action]]
        when = "gate"
        gpio = "relay1"
        [[action]]
        when = "gate/*"
        gpio = "relay1"
        mode = "level"
        pulse = "1s"
        """)
        #expect(errors.contains("site.toml:6:8: 'action[1].when' names monitor 'gaet', which has no conditions in this file (did you mean 'gate'?)"))
        #expect(errors.contains("site.toml:9:8: 'action[2].when' names condition 'depto', which monitor 'gate' does not have (did you mean 'depot'?)"))
        #expect(errors.contains { $0.hasPrefix("site.toml:12:8: 'action[3].when' = \"gate\" must be") })
        #expect(errors.contains("site.toml:18:9: 'action[4].pulse' only applies with mode = \"pulse\""))

        let config = try site("board = \"b\"\n[[monitor.g.condition]]\nid = \"a\"\ncircle = { lat = 1, lon = 1, radius = 1 }\n[[action]]\nwhen = \"g/a\"\ngpio = \"relya1\"\n")
        let board = try BoardConfig.parse(try readRepositoryFile("Boards/sim.toml"), file: "sim.toml")
        #expect(config.problems(with: board, file: "site.toml").map { $0.description } ==
                ["site.toml:5:1: gpio 'relya1' is not an output of board 'Simulated gateway' (did you mean 'relay1'?)"])
    }

    /// `[updates] motion_input` names a board input; `stationary_window` is at least a second.
    @Test func updatesMotionInputAndStationaryWindow() throws {
        let board = try BoardConfig.parse(try readRepositoryFile("Boards/sim.toml"), file: "sim.toml")
        let good = try site("board = \"b\"\n[updates]\nstationary_window = \"10s\"\nmotion_input = \"motion\"\n")
        #expect(good.updates.stationaryWindowMs == 10_000 && good.updates.motionInput == "motion")
        #expect(good.problems(with: board, file: "site.toml").isEmpty)
        let typo = try site("board = \"b\"\n[updates]\nmotion_input = \"motoin\"\n")
        #expect(typo.problems(with: board, file: "site.toml").map { $0.description } ==
                ["site.toml:3:16: updates.motion_input 'motoin' is not an input of board 'Simulated gateway' (did you mean 'motion'?)"])
        #expect(siteErrors("board = \"b\"\n[updates]\nstationary_window = \"500ms\"\n").count == 1)
    }

    @Test func syntaxErrorsCarryFileLineAndColumn() {
        #expect(siteErrors("board = \"b\"\n[log]\nsync = every-event\n") ==
                ["site.toml:3:8: expected a value, found 'every-event' (strings need quotes: \"every-event\")"])
        #expect(siteErrors("board = \"b\"\n[log]\nsync = \"every-event\n") ==
                ["site.toml:3:8: this string is never closed with '\"' on its line (use \"\"\" for multi-line strings)"])
        #expect(siteErrors("board = \"b\"\nboard = \"c\"\n") == ["site.toml:2:1: duplicate key 'board' (first defined at line 1)"])
        #expect(siteErrors("board = 3\n") == ["site.toml:1:9: 'board' must be a string, not integer"])
        #expect(siteErrors("when = 1979-05-27\n") == ["site.toml:1:8: dates and times are not supported in Locus configuration files"])
    }

    private func lineOf(_ diagnostic: String) -> Int {
        Int(diagnostic.split(separator: ":")[1]) ?? 0
    }
}

@Suite struct QuantityTests {
    @Test func durationsAreExactMilliseconds() {
        #expect(Quantity.durationMs("500ms") == .success(500))
        #expect(Quantity.durationMs("10s") == .success(10_000))
        #expect(Quantity.durationMs("1.5s") == .success(1_500))
        #expect(Quantity.durationMs("0.1s") == .success(100))
        #expect(Quantity.durationMs("5min") == .success(300_000))
        #expect(Quantity.durationMs("2h") == .success(7_200_000))
        #expect(Quantity.durationMs("1d") == .success(86_400_000))
        #expect(Quantity.durationMs("0s") == .success(0))
    }

    @Test func badDurationsSayWhy() {
        #expect(Quantity.durationMs("5m") == .failure(.init(message: "unknown unit 'm'; use ms, s, min, h or d (\"m\" is ambiguous: write \"min\")")))
        #expect(Quantity.durationMs("0.5ms") == .failure(.init(message: "the value is not a whole number of milliseconds")))
        for bad in ["", "s", "10", "-1s", "1..5s", ".5s", "5.s", "1 s", "10S"] {
            if case .success = Quantity.durationMs(bad) { Issue.record("\(bad) accepted") }
        }
        if case .success = Quantity.durationMs("99999999999999999999d") { Issue.record("overflow accepted") }
    }

    @Test func sizesUseBinaryUnits() {
        #expect(Quantity.sizeBytes("8MiB") == .success(8 << 20))
        #expect(Quantity.sizeBytes("512KiB") == .success(512 << 10))
        #expect(Quantity.sizeBytes("1.5GiB") == .success(3 << 29))
        #expect(Quantity.sizeBytes("100B") == .success(100))
        #expect(Quantity.sizeBytes("8MB") == .failure(.init(message: "unknown unit 'MB'; use B, KiB, MiB, GiB or TiB (sizes are binary: write \"MiB\")")))
    }
}

@Suite struct IdentifierTests {
    @Test func beaconUUIDRoundTrips() throws {
        let uuid = try #require(BeaconUUID("e2c56db5-dffb-48d2-b060-d0f5a71096e0"))
        #expect(uuid.description == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
        #expect(uuid.high == 0xE2C5_6DB5_DFFB_48D2 && uuid.low == 0xB060_D0F5_A710_96E0)
        for bad in ["", "E2C56DB5DFFB48D2B060D0F5A71096E0", "E2C56DB5-DFFB-48D2-B060-D0F5A71096E", "E2C56DB5-DFFB-48D2-B060-D0F5A71096E00",
                    "G2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "E2C56DB5-DFFB-48D2-B060_D0F5A71096E0"] {
            #expect(BeaconUUID(bad) == nil, "\(bad)")
        }
    }

    @Test func identifiersAreShortAndASCII() {
        #expect(Identifier.isValid("depot-1_A"))
        #expect(!Identifier.isValid(""))
        #expect(!Identifier.isValid("a b"))
        #expect(!Identifier.isValid("dépôt"))
        #expect(Identifier.isValid(String(repeating: "a", count: 32)))
        #expect(!Identifier.isValid(String(repeating: "a", count: 33)))
    }

    @Test func spellingSuggestsOnlyCloseWords() {
        #expect(Spelling.closest(to: "radisu", among: ["lat", "lon", "radius"]) == "radius")
        #expect(Spelling.closest(to: "Radius", among: ["radius"]) == "radius")
        #expect(Spelling.closest(to: "colour", among: ["segment_size", "retain", "sync"]) == nil)
    }
}
