import LocusCore

/// JSON text from LocusCore's `JSONValue` (members in their order), and the checks that keep
/// a value PostgreSQL would refuse out of a batch: a refused row would fail its whole
/// transaction, so every value is checked here first and a bad record is quarantined alone.
public enum FleetJSON {
    /// Compact JSON text. Integral numbers within ±2^53 are written without a fraction; others
    /// in Swift's shortest form that reads back as the same Double.
    public static func text(_ value: JSONValue) -> String {
        var output: [UInt8] = []
        write(value, into: &output)
        return String(decoding: output, as: UTF8.self)
    }

    /// An object of `members` as JSON text.
    public static func text(members: [JSONMember]) -> String { text(.object(members)) }

    /// A member's value for `object`: JSON null for nil.
    public enum Field {
        case string(String?)
        case integer(Int64?)
        case boolean(Bool?)
        /// JSON text written as it is.
        case raw(String)
    }

    /// `{"key":value,...}` in the order given.
    public static func object(_ fields: [(String, Field)]) -> String {
        var output: [UInt8] = [UInt8(ascii: "{")]
        for (index, (key, field)) in fields.enumerated() {
            if index > 0 { output.append(UInt8(ascii: ",")) }
            writeString(key, into: &output)
            output.append(UInt8(ascii: ":"))
            switch field {
            case .string(let value?): writeString(value, into: &output)
            case .integer(let value?): output.append(contentsOf: String(value).utf8)
            case .boolean(let value?): output.append(contentsOf: (value ? "true" : "false").utf8)
            case .raw(let text): output.append(contentsOf: text.utf8)
            case .string(nil), .integer(nil), .boolean(nil): output.append(contentsOf: "null".utf8)
            }
        }
        output.append(UInt8(ascii: "}"))
        return String(decoding: output, as: UTF8.self)
    }

    static func write(_ value: JSONValue, into output: inout [UInt8]) {
        switch value {
        case .null: output.append(contentsOf: "null".utf8)
        case .bool(let flag): output.append(contentsOf: (flag ? "true" : "false").utf8)
        case .number(let number): output.append(contentsOf: numberText(number).utf8)
        case .string(let string): writeString(string, into: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                write(element, into: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                writeString(member.key, into: &output)
                output.append(UInt8(ascii: ":"))
                write(member.value, into: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    static func numberText(_ number: Double) -> String {
        let exactIntegers = 9_007_199_254_740_992.0
        if number == number.rounded(.towardZero) && abs(number) <= exactIntegers { return String(Int64(number)) }
        return "\(number)"
    }

    static func writeString(_ string: String, into output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        output.appendEscaping(string) { byte in byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") } escape: { byte, output in
            switch byte {
            case 0x0A: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x09: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x0D: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x00..<0x20: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), 0x30, 0x30, hexDigit(byte >> 4), hexDigit(byte & 0x0F)])
            default: output.append(contentsOf: [UInt8(ascii: "\\"), byte])
            }
        }
        output.append(UInt8(ascii: "\""))
    }

    static func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x61 + nibble - 10 }

    /// The first string (key or value) in `value` holding U+0000, which neither `text` nor
    /// `jsonb` can store; nil when there is none.
    static func nulString(in value: JSONValue) -> String? {
        switch value {
        case .string(let string): return string.utf8.contains(0) ? string : nil
        case .array(let elements): return elements.lazy.compactMap(nulString).first
        case .object(let members):
            for member in members {
                if member.key.utf8.contains(0) { return member.key }
                if let found = nulString(in: member.value) { return found }
            }
            return nil
        default: return nil
        }
    }

    /// A gateway's UTC time as the log writes it, `2024-03-14T00:05:30Z` or with a fraction of
    /// up to 9 digits (`...:30.250Z`), in years 1 to 9999 with a real calendar date: what
    /// PostgreSQL's timestamptz reads exactly. False for anything else.
    public static func isTimestamp(_ text: String) -> Bool { timestampMs(text) != nil }

    /// Such a time as milliseconds since 1970 (the fraction cut to milliseconds); nil for
    /// anything `isTimestamp` refuses.
    public static func timestampMs(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 30, bytes.last == UInt8(ascii: "Z") else { return nil }
        let layout: [(Int, UInt8)] = [(4, UInt8(ascii: "-")), (7, UInt8(ascii: "-")), (10, UInt8(ascii: "T")), (13, UInt8(ascii: ":")), (16, UInt8(ascii: ":"))]
        guard layout.allSatisfy({ bytes[$0.0] == $0.1 }) else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for index in range {
                guard isASCIIDigit(bytes[index]) else { return nil }
                value = value * 10 + Int(bytes[index] - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
              let minute = number(14..<16), let second = number(17..<19) else { return nil }
        guard year >= 1, (1...12).contains(month), hour < 24, minute < 60, second < 60 else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        guard (1...days).contains(day) else { return nil }
        let rest = bytes[19..<(bytes.count - 1)]
        var milliseconds = 0
        if !rest.isEmpty {
            guard rest.first == UInt8(ascii: "."), (2...10).contains(rest.count), rest.dropFirst().allSatisfy(isASCIIDigit) else { return nil }
            for index in 0..<3 { milliseconds = milliseconds * 10 + (index + 1 < rest.count ? Int(rest[20 + index] - 0x30) : 0) }
        }
        let seconds = CivilDate(year: year, month: month, day: day).daysSinceEpoch * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return seconds * 1000 + Int64(milliseconds)
    }

    static func isASCIIDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
}
