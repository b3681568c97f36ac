import Foundation
import Testing
@testable import LocusCore

// Byte-exact tests for the HCI commands the BLE scanner sends and the Command Complete return
// parameters it reads.
//
// Where each expected byte string comes from:
// - Layout: Bluetooth Core Specification 5.x, Vol 4 Part E ("HCI Command packet": opcode =
//   OGF << 10 | OCF, little-endian, then the parameter length; the per-command sections for the
//   parameters) and Part A (H4 indicator 0x01 for commands, 0x04 for events).
// - "hcitool": BlueZ tools/hcitool.c `cmd_lescan`, which sends LE Set Scan Parameters with
//   interval = window = 0x0010 (10 ms), Own_Address_Type public, filter policy 0 (`--passive`
//   sets type 0x00), then LE Set Scan Enable 0x01 with Filter_Duplicates 0x01 (`--duplicates`
//   sends 0x00).
// - "derived": built by hand from the spec layout (the extended commands also from Linux's
//   hci_cp_le_set_ext_scan_params / hci_cp_le_scan_phy_params / hci_cp_le_set_ext_scan_enable
//   in include/net/bluetooth/hci.h); no published copy of the exact bytes was found.
// - "btmon": every vector below was also written into a btsnoop file (format 1002, H4) and
//   decoded with BlueZ 5.66 `btmon -r`; its reading is quoted next to each vector, and
//   `btmonAgrees` repeats that check whenever btmon is installed. For the supported-commands
//   bitmap btmon printed "LE Set Extended Scan Parameters (Octet 37 - Bit 5)" and
//   "LE Set Extended Scan Enable (Octet 37 - Bit 6)" for octet 37 = 0x60, which agrees with the
//   spec's Supported Commands table and Linux's use_ext_scan (commands[37] & 0x20, & 0x40).

/// "01 0B 20 ..." into bytes.
private func bytes(_ text: String) -> [UInt8] {
    text.split(separator: " ").map { UInt8($0, radix: 16)! }
}

private func packet(_ command: HCICommand) -> [UInt8] { Array(command.packet) }

/// The expected vector checked for internal consistency first: indicator 0x01, the opcode's OGF
/// and OCF, and the length octet equal to the parameter count.
private func checked(_ text: String, ogf: UInt16, ocf: UInt16, sourceLocation: Testing.SourceLocation = #_sourceLocation) -> [UInt8] {
    let value = bytes(text)
    #expect(value.count >= 4, sourceLocation: sourceLocation)
    #expect(value[0] == 0x01, "H4 command indicator", sourceLocation: sourceLocation)
    let opcode = UInt16(value[1]) | UInt16(value[2]) << 8
    #expect(opcode >> 10 == ogf && opcode & 0x3FF == ocf, "opcode of the expected value itself", sourceLocation: sourceLocation)
    #expect(Int(value[3]) == value.count - 4, "length octet of the expected value itself", sourceLocation: sourceLocation)
    return value
}

private func settings(_ type: HCIScanType, _ interval: UInt16, _ window: UInt16, duplicates: Bool = false) -> ScanSettings {
    try! ScanSettings(scanType: type, intervalUnits: interval, windowUnits: window, filterDuplicates: duplicates)
}

@Suite struct HCICommandTests {
    // MARK: opcodes

