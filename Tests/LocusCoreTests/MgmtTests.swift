import Testing
@testable import LocusCore

// Byte-exact tests for the mgmt commands and events and the monitor channel's CTRL_OPEN record.
// Each vector is written here from the kernel's structs (Linux 6.1 include/net/bluetooth/mgmt.h:
// mgmt_hdr, mgmt_ev_cmd_complete, mgmt_ev_device_found, mgmt_ev_adv_monitor_device_found,
// mgmt_adv_pattern; net/bluetooth/hci_sock.c create_monitor_ctrl_open) and bluez
// doc/mgmt-api.txt, all fields little-endian.

private func bytes(_ text: String) -> [UInt8] { text.split(separator: " ").map { UInt8($0, radix: 16)! } }

private func packet(_ command: MgmtCommand) -> [UInt8] { command.withUnsafeBytes { Array($0) } }

/// Decodes `vector` and hands the event to `body` while the bytes are alive.
private func decoded(_ vector: [UInt8], _ body: (Result<MgmtEvent, MgmtEventError>) -> Void) {
    vector.withUnsafeBytes { body(MgmtEvents.decode($0)) }
}

/// An iBeacon's advertising data: flags, then 0xFF 4C 00 02 15, UUID, major 1, minor 2, power -59.
private let iBeaconData = bytes("02 01 06 1A FF 4C 00 02 15 E2 C5 6D B5 DF FB 48 D2 B0 60 D0 F5 A7 10 96 E0 00 01 00 02 C5")

@Suite struct MgmtCommandTests {
    @Test func commandsWithoutParametersGoToNoAdapter() {
        #expect(packet(.readVersion()) == bytes("01 00 FF FF 00 00"))
        #expect(packet(.readSupportedCommands()) == bytes("02 00 FF FF 00 00"))
        #expect(packet(.readIndexList()) == bytes("03 00 FF FF 00 00"))
        #expect(packet(.readControllerInfo(index: 0)) == bytes("04 00 00 00 00 00"))
        #expect(packet(.readAdvMonitorFeatures(index: 1)) == bytes("51 00 01 00 00 00"))
    }

    @Test func setPoweredAndRemoveMonitor() {
        #expect(packet(.setPowered(index: 0, true)) == bytes("05 00 00 00 01 00 01"))
        #expect(packet(.setPowered(index: 2, false)) == bytes("05 00 02 00 01 00 00"))
        #expect(packet(.removeAdvMonitor(index: 0, handle: 0x0102)) == bytes("53 00 00 00 02 00 02 01"))
    }

    /// 1 + 4 × 34 = 137 parameter octets (0x89); each value padded to 31 octets.
    @Test func beaconMonitorCarriesFourPatterns() {
        let sent = packet(.addBeaconMonitor(index: 0))
        #expect(sent.count == 6 + 137)
        #expect(Array(sent[0..<7]) == bytes("52 00 00 00 89 00 04"))
        let pad = { (count: Int) in [UInt8](repeating: 0, count: count) }
        #expect(Array(sent[7..<41]) == bytes("FF 00 04 4C 00 02 15") + pad(27))
        #expect(Array(sent[41..<75]) == bytes("FF 02 02 BE AC") + pad(29))
        #expect(Array(sent[75..<109]) == bytes("16 00 02 AA FE") + pad(29))
        #expect(Array(sent[109..<143]) == bytes("03 00 02 AA FE") + pad(29))
    }
}

@Suite struct MgmtEventTests {
    @Test func commandCompleteOfReadVersion() {
        // Version 1.22: opcode 0x0001, status 0, version 1, revision 22.
        decoded(bytes("01 00 FF FF 06 00 01 00 00 01 16 00")) { result in
            guard case .success(.commandComplete(let index, let opcode, let status, let parameters)) = result else {
                Issue.record("not a command complete: \(result)")
                return
            }
            #expect(index == 0xFFFF && opcode == 1 && status == 0)
            let version = MgmtReplies.version(parameters)
            #expect(version?.version == 1 && version?.revision == 22)
        }
    }

    @Test func commandStatusNamesTheFailure() {
        decoded(bytes("02 00 00 00 03 00 52 00 14")) { result in
            guard case .success(.commandStatus(0, 0x52, let status)) = result else {
                Issue.record("not a command status: \(result)")
                return
            }
            #expect(MgmtStatus.name(status) == "Permission Denied")
        }
    }

