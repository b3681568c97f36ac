import CLocus
import LocusCore

/// The system calls the scanner makes, one requirement per CLocus call. `LibBluetoothHCI` is the
/// real one; tests supply a driver that records the calls and forces failures, so the start,
/// loss and stop paths run without an adapter. Every result is `>= 0` or `-errno`.
public protocol HCIDriver {
    /// A raw HCI socket bound to adapter `index`, non-blocking.
    func open(adapterIndex: Int32) -> Int32
    func close(_ descriptor: Int32)
    /// 1 up, 0 down, -errno (ENODEV when the adapter is gone).
    func isUp(_ descriptor: Int32, adapterIndex: Int32) -> Int32
    /// HCIDEVUP: 0 when up (already or now).
    func bringUp(_ descriptor: Int32, adapterIndex: Int32) -> Int32
    /// Saves the socket's HCI filter into `saved`, then passes only Command Complete, Command
    /// Status and LE Meta events.
    func setLEFilter(_ descriptor: Int32, saving saved: UnsafeMutableRawBufferPointer) -> Int32
    func restoreFilter(_ descriptor: Int32, from saved: UnsafeRawBufferPointer) -> Int32
    /// Sends `command` and waits (bounded) for its Command Complete; copies the return parameters
    /// (Status first) into `reply` and returns their length.
    func request(_ descriptor: Int32, _ command: HCICommand, reply: UnsafeMutableRawBufferPointer, timeoutMs: Int32) -> Int
    /// One HCI packet (H4 indicator first), or -EAGAIN when none is waiting.
    func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int
}

/// The scanner's system calls through CLocus and libbluetooth.
public struct LibBluetoothHCI: HCIDriver {
    public init() {}

    public func open(adapterIndex: Int32) -> Int32 { locus_hci_open(adapterIndex) }
    public func close(_ descriptor: Int32) { _ = locus_close(descriptor) }
    public func isUp(_ descriptor: Int32, adapterIndex: Int32) -> Int32 { locus_hci_device_is_up(descriptor, adapterIndex) }
    public func bringUp(_ descriptor: Int32, adapterIndex: Int32) -> Int32 { locus_hci_device_up(descriptor, adapterIndex) }

    public func setLEFilter(_ descriptor: Int32, saving saved: UnsafeMutableRawBufferPointer) -> Int32 {
        locus_hci_set_le_filter(descriptor, saved.baseAddress, saved.count)
    }

    public func restoreFilter(_ descriptor: Int32, from saved: UnsafeRawBufferPointer) -> Int32 {
        locus_hci_restore_filter(descriptor, saved.baseAddress, saved.count)
    }

    public func request(_ descriptor: Int32, _ command: HCICommand, reply: UnsafeMutableRawBufferPointer, timeoutMs: Int32) -> Int {
        command.withUnsafeParameters { parameters in
            Int(locus_hci_request(descriptor, command.ogf, command.ocf, parameters.baseAddress, UInt8(parameters.count),
                                  reply.baseAddress, UInt8(min(reply.count, 255)), timeoutMs))
        }
    }

    public func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        Int(locus_read(descriptor, buffer.baseAddress, buffer.count))
    }
}

/// What to tell a technician, in one place so tests can check the words.
public enum HCIScannerAdvice {
    public static let needsCapabilities =
        "needs CAP_NET_RAW and CAP_NET_ADMIN (run as root, or setcap 'cap_net_raw,cap_net_admin+eip' on the binary)"
    public static let busy =
        "the adapter is busy: bluetoothd or another scanner holds it (scan = \"kernel\" scans beside it; or use another adapter)"
    public static func noAdapter(_ adapterIndex: Int) -> String {
        "no adapter hci\(adapterIndex) ('hciconfig -a' lists the adapters the kernel has)"
    }
    public static let noBluetoothInKernel =
        "this kernel has no Bluetooth sockets (load the bluetooth module, or use a kernel with CONFIG_BT)"
    public static let blocked = "the adapter is blocked by rfkill (run 'rfkill unblock bluetooth')"
    public static let down = "the adapter went down (hciconfig down, rfkill, or a controller reset)"
    public static let removed = "the adapter went away (unplugged, or its driver was unloaded)"
    public static func noAnswer(timeoutMs: Int32) -> String {
        "the controller did not answer within \(timeoutMs) ms (check the adapter's power and firmware)"
    }
    public static let malformedReply = "the controller's reply had no status octet"
    public static let commandRejected =
        "the controller refused the command with a failing Command Status ('btmon' shows the code)"

