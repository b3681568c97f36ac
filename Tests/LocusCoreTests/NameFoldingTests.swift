import AllocCounter
import Foundation
import Testing
import TestSupport
@testable import LocusCore

/// The name folding against its definition, fold(s) = D(casefold(D(s))): hand cases whose
/// expected folds were written by Python's unicodedata, and a differential test that asks
/// Python (Tests/Fixtures/fold_oracle.py) for the fold of every code point it assigns and of
/// the sample place names.
@Suite struct NameFoldingTests {
    @Test(arguments: [
        ("Ä", "a"),
        ("ß", "ss"),
        ("İ", "i"),
        ("ﬁ", "fi"),
        ("Ｔｏｋｙｏ", "tokyo"),
        // A syllable is its conjoining jamo: 서 = ᄉ ᅥ, 울 = ᄋ ᅮ ᆯ.
        ("서울", "\u{1109}\u{1165}\u{110B}\u{116E}\u{11AF}"),
        ("São Paulo", "sao paulo"),
        ("Sa\u{0303}o Paulo", "sao paulo"),
        // æ and ø have no decomposition: they are letters of their own, only lowercased.
        ("Ærøskøbing", "ærøskøbing"),
        ("ς", "σ"),
        ("ΣΟΦΙΑ", "σοφια"),
        ("Ὀδυσσεύς", "οδυσσευσ"),
        ("Hà Nội", "ha noi"),
        ("Đà Nẵng", "đa nang"),
        ("Łódź", "łodz"),
        ("ĲSSELSTEIN", "ijsselstein"),
        ("Москва", "москва"),
        ("Йошкар-Ола", "иошкар-ола"),
        // U+FDFA, the longest fold per byte (3 bytes to 33).
        ("\u{FDFA}", "صلى الله عليه وسلم"),
        // U+0345 is a nonspacing mark: D drops it before case folding could make it ι.
        ("\u{0345}", ""),
        ("", ""),
        ("plain ascii 123", "plain ascii 123"),
    ])
    func handCases(input: String, expected: String) {
        // Bytes, not Strings: String equality would take "Sa\u{0303}o" and "São" for equal.
        #expect(NameFolding.fold(Array(input.utf8)) == Array(expected.utf8))
    }

