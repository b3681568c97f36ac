import LocusCore
import LocusDevices

/// `locus range UUID[:MAJOR[:MINOR]]` (or `--phone NAME`): beacon ranging from a running agent,
/// through its read socket (ranging only reads), as a table per second or the agent's JSON lines.
enum RangeCommand {
    static let usage = "locus range (UUID[:MAJOR[:MINOR]] | --phone NAME) [--state DIR] [--count N] [--json]"

    struct Options {
        var constraint: BeaconIdentityConstraint
        /// `--phone NAME`: one phone of the site's phones file instead of `constraint`.
        var phone: FixedName? = nil
        var count: Int? = nil
        var json = false
    }

    static func run(_ arguments: [String]) -> Int32 {
        var rest = arguments
        let directory: String
        switch AgentCommands.stateDirectory(&rest, usage: "usage: " + usage) {
        case .success(let value): directory = value
        case .failure(let status): return status.code
        }
        let options: Options
        switch parse(rest) {
        case .success(let value): options = value
        case .failure(let status): return status.code
        }
        var client: AgentClient
        switch AgentCommands.connect(directory, "range", for: .reading) {
        case .success(let value): client = value
        case .failure(let status): return status.code
        }
        let constraint = options.constraint, phone = options.phone
        switch client.request({ line in
            line.string("op", "range")
            line.key("constraint")
            if let phone {
                line.beginObject()
                line.string("phone", phone)
                line.endObject()
            } else {
                RangingJSON.constraint(constraint, into: &line)
            }
        }) {
        case .success(let reply):
            if let message = AgentClient.errorMessage(reply) { return CommandLineInterface.failure("range", message) }
        case .failure(let status):
            return status.code
        }
        var printed = 0
        while let line = client.nextLine() {
            guard JSONParser.memberRange("ranging", in: line) != nil else {
                if let message = AgentClient.errorMessage(line) { return CommandLineInterface.failure("range", message) }
                continue
            }
            Console.out(options.json ? String(decoding: line, as: UTF8.self) + "\n" : table(line))
            printed += 1
            if let count = options.count, printed >= count { return 0 }
        }
        return CommandLineInterface.failure("range", "the agent closed the connection (stopped?)")
    }

    static func parse(_ arguments: [String]) -> Result<Options, ExitStatus> {
        func usageError(_ message: String) -> Result<Options, ExitStatus> {
            .failure(ExitStatus(code: CommandLineInterface.usageError("range: \(message)", hint: "usage: " + usage)))
        }
        var constraint: BeaconIdentityConstraint? = nil
        var phone: FixedName? = nil
        var count: Int? = nil
        var json = false
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--json":
                json = true
                index += 1
            case "--count":
                guard index + 1 < arguments.count, let value = Int(arguments[index + 1]), value >= 1 else {
                    return usageError("--count needs a number of seconds (1 or more)")
                }
                count = value
                index += 2
            case "--phone":
                guard index + 1 < arguments.count, let name = FixedName(arguments[index + 1]) else {
                    return usageError("--phone needs a phone's name from the site's phones file")
                }
                phone = name
                constraint = BeaconIdentityConstraint(uuid: PhoneCondition.uuid)
                index += 2
            default:
                guard !argument.hasPrefix("-") else { return usageError("unknown option '\(argument)'") }
                guard constraint == nil else { return usageError("one constraint only (unexpected '\(argument)')") }
                guard let parsed = self.constraint(argument) else {
                    return usageError("'\(argument)' is not UUID[:MAJOR[:MINOR]] (a UUID of 8-4-4-4-12 hexadecimal digits, major and minor 0...65535)")
                }
                constraint = parsed
                index += 1
            }
        }
        guard let constraint else { return usageError("a constraint UUID[:MAJOR[:MINOR]] (or --phone NAME) is required") }
        return .success(Options(constraint: constraint, phone: phone, count: count, json: json))
    }

    /// UUID, UUID:MAJOR or UUID:MAJOR:MINOR.
    static func constraint(_ text: String) -> BeaconIdentityConstraint? {
        let parts = text.utf8.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        guard parts.count >= 1 && parts.count <= 3, let uuid = BeaconUUID(parts[0]) else { return nil }
        var numbers: [UInt16] = []
        for part in parts.dropFirst() {
            guard let value = UInt16(part) else { return nil }
            numbers.append(value)
        }
        return BeaconIdentityConstraint(uuid: uuid, major: numbers.count > 0 ? numbers[0] : nil, minor: numbers.count > 1 ? numbers[1] : nil)
    }

    /// A frame for people: its time and count, then one aligned row per beacon, nearest first.
    ///
    ///     2024-03-15T10:00:05.000Z  2 beacons
    ///       E2C56DB5-DFFB-48D2-B060-D0F5A71096E0    100      2   -63.4 dBm     1.47 m  near       heard 10:00:04.500
    static func table(_ frame: [UInt8]) -> String {
        let beacons = AgentClient.elements("beacons", of: frame)
        let time = unquoted(AgentClient.member("time", of: frame) ?? "")
        var text = "\(time)  \(beacons.count) beacon\(beacons.count == 1 ? "" : "s")"
        if let more = AgentClient.member("more", of: frame), more != "0" { text += " (and \(more) farther, not listed)" }
        if let refused = AgentClient.member("refused", of: frame), refused != "0" { text += " (\(refused) sightings of beacons beyond the agent's ranging capacity)" }
        text += "\n"
        for beacon in beacons {
            let bytes = Array(beacon.utf8)
            func value(_ key: String) -> String { unquoted(AgentClient.member(key, of: bytes) ?? "") }
            let rssi = value("rssi"), distance = value("distance_m")
            let heard = value("last_heard")
            let phone = value("phone")
            text += "  " + (phone.isEmpty ? value("uuid") + pad(value("major"), 7) + pad(value("minor"), 7)
                                          : phone + String(repeating: " ", count: max(1, 50 - phone.utf8.count)))
            text += pad(rssi == "null" ? "-" : rssi, 8) + " dBm" + pad(distance == "null" ? "-" : distance, 10) + " m  "
            text += value("proximity") + String(repeating: " ", count: max(1, 11 - value("proximity").utf8.count))
            // The time of day of the last sighting (the frame's line states the date).
            text += "heard " + (heard.utf8.count >= 23 ? String(decoding: Array(heard.utf8)[11..<23], as: UTF8.self) : heard) + "\n"
        }
        return text
    }

    static func unquoted(_ text: String) -> String {
        let bytes = Array(text.utf8)
        guard bytes.count >= 2, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\"") else { return text }
        return String(decoding: bytes[1..<(bytes.count - 1)], as: UTF8.self)
    }

    /// `text` right-aligned in `width` columns.
    static func pad(_ text: String, _ width: Int) -> String {
        String(repeating: " ", count: max(1, width - text.utf8.count)) + text
    }
}
