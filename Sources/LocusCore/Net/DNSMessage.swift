/// DNS messages for a stub resolver (RFC 1035 §4; AAAA from RFC 3596): the query the agent sends
/// a name server over UDP and the addresses read from its answer. Pure code: the agent resolves
/// a broker's name inside its poll loop, so a slow or absent name server delays the uplink and
/// never the loop (a blocking getaddrinfo could hold it for the resolver's whole timeout).
public enum DNSMessage {
    /// Record types this resolver asks for.
    public enum RecordType: UInt16, Sendable {
        case a = 1
        case aaaa = 28
    }

    /// A query's largest size: header, a name of at most 255 bytes, type and class.
    public static let maximumQueryBytes = 12 + 255 + 4
    /// RFC 1035 §2.3.4: a UDP message is at most 512 bytes without EDNS, which is not asked for.
    public static let maximumUDPBytes = 512

    /// Why a query could not be written or an answer gives no address.
    public enum Failure: Error, Equatable, Sendable {
        /// The host name is not a valid DNS name (empty label, label over 63 bytes, over 253 bytes).
        case badName
        /// RCODE 3: the name does not exist.
        case nameNotFound
        /// RCODE 2 (or another non-zero code): the name server could not answer.
        case serverFailure(UInt8)
        /// The answer was cut (TC): more than fits 512 bytes, which a stub asking for one name's
        /// addresses does not expect.
        case truncated
        /// The name exists but has no address of the type asked for.
        case noAddress
        /// Not an answer to this query (its id, its question or its flags differ).
        case notOurs
        /// The bytes are not a well-formed message.
        case malformed
    }

