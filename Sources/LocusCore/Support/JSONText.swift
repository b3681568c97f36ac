/// A JSON object written field by field, with numbers formatted exactly and identically in both
/// build modes (no platform float printing): `JSONText.object { $0.string("class", "TPV") }`.
public struct JSONText {
    public private(set) var text = "{"
    private var first = true

    public init() {}

    private mutating func key(_ name: String) {
        if !first { text += "," }
        first = false
        text += "\""
        text += name
        text += "\":"
    }

    public mutating func string(_ name: String, _ value: String) {
        key(name)
        JSONText.appendQuoted(value, to: &text)
    }

    public mutating func integer(_ name: String, _ value: Int) {
        key(name)
        text += "\(value)"
    }

    public mutating func boolean(_ name: String, _ value: Bool) {
        key(name)
        text += value ? "true" : "false"
    }

    /// A number with exactly `decimals` digits after the point, rounded half away from zero.
    public mutating func number(_ name: String, _ value: Double, decimals: Int) {
        key(name)
        text += JSONText.fixed(value, decimals: decimals)
    }

    /// A pre-rendered JSON value (an object or array built elsewhere).
    public mutating func raw(_ name: String, _ json: String) {
        key(name)
        text += json
    }

    public var closed: String { text + "}" }

    public static func fixed(_ value: Double, decimals: Int) -> String {
        guard value.isFinite else { return "null" }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (abs(value) * scale).rounded(.toNearestOrAwayFromZero)
        guard scaled < 9.0e18 else { return "null" }
        let units = Int64(scaled)
        let divisor = Int64(scale)
        var result = value < 0 && units != 0 ? "-" : ""
        result += "\(units / divisor)"
        if decimals > 0 {
            result += "."
            let fraction = "\(units % divisor)"
            for _ in 0..<(decimals - fraction.utf8.count) { result += "0" }
            result += fraction
        }
        return result
    }

    public static func appendQuoted(_ value: String, to text: inout String) {
        text += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            default:
                if scalar.value < 0x20 {
                    text += "\\u00"
                    text += hex(UInt8(scalar.value))
                } else {
                    text.unicodeScalars.append(scalar)
                }
            }
        }
        text += "\""
    }
}

extension UTCTime {
    /// ISO 8601 with milliseconds, as gpsd prints TPV times: 2020-02-02T00:01:46.000Z.
    public var iso8601: String {
        let date = self.date
        let secondOfDay = seconds - floorDivide(seconds, 86_400) * 86_400
        var text = pad(date.year, 4) + "-" + pad(date.month, 2) + "-" + pad(date.day, 2) + "T"
        text += pad(Int(secondOfDay / 3600), 2) + ":" + pad(Int(secondOfDay / 60 % 60), 2) + ":" + pad(Int(secondOfDay % 60), 2)
        text += "." + pad(Int(nanoseconds / 1_000_000), 3) + "Z"
        return text
    }
}

func pad(_ value: Int, _ width: Int) -> String {
    let digits = "\(value)"
    var text = ""
    for _ in 0..<max(0, width - digits.utf8.count) { text += "0" }
    return text + digits
}
