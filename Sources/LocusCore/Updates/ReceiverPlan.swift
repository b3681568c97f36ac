// The commands that put a receiver into a preset's platform model and a tier's duty cycle, and
// the bookkeeping of their acknowledgements. Sending and reading the UART is the agent's job.

/// One command for the receiver, in fixed storage.
public enum ReceiverCommand: Equatable, Sendable {
    case ubx(UBXFrame)
    case pmtk(PMTKSentence)

    /// What the receiver's acknowledgement will name: a UBX message ID, or a PMTK packet type.
    /// Nil for commands that are not acknowledged (RXM-PMREQ, PMTK161).
    public var acknowledgementKey: AcknowledgementKey? {
        switch self {
        case .ubx(let frame):
            return frame.message == .rxmPmreq ? nil : .ubx(frame.message)
        case .pmtk(let sentence):
            // "$PMTKnnn": the packet type is the three digits after the prefix.
            let type = UInt16(sentence[5] - 0x30) * 100 + UInt16(sentence[6] - 0x30) * 10 + UInt16(sentence[7] - 0x30)
            return type == 161 ? nil : .pmtk(type)
        }
    }
}

public enum AcknowledgementKey: Equatable, Sendable {
    case ubx(UBXMessageID)
    case pmtk(UInt16)
}

extension UBXFrame: Equatable {
    public static func == (a: UBXFrame, b: UBXFrame) -> Bool { a.elementsEqual(b) }
}

extension PMTKSentence: Equatable {
    public static func == (a: PMTKSentence, b: PMTKSentence) -> Bool { a.elementsEqual(b) }
}

/// Up to `capacity` commands, sent in order.
public struct ReceiverCommandSequence: RandomAccessCollection, Sendable {
    public static let capacity = 6
    private var storage = InlineArray<6, ReceiverCommand?>(repeating: nil)
    public private(set) var count = 0

    public init() {}

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }
    public subscript(position: Int) -> ReceiverCommand {
        precondition(position >= 0 && position < count, "ReceiverCommandSequence index out of range")
        return storage[position]!
    }

    mutating func append(_ command: ReceiverCommand?) {
        guard let command else { return }
        precondition(count < ReceiverCommandSequence.capacity, "more receiver commands than ReceiverCommandSequence.capacity")
        storage[count] = command
        count += 1
    }
}

public enum ReceiverPlan {
    /// The set-up sequence for a preset and tier on a receiver family. generic-nmea receivers
    /// take no commands (empty sequence): they run as they were configured.
    ///
    /// u-blox: CFG-NAV5 dynamic model, CFG-RATE at the preset's interval, then CFG-RXM
    /// continuous, or CFG-PM2 cyclic tracking + CFG-RXM power save. For on/off the receiver is
    /// left continuous here and put into backup per sleep with `sleep(durationMs:receiver:)`,
    /// so boundary-aware sampling decides each wake-up.
    /// MediaTek: PMTK886 navigation mode, PMTK220 fix interval, PMTK225 normal / periodic
    /// standby / periodic backup (the receiver then times its own wake-ups).
    public static func commands(preset: LiveConfiguration, tier: TierPolicy, receiver: BoardConfig.Receiver) -> ReceiverCommandSequence {
        var sequence = ReceiverCommandSequence()
        let intervalMs = UInt16(clamping: preset.fixIntervalMs)
        switch receiver {
        case .genericNMEA:
            break
        case .ublox:
            sequence.append(.ubx(UBX.cfgNav5(dynamicModel: preset.ubxDynamicModel)))
            sequence.append(UBX.cfgRate(measurementPeriodMilliseconds: intervalMs).map { .ubx($0) })
            switch tier.dutyCycle {
            case .continuous, .onOff:
                sequence.append(.ubx(UBX.cfgRxm(.continuous)))
            case .cyclicTracking(let periodMs):
                sequence.append(UBX.cfgPm2CyclicTracking(updatePeriodMilliseconds: UInt32(clamping: periodMs)).map { .ubx($0) })
                sequence.append(.ubx(UBX.cfgRxm(.powerSave)))
            }
        case .mediatek:
            sequence.append(.pmtk(PMTK.setNavigationMode(preset.pmtkNavigationMode)))
            sequence.append(PMTK.setPositionFixInterval(milliseconds: UInt32(clamping: preset.fixIntervalMs)).map { .pmtk($0) })
            switch tier.dutyCycle {
            case .continuous:
                sequence.append(PMTK.setPeriodicMode(.normal).map { .pmtk($0) })
            case .cyclicTracking(let periodMs):
                let runMs = UInt32(mediatekRunMs)
                let times = PMTKPeriodicTimes(runMilliseconds: runMs, sleepMilliseconds: UInt32(clamping: periodMs) - runMs)
                sequence.append(PMTK.setPeriodicMode(.periodicStandby(times)).map { .pmtk($0) })
            case .onOff(let periodMs):
                // A second, longer run time for wakes that did not get a fix in the first.
                let runMs = UInt32(mediatekRunMs)
                let times = PMTKPeriodicTimes(runMilliseconds: runMs, sleepMilliseconds: UInt32(clamping: periodMs) - runMs,
                                              secondRunMilliseconds: 4 * runMs, secondSleepMilliseconds: UInt32(clamping: periodMs) - runMs)
                sequence.append(PMTK.setPeriodicMode(.periodicBackup(times)).map { .pmtk($0) })
            }
        }
        return sequence
    }

    /// MediaTek's run time per period: long enough for a hot start and a few fixes
    /// (MT3339 hot start is about 1 s; [PMTK] 225's own example uses 3 s).
    static let mediatekRunMs = 3_000

    /// The command that puts the receiver into backup until the next planned fix (u-blox only;
    /// MediaTek's periodic mode sleeps by itself). Nil for other receivers.
    public static func sleep(durationMs: Int64, receiver: BoardConfig.Receiver) -> ReceiverCommand? {
        guard receiver == .ublox, durationMs > 0 else { return nil }
        return .ubx(UBX.rxmPmreq(durationMilliseconds: UInt32(clamping: durationMs)))
    }
}