    @Test func invalidUTF8IsRefused() {
        for bytes: [UInt8] in [[0xC3], [0x61, 0xC3, 0x28], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xFF], [0x80]] {
            #expect(NameFolding.fold(bytes) == nil, "\(bytes)")
        }
    }

    @Test func aShortOutputIsRefused() {
        func fold(_ text: String, room: Int) -> Int? {
            var output = [UInt8](repeating: 0, count: room)
            return Array(text.utf8).withUnsafeBytes { input in output.withUnsafeMutableBytes { NameFolding.fold(input, into: $0) } }
        }
        #expect(fold("A", room: 0) == nil)
        #expect(fold("A", room: 1) == 1)
        #expect(fold("ß", room: 1) == nil)
        #expect(fold("ß", room: 2) == 2)
        #expect(fold("é", room: 0) == nil)
        #expect(fold("é", room: 1) == 1)
        #expect(fold("ø", room: 1) == nil)
        #expect(fold("ø", room: 2) == 2)
        #expect(fold("서", room: 5) == nil)
        #expect(fold("서", room: 6) == 6)
        #expect(fold("울", room: 8) == nil)
        #expect(fold("울", room: 9) == 9)
        #expect(fold("\u{FDFA}", room: 32) == nil)
        #expect(fold("\u{FDFA}", room: 33) == 33)
        #expect(fold("", room: 0) == 0)
    }

    @Test func foldingDoesNotAllocate() {
        let input = Array("Ærøskøbing, São Paulo, 서울, Ｔｏｋｙｏ, Straße, \u{FDFA}".utf8)
        var output = [UInt8](repeating: 0, count: input.count * 11)
        var written: Int?
        input.withUnsafeBytes { input in
            output.withUnsafeMutableBytes { output in
                _ = NameFolding.fold(input, into: output)  // the tables are set up on first use in debug builds
                let count = allocations { written = NameFolding.fold(input, into: output) }
                #expect(count == 0)
            }
        }
        #expect(written != nil)
    }

    // MARK: - Against Python's unicodedata

    static func python() throws -> String {
        try TestPython.path(repositoryRoot: repositoryRoot, need: "the folding tests compare with its unicodedata")
    }

    static let hexDigits = Array("0123456789abcdef".utf8)

    static func hex(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(hexDigits[Int(byte >> 4)])
            text.append(hexDigits[Int(byte & 0xF)])
        }
        return text
    }

    /// The oracle's Unicode version and its answer for each line: hex-encoded UTF-8 in and out,
    /// nil for a line with a code point its Unicode does not assign.
    static func oracle(_ lines: [[UInt8]]) throws -> (version: String, folds: [[UInt8]?]) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locus-fold-\(getpid())-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("in.hex")
        var text: [UInt8] = []
        for line in lines {
            line.withUnsafeBytes { text += hex($0) }
            text.append(0x0A)
        }
        try Data(text).write(to: input)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try python())
        process.arguments = [repositoryRoot + "/Tests/Fixtures/fold_oracle.py", "--hex", input.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "fold_oracle.py failed")
        var answers = [UInt8](data).split(separator: 0x0A, omittingEmptySubsequences: false).map { Array($0) }
        try #require(answers.last == [], "the oracle's output ends with a newline")
        answers.removeLast()
        let version = String(decoding: answers.removeFirst(), as: UTF8.self)
        try #require(answers.count == lines.count, "one answer per line")
        return (version, answers.map { $0 == Array("-".utf8) ? nil : $0 })
    }

    /// Compares Locus's fold of each line with the oracle's; returns (compared, skipped, mismatches).
    static func compare(_ lines: [[UInt8]]) throws -> (version: String, compared: Int, skipped: Int, mismatches: [String]) {
        let (version, folds) = try oracle(lines)
        var compared = 0, skipped = 0
        var mismatches: [String] = []
        var output = [UInt8](repeating: 0, count: 64 * 11)
        for (line, expected) in zip(lines, folds) {
            guard let expected else { skipped += 1; continue }
            compared += 1
            if output.count < line.count * 11 { output = [UInt8](repeating: 0, count: line.count * 11) }
            let ours: [UInt8]? = line.withUnsafeBytes { input in
                output.withUnsafeMutableBytes { buffer in
                    NameFolding.fold(input, into: buffer).map { hex(UnsafeRawBufferPointer(rebasing: buffer[0..<$0])) }
                }
            }
            if ours != expected {
                mismatches.append("\(String(decoding: line.withUnsafeBytes(hex), as: UTF8.self)): Python \(String(decoding: expected, as: UTF8.self)), Locus \(ours.map { String(decoding: $0, as: UTF8.self) } ?? "nil")")
            }
        }
        return (version, compared, skipped, mismatches)
    }

    static func utf8(_ scalar: UInt32) -> [UInt8] {
        switch scalar {
        case ..<0x80: [UInt8(scalar)]
        case ..<0x800: [0xC0 | UInt8(scalar >> 6), 0x80 | UInt8(scalar & 0x3F)]
        case ..<0x10000: [0xE0 | UInt8(scalar >> 12), 0x80 | UInt8(scalar >> 6 & 0x3F), 0x80 | UInt8(scalar & 0x3F)]
        default: [0xF0 | UInt8(scalar >> 18), 0x80 | UInt8(scalar >> 12 & 0x3F), 0x80 | UInt8(scalar >> 6 & 0x3F), 0x80 | UInt8(scalar & 0x3F)]
        }
    }

    /// Every code point Python's Unicode assigns (surrogates aside: they are not UTF-8), one a line.
    /// The table is generated from Unicode 15.0.0 and the oracle is Unicode 14.0.0 (Debian 12's
    /// python3.11): the code points new in 15.0 are unassigned for Python and left out; no code
    /// point assigned in both folds differently.
    @Test func everyCodePointFoldsAsPythonFoldsIt() throws {
        var lines: [[UInt8]] = []
        lines.reserveCapacity(0x110000)
        for scalar: UInt32 in 0...0x10FFFF where !(0xD800...0xDFFF).contains(scalar) {
            lines.append(Self.utf8(scalar))
        }
        let result = try Self.compare(lines)
        print("NameFolding: \(result.compared) code points compared with Python's Unicode \(result.version) (table: Unicode \(NameFolding.unicodeVersion)), \(result.skipped) unassigned there skipped, \(result.mismatches.count) differ")
        #expect(result.compared > 280_000, "Python assigns fewer code points than Unicode 14 does")
        #expect(result.mismatches.isEmpty, "\(result.mismatches.prefix(50).joined(separator: "\n"))")
    }

    @Test func placeNamesFoldAsPythonFoldsThem() throws {
        let file = try readRepositoryFile("Tests/Fixtures/place-names.txt")
        let lines = file.split(separator: 0x0A).map { Array($0) }.filter { $0.first != UInt8(ascii: "#") }
        let result = try Self.compare(lines)
        print("NameFolding: \(result.compared) place names compared with Python's Unicode \(result.version), \(result.skipped) skipped, \(result.mismatches.count) differ")
        #expect(result.compared == lines.count && result.compared > 400)
        #expect(result.mismatches.isEmpty, "\(result.mismatches.joined(separator: "\n"))")
    }
}