    /// Writes a recursive query (RD) for `name`'s records of `type` into `buffer`; returns its
    /// length. The id should be random (RFC 5452), the caller's to choose.
    @_noAllocation
    public static func query(id: UInt16, name: UnsafeRawBufferPointer, type: RecordType,
                             into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, Failure> {
        precondition(buffer.count >= maximumQueryBytes)
        // Header: id, flags (RD), one question, no answer, authority or additional records.
        var offset = 0
        put16(id, buffer, &offset)
        put16(0x0100, buffer, &offset)
        put16(1, buffer, &offset)
        for _ in 0..<3 { put16(0, buffer, &offset) }
        guard let length = encodeName(name, into: UnsafeMutableRawBufferPointer(rebasing: buffer[offset...])) else { return .failure(.badName) }
        offset += length
        put16(type.rawValue, buffer, &offset)
        put16(1, buffer, &offset)   // class IN
        return .success(offset)
    }

    @_noAllocation
    private static func put16(_ value: UInt16, _ buffer: UnsafeMutableRawBufferPointer, _ offset: inout Int) {
        buffer[offset] = UInt8(value >> 8)
        buffer[offset + 1] = UInt8(value & 0xFF)
        offset += 2
    }

    /// A host name as labels ("broker.example" -> 6 broker 7 example 0); nil when it is not a
    /// valid name. A trailing dot is allowed; letters, digits, hyphens and underscores only.
    @_noAllocation
    static func encodeName(_ name: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Int? {
        var count = name.count
        if count > 0 && name[count - 1] == UInt8(ascii: ".") { count -= 1 }
        guard count > 0, count <= 253 else { return nil }
        var written = 0
        var labelStart = 0
        var index = 0
        while index <= count {
            if index == count || name[index] == UInt8(ascii: ".") {
                let length = index - labelStart
                guard length > 0, length <= 63 else { return nil }
                out[written] = UInt8(length)
                for position in labelStart..<index { out[written + 1 + position - labelStart] = name[position] }
                written += 1 + length
                labelStart = index + 1
            } else {
                let byte = name[index]
                let allowed = (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
                guard allowed else { return nil }
            }
            index += 1
        }
        out[written] = 0
        return written + 1
    }

    /// The addresses an answer gives for the query with `id` and `type` (4 bytes each for A, 16
    /// for AAAA, in the answer's order), handed to `body` with the record's TTL; returns how many
    /// there were. CNAME records in the chain are passed over: a recursive server puts the
    /// addresses of the name they lead to in the same answer.
    @_noAllocation
    public static func addresses(in message: UnsafeRawBufferPointer, id: UInt16, type: RecordType,
                                 _ body: (UnsafeRawBufferPointer, UInt32) -> Void) -> Result<Int, Failure> {
        addresses(in: message, id: id, type: type, name: nil, body)
    }

    /// The same, and the answer's question must be `name` (case-insensitive, RFC 5452 §9.1):
    /// what a resolver checks before it believes an answer.
    @_noAllocation
    public static func addresses(in message: UnsafeRawBufferPointer, id: UInt16, type: RecordType, name: UnsafeRawBufferPointer?,
                                 _ body: (UnsafeRawBufferPointer, UInt32) -> Void) -> Result<Int, Failure> {
        var reader = DNSReader(message)
        guard let answerID = reader.uint16(), let flags = reader.uint16(), let questions = reader.uint16(), let answers = reader.uint16(),
              reader.uint16() != nil, reader.uint16() != nil else { return .failure(.malformed) }
        // QR set, a standard query's answer.
        guard answerID == id, flags & 0x8000 != 0, flags & 0x7800 == 0 else { return .failure(.notOurs) }
        if flags & 0x0200 != 0 { return .failure(.truncated) }
        switch UInt8(flags & 0x000F) {
        case 0: break
        case 3: return .failure(.nameNotFound)
        case let code: return .failure(.serverFailure(code))
        }
        guard questions == 1 else { return .failure(.notOurs) }
        if let name, !reader.matchName(name) { return .failure(reader.failed ? .malformed : .notOurs) }
        guard reader.skipName(), let questionType = reader.uint16(), reader.uint16() == 1, questionType == type.rawValue else {
            return .failure(reader.failed ? .malformed : .notOurs)
        }
        var found = 0
        for _ in 0..<answers {
            guard reader.skipName(), let recordType = reader.uint16(), let recordClass = reader.uint16(), let ttl = reader.uint32(),
                  let data = reader.data() else { return .failure(.malformed) }
            guard recordClass == 1, recordType == type.rawValue else { continue }
            guard data.count == (type == .a ? 4 : 16) else { return .failure(.malformed) }
            found += 1
            body(data, ttl)
        }
        return found > 0 ? .success(found) : .failure(.noAddress)
    }
}

/// Reads a DNS message front to back; nil (and `failed`) when a field runs past the end.
struct DNSReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0
    private(set) var failed = false

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    @_noAllocation
    mutating func uint16() -> UInt16? {
        guard offset + 2 <= bytes.count else { failed = true; return nil }
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    @_noAllocation
    mutating func uint32() -> UInt32? {
        guard let high = uint16(), let low = uint16() else { return nil }
        return UInt32(high) << 16 | UInt32(low)
    }

    /// A record's RDATA (length-prefixed).
    @_noAllocation
    mutating func data() -> UnsafeRawBufferPointer? {
        guard let length = uint16(), offset + Int(length) <= bytes.count else { failed = true; return nil }
        defer { offset += Int(length) }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + Int(length)])
    }

    /// Whether the name here is `expected` ("broker.example", a trailing dot allowed), compared
    /// without regard to ASCII case; the position does not move (`skipName` steps over it).
    @_noAllocation
    mutating func matchName(_ expected: UnsafeRawBufferPointer) -> Bool {
        var count = expected.count
        if count > 0 && expected[count - 1] == UInt8(ascii: ".") { count -= 1 }
        var at = offset
        var position = 0
        while at < bytes.count {
            let length = Int(bytes[at])
            guard length & 0xC0 == 0 else { return false }   // a question's name is not compressed
            if length == 0 { return position == count + 1 || (count == 0 && position == 0) }
            if position > 0 {
                guard position - 1 < count, expected[position - 1] == UInt8(ascii: ".") else { return false }
            }
            guard at + 1 + length <= bytes.count else { failed = true; return false }
            for index in 0..<length {
                let mine = bytes[at + 1 + index], theirs = position + index < count ? expected[position + index] : 0
                guard position + index < count, DNSReader.folded(mine) == DNSReader.folded(theirs) else { return false }
            }
            position += length + 1
            at += 1 + length
        }
        failed = true
        return false
    }

    /// ASCII letters compare without regard to case in names (RFC 4343).
    @inline(__always)
    static func folded(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }

    /// Steps over a name: labels ending in a zero byte, or in a compression pointer (§4.1.4).
    /// Only the name's own bytes are walked here; where a pointer leads is not needed.
    @_noAllocation
    mutating func skipName() -> Bool {
        var labels = 0
        while offset < bytes.count {
            let length = bytes[offset]
            switch length & 0xC0 {
            case 0x00:
                offset += 1 + Int(length)
                if length == 0 { return offset <= bytes.count }
                labels += 1
                guard labels <= 127 else { failed = true; return false }
            case 0xC0:
                offset += 2
                guard offset <= bytes.count else { failed = true; return false }
                return true
            default:
                failed = true   // 0x40 and 0x80 are reserved label types
                return false
            }
        }
        failed = true
        return false
    }
}
