/// Check 3: on a Raspberry Pi, whether the receiver's terminal is the UART on GPIO14/15 and
/// whether that UART keeps its baud rate. The device tree says what runs (`serial0` alias →
/// node → `compatible`; a `bluetooth` child of the PL011); config.txt only feeds the advice.
public enum PiUARTCheck {
    public struct Facts {
        public var model: String
        /// `compatible` of the node the `serial0` alias names (the UART on GPIO14/15).
        public var headerCompatible: [String]
        /// The PL011 has an enabled `bluetooth` child: the onboard radio holds it.
        public var bluetoothOnPL011: Bool
        public var config: PiConfigTxt
        public var configPath: String
        public init(model: String, headerCompatible: [String], bluetoothOnPL011: Bool, config: PiConfigTxt, configPath: String) {
            self.model = model
            self.headerCompatible = headerCompatible
            self.bluetoothOnPL011 = bluetoothOnPL011
            self.config = config
            self.configPath = configPath
        }
    }

    /// `gnssName` is the terminal the board's device resolves to (ttyS0, ttyAMA0, ttyAMA10).
    public static func check(_ facts: Facts, gnssName: String) -> [Finding] {
        var findings = PiConfigTxt.filters(model: facts.model).contains("pi5") ? pi5(facts, gnssName) : header(facts, gnssName)
        if !facts.config.unknownFilters.isEmpty {
            var names = ""
            for filter in facts.config.unknownFilters { names += (names.isEmpty ? "" : " ") + "[\(filter)]" }
            findings.append(.warn("raspberry pi: \(facts.configPath) has sections doctor cannot evaluate (\(names)); their lines were skipped", "check those sections by hand"))
        }
        return findings
    }

    /// Pi 5: GPIO14/15 is RP1 UART0 (ttyAMA0), off unless `dtparam=uart0=on`; serial0 is the debug
    /// connector's UART10 (ttyAMA10), and Bluetooth has a UART of its own.
    static func pi5(_ facts: Facts, _ gnssName: String) -> [Finding] {
        let path = facts.configPath
        if gnssName == "ttyAMA10" {
            return [.warn("raspberry pi 5: the receiver's device is the debug connector's UART (ttyAMA10), not GPIO14/15",
                          "for a receiver on GPIO14/15 set [gnss] device = \"/dev/ttyAMA0\" and add 'dtparam=uart0=on' under [all] in \(path)")]
        }
        guard gnssName == "ttyAMA0" else { return [.ok("raspberry pi 5: the receiver is on \(gnssName), not the header UART")] }
        if facts.config.enablesPi5HeaderUART { return [.ok("raspberry pi 5: GPIO14/15 carry UART0 (ttyAMA0), switched on in \(path)")] }
        return [.fail("raspberry pi 5: GPIO14/15's UART0 (ttyAMA0) is not switched on in \(path)", "add 'dtparam=uart0=on' under [all] in \(path) and reboot")]
    }

    /// Pi 3, 4, 400, Zero W/2 W: the header has the mini UART (ttyS0, baud tied to the core clock)
    /// unless an overlay gives it the PL011 (ttyAMA0) that otherwise drives Bluetooth.
    static func header(_ facts: Facts, _ gnssName: String) -> [Finding] {
        let path = facts.configPath
        let mini = facts.headerCompatible.contains("brcm,bcm2835-aux-uart")
        let pl011 = facts.headerCompatible.contains("arm,pl011")
        if gnssName == "ttyAMA0" && facts.bluetoothOnPL011 && !pl011 {
            return [.fail("raspberry pi: ttyAMA0 (the PL011) drives the onboard Bluetooth, not GPIO14/15",
                          "add 'dtoverlay=disable-bt' under [all] in \(path), run 'sudo systemctl disable hciuart', reboot, and use /dev/serial0")]
        }
        if mini && gnssName == "ttyS0" {
            let config = facts.config
            if config.enableUART == 1 || config.coreFrequency != nil {
                let how = config.enableUART == 1 ? "enable_uart=1" : "core_freq=\(config.coreFrequency ?? 0)"
                return [.ok("raspberry pi: GPIO14/15 carry the mini UART (ttyS0), its clock fixed by \(how)")]
            }
            return [.fail("raspberry pi: GPIO14/15 carry the mini UART (ttyS0) without enable_uart=1 in \(path): its baud rate follows the core clock",
                          "add 'enable_uart=1' under [all] in \(path) and reboot (or 'dtoverlay=disable-bt' to give GPIO14/15 the PL011)")]
        }
        if pl011 && gnssName == "ttyAMA0" {
            var how = ""
            if facts.config.disablesBluetooth { how = " (dtoverlay=disable-bt)" } else if facts.config.movesBluetoothToMiniUART { how = " (dtoverlay=miniuart-bt)" }
            return [.ok("raspberry pi: GPIO14/15 carry the PL011 (ttyAMA0)\(how)")]
        }
        let onHeader = mini ? "the mini UART, ttyS0" : pl011 ? "the PL011, ttyAMA0" : "an unknown UART"
        return [.ok("raspberry pi: the receiver is on \(gnssName), not on GPIO14/15 (\(onHeader))")]
    }
}
