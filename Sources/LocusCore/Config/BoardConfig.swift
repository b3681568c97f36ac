/// A board file: the hardware facts that differ between boards (see Boards/).
public struct BoardConfig {
    public enum Receiver: Equatable, Sendable, CustomStringConvertible {
        case ublox, mediatek, genericNMEA
        public var description: String {
            switch self {
            case .ublox: return "ublox"
            case .mediatek: return "mediatek"
            case .genericNMEA: return "generic-nmea"
            }
        }
    }

    public struct GNSS {
        /// Serial device; a relative path is under the site's state directory (the simulated
        /// board links a pseudo-terminal there).
        public var device: String
        public var baud: Int
        public var receiver: Receiver
        /// Accept NMEA sentences without a `*hh` checksum (a few old receivers omit it). Off by
        /// default: without a checksum line noise cannot be told from data.
        public var allowMissingChecksum: Bool
        /// Board outputs that can restart the receiver when it falls silent (see `RadioLines`).
        public var lines = RadioLines()

        /// The receiver is simulated: its device is a relative path, the pseudo-terminal a feed
        /// (`locus feed`) plays recorded or made-up NMEA into. Clients are told its fixes are
        /// simulated (CLLocation's `sourceInformation`).
        public var isSimulated: Bool { !device.hasPrefix("/") }

        public init(device: String, baud: Int, receiver: Receiver, allowMissingChecksum: Bool, lines: RadioLines = RadioLines()) {
            self.device = device
            self.baud = baud
            self.receiver = receiver
            self.allowMissingChecksum = allowMissingChecksum
            self.lines = lines
        }
    }

    /// Outputs (names from `[gpio.outputs]`) wired to a radio's supply or reset pin, which the
    /// agent's self-healing drives: `power` is kept active (powered) and cut for `powerOffMs`;
    /// `reset` is kept inactive and made active for `resetPulseMs`. Site actions cannot name them.
    public struct RadioLines: Equatable, Sendable {
        public var power: String? = nil
        public var powerOffMs: Int64 = 2_000
        public var reset: String? = nil
        public static let resetPulseMs: Int64 = 100

        public init() {}
    }

    public enum BluetoothSource: Equatable {
        /// A BlueZ HCI adapter by index (hci0 = 0).
        case hci(Int)
        /// An H4 stream of HCI events (a pseudo-terminal that `locus feed` plays a recording into),
        /// for the simulated board; a relative path is under the state directory.
        case feed(String)
    }

    /// How an adapter is scanned (`[bluetooth] scan`). `kernel`: through the kernel's management
    /// interface, beside bluetoothd (docs/ble.md "Beside bluetoothd"); `raw`: HCI commands on a
    /// raw socket, for an adapter nobody else uses; `auto`: decided at start from who else has
    /// the adapter open (BluetoothSource).
    public enum ScanMode: Equatable, Sendable, CustomStringConvertible {
        case auto, kernel, raw
        public var description: String {
            switch self {
            case .auto: return "auto"
            case .kernel: return "kernel"
            case .raw: return "raw"
            }
        }
    }

    public enum GPIOChip: Equatable {
        case name(String)
        case label(String)
        /// Lines kept in memory and shown on the terminal, for the simulated board.
        case simulated
    }

    public enum Bias: Equatable, Sendable {
        case asIs, pullUp, pullDown, disabled
    }

    public struct Output: Equatable {
        public var name: String
        public var line: Int
        public var activeLow: Bool
        /// Logical level the line takes at start and on shutdown (0 = inactive).
        public var safe: Int
    }

    public struct Input: Equatable {
        public var name: String
        public var line: Int
        public var activeLow: Bool
        public var bias: Bias
    }

    public struct GPIO {
        public var chip: GPIOChip
        public var outputs: [Output]
        public var inputs: [Input]

        public func output(named name: String) -> Output? { outputs.first { $0.name == name } }
    }

    public var name: String
    public var gnss: GNSS?
    public var bluetooth: BluetoothSource?
    public var gpio: GPIO?
    public var scanMode = ScanMode.auto
    /// Whether Locus may power a powered-off adapter (`[bluetooth] power_on`, default true: an
    /// adapter is there to scan, as HCIDEVUP did before the kernel mode existed).
    public var powerOn = true
    /// The adapter's power line (`[bluetooth] power_line`, `power_off`; a USB hub port, a module's
    /// enable pin): the last step of its self-healing.
    public var bluetoothLines = RadioLines()

