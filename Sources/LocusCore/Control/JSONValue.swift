/// A parsed JSON document, for the control protocol's requests (small messages: the server bounds
/// their size before parsing, and nesting is bounded here).
public indirect enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([JSONMember])

    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    public var string: String? { if case .string(let value) = self { return value } else { return nil } }
    public var number: Double? { if case .number(let value) = self { return value } else { return nil } }
    public var bool: Bool? { if case .bool(let value) = self { return value } else { return nil } }
    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// An integer-valued number within `range`.
    public func integer(in range: ClosedRange<Int64>) -> Int64? {
        guard let value = number, value == value.rounded(.towardZero), value >= Double(range.lowerBound), value <= Double(range.upperBound) else { return nil }
        return Int64(value)
    }
}

public struct JSONMember: Sendable {
    public var key: String
    public var value: JSONValue
}

public struct JSONError: Error, Equatable, CustomStringConvertible {
    public var offset: Int
    public var reason: String
    public var description: String { "invalid JSON at byte \(offset + 1): \(reason)" }
}

/// RFC 8259, strictly: one value, no trailing commas, no comments, UTF-8 validated, duplicate keys
/// refused (a request must not mean two things).
public struct JSONParser {
    public static let maximumDepth = 16

    private let bytes: [UInt8]
    private var position = 0

