/// Durations ("500ms", "10s", "5min"), sizes ("8MiB") and distances ("25 km") as written in
/// configuration files.
public enum Quantity {
    public struct Problem: Error, Equatable {
        public var message: String
    }

    private static let durationUnits: [(String, Int64)] = [
        ("ms", 1), ("s", 1_000), ("min", 60_000), ("h", 3_600_000), ("d", 86_400_000),
    ]

    private static let sizeUnits: [(String, Int64)] = [
        ("B", 1), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40),
    ]

    /// Milliseconds in a duration string. A number (decimals allowed: "1.5s") followed directly by
    /// one of ms, s, min, h, d. The result must be a whole number of milliseconds.
    public static func durationMs(_ text: String) -> Result<Int64, Problem> {
        guard let (number, unit) = split(text) else {
            return .failure(Problem(message: "expected a number followed by a unit (ms, s, min, h, d), such as \"500ms\" or \"10s\""))
        }
        guard let scale = durationUnits.first(where: { $0.0 == unit })?.1 else {
            var hint = "unknown unit '\(unit)'; use ms, s, min, h or d"
            if unit == "m" { hint += " (\"m\" is ambiguous: write \"min\")" }
            return .failure(Problem(message: hint))
        }
        return scaled(number, scale, what: "milliseconds")
    }

    /// Bytes in a size string: a number followed by B, KiB, MiB, GiB or TiB.
    public static func sizeBytes(_ text: String) -> Result<Int64, Problem> {
        guard let (number, unit) = split(text) else {
            return .failure(Problem(message: "expected a number followed by a unit (B, KiB, MiB, GiB), such as \"8MiB\""))
        }
        guard let scale = sizeUnits.first(where: { $0.0 == unit })?.1 else {
            var hint = "unknown unit '\(unit)'; use B, KiB, MiB, GiB or TiB"
            for (decimal, binary) in [("K", "KiB"), ("KB", "KiB"), ("kB", "KiB"), ("M", "MiB"), ("MB", "MiB"), ("G", "GiB"), ("GB", "GiB")] where unit == decimal {
                hint += " (sizes are binary: write \"\(binary)\")"
            }
            return .failure(Problem(message: hint))
        }
        return scaled(number, scale, what: "bytes")
    }

    /// Metres in a distance string: a number followed by m or km, a space between them allowed
    /// ("25 km", "500m", "1.5km").
    public static func distanceM(_ text: String) -> Result<Double, Problem> {
        let compact = String(decoding: text.utf8.filter { $0 != 0x20 }, as: UTF8.self)
        guard let (number, unit) = split(compact), let value = Double(String(decoding: number, as: UTF8.self)) else {
            return .failure(Problem(message: "expected a number followed by m or km, such as \"500 m\" or \"25 km\""))
        }
        switch unit {
        case "m": return .success(value)
        case "km": return .success(value * 1_000)
        default:
            var hint = "unknown unit '\(unit)'; use m or km"
            if unit == "mi" || unit == "ft" || unit == "nm" { hint += " (distances are metric)" }
            return .failure(Problem(message: hint))
        }
    }

    /// "25 km" or "500 m" for messages: whole kilometres from 1 km on when exact, else metres.
    public static func formatDistance(_ metres: Double) -> String {
        if metres >= 1_000 && metres.truncatingRemainder(dividingBy: 1_000) == 0 { return "\(Int64(metres / 1_000)) km" }
        return JSONWriter.rendering(capacity: 48) { $0.text(metres, decimals: metres == metres.rounded() ? 0 : 1) } + " m"
    }

    /// "1500" -> "1.5s", for messages.
    public static func formatMs(_ milliseconds: Int64) -> String {
        JSONWriter.rendering(capacity: 32) { $0.text(milliseconds: milliseconds) }
    }

    /// A long span for people: "3 s", "4 h 12 min", "3016 days 17 h".
    public static func describe(nanoseconds: Int64) -> String {
        let seconds = nanoseconds / 1_000_000_000
        if seconds < 120 { return "\(seconds) s" }
        if seconds < 7_200 { return "\(seconds / 60) min" }
        if seconds < 172_800 { return "\(seconds / 3_600) h \(seconds % 3_600 / 60) min" }
        return "\(seconds / 86_400) days \(seconds % 86_400 / 3_600) h"
    }

    /// Splits "12.5ms" into ("12.5", "ms"); digits with at most one '.', then letters.
    /// A size for people: "512 B", "12.5 KiB", "1.2 MiB", "3.0 GiB" (one decimal, binary units).
    public static func describe(bytes: Int64) -> String {
        let units: [(Int64, String)] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
        for (size, name) in units where bytes >= size {
            let tenths = (bytes * 10 + size / 2) / size
            return "\(tenths / 10).\(tenths % 10) \(name)"
        }
        return "\(bytes) B"
    }

    private static func split(_ text: String) -> (number: [UInt8], unit: String)? {
        let bytes = Array(text.utf8)
        var index = 0
        var dots = 0
        while index < bytes.count, isDigit(bytes[index]) || bytes[index] == ASCII.dot {
            if bytes[index] == ASCII.dot { dots += 1 }
            index += 1
        }
        guard index > 0, dots <= 1, index < bytes.count, isDigit(bytes[0]), isDigit(bytes[index - 1]) else { return nil }
        let unit = bytes[index...]
        guard unit.allSatisfy({ ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A }) else { return nil }
        return (Array(bytes[0..<index]), String(decoding: unit, as: UTF8.self))
    }

    /// number × scale, exactly, in integer arithmetic (no float rounding of "0.1s").
    private static func scaled(_ number: [UInt8], _ scale: Int64, what: String) -> Result<Int64, Problem> {
        var whole: Int64 = 0
        var fraction: Int64 = 0
        var fractionScale: Int64 = 1
        var afterDot = false
        for byte in number {
            if byte == ASCII.dot { afterDot = true; continue }
            let digit = Int64(byte - 0x30)
            if afterDot {
                if fractionScale >= 1_000_000_000_000 { return .failure(Problem(message: "too many decimal places")) }
                fraction = fraction * 10 + digit
                fractionScale *= 10
            } else {
                let (shifted, overflow1) = whole.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = shifted.addingReportingOverflow(digit)
                if overflow1 || overflow2 { return .failure(Problem(message: "the number is too large")) }
                whole = sum
            }
        }
        let (base, overflow) = whole.multipliedReportingOverflow(by: scale)
        if overflow { return .failure(Problem(message: "the value is too large")) }
        let (part, overflowPart) = fraction.multipliedReportingOverflow(by: scale)
        if overflowPart { return .failure(Problem(message: "the value is too large")) }
        guard part % fractionScale == 0 else {
            return .failure(Problem(message: "the value is not a whole number of \(what)"))
        }
        let (total, overflowTotal) = base.addingReportingOverflow(part / fractionScale)
        if overflowTotal { return .failure(Problem(message: "the value is too large")) }
        return .success(total)
    }
}
