import Foundation
import Testing

/// `locus decode adv` and `locus decode hci` print exactly the pinned lines of
/// Tests/Fixtures/ble-decode.golden.tsv (which LocusCoreTests' AdvertisementGoldenTests keeps in
/// step with the decoder). Scripts/test runs this suite against the Embedded binaries too
/// (its name contains CommandLineTests), so the device build prints the same bytes.
@Suite struct BLEDecodeCommandLineTests {
    struct Row {
        var id: String
        var hex: String
        var output: String
    }

    static func golden() throws -> [Row] {
        let text = try String(contentsOfFile: repositoryRoot + "/Tests/Fixtures/ble-decode.golden.tsv", encoding: .utf8)
        return text.split(separator: "\n").map { line in
            let cells = line.split(separator: "\t", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            return Row(id: cells[0], hex: cells[1], output: cells[2])
        }
    }

    static func bytes(_ hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return bytes
    }

    /// A btsnoop capture as `btmon -w` writes it (datalink 2001: the flags' low 16 bits are the
    /// opcode, 3 = event; packets without the H4 byte).
    static func btsnoop(_ events: [(timeUs: Int64, packet: [UInt8])]) -> [UInt8] {
        func be32(_ value: UInt32) -> [UInt8] { [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
        var bytes = Array("btsnoop".utf8) + [0] + be32(1) + be32(2001)
        for event in events {
            let stamp = UInt64(event.timeUs + 0x00DC_DDB3_0F2F_8000)
            bytes += be32(UInt32(event.packet.count)) + be32(UInt32(event.packet.count)) + be32(3) + be32(0)
            bytes += be32(UInt32(stamp >> 32)) + be32(UInt32(stamp & 0xFFFF_FFFF)) + event.packet
        }
        return bytes
    }

    /// Every HCI event of the corpus: those pinned with a capture time from a btsnoop file, the
    /// others from a file of hex lines.
    @Test func decodeHCIPrintsThePinnedLines() throws {
        let rows = try Self.golden().filter { $0.id.hasPrefix("hci") }
        try #require(rows.count >= 140)
        let timed = rows.filter { $0.output.hasPrefix("{\"time\":") }
        let untimed = rows.filter { !$0.output.hasPrefix("{\"time\":") }
        #expect(timed.count >= 20)
        var events: [(Int64, [UInt8])] = []
        for row in timed {
            var packet = Self.bytes(row.hex)
            if packet.first == 0x04 { packet.removeFirst() }
            // The time AdvertisementGoldenTests gave this event (hciN: N * 1_234_567 us after 1_700_000_000 s).
            events.append((1_700_000_000_000_000 + Int64(row.id.dropFirst(3))! * 1_234_567, packet))
        }
        let capture = FileManager.default.temporaryDirectory.appendingPathComponent("locus-decode-\(getpid()).btsnoop")
        try Data(Self.btsnoop(events)).write(to: capture)
        defer { try? FileManager.default.removeItem(at: capture) }
        let fromCapture = try locus(["decode", "hci", capture.path])
        #expect(fromCapture.status == 0)
        #expect(fromCapture.output == timed.map { $0.output + "\n" }.joined())

        let lines = try temporaryFile("events.hex", "# the corpus's HCI events\n" + untimed.map(\.hex).joined(separator: "\n") + "\n")
        let fromLines = try locus(["decode", "hci", lines])
        #expect(fromLines.status == 0)
        let expected = untimed.map { $0.output + "\n" }
        let printed = fromLines.output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map { $0 + "\n" }
        #expect(printed.count == expected.count)
        for (ours, pinned) in zip(printed, expected) where ours != pinned {
            Issue.record("printed: \(ours)pinned:  \(pinned)")
        }
    }

    /// The hand-made cases (128-bit UUIDs, solicitation, names that are not UTF-8, broken
    /// structures) and some of the random ones, one `decode adv --hex` each.
    @Test func decodeAdvPrintsThePinnedLines() throws {
        let rows = try Self.golden()
        let handMade = rows.filter { !$0.id.hasPrefix("hci") && !$0.id.hasPrefix("v") && !$0.id.hasPrefix("r") }
        let random = rows.filter { $0.id.hasPrefix("r") }.prefix(30)
        try #require(handMade.count >= 25)
        for row in handMade + random {
            let run = try locus(["decode", "adv", "--hex", row.hex])
            #expect(run.output == row.output + "\n", "\(row.id)")
            // 1 only when no structure decoded; nothing on standard error.
            #expect(run.status == 0 || row.output == "{}" || row.output.hasPrefix("{\"warning\""), "\(row.id)")
            #expect(run.error.isEmpty, "\(row.id)")
        }
    }
}