    @Test func opcodesPackOGFAndOCF() {
        let expected: [(HCIOpcode, UInt16, UInt16)] = [
            (.readLocalSupportedCommands, 0x04, 0x0002),
            (.leReadLocalSupportedFeatures, 0x08, 0x0003),
            (.leSetScanParameters, 0x08, 0x000B),
            (.leSetScanEnable, 0x08, 0x000C),
            (.leSetExtendedScanParameters, 0x08, 0x0041),
            (.leSetExtendedScanEnable, 0x08, 0x0042),
            (.leSetAdvertisingParameters, 0x08, 0x0006),
            (.leSetAdvertisingData, 0x08, 0x0008),
            (.leSetAdvertisingEnable, 0x08, 0x000A),
            (.leSetExtendedAdvertisingParameters, 0x08, 0x0036),
            (.leSetExtendedAdvertisingData, 0x08, 0x0037),
            (.leSetExtendedAdvertisingEnable, 0x08, 0x0039),
        ]
        #expect(expected.count == HCIOpcode.allCases.count)
        for (opcode, ogf, ocf) in expected {
            #expect(opcode.ogf == ogf && opcode.ocf == ocf, "\(opcode)")
            #expect(opcode.rawValue == ogf << 10 | ocf, "\(opcode)")
        }
    }

    // MARK: legacy commands

    @Test func setScanParametersPassive10ms() {
        // hcitool lescan --passive; btmon: "Type: Passive (0x00) / Interval: 10.000 msec (0x0010) /
        // Window: 10.000 msec (0x0010) / Own address type: Public (0x00) / Filter policy: Accept all".
        let expected = checked("01 0B 20 07 00 10 00 10 00 00 00", ogf: 0x08, ocf: 0x000B)
        let command = HCICommand.leSetScanParameters(settings(.passive, 0x0010, 0x0010))
        #expect(packet(command) == expected)
        #expect(command.parameterCount == 7)
        #expect(command.ogf == 0x08 && command.ocf == 0x000B)
    }

    @Test func setScanParametersActiveBalanced() {
        // Derived; btmon: "Type: Active (0x01) / Interval: 300.000 msec (0x01e0) / Window: 30.000 msec (0x0030)".
        let expected = checked("01 0B 20 07 01 E0 01 30 00 00 00", ogf: 0x08, ocf: 0x000B)
        #expect(packet(.leSetScanParameters(ScanSettings(dutyCycle: .balanced, scanType: .active))) == expected)
    }

    @Test func setScanParametersCarriesAddressTypeAndPolicy() throws {
        // Derived: octets 6 and 7 are Own_Address_Type and Scanning_Filter_Policy.
        let value = try ScanSettings(scanType: .passive, intervalUnits: 0x4000, windowUnits: 0x0004,
                                     ownAddressType: .random, filterPolicy: .extendedFiltered)
        #expect(packet(.leSetScanParameters(value)) == checked("01 0B 20 07 00 00 40 04 00 01 03", ogf: 0x08, ocf: 0x000B))
    }

    @Test func setScanEnable() {
        // hcitool lescan (default); btmon: "Scanning: Enabled (0x01) / Filter duplicates: Enabled (0x01)".
        #expect(packet(.leSetScanEnable(true, filterDuplicates: true)) == checked("01 0C 20 02 01 01", ogf: 0x08, ocf: 0x000C))
        // hcitool lescan --duplicates; btmon: "Enabled (0x01) / Filter duplicates: Disabled (0x00)".
        #expect(packet(.leSetScanEnable(true, filterDuplicates: false)) == checked("01 0C 20 02 01 00", ogf: 0x08, ocf: 0x000C))
        // hcitool's disable at the end of lescan (its filter_dup argument aside); btmon: "Scanning: Disabled (0x00)".
        #expect(packet(.leSetScanEnable(false, filterDuplicates: false)) == checked("01 0C 20 02 00 00", ogf: 0x08, ocf: 0x000C))
    }

    // MARK: extended commands (derived from the spec and Linux's structs; decoded by btmon)

