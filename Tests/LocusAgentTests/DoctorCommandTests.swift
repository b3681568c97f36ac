import Foundation
import Testing

/// `locus doctor --root FIXTURE` on the trees under Tests/Fixtures/doctor (see make-fixtures.py):
/// each finding's exact line and the exit status. The clock line depends on the machine running
/// the tests (adjtimex is not a file), so it is only checked not to FAIL (every fixture board
/// has a receiver, which makes an unsynchronised clock a warning).
@Suite struct DoctorCommandTests {
    func doctor(_ fixture: String) throws -> (status: Int32, lines: [String]) {
        let run = try locus(["doctor", "--root", "Tests/Fixtures/doctor/\(fixture)"])
        let lines = run.output.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("ok    clock:") || $0.hasPrefix("warn  clock:") })
        let state = lines.filter { $0.hasPrefix("ok    state: /var/lib/locus is writable, ") && $0.hasSuffix(" free for a log of up to 1 MB") }
        #expect(state.count == 1, "\(lines)")
        // The fixtures' port is /dev/null: no terminal, so the byte check says it cannot read it
        // (the C library's wording of ENOTTY differs between the host and the device build).
        return (run.status, lines.filter { !$0.contains(" clock: ") && !$0.hasPrefix("ok    state: ") && !$0.hasPrefix("ok    config: ")
            && !$0.hasPrefix("warn  gnss bytes: cannot read /dev/serial0 as a terminal: ") })
    }

    static let portOK = ["ok    gnss: /dev/serial0 (ttyS0) is a character device (1:3)", "ok    console: ttyS0 is not a kernel console",
                         "ok    gnss: no other program has /dev/serial0 open"]
    static let capabilitiesOK = "ok    capabilities: CAP_NET_RAW and CAP_NET_ADMIN effective"
    static let bluetoothOK = "ok    bluetooth: hci0 present, not blocked by rfkill"

    @Test func aCleanGatewayPassesWithoutConfigFromTheDefaultPath() throws {
        let run = try locus(["doctor", "--root", "Tests/Fixtures/doctor/clean"])
        #expect(run.output.hasPrefix("ok    config: site Tests/Fixtures/doctor/clean/etc/locus/site.toml, board Tests/Fixtures/doctor/clean/etc/locus/board.toml ('Test gateway')\n"))
        let result = try doctor("clean")
        #expect(result.status == 0)
        #expect(result.lines == Self.portOK + [Self.bluetoothOK, Self.capabilitiesOK])
        #expect(run.output.contains("\nwarn  gnss bytes: cannot read /dev/serial0 as a terminal: "))
        #expect(run.output.hasSuffix(" — check that [gnss] device is the receiver's serial port\n"))
    }

    @Test func aKernelConsoleOnTheReceiversPortFails() throws {
        let result = try doctor("console-on-gnss")
        #expect(result.status == 1)
        #expect(result.lines[1] == "FAIL  console: ttyS0 is a kernel console (console=serial0 on the kernel command line) — remove 'console=...' naming it from the kernel command line (/boot/firmware/cmdline.txt; raspi-config: Interface Options, Serial Port, login shell No) and reboot")
    }

    @Test func anEnabledSerialGettyAndItsProcessFail() throws {
        let result = try doctor("getty-enabled")
        #expect(result.status == 1)
        #expect(result.lines == [
            Self.portOK[0], Self.portOK[1],
            "FAIL  console: serial-getty@ttyS0.service is enabled (a login prompt on the receiver's port) — sudo systemctl disable --now serial-getty@ttyS0.service && sudo systemctl mask serial-getty@ttyS0.service",
            "FAIL  gnss: /dev/serial0 is open in 'agetty' (pid 812) — stop it ('sudo systemctl disable --now serial-getty@...', or 'sudo kill 812')",
            Self.bluetoothOK,
            "ok    bluetooth: bluetoothd runs (pid 640); the agent scans beside it through the kernel's advertisement monitor",
            Self.capabilitiesOK,
        ])
    }

    @Test func aMaskedGettyIsNoProblem() throws {
        let result = try doctor("getty-masked")
        #expect(result.status == 0)
        #expect(result.lines == Self.portOK + [Self.bluetoothOK, Self.capabilitiesOK])
    }

    @Test func aSoftBlockedRadioFailsAndMissingCapabilitiesWarn() throws {
        let result = try doctor("rfkill-soft")
        #expect(result.status == 1)
        #expect(result.lines == Self.portOK + [
            "FAIL  bluetooth: hci0 is blocked by rfkill (soft) — sudo rfkill unblock bluetooth (Locus never unblocks a radio by itself)",
            "warn  capabilities: this process lacks CAP_NET_RAW and CAP_NET_ADMIN (a technician's shell does; locus.service grants both) — for 'locus run' by hand: sudo setcap 'cap_net_raw,cap_net_admin+eip' $(command -v locus); run 'sudo locus doctor' to check the adapter as the service sees it",
        ])
    }

    @Test func aProcessWithAnHCISocketIsNamed() throws {
        let result = try doctor("hci-socket-holder")
        #expect(result.status == 0)
        #expect(result.lines == Self.portOK + [
            Self.bluetoothOK,
            "ok    bluetooth: bluetoothd runs (pid 640); the agent scans beside it through the kernel's advertisement monitor",
            "warn  bluetooth: 'btproxy' (pid 900) has an HCI socket open — if it holds hci0 through the HCI user channel the agent cannot scan beside it: stop it, or give Locus another adapter",
            Self.capabilitiesOK,
        ])
    }

    @Test func aMissingGPIOChipListsWhatWasFound() throws {
        let result = try doctor("gpio-missing")
        #expect(result.status == 1)
        #expect(result.lines.contains("FAIL  gpio: no GPIO chip labelled 'pinctrl-bcm2711' (found: none) — set [gpio] label (or chip) in the board file to one of those ('gpiodetect' lists them)"))
    }

    @Test func aPi4WithEnableUARTUsesTheMiniUART() throws {
        let result = try doctor("pi4-default")
        #expect(result.status == 0)
        #expect(result.lines == Self.portOK + [Self.bluetoothOK, Self.capabilitiesOK,
                                               "ok    raspberry pi: GPIO14/15 carry the mini UART (ttyS0), its clock fixed by enable_uart=1"])
    }

    @Test func aPi4WithDisableBTHasThePL011ButNoAdapter() throws {
        let result = try doctor("pi4-disable-bt")
        #expect(result.status == 1)
        #expect(result.lines == [
            "ok    gnss: /dev/serial0 (ttyAMA0) is a character device (1:3)", "ok    console: ttyAMA0 is not a kernel console",
            "ok    gnss: no other program has /dev/serial0 open",
            "FAIL  bluetooth: no adapter hci0 (/sys/class/bluetooth/hci0) — check [bluetooth] hci in the board file; a USB adapter: is it plugged in; a Raspberry Pi: is Bluetooth disabled in config.txt (dtoverlay=disable-bt)?",
            Self.capabilitiesOK, "ok    raspberry pi: GPIO14/15 carry the PL011 (ttyAMA0) (dtoverlay=disable-bt)",
        ])
    }

    @Test func aPiZero2WithoutEnableUARTFailsNamingTheLine() throws {
        let result = try doctor("pi02-mini-uart-no-enable_uart")
        #expect(result.status == 1)
        #expect(result.lines.suffix(2) == [
            "FAIL  raspberry pi: GPIO14/15 carry the mini UART (ttyS0) without enable_uart=1 in /boot/firmware/config.txt: its baud rate follows the core clock — add 'enable_uart=1' under [all] in /boot/firmware/config.txt and reboot (or 'dtoverlay=disable-bt' to give GPIO14/15 the PL011)",
            "warn  raspberry pi: /boot/firmware/config.txt has sections doctor cannot evaluate ([gpio4=1]); their lines were skipped — check those sections by hand",
        ])
    }

    @Test func aPi5WithoutUART0FailsTwice() throws {
        let result = try doctor("pi5")
        #expect(result.status == 1)
        #expect(result.lines.first == "FAIL  gnss: /dev/ttyAMA0 cannot be opened: No such file or directory — check [gnss] device in the board file; a USB receiver: is it plugged in ('dmesg | tail'); a Raspberry Pi: enable the UART (enable_uart=1 in config.txt)")
        #expect(result.lines.last == "FAIL  raspberry pi 5: GPIO14/15's UART0 (ttyAMA0) is not switched on in /boot/firmware/config.txt — add 'dtparam=uart0=on' under [all] in /boot/firmware/config.txt and reboot")
    }

    @Test func usageErrorsExitTwoAndABrokenConfigExitsOne() throws {
        #expect(try locus(["doctor", "--bogus"]).status == 2)
        #expect(try locus(["doctor", "--config"]).status == 2)
        let missing = try locus(["doctor", "--config", "/nonexistent/site.toml"])
        #expect(missing.status == 1)
        #expect(missing.output == "FAIL  config: /nonexistent/site.toml does not check (the problems are above) — locus check-config /nonexistent/site.toml\n")
    }
}

