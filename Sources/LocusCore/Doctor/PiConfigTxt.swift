/// The settings of a Raspberry Pi's config.txt that decide which UART reaches GPIO14/15 and at
/// what clock, as they apply to one model. The device tree is the truth about the running
/// system; config.txt is read only so the advice can name the line to add or remove.
///
/// Sections: `[all]` applies to every model, `[pi3]`, `[pi4]`, `[pi5]`, `[pi02]`, `[cm4]` (and the
/// other model names) to that model; any other filter (`[gpio4=1]`, `[EDID=...]`, `[none]`) is
/// one doctor cannot evaluate: its lines are skipped and the filter is listed.
public struct PiConfigTxt: Equatable {
    /// `dtoverlay=` names in order, parameters cut off (`disable-bt`, `miniuart-bt`, `uart0-pi5`).
    public var overlays: [String] = []
    public var enableUART: Int? = nil
    public var coreFrequency: Int? = nil
    /// `dtparam=uart0=on` (or plain `dtparam=uart0`): the Pi 5's header UART.
    public var uart0 = false
    public var unknownFilters: [String] = []

    public init() {}

    static let modelFilters = ["pi1", "pi2", "pi3", "pi3+", "pi4", "pi400", "pi5", "pi500", "cm4", "cm4s", "cm5", "pi0", "pi0w", "pi02"]

    /// Models by the start of /proc/device-tree/model, longest names first where one name
    /// starts another ("Raspberry Pi 400" before "Raspberry Pi 4").
    static let models: [(prefix: StaticString, filters: [String])] = [
        ("Raspberry Pi 500", ["pi5", "pi500"]), ("Raspberry Pi 5", ["pi5"]), ("Raspberry Pi Compute Module 5", ["pi5", "cm5"]),
        ("Raspberry Pi 400", ["pi4", "pi400"]), ("Raspberry Pi 4", ["pi4"]), ("Raspberry Pi Compute Module 4S", ["pi4", "cm4s"]),
        ("Raspberry Pi Compute Module 4", ["pi4", "cm4"]), ("Raspberry Pi 3 Model B Plus", ["pi3", "pi3+"]),
        ("Raspberry Pi 3 Model A Plus", ["pi3", "pi3+"]), ("Raspberry Pi 3", ["pi3"]), ("Raspberry Pi Zero 2", ["pi02"]),
        ("Raspberry Pi Zero W", ["pi0", "pi0w"]), ("Raspberry Pi Zero", ["pi0"]), ("Raspberry Pi 2", ["pi2"]),
    ]

    /// The section filters a model answers to, from /proc/device-tree/model. Compared byte by byte
    /// with static strings: plain and the same in both builds.
    public static func filters(model: String) -> [String] {
        let name = Array(model.utf8)
        for entry in models where entry.prefix.utf8CodeUnitCount <= name.count {
            let prefix = UnsafeBufferPointer(start: entry.prefix.utf8Start, count: entry.prefix.utf8CodeUnitCount)
            if name.prefix(prefix.count).elementsEqual(prefix) { return entry.filters }
        }
        return ["pi1"]
    }

    /// Reads config.txt for a model answering to `filters`.
    public static func parse(_ bytes: [UInt8], filters: [String]) -> PiConfigTxt {
        var config = PiConfigTxt()
        var active = true
        for rawLine in SystemText.lines(bytes) {
            var line = rawLine
            if let hash = line.firstIndex(of: 0x23) { line = line[..<hash] }
            line = SystemText.trimmed(line)
            guard let first = line.first else { continue }
            if first == 0x5B, line.last == 0x5D {
                let filter = SystemText.string(line.dropFirst().dropLast())
                if filter == "all" {
                    active = true
                } else if modelFilters.contains(filter) {
                    active = filters.contains(filter)
                } else {
                    active = false
                    if !config.unknownFilters.contains(filter) { config.unknownFilters.append(filter) }
                }
                continue
            }
            if active { config.apply(line) }
        }
        return config
    }

    private mutating func apply(_ line: ArraySlice<UInt8>) {
        guard let equals = line.firstIndex(of: 0x3D) else { return }
        let key = SystemText.string(SystemText.trimmed(line[..<equals]))
        let value = SystemText.trimmed(line[(equals + 1)...])
        switch key {
        case "dtoverlay":
            let name = value.split(separator: 0x2C, maxSplits: 1).first ?? value
            if !name.isEmpty { overlays.append(SystemText.string(name)) }
        case "enable_uart": enableUART = SystemText.integer(value)
        case "core_freq": coreFrequency = SystemText.integer(value)
        case "dtparam":
            for parameter in value.split(separator: 0x2C) {
                let parts = parameter.split(separator: 0x3D, maxSplits: 1, omittingEmptySubsequences: false)
                guard SystemText.string(SystemText.trimmed(parts[0])) == "uart0" else { continue }
                uart0 = parts.count == 1 || SystemText.string(SystemText.trimmed(parts[1])) == "on"
            }
        default: break
        }
    }

    /// `dtoverlay=disable-bt` (or its old name): the PL011 on the header, Bluetooth off.
    public var disablesBluetooth: Bool { overlays.contains("disable-bt") || overlays.contains("pi3-disable-bt") }
    /// `dtoverlay=miniuart-bt`: the PL011 on the header, Bluetooth on the mini UART.
    public var movesBluetoothToMiniUART: Bool { overlays.contains("miniuart-bt") || overlays.contains("pi3-miniuart-bt") }
    /// The Pi 5's GPIO14/15 UART (RP1 UART0, /dev/ttyAMA0) is switched on.
    public var enablesPi5HeaderUART: Bool { uart0 || overlays.contains("uart0-pi5") }
}
