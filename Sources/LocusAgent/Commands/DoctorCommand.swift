import LocusCore
import LocusDevices

/// `locus doctor [--config SITE.toml]`: checks the gateway against the site and board files, one
/// line per finding (ok, warn, FAIL, each FAIL with what to do). Exit 0 without a FAIL, 1 with
/// one, 2 for a wrong command line. The hidden `--root DIR` reads every system file under DIR
/// (the tests' fixture trees).
enum DoctorCommand {
    static let usage = "usage: locus doctor [--config SITE.toml]"

    static func run(_ arguments: [String]) -> Int32 {
        var configPath: String? = nil
        var root = "/"
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument == "--config" || argument == "--root" else {
                return CommandLineInterface.usageError("doctor: unexpected argument '\(argument)'", hint: usage)
            }
            guard index + 1 < arguments.count else { return CommandLineInterface.usageError("doctor: \(argument) needs a value", hint: usage) }
            if argument == "--config" { configPath = arguments[index + 1] } else { root = arguments[index + 1] }
            index += 2
        }
        let probe = SystemProbe(root: root)
        var path = probe.path(RunCommand.defaultConfig)
        if let configPath { path = configPath }
        guard case .success(let loaded) = LoadedConfig.load(path) else {
            Console.out("\(Finding.fail("config: \(path) does not check (the problems are above)", "locus check-config \(path)"))\n")
            return 1
        }
        var doctor = Doctor(probe: probe, loaded: loaded)
        doctor.report(.ok("config: site \(loaded.sitePath), board \(loaded.boardPath) ('\(loaded.board.name)')"))
        doctor.checkGNSSPort()
        doctor.checkStateDirectory()
        doctor.checkGPIO()
        doctor.checkBluetooth()
        doctor.checkSystem()
        doctor.checkRaspberryPi()
        doctor.checkGNSSBytes()
        return Finding.exitStatus(doctor.findings)
    }
}

/// The checks in the order a technician fixes things: the port, the disk, the lines, the radio,
/// the process's rights and clock, then the Pi's UART wiring and the receiver's bytes.
struct Doctor {
    let probe: SystemProbe
    let loaded: LoadedConfig
    private(set) var findings: [Finding] = []

    init(probe: SystemProbe, loaded: LoadedConfig) {
        self.probe = probe
        self.loaded = loaded
    }

    /// Printed at once: the byte check takes seconds, and a technician reads as it goes.
    mutating func report(_ finding: Finding) {
        findings.append(finding)
        Console.out("\(finding)\n")
    }

    mutating func report(_ more: [Finding]) { for finding in more { report(finding) } }

    /// The receiver's device; a relative one is under the state directory (the simulated board).
    var gnssDevice: String? {
        guard let gnss = loaded.board.gnss else { return nil }
        if gnss.device.utf8.first == 0x2F { return gnss.device }
        return loaded.site.stateDirectory + "/" + gnss.device
    }

    /// Checks 1 and 2.
    mutating func checkGNSSPort() {
        guard let device = gnssDevice else {
            report(.ok("gnss: the board has no receiver"))
            return
        }
        let name = probe.terminalName(device)
        let (node, error) = probe.node(device)
        report(SerialChecks.device(device, name: name, node: node.map { probe.namingGroup($0) }, error: error))
        guard node != nil else { return }
        var commandLine: [(written: String, resolved: String)] = []
        if let bytes = probe.read("/proc/cmdline") {
            for console in KernelCommandLine.consoles(bytes) { commandLine.append((console, probe.terminalName("/dev/" + console))) }
        }
        let consoles = ProcConsoles.parse(probe.read("/proc/consoles") ?? [])
        report(SerialChecks.console(name: name, node: node, consoles: consoles, commandLine: commandLine))
        report(SerialChecks.gettys(name: name, units: probe.gettyUnits()))
        var paths = [device, "/dev/" + name]
        if paths[0] == paths[1] { paths.removeLast() }
        report(SerialChecks.holders(device, probe.holders(of: paths)))
    }

    /// Check 9.
    mutating func checkStateDirectory() {
        let directory = loaded.site.stateDirectory
        report(SystemChecks.stateDirectory(directory, probe.stateDirectory(directory), retainBytes: loaded.site.log.retainBytes))
    }

    /// Check 5.
    mutating func checkGPIO() {
        guard let gpio = loaded.board.gpio else { return }
        let chips = probe.gpioChips()
        var consumers: [String?] = []
        if let chip = SystemChecks.chip(gpio.chip, among: chips) {
            consumers = probe.gpioConsumers(chip: chip.name, lines: gpio.outputs.map { $0.line } + gpio.inputs.map { $0.line })
        }
        report(SystemChecks.gpio(gpio, chips: chips, consumers: consumers))
    }

