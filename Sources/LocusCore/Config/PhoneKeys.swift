/// The phones file (`[phones] keys` in the site file): each phone's name and identity resolving
/// key, kept apart from the site file because the keys are secrets (the agent refuses the file
/// when others may read it). One table a phone:
///
///     [alice-iphone]
///     irk = "ec0234a357c8ad05341010a60a397d9b"   # or the keychain's base64 "Remote IRK"
///     power = -62                                # its RSSI at 1 m, dBm (default -59)
public struct PhoneKeys {
    public struct Phone {
        public var name: FixedName
        public var key: IdentityResolvingKey
        public var measuredPowerDBm: Int8
    }

    public static let defaultMeasuredPowerDBm: Int8 = -59
    public private(set) var phones: [Phone] = []

    public init(phones: [Phone] = []) { self.phones = phones }

    public func number(of name: String) -> Int? {
        guard let name = FixedName(name) else { return nil }
        return phones.firstIndex { $0.name == name }
    }

    /// Reads the file; every problem is reported at its line:column, and a key is never quoted
    /// in a message.
    public static func parse(_ source: [UInt8], file: String) throws(ConfigError) -> PhoneKeys {
        let report = try ConfigReport.parse(source, file: file)
        var root = TableReader(report.document.root, report: report, path: "")
        var keys = PhoneKeys()
        for (name, offset, var table) in root.namedTables() {
            let fixed = FixedName(name)
            if fixed == nil {
                report.fail(at: offset, "'\(name)': a phone's name must be 1...\(Identifier.maximumLength) letters, digits, '-' or '_'")
            }
            if keys.number(of: name) != nil { report.fail(at: offset, "phone '\(name)' is named twice") }
            let text = table.string("irk", required: true)
            let key = text.flatMap { IdentityResolvingKey(text: $0) }
            if text != nil && key == nil {
                report.fail(at: table.offset(of: "irk"), "'\(table.label("irk"))' is not an identity resolving key (32 hexadecimal digits, or the keychain's 24-character base64)")
            }
            let power = table.integer("power", in: -127...20)
            table.finish()
            if let fixed, let key {
                keys.phones.append(Phone(name: fixed, key: key, measuredPowerDBm: power.map { Int8($0) } ?? defaultMeasuredPowerDBm))
            }
        }
        root.finish()
        if report.hasErrors { throw ConfigError(report.diagnostics) }
        return keys
    }

    /// Why the file's permissions let someone else read or change the keys, or nil: it must be
    /// owned by root or the agent's user, and neither group-writable nor readable by others.
    public static func permissionProblem(mode: Int32, owner: UInt32, agentUser: UInt32) -> String? {
        if owner != 0 && owner != agentUser { return "is owned by uid \(owner), neither root nor the agent's user" }
        if mode & 0o022 != 0 { return "may be changed by others (mode \(octal(mode)); chmod 600 or 640)" }
        if mode & 0o004 != 0 { return "may be read by anyone (mode \(octal(mode)); chmod 600 or 640)" }
        return nil
    }

    private static func octal(_ mode: Int32) -> String {
        var text = ""
        var rest = mode & 0o7777
        for _ in 0..<4 {
            text = String(rest & 7) + text
            rest >>= 3
        }
        return text
    }
}
