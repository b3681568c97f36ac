// Live-update presets (CLLocationUpdate.LiveConfiguration) and accuracy tiers
// (CLLocationAccuracy) as receiver settings and filter thresholds.
//
// Dynamic models are u-blox CFG-NAV5 dynModel values ([M8] "Navigation Configuration Settings >
// Platform settings" gives each model's limits: portable 310 m/s, automotive 100 m/s, sea 25 m/s
// horizontal, pedestrian 30 m/s, airborne 100 m/s ... 500 m/s); the MediaTek equivalent is the
// PMTK886 navigation ("FR") mode, where the firmware has one.

/// What a preset means: how often to fix, which platform model the receiver's filter assumes,
/// which fixes to believe, and when to call the device stationary.
public struct LiveConfiguration: Equatable, Sendable {
    public var preset: LivePreset
    /// Fix interval while moving: the fastest the receiver is asked to fix.
    public var fixIntervalMs: Int64
    public var ubxDynamicModel: UBXDynamicModel
    public var pmtkNavigationMode: PMTKNavigationMode
    /// The fastest plausible movement, m/s: bounds how far the device can get between fixes
    /// (boundary-aware sampling) and rejects position jumps that would need more (speed filter).
    public var maximumSpeedMps: Double
    /// Fixes less accurate than this are not delivered (accuracy filter), metres.
    public var maximumAccuracyM: Double
    /// Net displacement, beyond the fixes' own accuracy, still counted as standing still, metres.
    public var stationaryRadiusM: Double
    /// How long the device must stay within `stationaryRadiusM` to be stationary.
    public var stationaryWindowMs: Int64

    public init(preset: LivePreset) {
        switch preset {
        case .default:
            self = LiveConfiguration(preset, fixIntervalMs: 1_000, .portable, .vehicle,
                                     maximumSpeedMps: 50, maximumAccuracyM: 100, stationaryRadiusM: 20, stationaryWindowMs: 120_000)
        case .automotiveNavigation:
            self = LiveConfiguration(preset, fixIntervalMs: 1_000, .automotive, .vehicle,
                                     maximumSpeedMps: 70, maximumAccuracyM: 50, stationaryRadiusM: 25, stationaryWindowMs: 120_000)
        case .otherNavigation:
            self = LiveConfiguration(preset, fixIntervalMs: 1_000, .sea, .vehicle,
                                     maximumSpeedMps: 40, maximumAccuracyM: 100, stationaryRadiusM: 30, stationaryWindowMs: 300_000)
        case .fitness:
            self = LiveConfiguration(preset, fixIntervalMs: 1_000, .pedestrian, .pedestrian,
                                     maximumSpeedMps: 12, maximumAccuracyM: 30, stationaryRadiusM: 10, stationaryWindowMs: 120_000)
        case .airborne:
            self = LiveConfiguration(preset, fixIntervalMs: 1_000, .airborne2g, .aviation,
                                     maximumSpeedMps: 300, maximumAccuracyM: 100, stationaryRadiusM: 50, stationaryWindowMs: 300_000)
        }
    }

    init(_ preset: LivePreset, fixIntervalMs: Int64, _ model: UBXDynamicModel, _ mode: PMTKNavigationMode,
         maximumSpeedMps: Double, maximumAccuracyM: Double, stationaryRadiusM: Double, stationaryWindowMs: Int64) {
        self.preset = preset
        self.fixIntervalMs = fixIntervalMs
        self.ubxDynamicModel = model
        self.pmtkNavigationMode = mode
        self.maximumSpeedMps = maximumSpeedMps
        self.maximumAccuracyM = maximumAccuracyM
        self.stationaryRadiusM = stationaryRadiusM
        self.stationaryWindowMs = stationaryWindowMs
    }
}

extension LivePreset: CustomStringConvertible {
    public var description: String {
        switch self {
        case .default: return "default"
        case .automotiveNavigation: return "automotiveNavigation"
        case .otherNavigation: return "otherNavigation"
        case .fitness: return "fitness"
        case .airborne: return "airborne"
        }
    }
}

