import CLocus
import Glibc
import LocusCore
import Testing
@testable import LocusDevices

// The HCI scanner without a Bluetooth adapter: the real driver against this kernel (no hci0
// here; this machine's kernel may even lack AF_BLUETOOTH), libbluetooth's own framing through a
// socket pair, and a recording driver that plays the controller for the start, read, loss and
// stop paths. A later virtual-board test runs the same sequence against a real kernel (hci_vhci).

private let enodev: Int32 = 19, eperm: Int32 = 1, eacces: Int32 = 13, ebusy: Int32 = 16
private let eagain: Int32 = 11, enetdown: Int32 = 100, etimedout: Int32 = 110, erfkill: Int32 = 132
private let eafnosupport: Int32 = 97, epipe: Int32 = 32

private func bytes(_ text: String) -> [UInt8] { text.split(separator: " ").map { UInt8($0, radix: 16)! } }

/// The controller and kernel as the recording driver sees them. A class so the (non-mutating)
/// driver can record; tests only.
final class FakeAdapter {
    var calls: [String] = []
    /// Command packets (H4 form) in the order sent.
    var commands: [[UInt8]] = []
    var openResult: Int32 = 7
    /// isUp results in order; the last one repeats.
    var upStates: [Int32] = [1]
    var bringUpResult: Int32 = 0
    var filterResult: Int32 = 0
    /// Octet 37 of the supported-commands bitmap; nil answers with Unknown HCI Command.
    var octet37: UInt8? = 0x00
    /// Per opcode, results to hand out in order before answering success: a status code
    /// (>= 0) or -errno (< 0).
    var scripted: [UInt16: [Int32]] = [:]
    /// Events waiting on the socket; then `readError` (or EAGAIN).
    var events: [[UInt8]] = []
    var readError: Int32 = -eagain
    var reads = 0
    let savedPattern: [UInt8] = (0..<16).map { UInt8(0xA0 + $0) }
    var restored: [UInt8]?

    var sentOpcodes: [UInt16] { commands.map { UInt16($0[1]) | UInt16($0[2]) << 8 } }
}

struct RecordingDriver: HCIDriver {
    let adapter: FakeAdapter

    func open(adapterIndex: Int32) -> Int32 {
        adapter.calls.append("open \(adapterIndex)")
        return adapter.openResult
    }

    func close(_ descriptor: Int32) { adapter.calls.append("close \(descriptor)") }

    func isUp(_ descriptor: Int32, adapterIndex: Int32) -> Int32 {
        adapter.calls.append("isUp")
        return adapter.upStates.count > 1 ? adapter.upStates.removeFirst() : adapter.upStates[0]
    }

    func bringUp(_ descriptor: Int32, adapterIndex: Int32) -> Int32 {
        adapter.calls.append("bringUp")
        return adapter.bringUpResult
    }

    func setLEFilter(_ descriptor: Int32, saving saved: UnsafeMutableRawBufferPointer) -> Int32 {
        adapter.calls.append("setFilter")
        if adapter.filterResult == 0 { saved.copyBytes(from: adapter.savedPattern) }
        return adapter.filterResult
    }

    func restoreFilter(_ descriptor: Int32, from saved: UnsafeRawBufferPointer) -> Int32 {
        adapter.calls.append("restoreFilter")
        adapter.restored = Array(saved)
        return 0
    }

    func request(_ descriptor: Int32, _ command: HCICommand, reply: UnsafeMutableRawBufferPointer, timeoutMs: Int32) -> Int {
        let packet = Array(command.packet)
        adapter.commands.append(packet)
        adapter.calls.append("request \(command.opcode)")
        var status: UInt8 = 0
        if var queue = adapter.scripted[command.opcode.rawValue], !queue.isEmpty {
            let next = queue.removeFirst()
            adapter.scripted[command.opcode.rawValue] = queue
            if next < 0 { return Int(next) }
            status = UInt8(next)
        }
        if command.opcode == .readLocalSupportedCommands {
            guard let octet37 = adapter.octet37 else { reply[0] = 0x01; return 1 }
            for index in 0..<65 { reply[index] = 0 }
            reply[0] = status
            reply[1 + 37] = octet37
            return 65
        }
        reply[0] = status
        return 1
    }

    func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        adapter.reads += 1
        if adapter.events.isEmpty { return Int(adapter.readError) }
        let event = adapter.events.removeFirst()
        buffer.copyBytes(from: event)
        return event.count
    }
}

