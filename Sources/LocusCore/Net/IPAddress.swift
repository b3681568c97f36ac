/// An IPv4 or IPv6 address in network byte order, parsed from text without the C library
/// (inet_pton's rules: dotted quads of decimal octets without leading zeros; IPv6 groups with one
/// "::" and an optional dotted-quad tail, RFC 4291 §2.2). Pure, so the resolver's files
/// (/etc/resolv.conf, /etc/hosts) and the site file's broker address read the same everywhere.
public struct IPAddress: Equatable, Sendable, CustomStringConvertible {
    public enum Family: Sendable { case v4, v6 }

    public let family: Family
    /// 4 bytes used for IPv4, 16 for IPv6.
    private var storage: InlineArray<16, UInt8>

    public var byteCount: Int { family == .v4 ? 4 : 16 }

    public subscript(index: Int) -> UInt8 {
        precondition(index < byteCount)
        return storage[index]
    }

    /// From 4 (IPv4) or 16 (IPv6) bytes, as a DNS answer or a socket address holds them.
    public init?(bytes: UnsafeRawBufferPointer) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        family = bytes.count == 4 ? .v4 : .v6
        storage = InlineArray(repeating: 0)
        for index in 0..<bytes.count { storage[index] = bytes[index] }
    }

    public init?(_ text: String) {
        var text = text
        guard let parsed = text.withUTF8({ IPAddress(text: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = parsed
    }

    /// Parses the whole of `text`; nil when it is not an address.
    @_noAllocation
    public init?(text: UnsafeRawBufferPointer) {
        storage = InlineArray(repeating: 0)
        var hasColon = false
        for byte in text where byte == UInt8(ascii: ":") { hasColon = true }
        if hasColon {
            family = .v6
            guard IPAddress.parseV6(text, into: &storage) else { return nil }
        } else {
            family = .v4
            guard IPAddress.parseV4(text, into: &storage, at: 0) else { return nil }
        }
    }

    public static func == (left: IPAddress, right: IPAddress) -> Bool {
        guard left.family == right.family else { return false }
        for index in 0..<left.byteCount where left.storage[index] != right.storage[index] { return false }
        return true
    }

    /// `a.b.c.d`, or IPv6 as RFC 5952 writes it (lower case, the longest run of two or more zero
    /// groups as "::", the first such run on a tie).
    public var description: String {
        if family == .v4 { return "\(storage[0]).\(storage[1]).\(storage[2]).\(storage[3])" }
        var groups: [UInt16] = []
        for index in 0..<8 { groups.append(UInt16(storage[2 * index]) << 8 | UInt16(storage[2 * index + 1])) }
        var bestStart = -1, bestLength = 0, runStart = -1
        for index in 0...8 {
            if index < 8 && groups[index] == 0 {
                if runStart < 0 { runStart = index }
            } else if runStart >= 0 {
                if index - runStart > bestLength && index - runStart >= 2 { bestStart = runStart; bestLength = index - runStart }
                runStart = -1
            }
        }
        func hex(_ range: Range<Int>) -> String { groups[range].map { String($0, radix: 16) }.joined(separator: ":") }
        guard bestStart >= 0 else { return hex(0..<8) }
        return hex(0..<bestStart) + "::" + hex((bestStart + bestLength)..<8)
    }

    /// Four decimal octets, no leading zeros (inet_pton refuses them), into `out[at..<at+4]`.
    @_noAllocation
    private static func parseV4(_ text: UnsafeRawBufferPointer, into out: inout InlineArray<16, UInt8>, at start: Int) -> Bool {
        var octet = 0, digits = 0, parts = 0
        for index in 0...text.count {
            if index == text.count || text[index] == UInt8(ascii: ".") {
                guard digits > 0, parts < 4 else { return false }
                out[start + parts] = UInt8(octet)
                parts += 1
                octet = 0
                digits = 0
                continue
            }
            let byte = text[index]
            guard byte >= 0x30, byte <= 0x39, !(digits == 1 && octet == 0) else { return false }
            octet = octet * 10 + Int(byte - 0x30)
            digits += 1
            guard octet <= 255 else { return false }
        }
        return parts == 4
    }

    /// Eight groups of one to four hex digits, at most one "::" standing for one or more zero
    /// groups, optionally ending in a dotted quad (two groups).
    @_noAllocation
    private static func parseV6(_ text: UnsafeRawBufferPointer, into out: inout InlineArray<16, UInt8>) -> Bool {
        let count = text.count
        guard count >= 2 else { return false }
        var groups = 0          // groups written, 2 bytes each
        var gap = -1            // where "::" stands, in groups
        var index = 0
        if text[0] == UInt8(ascii: ":") {
            guard text[1] == UInt8(ascii: ":") else { return false }
            gap = 0
            index = 2
            if index == count { return true }   // "::"
        }
        while index < count {
            // One group, or a dotted-quad tail.
            var value = 0, digits = 0, end = index
            while end < count, let digit = hexDigit(text[end]) {
                value = value << 4 | digit
                digits += 1
                end += 1
            }
            if end < count && text[end] == UInt8(ascii: ".") {
                guard groups <= 6 else { return false }
                guard parseV4(UnsafeRawBufferPointer(rebasing: text[index..<count]), into: &out, at: groups * 2) else { return false }
                groups += 2
                index = count
                break
            }
            guard digits >= 1, digits <= 4, groups < 8 else { return false }
            out[groups * 2] = UInt8(value >> 8)
            out[groups * 2 + 1] = UInt8(value & 0xFF)
            groups += 1
            index = end
            guard index < count else { break }
            guard text[index] == UInt8(ascii: ":") else { return false }
            index += 1
            if index < count && text[index] == UInt8(ascii: ":") {
                guard gap < 0 else { return false }
                gap = groups
                index += 1
                if index == count { break }
            } else if index == count {
                return false   // a trailing single colon
            }
        }
        if gap < 0 { return groups == 8 }
        guard groups < 8 else { return false }   // "::" stands for at least one group
        // Move the groups after the gap to the end; zeros between.
        let after = groups - gap
        for position in stride(from: after - 1, through: 0, by: -1) {
            let from = (gap + position) * 2, to = (8 - after + position) * 2
            out[to] = out[from]
            out[to + 1] = out[from + 1]
        }
        for position in gap..<(8 - after) {
            out[position * 2] = 0
            out[position * 2 + 1] = 0
        }
        return true
    }

    @_noAllocation
    private static func hexDigit(_ byte: UInt8) -> Int? {
        switch byte {
        case 0x30...0x39: return Int(byte - 0x30)
        case 0x61...0x66: return Int(byte - 0x61 + 10)
        case 0x41...0x46: return Int(byte - 0x41 + 10)
        default: return nil
        }
    }
}