    /// The advice for a failed system call; unknown errors read as strerror plus the number.
    public static func message(for error: SystemError, adapterIndex: Int) -> String {
        switch error.code {
        case Errno.permissionDenied, Errno.accessDenied: return needsCapabilities
        case Errno.busy: return busy
        case Errno.noDevice: return noAdapter(adapterIndex)
        case Errno.addressFamilyNotSupported: return noBluetoothInKernel
        case Errno.rfkill: return blocked
        case Errno.networkDown: return down
        case Errno.brokenPipe, Errno.badFileDescriptorState: return removed
        case Errno.timedOut: return noAnswer(timeoutMs: HCIScannerError.commandTimeoutMs)
        default: return error.description + " (errno \(error.code))"
        }
    }

    /// The advice for a command the controller answered with a failing status.
    public static func message(for status: HCIStatus) -> String {
        let prefix = "controller status " + status.description
        switch status {
        case .commandDisallowed:
            return prefix + ": bluetoothd may be scanning or advertising on this adapter (scan = \"kernel\" scans beside it; or use another adapter)"
        case .unknownCommand, .unsupportedFeatureOrParameter:
            return prefix + ": the controller does not support it"
        case .invalidParameters:
            return prefix + ": the controller refused the scan settings"
        default:
            return prefix
        }
    }

    /// The errno values the advice names (from <errno.h> through CLocus).
    enum Errno {
        static let permissionDenied = Int32(LOCUS_EPERM)
        static let ioError = Int32(LOCUS_EIO)
        static let accessDenied = Int32(LOCUS_EACCES)
        static let busy = Int32(LOCUS_EBUSY)
        static let noDevice = Int32(LOCUS_ENODEV)
        /// EPIPE: the kernel's mark on a socket whose adapter was unregistered.
        static let brokenPipe = Int32(LOCUS_EPIPE)
        static let badFileDescriptorState = Int32(LOCUS_EBADFD)
        /// EAFNOSUPPORT: no AF_BLUETOOTH.
        static let addressFamilyNotSupported = Int32(LOCUS_EAFNOSUPPORT)
        static let networkDown = Int32(LOCUS_ENETDOWN)
        static let timedOut = Int32(LOCUS_ETIMEDOUT)
        static let rfkill = Int32(LOCUS_ERFKILL)
    }
}

/// What went wrong with the scanner, for one log line: "hci0: LE Set Scan Parameters: <advice>".
public struct HCIScannerError: Error, Equatable, CustomStringConvertible {
    /// How long one command may take: a healthy controller answers in a few milliseconds; this
    /// bounds how long a start or stop can hold the agent's loop per command.
    public static let commandTimeoutMs: Int32 = 1000

    public enum Step: Equatable, Sendable, CustomStringConvertible {
        case open
        case bringUp
        case setFilter
        case command(HCIOpcode)
        case read
        case check
        case restoreFilter

        public var description: String {
            switch self {
            case .open: return "open"
            case .bringUp: return "bring up"
            case .setFilter: return "set event filter"
            case .command(let opcode): return opcode.description
            case .read: return "read"
            case .check: return "check"
            case .restoreFilter: return "restore event filter"
            }
        }
    }

    public enum Cause: Equatable, Sendable {
        case system(SystemError)
        case controller(HCIStatus)
        /// `isUp` said down while the socket was fine.
        case adapterDown
        case malformedReply
        /// Answered with a failing Command Status (code not known: libbluetooth reports EIO).
        case commandRejected
    }

    public let adapterIndex: Int
    public let step: Step
    public let cause: Cause

    public init(adapterIndex: Int, step: Step, cause: Cause) {
        self.adapterIndex = adapterIndex
        self.step = step
        self.cause = cause
    }

    /// The advice alone, without adapter and step.
    public var message: String {
        switch cause {
        case .system(let error): return HCIScannerAdvice.message(for: error, adapterIndex: adapterIndex)
        case .controller(let status):
            if status == .invalidParameters, case .command(let opcode) = step, opcode.isAdvertising {
                return "controller status " + status.description + ": the controller refused the advertising settings"
            }
            return HCIScannerAdvice.message(for: status)
        case .adapterDown: return HCIScannerAdvice.down
        case .malformedReply: return HCIScannerAdvice.malformedReply
        case .commandRejected: return HCIScannerAdvice.commandRejected
        }
    }

