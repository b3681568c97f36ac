/// Cuts an NMEA 0183 byte stream into checked sentences, one byte at a time, in a fixed buffer.
///
/// A sentence starts at '$' and ends at CR or LF (CRLF, LF and CR endings all occur in the field).
/// Anything outside a sentence is junk; a '$' inside a sentence means the previous one was cut
/// off (spliced); a control byte means line noise; more than `maximumLength` bytes means it is not
/// NMEA. All of these are rejected and counted, and framing restarts at the next '$', so one bad
/// byte costs at most one sentence.
public struct NMEAFramer {
    /// NMEA 0183 allows 82 characters; real receivers send more (high-precision GGA is ~92,
    /// proprietary status sentences longer). 120 keeps every standard sentence in the field and
    /// bounds the buffer.
    public static let maximumLength = 120

    public enum Rejection: Equatable, Sendable {
        case spliced, garbled, overlong, badChecksum, missingChecksum, malformedChecksum
    }

    /// What one byte completed, if anything.
    public enum Step: Equatable {
        case none
        /// A checksum-valid sentence is in `sentence` (from '$' to before '*').
        case sentence
        case rejected(Rejection)
    }

    private enum State { case idle, inSentence, skipping }

    private var buffer = InlineArray<120, UInt8>(repeating: 0)
    private var length = 0
    private var state = State.idle
    private var inJunk = false
    /// Accept sentences that carry no `*hh` checksum (some old receivers omit it).
    public var allowMissingChecksum: Bool
    /// Runs of bytes outside any sentence, and '$$' doubled starts.
    public private(set) var junkRuns = 0
    public private(set) var junkBytes = 0
    public private(set) var doubledDollars = 0

    public init(allowMissingChecksum: Bool = false) {
        self.allowMissingChecksum = allowMissingChecksum
    }

    /// Length of the completed sentence's checked part ('$' up to, not including, '*').
    public private(set) var sentenceLength = 0

    @_noAllocation
    public mutating func push(_ byte: UInt8) -> Step {
        switch state {
        case .idle:
            if byte == UInt8(ascii: "$") { start(); return .none }
            if byte != ASCII.carriageReturn && byte != ASCII.newline { noteJunk() } else { inJunk = false }
            return .none
        case .skipping:
            if byte == UInt8(ascii: "$") { start() }
            else if byte == ASCII.carriageReturn || byte == ASCII.newline { state = .idle; inJunk = false }
            return .none
        case .inSentence:
            break
        }
        if byte == UInt8(ascii: "$") {
            if length == 1 {
                doubledDollars += 1
                return .none
            }
            start()
            return .rejected(.spliced)
        }
        if byte == ASCII.carriageReturn || byte == ASCII.newline {
            state = .idle
            inJunk = false
            return finish()
        }
        if byte < 0x20 || byte > 0x7E {
            state = .skipping
            return .rejected(.garbled)
        }
        if length == NMEAFramer.maximumLength {
            state = .skipping
            return .rejected(.overlong)
        }
        buffer[length] = byte
        length += 1
        return .none
    }

    private mutating func start() {
        buffer[0] = UInt8(ascii: "$")
        length = 1
        state = .inSentence
        inJunk = false
    }

    private mutating func noteJunk() {
        junkBytes += 1
        if !inJunk {
            junkRuns += 1
            inJunk = true
        }
    }

    /// Checks the `*hh` checksum: XOR of every byte between '$' and '*'.
    private mutating func finish() -> Step {
        var checksum: UInt8 = 0
        var index = 1
        while index < length, buffer[index] != UInt8(ascii: "*") {
            checksum ^= buffer[index]
            index += 1
        }
        if index == length {
            if length <= 1 { return .none }
            guard allowMissingChecksum else { return .rejected(.missingChecksum) }
            sentenceLength = length
            return .sentence
        }
        guard length == index + 3, let high = hexDigitValue(buffer[index + 1]), let low = hexDigitValue(buffer[index + 2]) else {
            return .rejected(.malformedChecksum)
        }
        guard high << 4 | low == checksum else { return .rejected(.badChecksum) }
        sentenceLength = index
        return .sentence
    }

    /// The completed sentence, valid until the next `push`.
    public func withSentence<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        withUnsafeBytes(of: buffer) { raw in
            body(UnsafeBufferPointer(start: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), count: sentenceLength))
        }
    }
}