@_silgen_name("posix_openpt") private func c_posix_openpt(_ flags: Int32) -> Int32
@_silgen_name("grantpt") private func c_grantpt(_ fd: Int32) -> Int32
@_silgen_name("unlockpt") private func c_unlockpt(_ fd: Int32) -> Int32
@_silgen_name("ptsname") private func c_ptsname(_ fd: Int32) -> UnsafeMutablePointer<CChar>?

/// A receiver on a real pseudo-terminal that talks NMEA only at 38400 baud: a pty enforces no
/// rate, so the writer reads the rate the reader set (tcgetattr on the master gives the slave's
/// settings) and sends sentences at 38400, framing-garbage-like bytes at any other rate.
final class RateSensitiveReceiver: @unchecked Sendable {
    let master: Int32
    let slavePath: String
    private let keepOpen: Int32
    private let lock = NSLock()
    private var stopped = false

    init() throws {
        master = c_posix_openpt(O_RDWR | O_NOCTTY)
        guard master >= 0, c_grantpt(master) == 0, c_unlockpt(master) == 0, let name = c_ptsname(master) else { throw POSIXError(.EIO) }
        slavePath = String(cString: name)
        keepOpen = open(slavePath, O_RDWR | O_NOCTTY) // a slave stays open between the reader's samples
        _ = fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK)
    }

    static func sentence(_ body: String) -> String {
        var checksum: UInt8 = 0
        for byte in body.utf8 { checksum ^= byte }
        return "$\(body)*\(String(format: "%02X", checksum))\r\n"
    }

    func start() {
        let nmea = Array((Self.sentence("GPRMC,120000.00,A,4807.038,N,01131.000,E,0.0,0.0,230324,,,A")
                          + Self.sentence("GPGGA,120000.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")).utf8)
        let garbage = (0..<160).map { UInt8(0x80 + $0 % 0x35) }
        Thread.detachNewThread {
            while !self.isStopped {
                var settings = termios()
                tcgetattr(self.master, &settings)
                let bytes = cfgetospeed(&settings) == speed_t(B38400) ? nmea : garbage
                _ = bytes.withUnsafeBytes { write(self.master, $0.baseAddress, $0.count) }
                usleep(50_000)
            }
        }
    }

    var isStopped: Bool { lock.withLock { stopped } }

    func stop() {
        lock.withLock { stopped = true }
        usleep(100_000)
        close(keepOpen)
        close(master)
    }
}