    public static func parse(_ bytes: [UInt8]) throws(JSONError) -> JSONValue {
        if let bad = UTF8Validation.firstInvalidByte(in: bytes) { throw JSONError(offset: bad, reason: "not valid UTF-8") }
        var parser = JSONParser(bytes: bytes)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        if parser.position < bytes.count { throw parser.error("unexpected text after the value") }
        return value
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    /// The byte range of a top-level member's value, as sent: a client that prints part of a
    /// reply prints the agent's own text, numbers unchanged.
    public static func memberRange(_ key: String, in bytes: [UInt8]) -> Range<Int>? {
        var parser = JSONParser(bytes: bytes)
        parser.skipSpace()
        guard parser.current == UInt8(ascii: "{") else { return nil }
        parser.position += 1
        while true {
            parser.skipSpace()
            guard parser.current == UInt8(ascii: "\""), let name = try? parser.string() else { return nil }
            parser.skipSpace()
            guard parser.current == UInt8(ascii: ":") else { return nil }
            parser.position += 1
            parser.skipSpace()
            let start = parser.position
            guard (try? parser.value(depth: 1)) != nil else { return nil }
            if name == key { return start..<parser.position }
            parser.skipSpace()
            guard parser.current == UInt8(ascii: ",") else { return nil }
            parser.position += 1
        }
    }

    /// The byte ranges of the elements of the array at `range` (from `memberRange`).
    public static func elementRanges(in bytes: [UInt8], array range: Range<Int>) -> [Range<Int>]? {
        var parser = JSONParser(bytes: Array(bytes[..<range.upperBound]))
        parser.position = range.lowerBound
        guard parser.current == UInt8(ascii: "[") else { return nil }
        parser.position += 1
        var ranges: [Range<Int>] = []
        parser.skipSpace()
        if parser.current == UInt8(ascii: "]") { return ranges }
        while true {
            parser.skipSpace()
            let start = parser.position
            guard (try? parser.value(depth: 1)) != nil else { return nil }
            ranges.append(start..<parser.position)
            parser.skipSpace()
            if parser.current == UInt8(ascii: "]") { return ranges }
            guard parser.current == UInt8(ascii: ",") else { return nil }
            parser.position += 1
        }
    }

    private func error(_ reason: String) -> JSONError { JSONError(offset: position, reason: reason) }

    private var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func skipSpace() {
        while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { position += 1 }
    }

    private mutating func literal(_ word: StaticString, _ value: JSONValue) throws(JSONError) -> JSONValue {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count else { throw error("unexpected end") }
        for index in 0..<count where bytes[position + index] != word.utf8Start[index] { throw error("unexpected character") }
        position += count
        return value
    }

    private mutating func value(depth: Int) throws(JSONError) -> JSONValue {
        guard depth < JSONParser.maximumDepth else { throw error("nested deeper than \(JSONParser.maximumDepth) levels") }
        guard let byte = current else { throw error("unexpected end") }
        switch byte {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw error("unexpected character")
        }
    }

    private mutating func object(depth: Int) throws(JSONError) -> JSONValue {
        position += 1
        var members: [JSONMember] = []
        skipSpace()
        if current == UInt8(ascii: "}") { position += 1; return .object(members) }
        while true {
            skipSpace()
            guard current == UInt8(ascii: "\"") else { throw error("expected a quoted key") }
            let keyStart = position
            let key = try string()
            if members.contains(where: { $0.key == key }) { throw JSONError(offset: keyStart, reason: "duplicate key '\(key)'") }
            skipSpace()
            guard current == UInt8(ascii: ":") else { throw error("expected ':'") }
            position += 1
            skipSpace()
            members.append(JSONMember(key: key, value: try value(depth: depth + 1)))
            skipSpace()
            if current == UInt8(ascii: ",") { position += 1; continue }
            if current == UInt8(ascii: "}") { position += 1; return .object(members) }
            throw error("expected ',' or '}'")
        }
    }

    private mutating func array(depth: Int) throws(JSONError) -> JSONValue {
        position += 1
        var elements: [JSONValue] = []
        skipSpace()
        if current == UInt8(ascii: "]") { position += 1; return .array(elements) }
        while true {
            skipSpace()
            elements.append(try value(depth: depth + 1))
            skipSpace()
            if current == UInt8(ascii: ",") { position += 1; continue }
            if current == UInt8(ascii: "]") { position += 1; return .array(elements) }
            throw error("expected ',' or ']'")
        }
    }

    private mutating func hexDigit() throws(JSONError) -> UInt32 {
        guard let byte = current else { throw error("unexpected end in \\u escape") }
        position += 1
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(byte - 0x30)
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(byte - 0x61 + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt32(byte - 0x41 + 10)
        default: throw JSONError(offset: position - 1, reason: "bad hexadecimal digit in \\u escape")
        }
    }

    private mutating func codeUnit() throws(JSONError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 { value = value << 4 | (try hexDigit()) }
        return value
    }

    private mutating func string() throws(JSONError) -> String {
        position += 1
        let start = position
        // The common case, a string without escapes: its bytes as they stand, with no copy.
        while let byte = current, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\"), byte >= 0x20 { position += 1 }
        if current == UInt8(ascii: "\"") {
            position += 1
            return String(decoding: bytes[start..<(position - 1)], as: UTF8.self)
        }
        var result = Array(bytes[start..<position])
        while true {
            guard let byte = current else { throw error("unterminated string") }
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: result, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let escaped = current else { throw error("unterminated escape") }
                position += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): result.append(escaped)
                case UInt8(ascii: "b"): result.append(0x08)
                case UInt8(ascii: "f"): result.append(0x0C)
                case UInt8(ascii: "n"): result.append(0x0A)
                case UInt8(ascii: "r"): result.append(0x0D)
                case UInt8(ascii: "t"): result.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try codeUnit()
                    if scalar >= 0xD800 && scalar < 0xDC00 {
                        guard current == UInt8(ascii: "\\"), position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "u") else {
                            throw error("unpaired surrogate in \\u escape")
                        }
                        position += 2
                        let low = try codeUnit()
                        guard low >= 0xDC00 && low < 0xE000 else { throw error("unpaired surrogate in \\u escape") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if scalar >= 0xDC00 && scalar < 0xE000 {
                        throw error("unpaired surrogate in \\u escape")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                    result.append(contentsOf: Array(String(Character(unicode)).utf8))
                default:
                    throw JSONError(offset: position - 1, reason: "unknown escape")
                }
            case 0x00...0x1F:
                throw JSONError(offset: position - 1, reason: "control character in a string (escape it)")
            default:
                result.append(byte)
            }
        }
    }

    private mutating func number() throws(JSONError) -> JSONValue {
        let start = position
        if current == UInt8(ascii: "-") { position += 1 }
        guard let first = current, isDigit(first) else { throw error("expected a digit") }
        position += 1
        if first == UInt8(ascii: "0"), let next = current, isDigit(next) { throw error("leading zero") }
        while let byte = current, isDigit(byte) { position += 1 }
        if current == UInt8(ascii: ".") {
            position += 1
            guard let byte = current, isDigit(byte) else { throw error("expected a digit after '.'") }
            while let byte = current, isDigit(byte) { position += 1 }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard let byte = current, isDigit(byte) else { throw error("expected a digit in the exponent") }
            while let byte = current, isDigit(byte) { position += 1 }
        }
        guard position - start <= 40, let value = Double(String(decoding: bytes[start..<position], as: UTF8.self)), value.isFinite else {
            throw JSONError(offset: start, reason: "number out of range")
        }
        return .number(value)
    }
}
