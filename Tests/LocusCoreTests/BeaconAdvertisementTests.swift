import Foundation
import Testing
@testable import LocusCore

// The gateway's own iBeacon: its advertising data, the HCI commands that send it (legacy and
// extended) and the mgmt Add/Remove Advertising commands, byte for byte.
//
// Where the expected bytes come from:
// - Layout: Core Specification Vol 4 Part E, LE Set Advertising Parameters / Data / Enable and
//   LE Set Extended Advertising Parameters / Data / Enable; Linux include/net/bluetooth/hci.h
//   (hci_cp_le_set_adv_param, hci_cp_le_set_adv_data with data[HCI_MAX_AD_LENGTH = 31],
//   hci_cp_le_set_ext_adv_params with 3-octet intervals, LE_LEGACY_NONCONN_IND = 0x0010,
//   LE_SET_ADV_DATA_OP_COMPLETE = 0x03, LE_SET_ADV_DATA_NO_FRAG = 0x01, hci_cp_ext_adv_set);
//   mgmt: BlueZ doc/mgmt-protocol.rst "Add Advertising" (Instance, Flags le32, Duration le16,
//   Timeout le16, Adv_Data_Len, Scan_Rsp_Len, data) and "Remove Advertising".
// - iBeacon: BlueZ's btmon decodes Apple manufacturer data as an iBeacon ("Type: iBeacon (2)",
//   UUID, "Version: MAJOR.MINOR", "TX power"); `btmonReadsOurBeacon` has it read our commands.
// - Round trip: the project's own decoder (BeaconDecoder, which reads what real beacons send)
//   gives back the identity and the measured power.

private func bytes(_ text: String) -> [UInt8] { text.split(separator: " ").map { UInt8($0, radix: 16)! } }
private func packet(_ command: HCICommand) -> [UInt8] { Array(command.packet) }
private func packet(_ command: MgmtCommand) -> [UInt8] { command.withUnsafeBytes { Array($0) } }

private let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
/// Major 100, minor 7, measured power -59 dBm (0xC5), every second (1600 units = 0x0640).
private func beacon(intervalUnits: UInt16 = 1600) throws -> BeaconAdvertisement {
    try #require(BeaconAdvertisement(uuid: uuid, major: 100, minor: 7, measuredPower: -59, intervalUnits: intervalUnits))
}

private let iBeaconHex = "1A FF 4C 00 02 15 E2 C5 6D B5 DF FB 48 D2 B0 60 D0 F5 A7 10 96 E0 00 64 00 07 C5"

@Suite struct BeaconAdvertisementTests {
    // MARK: advertising data

    @Test func advertisingDataIsFlagsThenTheIBeacon() throws {
        let advertisement = try beacon()
        #expect(Array(advertisement.advertisingData) == bytes("02 01 06 " + iBeaconHex))
        #expect(advertisement.advertisingData.count == 30, "within a legacy PDU's 31 octets")
        #expect(Array(advertisement.iBeaconStructure) == bytes(iBeaconHex))
        #expect(advertisement.description == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/100/7")
        #expect(advertisement.intervalMilliseconds == 1000)
    }

    /// The project's decoder, the one that reads real beacons, reads ours back.
    @Test func ourDecoderReadsOurBeaconBack() throws {
        for (major, minor, power) in [(UInt16(100), UInt16(7), Int8(-59)), (0, 0, -128), (65535, 65534, 20), (0x1234, 0xABCD, -1)] {
            let advertisement = try #require(BeaconAdvertisement(uuid: uuid, major: major, minor: minor, measuredPower: power))
            for data in [advertisement.advertisingData, advertisement.iBeaconStructure] {
                let decoded = data.withUnsafeBytes { BeaconDecoder.decode($0) }
                #expect(decoded == .iBeacon(uuid: uuid, major: major, minor: minor, measuredPower: power))
                let walk = data.withUnsafeBytes { AdvertisingData.forEachStructure($0) { _, _ in } }
                #expect(walk.error == nil && walk.structures == (data.count == 30 ? 2 : 1), "well-formed AD structures")
            }
        }
    }

    @Test func identityText() throws {
        #expect(BeaconAdvertisement("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/100/7", measuredPower: -59) == (try beacon()))
        let parsed = BeaconAdvertisement("e2c56db5-dffb-48d2-b060-d0f5a71096e0/0/65535")
        #expect(parsed?.minor == 65535 && parsed?.measuredPower == -59 && parsed?.intervalUnits == 1600)
        for bad in ["E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/100", "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/100/7/1",
                    "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/65536/0", "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/-1/0",
                    "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/ 1/0", "E2C56DB5/1/2", "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0//0"] {
            #expect(BeaconAdvertisement(bad) == nil, "\(bad)")
        }
    }