/// How the receiver is kept running between fixes.
public enum ReceiverDutyCycle: Equatable, Sendable {
    /// Always tracking at the preset's rate.
    case continuous
    /// u-blox cyclic tracking (CFG-PM2 + CFG-RXM power save) / MediaTek periodic standby: the
    /// receiver keeps tracking at reduced duty and fixes once per period.
    case cyclicTracking(periodMs: Int64)
    /// Off between fixes with backup power (RTC and ephemeris kept, so each wake is a hot
    /// start): u-blox RXM-PMREQ backup / MediaTek periodic backup.
    case onOff(periodMs: Int64)
}

/// What an accuracy tier means for the radios.
public struct TierPolicy: Equatable, Sendable {
    public var tier: AccuracyTier
    public var dutyCycle: ReceiverDutyCycle
    /// Never slower than this between fixes (boundary-aware sampling stretches up to it).
    public var maximumIntervalMs: Int64
    /// Fixes worse than this carry `accuracyLimited`, metres.
    public var desiredAccuracyM: Double
    /// BLE scan window and interval (HCI LE Set Scan Parameters), ms: duty = window / interval.
    public var bleScanWindowMs: Int64
    public var bleScanIntervalMs: Int64

    public var bleScanDuty: Double { Double(bleScanWindowMs) / Double(bleScanIntervalMs) }

    /// The tier's BLE timing as HCI scan parameters (passive scanning).
    public var scanSettings: ScanSettings {
        do {
            return try ScanSettings(scanType: .passive, intervalMs: Int(bleScanIntervalMs), windowMs: Int(bleScanWindowMs))
        } catch {
            // The tier table is checked by the tests; a failure here is a programmer error.
            preconditionFailure("TierPolicy BLE timing out of range")
        }
    }

    public init(tier: AccuracyTier) {
        switch tier {
        case .best:
            self = TierPolicy(tier, .continuous, maximumIntervalMs: 1_000, desiredAccuracyM: 5, bleWindowMs: 100, bleIntervalMs: 100)
        case .nearestTenMeters:
            self = TierPolicy(tier, .continuous, maximumIntervalMs: 5_000, desiredAccuracyM: 10, bleWindowMs: 50, bleIntervalMs: 100)
        case .hundredMeters:
            self = TierPolicy(tier, .cyclicTracking(periodMs: 10_000), maximumIntervalMs: 30_000, desiredAccuracyM: 100, bleWindowMs: 30, bleIntervalMs: 120)
        case .kilometer:
            self = TierPolicy(tier, .onOff(periodMs: 120_000), maximumIntervalMs: 120_000, desiredAccuracyM: 1_000, bleWindowMs: 30, bleIntervalMs: 300)
        case .threeKilometers:
            self = TierPolicy(tier, .onOff(periodMs: 600_000), maximumIntervalMs: 600_000, desiredAccuracyM: 3_000, bleWindowMs: 30, bleIntervalMs: 600)
        }
    }

    init(_ tier: AccuracyTier, _ dutyCycle: ReceiverDutyCycle, maximumIntervalMs: Int64, desiredAccuracyM: Double,
         bleWindowMs: Int64, bleIntervalMs: Int64) {
        precondition(bleWindowMs <= bleIntervalMs, "a scan window cannot exceed its interval")
        self.tier = tier
        self.dutyCycle = dutyCycle
        self.maximumIntervalMs = maximumIntervalMs
        self.desiredAccuracyM = desiredAccuracyM
        self.bleScanWindowMs = bleWindowMs
        self.bleScanIntervalMs = bleIntervalMs
    }
}

extension AccuracyTier: CustomStringConvertible {
    public var description: String {
        switch self {
        case .best: return "best"
        case .nearestTenMeters: return "nearestTenMeters"
        case .hundredMeters: return "hundredMeters"
        case .kilometer: return "kilometer"
        case .threeKilometers: return "threeKilometers"
        }
    }
}
