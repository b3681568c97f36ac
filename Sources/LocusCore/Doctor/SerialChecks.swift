/// What doctor learned about a file (stat): enough to tell a terminal from anything else and to
/// compare it with the kernel's console by device number.
public struct DeviceNode: Equatable {
    public enum Kind: Equatable { case characterDevice, directory, regular, other }
    public var kind: Kind
    public var major: Int
    public var minor: Int
    /// Permission bits (0o660) and the group's name ("dialout"; the number when it has none).
    public var mode: Int
    public var group: String
    public init(kind: Kind, major: Int, minor: Int, mode: Int = 0o666, group: String = "root") {
        self.kind = kind
        self.major = major
        self.minor = minor
        self.mode = mode
        self.group = group
    }
}

/// A process found holding something (a port, an adapter): named with its PID so the technician
/// can tell which service to stop.
public struct Holder: Equatable, CustomStringConvertible {
    public var pid: Int
    public var name: String
    public init(pid: Int, name: String) {
        self.pid = pid
        self.name = name
    }
    public var description: String { "'\(name)' (pid \(pid))" }
}

/// Checks 1 and 2: the receiver's port exists, is a terminal, and nothing else uses it.
public enum SerialChecks {
    /// `device` as configured, `name` the terminal it resolves to (/dev/serial0 → ttyS0).
    public static func device(_ device: String, name: String, node: DeviceNode?, error: String) -> Finding {
        let shown = name == SystemText.baseName(device) ? device : "\(device) (\(name))"
        guard let node else {
            return .fail("gnss: \(shown) cannot be opened: \(error)",
                         "check [gnss] device in the board file; a USB receiver: is it plugged in ('dmesg | tail'); a Raspberry Pi: enable the UART (enable_uart=1 in config.txt)")
        }
        guard node.kind == .characterDevice else {
            return .fail("gnss: \(shown) is not a character device", "point [gnss] device at the receiver's terminal (/dev/ttyS0, /dev/ttyUSB0, /dev/serial0)")
        }
        if node.mode & 0o006 != 0o006 && !(serviceGroups.contains(node.group) && node.mode & 0o060 == 0o060) {
            return .fail("gnss: \(shown) is group \(node.group), mode 0\(octal(node.mode)): the service's user (groups \(serviceGroups[0]), \(serviceGroups[1]), \(serviceGroups[2])) cannot open it",
                         "a udev rule: KERNEL==\"\(name)\", GROUP=\"dialout\", MODE=\"0660\" (in /etc/udev/rules.d/99-gnss.rules), then 'sudo udevadm trigger'")
        }
        return .ok("gnss: \(shown) is a character device (\(node.major):\(node.minor))")
    }

    /// The groups locus.service runs with (Group=, SupplementaryGroups=).
    static let serviceGroups = ["locus", "dialout", "gpio"]

    static func octal(_ value: Int) -> String {
        var digits = ""
        var rest = value
        repeat {
            digits = String(rest % 8) + digits
            rest /= 8
        } while rest > 0
        return digits
    }

    /// The port must not be a kernel console: /proc/consoles by device number, then the kernel
    /// command line's `console=` (with /dev links such as serial0 resolved by the caller).
    public static func console(name: String, node: DeviceNode?, consoles: [ProcConsoles.Console],
                               commandLine: [(written: String, resolved: String)]) -> Finding {
        let advice = "remove 'console=...' naming it from the kernel command line (/boot/firmware/cmdline.txt; raspi-config: Interface Options, Serial Port, login shell No) and reboot"
        for entry in commandLine where entry.resolved == name {
            return .fail("console: \(name) is a kernel console (console=\(entry.written) on the kernel command line)", advice)
        }
        if let node, node.kind == .characterDevice {
            for console in consoles where console.major == node.major && console.minor == node.minor {
                return .fail("console: \(name) is a kernel console (/proc/consoles: \(console.name))", advice)
            }
        }
        return .ok("console: \(name) is not a kernel console")
    }

    /// Enabled getty units on the port: a login prompt answering the receiver's sentences.
    public static func gettys(name: String, units: [(unit: String, masked: Bool)]) -> [Finding] {
        var findings: [Finding] = []
        for entry in units where !entry.masked && SystemdUnits.gettyTerminal(entry.unit) == name {
            findings.append(.fail("console: \(entry.unit) is enabled (a login prompt on the receiver's port)",
                                  "sudo systemctl disable --now \(entry.unit) && sudo systemctl mask \(entry.unit)"))
        }
        return findings
    }

    /// Other processes with the port open. The agent itself ('locus') is expected when it runs.
    public static func holders(_ device: String, _ holders: [Holder]) -> Finding {
        let others = holders.filter { $0.name != "locus" }
        guard let first = others.first else {
            if let agent = holders.first { return .ok("gnss: \(device) is open only in the agent (pid \(agent.pid))") }
            return .ok("gnss: no other program has \(device) open")
        }
        var names = ""
        for (index, holder) in others.enumerated() { names += (index == 0 ? "" : ", ") + holder.description }
        let unit = first.name == "agetty" ? "serial-getty@..." : first.name
        return .fail("gnss: \(device) is open in \(names)", "stop it ('sudo systemctl disable --now \(unit)', or 'sudo kill \(first.pid)')")
    }
}
