import LocusCore
import LocusDevices

/// The bodies of the signed messages of docs/remote.md, before `FleetSigner` adds the signature
/// line: a `[fleet]` table (kind, gateway, version or id and expiry), then what the message
/// carries. A configuration's fragment is kept byte for byte as its author wrote it.
public enum RemoteMessage {
    /// A message is at most this long for any gateway (`[remote] max_size` at most 256 KiB)...
    public static let maximumBytes = 256 * 1024
    /// ... and a gateway with the default `max_size` takes this much.
    public static let defaultGatewayBytes = 64 * 1024
    /// The keys a configuration may set in this version (docs/remote.md, "A configuration").
    public static let settableKeys: Set<String> = ["monitor", "action", "privacy"]
    /// Room for `[fleet]` and the signature line.
    static let envelopeBytes = 1024

    /// A fragment as `config set` takes it: TOML (LocusCore's parser), without a `fleet` key and
    /// without a line that would read as the signature. Returns its text, ending with a newline,
    /// and warnings (keys a gateway refuses in this version, a size above the default limit).
    public static func checkFragment(_ bytes: [UInt8], name: String) throws(FleetError) -> (text: String, warnings: [String]) {
        let document: TOMLDocument
        do {
            document = try TOMLParser.parse(bytes)
        } catch {
            throw FleetError("\(name):\(error.description)")
        }
        if let fleet = document.root.entry("fleet") {
            let location = document.location(of: fleet.keyOffset)
            throw FleetError("\(name):\(location): the fragment has a 'fleet' key: [fleet] is written by locus-fleet config set, not by the fragment")
        }
        var text = String(decoding: bytes, as: UTF8.self)
        if !text.isEmpty && !text.hasSuffix("\n") { text += "\n" }
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
        where line.hasPrefix(FleetSigner.signaturePrefix) {
            throw FleetError("\(name):\(index + 1): a line starting '\(FleetSigner.signaturePrefix)' reads as the signature: remove it")
        }
        guard text.utf8.count + envelopeBytes <= maximumBytes else {
            throw FleetError("\(name): \(text.utf8.count) bytes: a signed message is at most \(maximumBytes / 1024) KiB, [fleet] included")
        }
        var warnings: [String] = []
        for key in document.root.keys where !settableKeys.contains(key) {
            warnings.append("\(name): '\(key)' is not a key a gateway lets the fleet set in this version (\(settableKeys.sorted().joined(separator: ", "))): gateways will refuse this version")
        }
        if text.utf8.count + envelopeBytes > defaultGatewayBytes {
            warnings.append("\(name): the signed message is over 64 KiB: gateways with the default [remote] max_size refuse it")
        }
        return (text, warnings)
    }

    /// A configuration's body. Keys at the fragment's top level (such as `monitor = {}`) must come
    /// before any table header in TOML, so such a fragment goes first and `[fleet]` after it;
    /// a fragment that starts with a table header comes after `[fleet]`.
    public static func configBody(gateway: String, version: Int64, issued: String, fragment: String) -> String {
        let fleet = """
            [fleet]
            kind = "config"
            gateway = \(quoted(gateway))
            version = \(version)
            issued = \(quoted(issued))

            """
        if startsWithKeys(fragment) { return fragment + "\n" + fleet }
        return fleet + (fragment.isEmpty ? "" : "\n" + fragment)
    }

    /// Whether the first line that is neither blank nor a comment is a key (not a `[table]`).
    static func startsWithKeys(_ fragment: String) -> Bool {
        for line in fragment.split(separator: "\n") {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            if trimmed.isEmpty || trimmed.hasPrefix("#") || trimmed == "\r" { continue }
            return !trimmed.hasPrefix("[")
        }
        return false
    }

    /// A value of a command's `[command]` table.
    public enum Value: Equatable, Sendable {
        case string(String)
        case integer(Int64)
    }

    /// A command's body: `[fleet]` (kind, gateway, id, expires) and `[command]` (action, then
    /// the action's keys in order).
    public static func commandBody(gateway: String, id: String, expiresS: Int64, action: String, _ values: [(String, Value)]) -> String {
        var body = """
            [fleet]
            kind = "command"
            gateway = \(quoted(gateway))
            id = \(quoted(id))
            expires = \(expiresS)

            [command]
            action = \(quoted(action))

            """
        for (key, value) in values {
            switch value {
            case .string(let text): body += "\(key) = \(quoted(text))\n"
            case .integer(let number): body += "\(key) = \(number)\n"
            }
        }
        return body
    }

    /// A TOML basic string.
    static func quoted(_ text: String) -> String {
        var output = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\t": output += "\\t"
            case "\r": output += "\\r"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    let hex = String(scalar.value, radix: 16, uppercase: true)
                    output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    output.unicodeScalars.append(scalar)
                }
            }
        }
        return output + "\""
    }

    /// Now, UTC, as the gateways write times (`2026-11-28T14:00:00.000Z`).
    public static func now() -> String {
        JSONWriter.rendering(capacity: 32) { $0.text(UTCTime(nanoseconds: Clock.realtimeNs())) }
    }
}
