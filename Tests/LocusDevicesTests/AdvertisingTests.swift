import LocusCore
import Testing
@testable import LocusDevices

// The gateway's own beacon through both scanners: the raw scanner's HCI commands (after the scan,
// again after every restart, and the disable on stop) against the recording controller, and the
// kernel scanner's mgmt instance against the recording kernel.

private func bytes(_ text: String) -> [UInt8] { text.split(separator: " ").map { UInt8($0, radix: 16)! } }

private let beacon = BeaconAdvertisement("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/100/7", measuredPower: -59, intervalUnits: 1600)!
private let iBeaconHex = "1A FF 4C 00 02 15 E2 C5 6D B5 DF FB 48 D2 B0 60 D0 F5 A7 10 96 E0 00 64 00 07 C5"

private func rawScanner(_ adapter: FakeAdapter) -> HCIScanner<RecordingDriver> {
    HCIScanner(adapterIndex: 0, settings: ScanSettings(dutyCycle: .continuous), driver: RecordingDriver(adapter: adapter), advertisement: beacon)
}

private func kernelScanner(_ kernel: FakeKernel) -> KernelScanner<FakeMgmt> {
    KernelScanner(adapterIndex: 0, powerOn: true, statePath: "/state/bluetooth-monitor", driver: FakeMgmt(kernel: kernel), advertisement: beacon)
}

@Suite struct AdvertisingTests {
    // MARK: raw HCI

