import CLocus
import LocusCore

/// Why kernel-mode scanning could not start or stopped.
public struct KernelScannerError: Error, Equatable, CustomStringConvertible {
    public enum Cause: Error, Equatable, Sendable {
        case system(SystemError)
        case status(UInt8)
        /// mgmt older than 1.18 or without Add Advertisement Patterns Monitor.
        case unsupported(version: UInt8, revision: UInt16)
        case noAdapter
        case poweredOff
        case noAnswer
        case malformedReply
    }

    /// A command may take this long: the kernel answers mgmt from its own queue, after whatever
    /// bluetoothd asked first.
    public static let commandTimeoutMs: Int32 = 2000
    /// Set Powered waits for the controller's whole initialisation.
    public static let powerTimeoutMs: Int32 = 10_000

    public let adapterIndex: Int
    public let step: String
    public let cause: Cause

    public var isUnsupported: Bool { if case .unsupported = cause { return true } else { return false } }

    public var message: String {
        switch cause {
        case .system(let error): return HCIScannerAdvice.message(for: error, adapterIndex: adapterIndex)
        case .status(MgmtStatus.permissionDenied): return HCIScannerAdvice.needsCapabilities
        case .status(MgmtStatus.rfkilled): return HCIScannerAdvice.blocked
        case .status(MgmtStatus.invalidIndex), .noAdapter:
            return "the kernel does not manage " + name + " (missing, or held through the HCI user channel)"
        case .status(let status): return "mgmt status " + MgmtStatus.name(status)
        case .unsupported(let version, let revision):
            return "this kernel's mgmt " + String(version) + "." + String(revision) + " cannot scan for others (needs 1.18, Linux 5.10): set [bluetooth] scan = \"raw\""
        case .poweredOff:
            return "the adapter is powered off and the board's power_on = false ('bluetoothctl power on' powers it)"
        case .noAnswer: return "the kernel did not answer within " + String(KernelScannerError.commandTimeoutMs) + " ms"
        case .malformedReply: return "the kernel's reply was shorter than its fields"
        }
    }

    public var description: String { name + ": " + step + ": " + message }
    var name: String { "hci" + String(adapterIndex) }
}

/// BLE scanning through the kernel: one mgmt Advertisement Patterns Monitor makes the kernel scan
/// (passively) for as long as the monitor exists, merged with whatever bluetoothd asks of the
/// adapter (discovery, auto-connect, its own monitors), and restarted by the kernel after each of
/// them. Reports arrive on the same socket as Adv Monitor Device Found (or Device Found while a
/// discovery runs). Locus sends no HCI command, so it never stops anyone else's scan.
///
/// The monitor outlives the socket (the kernel keeps it until the adapter goes away), so its
/// {address, handle} is kept in `statePath` and a stale one removed at the next start. bluetoothd
/// removes every monitor when it (re)starts: Adv Monitor Removed (handle 0 = all) or Index Added
/// makes the scanner add its monitor again, counted in `monitorReadds`.
///
/// With an `advertisement` (site `[bluetooth] advertise`) the kernel also advertises the gateway's
/// own iBeacon: one mgmt advertising instance, the highest the adapter offers (Read Advertising
/// Features' Max_Instances), since bluetoothd numbers the instances of its own clients from 1 up
/// and would replace ours if it chose the same number. It is added at every start, again when the
/// adapter comes back or is powered, and again when another program removes it (newer bluetoothd
/// removes every instance when it starts); removed on `stop()` (a killed agent leaves it, and the
/// next start's Add replaces it). A refusal is logged and counted; scanning goes on.
///
/// Start blocks for at most `commandTimeoutMs` per command (9 at most; Set Powered up to
/// `powerTimeoutMs`); reading never blocks.
public struct KernelScanner<Driver: MgmtDriver>: ~Copyable {
    public enum Event: CustomStringConvertible {
        case started(handle: UInt16, powered: Bool)
        case startFailed(KernelScannerError, retryInMs: Int64)
        case lost(KernelScannerError, retryInMs: Int64)
        /// Another program removed the monitor (or the adapter came back): added again.
        case readding(reason: String)
        case notice(String)

