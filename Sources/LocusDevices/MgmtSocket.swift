import CLocus
import LocusCore

/// The system calls of kernel-mode scanning, one requirement per call, so tests play the kernel.
/// Every result is `>= 0` or `-errno`.
public protocol MgmtDriver {
    /// A non-blocking mgmt socket (HCI_CHANNEL_CONTROL).
    func openControl() -> Int32
    /// A non-blocking HCI_CHANNEL_MONITOR socket, its replay queued.
    func openMonitor() -> Int32
    func close(_ descriptor: Int32)
    func write(_ descriptor: Int32, _ command: MgmtCommand) -> Int
    /// One mgmt event or monitor record, or -EAGAIN.
    func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int
    func waitReadable(_ descriptor: Int32, timeoutMs: Int32) -> Bool
    /// The state file that remembers the monitor across a crash ("ADDRESS HANDLE").
    func load(_ path: String) -> [UInt8]?
    func store(_ path: String, _ text: String?)
}

/// The kernel's management and monitor sockets through CLocus.
public struct MgmtSocket: MgmtDriver {
    public init() {}
    public func openControl() -> Int32 { locus_mgmt_open() }
    public func openMonitor() -> Int32 { locus_hci_monitor_open() }
    public func close(_ descriptor: Int32) { _ = locus_close(descriptor) }
    public func write(_ descriptor: Int32, _ command: MgmtCommand) -> Int {
        command.withUnsafeBytes { Int(locus_write(descriptor, $0.baseAddress, $0.count)) }
    }
    public func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        Int(locus_read(descriptor, buffer.baseAddress, buffer.count))
    }
    public func waitReadable(_ descriptor: Int32, timeoutMs: Int32) -> Bool { Files.waitUntilReadable(descriptor, timeoutMs: timeoutMs) }
    public func load(_ path: String) -> [UInt8]? { try? Files.read(path, limit: 64) }
    public func store(_ path: String, _ text: String?) {
        if let text { _ = Files.replace(path, contents: text) } else { _ = Files.remove(path) }
    }
}

/// One mgmt command and its answer, for the scanner and the self-healing's controller reset.
public enum MgmtExchange {
    /// Events read while waiting for an answer, at most (others are dropped: nothing that reads
    /// this socket expects them yet).
    public static let maximumReads = 64

    /// Sends `command` and waits (bounded by `timeoutMs` per wait) for its Command Complete or
    /// Status; undecodable events meanwhile are counted in `rejected`. The parameters point into
    /// `buffer`.
    public static func request<Driver: MgmtDriver>(_ command: MgmtCommand, on socket: Int32, _ driver: Driver,
                                                   buffer: UnsafeMutableRawBufferPointer, timeoutMs: Int32,
                                                   rejected: inout Int) -> Result<UnsafeRawBufferPointer, KernelScannerError.Cause> {
        let written = driver.write(socket, command)
        if written < 0 { return .failure(.system(SystemError(code: Int32(-written)))) }
        for _ in 0..<maximumReads {
            let count = driver.read(socket, into: buffer)
            if count == -Int(LOCUS_EAGAIN) {
                if !driver.waitReadable(socket, timeoutMs: timeoutMs) { return .failure(.noAnswer) }
                continue
            }
            if count < 0 { return .failure(.system(SystemError(code: Int32(-count)))) }
            switch MgmtEvents.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) {
            case .success(.commandComplete(command.index, command.opcode.rawValue, let status, let parameters)):
                return status == MgmtStatus.success ? .success(parameters) : .failure(.status(status))
            case .success(.commandStatus(command.index, command.opcode.rawValue, let status)):
                return .failure(.status(status))
            case .failure: rejected += 1
            default: continue
            }
        }
        return .failure(.noAnswer)
    }
}

/// Who else has the Bluetooth subsystem open, read once from the monitor channel's replay (it
/// works inside the hardened unit, where /proc hides other processes).
public enum HCIUsers {
    /// Records read at most: the replay is one per adapter and socket, and live traffic that
    /// follows it must not keep the reader going.
    public static let maximumReads = 256

    public static func read<Driver: MgmtDriver>(_ driver: Driver, buffer: UnsafeMutableRawBufferPointer) -> Result<[HCISocketUser], SystemError> {
        let descriptor = driver.openMonitor()
        if descriptor < 0 { return .failure(SystemError(code: -descriptor)) }
        defer { driver.close(descriptor) }
        var users: [HCISocketUser] = []
        for _ in 0..<maximumReads {
            let count = driver.read(descriptor, into: buffer)
            if count <= 0 { break }
            if case .success(let user?) = HCIMonitorRecords.user(in: UnsafeRawBufferPointer(rebasing: buffer[0..<count])) {
                users.append(user)
            }
        }
        return .success(users)
    }
}
