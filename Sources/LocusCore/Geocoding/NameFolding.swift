/// The case- and diacritic-folding of place names, the form the name index sorts and forward
/// geocoding searches by: "São Paulo", "SAO PAULO" and "São Paulo" written with a combining
/// tilde all fold to "sao paulo".
///
/// For a string s, fold(s) = D(casefold(D(s))) where
/// - D(t) is NFKD(t) with every code point of general category Mn (nonspacing mark) removed, and
/// - casefold is Unicode full case folding (the C and F lines of CaseFolding.txt).
///
/// In Python, the tests' oracle:
///
///     def D(t): return ''.join(c for c in unicodedata.normalize('NFKD', t) if unicodedata.category(c) != 'Mn')
///     def fold(s): return D(D(s).casefold())
///
/// Folding works one code point at a time: each is replaced by its fold, precomputed from
/// Unicode's data files in `FoldTable.swift` (Scripts/generate-fold-table), Hangul syllables
/// decomposed into their jamo here, every other code point copied. So "Ä" folds to "a", "ß" to
/// "ss", "İ" to "i", "ﬁ" to "fi", "Ｔｏｋｙｏ" to "tokyo", "ς" to "σ", while "æ" and "ø", which
/// have no decomposition, stay themselves.
///
/// That equals the definition on whole strings because NFKD and case folding map each code point
/// on its own, except for canonical reordering, which sorts each run of code points of nonzero
/// combining class; those are all nonspacing marks, dropped anyway, but for 26 spacing marks
/// (Mc: some viramas of class 9, the Hangul tone marks U+302E and U+302F, the Vietnamese reading
/// marks U+16FF0 and U+16FF1, the musical symbol stems, flags and augmentation dot U+1D165...
/// U+1D172). Two of those with different classes in one run of marks keep their order here where
/// NFKD would swap them (U+1D16D U+1D165 folds to itself, not to U+1D165 U+1D16D); no place name
/// holds such a pair.
public enum NameFolding {
    /// The Unicode version of the table the fold comes from.
    public static var unicodeVersion: StaticString { nameFoldUnicodeVersion }

    /// Writes fold(utf8) into output; returns the number of bytes written, or nil when the input
    /// is not valid UTF-8 or the output is too small.
    @_noAllocation
    public static func fold(_ utf8: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Int? {
        if UTF8Validation.firstInvalidByte(in: utf8) != nil { return nil }
        let count = utf8.count
        let capacity = output.count
        var index = 0
        var written = 0
        while index < count {
            let lead = utf8[index]
            if lead < 0x80 {
                if written == capacity { return nil }
                output[written] = lead &- 0x41 < 26 ? lead | 0x20 : lead
                written += 1
                index += 1
                continue
            }
            // Valid UTF-8 (checked above): the lead byte gives the length.
            let length: Int
            var scalar: UInt32
            if lead < 0xE0 {
                length = 2
                scalar = UInt32(lead & 0x1F)
            } else if lead < 0xF0 {
                length = 3
                scalar = UInt32(lead & 0x0F)
            } else {
                length = 4
                scalar = UInt32(lead & 0x07)
            }
            var offset = 1
            while offset < length {
                scalar = scalar << 6 | UInt32(utf8[index + offset] & 0x3F)
                offset += 1
            }
            if scalar >= hangulFirst && scalar <= hangulLast {
                let syllable = scalar - hangulFirst
                let trailing = syllable % 28
                if capacity - written < (trailing == 0 ? 6 : 9) { return nil }
                written = writeJamo(0x1100 + syllable / 588, into: output, at: written)
                written = writeJamo(0x1161 + syllable % 588 / 28, into: output, at: written)
                if trailing != 0 { written = writeJamo(0x11A7 + trailing, into: output, at: written) }
            } else if let run = run(containing: scalar) {
                let foldLength = Int(truncatingIfNeeded: run & 0xFF)
                if capacity - written < foldLength { return nil }
                let start = Int(truncatingIfNeeded: run >> 43)
                var source = Int(truncatingIfNeeded: run >> 8 & 0xFF_FFFF) + (Int(scalar) - start) * foldLength
                let end = source + foldLength
                while source < end {  // the pool holds eight bytes to a word, the first in the low bits
                    output[written] = UInt8(truncatingIfNeeded: nameFoldPool[source >> 3] >> (UInt64(source & 7) << 3))
                    written += 1
                    source += 1
                }
            } else {
                if capacity - written < length { return nil }
                offset = 0
                while offset < length {
                    output[written] = utf8[index + offset]
                    written += 1
                    offset += 1
                }
            }
            index += length
        }
        return written
    }

    /// Allocating convenience for building indexes and tests.
    public static func fold(_ utf8: [UInt8]) -> [UInt8]? {
        let capacity = utf8.count * nameFoldMaxGrowth
        var valid = true
        let folded = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            let written = utf8.withUnsafeBytes { fold($0, into: UnsafeMutableRawBufferPointer(buffer)) }
            valid = written != nil
            initialized = written ?? 0
        }
        return valid ? folded : nil
    }

    /// A name as the place index keys it: folded, spaces at either end dropped; nil when the
    /// name is not UTF-8.
    public static func key(_ utf8: [UInt8]) -> [UInt8]? {
        guard let folded = fold(utf8) else { return nil }
        let start = folded.firstIndex(where: { $0 != 0x20 }) ?? folded.count
        let end = (folded.lastIndex(where: { $0 != 0x20 }) ?? -1) + 1
        return start < end ? Array(folded[start..<end]) : []
    }

    private static let hangulFirst: UInt32 = 0xAC00
    private static let hangulLast: UInt32 = 0xD7A3

    /// Writes a conjoining jamo (U+1100...U+11FF, three UTF-8 bytes); the caller checked the room.
    @_noAllocation
    private static func writeJamo(_ scalar: UInt32, into output: UnsafeMutableRawBufferPointer, at position: Int) -> Int {
        output[position] = 0xE0 | UInt8(truncatingIfNeeded: scalar >> 12)
        output[position + 1] = 0x80 | UInt8(truncatingIfNeeded: scalar >> 6 & 0x3F)
        output[position + 2] = 0x80 | UInt8(truncatingIfNeeded: scalar & 0x3F)
        return position + 3
    }

    /// The packed run of `nameFoldRuns` holding `scalar`, or nil when it folds to itself.
    @_noAllocation
    private static func run(containing scalar: UInt32) -> UInt64? {
        let key = UInt64(scalar)
        var low = 0
        var high = nameFoldRuns.count
        while low < high {
            let middle = (low + high) / 2
            if nameFoldRuns[middle] >> 43 <= key { low = middle + 1 } else { high = middle }
        }
        if low == 0 { return nil }
        let run = nameFoldRuns[low - 1]
        return key < run >> 43 + (run >> 32 & 0x7FF) ? run : nil
    }
}
