/// How much a sample of bytes read from the receiver's port looks like NMEA 0183: at the wrong
/// baud rate a UART delivers bytes that never form a sentence with a matching checksum, so
/// counting checksummed sentences against the rest tells a right rate from a wrong one.
public struct NMEABaudScore: Equatable, CustomStringConvertible {
    public var bytes = 0
    /// `$...*hh` sentences whose checksum matches.
    public var sentences = 0
    /// Sentence-shaped runs that fail (bad checksum, no `*hh`, non-printable bytes, too long).
    public var rejected = 0
    /// UBX frame starts (0xB5 0x62): a u-blox receiver set to binary output.
    public var ubxFrames = 0

    public enum Verdict: Equatable { case silent, nmea, ubxOnly, noise }

    public init() {}

    /// The longest sentence NMEA allows is 82 bytes; anything longer is noise.
    static let sentenceBytesMax = 82

    public static func score(_ sample: [UInt8]) -> NMEABaudScore {
        var score = NMEABaudScore()
        score.bytes = sample.count
        var index = 0
        while index < sample.count {
            let byte = sample[index]
            if byte == 0xB5, index + 1 < sample.count, sample[index + 1] == 0x62 { score.ubxFrames += 1 }
            guard byte == 0x24 else {
                index += 1
                continue
            }
            let end = min(sample.count, index + sentenceBytesMax)
            var cursor = index + 1
            while cursor < end, sample[cursor] != 0x0D, sample[cursor] != 0x0A, sample[cursor] != 0x24 { cursor += 1 }
            if cursor == sample.count { break } // a sentence cut off by the end of the sample: neither
            if isValid(sample[index..<cursor]) { score.sentences += 1 } else { score.rejected += 1 }
            index = cursor
        }
        return score
    }

    /// `$BODY*HH` with printable bytes and HH the XOR of BODY.
    static func isValid(_ sentence: ArraySlice<UInt8>) -> Bool {
        guard sentence.count >= 6 else { return false }
        let star = sentence.endIndex - 3
        guard sentence[star] == 0x2A, let high = hexValue(sentence[star + 1]), let low = hexValue(sentence[star + 2]) else { return false }
        var checksum: UInt8 = 0
        for byte in sentence[(sentence.startIndex + 1)..<star] {
            guard byte >= 0x20 && byte < 0x7F else { return false }
            checksum ^= byte
        }
        return checksum == high << 4 | low
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: return byte - 0x30
        case 0x41...0x46: return byte - 0x41 + 10
        case 0x61...0x66: return byte - 0x61 + 10
        default: return nil
        }
    }

    /// NMEA when at least two sentences check and they outnumber the failures three to one; UBX
    /// when only binary frames came; noise otherwise.
    public var verdict: Verdict {
        if bytes == 0 { return .silent }
        if sentences >= 2 && sentences >= 3 * rejected { return .nmea }
        if sentences == 0 && ubxFrames >= 2 { return .ubxOnly }
        return .noise
    }

    /// Whether another rate tried in a scan carries NMEA: two sentences that check and no fewer
    /// than the failures. Looser than the verdict, which passes the configured rate: a busy link
    /// may cut an epoch short (one failed sentence an epoch), while the bytes of a wrong rate
    /// practically never pass a checksum.
    public var carriesNMEA: Bool { sentences >= 2 && sentences >= rejected }

    public var description: String { "\(bytes) bytes, \(sentences) sentences, \(rejected) rejected" }

    /// Rates tried when the configured one gives no NMEA, most common first.
    public static let scanRates = [9600, 38400, 115200, 4800, 57600, 230400, 19200]

    /// Of several rates' samples, the one NMEA came through best (most sentences), if any did.
    public static func likelyRate(_ samples: [(baud: Int, score: NMEABaudScore)]) -> Int? {
        var bestRate: Int? = nil
        var bestSentences = 0
        for sample in samples where sample.score.verdict == .nmea && sample.score.sentences > bestSentences {
            bestRate = sample.baud
            bestSentences = sample.score.sentences
        }
        return bestRate
    }
}
