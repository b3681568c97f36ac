/// Checks 5 to 9: the GPIO lines, the Bluetooth adapter, capabilities, the clock and the state
/// directory, decided on values a probe gathered (so each decision is testable without hardware).
public enum SystemChecks {
    /// A GPIO chip as the kernel names it: `gpiochip0`, label `pinctrl-bcm2711`, 58 lines.
    public struct GPIOChip: Equatable {
        public var name: String
        public var label: String
        public var lineCount: Int
        public init(name: String, label: String, lineCount: Int) {
            self.name = name
            self.label = label
            self.lineCount = lineCount
        }
    }

    /// Which chip the board's `[gpio]` means, among those found.
    public static func chip(_ wanted: BoardConfig.GPIOChip, among chips: [GPIOChip]) -> GPIOChip? {
        switch wanted {
        case .label(let label): return chips.first { $0.label == label }
        case .name(let name): return chips.first { $0.name == SystemText.baseName(name) }
        case .simulated: return nil
        }
    }

    /// Check 5: each configured line exists on the chip and no other consumer holds it.
    /// `consumers[i]` is the consumer of the i-th configured line (outputs, then inputs), nil when free.
    public static func gpio(_ gpio: BoardConfig.GPIO, chips: [GPIOChip], consumers: [String?]) -> [Finding] {
        if case .simulated = gpio.chip { return [.ok("gpio: simulated lines (no chip is used)")] }
        guard let chip = chip(gpio.chip, among: chips) else {
            var found = ""
            for (index, chip) in chips.enumerated() { found += (index == 0 ? "" : ", ") + "\(chip.name) '\(chip.label)'" }
            let wanted: String
            switch gpio.chip {
            case .label(let label): wanted = "labelled '\(label)'"
            case .name(let name): wanted = "named '\(name)'"
            case .simulated: wanted = ""
            }
            return [.fail("gpio: no GPIO chip \(wanted) (found: \(found.isEmpty ? "none" : found))",
                          "set [gpio] label (or chip) in the board file to one of those ('gpiodetect' lists them)")]
        }
        var findings: [Finding] = []
        var free = ""
        let lines = gpio.outputs.map { ($0.name, $0.line) } + gpio.inputs.map { ($0.name, $0.line) }
        for (index, (name, line)) in lines.enumerated() {
            if line >= chip.lineCount {
                findings.append(.fail("gpio: \(name) is line \(line) but \(chip.label) has \(chip.lineCount) lines (0...\(chip.lineCount - 1))", "correct its line in the board file ('gpioinfo \(chip.name)')"))
            } else if index < consumers.count, let consumer = consumers[index], consumer != "locus" {
                findings.append(.fail("gpio: \(name) (line \(line) of \(chip.label)) is held by '\(consumer)'", "free it (a device tree overlay, a gpio-leds or sysfs export, another program: 'gpioinfo \(chip.name)') or use another line"))
            } else {
                free += (free.isEmpty ? "" : ", ") + "\(name) \(line)"
            }
        }
        if !free.isEmpty { findings.insert(.ok("gpio: \(chip.name) '\(chip.label)' (\(chip.lineCount) lines): \(free) usable"), at: 0) }
        return findings
    }

    /// A radio switch from /sys/class/rfkill/rfkillN.
    public struct RadioSwitch: Equatable {
        public var name: String
        public var type: String
        public var softBlocked: Bool
        public var hardBlocked: Bool
        public init(name: String, type: String, softBlocked: Bool, hardBlocked: Bool) {
            self.name = name
            self.type = type
            self.softBlocked = softBlocked
            self.hardBlocked = hardBlocked
        }
    }

    /// Check 6: the adapter exists, is not blocked, is up (when known), and who else uses it:
    /// bluetoothd by name; the programs holding it through the HCI user channel (`userChannel`,
    /// read from the monitor channel's replay), where nothing can share it; and any other process
    /// with an HCI socket (`socketHolders`, from /proc), which may be one of those when the replay
    /// could not be read. bluetoothd is fine beside the agent unless the board forces raw scanning
    /// (`scan = "raw"`), whose commands the kernel's own scan for bluetoothd overrides.
    public static func bluetooth(index: Int, present: Bool, switches: [RadioSwitch], up: Bool?, bluetoothd: [Holder], socketHolders: [Holder],
                                 userChannel: [String] = [], scanMode: BoardConfig.ScanMode = .auto) -> [Finding] {
        let adapter = "hci\(index)"
        guard present else {
            return [.fail("bluetooth: no adapter \(adapter) (/sys/class/bluetooth/\(adapter))",
                          "check [bluetooth] hci in the board file; a USB adapter: is it plugged in; a Raspberry Pi: is Bluetooth disabled in config.txt (dtoverlay=disable-bt)?")]
        }
        var findings: [Finding] = []
        for radio in switches where radio.type == "bluetooth" && (radio.name == adapter || radio.softBlocked || radio.hardBlocked) {
            if radio.hardBlocked {
                findings.append(.fail("bluetooth: \(radio.name) is hard-blocked by rfkill", "a switch or the firmware turned the radio off: check the board's radio switch or BIOS setting"))
            } else if radio.softBlocked {
                findings.append(.fail("bluetooth: \(radio.name) is blocked by rfkill (soft)", "sudo rfkill unblock bluetooth (Locus never unblocks a radio by itself)"))
            }
        }
        if findings.isEmpty { findings.append(.ok("bluetooth: \(adapter) present, not blocked by rfkill")) }
        if up == false {
            findings.append(.warn("bluetooth: \(adapter) is down", "the agent brings it up at start (with CAP_NET_ADMIN); by hand: 'sudo btmgmt --index \(index) power on'"))
        }
        for holder in bluetoothd {
            if scanMode == .raw {
                findings.append(.warn("bluetooth: bluetoothd runs (pid \(holder.pid)) beside a board with scan = \"raw\"",
                                      "the kernel re-programs the scan for bluetoothd and stops the agent's: set [bluetooth] scan = \"auto\" (the kernel's advertisement monitor) or stop bluetoothd"))
            } else {
                findings.append(.ok("bluetooth: bluetoothd runs (pid \(holder.pid)); the agent scans beside it through the kernel's advertisement monitor"))
            }
        }
        for name in userChannel {
            findings.append(.fail("bluetooth: \(adapter) is held through the HCI user channel by '\(name)': nothing can scan beside it",
                                  "stop that program, or give Locus another adapter ([bluetooth] hci in the board file)"))
        }
        for holder in socketHolders where holder.name != "bluetoothd" && holder.name != "locus" && !userChannel.contains(holder.name) {
            findings.append(.warn("bluetooth: \(holder) has an HCI socket open",
                                  "if it holds \(adapter) through the HCI user channel the agent cannot scan beside it: stop it, or give Locus another adapter"))
        }
        return findings
    }