    public var description: String { "hci\(adapterIndex): \(step): \(message)" }
}

extension HCIOpcode {
    /// One of the commands that send the gateway's own beacon.
    public var isAdvertising: Bool {
        switch self {
        case .leSetAdvertisingParameters, .leSetAdvertisingData, .leSetAdvertisingEnable,
             .leSetExtendedAdvertisingParameters, .leSetExtendedAdvertisingData, .leSetExtendedAdvertisingEnable:
            return true
        default:
            return false
        }
    }
}

/// Whether the gateway's own beacon is on the air, as far as the host knows: for `locus status`
/// and the log. Shared by the raw and the kernel scanners.
public enum AdvertisingState: Equatable, CustomStringConvertible {
    /// Nothing to advertise, or the adapter is closed (the scanner starts it again with the scan).
    case off
    /// Sent and accepted, with `via` (the commands, or the kernel's instance).
    case on(via: String)
    /// The controller or the kernel refused; `reason` is the log line's text. Scanning goes on.
    case refused(reason: String)

    public var name: String {
        switch self {
        case .off: return "off"
        case .on: return "on"
        case .refused: return "refused"
        }
    }

    public var description: String {
        switch self {
        case .off: return "off"
        case .on(let via): return "on (" + via + ")"
        case .refused(let reason): return "refused: " + reason
        }
    }
}

/// A BLE scanner on a BlueZ HCI adapter, through a raw HCI socket: it brings the adapter up if it
/// is down, keeps only LE Meta (and command completion) events, picks the legacy or extended scan
/// commands by what the controller supports, and reads advertising events non-blocking into one
/// fixed buffer. When the adapter is absent, refuses, goes down or disappears, the scanner closes,
/// reports, and retries with backoff (250 ms doubling to 10 s); `stop()` disables scanning and
/// restores the socket's filter.
///
/// With an `advertisement` (site `[bluetooth] advertise`) every successful start also makes the
/// controller advertise the gateway's own non-connectable iBeacon, with the legacy or extended
/// advertising commands to match the scan's; so advertising returns with the scan after every
/// restart, adapter loss, controller reset or power cycle. A controller that refuses is logged and
/// counted (`advertisingRefusals`) and scanning goes on; `stop()` disables advertising too.
///
/// The adapter is named by index (the board file's `hci = 0`), not resolved from "hci0" with
/// `hci_devid`: libbluetooth's `hci_devid` fails with ENETDOWN for an adapter that is down, which
/// is exactly the adapter this scanner should bring up.
///
/// Start and stop block for at most `commandTimeoutMs` per command (4 commands to start, 4 more
/// with an advertisement; 1 to stop, tried at most `teardownAttempts` times, and 1 more with an
/// advertisement); reading never blocks.
public struct HCIScanner<Driver: HCIDriver>: ~Copyable {
    /// What happened, for the agent to log. At most one per call.
    public enum Event: Equatable, CustomStringConvertible {
        /// Scanning is on, with these commands.
        case started(HCIControllerKind)
        /// A start attempt failed; everything opened was closed; the next try is due after `retryInMs`.
        case startFailed(HCIScannerError, retryInMs: Int64)
        /// The adapter went down or away while scanning; closed; the next start is due after `retryInMs`.
        case lost(HCIScannerError, retryInMs: Int64)

        public var description: String {
            switch self {
            case .started(let kind): return "scanning with \(kind)"
            case .startFailed(let error, let retryInMs): return "\(error); retrying in \(retryInMs) ms"
            case .lost(let error, let retryInMs): return "\(error); retrying in \(retryInMs) ms"
            }
        }
    }

    public static var initialBackoffNs: Int64 { 250_000_000 }
    public static var maximumBackoffNs: Int64 { 10_000_000_000 }
    /// Events read per `read` call: bounds the time a crowded radio can hold the loop.
    public static var maximumReadsPerTurn: Int { 32 }
    /// Events discarded before the disable command on `stop()`: libbluetooth's request reads at
    /// most 10 events looking for the Command Complete, so a full socket queue must go first.
    public static var maximumDrainReads: Int { 256 }
    /// Attempts at the disable command when it times out (advertising reports crowded it out).
    public static var teardownAttempts: Int { 3 }
    /// `struct hci_filter` is 14 bytes, 16 with padding.
    static var filterSize: Int { 16 }
    /// Status + 64 octets (Read Local Supported Commands), the longest reply read here.
    static var replySize: Int { 72 }

