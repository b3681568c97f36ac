import CLocus
import LocusCore
import Testing
@testable import LocusDevices

// Kernel-mode scanning against a recording driver that plays the kernel's mgmt interface: each
// command written is answered with a Command Complete (layouts from include/net/bluetooth/mgmt.h)
// unless the test scripts a status; events the test queues arrive on the next read.

private let statePath = "/state/bluetooth-monitor"

private func scanner(_ kernel: FakeKernel, powerOn: Bool = true) -> KernelScanner<FakeMgmt> {
    KernelScanner(adapterIndex: 0, powerOn: powerOn, statePath: statePath, driver: FakeMgmt(kernel: kernel))
}

@Suite struct KernelScannerTests {
    @Test func startChecksTheKernelAndAddsTheBeaconMonitor() {
        let kernel = FakeKernel()
        var scan = scanner(kernel)
        let started = scan.startIfDue(now: 0)
        #expect("\(started!)" == "scanning through the kernel's advertisement monitor (handle 1)")
        #expect(kernel.sentOpcodes == [0x0001, 0x0002, 0x0003, 0x0004, 0x0052])
        #expect(kernel.sent.last?.count == 6 + 137)
        #expect(kernel.state[statePath] == "6A:6B:C9:A2:3E:43 1\n")
        #expect(scan.monitorHandle == 1 && scan.isOpen)
    }

    @Test func powersTheAdapterOnlyWhenTheBoardAllows() {
        let kernel = FakeKernel()
        kernel.settings = 0x0200
        var scan = scanner(kernel)
        #expect("\(scan.startIfDue(now: 0)!)" == "scanning through the kernel's advertisement monitor (handle 1); powered the adapter on")
        #expect(kernel.sentOpcodes == [0x0001, 0x0002, 0x0003, 0x0004, 0x0005, 0x0052])
        #expect(Array(kernel.sent[4]) == [0x05, 0, 0, 0, 1, 0, 1])

        let off = FakeKernel()
        off.settings = 0x0200
        var refusing = scanner(off, powerOn: false)
        #expect("\(refusing.startIfDue(now: 0)!)" == "hci0: Set Powered: the adapter is powered off and the board's power_on = false ('bluetoothctl power on' powers it); retrying in 250 ms")
        #expect(!refusing.isOpen && off.closed == [9])
    }

    @Test func anOldKernelIsUnsupported() {
        let kernel = FakeKernel()
        kernel.version = [1, 17, 0]
        var scan = scanner(kernel)
        guard case .startFailed(let error, 250)? = scan.startIfDue(now: 0) else { Issue.record("started"); return }
        #expect(error.isUnsupported)
        #expect(error.message == "this kernel's mgmt 1.17 cannot scan for others (needs 1.18, Linux 5.10): set [bluetooth] scan = \"raw\"")
        let without = FakeKernel()
        without.commands = [1, 2, 3, 4]
        var other = scanner(without)
        guard case .startFailed(let missing, _)? = other.startIfDue(now: 0) else { Issue.record("started"); return }
        #expect(missing.isUnsupported && without.sentOpcodes == [1, 2])
    }

    @Test func aMissingAdapterAndAFailingStatusAreNamed() {
        let kernel = FakeKernel()
        kernel.indexes = [1]
        var scan = scanner(kernel)
        #expect("\(scan.startIfDue(now: 0)!)" == "hci0: check: the kernel does not manage hci0 (missing, or held through the HCI user channel); retrying in 250 ms")
        #expect(scan.startIfDue(now: 249_999_999) == nil)
        kernel.indexes = [0]
        kernel.statuses[0x0052] = [0x14]
        #expect("\(scan.startIfDue(now: 250_000_000)!)".hasPrefix("hci0: Add Advertisement Patterns Monitor: needs CAP_NET_RAW and CAP_NET_ADMIN"))
    }

    @Test func aStaleMonitorOfThisAdapterIsRemovedFirst() {
        let kernel = FakeKernel()
        kernel.state[statePath] = "6A:6B:C9:A2:3E:43 5\n"
        kernel.nextHandle = 6
        var scan = scanner(kernel)
        _ = scan.startIfDue(now: 0)
        #expect(kernel.sentOpcodes == [0x0001, 0x0002, 0x0003, 0x0004, 0x0053, 0x0052])
        #expect(kernel.sent[4] == [0x53, 0, 0, 0, 2, 0, 5, 0])
        #expect(kernel.state[statePath] == "6A:6B:C9:A2:3E:43 6\n")

        let other = FakeKernel()
        other.state[statePath] = "11:22:33:44:55:66 5\n"
        var fresh = scanner(other)
        _ = fresh.startIfDue(now: 0)
        #expect(!other.sentOpcodes.contains(0x0053))
    }