    @Test func legacyScanThenLegacyAdvertising() {
        let adapter = FakeAdapter()
        var scanner = rawScanner(adapter)
        #expect(scanner.startIfDue(now: 0) == .started(.legacy))
        #expect(adapter.commands == [
            bytes("01 02 10 00"),
            bytes("01 0C 20 02 00 00"), bytes("01 0B 20 07 00 30 00 30 00 00 00"), bytes("01 0C 20 02 01 00"),
            bytes("01 0A 20 01 00"),
            bytes("01 06 20 0F 40 06 40 06 03 00 00 00 00 00 00 00 00 07 00"),
            bytes("01 08 20 20 1E 02 01 06 " + iBeaconHex + " 00"),
            bytes("01 0A 20 01 01"),
        ])
        #expect(scanner.advertising == .on(via: "legacy advertising commands") && scanner.advertisingRefusals == 0)
        adapter.commands = []
        #expect(scanner.stop() == nil)
        #expect(adapter.commands == [bytes("01 0C 20 02 00 00"), bytes("01 0A 20 01 00")], "scan off, then advertising off")
        #expect(scanner.advertising == .off)
    }

    /// Beside an extended scan the extended advertising commands, legacy PDUs.
    @Test func extendedScanThenExtendedAdvertising() {
        let adapter = FakeAdapter()
        adapter.octet37 = 0x60
        var scanner = rawScanner(adapter)
        #expect(scanner.startIfDue(now: 0) == .started(.extended))
        #expect(Array(adapter.sentOpcodes.suffix(4)) == [0x2039, 0x2036, 0x2037, 0x2039])
        #expect(!adapter.sentOpcodes.contains(0x2006) && !adapter.sentOpcodes.contains(0x2008) && !adapter.sentOpcodes.contains(0x200A),
                "no legacy advertising command after extended ones")
        #expect(Array(adapter.commands.suffix(4)) == [
            bytes("01 39 20 06 00 01 01 00 00 00"),
            bytes("01 36 20 19 01 10 00 40 06 00 40 06 00 07 00 00 00 00 00 00 00 00 00 7F 01 00 01 00 00"),
            bytes("01 37 20 22 01 03 01 1E 02 01 06 " + iBeaconHex),
            bytes("01 39 20 06 01 01 01 00 00 00"),
        ])
        #expect(scanner.advertising == .on(via: "extended advertising commands"))
        adapter.commands = []
        #expect(scanner.stop() == nil)
        #expect(adapter.commands == [bytes("01 42 20 06 00 00 00 00 00 00"), bytes("01 39 20 06 00 01 01 00 00 00")])
    }

    /// A controller that refuses: logged and counted, the scan runs on, nothing to disable on stop.
    @Test func aRefusalLeavesTheScanRunning() {
        let adapter = FakeAdapter()
        adapter.scripted[HCIOpcode.leSetAdvertisingParameters.rawValue] = [0x0C]
        var scanner = rawScanner(adapter)
        #expect(scanner.startIfDue(now: 0) == .started(.legacy))
        #expect(scanner.isOpen && scanner.controllerKind == .legacy)
        #expect(scanner.advertisingRefusals == 1)
        #expect(scanner.advertising == .refused(reason:
            "hci0: LE Set Advertising Parameters: controller status 0x0C (Command Disallowed): bluetoothd may be scanning or advertising on this adapter (scan = \"kernel\" scans beside it; or use another adapter)"))
        #expect(!adapter.sentOpcodes.contains(0x2008), "no data or enable after a refused step")
        adapter.commands = []
        #expect(scanner.stop() == nil)
        #expect(adapter.commands == [bytes("01 0C 20 02 00 00")])
        // The disable that goes first may fail (advertising was off); that is no refusal.
        let quiet = FakeAdapter()
        quiet.scripted[HCIOpcode.leSetAdvertisingEnable.rawValue] = [0x0C]
        var tolerant = rawScanner(quiet)
        _ = tolerant.startIfDue(now: 0)
        #expect(tolerant.advertising == .on(via: "legacy advertising commands") && tolerant.advertisingRefusals == 0)
        let invalid = HCIScannerError(adapterIndex: 0, step: .command(.leSetAdvertisingParameters), cause: .controller(.invalidParameters))
        #expect(invalid.message == "controller status 0x12 (Invalid HCI Command Parameters): the controller refused the advertising settings")
    }

    /// A restart (every self-healing step stops the scan and starts it again; a lost adapter is
    /// restarted with backoff) sends the whole advertising sequence again.
    @Test func advertisingReturnsAfterEveryRestart() {
        let adapter = FakeAdapter()
        var scanner = rawScanner(adapter)
        _ = scanner.startIfDue(now: 0)
        // The adapter goes down (a controller reset or power cycle): lost, no teardown.
        adapter.upStates = [0, 1]
        guard case .lost? = scanner.checkAdapter(now: 1) else { Issue.record("expected lost"); return }
        #expect(scanner.advertising == .off)
        adapter.commands = []
        #expect(scanner.startIfDue(now: 1 + 250_000_000) == .started(.legacy))
        #expect(Array(adapter.sentOpcodes.suffix(4)) == [0x200A, 0x2006, 0x2008, 0x200A])
        #expect(adapter.commands.last == bytes("01 0A 20 01 01"))
        #expect(scanner.advertising == .on(via: "legacy advertising commands"))
        // The healing's restart: stop, then start at once.
        _ = scanner.stop()
        scanner.restartSoon()
        adapter.commands = []
        _ = scanner.startIfDue(now: 2 + 250_000_000)
        #expect(Array(adapter.sentOpcodes.suffix(4)) == [0x200A, 0x2006, 0x2008, 0x200A])
    }

    @Test func withoutAnAdvertisementNothingIsSent() {
        let adapter = FakeAdapter()
        var scanner = HCIScanner(adapterIndex: 0, settings: ScanSettings(dutyCycle: .continuous), driver: RecordingDriver(adapter: adapter))
        _ = scanner.startIfDue(now: 0)
        #expect(adapter.sentOpcodes == [0x1002, 0x200C, 0x200B, 0x200C])
        #expect(scanner.advertising == .off)
    }

    // MARK: kernel (mgmt)

    /// The highest instance the adapter offers (bluetoothd numbers its own from 1 up), after the
    /// monitor; removed on stop.
    @Test func kernelAddsTheHighestInstance() {
        let kernel = FakeKernel()
        var scan = kernelScanner(kernel)
        _ = scan.startIfDue(now: 0)
        #expect(kernel.sentOpcodes == [0x0001, 0x0002, 0x0003, 0x0004, 0x0052, 0x003D, 0x003E])
        #expect(kernel.sent.last == bytes("3E 00 00 00 26 00 05 02 00 00 00 00 00 00 00 1B 00 " + iBeaconHex))
        #expect(scan.advertising == .on(via: "mgmt advertising instance 5") && scan.advertisingInstance == 5)
        kernel.sent = []
        #expect(scan.stop() == nil)
        #expect(kernel.sentOpcodes == [0x0053, 0x003F])
        #expect(kernel.sent.last == bytes("3F 00 00 00 01 00 05"))
    }

    @Test func kernelRefusalsAreCountedAndTheScanRuns() {
        let none = FakeKernel()
        none.maxInstances = 0
        var scan = kernelScanner(none)
        guard case .started? = scan.startIfDue(now: 0) else { Issue.record("the scan must start"); return }
        #expect(scan.advertising == .refused(reason: "hci0: Read Advertising Features: the adapter offers no advertising instance"))
        #expect(scan.advertisingRefusals == 1 && !none.sentOpcodes.contains(0x003E))
        none.sent = []
        _ = scan.stop()
        #expect(none.sentOpcodes == [0x0053], "nothing to remove")

        let refusing = FakeKernel()
        refusing.statuses[0x003E] = [0x0B]
        var other = kernelScanner(refusing)
        guard case .started? = other.startIfDue(now: 0) else { Issue.record("the scan must start"); return }
        #expect(other.advertising == .refused(reason: "hci0: Add Advertising: mgmt status Rejected") && other.advertisingRefusals == 1)
    }

    /// bluetoothd removes every instance when it starts (Advertising Removed for ours): added
    /// again at once; another program's instance is none of our business.
    @Test func kernelAddsAgainAfterRemovalAndPower() {
        let kernel = FakeKernel()
        var scan = kernelScanner(kernel)
        _ = scan.startIfDue(now: 0)
        kernel.sent = []
        kernel.queue = [mgmtEvent(0x0024, [5])]
        #expect("\(scan.read(now: 1) { _ in }!)" == "hci0: another program removed advertising instance 5; adding the beacon again")
        #expect(kernel.sentOpcodes == [0x003E] && scan.advertisingReadds == 1)
        _ = scan.read(now: 2) { _ in }
        #expect(scan.advertising == .on(via: "mgmt advertising instance 5"))
        kernel.queue = [mgmtEvent(0x0024, [1])]
        #expect(scan.read(now: 3) { _ in } == nil && scan.advertisingReadds == 1)

        // Powered off (a controller reset): off; powered again: added again.
        kernel.sent = []
        kernel.queue = [mgmtEvent(0x0006, [0x00, 0x02, 0, 0])]
        _ = scan.read(now: 4) { _ in }
        #expect(scan.advertising == .off && kernel.sent.isEmpty)
        kernel.queue = [mgmtEvent(0x0006, [0x01, 0x02, 0, 0])]
        _ = scan.read(now: 5) { _ in }
        _ = scan.read(now: 6) { _ in }
        #expect(kernel.sentOpcodes.contains(0x003E) && scan.advertisingReadds == 2)
        #expect(scan.advertising == .on(via: "mgmt advertising instance 5"))
        // A later refusal of a re-add is kept for the status.
        kernel.statuses[0x003E] = [0x0A]
        kernel.queue = [mgmtEvent(0x0024, [5])]
        _ = scan.read(now: 7) { _ in }
        _ = scan.read(now: 8) { _ in }
        #expect(scan.advertising == .refused(reason: "hci0: Add Advertising: mgmt status Busy") && scan.advertisingRefusals == 1)
    }
}
