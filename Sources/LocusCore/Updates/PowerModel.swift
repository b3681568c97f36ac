// Receiver supply currents, for estimating what a tier costs. The figures are typical values
// from the manufacturers' documents (not measured here); boards differ with antenna, LNA and
// supply, so read the results as comparisons between tiers, not as a battery budget.

/// Typical supply currents of a receiver family, mA, at its nominal supply.
public struct ReceiverCurrents: Sendable {
    /// A static string: no reference counting in the per-gap accounting.
    public var name: StaticString
    public var supplyV: Double
    public var acquisitionMA: Double
    public var trackingMA: Double
    /// Average in the duty-cycled tracking mode (u-blox cyclic tracking at 1 Hz; MediaTek
    /// periodic standby averaged by the receiver itself is modelled as tracking + standby).
    public var powerSaveMA: Double
    /// Backup (RTC and ephemeris kept, everything else off).
    public var backupMA: Double
    /// Time to fix from backup with valid ephemeris (hot start), seconds.
    public var hotStartS: Double

    /// u-blox NEO-M8N, GPS+GLONASS, 3.0 V: typical values from the "u-blox NEO-M8 series Data
    /// Sheet" (UBX-15031086), "Electrical specification > Power consumption" (acquisition and
    /// continuous tracking currents, power save mode at 1 Hz, backup current via V_BCKP) and
    /// "Performance > TTFF hot start" (1 s).
    public static let ubloxNEOM8 = ReceiverCurrents(name: "u-blox NEO-M8", supplyV: 3.0, acquisitionMA: 25, trackingMA: 23,
                                                    powerSaveMA: 7.5, backupMA: 0.015, hotStartS: 1)
    /// MediaTek MT3339 in the GlobalTop FGPMMOPA6H module, 3.3 V: typical values from the
    /// "GlobalTop FGPMMOPA6H GPS Standalone Module Data Sheet", "Specifications > Power
    /// consumption" (acquisition 25 mA, tracking 20 mA, backup 7 µA) and hot start 1 s. There
    /// is no cyclic tracking; periodic standby is costed as tracking during the run time and
    /// standby (PMTK161, typical 0.2 mA in the same data sheet) for the rest.
    public static let mediatekMT3339 = ReceiverCurrents(name: "MediaTek MT3339", supplyV: 3.3, acquisitionMA: 25, trackingMA: 20,
                                                        powerSaveMA: 20 * 0.3 + 0.2 * 0.7, backupMA: 0.007, hotStartS: 1)

    public static func family(_ receiver: BoardConfig.Receiver) -> ReceiverCurrents {
        receiver == .mediatek ? .mediatekMT3339 : .ubloxNEOM8
    }
}

/// Time and charge spent per receiver state over a schedule of fixes.
public struct PowerAccount: Sendable {
    public let currents: ReceiverCurrents
    public let dutyCycle: ReceiverDutyCycle
    public private(set) var acquisitionS = 0.0
    public private(set) var trackingS = 0.0
    public private(set) var powerSaveS = 0.0
    public private(set) var backupS = 0.0
    public private(set) var wakeUps = 0

    /// Gaps shorter than this are not worth a backup cycle: the receiver stays tracking.
    public static let shortestSleepS = 10.0

    public init(currents: ReceiverCurrents, dutyCycle: ReceiverDutyCycle) {
        self.currents = currents
        self.dutyCycle = dutyCycle
        acquisitionS = currents.hotStartS
    }

    /// The receiver's state between two consecutive fixes `gapS` apart.
    @_noAllocation
    public mutating func gap(_ gapS: Double) {
        guard gapS > 0 else { return }
        switch dutyCycle {
        case .continuous:
            trackingS += gapS
        case .cyclicTracking(let periodMs):
            // Fixes closer than the cycle need full tracking; longer gaps are power save.
            if gapS < Double(periodMs) / 1_000 { trackingS += gapS } else { powerSaveS += gapS }
        case .onOff:
            if gapS < PowerAccount.shortestSleepS {
                trackingS += gapS
            } else {
                // Backup until the wake, then a hot start and one fix.
                let awakeS = currents.hotStartS + 1
                backupS += max(0, gapS - awakeS)
                acquisitionS += min(gapS, currents.hotStartS)
                trackingS += max(0, min(gapS - currents.hotStartS, 1))
                wakeUps += 1
            }
        }
    }

    /// The receiver paused in backup for `gapS` (the stationary pause), then a hot start.
    @_noAllocation
    public mutating func sleep(_ gapS: Double) {
        guard gapS > 0 else { return }
        backupS += max(0, gapS - currents.hotStartS)
        acquisitionS += min(gapS, currents.hotStartS)
        wakeUps += 1
    }

    /// The receiver in backup for `gapS`, then woken: the wake's hot start is charged by
    /// `acquire` from the wake to the first fix (the stationary pause in the power report).
    @_noAllocation
    public mutating func backup(_ gapS: Double) {
        guard gapS > 0 else { return }
        backupS += gapS
        wakeUps += 1
    }

    /// Awake without a fix yet (a hot start) for `gapS`.
    @_noAllocation
    public mutating func acquire(_ gapS: Double) {
        guard gapS > 0 else { return }
        acquisitionS += gapS
    }

    public var durationS: Double { acquisitionS + trackingS + powerSaveS + backupS }
    /// Time not in backup.
    public var onTimeS: Double { acquisitionS + trackingS + powerSaveS }

    public var chargeMAh: Double {
        (acquisitionS * currents.acquisitionMA + trackingS * currents.trackingMA
            + powerSaveS * currents.powerSaveMA + backupS * currents.backupMA) / 3_600
    }

    public var mAhPerDay: Double { durationS > 0 ? chargeMAh * 86_400 / durationS : 0 }
    /// Wakes from backup (on/off fixes, pause probes), plus cyclic tracking's own cycles.
    public var wakeUpsPerHour: Double {
        guard durationS > 0 else { return 0 }
        var cycles = 0.0
        if case .cyclicTracking(let periodMs) = dutyCycle { cycles = 3_600_000 / Double(periodMs) * powerSaveS / durationS }
        return cycles + Double(wakeUps) * 3_600 / durationS
    }
}
