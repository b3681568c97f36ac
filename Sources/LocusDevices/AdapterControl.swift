import CLocus
import LocusCore

/// The two controller-level steps of an adapter's self-healing, done the way the kernel stays in
/// charge of the controller (docs/health.md):
///
/// - `powerCycle`: mgmt Set Powered off, then on. The kernel closes the controller and opens it
///   again, which sends HCI_Reset and its whole initialisation (event masks included); bluetoothd
///   sees it as any power change. A raw HCI_Reset or HCIDEVRESET would leave the kernel's state
///   stale and the LE events masked.
/// - `downUp`: HCIDEVDOWN then HCIDEVUP, the ioctls `hciconfig down/up` use: synchronous, and they
///   work when the management interface's own queue is stuck. HCIDEVUP can take up to the
///   kernel's 10 s init timeout on a controller that does not answer.
///
/// Both need CAP_NET_ADMIN. Each returns nil when done, or what went wrong, for the log.
public enum AdapterControl {
    public static func powerCycle(adapterIndex: Int) -> String? {
        let socket = locus_mgmt_open()
        if socket < 0 { return "cannot open the management socket: " + SystemError(code: -socket).description }
        defer { _ = locus_close(socket) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 512, alignment: 16)
        defer { buffer.deallocate() }
        var rejected = 0
        for on in [false, true] {
            let command = MgmtCommand.setPowered(index: UInt16(adapterIndex), on)
            let result = MgmtExchange.request(command, on: socket, MgmtSocket(), buffer: buffer, timeoutMs: KernelScannerError.commandTimeoutMs, rejected: &rejected)
            if case .failure(let cause) = result {
                return (on ? "power on: " : "power off: ") + KernelScannerError(adapterIndex: adapterIndex, step: "", cause: cause).message
            }
        }
        return nil
    }

    public static func downUp(adapterIndex: Int) -> String? {
        let socket = locus_hci_open(Int32(adapterIndex))
        if socket < 0 { return "cannot open hci" + String(adapterIndex) + ": " + SystemError(code: -socket).description }
        defer { _ = locus_close(socket) }
        let down = locus_hci_device_down(socket, Int32(adapterIndex))
        if down < 0 { return "down: " + SystemError(code: -down).description }
        let up = locus_hci_device_up(socket, Int32(adapterIndex))
        if up < 0 { return "up: " + SystemError(code: -up).description }
        return nil
    }
}

extension HCIScannerError {
    /// The controller did not answer a command in time (the self-healing's cue).
    public var isUnanswered: Bool {
        if case .system(let error) = cause { return error.code == Int32(LOCUS_ETIMEDOUT) }
        return false
    }
}

extension KernelScannerError {
    /// The kernel did not answer a management command in time.
    public var isUnanswered: Bool { cause == .noAnswer }
}
