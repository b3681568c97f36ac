import Testing
@testable import LocusCore

/// Doctor's decisions on values a probe would gather on a gateway (GPIO chips, the clock, the
/// state directory, consoles by device number): the cases the host's fixture trees cannot show.
@Suite struct DoctorDecisionTests {
    let board = BoardConfig.GPIO(chip: .label("pinctrl-bcm2711"),
                                 outputs: [BoardConfig.Output(name: "relay1", line: 17, activeLow: false, safe: 0),
                                           BoardConfig.Output(name: "relay2", line: 60, activeLow: false, safe: 0)],
                                 inputs: [BoardConfig.Input(name: "motion", line: 22, activeLow: false, bias: .asIs)])
    let chips = [SystemChecks.GPIOChip(name: "gpiochip0", label: "pinctrl-bcm2711", lineCount: 58),
                 SystemChecks.GPIOChip(name: "gpiochip1", label: "raspberrypi-exp-gpio", lineCount: 8)]

    @Test func gpioLinesOutOfRangeOrHeldFail() {
        let findings = SystemChecks.gpio(board, chips: chips, consumers: [nil, nil, "gpio-keys"])
        #expect(findings.map(\.description) == [
            "ok    gpio: gpiochip0 'pinctrl-bcm2711' (58 lines): relay1 17 usable",
            "FAIL  gpio: relay2 is line 60 but pinctrl-bcm2711 has 58 lines (0...57) — correct its line in the board file ('gpioinfo gpiochip0')",
            "FAIL  gpio: motion (line 22 of pinctrl-bcm2711) is held by 'gpio-keys' — free it (a device tree overlay, a gpio-leds or sysfs export, another program: 'gpioinfo gpiochip0') or use another line",
        ])
        var fine = board
        fine.outputs.removeLast()
        #expect(SystemChecks.gpio(fine, chips: chips, consumers: [nil, "locus"]).map(\.description) == ["ok    gpio: gpiochip0 'pinctrl-bcm2711' (58 lines): relay1 17, motion 22 usable"])
    }

    @Test func aMissingChipListsTheLabelsFound() {
        var other = board
        other.chip = .label("pinctrl-rp1")
        #expect(SystemChecks.gpio(other, chips: chips, consumers: []).map(\.description) == [
            "FAIL  gpio: no GPIO chip labelled 'pinctrl-rp1' (found: gpiochip0 'pinctrl-bcm2711', gpiochip1 'raspberrypi-exp-gpio') — set [gpio] label (or chip) in the board file to one of those ('gpiodetect' lists them)"])
        other.chip = .name("/dev/gpiochip1")
        #expect(SystemChecks.chip(other.chip, among: chips)?.label == "raspberrypi-exp-gpio")
    }

    @Test func anUnsynchronisedClockFailsOnlyWithoutGNSS() {
        #expect(SystemChecks.clock(synchronised: true, hasGNSS: false).level == .ok)
        #expect(SystemChecks.clock(synchronised: false, hasGNSS: true).level == .warn)
        #expect(SystemChecks.clock(synchronised: false, hasGNSS: false).description == "FAIL  clock: not synchronised and the board has no GNSS receiver — enable systemd-timesyncd or chrony ('sudo timedatectl set-ntp true')")
    }

    @Test func stateDirectoryNamesTheErrorAndTheRoomLeft() {
        let readOnly = SystemChecks.StateProbe(failure: "create: Read-only file system (EROFS)", exists: true, freeBytes: nil, logBytes: 0)
        #expect(SystemChecks.stateDirectory("/var/lib/locus", readOnly, retainBytes: 512 << 20).description
                == "FAIL  state: cannot write in /var/lib/locus: create: Read-only file system (EROFS) — the log lives there: make it writable for the agent's user (a read-only or full file system, or its owner: 'ls -ld /var/lib/locus')")
        let full = SystemChecks.StateProbe(failure: nil, exists: true, freeBytes: 100_000_000, logBytes: 12_000_000)
        #expect(SystemChecks.stateDirectory("/var/lib/locus", full, retainBytes: 512_000_000).description
                == "warn  state: /var/lib/locus is writable but has 100 MB free; the log may grow by 500 MB ([log] retain 512 MB) — free space, or lower [log] retain in the site file")
        let roomy = SystemChecks.StateProbe(failure: nil, exists: true, freeBytes: 12_345_000_000, logBytes: 0)
        #expect(SystemChecks.stateDirectory("/s", roomy, retainBytes: 512 << 20).description == "ok    state: /s is writable, 12.3 GB free for a log of up to 536 MB")
    }

    @Test func aConsoleIsFoundByDeviceNumber() {
        let node = DeviceNode(kind: .characterDevice, major: 4, minor: 64)
        let consoles = [ProcConsoles.Console(name: "ttyS0", major: 4, minor: 64)]
        #expect(SerialChecks.console(name: "ttyS0", node: node, consoles: consoles, commandLine: []).description
                == "FAIL  console: ttyS0 is a kernel console (/proc/consoles: ttyS0) — remove 'console=...' naming it from the kernel command line (/boot/firmware/cmdline.txt; raspi-config: Interface Options, Serial Port, login shell No) and reboot")
        #expect(SerialChecks.console(name: "ttyUSB0", node: DeviceNode(kind: .characterDevice, major: 188, minor: 0), consoles: consoles, commandLine: [("tty1", "tty1")]).level == .ok)
        #expect(SerialChecks.holders("/dev/ttyS0", [Holder(pid: 9, name: "locus")]).description == "ok    gnss: /dev/ttyS0 is open only in the agent (pid 9)")
    }

    @Test func piBluetoothOnThePL011FailsForTtyAMA0() {
        let facts = PiUARTCheck.Facts(model: "Raspberry Pi 4 Model B", headerCompatible: ["brcm,bcm2835-aux-uart"], bluetoothOnPL011: true,
                                      config: PiConfigTxt(), configPath: "/boot/firmware/config.txt")
        #expect(PiUARTCheck.check(facts, gnssName: "ttyAMA0").map(\.description) == [
            "FAIL  raspberry pi: ttyAMA0 (the PL011) drives the onboard Bluetooth, not GPIO14/15 — add 'dtoverlay=disable-bt' under [all] in /boot/firmware/config.txt, run 'sudo systemctl disable hciuart', reboot, and use /dev/serial0"])
        let pi5 = PiUARTCheck.Facts(model: "Raspberry Pi 5 Model B", headerCompatible: [], bluetoothOnPL011: false, config: PiConfigTxt(), configPath: "/boot/firmware/config.txt")
        #expect(PiUARTCheck.check(pi5, gnssName: "ttyAMA10").first?.level == .warn)
    }

    @Test func theReceiversBytesAtTheConfiguredRate() {
        var score = NMEABaudScore()
        score.bytes = 900
        score.sentences = 12
        score.rejected = 1
        #expect(GNSSBytesCheck.configured(baud: 9600, score)?.description == "ok    gnss bytes: NMEA at 9600 baud (12 sentences in 3 s, 1 rejected)")
        #expect(GNSSBytesCheck.configured(baud: 9600, NMEABaudScore())?.level == .fail)
        var ubx = NMEABaudScore()
        ubx.bytes = 300
        ubx.ubxFrames = 4
        #expect(GNSSBytesCheck.configured(baud: 38400, ubx)?.level == .warn)
        var noise = NMEABaudScore()
        noise.bytes = 2000
        noise.rejected = 3
        #expect(GNSSBytesCheck.configured(baud: 9600, noise) == nil)
        #expect(GNSSBytesCheck.scanned(baud: 9600, noise, found: nil).description
                == "FAIL  gnss bytes: no NMEA at 9600 baud (2000 bytes, 0 sentences, 3 rejected) nor at the other usual rates — check the wiring (TX and RX swapped?), RS-232 levels on a 3.3 V UART, and the receiver's protocol")
    }

    @Test func hciSocketHoldersOtherThanBluetoothdAndTheAgentAreNamed() {
        let findings = SystemChecks.bluetooth(index: 1, present: true, switches: [SystemChecks.RadioSwitch(name: "hci1", type: "bluetooth", softBlocked: false, hardBlocked: true)],
                                              up: false, bluetoothd: [], socketHolders: [Holder(pid: 5, name: "locus"), Holder(pid: 6, name: "bluetoothd")])
        #expect(findings.map(\.level) == [.fail, .warn])
        #expect(findings[0].text == "bluetooth: hci1 is hard-blocked by rfkill")
    }

    @Test func aUserChannelHolderFailsOnceByName() {
        let findings = SystemChecks.bluetooth(index: 0, present: true, switches: [], up: false, bluetoothd: [],
                                              socketHolders: [Holder(pid: 7, name: "hci-exclusive"), Holder(pid: 8, name: "btproxy")],
                                              userChannel: ["hci-exclusive"])
        #expect(findings.map(\.description) == [
            "ok    bluetooth: hci0 present, not blocked by rfkill",
            "warn  bluetooth: hci0 is down — the agent brings it up at start (with CAP_NET_ADMIN); by hand: 'sudo btmgmt --index 0 power on'",
            "FAIL  bluetooth: hci0 is held through the HCI user channel by 'hci-exclusive': nothing can scan beside it — stop that program, or give Locus another adapter ([bluetooth] hci in the board file)",
            "warn  bluetooth: 'btproxy' (pid 8) has an HCI socket open — if it holds hci0 through the HCI user channel the agent cannot scan beside it: stop it, or give Locus another adapter",
        ])
    }

    @Test func groupNamesComeFromEtcGroup() {
        let group = Array("root:x:0:\ntty:x:5:\n\ndialout:x:20:pi,locus\nbroken\n:x:21:\nodd:x:notanumber:\n".utf8)
        #expect(EtcGroup.name(of: 20, in: group) == "dialout")
        #expect(EtcGroup.name(of: 5, in: group) == "tty")
        #expect(EtcGroup.name(of: 21, in: group) == nil)
        #expect(EtcGroup.name(of: 99, in: group) == nil)
    }

    @Test func aPortTheServiceCannotOpenFails() {
        let console = DeviceNode(kind: .characterDevice, major: 4, minor: 64, mode: 0o620, group: "tty")
        #expect(SerialChecks.device("/dev/serial0", name: "ttyS0", node: console, error: "").description
                == "FAIL  gnss: /dev/serial0 (ttyS0) is group tty, mode 0620: the service's user (groups locus, dialout, gpio) cannot open it — a udev rule: KERNEL==\"ttyS0\", GROUP=\"dialout\", MODE=\"0660\" (in /etc/udev/rules.d/99-gnss.rules), then 'sudo udevadm trigger'")
        #expect(SerialChecks.device("/dev/ttyUSB0", name: "ttyUSB0", node: DeviceNode(kind: .characterDevice, major: 188, minor: 0, mode: 0o660, group: "dialout"), error: "").level == .ok)
        #expect(SerialChecks.device("/dev/ttyUSB0", name: "ttyUSB0", node: DeviceNode(kind: .characterDevice, major: 188, minor: 0, mode: 0o600, group: "dialout"), error: "").level == .fail)
        #expect(SerialChecks.device("/dev/x", name: "x", node: DeviceNode(kind: .regular, major: 0, minor: 0), error: "").level == .fail)
    }
}