@Suite struct DoctorBaudTests {
    @Test func theBaudScanNamesTheRateTheReceiverSends() throws {
        let receiver = try RateSensitiveReceiver()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("doctor-baud-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/etc/locus", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/dev", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/var/lib/locus", withIntermediateDirectories: true)
        try "board = \"board.toml\"\nstate_dir = \"/var/lib/locus\"\n".write(toFile: root + "/etc/locus/site.toml", atomically: true, encoding: .utf8)
        try "[board]\nname = \"pty\"\n\n[gnss]\ndevice = \"/dev/gnss0\"\nbaud = 9600\n".write(toFile: root + "/etc/locus/board.toml", atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: root + "/dev/gnss0", withDestinationPath: receiver.slavePath)
        receiver.start()
        let run = try locus(["doctor", "--root", root])
        receiver.stop()
        let line = run.output.split(separator: "\n").first { $0.contains("gnss bytes:") }.map(String.init) ?? run.output
        #expect(line.hasPrefix("FAIL  gnss bytes: no NMEA at 9600 baud ("), "\(line)")
        #expect(line.hasSuffix("; the receiver sends NMEA at 38400 baud — set [gnss] baud = 38400 in the board file (or configure the receiver for 9600)"), "\(line)")
        #expect(run.status == 1)
    }
}