    @Test func indexSettingsDiscoveringAndMonitorRemoved() {
        decoded(bytes("04 00 01 00 00 00")) { #expect("\($0)" == "success(LocusCore.MgmtEvent.indexAdded(index: 1))") }
        decoded(bytes("05 00 00 00 00 00")) { #expect("\($0)" == "success(LocusCore.MgmtEvent.indexRemoved(index: 0))") }
        decoded(bytes("06 00 00 00 04 00 01 02 00 00")) { result in
            guard case .success(.newSettings(0, let settings)) = result else { Issue.record("\(result)"); return }
            #expect(settings == 0x0201 && settings & MgmtSettings.powered != 0 && settings & MgmtSettings.lowEnergy != 0)
        }
        decoded(bytes("13 00 00 00 02 00 06 01")) { #expect("\($0)" == "success(LocusCore.MgmtEvent.discovering(index: 0, on: true))") }
        decoded(bytes("2C 00 00 00 02 00 03 00")) { #expect("\($0)" == "success(LocusCore.MgmtEvent.advMonitorRemoved(index: 0, handle: 3))") }
        decoded(bytes("0B 00 00 00 00 00")) { #expect("\($0)" == "success(LocusCore.MgmtEvent.other(index: 0, code: 11))") }
    }

    /// Device Found: address 43:3E:A2:C9:6B:6A LE random (2 → HCI 1), RSSI -60, flags 0, data.
    @Test func deviceFoundYieldsTheSameReportAndSighting() {
        let body = bytes("43 3E A2 C9 6B 6A 02 C4 00 00 00 00") + [UInt8(iBeaconData.count), 0] + iBeaconData
        let vector = bytes("12 00 00 00") + [UInt8(body.count), 0] + body
        decoded(vector) { result in
            guard case .success(.report(0, nil, let report)) = result else { Issue.record("\(result)"); return }
            #expect(report.address.description == "6A:6B:C9:A2:3E:43")
            #expect(report.addressType == 1 && report.rssi == -60 && Array(report.data) == iBeaconData)
            let sighting = Sighting.from(report, time: UTCTime(seconds: 0))
            #expect(sighting?.identity.major == 1 && sighting?.identity.minor == 2 && sighting?.rssi == -60)
        }
    }

    /// Adv Monitor Device Found: handle 0 (software: every advertisement), public address, RSSI
    /// 127 = not available.
    @Test func advMonitorDeviceFound() {
        let body = bytes("00 00 01 02 03 04 05 06 01 7F 00 00 00 00 03 00 02 01 06")
        decoded(bytes("2F 00 00 00") + [UInt8(body.count), 0] + body) { result in
            guard case .success(.report(0, let monitor, let report)) = result else { Issue.record("\(result)"); return }
            #expect(monitor == 0 && report.addressType == 0 && report.rssi == nil)
            #expect(report.address.description == "06:05:04:03:02:01" && Array(report.data) == bytes("02 01 06"))
        }
    }

    @Test func malformedLengthsAreRejected() {
        var rejected = 0
        let vectors: [([UInt8], MgmtEventError)] = [
            (bytes("01 00 FF FF"), .truncated),
            (bytes("01 00 FF FF 07 00 01 00 00 01 16 00"), .lengthMismatch),
            (bytes("01 00 FF FF 02 00 01 00"), .shortParameters),
            (bytes("06 00 00 00 03 00 01 02 00"), .shortParameters),
            (bytes("12 00 00 00 0D 00 01 02 03 04 05 06 01 C4 00 00 00 00 00"), .shortParameters),
            // eir_len 4 with 3 octets of data, then 2 with 3.
            (bytes("12 00 00 00 11 00 01 02 03 04 05 06 01 C4 00 00 00 00 04 00 02 01 06"), .dataOverrun),
            (bytes("2F 00 00 00 13 00 00 00 01 02 03 04 05 06 01 C4 00 00 00 00 02 00 02 01 06"), .dataOverrun),
        ]
        for (vector, error) in vectors {
            decoded(vector) { result in
                if case .failure(let got) = result {
                    rejected += 1
                    #expect(got == error, "\(vector)")
                }
            }
        }
        #expect(rejected == 7)
    }

    @Test func repliesAreReadWithTheirBounds() {
        bytes("02 00 01 00 04 00 52 00 0A 00").withUnsafeBytes { parameters in
            #expect(MgmtReplies.supports(parameters, .addAdvPatternsMonitor))
            #expect(!MgmtReplies.supports(parameters, .removeAdvMonitor))
        }
        bytes("03 00 01 00 52 00").withUnsafeBytes { #expect(!MgmtReplies.supports($0, .addAdvPatternsMonitor)) }
        bytes("02 00 00 00 01 00").withUnsafeBytes { parameters in
            #expect(MgmtReplies.indexListContains(parameters, 1) == true)
            #expect(MgmtReplies.indexListContains(parameters, 2) == false)
        }
        bytes("03 00 00 00").withUnsafeBytes { #expect(MgmtReplies.indexListContains($0, 0) == nil) }
        var info = bytes("43 3E A2 C9 6B 6A 09 02 00 FF FF 00 00 01 02 00 00") + [UInt8](repeating: 0, count: 263)
        #expect(info.count == 280)
        info.withUnsafeBytes { parameters in
            let read = MgmtReplies.controllerInfo(parameters)
            #expect(read?.address.description == "6A:6B:C9:A2:3E:43" && read?.settings == 0x0201)
        }
        info.removeLast()
        info.withUnsafeBytes { #expect(MgmtReplies.controllerInfo($0) == nil) }
    }

    /// The encoder's bytes, sent back as the kernel's Command Complete of the same opcode, decode
    /// to that opcode and the handle the kernel assigned.
    @Test func encoderAndDecoderRoundTrip() {
        for command in [MgmtCommand.addBeaconMonitor(index: 3), .removeAdvMonitor(index: 3, handle: 7), .setPowered(index: 3, true)] {
            let sent = packet(command)
            let reply = [UInt8(1), 0, sent[2], sent[3], 5, 0, sent[0], sent[1], 0, 7, 0]
            decoded(reply) { result in
                guard case .success(.commandComplete(let index, let opcode, 0, let parameters)) = result else { Issue.record("\(result)"); return }
                #expect(index == 3 && opcode == command.opcode.rawValue)
                #expect(MgmtReplies.firstWord(parameters, octets: 2) == 7)
            }
            #expect(Int(sent[4]) | Int(sent[5]) << 8 == sent.count - 6)
        }
    }
}

@Suite struct HCIMonitorRecordTests {
    /// CTRL_OPEN of bluetoothd's control socket: cookie 1, format 2, version 1.22, trusted,
    /// comm "bluetoothd" in 16 NUL-padded octets; index 0xFFFF (control sockets are unbound).
    @Test func controlOpenNamesTheProcess() {
        let comm = Array("bluetoothd".utf8) + [UInt8](repeating: 0, count: 6)
        let body = bytes("01 00 00 00 02 00 01 16 00 01 00 00 00 10") + comm
        (bytes("0E 00 FF FF") + [UInt8(body.count), 0] + body).withUnsafeBytes { record in
            let user = HCIMonitorRecords.user(in: record)
            #expect(user == .success(HCISocketUser(channel: .control, index: 0xFFFF, name: "bluetoothd", trusted: true)))
            #expect((try? user.get())??.description == "'bluetoothd' (mgmt)")
        }
        let holder = bytes("02 00 00 00 01 00 02 16 00 00 00 00 00 04") + Array("btpx".utf8)
        (bytes("0E 00 00 00") + [UInt8(holder.count), 0] + holder).withUnsafeBytes { record in
            #expect((try? HCIMonitorRecords.user(in: record).get())??.description == "'btpx' (user channel hci0)")
        }
    }

    @Test func otherRecordsAndBadLengths() {
        bytes("00 00 00 00 02 00 01 02").withUnsafeBytes { #expect(HCIMonitorRecords.user(in: $0) == .success(nil)) }
        bytes("0E 00 00 00 03 00 01 02 03").withUnsafeBytes { #expect(HCIMonitorRecords.user(in: $0) == .failure(.shortParameters)) }
        bytes("0E 00 00 00 05 00 01 02").withUnsafeBytes { #expect(HCIMonitorRecords.user(in: $0) == .failure(.lengthMismatch)) }
        let body = bytes("01 00 00 00 02 00 01 16 00 01 00 00 00 10 62 6C")
        (bytes("0E 00 FF FF") + [UInt8(body.count), 0] + body).withUnsafeBytes {
            #expect(HCIMonitorRecords.user(in: $0) == .failure(.dataOverrun))
        }
    }
}
