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