    /// Check 6.
    mutating func checkBluetooth() {
        guard case .hci(let index)? = loaded.board.bluetooth else { return }
        report(SystemChecks.bluetooth(index: index, present: probe.exists("/sys/class/bluetooth/hci\(index)"), switches: probe.radioSwitches(),
                                      up: probe.adapterUp(index), bluetoothd: probe.processes(named: "bluetoothd"), socketHolders: probe.hciSocketHolders(),
                                      userChannel: probe.userChannelHolders(index), scanMode: loaded.board.scanMode))
    }

    /// Checks 7 and 8.
    mutating func checkSystem() {
        var bluetoothUsed = false
        if case .hci? = loaded.board.bluetooth { bluetoothUsed = true }
        var effective: UInt64? = nil
        if let status = probe.read("/proc/self/status") { effective = Capabilities.effective(status) }
        report(SystemChecks.capabilities(effective: effective, bluetoothUsed: bluetoothUsed))
        report(SystemChecks.clock(synchronised: probe.clockSynchronised(), hasGNSS: loaded.board.gnss != nil))
    }

    /// Check 3, on a Raspberry Pi only.
    mutating func checkRaspberryPi() {
        guard let device = gnssDevice, let model = probe.read("/proc/device-tree/model").map({ SystemText.deviceTreeString($0) }),
              model.utf8.starts(with: "Raspberry Pi".utf8) else { return }
        let tree = "/proc/device-tree"
        var compatible: [String] = []
        if let node = probe.read(tree + "/aliases/serial0").map({ SystemText.deviceTreeString($0) }) {
            compatible = SystemText.deviceTreeStrings(probe.read(tree + node + "/compatible") ?? [])
        }
        var bluetoothOnPL011 = false
        for alias in ["serial0", "serial1"] {
            guard let node = probe.read(tree + "/aliases/" + alias).map({ SystemText.deviceTreeString($0) }),
                  SystemText.deviceTreeStrings(probe.read(tree + node + "/compatible") ?? []).contains("arm,pl011"),
                  probe.exists(tree + node + "/bluetooth") else { continue }
            let status = probe.read(tree + node + "/bluetooth/status").map { SystemText.deviceTreeString($0) }
            bluetoothOnPL011 = status != "disabled"
        }
        var configPath = "/boot/firmware/config.txt"
        if !probe.exists(configPath) { configPath = "/boot/config.txt" }
        let config = PiConfigTxt.parse(probe.read(configPath) ?? [], filters: PiConfigTxt.filters(model: model))
        let facts = PiUARTCheck.Facts(model: model, headerCompatible: compatible, bluetoothOnPL011: bluetoothOnPL011, config: config, configPath: configPath)
        report(PiUARTCheck.check(facts, gnssName: probe.terminalName(device)))
    }

    /// Check 4, last: it takes seconds (3 s at the configured rate, then up to 3 s per other rate
    /// tried, ended as soon as a rate's bytes are NMEA: a port just switched may first read a
    /// stale slice, and a loaded board's first epoch may come late).
    mutating func checkGNSSBytes() {
        guard let device = gnssDevice, let baud = loaded.board.gnss?.baud, probe.node(device).node?.kind == .characterDevice else { return }
        if probe.agentRunning(stateDirectory: loaded.site.stateDirectory) {
            report(GNSSBytesCheck.agentRunning())
            return
        }
        let score: NMEABaudScore
        switch probe.sampleSerial(device, baud: baud, durationMs: GNSSBytesCheck.sampleMs) {
        case .failure(let error):
            report(GNSSBytesCheck.unreadable(device, error.description))
            return
        case .success(let bytes):
            score = NMEABaudScore.score(bytes)
        }
        if let finding = GNSSBytesCheck.configured(baud: baud, score) {
            report(finding)
            return
        }
        var found: Int? = nil
        for rate in NMEABaudScore.scanRates where rate != baud {
            guard case .success(let bytes) = probe.sampleSerial(device, baud: rate, durationMs: GNSSBytesCheck.scanSampleMs, enough: Self.clearlyNMEA) else { break }
            if NMEABaudScore.score(bytes).carriesNMEA {
                found = rate
                break
            }
        }
        report(GNSSBytesCheck.scanned(baud: baud, score, found: found))
    }

    /// Enough of another rate's sample: four sentences that check, outnumbering the failures.
    static func clearlyNMEA(_ bytes: [UInt8]) -> Bool {
        let score = NMEABaudScore.score(bytes)
        return score.sentences >= 4 && score.carriesNMEA
    }
}
