/// A fixed-point decimal read from NMEA digits: `digits / 10^scale`, negated when `negative`.
/// Conversion to Double is a separate, explicit step (minmea's approach), so degree arithmetic
/// can be done on the exact integer digits first.
public struct NMEADecimal: Equatable, Sendable {
    public var digits: Int64
    public var scale: Int
    public var negative: Bool

    public var value: Double {
        let magnitude = Double(digits) / NMEADecimal.powersOfTen(scale)
        return negative ? -magnitude : magnitude
    }

    /// 10^n for n in 0...18, exact in Double.
    @inline(__always) static func powersOfTen(_ n: Int) -> Double {
        var result = 1.0
        var remaining = n
        while remaining > 0 { result *= 10; remaining -= 1 }
        return result
    }
}

/// Walks the comma-separated fields of one sentence. Empty fields are "unknown" (nil), never 0.
/// The field vocabulary: decimal, integer, single character, time (hhmmss[.s...]), latitude
/// (ddmm.m...) and longitude (dddmm.m...) with hemisphere, and dates (ddmmyy).
struct NMEAFields {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var position: Int
    private var exhausted = false

    /// `bytes` is the sentence from '$' up to (not including) '*'; reading starts after the
    /// address field.
    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        var index = 0
        while index < bytes.count, bytes[index] != ASCII.comma { index += 1 }
        position = index + 1
        exhausted = index >= bytes.count
    }

    /// The next field's byte range; an empty range for an empty field; nil past the last field.
    mutating func next() -> Range<Int>? {
        if exhausted { return nil }
        let start = position
        var index = start
        while index < bytes.count, bytes[index] != ASCII.comma { index += 1 }
        if index >= bytes.count { exhausted = true }
        position = index + 1
        return start..<min(index, bytes.count)
    }

    /// True when the next field exists and is empty (receivers send all-empty sentences until
    /// they have a time).
    func nextIsEmpty() -> Bool {
        !exhausted && (position >= bytes.count || bytes[position] == ASCII.comma)
    }

    mutating func skip(_ count: Int) {
        for _ in 0..<count { _ = next() }
    }

    mutating func decimal() -> NMEADecimal? {
        guard let field = next() else { return nil }
        return parseDecimal(field)
    }

    mutating func double() -> Double? { decimal()?.value }

    mutating func integer() -> Int? {
        guard let number = decimal(), number.scale == 0, number.digits <= Int64(Int32.max) else { return nil }
        return number.negative ? -Int(number.digits) : Int(number.digits)
    }

    /// A one-character field ("A", "N"); nil when empty or longer.
    mutating func character() -> UInt8? {
        guard let field = next(), field.count == 1 else { return nil }
        return bytes[field.lowerBound]
    }

    /// The raw bytes of a field (for GNS mode letters).
    mutating func raw() -> Range<Int>? { next() }

    func byte(at index: Int) -> UInt8 { bytes[index] }

    /// hhmmss[.fff...] as nanoseconds since midnight. Seconds up to 60 (leap second).
    mutating func timeOfDay() -> Int64? {
        guard let field = next(), let number = parseDecimal(field), !number.negative else { return nil }
        var whole = number.digits
        var fractionNs: Int64 = 0
        if number.scale > 0 {
            guard number.scale <= 9 else { return nil }
            var divisor: Int64 = 1
            for _ in 0..<number.scale { divisor *= 10 }
            fractionNs = (whole % divisor) * (1_000_000_000 / divisor)
            whole /= divisor
        }
        let hours = whole / 10_000
        let minutes = whole / 100 % 100
        let seconds = whole % 100
        guard field.count >= 6, hours < 24, minutes < 60, seconds <= 60 else { return nil }
        return ((hours * 60 + minutes) * 60 + seconds) * 1_000_000_000 + fractionNs
    }

    /// ddmm.mmmm + N/S, or dddmm.mmmm + E/W, as signed degrees. The degree/minute split and the
    /// minutes-to-degrees division happen on the exact digits.
    mutating func coordinate(maximumDegrees: Int64) -> Double? {
        let number = decimal()
        let hemisphere = character()
        // Up to 15 decimals of a minute (receivers send 4 to 7): 60 × 10^scale must fit an Int64.
        guard let number, let hemisphere, !number.negative, number.scale <= 15 else { return nil }
        var divisor: Int64 = 1
        for _ in 0..<number.scale { divisor *= 10 }
        let whole = number.digits / divisor
        let degrees = whole / 100
        let minuteDigits = number.digits - degrees * 100 * divisor
        guard degrees <= maximumDegrees, minuteDigits < 60 * divisor else { return nil }
        let value = Double(degrees) + Double(minuteDigits) / (Double(divisor) * 60)
        guard value <= Double(maximumDegrees) else { return nil }
        switch hemisphere {
        case UInt8(ascii: "N"), UInt8(ascii: "E"): return value
        case UInt8(ascii: "S"), UInt8(ascii: "W"): return -value
        default: return nil
        }
    }

    /// ddmmyy (RMC). Two-digit years: 80...99 are 19xx, the rest 20xx; see `GNSSCalendar`.
    mutating func dateDDMMYY() -> CivilDate? {
        guard let field = next(), field.count == 6, let number = parseDecimal(field), number.scale == 0, !number.negative else { return nil }
        let day = Int(number.digits / 10_000)
        let month = Int(number.digits / 100 % 100)
        let year = Int(number.digits % 100)
        let date = CivilDate(year: year >= 80 ? 1900 + year : 2000 + year, month: month, day: day)
        return date.isValid ? date : nil
    }

    /// Digits with an optional sign and one optional '.', at most 18 significant digits (which an
    /// Int64 holds, so the arithmetic needs no overflow checks).
    private func parseDecimal(_ field: Range<Int>) -> NMEADecimal? {
        guard !field.isEmpty else { return nil }
        var index = field.lowerBound
        var negative = false
        if bytes[index] == UInt8(ascii: "-") || bytes[index] == UInt8(ascii: "+") {
            negative = bytes[index] == UInt8(ascii: "-")
            index += 1
        }
        var digits: Int64 = 0
        var count = 0
        /// Digits before the '.', or -1 without one.
        var beforeDot = -1
        while index < field.upperBound {
            let byte = bytes[index]
            let digit = byte &- 0x30
            if digit <= 9 {
                if count == 18 { return nil }
                digits = digits &* 10 &+ Int64(digit)
                count &+= 1
            } else if byte == ASCII.dot && beforeDot < 0 {
                beforeDot = count
            } else {
                return nil
            }
            index &+= 1
        }
        guard count > 0 else { return nil }
        return NMEADecimal(digits: digits, scale: beforeDot < 0 ? 0 : count - beforeDot, negative: negative)
    }
}