    @Test func setExtendedScanParameters() {
        // btmon: "Own address type: Public (0x00) / Filter policy: Accept all advertisement (0x00) /
        // PHYs: 0x01 / Entry 0: LE 1M / Type: Passive (0x00) / Interval: 30.000 msec (0x0030) /
        // Window: 30.000 msec (0x0030)".
        let continuous = checked("01 41 20 08 00 00 01 00 30 00 30 00", ogf: 0x08, ocf: 0x0041)
        #expect(packet(.leSetExtendedScanParameters(ScanSettings(dutyCycle: .continuous))) == continuous)
        // btmon: "Type: Active (0x01) / Interval: 1280.000 msec (0x0800) / Window: 30.000 msec (0x0030)".
        let lowPowerActive = checked("01 41 20 08 00 00 01 01 00 08 30 00", ogf: 0x08, ocf: 0x0041)
        #expect(packet(.leSetExtendedScanParameters(ScanSettings(dutyCycle: .lowPower, scanType: .active))) == lowPowerActive)
    }

    @Test func setExtendedScanEnable() {
        // btmon: "Extended scan: Enabled (0x01) / Filter duplicates: Disabled (0x00) / Duration: 0 msec / Period: 0.00 sec".
        #expect(packet(.leSetExtendedScanEnable(true, filterDuplicates: false)) == checked("01 42 20 06 01 00 00 00 00 00", ogf: 0x08, ocf: 0x0042))
        // btmon: "Extended scan: Disabled (0x00) / Filter duplicates: Disabled (0x00)".
        #expect(packet(.leSetExtendedScanEnable(false, filterDuplicates: false)) == checked("01 42 20 06 00 00 00 00 00 00", ogf: 0x08, ocf: 0x0042))
        // Little-endian Duration and Period; btmon: "Filter duplicates: Enabled (0x01) /
        // Duration: 10000 msec (0x03e8) / Period: 20.48 sec (0x0010)".
        #expect(packet(.leSetExtendedScanEnable(true, filterDuplicates: true, durationUnits: 0x03E8, periodUnits: 0x0010))
                == checked("01 42 20 06 01 01 E8 03 10 00", ogf: 0x08, ocf: 0x0042))
    }

    @Test func capabilityQueriesHaveNoParameters() {
        // btmon: "Read Local Supported Commands (0x04|0x0002) plen 0", "LE Read Local Supported Features (0x08|0x0003) plen 0".
        #expect(packet(.readLocalSupportedCommands()) == checked("01 02 10 00", ogf: 0x04, ocf: 0x0002))
        #expect(packet(.leReadLocalSupportedFeatures()) == checked("01 03 20 00", ogf: 0x08, ocf: 0x0003))
    }

    @Test func parametersMatchThePacketTail() {
        let command = HCICommand.leSetExtendedScanParameters(ScanSettings(dutyCycle: .balanced))
        let parameters = command.withUnsafeParameters { Array($0) }
        #expect(parameters == Array(packet(command).dropFirst(4)))
        #expect(parameters.count <= HCICommand.maximumParameterCount)
        #expect((0..<command.parameterCount).map { command.parameter($0) } == parameters)
        #expect(command.description == "LE Set Extended Scan Parameters (0x2041) 00 00 01 00 E0 01 30 00")
    }

    // MARK: sequences

    @Test func legacySetupAndTeardown() {
        let steps = HCIScanSequence.setup(ScanSettings(dutyCycle: .continuous), controller: .legacy)
        #expect(steps.map { packet($0.command) } == [
            bytes("01 0C 20 02 00 00"),                     // disable whatever a predecessor left running
            bytes("01 0B 20 07 00 30 00 30 00 00 00"),      // passive, 30 ms / 30 ms
            bytes("01 0C 20 02 01 00"),                     // enable, every advertisement reported
        ])
        #expect(steps.map(\.toleratesFailure) == [true, false, false])
        let teardown = HCIScanSequence.teardown(controller: .legacy)
        #expect(teardown.map { packet($0.command) } == [bytes("01 0C 20 02 00 00")])
        #expect(teardown.map(\.toleratesFailure) == [false])
    }

    @Test func extendedSetupAndTeardown() {
        let steps = HCIScanSequence.setup(ScanSettings(dutyCycle: .lowPower, filterDuplicates: true), controller: .extended)
        #expect(steps.map { packet($0.command) } == [
            bytes("01 42 20 06 00 00 00 00 00 00"),
            bytes("01 41 20 08 00 00 01 00 00 08 30 00"),   // passive, 1280 ms / 30 ms on LE 1M
            bytes("01 42 20 06 01 01 00 00 00 00"),         // enable with duplicate filtering, until disabled
        ])
        #expect(steps.map(\.toleratesFailure) == [true, false, false])
        #expect(HCIScanSequence.teardown(controller: .extended).map { packet($0.command) } == [bytes("01 42 20 06 00 00 00 00 00 00")])
    }

    // MARK: settings

    @Test func invalidSettingsAreRejected() {
        #expect(throws: ScanSettingsError.windowLongerThanInterval(windowUnits: 0x20, intervalUnits: 0x10)) {
            try ScanSettings(scanType: .passive, intervalUnits: 0x10, windowUnits: 0x20)
        }
        #expect(throws: ScanSettingsError.intervalOutOfRange(units: 3)) {
            try ScanSettings(scanType: .passive, intervalUnits: 3, windowUnits: 3)
        }
        #expect(throws: ScanSettingsError.intervalOutOfRange(units: 0x4001)) {
            try ScanSettings(scanType: .passive, intervalUnits: 0x4001, windowUnits: 0x10)
        }
        #expect(throws: ScanSettingsError.windowOutOfRange(units: 0)) {
            try ScanSettings(scanType: .passive, intervalUnits: 0x10, windowUnits: 0)
        }
        #expect(throws: ScanSettingsError.intervalOutOfRange(units: 0)) {
            try ScanSettings(scanType: .active, intervalMs: -5, windowMs: 10)
        }
        #expect(throws: ScanSettingsError.intervalOutOfRange(units: 0xFFFF)) {
            try ScanSettings(scanType: .active, intervalMs: Int.max, windowMs: 10)
        }
        #expect(throws: ScanSettingsError.windowLongerThanInterval(windowUnits: 480, intervalUnits: 48)) {
            try ScanSettings(scanType: .passive, intervalMs: 30, windowMs: 300)
        }
        // The boundaries themselves are accepted.
        #expect((try? ScanSettings(scanType: .passive, intervalUnits: 0x0004, windowUnits: 0x0004)) != nil)
        #expect((try? ScanSettings(scanType: .passive, intervalUnits: 0x4000, windowUnits: 0x4000)) != nil)
    }

    @Test func errorsSayMilliseconds() {
        #expect(ScanSettingsError.windowLongerThanInterval(windowUnits: 0x20, intervalUnits: 0x10).description
                == "scan window 20 ms is longer than the interval 10 ms")
        #expect(ScanSettingsError.intervalOutOfRange(units: 5).description == "scan interval 3.125 ms is outside 2.5 ms to 10240 ms")
    }

    @Test func millisecondsRoundToTheNearestUnit() throws {
        let exact = try ScanSettings(scanType: .passive, intervalMs: 10, windowMs: 10)
        #expect(exact.intervalUnits == 16 && exact.windowUnits == 16)
        let rounded = try ScanSettings(scanType: .passive, intervalMs: 1001, windowMs: 3)
        #expect(rounded.intervalUnits == 1602)   // 1001 ms / 0.625 ms = 1601.6
        #expect(rounded.windowUnits == 5)        // 4.8
        #expect(rounded.intervalMicroseconds == 1_001_250)
    }

    @Test func dutyCycleTiers() {
        // window/interval in 0.625 ms units and in ms: 30/30, 30/300, 30/1280.
        let expected: [(ScanDutyCycle, UInt16, UInt16, Int, Int)] = [
            (.continuous, 48, 48, 30_000, 30_000),
            (.balanced, 480, 48, 300_000, 30_000),
            (.lowPower, 2048, 48, 1_280_000, 30_000),
        ]
        #expect(expected.count == ScanDutyCycle.allCases.count)
        for (tier, interval, window, intervalMicroseconds, windowMicroseconds) in expected {
            let value = ScanSettings(dutyCycle: tier)
            #expect(value.intervalUnits == interval && value.windowUnits == window, "\(tier)")
            #expect(value.intervalMicroseconds == intervalMicroseconds && value.windowMicroseconds == windowMicroseconds, "\(tier)")
            #expect(value.scanType == .passive && !value.filterDuplicates && value.ownAddressType == .public, "\(tier)")
            #expect(value.filterPolicy == .basicUnfiltered, "\(tier)")
        }
        #expect(ScanSettings(dutyCycle: .continuous).listeningFraction == 1.0)
        #expect(ScanSettings(dutyCycle: .balanced).listeningFraction == 0.1)
        #expect(abs(ScanSettings(dutyCycle: .lowPower).listeningFraction - 0.0234375) < 1e-12)
    }

    // MARK: return parameters

    /// Status, then 64 octets with octet 37 = `octet37`.
    private func supportedCommandsReply(status: UInt8 = 0, octet37: UInt8) -> [UInt8] {
        var reply = [status] + [UInt8](repeating: 0xFF, count: 64)
        reply[1 + 37] = octet37
        return reply
    }

    @Test func supportedCommandsBitmap() {
        // Octet 37: bit 5 LE Set Extended Scan Parameters, bit 6 LE Set Extended Scan Enable
        // (btmon, Core spec, Linux use_ext_scan: see the top of this file).
        func kind(_ reply: [UInt8]) -> HCIControllerKind? {
            reply.withUnsafeBytes { HCISupportedCommands(returnParameters: $0)?.controllerKind }
        }
        #expect(kind(supportedCommandsReply(octet37: 0x60)) == .extended)
        #expect(kind(supportedCommandsReply(octet37: 0xFF)) == .extended)
        #expect(kind(supportedCommandsReply(octet37: 0x20)) == .legacy)   // parameters without enable
        #expect(kind(supportedCommandsReply(octet37: 0x40)) == .legacy)   // enable without parameters
        #expect(kind(supportedCommandsReply(octet37: 0x9F)) == .legacy)   // every other bit of octet 37
        #expect(kind(supportedCommandsReply(status: 0x01, octet37: 0x60)) == nil)
        #expect(kind(Array(supportedCommandsReply(octet37: 0x60).prefix(64))) == nil)   // one octet short
        #expect(HCISupportedCommands.extendedScanParameters == (octet: 37, bit: 5))
        #expect(HCISupportedCommands.extendedScanEnable == (octet: 37, bit: 6))
    }

    @Test func leFeatures() {
        // Bit 12 LE Extended Advertising = octet 1 bit 4; btmon printed "LE Extended Advertising" for 00 10 00...
        let reply = bytes("00 00 10 00 00 00 00 00 00")
        reply.withUnsafeBytes { raw in
            let features = HCILEFeatures(returnParameters: raw)
            #expect(features?.mask == 0x1000)
            #expect(features?.supportsExtendedAdvertising == true)
        }
        bytes("00 FF EF FF FF FF FF FF FF").withUnsafeBytes { #expect(HCILEFeatures(returnParameters: $0)?.supportsExtendedAdvertising == false) }
        bytes("0C 00 10 00 00 00 00 00 00").withUnsafeBytes { #expect(HCILEFeatures(returnParameters: $0) == nil) }
    }

    @Test func commandCompleteEvent() {
        // LE Set Scan Parameters answered with Command Disallowed: 0E len ncmd opcode status.
        let event = bytes("0E 04 01 0B 20 0C")
        event.withUnsafeBytes { raw in
            let complete = HCICommandComplete(event: raw)
            #expect(complete?.opcode == HCIOpcode.leSetScanParameters.rawValue)
            #expect(complete?.numberOfCommandPackets == 1)
            #expect(complete?.returnParameters == 5..<6)
            if let complete {
                #expect(hciReturnStatus(UnsafeRawBufferPointer(rebasing: raw[complete.returnParameters])) == .commandDisallowed)
            }
        }
        bytes("0E 05 01 0B 20 0C").withUnsafeBytes { #expect(HCICommandComplete(event: $0) == nil) }   // length octet wrong
        bytes("0F 04 0C 01 0B 20").withUnsafeBytes { #expect(HCICommandComplete(event: $0) == nil) }   // Command Status
        bytes("0E 02 01 0B").withUnsafeBytes { #expect(HCICommandComplete(event: $0) == nil) }         // truncated
        [UInt8]().withUnsafeBytes { #expect(hciReturnStatus($0) == nil) }
    }

    @Test func statusNames() {
        #expect(HCIStatus.commandDisallowed.description == "0x0C (Command Disallowed)")
        #expect(HCIStatus.unknownCommand.description == "0x01 (Unknown HCI Command)")
        #expect(HCIStatus(code: 0x45).description == "0x45")
        #expect(HCIStatus.success.isSuccess && !HCIStatus.invalidParameters.isSuccess)
    }

    // MARK: btmon as an independent decoder

    static let btmon = "/usr/bin/btmon"

    /// Writes the encoders' output (not the literal vectors) into a btsnoop file and has BlueZ's
    /// btmon decode it. Runs where btmon is installed (Debian package `bluez`).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: HCICommandTests.btmon)))
    func btmonAgrees() throws {
        let commands: [HCICommand] = [
            .leSetScanParameters(ScanSettings(dutyCycle: .balanced, scanType: .active)),
            .leSetScanEnable(true, filterDuplicates: true),
            .leSetExtendedScanParameters(ScanSettings(dutyCycle: .lowPower)),
            .leSetExtendedScanEnable(true, filterDuplicates: false),
            .leSetExtendedScanEnable(false, filterDuplicates: false),
            .readLocalSupportedCommands(),
        ]
        let text = try btmonDecode(commands.map(packet))
        let expected = [
            "LE Set Scan Parameters (0x08|0x000b) plen 7", "Type: Active (0x01)", "Interval: 300.000 msec (0x01e0)",
            "Window: 30.000 msec (0x0030)", "Own address type: Public (0x00)",
            "LE Set Scan Enable (0x08|0x000c) plen 2", "Scanning: Enabled (0x01)", "Filter duplicates: Enabled (0x01)",
            "(0x08|0x0041) plen 8", "PHYs: 0x01", "Entry 0: LE 1M", "Type: Passive (0x00)",
            "Interval: 1280.000 msec (0x0800)",
            "(0x08|0x0042) plen 6", "Extended scan: Enabled (0x01)", "Extended scan: Disabled (0x00)",
            "Duration: 0 msec (0x0000)", "Period: 0.00 sec (0x0000)",
            "Read Local Supported Commands (0x04|0x0002) plen 0",
        ]
        for line in expected { #expect(text.contains(line), "btmon did not print \"\(line)\":\n\(text)") }
        #expect(!text.lowercased().contains("invalid"), "\(text)")
    }

    /// btsnoop version 1, datalink 1002 (HCI UART, H4 indicator included); record flags 2 =
    /// command sent by the host.
    func btmonDecode(_ packets: [[UInt8]]) throws -> String {
        func bigEndian32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) } }
        var file = Array("btsnoop".utf8) + [0] + bigEndian32(1) + bigEndian32(1002)
        for (index, bytes) in packets.enumerated() {
            file += bigEndian32(bytes.count) + bigEndian32(bytes.count) + bigEndian32(2) + bigEndian32(0)
            file += [0x00, 0xDC, 0xDD, 0xB3, 0x0F, 0x2F, 0x80, UInt8(index)]
            file += bytes
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("locus-hci-\(getpid())-\(UUID().uuidString).btsnoop").path
        try Data(file).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: HCICommandTests.btmon)
        process.arguments = ["-r", path]
        process.environment = ["TERM": "dumb"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
