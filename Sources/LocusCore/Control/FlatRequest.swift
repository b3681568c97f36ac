/// A byte-level reading of the simplest requests, without building a `JSONValue` tree: a flat
/// object (no nested objects or arrays), strings without escapes, numbers, booleans. It answers
/// only when the request is one it knows and every member is valid; anything else (another op,
/// an unknown or repeated key, a bad value) returns nil and the full decoder reads the line, with
/// its error messages. So it changes no request's meaning; it only spares the common ones the
/// parse's allocations. Today: `locate` (a gateway program's usual call, answered at once from
/// the last fix on the agent's allocation-free path).
public enum FlatRequest {
    /// The request on `line` (no newline), or nil for "let the full decoder read it".
    @_noAllocation
    public static func decode(_ line: UnsafeRawBufferPointer) -> (id: Int64?, request: ControlRequest)? {
        var scanner = Scanner(bytes: line)
        guard scanner.skipSpace(), scanner.take(UInt8(ascii: "{")) else { return nil }
        var id: Int64? = nil
        var isLocate = false
        var accuracy: AccuracyTier? = nil
        var maxAgeMs = LocateRequests.defaultMaxAgeMs
        var timeoutMs = LocateRequests.defaultTimeoutMs
        var seen: UInt8 = 0
        guard scanner.skipSpace() else { return nil }
        if scanner.take(UInt8(ascii: "}")) { return nil }
        while true {
            guard scanner.skipSpace(), let key = scanner.string(), scanner.skipSpace(), scanner.take(UInt8(ascii: ":")),
                  scanner.skipSpace() else { return nil }
            let bit: UInt8
            if equals(key, "id") {
                guard let number = scanner.number(), number >= 0, number <= 9_007_199_254_740_992, number == Double(Int64(number)) else { return nil }
                id = Int64(number)
                bit = 1
            } else if equals(key, "v") {
                guard let number = scanner.number(), number == Double(ControlProtocol.version) else { return nil }
                bit = 2
            } else if equals(key, "op") {
                guard let op = scanner.string(), equals(op, "locate") else { return nil }
                isLocate = true
                bit = 4
            } else if equals(key, "accuracy") {
                guard let name = scanner.string(), let tier = tier(name) else { return nil }
                accuracy = tier
                bit = 8
            } else if equals(key, "max_age_s") {
                guard let seconds = scanner.number(), seconds >= 0, seconds <= Double(LocateRequests.maximumMaxAgeMs / 1000) else { return nil }
                maxAgeMs = Int64(seconds * 1000)
                bit = 16
            } else if equals(key, "timeout_s") {
                guard let seconds = scanner.number(), seconds >= 1, seconds <= Double(LocateRequests.maximumTimeoutMs / 1000) else { return nil }
                timeoutMs = Int64(seconds * 1000)
                bit = 32
            } else {
                return nil
            }
            guard seen & bit == 0 else { return nil }
            seen |= bit
            guard scanner.skipSpace() else { return nil }
            if scanner.take(UInt8(ascii: ",")) { continue }
            guard scanner.take(UInt8(ascii: "}")), scanner.skipSpace(), scanner.isAtEnd else { return nil }
            break
        }
        guard isLocate else { return nil }
        return (id, .locate(accuracy: accuracy, maxAgeMs: maxAgeMs, timeoutMs: timeoutMs))
    }

    @inline(__always)
    static func equals(_ bytes: UnsafeRawBufferPointer, _ text: StaticString) -> Bool {
        guard bytes.count == text.utf8CodeUnitCount else { return false }
        let start = text.utf8Start
        for index in 0..<bytes.count where bytes[index] != start[index] { return false }
        return true
    }

    /// The tier named by `bytes` (the names `AccuracyTier.named` knows).
    static func tier(_ bytes: UnsafeRawBufferPointer) -> AccuracyTier? {
        if equals(bytes, "best") { return .best }
        if equals(bytes, "nearestTenMeters") { return .nearestTenMeters }
        if equals(bytes, "hundredMeters") { return .hundredMeters }
        if equals(bytes, "kilometer") { return .kilometer }
        if equals(bytes, "threeKilometers") { return .threeKilometers }
        return nil
    }

    /// Reads forward through the line; every read returns nil (or false) without moving on input
    /// it does not take.
    struct Scanner {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        var isAtEnd: Bool { offset == bytes.count }

        /// Skips JSON white space; always true (for `guard` chains).
        mutating func skipSpace() -> Bool {
            while offset < bytes.count, bytes[offset] == 0x20 || bytes[offset] == 0x09 || bytes[offset] == 0x0D || bytes[offset] == 0x0A {
                offset += 1
            }
            return true
        }

        mutating func take(_ byte: UInt8) -> Bool {
            guard offset < bytes.count, bytes[offset] == byte else { return false }
            offset += 1
            return true
        }

        /// A string without escapes or control characters: its bytes between the quotes.
        mutating func string() -> UnsafeRawBufferPointer? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = offset
            while offset < bytes.count {
                let byte = bytes[offset]
                if byte == UInt8(ascii: "\"") {
                    offset += 1
                    return UnsafeRawBufferPointer(rebasing: bytes[start..<(offset - 1)])
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { return nil }
                offset += 1
            }
            return nil
        }

        /// A JSON number of at most 15 significant digits (the requests' ids and seconds), exact
        /// in a Double; nil for anything else (the full decoder reads it).
        mutating func number() -> Double? {
            var index = offset
            var negative = false
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") {
                negative = true
                index += 1
            }
            var mantissa: Int64 = 0
            var digits = 0
            var scale = 0
            var integerDigits = 0
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                // JSON: no leading zeros.
                if integerDigits == 1 && mantissa == 0 { return nil }
                mantissa = mantissa * 10 + Int64(bytes[index] - 0x30)
                digits += 1
                integerDigits += 1
                index += 1
            }
            guard integerDigits > 0 else { return nil }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                var fractionDigits = 0
                while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                    mantissa = mantissa * 10 + Int64(bytes[index] - 0x30)
                    digits += 1
                    fractionDigits += 1
                    scale += 1
                    index += 1
                    if digits > 15 { return nil }
                }
                guard fractionDigits > 0 else { return nil }
            }
            guard digits <= 15 else { return nil }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") { return nil }
            offset = index
            var value = Double(mantissa)
            // At most 15 digits and a power of ten up to 1e15: one correctly rounded division.
            if scale > 0 {
                var power = 1.0
                for _ in 0..<scale { power *= 10 }
                value /= power
            }
            return negative ? -value : value
        }
    }
}