    /// A BlueZ adapter (`[bluetooth] hci`), not a feed or nothing: what can send.
    public var hasAdapter: Bool { if case .hci? = bluetooth { return true } else { return false } }

    /// The outputs the radios' self-healing owns: the site's actions may not drive them.
    public var radioLines: [String] {
        [gnss?.lines.power, gnss?.lines.reset, bluetoothLines.power].compactMap { $0 }
    }

    /// Standard UART rates termios knows; anything else is refused when the file is checked.
    public static let baudRates: [Int] = [1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600]

    /// Reads and checks a board file. All problems are reported at once.
    public static func parse(_ source: [UInt8], file: String) throws(ConfigError) -> BoardConfig {
        let report = try ConfigReport.parse(source, file: file)
        var root = TableReader(report.document.root, report: report, path: "")
        var board = BoardConfig(name: "", gnss: nil, bluetooth: nil, gpio: nil)
        if var section = root.table("board", required: true) {
            board.name = section.string("name", required: true) ?? ""
            _ = section.string("description")
            section.finish()
        }
        var radioLineOffsets: [(key: String, name: String, offset: SourceOffset)] = []
        if var section = root.table("gnss") {
            board.gnss = readGNSS(&section)
            for key in ["power_line", "reset_line"] {
                if let name = section.string(key) { radioLineOffsets.append(("gnss." + key, name, section.offset(of: key))) }
            }
            section.finish()
        }
        if var section = root.table("bluetooth") {
            board.bluetooth = readBluetooth(&section)
            board.scanMode = section.choice("scan", [("auto", ScanMode.auto), ("kernel", .kernel), ("raw", .raw)]) ?? .auto
            board.powerOn = section.boolean("power_on") ?? true
            if let name = section.string("power_line") {
                board.bluetoothLines.power = name
                radioLineOffsets.append(("bluetooth.power_line", name, section.offset(of: "power_line")))
            }
            if let off = section.duration("power_off", in: 100...60_000) { board.bluetoothLines.powerOffMs = off }
            if case .feed? = board.bluetooth, section.has("scan") {
                section.report.fail(at: section.offset(of: "scan"), "'bluetooth.scan' applies to an adapter ('hci'), not to a 'feed'")
            }
            section.finish()
        }
        if var section = root.table("gpio") {
            board.gpio = readGPIO(&section)
            section.finish()
        }
        root.finish()
        checkRadioLines(radioLineOffsets, outputs: board.gpio?.outputs ?? [], report: report)
        if report.hasErrors { throw ConfigError(report.diagnostics) }
        return board
    }

    /// Each radio line names one of the board's outputs, and no two roles share one.
    private static func checkRadioLines(_ lines: [(key: String, name: String, offset: SourceOffset)], outputs: [Output], report: ConfigReport) {
        let names = outputs.map { $0.name }
        for (index, line) in lines.enumerated() {
            if !names.contains(line.name) {
                var message = "'\(line.key)' = \"\(line.name)\" is not one of the board's [gpio.outputs]"
                if let suggestion = Spelling.closest(to: line.name, among: names) { message += " (did you mean '\(suggestion)'?)" }
                report.fail(at: line.offset, message)
            }
            for other in lines[..<index] where other.name == line.name {
                report.fail(at: line.offset, "'\(line.key)' and '\(other.key)' both name output '\(line.name)'")
            }
        }
    }

    private static func readGNSS(_ section: inout TableReader) -> GNSS? {
        let device = section.string("device", required: true)
        var baud = 9600
        if section.has("baud"), let value = section.integer("baud", in: 1...4_000_000) {
            if baudRates.contains(Int(value)) {
                baud = Int(value)
            } else {
                section.report.fail(at: section.offset(of: "baud"), "'gnss.baud' = \(value) is not a standard UART rate (\(list(baudRates)))")
            }
        } else {
            _ = section.integer("baud", in: 1...4_000_000)
        }
        let receiver = section.choice("receiver", [("ublox", Receiver.ublox), ("mediatek", .mediatek), ("generic-nmea", .genericNMEA)]) ?? .genericNMEA
        let allowMissingChecksum = section.boolean("allow_missing_checksum") ?? false
        var lines = RadioLines()
        lines.power = section.string("power_line")
        if let off = section.duration("power_off", in: 100...60_000) { lines.powerOffMs = off }
        lines.reset = section.string("reset_line")
        guard let device else { return nil }
        if device.isEmpty { section.report.fail(at: section.offset(of: "device"), "'gnss.device' must not be empty") }
        return GNSS(device: device, baud: baud, receiver: receiver, allowMissingChecksum: allowMissingChecksum, lines: lines)
    }

