/// A JSON object written field by field with String appends. Transitional: only the agent
/// runtime (Sources/LocusAgent/Agent/) and AdvertisementJSON still use it until they move to
/// `JSONWriter`, after which it is deleted. Numbers are formatted by the writer.
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
        JSONWriter.rendering(capacity: 32) { $0.text(value, decimals: decimals) }
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
