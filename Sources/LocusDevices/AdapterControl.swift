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
    /// How long a mgmt command may take (the kernel's own command timeout is 2 s).
    public static let commandTimeoutMs: Int32 = 4_000

    public static func powerCycle(adapterIndex: Int) -> String? {
        let socket = locus_mgmt_open()
        if socket < 0 { return "cannot open the management socket: " + SystemError(code: -socket).description }
        defer { _ = locus_close(socket) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 512, alignment: 16)
        defer { buffer.deallocate() }
        if let problem = setPowered(socket, UInt16(adapterIndex), false, buffer) { return "power off: " + problem }
        if let problem = setPowered(socket, UInt16(adapterIndex), true, buffer) { return "power on: " + problem }
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

    /// Sends Set Powered and waits for its answer (other events on the socket are skipped).
    private static func setPowered(_ socket: Int32, _ index: UInt16, _ on: Bool, _ buffer: UnsafeMutableRawBufferPointer) -> String? {
        let command = MgmtCommand.setPowered(index: index, on)
        let driver = MgmtSocket()
        let written = driver.write(socket, command)
        if written < 0 { return SystemError(code: Int32(-written)).description }
        for _ in 0..<64 {
            let count = driver.read(socket, into: buffer)
            if count == -Int(LOCUS_EAGAIN) || count == -Int(LOCUS_EINTR) {
                if !driver.waitReadable(socket, timeoutMs: commandTimeoutMs) { return "no answer in " + String(commandTimeoutMs / 1_000) + " s" }
                continue
            }
            if count < 0 { return SystemError(code: Int32(-count)).description }
            switch MgmtEvents.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) {
            case .success(.commandComplete(index, command.opcode.rawValue, let status, _)),
                 .success(.commandStatus(index, command.opcode.rawValue, let status)):
                return status == MgmtStatus.success ? nil : MgmtStatus.name(status)
            default:
                continue
            }
        }
        return "no answer"
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
