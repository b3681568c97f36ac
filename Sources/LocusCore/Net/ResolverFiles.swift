/// The resolver's two files, read as the C library's stub resolver reads them (resolv.conf(5),
/// hosts(5)): which name servers to ask, how long and how often, and names the machine answers
/// itself. Pure: the agent reads the files' bytes and passes them in.
public struct ResolverConfiguration: Equatable, Sendable {
    /// At most three name servers are used (MAXNS), in the file's order.
    public static let maximumNameServers = 3

    public var nameServers: [IPAddress] = []
    /// Seconds to wait for one server's answer (`options timeout:N`; default 5, at most 30).
    public var timeoutS = 5
    /// Rounds over the servers (`options attempts:N`; default 2, at most 5).
    public var attempts = 2

    public init() {}

    /// The default when the file is missing or names no server: the local one (as glibc and musl).
    public static let fallbackServer = IPAddress("127.0.0.1")!

    /// Reads resolv.conf's `nameserver` and `options` lines; anything else (search, domain,
    /// sortlist, comments) does not concern a resolver that looks up full names only.
    public static func parse(_ text: String) -> ResolverConfiguration {
        var configuration = ResolverConfiguration()
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let keyword = words.first, !keyword.hasPrefix("#"), !keyword.hasPrefix(";") else { continue }
            switch keyword {
            case "nameserver":
                guard words.count >= 2, configuration.nameServers.count < maximumNameServers,
                      let address = IPAddress(String(words[1])) else { continue }
                configuration.nameServers.append(address)
            case "options":
                for option in words.dropFirst() {
                    if option.hasPrefix("timeout:"), let value = Int(option.dropFirst(8)), value >= 1 { configuration.timeoutS = min(value, 30) }
                    if option.hasPrefix("attempts:"), let value = Int(option.dropFirst(9)), value >= 1 { configuration.attempts = min(value, 5) }
                }
            default:
                continue
            }
        }
        if configuration.nameServers.isEmpty { configuration.nameServers = [fallbackServer] }
        return configuration
    }
}

/// /etc/hosts: `ADDRESS NAME [ALIAS...]` lines, `#` to the end of a line is a comment.
public enum HostsFile {
    /// The addresses of `name` (case-insensitive, canonical name or alias), in the file's order,
    /// IPv4 before IPv6 as a stub resolver asks for A first.
    public static func addresses(of name: String, in text: String) -> [IPAddress] {
        let wanted = folded(name.hasSuffix(".") ? Substring(name.dropLast()) : Substring(name))
        var found: [IPAddress] = []
        for line in text.split(separator: "\n") {
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let words = content.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard words.count >= 2, let address = IPAddress(String(words[0])) else { continue }
            if words.dropFirst().contains(where: { folded($0) == wanted }) && !found.contains(address) { found.append(address) }
        }
        return found.filter { $0.family == .v4 } + found.filter { $0.family == .v6 }
    }

    /// Host names compare without regard to ASCII case (RFC 4343).
    private static func folded(_ name: Substring) -> [UInt8] {
        name.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
    }
}
