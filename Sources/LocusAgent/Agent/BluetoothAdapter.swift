import LocusCore
import LocusDevices

/// A BlueZ adapter's scan (`[bluetooth] hci`), owned by `BluetoothSource`: the scanner
/// (`AdapterScan`: HCI commands on a raw socket, or the kernel's advertisement monitor), decided
/// at the first start from the board's `scan` and `power_on` and from who else uses Bluetooth
/// (kept for the status); the scan timing the radios' tier asks for, and whether beacon ranging
/// holds it at the finest; and when the adapter is next checked (a raw socket goes quiet rather
/// than failing when its adapter goes down).
///
/// The source keeps what is not the scanner's: its poll slot, the sightings, the self-healing.
struct BluetoothAdapter {
    static let checkIntervalNs: Int64 = 10_000_000_000

    /// The scanner, decided at the first start (`startIfDue`).
    private(set) var scan = AdapterScan.undecided
    private let mode: BoardConfig.ScanMode
    private let powerOn: Bool
    private let monitorStatePath: String
    /// Other programs with a Bluetooth socket open when the mode was decided ("'bluetoothd' (mgmt)").
    private(set) var coUsers: [String] = []
    /// The scan the radios' tier asks for (`followTier`); while a client ranges beacons the scan
    /// runs at the finest tier's instead (`rangingScan`).
    private var tierSettings: ScanSettings
    private(set) var rangingScan = false
    private var nextCheck = MonotonicInstant(nanoseconds: 0)
    /// The gateway's own beacon (site `[bluetooth] advertise`), handed to whichever scanner runs:
    /// it starts and stops with the scan.
    let advertisement: BeaconAdvertisement?
    /// The advertising state last logged, so a restart that changes nothing stays quiet.
    private var loggedAdvertising = AdvertisingState.off

    init(board: BoardConfig, stateDirectory: String, settings: ScanSettings, advertisement: BeaconAdvertisement? = nil) {
        self.advertisement = advertisement
        tierSettings = settings
        mode = board.scanMode
        powerOn = board.powerOn
        monitorStatePath = Paths.resolve("bluetooth-monitor", relativeTo: stateDirectory)
    }

    /// The timing a raw scan runs with: the finest tier's while beacons are ranged.
    var wantedSettings: ScanSettings { rangingScan ? TierPolicy(tier: .best).scanSettings : tierSettings }

    func deadlines(_ next: inout NextDeadline) {
        if scan.isOpen && !scan.isKernel { next.consider(nextCheck) }
        if let attempt = scan.nextAttemptAtNs { next.consider(MonotonicInstant(nanoseconds: attempt)) }
    }

    /// Starts the scan of adapter `index` when its retry time has come, the mode decided at the
    /// first start; true when a command went unanswered (the self-healing's cue).
    mutating func startIfDue(_ index: Int, now: AgentTime) -> Bool {
        if scan.isUndecided { decide(index) }
        guard let (text, started, unanswered) = scan.startIfDue(now: now.monotonic.nanoseconds) else { return false }
        if started { AgentLog.info("locus: bluetooth: " + text) } else { AgentLog.warning("locus: bluetooth: " + text) }
        if started { noteAdvertising() }
        if !started, mode == .auto, scan.kernelUnsupported {
            AgentLog.info("locus: bluetooth: scan = auto: the kernel cannot scan for others; using raw HCI commands")
            scan = .raw(.init(HCIScanner(adapterIndex: index, settings: wantedSettings, advertisement: advertisement)))
        }
        nextCheck = now.monotonic + BluetoothAdapter.checkIntervalNs
        return unanswered
    }

    /// Asks the kernel whether the adapter is still up, every `checkIntervalNs`.
    mutating func checkIfDue(now: AgentTime) {
        guard scan.isOpen, now.monotonic >= nextCheck else { return }
        nextCheck = now.monotonic + BluetoothAdapter.checkIntervalNs
        if let text = scan.checkAdapter(now: now.monotonic.nanoseconds) { AgentLog.warning("locus: bluetooth: \(text)") }
    }

    // MARK: the gateway's own beacon

    /// After a start: the beacon's state, when it changed (a restart that changes nothing stays
    /// quiet; every refusal is logged, with the count). The kernel mode's later re-adds are told by
    /// its scanner's notices.
    private mutating func noteAdvertising() {
        guard let advertisement else { return }
        let state = scan.advertising
        if case .off = state { return }
        if case .on = state, case .on = loggedAdvertising { return }
        loggedAdvertising = state
        let text = "locus: bluetooth: advertising iBeacon " + advertisement.description + ": " + state.description
        if case .on = state { AgentLog.info(text) } else {
            AgentLog.warning(text + " (refusals: " + String(scan.advertisingRefusals) + "); scanning goes on")
        }
    }

    /// `"advertising"` in the bluetooth status: `off` when the site sends no beacon.
    func advertisingStatus(into line: inout JSONWriter) {
        line.beginObject("advertising")
        let state = advertisement == nil ? AdvertisingState.off : scan.advertising
        line.string("state", state.description)
        if let advertisement { line.string("beacon", advertisement.description) }
        line.integer("refusals", scan.advertisingRefusals)
        line.endObject()
    }

    // MARK: the scan's timing

    /// The radios' tier changed (`applyScan` restarts the scan at it).
    mutating func followTier(_ settings: ScanSettings) { tierSettings = settings }

    /// Whether beacon ranging holds the scan at the finest tier's (`applyScan` restarts it).
    mutating func holdForRanging(_ active: Bool) { rangingScan = active }

    /// A raw scan restarted at the wanted timing; the kernel times its own scan.
    func applyScan() {
        guard let problem = scan.reconfigure(wantedSettings) else { return }
        AgentLog.warning("locus: bluetooth: restarting the scan at the new duty cycle: \(problem)")
    }

    /// `scan = "auto"`: the kernel mode when another program has a mgmt socket open (bluetoothd,
    /// btmgmt: they drive this adapter through the kernel, which must then be the one that scans)
    /// or when the monitor replay cannot be read (the kernel mode is safe beside anyone); raw HCI
    /// commands when nobody else uses Bluetooth. An HCI user-channel holder owns the adapter
    /// outright: said in one line, since neither mode can share it.
    private mutating func decide(_ index: Int) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
        defer { buffer.deallocate() }
        let name = "hci" + String(index)
        var reason = "no other program uses Bluetooth"
        switch HCIUsers.read(MgmtSocket(), buffer: buffer) {
        case .success(let users):
            for user in users where user.name != "locus" {
                coUsers.append(user.description)
                if user.channel == .control && coUsers.count == 1 { reason = "beside " + user.name }
                if user.channel == .user && Int(user.index) == index {
                    AgentLog.error("locus: bluetooth: " + name + " is held exclusively through the HCI user channel by '" + user.name + "'; it cannot be shared: stop it or give Locus another adapter")
                }
            }
        case .failure:
            reason = "the monitor channel is not readable"
        }
        let kernel = mode == .kernel || (mode == .auto && reason != "no other program uses Bluetooth")
        if kernel {
            scan = .kernel(.init(KernelScanner(adapterIndex: index, powerOn: powerOn, statePath: monitorStatePath, driver: MgmtSocket(),
                                               advertisement: advertisement)))
        } else {
            scan = .raw(.init(HCIScanner(adapterIndex: index, settings: wantedSettings, advertisement: advertisement)))
        }
        if mode == .auto { AgentLog.info("locus: bluetooth: " + name + ": scan = auto: " + (kernel ? "kernel" : "raw") + " mode (" + reason + ")") }
    }
}