        public var description: String {
            switch self {
            case .started(let handle, let powered):
                return "scanning through the kernel's advertisement monitor (handle " + String(handle) + ")" + (powered ? "; powered the adapter on" : "")
            case .startFailed(let error, let retryInMs), .lost(let error, let retryInMs):
                return error.description + "; retrying in " + String(retryInMs) + " ms"
            case .readding(let reason): return reason + "; adding the advertisement monitor again"
            case .notice(let text): return text
            }
        }
    }

    public static var minimumVersion: (UInt8, UInt16) { (1, 18) }
    public static var maximumReadsPerTurn: Int { 32 }
    /// Events read while waiting for one reply: bounds a start on a crowded radio.
    static var retryAddNs: Int64 { 1_000_000_000 }

    public let adapterIndex: Int
    public let powerOn: Bool
    public let statePath: String
    public let driver: Driver
    private var socket: Int32 = -1
    public var descriptor: Descriptor? { Descriptor(socket) }
    public var isOpen: Bool { socket >= 0 }
    /// Our monitor's handle while the kernel has it.
    public private(set) var monitorHandle: UInt16?
    private var address = BLEAddress(value: 0)
    private var addPending = false
    /// The monitor is gone and must be added again (once the adapter is powered).
    private var addWanted = false
    private var powered = false
    /// Failed adds in a row: the retry waits 1 s, doubling to 32 s.
    private var addFailures = 0
    private var readdAtNs: Int64?
    public private(set) var monitorReadds = 0
    public private(set) var losses = 0
    /// The gateway's own beacon, or nil.
    public let advertisement: BeaconAdvertisement?
    public private(set) var advertising = AdvertisingState.off
    /// Our advertising instance, once the adapter's features were read.
    public private(set) var advertisingInstance: UInt8?
    /// Adds the kernel refused (at a start or later).
    public private(set) var advertisingRefusals = 0
    /// Adds after another program removed the instance, or after the adapter came back.
    public private(set) var advertisingReadds = 0
    public private(set) var rejectedEvents = 0
    /// The last start found a kernel too old for monitors (`scan = "auto"` then falls back to raw).
    public private(set) var unsupported = false
    private var nextAttemptNs: Int64 = 0
    private var backoffNs: Int64 = 250_000_000
    private let buffer: UnsafeMutableRawBufferPointer