    public let adapterIndex: Int
    public private(set) var settings: ScanSettings
    public let driver: Driver
    private var socket: Int32 = -1
    /// The HCI socket while scanning.
    public var descriptor: Descriptor? { Descriptor(socket) }
    /// The commands in use while open.
    public private(set) var controllerKind: HCIControllerKind?
    /// Set when a controller claimed extended scanning but answered an extended command with
    /// Unknown HCI Command, Unsupported Feature, or a failing Command Status: later starts use the
    /// legacy commands (what Linux calls HCI_QUIRK_BROKEN_EXT_SCAN).
    public private(set) var extendedScanBroken = false
    public private(set) var eventsRead: Int64 = 0
    public private(set) var losses = 0
    /// The gateway's own beacon, or nil.
    public let advertisement: BeaconAdvertisement?
    public private(set) var advertising = AdvertisingState.off
    /// Starts whose advertising commands the controller refused.
    public private(set) var advertisingRefusals = 0
    private var filterSaved = false
    private var nextAttemptNs: Int64 = 0
    private var backoffNs: Int64 = HCIScanner.initialBackoffNs
    private let buffer: UnsafeMutableRawBufferPointer
    private let savedFilter: UnsafeMutableRawBufferPointer
    private let reply: UnsafeMutableRawBufferPointer

    /// `bufferSize` holds one HCI packet: H4 indicator + event header (2) + up to 255 parameters.
    public init(adapterIndex: Int, settings: ScanSettings, driver: Driver, bufferSize: Int = 260,
                advertisement: BeaconAdvertisement? = nil) {
        precondition(bufferSize >= 258, "an HCI event can be 258 bytes with its H4 indicator")
        self.adapterIndex = adapterIndex
        self.advertisement = advertisement
        self.settings = settings
        self.driver = driver
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
        savedFilter = UnsafeMutableRawBufferPointer.allocate(byteCount: HCIScanner.filterSize, alignment: 8)
        savedFilter.initializeMemory(as: UInt8.self, repeating: 0)
        reply = UnsafeMutableRawBufferPointer.allocate(byteCount: HCIScanner.replySize, alignment: 8)
    }

    deinit {
        if socket >= 0 {
            // Leaving the controller scanning would keep its radio on after the agent is gone.
            _ = teardown()
            driver.close(socket)
        }
        buffer.deallocate()
        savedFilter.deallocate()
        reply.deallocate()
    }

    public var isOpen: Bool { socket >= 0 }

    /// When closed: the monotonic time of the next start attempt.
    public var nextAttemptAtNs: Int64? { isOpen ? nil : nextAttemptNs }

    /// Opens the adapter and starts scanning if it is closed and its retry time has come.
    public mutating func startIfDue(now: Int64) -> Event? {
        guard !isOpen, now >= nextAttemptNs else { return nil }
        switch start() {
        case .success(let kind):
            backoffNs = HCIScanner.initialBackoffNs
            return .started(kind)
        case .failure(let error):
            closeQuietly()
            return .startFailed(error, retryInMs: scheduleRetry(now: now))
        }
    }

    /// Reads the events that are waiting (bounded), handing each to `body` with its H4 indicator
    /// (0x04) first. A read error other than "nothing waiting" means the adapter went down or
    /// away: the socket is closed and a restart scheduled.
    public mutating func read(now: Int64, _ body: (UnsafeRawBufferPointer) -> Void) -> Event? {
        guard isOpen else { return nil }
        for _ in 0..<HCIScanner.maximumReadsPerTurn {
            let count = driver.read(socket, into: buffer)
            if count > 0 {
                eventsRead += 1
                body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                continue
            }
            if count == 0 { return nil }
            let error = SystemError(code: Int32(truncatingIfNeeded: -count))
            if error == .wouldBlock || error == .interrupted { return nil }
            return lose(HCIScannerError(adapterIndex: adapterIndex, step: .read, cause: .system(error)), now: now)
        }
        return nil
    }

    /// Asks the kernel whether the adapter is still up. A raw socket does not fail when its
    /// adapter goes down (hciconfig down, rfkill block): it just goes quiet. The agent calls this
    /// every few seconds, or when the radio has been silent for a while.
    public mutating func checkAdapter(now: Int64) -> Event? {
        guard isOpen else { return nil }
        let state = driver.isUp(socket, adapterIndex: Int32(adapterIndex))
        if state == 1 { return nil }
        let cause: HCIScannerError.Cause = state == 0 ? .adapterDown : .system(SystemError(code: -state))
        return lose(HCIScannerError(adapterIndex: adapterIndex, step: .check, cause: cause), now: now)
    }

