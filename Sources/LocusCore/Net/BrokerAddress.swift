/// Where the uplink's broker is: `mqtt://HOST[:PORT]` (plain, port 1883) or
/// `mqtts://HOST[:PORT]` (TLS, port 8883). HOST is a DNS name, an IPv4 address or an IPv6 address
/// in brackets (`mqtts://[2001:db8::1]:8883`). No user, path or query: credentials have keys of
/// their own (the password in a file), topics come from `topic_prefix`.
public struct BrokerAddress: Equatable, Sendable, CustomStringConvertible {
    public var tls: Bool
    /// The name as written (the TLS host name checked against the certificate), or the address.
    public var host: String
    /// Set when HOST is an address: nothing to resolve.
    public var address: IPAddress?
    public var port: UInt16

    public static let plainPort: UInt16 = 1883
    public static let tlsPort: UInt16 = 8883

    public var description: String {
        let shownHost = address?.family == .v6 ? "[\(host)]" : host
        return "\(tls ? "mqtts" : "mqtt")://\(shownHost):\(port)"
    }

    /// Parses `text`; the error says what is wrong in words for check-config.
    public static func parse(_ text: String) -> Result<BrokerAddress, BrokerAddressError> {
        let tls: Bool
        var rest: Substring
        if text.hasPrefix("mqtts://") {
            tls = true
            rest = text.dropFirst(8)
        } else if text.hasPrefix("mqtt://") {
            tls = false
            rest = text.dropFirst(7)
        } else {
            return .failure(BrokerAddressError("starts with mqtts:// (TLS) or mqtt:// (plain)"))
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("?"), !rest.contains("@") else {
            return .failure(BrokerAddressError("is mqtt[s]://HOST[:PORT] only: user names, passwords and paths have keys of their own"))
        }
        var host: Substring
        var portText: Substring? = nil
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return .failure(BrokerAddressError("has an IPv6 address without its closing ']'")) }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return .failure(BrokerAddressError("has something after the IPv6 address other than :PORT")) }
                portText = after.dropFirst()
            }
        } else if let colon = rest.firstIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        var port = tls ? tlsPort : plainPort
        if let portText {
            guard let value = UInt16(portText), value > 0 else { return .failure(BrokerAddressError("has port '\(portText)', not 1...65535")) }
            port = value
        }
        guard !host.isEmpty else { return .failure(BrokerAddressError("names no host")) }
        let hostText = String(host)
        if let address = IPAddress(hostText) {
            return .success(BrokerAddress(tls: tls, host: hostText, address: address, port: port))
        }
        guard rest.first != "[" else { return .failure(BrokerAddressError("has '\(host)' in brackets, which is not an IPv6 address")) }
        guard isHostName(hostText) else {
            return .failure(BrokerAddressError("has host '\(host)', which is neither an address nor a DNS name (letters, digits, '-', '.')"))
        }
        return .success(BrokerAddress(tls: tls, host: hostText, address: nil, port: port))
    }

    /// RFC 1123 host names: labels of 1...63 letters, digits and hyphens, 253 bytes at most.
    static func isHostName(_ text: String) -> Bool {
        var name = Array(text.utf8)
        if name.last == UInt8(ascii: ".") { name.removeLast() }
        guard !name.isEmpty, name.count <= 253 else { return false }
        var labelLength = 0
        for byte in name {
            if byte == UInt8(ascii: ".") {
                guard labelLength > 0 else { return false }
                labelLength = 0
                continue
            }
            let letterOrDigit = (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A)
            guard letterOrDigit || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") else { return false }
            labelLength += 1
            guard labelLength <= 63 else { return false }
        }
        return labelLength > 0
    }
}

public struct BrokerAddressError: Error, Equatable, Sendable {
    /// Completes "'uplink.broker' ...".
    public let problem: String
    init(_ problem: String) { self.problem = problem }
}