private func recordingScanner(_ adapter: FakeAdapter, dutyCycle: ScanDutyCycle = .continuous) -> HCIScanner<RecordingDriver> {
    HCIScanner(adapterIndex: 0, settings: ScanSettings(dutyCycle: dutyCycle), driver: RecordingDriver(adapter: adapter))
}

private let backoffMs: [Int64] = [250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000]

/// Calls `startIfDue` at each due time and returns the retry delays it reported, after checking
/// that an early call does nothing.
private func retryDelays<D: HCIDriver>(_ scanner: inout HCIScanner<D>, attempts: Int, check: (HCIScannerError) -> Void) -> [Int64] {
    var now: Int64 = 1_000_000_000
    var delays: [Int64] = []
    for _ in 0..<attempts {
        guard case .startFailed(let error, let retryInMs)? = scanner.startIfDue(now: now) else {
            Issue.record("expected startFailed")
            return delays
        }
        check(error)
        delays.append(retryInMs)
        #expect(scanner.isOpen == false)
        #expect(scanner.nextAttemptAtNs == now + retryInMs * 1_000_000)
        #expect(scanner.startIfDue(now: now + retryInMs * 1_000_000 - 1) == nil, "no attempt before the retry time")
        now += retryInMs * 1_000_000
    }
    return delays
}

@Suite struct HCIScannerTests {
    // MARK: no adapter on this machine

    /// The real driver. Without an adapter the kernel answers ENODEV; a kernel built without
    /// Bluetooth (as on this build machine) answers EAFNOSUPPORT. Index 63 keeps the test off a
    /// real hci0 on a developer's gateway.
    @Test func missingAdapterIsReportedAndRetriedWithBackoff() {
        var scanner = HCIScanner(adapterIndex: 63, settings: ScanSettings(dutyCycle: .balanced), driver: LibBluetoothHCI())
        let delays = retryDelays(&scanner, attempts: backoffMs.count) { error in
            #expect(error.step == .open)
            guard case .system(let system) = error.cause else { Issue.record("\(error)"); return }
            #expect(system.code == enodev || system.code == eafnosupport, "\(error)")
            if system.code == enodev {
                #expect(error.description == "hci63: open: no adapter hci63 ('hciconfig -a' lists the adapters the kernel has)")
            } else {
                #expect(error.description == "hci63: open: " + HCIScannerAdvice.noBluetoothInKernel)
            }
        }
        #expect(delays == backoffMs)
        #expect(scanner.descriptor == nil)
        #expect(scanner.stop() == nil)
    }

    @Test func absentAdapterThroughTheDriverSeam() {
        let adapter = FakeAdapter()
        adapter.openResult = -enodev
        var scanner = recordingScanner(adapter)
        let delays = retryDelays(&scanner, attempts: backoffMs.count) { error in
            #expect(error == HCIScannerError(adapterIndex: 0, step: .open, cause: .system(SystemError(code: enodev))))
            #expect(error.message == "no adapter hci0 ('hciconfig -a' lists the adapters the kernel has)")
            #expect(error.message == HCIScannerAdvice.noAdapter(0))
        }
        #expect(delays == backoffMs)
        #expect(adapter.calls == Array(repeating: "open 0", count: backoffMs.count), "nothing to close when open failed")
    }

