import AllocCounter
import Foundation
import Testing
@testable import LocusCore
import TestSupport

/// What `locus decode adv|hci` prints, pinned byte for byte: one line per advertisement of the
/// BLE corpus (both TSV files), hand-made edge cases and seeded random AD data, in
/// Tests/Fixtures/ble-decode.golden.tsv (`id`, input hex, output). A change of output shows up as
/// a diff of that file: after a deliberate change, regenerate it with
/// `LOCUS_UPDATE_GOLDEN=1 swift test --filter AdvertisementGoldenTests` and review the diff.
enum DecodeGolden {
    static let path = repositoryRoot + "/Tests/Fixtures/ble-decode.golden.tsv"

    struct Input {
        var id: String
        var bytes: [UInt8]
        /// An HCI event (the `decode hci` path, with address and RSSI) rather than AD data.
        var hci = false
        var timeUs: Int64? = nil
    }

    static func inputs() throws -> [Input] {
        var inputs: [Input] = []
        for row in try readTSV("vectors.tsv") {
            let bytes = try #require(HexText.bytes(row["hex"]))
            switch row["layer"] {
            case "ad_data": inputs.append(Input(id: row["id"], bytes: bytes))
            case "service_data_after_uuid_feaa": inputs.append(Input(id: row["id"], bytes: [UInt8(bytes.count + 3), 0x16, 0xAA, 0xFE] + bytes))
            case "msd_after_company_id_004c": inputs.append(Input(id: row["id"], bytes: [UInt8(bytes.count + 3), 0xFF, 0x4C, 0x00] + bytes))
            case "ll_pdu_header+advA+ad": inputs.append(Input(id: row["id"], bytes: Array(bytes[8...])))
            default: inputs.append(Input(id: row["id"], bytes: bytes, hci: true))
            }
        }
        for row in try readTSV("hci_events.tsv") {
            let number = Int64(row["n"]) ?? 0
            // Every seventh with a capture time, as `decode hci` prints events from btsnoop files.
            let time: Int64? = number % 7 == 0 ? 1_700_000_000_000_000 + number * 1_234_567 : nil
            inputs.append(Input(id: "hci\(row["n"])", bytes: try #require(HexText.bytes(row["hex"])), hci: true, timeUs: time))
        }
        for (id, hex) in handMade { inputs.append(Input(id: id, bytes: try #require(HexText.bytes(hex), "\(id)"))) }
        var random = SplitMix64(state: 0xAD_2024)
        for index in 0..<400 { inputs.append(Input(id: "r\(index)", bytes: randomAD(&random))) }
        return inputs
    }

    /// Edge cases the corpus lacks (hex of AD data).
    static let handMade: [(String, String)] = [
        // Issue 14's example: 2D45B460-8DB7-11E1-9A46-0002A5D5C51B, little-endian on air.
        ("uuid128-complete", "11071bc5d5a50200469ae111b78d60b4452d"),
        ("uuid128-incomplete-two", "21061bc5d5a50200469ae111b78d60b4452d00112233445566778899aabbccddeeff"),
        ("uuid128-service-data", "14211bc5d5a50200469ae111b78d60b4452d010203"),
        ("uuid128-service-data-empty", "11211bc5d5a50200469ae111b78d60b4452d"),
        ("solicit-16", "05140d180f18"),
        ("solicit-32", "091f785634120d180000"),
        ("solicit-128", "11151bc5d5a50200469ae111b78d60b4452d"),
        ("uuid-all-sizes", "0201060503aafe0d18050578563412" + "11071bc5d5a50200469ae111b78d60b4452d" + "0716aafe10ee0061"),
        ("name-ascii", "0201060609" + "4c6f637573"),
        ("name-escapes", "0b09" + "61225c0a090d017f62" + "2f"),
        ("name-multibyte", "0e09" + "436166c3a920e282acf09f9880"),
        ("name-invalid-middle", "0609" + "4142ff4344"),
        ("name-overlong", "0609" + "41c0af4243"),
        ("name-overlong-3", "0609" + "41e080af42"),
        ("name-surrogate", "0609" + "41eda08042"),
        ("name-above-max", "0709" + "41f490808042"),
        ("name-truncated-end", "0709" + "54656d70e282"),
        ("name-invalid-first", "0409" + "806162"),
        ("name-lone-continuation", "0509" + "61bf6263"),
        ("name-nul", "0609" + "6162006364"),
        ("name-empty", "0109"),
        ("name-short-then-complete", "040861626304096465660201" + "06"),
        ("tx-power-negative", "020ac4"),
        ("manufacturers-three", "05ff5900010205ff4c001005" + "04ffffff07"),
        ("eddystone-tlm-negative", "1116aafe20000bb8ff80000000010000000a"),
        ("eddystone-tlm-no-temperature", "1116aafe20000bb880000000000100000000"),
        ("walk-overrun", "020106" + "0509616263"),
        ("walk-bad-field", "020106" + "030a0102" + "03096162"),
        ("walk-odd-uuid16", "0403aafe0d"),
        ("padding", "0201060000000000"),
        ("empty", ""),
    ]

    /// Random AD data: structures of the types `describe` reads (and some it does not), names
    /// from ASCII, escapes, valid multi-byte and invalid UTF-8, now and then a broken structure.
    static func randomAD(_ random: inout SplitMix64) -> [UInt8] {
        var data: [UInt8] = []
        for _ in 0..<(1 + random.below(5)) {
            let type = random.pick([0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x14, 0x15, 0x16, 0x19, 0x1F, 0x20, 0x21, 0xFF, 0xFF] as [UInt8])
            var payload: [UInt8]
            switch type {
            case 0x01, 0x0A: payload = [UInt8(truncatingIfNeeded: random.next())]
            case 0x02, 0x03, 0x14: payload = bytes(2 * random.below(4), &random)
            case 0x04, 0x05, 0x1F: payload = bytes(4 * random.below(3), &random)
            case 0x06, 0x07, 0x15: payload = bytes(16 * (1 + random.below(2)), &random)
            case 0x08, 0x09: payload = name(&random)
            case 0x16:
                payload = random.chance(50) ? [0xAA, 0xFE] + eddystone(&random) : bytes(2 + random.below(8), &random)
            case 0x20: payload = bytes(4 + random.below(6), &random)
            case 0x21: payload = bytes(16 + random.below(6), &random)
            case 0xFF:
                if random.chance(30) {
                    payload = [0x4C, 0x00, 0x02, 0x15] + bytes(21, &random)
                } else if random.chance(30) {
                    payload = bytes(2, &random) + [0xBE, 0xAC] + bytes(21 + random.below(2), &random)
                } else {
                    payload = bytes(2 + random.below(10), &random)
                }
            default: payload = bytes(random.below(6), &random)
            }
            if random.chance(3) { payload.removeLast(min(payload.count, 1)) } // an impossible length now and then
            data += [UInt8(payload.count + 1), type] + payload
        }
        if random.chance(5) { data.removeLast(random.below(min(4, data.count))) } // a cut-off tail
        if random.chance(5) { data += [0, 0, 0] }
        return data
    }

    static func bytes(_ count: Int, _ random: inout SplitMix64) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    static func name(_ random: inout SplitMix64) -> [UInt8] {
        let pieces: [[UInt8]] = [
            Array("Tag".utf8), Array("ab".utf8), [0x20], [0x22], [0x5C], [0x0A], [0x00], [0x1F], [0x7F],
            Array("é".utf8), Array("€".utf8), Array("😀".utf8), Array("日本".utf8),
            [0x80], [0xFF], [0xC0, 0xAF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0xF0, 0x9F],
        ]
        var name: [UInt8] = []
        for _ in 0..<random.below(6) {
            // Mostly valid text: invalid pieces are the last 8 of the list.
            name += random.chance(80) ? pieces[random.below(pieces.count - 8)] : random.pick(pieces)
        }
        return name
    }

    static func eddystone(_ random: inout SplitMix64) -> [UInt8] {
        switch random.below(5) {
        case 0: return [0x00] + bytes(17 + 2 * random.below(2), &random)
        case 1: return [0x10, 0xEE, UInt8(random.below(4))] + (0..<random.below(10)).map { _ in UInt8(0x21 + random.below(0x70)) }
        case 2: return [0x20, 0x00] + bytes(12, &random)
        case 3: return [0x20, 0x01] + bytes(16, &random)
        default: return [0x30] + bytes(9, &random)
        }
    }

    /// The lines `decode` prints for one input.
    static func render(_ input: Input) -> [String] {
        guard input.hci else { return [input.bytes.withUnsafeBytes { AdvertisementJSON.describe($0) }] }
        return input.bytes.withUnsafeBytes { raw in
            var lines: [String] = []
            let result = HCIEvents.forEachReportDescribing(HCIEvents.withoutPacketType(raw)) { report in
                lines.append(AdvertisementJSON.describe(report.data, report: report, timeUs: input.timeUs))
            }
            if case .failure(let error) = result { lines.append("error: \(error)") }
            return lines
        }
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func table() throws -> [String] {
        var rows: [String] = []
        for input in try inputs() {
            for (index, line) in render(input).enumerated() {
                rows.append("\(input.id)\(index == 0 ? "" : "#\(index)")\t\(hex(input.bytes))\t\(line)")
            }
        }
        return rows
    }
}

@Suite struct AdvertisementGoldenTests {
    @Test func everyAdvertisementPrintsAsPinned() throws {
        let rows = try DecodeGolden.table()
        #expect(rows.count > 600)
        if ProcessInfo.processInfo.environment["LOCUS_UPDATE_GOLDEN"] == "1" {
            try (rows.joined(separator: "\n") + "\n").write(toFile: DecodeGolden.path, atomically: true, encoding: .utf8)
            return
        }
        let pinned = try String(contentsOfFile: DecodeGolden.path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        #expect(pinned.count == rows.count, "\(rows.count) lines, \(pinned.count) pinned")
        let differing = zip(rows, pinned).filter { $0.0 != $0.1 }
        for (ours, theirs) in differing.prefix(10) {
            Issue.record("now:    \(ours)\npinned: \(theirs)")
        }
        #expect(differing.isEmpty, "\(differing.count) lines differ from \(DecodeGolden.path)")
    }
}

/// The decoded object of `describe` (Foundation's parser).
func describedObject(_ bytes: [UInt8]) throws -> [String: Any] {
    let json = bytes.withUnsafeBytes { AdvertisementJSON.describe($0) }
    return try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any], "\(json)")
}

@Suite struct ServiceUUIDTests {
    static let issueExample: [UInt8] = [0x1B, 0xC5, 0xD5, 0xA5, 0x02, 0x00, 0x46, 0x9A, 0xE1, 0x11, 0xB7, 0x8D, 0x60, 0xB4, 0x45, 0x2D]
    static let issueExampleText = "2D45B460-8DB7-11E1-9A46-0002A5D5C51B"

    /// Checked by hand: on air the 16 bytes of a 128-bit service UUID are the canonical ones
    /// reversed, so the last byte sent (0x2D) is the first of the text.
    @Test func a128BitServiceUUIDIsItsSixteenBytesReversed() throws {
        #expect(Self.issueExample.withUnsafeBytes { BeaconUUID(littleEndian: $0) }.description == Self.issueExampleText)
        for type: UInt8 in [0x06, 0x07] {
            let object = try describedObject([17, type] + Self.issueExample)
            #expect(object["services"] as? [String] == [Self.issueExampleText])
        }
        let solicited = try describedObject([17, 0x15] + Self.issueExample)
        #expect(solicited["solicited_services"] as? [String] == [Self.issueExampleText])
        #expect(solicited["services"] == nil)
        let data = try describedObject([20, 0x21] + Self.issueExample + [0x01, 0x02, 0x03])
        #expect(data["service_data"] as? [[String: String]] == [["uuid": Self.issueExampleText, "data": "010203"]])
    }

    @Test func solicitationListsOfEveryWidth() throws {
        let object = try describedObject([5, 0x14, 0x0D, 0x18, 0x0F, 0x18, 5, 0x1F, 0x78, 0x56, 0x34, 0x12])
        #expect(object["solicited_services"] as? [String] == ["0000180D-0000-1000-8000-00805F9B34FB", "0000180F-0000-1000-8000-00805F9B34FB",
                                                             "12345678-0000-1000-8000-00805F9B34FB"])
        // A list whose length is not a multiple of its width is reported, as for service lists.
        let broken = try describedObject([4, 0x15] + Self.issueExample[0..<3])
        #expect(broken["warning"] as? String == "AD structure 0x15 at byte 0 has an impossible length")
    }

    /// iBeacon and AltBeacon carry their UUID big-endian inside manufacturer data: unchanged.
    @Test func beaconIdentitiesStayBigEndian() throws {
        let uuid: [UInt8] = [0xE2, 0xC5, 0x6D, 0xB5, 0xDF, 0xFB, 0x48, 0xD2, 0xB0, 0x60, 0xD0, 0xF5, 0xA7, 0x10, 0x96, 0xE0]
        let iBeacon: [UInt8] = [2, 0x01, 0x06, 26, 0xFF, 0x4C, 0x00, 0x02, 0x15] + uuid + [0x00, 0x01, 0x00, 0x02, 0xC5]
        let altBeacon: [UInt8] = [27, 0xFF, 0x18, 0x01, 0xBE, 0xAC] + uuid + [0x00, 0x01, 0x00, 0x02, 0xC5, 0x00]
        for bytes in [iBeacon, altBeacon] {
            let beacon = try #require(try describedObject(bytes)["beacon"] as? [String: Any])
            #expect(beacon["uuid"] as? String == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
        }
        #expect(uuid.withUnsafeBytes { BeaconUUID(bytes: $0) }.description == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
    }
}

/// Service UUIDs, service data UUIDs and solicited UUIDs against Home Assistant's parser
/// (bluetooth-data-tools, pinned in the venv `Scripts/install-deps --test` makes), run by
/// Tests/Fixtures/adv_oracle.py on every advertisement of the golden set: the corpus (the five
/// with 128-bit UUIDs among them), the hand-made cases (all of 0x06, 0x07, 0x21, 0x15) and the
/// random ones. Only data that Locus walks without a problem is compared: on broken structures the
/// two parsers differ by design (Locus stops and warns, bluetooth-data-tools skips and goes on).
@Suite struct ServiceUUIDOracleTests {
    static let script = repositoryRoot + "/Tests/Fixtures/adv_oracle.py"

    static func python() throws -> String {
        try TestPython.path(repositoryRoot: repositoryRoot, need: "the service UUID tests need bluetooth-data-tools in that venv")
    }

    /// The AD data of an input (each report's for an HCI event), cut where Locus's walk ends;
    /// nil when the walk met a broken structure.
    static func significantData(_ input: DecodeGolden.Input) -> [[UInt8]] {
        var payloads: [[UInt8]] = []
        input.bytes.withUnsafeBytes { raw in
            if input.hci {
                _ = HCIEvents.forEachReportDescribing(HCIEvents.withoutPacketType(raw)) { payloads.append(Array($0.data)) }
            } else {
                payloads.append(Array(raw))
            }
        }
        return payloads.compactMap { data in
            var end = 0
            let walk = data.withUnsafeBytes { AdvertisingData.forEachStructure($0) { _, payload in end += payload.count + 2 } }
            return walk.error == nil ? Array(data[0..<end]) : nil
        }
    }

    static func types(_ data: [UInt8]) -> Set<UInt8> {
        var found = Set<UInt8>()
        _ = data.withUnsafeBytes { AdvertisingData.forEachStructure($0) { type, _ in found.insert(type) } }
        return found
    }

    /// Runs the oracle on `payloads`, one JSON object back for each.
    static func oracle(_ payloads: [[UInt8]]) throws -> [[String: Any]] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locus-oracle-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("in.hex"), errors = directory.appendingPathComponent("err.txt")
        try (payloads.map(DecodeGolden.hex).joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try python())
        process.arguments = [script]
        process.standardInput = try FileHandle(forReadingFrom: input)
        process.standardError = try FileHandle(forWritingTo: errors)
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let stderr = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
        try #require(process.terminationStatus == 0, "adv_oracle.py exited \(process.terminationStatus): \(stderr) (run Scripts/install-deps --test)")
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
        try #require(lines.count == payloads.count, "\(lines.count) answers for \(payloads.count) payloads: \(stderr)")
        return try lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
    }

    @Test func serviceUUIDsAgreeWithBluetoothDataTools() throws {
        let inputs = try DecodeGolden.inputs()
        var payloads: [[UInt8]] = []
        var corpus128 = 0
        var handMadeTypes = Set<UInt8>()
        let wide: Set<UInt8> = [0x06, 0x07, 0x15, 0x21]
        for input in inputs {
            for data in Self.significantData(input) {
                let types = Self.types(data)
                if input.id.hasPrefix("v") || input.id.hasPrefix("hci") { corpus128 += types.isDisjoint(with: wide) ? 0 : 1 }
                if DecodeGolden.handMade.contains(where: { $0.0 == input.id }) { handMadeTypes.formUnion(types) }
                payloads.append(data)
            }
        }
        #expect(corpus128 >= 5, "corpus advertisements with 128-bit UUIDs: \(corpus128)")
        #expect(wide.isSubset(of: handMadeTypes))
        let answers = try Self.oracle(payloads)
        var compared = 0, uuids = 0
        for (data, theirs) in zip(payloads, answers) {
            let ours = try describedObject(data)
            let services = (ours["services"] as? [String] ?? []).map { $0.lowercased() }
            let solicited = (ours["solicited_services"] as? [String] ?? []).map { $0.lowercased() }
            // bluetooth-data-tools keeps service data in a dictionary: the last value of a UUID
            // wins, in the place of its first.
            var order: [String] = []
            var values: [String: String] = [:]
            for entry in ours["service_data"] as? [[String: String]] ?? [] {
                let uuid = entry["uuid"]!.lowercased()
                if values[uuid] == nil { order.append(uuid) }
                values[uuid] = entry["data"]!
            }
            let serviceData = order.map { [$0, values[$0]!] }
            let hex = DecodeGolden.hex(data)
            #expect(services == theirs["services"] as? [String], "\(hex)")
            #expect(solicited == theirs["solicited"] as? [String], "\(hex)")
            #expect(serviceData == theirs["service_data"] as? [[String]], "\(hex)")
            compared += 1
            uuids += services.count + solicited.count + serviceData.count
        }
        #expect(compared > 500 && uuids > 1_000, "\(compared) advertisements, \(uuids) UUIDs")
    }
}

/// Device names are cut at the first byte sequence that is not UTF-8, as BlueZ cuts them for what
/// bluetoothctl shows (`strtoutf8` in src/eir.c), and flagged with "name_truncated": true.
@Suite struct DeviceNameTests {
    /// `name` and `name_truncated` of a complete local name (AD type 0x09) made of `bytes`.
    static func name(_ bytes: [UInt8]) throws -> (String?, Bool?) {
        let object = try describedObject([UInt8(bytes.count + 1), 0x09] + bytes)
        return (object["name"] as? String, object["name_truncated"] as? Bool)
    }

    @Test(arguments: ["Locus", "", "Café €", "温度计 😀", "a\"b\\c\n", "tab\there"])
    func validNamesAreKeptWhole(_ text: String) throws {
        let (name, truncated) = try Self.name(Array(text.utf8))
        #expect(name == text)
        #expect(truncated == nil)
    }

    @Test(arguments: [
        ([0x41, 0x42, 0xFF, 0x43, 0x44], "AB"),                 // an invalid byte in the middle
        ([0x41, 0x80, 0x42], "A"),                              // a lone continuation byte
        ([0x41, 0xC0, 0xAF, 0x42], "A"),                        // overlong '/' (2 bytes)
        ([0x41, 0xC1, 0xBF], "A"),                              // overlong (C1 lead)
        ([0x41, 0xE0, 0x80, 0xAF], "A"),                        // overlong '/' (3 bytes)
        ([0x41, 0xF0, 0x80, 0x80, 0xAF], "A"),                  // overlong '/' (4 bytes)
        ([0x41, 0xED, 0xA0, 0x80, 0x42], "A"),                  // U+D800, a surrogate
        ([0x41, 0xED, 0xBF, 0xBF], "A"),                        // U+DFFF, a surrogate
        ([0x41, 0xF4, 0x90, 0x80, 0x80], "A"),                  // above U+10FFFF
        ([0x41, 0xF5, 0x80, 0x80, 0x80], "A"),                  // a lead byte no sequence has
        (Array("Temp".utf8) + [0xE2, 0x82], "Temp"),            // a 3-byte sequence cut at the end
        (Array("Temp".utf8) + [0xF0, 0x9F, 0x98], "Temp"),      // a 4-byte sequence cut at the end
        (Array("é".utf8) + [0xC3], "é"),                        // a 2-byte sequence cut at the end
        ([0xE2, 0x82, 0x41, 0x42], ""),                         // invalid from the first byte
        (Array("日本".utf8) + [0xFF] + Array("語".utf8), "日本"), // cut after valid multi-byte text
    ] as [([UInt8], String)])
    func invalidNamesAreCutAtTheFirstInvalidSequence(_ bytes: [UInt8], _ expected: String) throws {
        let (name, truncated) = try Self.name(bytes)
        #expect(name == expected)
        #expect(truncated == true)
    }

    @Test func theFlagFollowsTheNameThatIsShown() throws {
        // A shortened name that is cut, then a complete one that is not: the last one is shown.
        let object = try describedObject([3, 0x08, 0x41, 0xFF, 4, 0x09, 0x41, 0x42, 0x43])
        #expect(object["name"] as? String == "ABC")
        #expect(object["name_truncated"] == nil)
    }

    /// The validator against the standard library's UTF-8 parser: the first invalid byte is
    /// where the parser first reports an error, on random bytes (mostly above 0x7F).
    @Test func firstInvalidByteAgreesWithTheStandardLibrary() {
        var random = SplitMix64(state: 0x0007_F8)
        for _ in 0..<20_000 {
            let bytes = (0..<random.below(12)).map { _ in random.chance(25) ? UInt8(random.below(0x80)) : UInt8(0x80 + random.below(0x80)) }
            var parser = Unicode.UTF8.ForwardParser()
            var iterator = bytes.makeIterator()
            var offset = 0
            var expected: Int? = nil
            parsing: while true {
                switch parser.parseScalar(from: &iterator) {
                case .valid(let scalar): offset += scalar.count
                case .emptyInput: break parsing
                case .error: expected = offset; break parsing
                }
            }
            #expect(UTF8Validation.firstInvalidByte(in: bytes) == expected, "\(bytes)")
            let prefix = bytes.withUnsafeBytes { UTF8Validation.validPrefix($0) }
            #expect(prefix.truncated == (expected != nil) && prefix.bytes.count == (expected ?? bytes.count), "\(bytes)")
        }
    }
}

@Suite struct AdvertisementWriterTests {
    /// The densest AD data for each kind of output, 255 bytes or a little more: `capacity` holds them.
    @Test func theCapacityHoldsTheDensestAdvertisements() throws {
        let filler: [UInt8] = [0x22, 0x01]
        let densest: [[UInt8]] = [
            [255, 0x03] + Array(repeating: 0xAB, count: 254),
            [255, 0x14] + Array(repeating: 0xAB, count: 254),
            Array((0..<64).map { _ in [3, 0x03] + filler }.joined()),
            Array((0..<64).map { _ in [3, 0x16] + filler }.joined()),
            Array((0..<43).map { _ in [5, 0x20] + filler + filler }.joined()),
            Array((0..<64).map { _ in [3, 0xFF] + filler }.joined()),
            [255, 0x09] + Array(repeating: 0x01, count: 254),
            [255, 0x09] + Array(repeating: 0x22, count: 254),
            Array((0..<63).map { _ in [3, 0x16] + filler }.joined()) + [0x05, 0x09, 0x41],
        ]
        let report = try #require(HexText.bytes("3e2a02010001433ea2c96b6a1e02011a1aff4c000215e2c56db5dffb48d2b060d0f5a71096e000640000c5b3"))
        for data in densest {
            var line = JSONWriter(capacity: AdvertisementJSON.capacity(dataCount: data.count))
            let reported = try report.withUnsafeBytes { raw in
                var first: AdvertisingReport? = nil
                _ = HCIEvents.forEachReportDescribing(raw) { first = first ?? $0 }
                return try #require(first)
            }
            data.withUnsafeBytes { AdvertisementJSON.write($0, report: reported, timeUs: -62_135_596_800_000_000, into: &line) }
            let overflowed = line.overflowed, written = line.count
            #expect(!overflowed && written < line.capacity, "\(written) of \(line.capacity) bytes for \(DecodeGolden.hex(Array(data.prefix(8))))...")
            _ = try JSONSerialization.jsonObject(with: Data(line.string.utf8))
        }
    }

    /// Writing AD data into a reused line allocates nothing: flags, names, UUID lists, service and
    /// manufacturer data are written from the bytes. (Beacon frames, report addresses and
    /// warnings still go through Strings: this is output code, not the hot path.)
    @Test func advertisingDataWithoutABeaconIsWrittenWithoutAllocating() throws {
        let payloads = try DecodeGolden.inputs().filter { !$0.hci }.map(\.bytes).filter { bytes in
            let text = bytes.withUnsafeBytes { AdvertisementJSON.describe($0) }
            return !text.contains("\"beacon\"") && !text.contains("\"warning\"")
        }
        try #require(payloads.count > 250)
        var line = JSONWriter(capacity: AdvertisementJSON.capacity(dataCount: 1_650))
        var counts: [Int] = []
        for _ in 0..<2 {
            // The first pass warms up (type metadata on first use). Indices, not a for-in over
            // the array: in a debug build that iteration itself allocates.
            counts.append(allocations {
                for index in 0..<payloads.count {
                    line.reset()
                    payloads[index].withUnsafeBytes { AdvertisementJSON.write($0, into: &line) }
                }
            })
        }
        #expect(counts[1] == 0, "first pass \(counts[0]), second \(counts[1]) allocations for \(payloads.count) advertisements")
    }
}
