/// Cuts an NMEA 0183 byte stream into checked sentences in a fixed buffer.
///
/// A sentence starts at '$' and ends at CR or LF (CRLF, LF and CR endings all occur in the field).
/// Anything outside a sentence is junk; a '$' inside a sentence means the previous one was cut
/// off (spliced); a control byte means line noise; more than `maximumLength` bytes means it is not
/// NMEA. All of these are rejected and counted, and framing restarts at the next '$', so one bad
/// byte costs at most one sentence. The checksum is accumulated while bytes are copied, so each
/// byte is touched once.
public struct NMEAFramer {
    /// NMEA 0183 allows 82 characters; real receivers send more (high-precision GGA is ~92,
    /// proprietary status sentences longer). 120 keeps every standard sentence in the field and
    /// bounds the buffer.
    public static let maximumLength = 120

    public enum Rejection: Equatable, Sendable {
        case spliced, garbled, overlong, badChecksum, missingChecksum, malformedChecksum
    }

    /// What `advance` stopped at.
    public enum Step: Equatable {
        /// The input ran out in the middle of (or between) sentences.
        case needMoreBytes
        /// A checksum-valid sentence is ready for `withSentence` (from '$' to before '*').
        case sentence
        case rejected(Rejection)
    }

    private enum State { case idle, inSentence, skipping }

    private var buffer = InlineArray<120, UInt8>(repeating: 0)
    private var length = 0
    /// Offset of '*' in the buffer, or -1 while none was seen.
    private var starOffset = -1
    private var checksum: UInt8 = 0
    private var state = State.idle
    private var inJunk = false
    /// Accept sentences that carry no `*hh` checksum (some old receivers omit it).
    public var allowMissingChecksum: Bool
    /// Runs of bytes outside any sentence, and '$$' doubled starts.
    public private(set) var junkRuns = 0
    public private(set) var junkBytes = 0
    public private(set) var doubledDollars = 0
    /// Length of the completed sentence's checked part ('$' up to, not including, '*').
    public private(set) var sentenceLength = 0

    public init(allowMissingChecksum: Bool = false) {
        self.allowMissingChecksum = allowMissingChecksum
    }

    /// Consumes `bytes` from `start` until a sentence completes, one is rejected, or the bytes
    /// run out. Returns what happened and where to continue.
    @_noAllocation
    public mutating func advance(_ bytes: UnsafeRawBufferPointer, from start: Int) -> (step: Step, next: Int) {
        var index = start
        let end = bytes.count
        while index < end {
            let byte = bytes[index]
            index += 1
            switch state {
            case .idle:
                if byte == UInt8(ascii: "$") { begin() }
                else if byte == ASCII.carriageReturn || byte == ASCII.newline { inJunk = false }
                else { noteJunk() }
            case .skipping:
                if byte == UInt8(ascii: "$") { begin() }
                else if byte == ASCII.carriageReturn || byte == ASCII.newline { state = .idle; inJunk = false }
            case .inSentence:
                if starOffset < 0 && NMEAFramer.isOrdinary(byte) && length < NMEAFramer.maximumLength {
                    index = copyOrdinary(bytes, from: index - 1)
                    continue
                }
                if let step = special(byte) { return (step, index) }
            }
        }
        return (.needMoreBytes, index)
    }

    /// Everything but ordinary sentence bytes: endings, '$', '*', control bytes, overflow.
    private mutating func special(_ byte: UInt8) -> Step? {
        switch byte {
        case UInt8(ascii: "$"):
            if length == 1 {
                doubledDollars += 1
                return nil
            }
            begin()
            return .rejected(.spliced)
        case ASCII.carriageReturn, ASCII.newline:
            state = .idle
            inJunk = false
            return finish()
        default:
            break
        }
        if byte < 0x20 || byte > 0x7E {
            state = .skipping
            return .rejected(.garbled)
        }
        if length == NMEAFramer.maximumLength {
            state = .skipping
            return .rejected(.overlong)
        }
        if byte == UInt8(ascii: "*") && starOffset < 0 { starOffset = length }
        else if starOffset < 0 { checksum ^= byte }
        store(byte)
        return nil
    }

    /// A printable byte that is neither '$' nor '*': the body of a sentence.
    @inline(__always)
    private static func isOrdinary(_ byte: UInt8) -> Bool {
        byte > UInt8(ascii: "$") && byte <= 0x7E && byte != UInt8(ascii: "*")
    }

    /// The hot loop: ordinary bytes before the '*' go into the buffer, the checksum accumulated
    /// over them, until a byte needs a decision or the buffer is full. The run is found first and
    /// copied in one go, so the loop keeps the checksum in a register rather than storing it with
    /// every byte. Returns the next index.
    @inline(__always)
    private mutating func copyOrdinary(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int {
        var index = start
        var sum = checksum
        let limit = min(bytes.count, start + (NMEAFramer.maximumLength - length))
        while index < limit {
            let byte = bytes[index]
            guard NMEAFramer.isOrdinary(byte) else { break }
            sum ^= byte
            index += 1
        }
        let count = index - start
        let offset = length
        withUnsafeMutablePointer(to: &buffer) { storage in
            (UnsafeMutableRawPointer(storage) + offset).copyMemory(from: bytes.baseAddress! + start, byteCount: count)
        }
        length = offset + count
        checksum = sum
        return index
    }

    @inline(__always)
    private mutating func store(_ byte: UInt8) {
        buffer[unchecked: length] = byte
        length += 1
    }

    private mutating func begin() {
        buffer[0] = UInt8(ascii: "$")
        length = 1
        starOffset = -1
        checksum = 0
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
    private mutating func finish() -> Step? {
        if starOffset < 0 {
            if length <= 1 { return nil }
            guard allowMissingChecksum else { return .rejected(.missingChecksum) }
            sentenceLength = length
            return .sentence
        }
        guard length == starOffset + 3,
              let high = hexDigitValue(buffer[starOffset + 1]), let low = hexDigitValue(buffer[starOffset + 2]) else {
            return .rejected(.malformedChecksum)
        }
        guard high << 4 | low == checksum else { return .rejected(.badChecksum) }
        sentenceLength = starOffset
        return .sentence
    }

    /// The completed sentence, valid until the next `advance`.
    @inline(__always)
    public mutating func withSentence<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        let count = sentenceLength
        return withUnsafeMutablePointer(to: &buffer) { pointer in
            body(UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: count))
        }
    }
}