    @Test func adviceForEachErrno() {
        func message(_ code: Int32) -> String { HCIScannerAdvice.message(for: SystemError(code: code), adapterIndex: 2) }
        let capabilities = "needs CAP_NET_RAW and CAP_NET_ADMIN (run as root, or setcap 'cap_net_raw,cap_net_admin+eip' on the binary)"
        let busy = "the adapter is busy: bluetoothd or another scanner holds it (scan = \"kernel\" scans beside it; or use another adapter)"
        #expect(message(eperm) == capabilities)
        #expect(message(eacces) == capabilities)
        #expect(HCIScannerAdvice.needsCapabilities == capabilities)
        #expect(message(ebusy) == busy)
        #expect(HCIScannerAdvice.busy == busy)
        #expect(message(enodev) == "no adapter hci2 ('hciconfig -a' lists the adapters the kernel has)")
        #expect(message(erfkill) == "the adapter is blocked by rfkill (run 'rfkill unblock bluetooth')")
        #expect(message(eafnosupport) == HCIScannerAdvice.noBluetoothInKernel)
        #expect(message(enetdown) == HCIScannerAdvice.down)
        #expect(message(epipe) == HCIScannerAdvice.removed)
        #expect(message(etimedout) == "the controller did not answer within 1000 ms (check the adapter's power and firmware)")
        #expect(message(5) == "Input/output error (errno 5)")
        #expect(HCIScannerAdvice.message(for: .commandDisallowed)
                == "controller status 0x0C (Command Disallowed): bluetoothd may be scanning or advertising on this adapter (scan = \"kernel\" scans beside it; or use another adapter)")
        let error = HCIScannerError(adapterIndex: 0, step: .command(.leSetScanParameters), cause: .controller(.invalidParameters))
        #expect(error.description == "hci0: LE Set Scan Parameters: controller status 0x12 (Invalid HCI Command Parameters): the controller refused the scan settings")
    }

    // MARK: libbluetooth's framing

    /// What libbluetooth's hci_send_cmd writes (through locus_hci_send_command) for each
    /// command's OGF, OCF and parameters is exactly the command's H4 packet.
    @Test func libbluetoothFramesCommandsTheSameWay() throws {
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &pair) == 0)
        defer { Glibc.close(pair[0]); Glibc.close(pair[1]) }
        var commands: [HCICommand] = [.readLocalSupportedCommands(), .leReadLocalSupportedFeatures(),
                                      .leSetScanEnable(true, filterDuplicates: true),
                                      .leSetExtendedScanEnable(false, filterDuplicates: false)]
        for tier in ScanDutyCycle.allCases {
            commands.append(.leSetScanParameters(ScanSettings(dutyCycle: tier, scanType: .active)))
            commands.append(.leSetExtendedScanParameters(ScanSettings(dutyCycle: tier)))
        }
        // The gateway's own beacon: the longest commands (32 and 34 parameter octets).
        let beacon = try #require(BeaconAdvertisement("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/1/2"))
        for controller in [HCIControllerKind.legacy, .extended] {
            for step in HCIAdvertisingSequence.setup(beacon, controller: controller) { commands.append(step.command) }
        }
        for command in commands {
            let sent = command.withUnsafeParameters {
                locus_hci_send_command(pair[0], command.ogf, command.ocf, $0.baseAddress, UInt8($0.count))
            }
            #expect(sent == 0)
            var received = [UInt8](repeating: 0, count: 64)
            let count = recv(pair[1], &received, received.count, 0)
            #expect(Array(received.prefix(max(count, 0))) == Array(command.packet), "\(command)")
        }
    }

    // MARK: start, read, stop with a recording driver

    @Test func legacyStartReadAndStop() {
        let adapter = FakeAdapter()
        var scanner = recordingScanner(adapter)
        #expect(scanner.startIfDue(now: 0) == .started(.legacy))
        #expect(scanner.isOpen == true)
        #expect(scanner.descriptor?.rawValue == 7)
        #expect(scanner.controllerKind == .legacy)
        #expect(adapter.calls == ["open 0", "isUp", "setFilter", "request Read Local Supported Commands",
                                  "request LE Set Scan Enable", "request LE Set Scan Parameters", "request LE Set Scan Enable"])
        #expect(adapter.commands == [bytes("01 02 10 00"), bytes("01 0C 20 02 00 00"),
                                     bytes("01 0B 20 07 00 30 00 30 00 00 00"), bytes("01 0C 20 02 01 00")])

        // Two LE Meta events are waiting; each reaches the closure whole, with its H4 indicator.
        let first = bytes("04 3E 0C 02 01 03 00 11 22 33 44 55 66 00 C5")
        let second = bytes("04 3E 0C 02 01 00 01 AA BB CC DD EE FF 00 B0")
        adapter.events = [first, second]
        var seen: [[UInt8]] = []
        #expect(scanner.read(now: 1) { seen.append(Array($0)) } == nil)
        #expect(seen == [first, second])
        #expect(scanner.eventsRead == 2)

        adapter.calls = []
        adapter.commands = []
        #expect(scanner.stop() == nil)
        #expect(adapter.calls == ["request LE Set Scan Enable", "restoreFilter", "close 7"])
        #expect(adapter.commands == [bytes("01 0C 20 02 00 00")])
        #expect(adapter.restored == adapter.savedPattern, "the filter saved at start is put back")
        #expect(scanner.isOpen == false)
    }

    /// A new accuracy tier's timing: the scan is stopped, and the next start (due at once) sends
    /// LE Set Scan Parameters with the tier's window and interval.
    @Test func reconfigureRestartsTheScanWithTheTiersTiming() throws {
        let adapter = FakeAdapter()
        var scanner = recordingScanner(adapter)
        #expect(scanner.startIfDue(now: 0) == .started(.legacy))
        #expect(scanner.reconfigure(scanner.settings) == nil && scanner.isOpen, "the same timing changes nothing")
        adapter.commands = []
        // hundredMeters: 30 ms of every 120 ms = 48 of 192 units.
        #expect(scanner.reconfigure(try ScanSettings(scanType: .passive, intervalMs: 120, windowMs: 30)) == nil)
        #expect(scanner.isOpen == false && scanner.nextAttemptAtNs == 0)
        #expect(scanner.startIfDue(now: 1) == .started(.legacy))
        #expect(adapter.commands == [bytes("01 0C 20 02 00 00"), bytes("01 02 10 00"), bytes("01 0C 20 02 00 00"),
                                     bytes("01 0B 20 07 00 C0 00 30 00 00 00"), bytes("01 0C 20 02 01 00")])
    }

    @Test func readsAreBoundedPerTurn() {
        let adapter = FakeAdapter()
        var scanner = recordingScanner(adapter)
        _ = scanner.startIfDue(now: 0)
        let event = bytes("04 3E 03 02 00 00")
        adapter.events = Array(repeating: event, count: 100)
        var count = 0
        _ = scanner.read(now: 1) { _ in count += 1 }
        #expect(count == HCIScanner<RecordingDriver>.maximumReadsPerTurn)
        _ = scanner.read(now: 2) { _ in count += 1 }
        #expect(count == 2 * HCIScanner<RecordingDriver>.maximumReadsPerTurn)
    }

    @Test func extendedControllerGetsExtendedCommands() {
        let adapter = FakeAdapter()
        adapter.octet37 = 0x60
        var scanner = recordingScanner(adapter, dutyCycle: .lowPower)
        #expect(scanner.startIfDue(now: 0) == .started(.extended))
        #expect(adapter.commands == [bytes("01 02 10 00"), bytes("01 42 20 06 00 00 00 00 00 00"),
                                     bytes("01 41 20 08 00 00 01 00 00 08 30 00"), bytes("01 42 20 06 01 00 00 00 00 00")])
        adapter.commands = []
        #expect(scanner.stop() == nil)
        #expect(adapter.commands == [bytes("01 42 20 06 00 00 00 00 00 00")])
    }

    @Test func brokenExtendedScanFallsBackToLegacy() {
        let adapter = FakeAdapter()
        adapter.octet37 = 0x60
        adapter.scripted[HCIOpcode.leSetExtendedScanParameters.rawValue] = [0x01]
        var scanner = recordingScanner(adapter)
        guard case .startFailed(let error, 250)? = scanner.startIfDue(now: 0) else { Issue.record("expected failure"); return }
        #expect(error.step == .command(.leSetExtendedScanParameters))
        #expect(error.cause == .controller(.unknownCommand))
        #expect(scanner.extendedScanBroken == true)
        #expect(adapter.calls.last == "close 7")
        adapter.commands = []
        #expect(scanner.startIfDue(now: 250_000_000) == .started(.legacy))
        #expect(adapter.sentOpcodes == [0x1002, 0x200C, 0x200B, 0x200C])
    }

    @Test func failingCommandStatusOnExtendedAlsoFallsBack() {
        // libbluetooth reports a failing Command Status as EIO.
        let adapter = FakeAdapter()
        adapter.octet37 = 0x60
        adapter.scripted[HCIOpcode.leSetExtendedScanEnable.rawValue] = [0, -5]
        var scanner = recordingScanner(adapter)
        guard case .startFailed(let error, _)? = scanner.startIfDue(now: 0) else { Issue.record("expected failure"); return }
        #expect(error.description == "hci0: LE Set Extended Scan Enable: " + HCIScannerAdvice.commandRejected)
        #expect(scanner.extendedScanBroken == true)
    }

    @Test func undetectableControllerIsTriedWithLegacyCommands() {
        let adapter = FakeAdapter()
        adapter.octet37 = nil
        var scanner = recordingScanner(adapter)
        #expect(scanner.startIfDue(now: 0) == .started(.legacy))
    }

    @Test func disableFirstMayFailButParametersMayNot() {
        let adapter = FakeAdapter()
        adapter.scripted[HCIOpcode.leSetScanEnable.rawValue] = [0x0C]   // the first disable: Command Disallowed
        var scanner = recordingScanner(adapter)
        #expect(scanner.startIfDue(now: 0) == .started(.legacy))
        _ = scanner.stop()

        let refusing = FakeAdapter()
        refusing.scripted[HCIOpcode.leSetScanParameters.rawValue] = [0x0C]
        var other = recordingScanner(refusing)
        guard case .startFailed(let error, _)? = other.startIfDue(now: 0) else { Issue.record("expected failure"); return }
        #expect(error.description == "hci0: LE Set Scan Parameters: controller status 0x0C (Command Disallowed): bluetoothd may be scanning or advertising on this adapter (scan = \"kernel\" scans beside it; or use another adapter)")
        #expect(refusing.sentOpcodes == [0x1002, 0x200C, 0x200B], "nothing after the refused command")
        #expect(refusing.calls.last == "close 7")
        #expect(other.isOpen == false)
    }

    @Test func downAdapterIsBroughtUpAndRefusalExplained() {
        let adapter = FakeAdapter()
        adapter.upStates = [0, 1]
        var scanner = recordingScanner(adapter)
        #expect(scanner.startIfDue(now: 0) == .started(.legacy))
        #expect(Array(adapter.calls.prefix(4)) == ["open 0", "isUp", "bringUp", "setFilter"])

        let unprivileged = FakeAdapter()
        unprivileged.upStates = [0]
        unprivileged.bringUpResult = -eperm
        var other = recordingScanner(unprivileged)
        guard case .startFailed(let error, 250)? = other.startIfDue(now: 0) else { Issue.record("expected failure"); return }
        #expect(error.step == .bringUp)
        #expect(error.message == HCIScannerAdvice.needsCapabilities)
        #expect(unprivileged.calls == ["open 0", "isUp", "bringUp", "close 7"])

        let blocked = FakeAdapter()
        blocked.upStates = [0]
        blocked.bringUpResult = -erfkill
        var third = recordingScanner(blocked)
        guard case .startFailed(let rfkill, _)? = third.startIfDue(now: 0) else { Issue.record("expected failure"); return }
        #expect(rfkill.description == "hci0: bring up: the adapter is blocked by rfkill (run 'rfkill unblock bluetooth')")
    }

    @Test func commandsRefusedWithoutCapabilities() {
        // Without CAP_NET_RAW the kernel refuses to send LE commands on a raw socket (EPERM).
        let adapter = FakeAdapter()
        adapter.scripted[HCIOpcode.leSetScanEnable.rawValue] = [-eperm]
        var scanner = recordingScanner(adapter)
        guard case .startFailed(let error, _)? = scanner.startIfDue(now: 0) else { Issue.record("expected failure"); return }
        #expect(error.description == "hci0: LE Set Scan Enable: " + HCIScannerAdvice.needsCapabilities)
    }

    @Test func busyAdapter() {
        let adapter = FakeAdapter()
        adapter.openResult = -ebusy
        var scanner = recordingScanner(adapter)
        guard case .startFailed(let error, _)? = scanner.startIfDue(now: 0) else { Issue.record("expected failure"); return }
        #expect(error.description == "hci0: open: " + HCIScannerAdvice.busy)
    }

    // MARK: losing the adapter

    @Test func readErrorLosesTheAdapterAndRestarts() {
        let adapter = FakeAdapter()
        var scanner = recordingScanner(adapter)
        _ = scanner.startIfDue(now: 0)
        adapter.readError = -enetdown
        let now: Int64 = 5_000_000_000
        let event = scanner.read(now: now) { _ in }
        #expect(event == .lost(HCIScannerError(adapterIndex: 0, step: .read, cause: .system(SystemError(code: enetdown))), retryInMs: 250))
        #expect(scanner.isOpen == false)
        #expect(scanner.losses == 1)
        #expect(adapter.calls.last == "close 7")
        #expect(scanner.read(now: now) { _ in } == nil, "nothing to read while closed")
        adapter.readError = -eagain
        #expect(scanner.startIfDue(now: now + 249_000_000) == nil)
        #expect(scanner.startIfDue(now: now + 250_000_000) == .started(.legacy))
    }

    @Test func unpluggedAdapter() {
        // After the kernel unregisters the adapter, the socket reads EPIPE once.
        let adapter = FakeAdapter()
        var scanner = recordingScanner(adapter)
        _ = scanner.startIfDue(now: 0)
        adapter.readError = -epipe
        guard case .lost(let error, _)? = scanner.read(now: 1, { _ in }) else { Issue.record("expected loss"); return }
        #expect(error.message == HCIScannerAdvice.removed)
    }

    @Test func checkAdapterNoticesDown() {
        let adapter = FakeAdapter()
        var scanner = recordingScanner(adapter)
        _ = scanner.startIfDue(now: 0)
        #expect(scanner.checkAdapter(now: 1) == nil)
        adapter.upStates = [0]
        let event = scanner.checkAdapter(now: 2)
        #expect(event == .lost(HCIScannerError(adapterIndex: 0, step: .check, cause: .adapterDown), retryInMs: 250))
        #expect(event?.description == "hci0: check: the adapter went down (hciconfig down, rfkill, or a controller reset); retrying in 250 ms")
        #expect(!adapter.calls.contains("request LE Set Scan Enable") || adapter.calls.last == "close 7")
        // Restarting brings it up again.
        adapter.upStates = [0, 1]
        #expect(scanner.startIfDue(now: 2 + 250_000_000) == .started(.legacy))
        #expect(adapter.calls.contains("bringUp"))
    }

    @Test func backoffGrowsAcrossFailedRestartsAndResetsAfterSuccess() {
        let adapter = FakeAdapter()
        var scanner = recordingScanner(adapter)
        _ = scanner.startIfDue(now: 0)
        adapter.upStates = [0]
        #expect(scanner.checkAdapter(now: 0) == .lost(HCIScannerError(adapterIndex: 0, step: .check, cause: .adapterDown), retryInMs: 250))
        adapter.openResult = -enodev
        let delays = retryDelays(&scanner, attempts: 3) { _ in }
        #expect(delays == [500, 1000, 2000])
        adapter.openResult = 7
        adapter.upStates = [1]
        #expect(scanner.startIfDue(now: 100_000_000_000) == .started(.legacy))
        adapter.readError = -enetdown
        #expect(scanner.read(now: 100_000_000_000) { _ in } == .lost(HCIScannerError(adapterIndex: 0, step: .read, cause: .system(SystemError(code: enetdown))), retryInMs: 250))
    }

    // MARK: stopping

    @Test func stopDrainsAndRetriesATimedOutDisable() {
        let adapter = FakeAdapter()
        var scanner = recordingScanner(adapter)
        _ = scanner.startIfDue(now: 0)
        adapter.events = Array(repeating: bytes("04 3E 03 02 00 00"), count: 40)
        adapter.scripted[HCIOpcode.leSetScanEnable.rawValue] = [-etimedout, -etimedout]
        adapter.commands = []
        adapter.reads = 0
        #expect(scanner.stop() == nil)
        #expect(adapter.events.isEmpty, "queued events were drained before the disable")
        #expect(adapter.reads == 40 + 3, "each drain stops at the first empty read")
        #expect(adapter.commands == Array(repeating: bytes("01 0C 20 02 00 00"), count: 3))
        #expect(adapter.calls.suffix(2) == ["restoreFilter", "close 7"])
    }

    @Test func stopReportsAFailedDisableAndStillCloses() {
        let adapter = FakeAdapter()
        var scanner = recordingScanner(adapter)
        _ = scanner.startIfDue(now: 0)
        adapter.scripted[HCIOpcode.leSetScanEnable.rawValue] = [-etimedout, -etimedout, -etimedout]
        let problem = scanner.stop()
        #expect(problem == HCIScannerError(adapterIndex: 0, step: .command(.leSetScanEnable), cause: .system(SystemError(code: etimedout))))
        #expect(adapter.calls.suffix(2) == ["restoreFilter", "close 7"])
        #expect(scanner.stop() == nil, "a second stop does nothing")
    }

    @Test func droppingAScanningScannerDisablesScanning() {
        let adapter = FakeAdapter()
        do {
            var scanner = recordingScanner(adapter)
            _ = scanner.startIfDue(now: 0)
            adapter.commands = []
            adapter.calls = []
        }
        #expect(adapter.commands == [bytes("01 0C 20 02 00 00")])
        #expect(adapter.calls == ["request LE Set Scan Enable", "restoreFilter", "close 7"])
    }
}
