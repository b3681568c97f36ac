/// TOML integer and float literals, checked against the TOML 1.0 grammar byte by byte before
/// any conversion, so that "1__0", "01", "0x" and "1e" are rejected with a reason instead of
/// being half-accepted by a lenient converter.
enum TOMLNumber: Equatable {
    case integer(Int64)
    case float(Double)
    case invalid(String)

    static func parse(_ token: [UInt8]) -> TOMLNumber {
        var body = token[...]
        var negative = false
        var signed = false
        if let first = body.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") {
            negative = first == UInt8(ascii: "-")
            signed = true
            body = body.dropFirst()
        }
        if body.elementsEqual("inf".utf8) { return .float(negative ? -Double.infinity : Double.infinity) }
        if body.elementsEqual("nan".utf8) { return .float(negative ? -Double.nan : Double.nan) }
        if body.count > 2, body[body.startIndex] == UInt8(ascii: "0") {
            let radix: Int64
            switch body[body.startIndex + 1] {
            case UInt8(ascii: "x"): radix = 16
            case UInt8(ascii: "o"): radix = 8
            case UInt8(ascii: "b"): radix = 2
            default: radix = 0
            }
            if radix != 0 {
                if signed { return .invalid("number (hexadecimal, octal and binary integers take no sign)") }
                return prefixedInteger(body.dropFirst(2), radix: radix)
            }
        }
        return decimal(body, negative: negative, token: token)
    }

    private static func prefixedInteger(_ digits: ArraySlice<UInt8>, radix: Int64) -> TOMLNumber {
        guard let groups = digitGroups(digits, radix: radix) else {
            return .invalid("integer (underscores must sit between digits)")
        }
        var value: Int64 = 0
        for byte in groups {
            let digit = Int64(hexDigitValue(byte)!)
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: radix)
            let (sum, overflow2) = shifted.addingReportingOverflow(digit)
            if overflow1 || overflow2 { return .invalid("integer (it does not fit in 64 bits)") }
            value = sum
        }
        return .integer(value)
    }

    private static func decimal(_ body: ArraySlice<UInt8>, negative: Bool, token: [UInt8]) -> TOMLNumber {
        // Split into integer part, fraction and exponent at the first '.' and 'e'/'E'.
        var integerEnd = body.startIndex
        while integerEnd < body.endIndex, body[integerEnd] != ASCII.dot, body[integerEnd] | 0x20 != UInt8(ascii: "e") {
            integerEnd += 1
        }
        let integerPart = body[body.startIndex..<integerEnd]
        guard let integerDigits = digitGroups(integerPart, radix: 10) else {
            return .invalid("number")
        }
        if integerDigits.count > 1, integerDigits[0] == UInt8(ascii: "0") {
            return .invalid("number (leading zeros are not allowed)")
        }
        var cursor = integerEnd
        var isFloat = false
        if cursor < body.endIndex, body[cursor] == ASCII.dot {
            isFloat = true
            var fractionEnd = cursor + 1
            while fractionEnd < body.endIndex, body[fractionEnd] | 0x20 != UInt8(ascii: "e") { fractionEnd += 1 }
            guard digitGroups(body[(cursor + 1)..<fractionEnd], radix: 10) != nil else {
                return .invalid("float (a '.' needs digits on both sides)")
            }
            cursor = fractionEnd
        }
        if cursor < body.endIndex {
            isFloat = true
            var exponentStart = cursor + 1
            if exponentStart < body.endIndex, body[exponentStart] == UInt8(ascii: "+") || body[exponentStart] == UInt8(ascii: "-") {
                exponentStart += 1
            }
            guard digitGroups(body[exponentStart..<body.endIndex], radix: 10) != nil else {
                return .invalid("float (an exponent needs digits)")
            }
        }
        if !isFloat { return integer(integerDigits, negative: negative) }
        var cleaned = ""
        for byte in token where byte != UInt8(ascii: "_") { cleaned.unicodeScalars.append(Unicode.Scalar(byte)) }
        guard let value = Double(cleaned) else { return .invalid("float") }
        if value.isInfinite { return .invalid("float (it is too large for a 64-bit float)") }
        return .float(value)
    }

    private static func integer(_ digits: [UInt8], negative: Bool) -> TOMLNumber {
        // Accumulate negatively so that -9223372036854775808 fits.
        var value: Int64 = 0
        for byte in digits {
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = shifted.subtractingReportingOverflow(Int64(byte - 0x30))
            if overflow1 || overflow2 { return .invalid("integer (it does not fit in 64 bits)") }
            value = sum
        }
        if negative { return .integer(value) }
        if value == Int64.min { return .invalid("integer (it does not fit in 64 bits)") }
        return .integer(-value)
    }

    /// The digits of `bytes` with single underscores between digits removed, or nil when the
    /// text is empty, holds a non-digit, or has an underscore at either end or next to another.
    private static func digitGroups(_ bytes: ArraySlice<UInt8>, radix: Int64) -> [UInt8]? {
        var digits: [UInt8] = []
        var previousWasDigit = false
        for byte in bytes {
            if byte == UInt8(ascii: "_") {
                if !previousWasDigit { return nil }
                previousWasDigit = false
                continue
            }
            guard let value = hexDigitValue(byte), Int64(value) < radix else { return nil }
            digits.append(byte)
            previousWasDigit = true
        }
        return previousWasDigit ? digits : nil
    }
}
