import Glibc
import LocusCore
import LocusDevices

/// `locus-fleet broker-acl`: mosquitto's logins and ACL for a fleet. Each gateway logs in with
/// its gateway id and may write only under its own prefix and read only its own
/// `<prefix>/remote/#`; the fleet's login reads every gateway's topics and writes their
/// `remote/` topics. The output directory holds the ACL file, the password file (hashed by
/// `mosquitto_passwd -U`) and each login's clear password under `credentials/`, kept across runs.
public enum BrokerACL {
    public struct Failure: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
        init(_ message: String) { self.message = message }
    }

    /// The gateways' topic prefix with `+` as the level of the gateway id (`locus/+`).
    public struct Prefix: Equatable {
        public let levels: [String]
        public let gatewayLevel: Int

        public init(_ text: String) throws(Failure) {
            let levels = text.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            let pluses = levels.indices.filter { levels[$0] == "+" }
            guard pluses.count == 1 else {
                throw Failure("--prefix '\(text)' must have one level that is '+', where the gateway id stands (locus/+)")
            }
            if let bad = levels.first(where: { $0.isEmpty || ($0 != "+" && ($0.contains("+") || $0.contains("#"))) }) {
                throw Failure("--prefix '\(text)': the level '\(bad)' is empty or holds a wildcard; only the gateway's level is '+'")
            }
            self.levels = levels
            gatewayLevel = pluses[0]
        }

        /// The prefix with `id` in the gateway's level.
        public func topic(for id: String) -> String {
            var levels = self.levels
            levels[gatewayLevel] = id
            return levels.joined(separator: "/")
        }

        /// The prefix as a filter: `+` for every gateway.
        public var filter: String { levels.joined(separator: "/") }
    }

    /// Why `name` cannot be a login (a gateway id or the fleet's user name), or nil. The name is
    /// a topic level, an MQTT user name, a `user` line of the ACL file, a `name:` of the password
    /// file and a file name.
    public static func problem(with name: String) -> String? {
        if name.isEmpty { return "it is empty" }
        for character in name.unicodeScalars {
            switch character {
            case "/": return "it holds '/' (a topic level separator)"
            case "+", "#": return "it holds '\(character)' (an MQTT wildcard)"
            case ":": return "it holds ':' (the separator of mosquitto's password file)"
            default:
                if character.properties.isWhitespace { return "it holds whitespace (U+\(hex(character.value)))" }
                if character.value < 0x20 || character.value == 0x7F { return "it holds a control character (U+\(hex(character.value)))" }
            }
        }
        if name.utf8.count > MQTT.maximumStringBytes { return "it is longer than \(MQTT.maximumStringBytes) bytes" }
        return nil
    }

    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// The gateway ids of FILE, one a line (a final newline, and CR before LF, allowed); every
    /// line must be a valid, new id.
    public static func gateways(file path: String) throws(Failure) -> [String] {
        let bytes: [UInt8]
        do { bytes = try Files.read(path) } catch { throw Failure("cannot read the gateways file \(path): \(error)") }
        var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        var ids: [String] = []
        var firstLine: [String: Int] = [:]
        for (index, line) in lines.enumerated() {
            let number = index + 1
            var slice = line[...]
            if slice.last == 0x0D { slice.removeLast() }
            guard let id = String(validating: slice, as: UTF8.self) else {
                throw Failure("\(path):\(number): the gateway id is not UTF-8")
            }
            if let problem = problem(with: id) { throw Failure("\(path):\(number): '\(id)' is no gateway id: \(problem)") }
            if let first = firstLine[id] { throw Failure("\(path):\(number): gateway '\(id)' again (first on line \(first))") }
            firstLine[id] = number
            ids.append(id)
        }
        if ids.isEmpty { throw Failure("the gateways file \(path) names no gateway (one id a line)") }
        return ids
    }

    /// The gateway ids of the database's `gateways` table (every gateway that has stored a record
    /// or a status).
    public static func gateways(database: FleetDatabase) throws(Failure) -> [String] {
        let rows: [String]
        do {
            rows = try database.retrying("reading the gateways") { (connection) throws(PostgresError) -> [String] in
                try connection.execute("select gateway from gateways order by gateway").rows.compactMap { $0.first ?? nil }
            }
        } catch {
            throw Failure(error.message)
        }
        for id in rows {
            if let problem = problem(with: id) {
                throw Failure("the gateways table holds '\(id)', which cannot be a login: \(problem); give --gateways FILE without it")
            }
        }
        if rows.isEmpty { throw Failure("the gateways table is empty (nothing stored yet): give --gateways FILE") }
        return rows
    }

    /// mosquitto's ACL file: one `user` block per login, the fleet's first.
    public static func aclText(gateways: [String], prefix: Prefix, fleetUser: String) -> String {
        var text = """
            # mosquitto ACL of the Locus fleet (prefix \(prefix.filter)), written by locus-fleet broker-acl:
            # run it again rather than editing this file. Read access is checked on each message
            # delivered, against its topic; publishing elsewhere is dropped by the broker.

            # The fleet: reads every gateway's topics (ingest, also as $share/GROUP/...), writes
            # their remote configuration and commands.
            user \(fleetUser)
            topic read \(prefix.filter)/#
            topic write \(prefix.filter)/remote/#

            """
        for id in gateways {
            let own = prefix.topic(for: id)
            text += """

                user \(id)
                topic write \(own)/#
                topic read \(own)/remote/#
                topic write homeassistant/binary_sensor/#
                topic read homeassistant/status

                """
        }
        return text
    }
}