    /// Check 7: CAP_NET_RAW and CAP_NET_ADMIN in this process's effective set. The service gets
    /// both from its unit (AmbientCapabilities), a technician's shell does not: a warning then,
    /// since it says how doctor ran, not how the service will.
    public static func capabilities(effective: UInt64?, bluetoothUsed: Bool) -> Finding {
        guard bluetoothUsed else { return .ok("capabilities: not needed (the board scans no HCI adapter)") }
        guard let effective else { return .warn("capabilities: /proc/self/status has no CapEff line", "cannot tell; run the agent under locus.service, which grants CAP_NET_RAW and CAP_NET_ADMIN") }
        var missing = ""
        if !Capabilities.has(effective, Capabilities.netRaw) { missing = "CAP_NET_RAW" }
        if !Capabilities.has(effective, Capabilities.netAdmin) { missing += (missing.isEmpty ? "" : " and ") + "CAP_NET_ADMIN" }
        if missing.isEmpty { return .ok("capabilities: CAP_NET_RAW and CAP_NET_ADMIN effective") }
        return .warn("capabilities: this process lacks \(missing) (a technician's shell does; locus.service grants both)",
                     "for 'locus run' by hand: sudo setcap 'cap_net_raw,cap_net_admin+eip' $(command -v locus); run 'sudo locus doctor' to check the adapter as the service sees it")
    }

    /// Check 8: the kernel's clock is synchronised (adjtimex), or GNSS time will set it.
    public static func clock(synchronised: Bool?, hasGNSS: Bool) -> Finding {
        guard let synchronised else { return .warn("clock: cannot read the clock's state (adjtimex)", "check 'timedatectl'") }
        if synchronised { return .ok("clock: synchronised") }
        if hasGNSS {
            return .warn("clock: not synchronised (no NTP)", "GNSS time is used after the first fix; for a correct clock before it, enable systemd-timesyncd or chrony")
        }
        return .fail("clock: not synchronised and the board has no GNSS receiver", "enable systemd-timesyncd or chrony ('sudo timedatectl set-ntp true')")
    }

    /// What writing a probe file in the state directory gave, and the room left.
    public struct StateProbe: Equatable {
        /// nil: the directory exists and a file could be created, written, synced and removed.
        public var failure: String?
        public var exists: Bool
        public var freeBytes: Int64?
        public var logBytes: Int64
        public init(failure: String?, exists: Bool, freeBytes: Int64?, logBytes: Int64) {
            self.failure = failure
            self.exists = exists
            self.freeBytes = freeBytes
            self.logBytes = logBytes
        }
    }

    /// Check 9: the log can be written, with room for `[log] retain`.
    public static func stateDirectory(_ path: String, _ probe: StateProbe, retainBytes: Int64) -> Finding {
        guard probe.exists else {
            return .warn("state: \(path) does not exist", "create it for the service's user: sudo install -d -o locus -g locus -m 0751 \(path)")
        }
        if let failure = probe.failure {
            return .fail("state: cannot write in \(path): \(failure)", "the log lives there: make it writable for the agent's user (a read-only or full file system, or its owner: 'ls -ld \(path)')")
        }
        guard let free = probe.freeBytes else { return .ok("state: \(path) is writable") }
        let needed = max(0, retainBytes - probe.logBytes)
        if free < needed {
            return .warn("state: \(path) is writable but has \(SystemText.formatBytes(free)) free; the log may grow by \(SystemText.formatBytes(needed)) ([log] retain \(SystemText.formatBytes(retainBytes)))",
                         "free space, or lower [log] retain in the site file")
        }
        return .ok("state: \(path) is writable, \(SystemText.formatBytes(free)) free for a log of up to \(SystemText.formatBytes(retainBytes))")
    }
}