    private static func readBluetooth(_ section: inout TableReader) -> BluetoothSource? {
        let index = section.integer("hci", in: 0...63)
        let feed = section.string("feed")
        switch (index, feed) {
        case (let index?, nil): return .hci(Int(index))
        case (nil, let path?): return .feed(path)
        case (.some, .some):
            section.report.fail(at: section.offset, "[bluetooth] takes either 'hci' (an adapter index) or 'feed' (an HCI event stream), not both")
        case (nil, nil):
            if !section.has("hci") && !section.has("feed") {
                section.report.fail(at: section.offset, "[bluetooth] needs 'hci' (the adapter index, 0 for hci0) or 'feed'")
            }
        }
        return nil
    }

    private static func readGPIO(_ section: inout TableReader) -> GPIO? {
        let name = section.string("chip")
        let label = section.string("label")
        let simulated = section.boolean("simulated") ?? false
        var chip: GPIOChip? = nil
        switch (name, label, simulated) {
        case (let name?, nil, false): chip = .name(name)
        case (nil, let label?, false): chip = .label(label)
        case (nil, nil, true): chip = .simulated
        default:
            section.report.fail(at: section.offset, "[gpio] needs exactly one of 'chip' (\"gpiochip0\"), 'label' (\"pinctrl-bcm2711\") or 'simulated = true'")
        }
        var outputs: [Output] = []
        if var table = section.table("outputs") {
            for (name, offset, var reader) in table.namedTables() {
                let line = reader.integer("line", in: 0...1023, required: true)
                let activeLow = reader.boolean("active_low") ?? false
                let safe = reader.integer("safe", in: 0...1) ?? 0
                reader.finish()
                if let line { outputs.append(Output(name: name, line: Int(line), activeLow: activeLow, safe: Int(safe))) }
                checkName(name, at: offset, report: section.report)
            }
            table.finish()
        }
        var inputs: [Input] = []
        if var table = section.table("inputs") {
            for (name, offset, var reader) in table.namedTables() {
                let line = reader.integer("line", in: 0...1023, required: true)
                let activeLow = reader.boolean("active_low") ?? false
                let bias = reader.choice("bias", [("as-is", Bias.asIs), ("pull-up", .pullUp), ("pull-down", .pullDown), ("disabled", .disabled)]) ?? .asIs
                reader.finish()
                if let line { inputs.append(Input(name: name, line: Int(line), activeLow: activeLow, bias: bias)) }
                checkName(name, at: offset, report: section.report)
            }
            table.finish()
        }
        checkLinesDistinct(outputs.map { ($0.name, $0.line) } + inputs.map { ($0.name, $0.line) }, section)
        guard let chip else { return nil }
        return GPIO(chip: chip, outputs: outputs, inputs: inputs)
    }

    private static func checkName(_ name: String, at offset: SourceOffset, report: ConfigReport) {
        if !Identifier.isValid(name) {
            report.fail(at: offset, "GPIO name '\(name)' must be 1...\(Identifier.maximumLength) letters, digits, '-' or '_'")
        }
    }

    private static func checkLinesDistinct(_ lines: [(String, Int)], _ section: TableReader) {
        for (index, entry) in lines.enumerated() {
            for other in lines[..<index] where other.1 == entry.1 {
                section.report.fail(at: section.offset, "GPIO '\(entry.0)' and '\(other.0)' both use line \(entry.1)")
            }
        }
    }

    static func list(_ values: [Int]) -> String {
        var text = ""
        for (index, value) in values.enumerated() { text += (index == 0 ? "" : ", ") + "\(value)" }
        return text
    }
}
