/// The kernel command line (/proc/cmdline, or /boot/firmware/cmdline.txt): which devices it
/// makes consoles. A console on the receiver's UART sends boot messages into it and may start a
/// login prompt there, so the receiver's bytes and the kernel's mix.
public enum KernelCommandLine {
    /// The device of every `console=` argument: `console=ttyS0,115200` → "ttyS0",
    /// `console=serial0,115200` → "serial0" (a /dev link the caller resolves), `console=tty1`.
    public static func consoles(_ bytes: [UInt8]) -> [String] {
        var names: [String] = []
        for word in SystemText.words(bytes[...]) where SystemText.starts(word, with: "console=") {
            let value = word.dropFirst(8)
            let name = value.split(separator: 0x2C, maxSplits: 1, omittingEmptySubsequences: false).first ?? value
            if !name.isEmpty { names.append(SystemText.string(name)) }
        }
        return names
    }
}

/// /proc/consoles: the consoles the kernel writes to now, one a line:
/// `ttyS0                -W- (EC p a)    4:64` (name, flags, device number last).
public enum ProcConsoles {
    public struct Console: Equatable {
        public var name: String
        public var major: Int
        public var minor: Int
        public init(name: String, major: Int, minor: Int) {
            self.name = name
            self.major = major
            self.minor = minor
        }
    }

    public static func parse(_ bytes: [UInt8]) -> [Console] {
        var consoles: [Console] = []
        for line in SystemText.lines(bytes) {
            let words = SystemText.words(line)
            guard let name = words.first, words.count >= 2, let number = words.last else { continue }
            let parts = number.split(separator: 0x3A, omittingEmptySubsequences: false)
            guard parts.count == 2, let major = SystemText.integer(parts[0]), let minor = SystemText.integer(parts[1]) else { continue }
            consoles.append(Console(name: SystemText.string(name), major: major, minor: minor))
        }
        return consoles
    }
}

/// /etc/group (`dialout:x:20:pi`): a group's name by its number. Read as a file rather than
/// through getgrgid(3): a static binary's NSS needs the shared glibc modules it was built with,
/// and a fixture root has its own.
public enum EtcGroup {
    public static func name(of gid: Int, in bytes: [UInt8]) -> String? {
        for line in SystemText.lines(bytes) {
            let fields = line.split(separator: 0x3A, maxSplits: 3, omittingEmptySubsequences: false)
            if fields.count >= 3, !fields[0].isEmpty, SystemText.integer(fields[2]) == gid { return SystemText.string(fields[0]) }
        }
        return nil
    }
}

/// systemd's enablement links: a unit is enabled for a target when a link with its name sits in
/// the target's `.wants` directory; a unit linked to /dev/null is masked and never starts.
public enum SystemdUnits {
    /// The terminal a getty unit runs a login prompt on: `serial-getty@ttyS0.service` → "ttyS0"
    /// (also `getty@ttyS0.service`, which works on a serial port too); nil for other units.
    public static func gettyTerminal(_ unit: String) -> String? {
        let bytes = Array(unit.utf8)
        let prefixes = ["serial-getty@", "getty@"]
        for prefix in prefixes where bytes.starts(with: prefix.utf8) {
            let rest = bytes.dropFirst(prefix.utf8.count)
            guard rest.count > 8, rest.suffix(8).elementsEqual(".service".utf8) else { return nil }
            return SystemText.string(rest.dropLast(8))
        }
        return nil
    }

    public static func isMasked(linkTarget: String) -> Bool { linkTarget == "/dev/null" }
}

/// Capability sets from /proc/PID/status (`CapEff:\t00000000a80425fb`).
public enum Capabilities {
    public static let netAdmin = 12
    public static let netRaw = 13

    /// The effective set, nil when the line is missing or not hexadecimal.
    public static func effective(_ status: [UInt8]) -> UInt64? {
        for line in SystemText.lines(status) where SystemText.starts(line, with: "CapEff:") {
            let digits = SystemText.trimmed(line.dropFirst(7))
            guard !digits.isEmpty, digits.count <= 16 else { return nil }
            return UInt64(SystemText.string(digits), radix: 16)
        }
        return nil
    }

    public static func has(_ set: UInt64, _ capability: Int) -> Bool { set & (1 << UInt64(capability)) != 0 }
}