    /// Disables scanning, restores the socket's filter and closes it. The first problem is
    /// returned for the log; the rest of the shutdown happens anyway. No restart is scheduled
    /// until `startIfDue` is called again.
    /// New scan timing (an accuracy tier's duty cycle): a running scan is stopped and started
    /// again at once with it, since LE Set Scan Parameters is refused while scanning.
    public mutating func reconfigure(_ settings: ScanSettings) -> HCIScannerError? {
        guard settings != self.settings else { return nil }
        self.settings = settings
        guard isOpen else { return nil }
        let problem = stop()
        nextAttemptNs = 0
        return problem
    }

    /// The next start is due at once, its backoff from the start (the self-healing just acted on
    /// the adapter, and the scan should follow as soon as it can).
    public mutating func restartSoon() {
        nextAttemptNs = 0
        backoffNs = HCIScanner.initialBackoffNs
    }

    public mutating func stop() -> HCIScannerError? {
        guard isOpen else { return nil }
        let problem = teardown()
        driver.close(socket)
        socket = -1
        controllerKind = nil
        filterSaved = false
        advertising = .off
        return problem
    }

    // MARK: steps

    private mutating func start() -> Result<HCIControllerKind, HCIScannerError> {
        let index = Int32(adapterIndex)
        let opened = driver.open(adapterIndex: index)
        if opened < 0 { return .failure(failure(.open, errno: opened)) }
        // Stored at once so every failure below closes it (closeQuietly).
        socket = opened
        let state = driver.isUp(opened, adapterIndex: index)
        if state < 0 { return .failure(failure(.open, errno: state)) }
        if state == 0 {
            // HCIDEVUP needs CAP_NET_ADMIN, so it is only asked for when needed.
            let up = driver.bringUp(opened, adapterIndex: index)
            if up < 0 { return .failure(failure(.bringUp, errno: up)) }
        }
        let filter = driver.setLEFilter(opened, saving: savedFilter)
        if filter < 0 { return .failure(failure(.setFilter, errno: filter)) }
        filterSaved = true
        let kind: HCIControllerKind
        switch detectControllerKind() {
        case .success(let detected): kind = detected
        case .failure(let error): return .failure(error)
        }
        if let error = run(HCIScanSequence.setup(settings, controller: kind)) {
            if kind == .extended && HCIScanner.meansUnsupported(error.cause) { extendedScanBroken = true }
            return .failure(error)
        }
        controllerKind = kind
        // After the scan runs, the beacon with commands of the scan's kind. A refusal is kept for
        // the log and the status; the scan is not affected.
        if let advertisement {
            _ = run(HCIAdvertisingSequence.teardown(controller: kind))
            if let error = run(HCIAdvertisingSequence.setup(advertisement, controller: kind)) {
                advertising = .refused(reason: error.description)
                advertisingRefusals += 1
            } else {
                advertising = .on(via: kind == .legacy ? "legacy advertising commands" : "extended advertising commands")
            }
        }
        return .success(kind)
    }

    /// The steps in order; the first failure that is not tolerated.
    private func run(_ steps: HCIScanSteps) -> HCIScannerError? {
        for step in steps { if let error = send(step) { return error } }
        return nil
    }

    /// Read Local Supported Commands decides legacy or extended. A controller that cannot answer
    /// it (status not success: older than Bluetooth 1.2, which has no LE either) is tried with
    /// the legacy commands, whose own failure then says what is wrong.
    private func detectControllerKind() -> Result<HCIControllerKind, HCIScannerError> {
        let command = HCICommand.readLocalSupportedCommands()
        let count = driver.request(socket, command, reply: reply, timeoutMs: HCIScannerError.commandTimeoutMs)
        if count < 0 { return .failure(failure(.command(command.opcode), errno: count)) }
        if extendedScanBroken { return .success(.legacy) }
        let answer = UnsafeRawBufferPointer(rebasing: reply[0..<min(count, reply.count)])
        guard let commands = HCISupportedCommands(returnParameters: answer) else { return .success(.legacy) }
        return .success(commands.controllerKind)
    }

