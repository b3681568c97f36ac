import LocusCore
import LocusDevices

/// How an adapter is scanned once decided: HCI commands on a raw socket, or the kernel's
/// advertisement monitor (mgmt). An enum, not a protocol value: the device build has no
/// existentials. The scanners are move-only (each owns its socket and buffers), so each sits in
/// a box the loop mutates in place: moving them in and out of the enum on every call cost the
/// device binary several kilobytes.
enum AdapterScan {
    final class Box<Scanner: ~Copyable> {
        var scanner: Scanner
        init(_ scanner: consuming Scanner) { self.scanner = scanner }
    }

    case undecided
    case raw(Box<HCIScanner<LibBluetoothHCI>>)
    case kernel(Box<KernelScanner<MgmtSocket>>)
}

/// The loop's calls on whichever scanner was chosen.
extension AdapterScan {
    var isKernel: Bool { if case .kernel = self { return true } else { return false } }
    var isUndecided: Bool { if case .undecided = self { return true } else { return false } }

    var descriptor: Descriptor? {
        switch self {
        case .raw(let box): return box.scanner.descriptor
        case .kernel(let box): return box.scanner.descriptor
        case .undecided: return nil
        }
    }

    var isOpen: Bool { descriptor != nil }

    var nextAttemptAtNs: Int64? {
        switch self {
        case .raw(let box): return box.scanner.nextAttemptAtNs
        case .kernel(let box): return box.scanner.nextAttemptAtNs
        case .undecided: return nil
        }
    }

    var modeName: String {
        switch self {
        case .raw: return "raw"
        case .kernel: return "kernel"
        case .undecided: return "undecided"
        }
    }

    var losses: Int {
        switch self {
        case .raw(let box): return box.scanner.losses
        case .kernel(let box): return box.scanner.losses
        case .undecided: return 0
        }
    }

    var monitorReadds: Int { if case .kernel(let box) = self { return box.scanner.monitorReadds } else { return 0 } }

    /// The gateway's own beacon: on, refused (with why) or off.
    var advertising: AdvertisingState {
        switch self {
        case .raw(let box): return box.scanner.advertising
        case .kernel(let box): return box.scanner.advertising
        case .undecided: return .off
        }
    }

    var advertisingRefusals: Int {
        switch self {
        case .raw(let box): return box.scanner.advertisingRefusals
        case .kernel(let box): return box.scanner.advertisingRefusals
        case .undecided: return 0
        }
    }
    var kernelUnsupported: Bool { if case .kernel(let box) = self { return box.scanner.unsupported } else { return false } }

    /// The start's log text, whether scanning started (or the monitor is being added again), and
    /// whether a command went unanswered (the self-healing's cue).
    func startIfDue(now: Int64) -> (String, Bool, Bool)? {
        switch self {
        case .raw(let box):
            guard let event = box.scanner.startIfDue(now: now) else { return nil }
            if case .started = event { return ("hci" + String(box.scanner.adapterIndex) + ": " + event.description, true, false) }
            if case .startFailed(let error, _) = event { return (event.description, false, error.isUnanswered) }
            return (event.description, false, false)
        case .kernel(let box):
            guard let event = box.scanner.startIfDue(now: now) else { return nil }
            switch event {
            case .started: return ("hci" + String(box.scanner.adapterIndex) + ": " + event.description, true, false)
            case .readding: return (event.description, true, false)
            case .startFailed(let error, _): return (event.description, false, error.isUnanswered)
            default: return (event.description, false, false)
            }
        case .undecided:
            return nil
        }
    }

    /// Reads what the scanner has into the sighting buffer; the text of anything to log.
    func read(_ now: Int64, _ time: UTCTime, _ buffer: UnsafeMutableBufferPointer<Sighting>, _ phones: Unmanaged<PhoneResolution>?,
              _ count: inout Int, _ rejected: inout Int, _ dropped: inout Int, _ reports: inout Int) -> String? {
        switch self {
        case .raw(let box):
            return box.scanner.read(now: now) { packet in
                SightingGather.gather(packet, time, buffer, phones, &count, &rejected, &dropped, &reports)
            }?.description
        case .kernel(let box):
            let before = box.scanner.rejectedEvents
            let event = box.scanner.read(now: now) { report in SightingGather.store(report, time, buffer, phones, &count, &dropped, &reports) }
            rejected += box.scanner.rejectedEvents - before
            return event?.description
        case .undecided:
            return nil
        }
    }

    /// A raw socket goes quiet when its adapter goes down; the kernel mode hears it as mgmt events.
    func checkAdapter(now: Int64) -> String? {
        guard case .raw(let box) = self else { return nil }
        return box.scanner.checkAdapter(now: now)?.description
    }

    /// New raw scan timing; the kernel times its own scan.
    func reconfigure(_ settings: ScanSettings) -> String? {
        guard case .raw(let box) = self else { return nil }
        return box.scanner.reconfigure(settings)?.description
    }

    /// After a self-healing step: start again as soon as possible.
    func restartSoon() {
        switch self {
        case .raw(let box): box.scanner.restartSoon()
        case .kernel(let box): box.scanner.restartSoon()
        case .undecided: break
        }
    }

    func stop() -> String? {
        switch self {
        case .raw(let box): return box.scanner.stop()?.description
        case .kernel(let box): return box.scanner.stop()?.description
        case .undecided: return nil
        }
    }
}