    @Test func intervalRange() throws {
        #expect(BeaconAdvertisement(uuid: uuid, major: 1, minor: 2, intervalUnits: 0x9F) == nil)
        #expect(BeaconAdvertisement(uuid: uuid, major: 1, minor: 2, intervalUnits: 0x4001) == nil)
        #expect(try beacon(intervalUnits: 0xA0).intervalMilliseconds == 100)
        #expect(try beacon(intervalUnits: 0x4000).intervalMilliseconds == 10240)
    }

    // MARK: HCI commands

    @Test func legacyCommands() throws {
        let advertisement = try beacon()
        // Interval min and max 0x0640, ADV_NONCONN_IND, public address, no peer, channels 37-39,
        // no accept list.
        #expect(packet(.leSetAdvertisingParameters(advertisement))
                == bytes("01 06 20 0F 40 06 40 06 03 00 00 00 00 00 00 00 00 07 00"))
        // Length 30, then 31 octets of data: ours and one zero.
        #expect(packet(.leSetAdvertisingData(advertisement.advertisingData))
                == bytes("01 08 20 20 1E 02 01 06 " + iBeaconHex + " 00"))
        #expect(packet(.leSetAdvertisingEnable(true)) == bytes("01 0A 20 01 01"))
        #expect(packet(.leSetAdvertisingEnable(false)) == bytes("01 0A 20 01 00"))
    }

    @Test func extendedCommands() throws {
        let advertisement = try beacon(intervalUnits: 0x4000)
        // Handle 1, properties 0x0010 (legacy ADV_NONCONN_IND), intervals 0x004000 (3 octets
        // each), channels 37-39, public, no peer (7 octets), filter 0, TX power 0x7F (no
        // preference), primary PHY 1M, max skip 0, secondary PHY 1M, SID 0, no notifications.
        #expect(packet(.leSetExtendedAdvertisingParameters(advertisement, handle: 1))
                == bytes("01 36 20 19 01 10 00 00 40 00 00 40 00 07 00 00 00 00 00 00 00 00 00 7F 01 00 01 00 00"))
        // Handle 1, complete, no fragmentation, 30 octets (not padded).
        #expect(packet(.leSetExtendedAdvertisingData(advertisement.advertisingData, handle: 1))
                == bytes("01 37 20 22 01 03 01 1E 02 01 06 " + iBeaconHex))
        // Enable, one set: handle 1, duration 0, no event limit.
        #expect(packet(.leSetExtendedAdvertisingEnable(true, handle: 1)) == bytes("01 39 20 06 01 01 01 00 00 00"))
        #expect(packet(.leSetExtendedAdvertisingEnable(false, handle: 1)) == bytes("01 39 20 06 00 01 01 00 00 00"))
    }

    @Test func theLongestCommandFits() throws {
        let command = HCICommand.leSetExtendedAdvertisingData(try beacon().advertisingData, handle: 1)
        #expect(command.parameterCount <= HCICommand.maximumParameterCount)
        #expect(HCICommand.leSetAdvertisingData(try beacon().advertisingData).parameterCount == 32)
        #expect(command.description.hasPrefix("LE Set Extended Advertising Data (0x2037) 01 03 01 1E 02 01 06 1A FF 4C"))
    }

    @Test func sequencesFollowTheScansKind() throws {
        let advertisement = try beacon()
        let legacy = HCIAdvertisingSequence.setup(advertisement, controller: .legacy)
        #expect(legacy.map { $0.command.opcode } == [.leSetAdvertisingParameters, .leSetAdvertisingData, .leSetAdvertisingEnable])
        #expect(legacy.map { $0.toleratesFailure } == [false, false, false])
        #expect(packet(legacy[2].command) == bytes("01 0A 20 01 01"))
        let extended = HCIAdvertisingSequence.setup(advertisement, controller: .extended)
        #expect(extended.map { $0.command.opcode } == [.leSetExtendedAdvertisingParameters, .leSetExtendedAdvertisingData,
                                                        .leSetExtendedAdvertisingEnable])
        #expect(extended.map { $0.toleratesFailure } == [false, false, false])
        #expect(HCIAdvertisingSequence.teardown(controller: .legacy).map { packet($0.command) } == [bytes("01 0A 20 01 00")])
        #expect(HCIAdvertisingSequence.teardown(controller: .extended).map { packet($0.command) } == [bytes("01 39 20 06 00 01 01 00 00 00")])
        #expect(HCIStatus.unknownAdvertisingIdentifier.description == "0x42 (Unknown Advertising Identifier)")
    }

    /// BlueZ's btmon reads our commands as what they claim to be, and the data as an iBeacon.
    /// btmon 5.66 (monitor/packet.c, print_manufacturer_apple) prints the iBeacon's fields as
    /// little-endian values, while the frame and every beacon send them big-endian (our decoder
    /// reads them so, and the vboard's recorded beacon agrees): so it shows the UUID's 16 octets
    /// reversed and major and minor byte-swapped (100.7 as 25600.1792). That still pins where each
    /// field sits: the UUID right after the type and length octets, major at +16, minor at +18,
    /// the power at +20.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: HCICommandTests.btmon)))
    func btmonReadsOurBeacon() throws {
        let advertisement = try beacon()
        var commands: [[UInt8]] = []
        for controller in [HCIControllerKind.legacy, .extended] {
            commands += HCIAdvertisingSequence.teardown(controller: controller).map { packet($0.command) }
            commands += HCIAdvertisingSequence.setup(advertisement, controller: controller).map { packet($0.command) }
        }
        let text = try HCICommandTests().btmonDecode(commands)
        let expected = [
            "LE Set Advertising Parameters (0x08|0x0006) plen 15", "Min advertising interval: 1000.000 msec (0x0640)",
            "Type: Non connectable undirected - ADV_NONCONN_IND (0x03)", "Own address type: Public (0x00)",
            "Channel map: 37, 38, 39 (0x07)",
            "LE Set Advertising Data (0x08|0x0008) plen 32", "Length: 30",
            "Company: Apple, Inc. (76)", "Type: iBeacon (2)", "UUID: e09610a7-f5d0-60b0-d248-fbdfb56dc5e2",
            "Version: \(UInt16(100).byteSwapped).\(UInt16(7).byteSwapped)", "TX power: -59 dB",
            "Flags: 0x06", "LE General Discoverable Mode", "BR/EDR Not Supported",
            "LE Set Advertise Enable (0x08|0x000a) plen 1", "Advertising: Enabled (0x01)", "Advertising: Disabled (0x00)",
            "(0x08|0x0036) plen 25", "Properties: 0x0010", "Use legacy advertising PDUs: ADV_NONCONN_IND",
            "TX power: Host has no preference (0x7f)", "Primary PHY: LE 1M (0x01)", "Secondary PHY: LE 1M (0x01)",
            "(0x08|0x0037) plen 34", "Operation: Complete extended advertising data (0x03)",
            "Fragment preference: Minimize fragmentation (0x01)", "Data length: 0x1e",
            "(0x08|0x0039) plen 6", "Extended advertising: Enabled (0x01)", "Extended advertising: Disabled (0x00)",
            "Number of sets: 1 (0x01)", "Handle: 0x01", "Duration: 0 ms (0x00)",
        ]
        for line in expected { #expect(text.contains(line), "btmon did not print \"\(line)\":\n\(text)") }
        #expect(!text.lowercased().contains("invalid"), "\(text)")
    }

    // MARK: mgmt

    @Test func mgmtAddAndRemoveAdvertising() throws {
        // Header: opcode 0x003E, index 0, length 38; instance 5, flags 0x00000002 (discoverable:
        // the kernel writes the Flags structure), duration 0, timeout 0, 27 octets of data, no
        // scan response, the iBeacon structure.
        #expect(packet(.addAdvertising(index: 0, instance: 5, try beacon()))
                == bytes("3E 00 00 00 26 00 05 02 00 00 00 00 00 00 00 1B 00 " + iBeaconHex))
        #expect(packet(.removeAdvertising(index: 1, instance: 5)) == bytes("3F 00 01 00 01 00 05"))
        #expect(packet(.readAdvertisingFeatures(index: 0)) == bytes("3D 00 00 00 00 00"))
        #expect(MgmtOpcode.addAdvertising.description == "Add Advertising")
    }

    @Test func mgmtAdvertisingFeaturesAndRemovedEvent() {
        // Supported flags, max data 31, max scan response 31, 5 instances, 2 in use: 1 and 5.
        let reply = bytes("FF 03 00 00 1F 1F 05 02 01 05")
        #expect(reply.withUnsafeBytes { MgmtReplies.maximumAdvertisingInstances($0) } == 5)
        #expect(bytes("FF 03 00 00 1F 1F 05 02 01").withUnsafeBytes { MgmtReplies.maximumAdvertisingInstances($0) } == nil, "one instance short")
        let event = bytes("24 00 00 00 01 00 05")
        guard case .success(.advertisingRemoved(index: 0, instance: 5)) = event.withUnsafeBytes({ MgmtEvents.decode($0) }) else {
            Issue.record("Advertising Removed not decoded")
            return
        }
        guard case .failure(.shortParameters) = bytes("24 00 00 00 00 00").withUnsafeBytes({ MgmtEvents.decode($0) }) else {
            Issue.record("an empty Advertising Removed must be refused")
            return
        }
    }

    // MARK: site file

    private func errors(_ text: String) -> [String] {
        do throws(ConfigError) {
            _ = try SiteConfig.parse(Array(("board = \"b.toml\"\n" + text).utf8), file: "site.toml")
            return []
        } catch {
            return error.diagnostics.map { $0.description }
        }
    }

    @Test func siteBluetoothSection() throws {
        let site = try SiteConfig.parse(Array("""
            board = "b.toml"
            [bluetooth]
            advertise = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/100/7"
            advertise_power = -62
            advertise_interval = "250ms"

            """.utf8), file: "site.toml")
        let advertising = try #require(site.advertising)
        #expect(advertising.beacon == BeaconAdvertisement(uuid: uuid, major: 100, minor: 7, measuredPower: -62, intervalUnits: 400))
        #expect(advertising.location == LocusCore.SourceLocation(line: 3, column: 13))
        let defaults = try SiteConfig.parse(Array("board = \"b.toml\"\n[bluetooth]\nadvertise = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/1/2\"\n".utf8), file: "s")
        #expect(defaults.advertising?.beacon.measuredPower == -59 && defaults.advertising?.beacon.intervalUnits == 1600)
        #expect(try SiteConfig.parse(Array("board = \"b.toml\"\n".utf8), file: "s").advertising == nil)
    }

    @Test func siteBluetoothErrors() {
        #expect(errors("[bluetooth]\nadvertise = \"E2C56DB5/1/2\"\n")
                == ["site.toml:3:13: 'bluetooth.advertise' must be \"UUID/MAJOR/MINOR\" (major and minor 0 to 65535), got \"E2C56DB5/1/2\""])
        #expect(errors("[bluetooth]\nadvertise = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/1/2\"\nadvertise_interval = \"50ms\"\n")
                == ["site.toml:4:22: 'bluetooth.advertise_interval' = \"50ms\" is out of range (100ms...10240ms)"])
        #expect(errors("[bluetooth]\nadvertise = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/1/2\"\nadvertise_power = -200\n").first?
                    .hasPrefix("site.toml:4:19: 'bluetooth.advertise_power'") == true)
        #expect(errors("[bluetooth]\nadvertise_power = -60\n")
                == ["site.toml:2:1: [bluetooth] advertise_power and advertise_interval need 'advertise' (\"UUID/MAJOR/MINOR\")"])
        let typo = errors("[bluetooth]\nadvertise = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/1/2\"\nadvertise_intervall = \"1s\"\n")
        #expect(typo.count == 1 && typo[0].hasPrefix("site.toml:4:1:") && typo[0].contains("did you mean 'advertise_interval'") , "\(typo)")
        let section = errors("[bluetoth]\n")
        #expect(section.first?.contains("bluetooth") == true, "\(section)")
    }

    @Test func siteAdvertisingNeedsAnAdapter() throws {
        let site = try SiteConfig.parse(Array("board = \"b.toml\"\n[bluetooth]\nadvertise = \"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/1/2\"\n".utf8), file: "site.toml")
        func problems(_ board: String) throws -> [String] {
            site.problems(with: try BoardConfig.parse(Array(("[board]\nname = \"b\"\n" + board).utf8), file: "b.toml"), file: "site.toml").map { $0.description }
        }
        #expect(try problems("[bluetooth]\nhci = 0\n").isEmpty)
        #expect(try problems("[bluetooth]\nfeed = \"hci.feed\"\n")
                == ["site.toml:3:13: 'bluetooth.advertise' needs an adapter ([bluetooth] hci): board 'b' has none"])
        #expect(try problems("") == ["site.toml:3:13: 'bluetooth.advertise' needs an adapter ([bluetooth] hci): board 'b' has none"])
    }
}