    /// `buffer` holds the largest event read: a Device Found with 255 octets of data or
    /// Read Controller Information's 280 octets of parameters, with headers.
    public init(adapterIndex: Int, powerOn: Bool, statePath: String, driver: Driver, advertisement: BeaconAdvertisement? = nil) {
        self.advertisement = advertisement
        self.adapterIndex = adapterIndex
        self.powerOn = powerOn
        self.statePath = statePath
        self.driver = driver
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 512, alignment: 16)
    }

    deinit {
        if socket >= 0 {
            // Left behind, the monitor would keep the kernel scanning for nobody (stop() waits
            // for the answer; here the command is only sent).
            if let handle = monitorHandle {
                _ = driver.write(socket, .removeAdvMonitor(index: UInt16(adapterIndex), handle: handle))
                driver.store(statePath, nil)
            }
            driver.close(socket)
        }
        buffer.deallocate()
    }

    public var nextAttemptAtNs: Int64? { isOpen ? readdAtNs : nextAttemptNs }
    private var index: UInt16 { UInt16(adapterIndex) }
    private var name: String { "hci" + String(adapterIndex) }

    public mutating func startIfDue(now: Int64) -> Event? {
        if isOpen {
            guard let due = readdAtNs, now >= due else { return nil }
            readdAtNs = nil
            return addIfPowered(name + ": retrying")
        }
        guard now >= nextAttemptNs else { return nil }
        switch start() {
        case .success(let powered):
            backoffNs = 250_000_000
            return .started(handle: monitorHandle ?? 0, powered: powered)
        case .failure(let error):
            close()
            unsupported = error.isUnsupported
            return .startFailed(error, retryInMs: scheduleRetry(now: now))
        }
    }

    /// Reads the waiting events (bounded): reports go to `body`; the monitor's removal, the
    /// adapter's return and the answers to our own commands are handled here.
    public mutating func read(now: Int64, _ body: (AdvertisingReport) -> Void) -> Event? {
        guard isOpen else { return nil }
        var event: Event?
        for _ in 0..<KernelScanner.maximumReadsPerTurn {
            let count = driver.read(socket, into: buffer)
            if count == -Int(LOCUS_EAGAIN) || count == -Int(LOCUS_EINTR) || count == 0 { break }
            if count < 0 {
                losses += 1
                let error = KernelScannerError(adapterIndex: adapterIndex, step: "read", cause: .system(SystemError(code: Int32(-count))))
                close()
                return .lost(error, retryInMs: scheduleRetry(now: now))
            }
            switch MgmtEvents.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) {
            case .failure: rejectedEvents += 1
            case .success(.report(let at, _, let report)): if at == index { body(report) }
            case .success(let other): if let handled = handle(other, now: now) { event = handled }
            }
        }
        return event
    }

    /// The next start is due at once, its backoff from the start (after a self-healing step).
    public mutating func restartSoon() {
        nextAttemptNs = 0
        backoffNs = 250_000_000
    }

    /// Removes the monitor (so the kernel stops scanning for us) and closes the socket.
    public mutating func stop() -> KernelScannerError? {
        guard isOpen else { return nil }
        let problem = removeMonitor()
        let advertisingProblem = removeAdvertising()
        close()
        return problem ?? advertisingProblem
    }

    // MARK: steps

    private mutating func start() -> Result<Bool, KernelScannerError> {
        let opened = driver.openControl()
        if opened < 0 { return .failure(error("open", .system(SystemError(code: -opened)))) }
        socket = opened
        if let problem = checkSupport() { return .failure(problem) }
        var info = (address: BLEAddress(value: 0), settings: UInt32(0))
        switch request(.readControllerInfo(index: index)) {
        case .failure(let problem): return .failure(problem)
        case .success(let parameters):
            guard let read = MgmtReplies.controllerInfo(parameters) else { return .failure(error("info", .malformedReply)) }
            info = read
        }
        address = info.address
        let poweredOff = info.settings & MgmtSettings.powered == 0
        if poweredOff {
            guard powerOn else { return .failure(error(MgmtOpcode.setPowered.description, .poweredOff)) }
            if case .failure(let problem) = request(.setPowered(index: index, true), timeoutMs: KernelScannerError.powerTimeoutMs) {
                return .failure(problem)
            }
        }
        removeStaleMonitor()
        switch request(.addBeaconMonitor(index: index)) {
        case .failure(let problem): return .failure(problem)
        case .success(let parameters):
            guard let handle = MgmtReplies.firstWord(parameters, octets: 2) else { return .failure(error("add", .malformedReply)) }
            remember(UInt16(handle))
        }
        powered = true
        startAdvertising()
        return .success(poweredOff)
    }

    // MARK: the gateway's own beacon

    /// Chooses the instance (once) and adds the beacon, waiting for the answer. A refusal is
    /// kept for the log and the status; the scan is not affected.
    private mutating func startAdvertising() {
        guard let advertisement else { return }
        if advertisingInstance == nil {
            let step = MgmtOpcode.readAdvertisingFeatures.description
            switch request(.readAdvertisingFeatures(index: index)) {
            case .failure(let problem): return refuseAdvertising(problem.description)
            case .success(let parameters):
                guard let maximum = MgmtReplies.maximumAdvertisingInstances(parameters), maximum > 0 else {
                    return refuseAdvertising(name + ": " + step + ": the adapter offers no advertising instance")
                }
                advertisingInstance = maximum
            }
        }
        guard let instance = advertisingInstance else { return }
        switch request(.addAdvertising(index: index, instance: instance, advertisement)) {
        case .failure(let problem): refuseAdvertising(problem.description)
        case .success: advertising = .on(via: "mgmt advertising instance " + String(instance))
        }
    }

    private mutating func refuseAdvertising(_ reason: String) {
        advertising = .refused(reason: reason)
        advertisingRefusals += 1
    }

    /// Adds the beacon again without waiting (the answer arrives in `read`), while powered.
    private mutating func advertiseAgain() {
        guard let advertisement, let instance = advertisingInstance, powered else { return }
        advertisingReadds += 1
        _ = driver.write(socket, .addAdvertising(index: index, instance: instance, advertisement))
    }

    /// Only while powered (as the monitor).
    private mutating func removeAdvertising() -> KernelScannerError? {
        guard case .on = advertising, let instance = advertisingInstance, powered else { return nil }
        advertising = .off
        if case .failure(let problem) = request(.removeAdvertising(index: index, instance: instance)) { return problem }
        return nil
    }

    /// Version ≥ 1.18 with Add Advertisement Patterns Monitor, and our adapter in the index list
    /// (reading the list also subscribes this socket to Index Added/Removed).
    private mutating func checkSupport() -> KernelScannerError? {
        var version = (version: UInt8(0), revision: UInt16(0))
        switch request(.readVersion()) {
        case .failure(let problem): return problem
        case .success(let parameters): version = MgmtReplies.version(parameters) ?? version
        }
        let (major, minor) = KernelScanner.minimumVersion
        var supported = version.version > major || (version.version == major && version.revision >= minor)
        if supported, case .success(let parameters) = request(.readSupportedCommands()) {
            supported = MgmtReplies.supports(parameters, .addAdvPatternsMonitor)
        }
        if !supported { return error("check", .unsupported(version: version.version, revision: version.revision)) }
        switch request(.readIndexList()) {
        case .failure(let problem): return problem
        case .success(let parameters):
            return MgmtReplies.indexListContains(parameters, index) == true ? nil : error("check", .noAdapter)
        }
    }

    /// A monitor a killed agent left behind keeps the kernel scanning: removed if it was added on
    /// this adapter (the handle means nothing on another one).
    private mutating func removeStaleMonitor() {
        guard let saved = driver.load(statePath) else { return }
        let prefix = Array((address.description + " ").utf8)
        var handle = 0
        if saved.count > prefix.count, Array(saved[0..<prefix.count]) == prefix {
            for byte in saved[prefix.count...] where byte >= 0x30 && byte <= 0x39 && handle < 0x10000 { handle = handle * 10 + Int(byte - 0x30) }
        }
        if handle > 0 && handle < 0x10000 { _ = request(.removeAdvMonitor(index: index, handle: UInt16(handle))) }
        driver.store(statePath, nil)
    }

    private mutating func remember(_ handle: UInt16) {
        monitorHandle = handle
        addPending = false
        addWanted = false
        addFailures = 0
        driver.store(statePath, address.description + " " + String(handle) + "\n")
    }

    private mutating func handle(_ event: MgmtEvent, now: Int64) -> Event? {
        switch event {
        case .advMonitorRemoved(index, let handle) where handle == 0 || handle == monitorHandle:
            guard monitorHandle != nil else { return nil }
            return lost(name + ": another program removed the advertisement monitor")
        case .indexRemoved(index):
            monitorHandle = nil
            powered = false
            advertising = .off
            return .notice(name + " went away; scanning resumes when it returns")
        case .indexAdded(index):
            if powerOn { _ = driver.write(socket, .setPowered(index: index, true)) }
            return lost(name + " is back")
        case .newSettings(index, let settings):
            return settingsChanged(settings)
        case .commandComplete(index, MgmtOpcode.setPowered.rawValue, MgmtStatus.success, let parameters):
            // The kernel sends New Settings to every socket but the one that asked.
            guard let settings = MgmtReplies.firstWord(parameters, octets: 4) else { return nil }
            return settingsChanged(settings)
        case .commandComplete(index, MgmtOpcode.addAdvPatternsMonitor.rawValue, let status, let parameters):
            if status == MgmtStatus.success, let handle = MgmtReplies.firstWord(parameters, octets: 2) {
                remember(UInt16(handle))
                return nil
            }
            return addFailed(status, now: now)
        case .commandStatus(index, MgmtOpcode.addAdvPatternsMonitor.rawValue, let status):
            return addFailed(status, now: now)
        case .advertisingRemoved(index, let instance) where instance == advertisingInstance:
            guard advertisement != nil else { return nil }
            advertising = .off
            advertiseAgain()
            return .notice(name + ": another program removed advertising instance " + String(instance) + "; adding the beacon again"
                           + (powered ? "" : " when the adapter is powered"))
        case .commandComplete(index, MgmtOpcode.addAdvertising.rawValue, let status, _),
             .commandStatus(index, MgmtOpcode.addAdvertising.rawValue, let status):
            // The answer to `advertiseAgain`.
            guard let instance = advertisingInstance else { return nil }
            if status == MgmtStatus.success {
                advertising = .on(via: "mgmt advertising instance " + String(instance))
                return nil
            }
            let reason = name + ": " + MgmtOpcode.addAdvertising.description + ": mgmt status " + MgmtStatus.name(status)
            refuseAdvertising(reason)
            return .notice("advertising refused: " + reason + "; scanning goes on")
        default:
            return nil
        }
    }

    private mutating func addFailed(_ status: UInt8, now: Int64) -> Event? {
        addPending = false
        addFailures += 1
        let waitS = Int64(1) << min(addFailures - 1, 5)
        readdAtNs = now + waitS * KernelScanner.retryAddNs
        return .notice(name + ": adding the advertisement monitor: mgmt status " + MgmtStatus.name(status) + "; retrying in " + String(waitS) + " s")
    }

    private mutating func lost(_ reason: String) -> Event? {
        monitorHandle = nil
        monitorReadds += 1
        addWanted = true
        return addIfPowered(reason)
    }

    /// The monitor waits for power: an Add sent while the adapter is off fails, and Linux 6.1
    /// then answers Busy to every later Add until the adapter is registered again (its pending
    /// command leaks when hci_cmd_sync_queue refuses, mgmt.c __add_adv_patterns_monitor).
    private mutating func addIfPowered(_ reason: String) -> Event? {
        guard addWanted, !addPending, readdAtNs == nil else { return nil }
        guard powered else { return .notice(reason + "; the advertisement monitor is added again when the adapter is powered") }
        addPending = driver.write(socket, .addBeaconMonitor(index: index)) > 0
        return .readding(reason: reason)
    }

    private mutating func settingsChanged(_ settings: UInt32) -> Event? {
        let now = settings & MgmtSettings.powered != 0
        guard now != powered else { return nil }
        powered = now
        if now {
            // The kernel keeps its instances while powered off; adding again updates ours, and
            // brings it back if the power cycle went with an index change.
            advertiseAgain()
            return addIfPowered(name + " is powered")
        }
        if case .on = advertising { advertising = .off }
        return .notice(name + " was powered off; scanning resumes when it is powered again")
    }

    /// Only while powered (a Remove on an adapter that is off fails the same way as an Add, see
    /// `addIfPowered`); otherwise the state file keeps the handle for the next start to remove.
    private mutating func removeMonitor() -> KernelScannerError? {
        guard let handle = monitorHandle, powered else { return nil }
        monitorHandle = nil
        driver.store(statePath, nil)
        if case .failure(let problem) = request(.removeAdvMonitor(index: index, handle: handle)) { return problem }
        return nil
    }

    /// Sends `command` and waits (bounded) for its Command Complete or Status; other events that
    /// arrive meanwhile are dropped (nothing is scanning for us yet). The parameters point into
    /// the buffer.
    private mutating func request(_ command: MgmtCommand, timeoutMs: Int32 = KernelScannerError.commandTimeoutMs) -> Result<UnsafeRawBufferPointer, KernelScannerError> {
        let result = MgmtExchange.request(command, on: socket, driver, buffer: buffer, timeoutMs: timeoutMs, rejected: &rejectedEvents)
        return result.mapError { error(command.opcode.description, $0) }
    }

    private mutating func close() {
        if socket >= 0 { driver.close(socket) }
        socket = -1
        if case .on = advertising { advertising = .off }
        monitorHandle = nil
        addPending = false
        addWanted = false
        powered = false
        readdAtNs = nil
    }

    private mutating func scheduleRetry(now: Int64) -> Int64 {
        let waited = backoffNs
        nextAttemptNs = now + waited
        backoffNs = min(backoffNs * 2, 10_000_000_000)
        return waited / 1_000_000
    }

    private func error(_ step: String, _ cause: KernelScannerError.Cause) -> KernelScannerError {
        KernelScannerError(adapterIndex: adapterIndex, step: step, cause: cause)
    }
}