    /// bluetoothd's restart removes every monitor (handle 0): reports keep flowing to the body,
    /// the monitor is added again and its new handle remembered.
    @Test func reportsFlowAndTheMonitorComesBackAfterRemoveAll() {
        let kernel = FakeKernel()
        var scan = scanner(kernel)
        _ = scan.startIfDue(now: 0)
        kernel.sent = []
        let found = le16(0) + [1, 2, 3, 4, 5, 6, 2, 0xC4, 0, 0, 0, 0] + le16(3) + [2, 1, 6]
        kernel.queue = [mgmtEvent(0x002F, found), mgmtEvent(0x002C, le16(0)), mgmtEvent(0x0012, Array(found[2...])), [1, 2, 3]]
        var reports: [String] = []
        let happened = scan.read(now: 1) { reports.append("\($0.address) \($0.rssi!) \(Array($0.data))") }
        #expect("\(happened!)" == "hci0: another program removed the advertisement monitor; adding the advertisement monitor again")
        #expect(reports == ["06:05:04:03:02:01 -60 [2, 1, 6]", "06:05:04:03:02:01 -60 [2, 1, 6]"])
        #expect(kernel.sentOpcodes == [0x0052] && scan.monitorReadds == 1 && scan.rejectedEvents == 1)
        #expect(scan.read(now: 2) { _ in } == nil)
        #expect(scan.monitorHandle == 2 && kernel.state[statePath] == "6A:6B:C9:A2:3E:43 2\n")
        // Another program's monitor going away concerns nobody here.
        kernel.queue = [mgmtEvent(0x002C, le16(7))]
        #expect(scan.read(now: 3) { _ in } == nil && scan.monitorReadds == 1)
    }

    /// bluetoothd powers the adapter off when it stops and removes every monitor when it starts:
    /// the monitor is added again only once the adapter is powered (an Add sent while it is off
    /// would leave Linux 6.1 answering Busy for good).
    @Test func theMonitorWaitsForPower() {
        let kernel = FakeKernel()
        var scan = scanner(kernel)
        _ = scan.startIfDue(now: 0)
        kernel.sent = []
        kernel.queue = [mgmtEvent(0x0006, [0x00, 0x02, 0, 0])]
        #expect("\(scan.read(now: 1) { _ in }!)" == "hci0 was powered off; scanning resumes when it is powered again")
        kernel.queue = [mgmtEvent(0x002C, le16(0))]
        #expect("\(scan.read(now: 2) { _ in }!)" == "hci0: another program removed the advertisement monitor; the advertisement monitor is added again when the adapter is powered")
        #expect(kernel.sent.isEmpty && scan.monitorHandle == nil && scan.monitorReadds == 1)
        kernel.queue = [mgmtEvent(0x0006, [0x01, 0x02, 0, 0])]
        #expect("\(scan.read(now: 3) { _ in }!)" == "hci0 is powered; adding the advertisement monitor again")
        _ = scan.read(now: 4) { _ in }
        #expect(kernel.sentOpcodes == [0x0052] && scan.monitorHandle == 2 && scan.monitorReadds == 1)

        // Stopped while the adapter is off: nothing is sent, the state file keeps the handle for
        // the next start to remove.
        kernel.queue = [mgmtEvent(0x0006, [0x00, 0x02, 0, 0])]
        _ = scan.read(now: 5) { _ in }
        kernel.sent = []
        #expect(scan.stop() == nil && kernel.sent.isEmpty && kernel.state[statePath] == "6A:6B:C9:A2:3E:43 2\n")
    }

    @Test func busyIsRetriedAndStopRemovesTheMonitor() {
        let kernel = FakeKernel()
        var scan = scanner(kernel)
        _ = scan.startIfDue(now: 0)
        kernel.statuses[0x0052] = [0x0A]
        kernel.queue = [mgmtEvent(0x0004, [])]
        // Index Added: powered (allowed) and the monitor added; the kernel answers Busy in the same
        // batch, the last event of the batch is the one reported.
        #expect("\(scan.read(now: 20) { _ in }!)" == "hci0: adding the advertisement monitor: mgmt status Busy; retrying in 1 s")
        #expect(kernel.sentOpcodes.suffix(2) == [0x0005, 0x0052] && scan.monitorReadds == 1)
        #expect(scan.nextAttemptAtNs == 1_000_000_020)
        #expect(scan.startIfDue(now: 1_000_000_019) == nil)
        #expect("\(scan.startIfDue(now: 1_000_000_020)!)" == "hci0: retrying; adding the advertisement monitor again")
        _ = scan.read(now: 1_000_000_030) { _ in }
        #expect(scan.monitorHandle == 2 && scan.monitorReadds == 1)
        kernel.sent = []
        #expect(scan.stop() == nil)
        #expect(kernel.sent == [[0x53, 0, 0, 0, 2, 0, 2, 0]] && kernel.state[statePath] == nil && kernel.closed == [9])
    }
}