    /// One command; nil when it succeeded or its failure is tolerated.
    private func send(_ step: HCIScanStep) -> HCIScannerError? {
        let place = HCIScannerError.Step.command(step.command.opcode)
        let count = driver.request(socket, step.command, reply: reply, timeoutMs: HCIScannerError.commandTimeoutMs)
        // libbluetooth's request turns a failing Command Status (how some controllers answer a
        // command they do not know) into EIO; the status code itself is lost there.
        if count == -Int(HCIScannerAdvice.Errno.ioError) {
            return HCIScannerError(adapterIndex: adapterIndex, step: place, cause: .commandRejected)
        }
        if count < 0 { return failure(place, errno: count) }
        guard let status = hciReturnStatus(UnsafeRawBufferPointer(rebasing: reply[0..<min(count, reply.count)])) else {
            return HCIScannerError(adapterIndex: adapterIndex, step: place, cause: .malformedReply)
        }
        if status.isSuccess || step.toleratesFailure { return nil }
        return HCIScannerError(adapterIndex: adapterIndex, step: place, cause: .controller(status))
    }

    /// Drains queued events, disables scanning (retrying a timeout a bounded number of times),
    /// restores the filter. The socket stays open; the caller closes it.
    private func teardown() -> HCIScannerError? {
        var problem: HCIScannerError?
        if let kind = controllerKind {
            for step in HCIScanSequence.teardown(controller: kind) {
                var attempt = 0
                while true {
                    drain()
                    let error = send(step)
                    attempt += 1
                    guard let error, case .system(let system) = error.cause,
                          system.code == HCIScannerAdvice.Errno.timedOut, attempt < HCIScanner.teardownAttempts else {
                        if problem == nil { problem = error }
                        break
                    }
                }
            }
            // The beacon stops with the agent: a controller left advertising would announce a
            // gateway that no longer listens.
            if case .on = advertising, let error = run(HCIAdvertisingSequence.teardown(controller: kind)), problem == nil { problem = error }
        }
        // The filter belongs to this socket; restoring it matters only if the socket outlives
        // the scanner (inherited, or reused by a caller), and costs one setsockopt.
        if filterSaved {
            let restored = driver.restoreFilter(socket, from: UnsafeRawBufferPointer(savedFilter))
            if restored < 0 && problem == nil { problem = failure(.restoreFilter, errno: restored) }
        }
        return problem
    }

    /// Unknown HCI Command, Unsupported Feature, or a failing Command Status.
    private static func meansUnsupported(_ cause: HCIScannerError.Cause) -> Bool {
        switch cause {
        case .controller(let status): return status == .unknownCommand || status == .unsupportedFeatureOrParameter
        case .commandRejected: return true
        default: return false
        }
    }

    private func drain() {
        for _ in 0..<HCIScanner.maximumDrainReads {
            if driver.read(socket, into: buffer) <= 0 { return }
        }
    }

    private mutating func lose(_ error: HCIScannerError, now: Int64) -> Event {
        // No teardown: the adapter is down or gone, and the kernel resets the controller when it
        // comes back up, which also stops any scan.
        closeQuietly()
        losses += 1
        return .lost(error, retryInMs: scheduleRetry(now: now))
    }

    private mutating func scheduleRetry(now: Int64) -> Int64 {
        let waited = backoffNs
        nextAttemptNs = now + waited
        backoffNs = min(backoffNs * 2, HCIScanner.maximumBackoffNs)
        return waited / 1_000_000
    }

    private mutating func closeQuietly() {
        if socket >= 0 { driver.close(socket) }
        socket = -1
        controllerKind = nil
        filterSaved = false
        if case .on = advertising { advertising = .off }
    }

    private func failure(_ step: HCIScannerError.Step, errno result: some BinaryInteger) -> HCIScannerError {
        HCIScannerError(adapterIndex: adapterIndex, step: step, cause: .system(SystemError(code: -Int32(truncatingIfNeeded: result))))
    }
}

extension HCIScanner where Driver == LibBluetoothHCI {
    /// The scanner on a real adapter: `HCIScanner(adapterIndex: board.hci, settings: ...)`.
    public init(adapterIndex: Int, settings: ScanSettings, bufferSize: Int = 260, advertisement: BeaconAdvertisement? = nil) {
        self.init(adapterIndex: adapterIndex, settings: settings, driver: LibBluetoothHCI(), bufferSize: bufferSize,
                  advertisement: advertisement)
    }
}
