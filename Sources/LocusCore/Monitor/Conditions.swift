/// CLMonitor's `CircularGeographicCondition`: a circle on the WGS84 ellipsoid.
public struct CircularGeographicCondition: Equatable, Sendable {
    public var latitude: Double
    public var longitude: Double
    public var radiusM: Double

    public init(latitude: Double, longitude: Double, radiusM: Double) {
        self.latitude = latitude
        self.longitude = longitude
        self.radiusM = radiusM
    }
}

/// CLMonitor's `BeaconIdentityCondition`: a UUID, optionally narrowed by major, then minor.
public struct BeaconIdentityCondition: Hashable, Sendable {
    public var uuid: BeaconUUID
    public var major: UInt16?
    public var minor: UInt16?

    public init(uuid: BeaconUUID, major: UInt16? = nil, minor: UInt16? = nil) {
        precondition(minor == nil || major != nil, "a minor needs a major")
        self.uuid = uuid
        self.major = major
        self.minor = minor
    }

    /// True when the condition leaves major or minor open (its satisfied events carry a refinement).
    public var isWildcard: Bool { minor == nil }

    public func matches(_ identity: BeaconIdentity) -> Bool {
        identity.uuid == uuid && (major == nil || major == identity.major) && (minor == nil || minor == identity.minor)
    }
}

/// A concrete beacon identity as seen on the air.
public struct BeaconIdentity: Hashable, Sendable {
    public var uuid: BeaconUUID
    public var major: UInt16
    public var minor: UInt16

    public init(uuid: BeaconUUID, major: UInt16, minor: UInt16) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
    }
}

/// A phone or watch that advertises from rotating private addresses, named as in the site's
/// phones file (which holds its identity resolving key): satisfied while it is heard, as a
/// beacon condition is. The name is all the condition carries; the key never leaves that file.
public struct PhoneCondition: Hashable, Sendable {
    public var name: FixedName

    public init(name: FixedName) { self.name = name }

    /// The identity a resolved phone's sightings carry, so that the beacon conditions' index,
    /// filters and ranging serve phones unchanged: the reserved UUID "locus_phone" in ASCII,
    /// major 0, and the phone's number in the engine's list of phone names as the minor.
    public static let uuid = BeaconUUID(high: 0x6C6F_6375_735F_7068, low: 0x6F6E_6500_0000_0000)

    public static func identity(number: Int) -> BeaconIdentity {
        BeaconIdentity(uuid: uuid, major: 0, minor: UInt16(truncatingIfNeeded: number))
    }
}

public enum Condition: Equatable, Sendable {
    case circle(CircularGeographicCondition)
    case beacon(BeaconIdentityCondition)
    /// A phone resolved by its identity resolving key (docs/presence.md).
    case phone(PhoneCondition)
    /// A polygon with geodesic edges (docs/shapes.md): satisfied inside.
    case polygon(GeoPolygon)
    /// A band along a path: satisfied within half its width of the path.
    case corridor(GeoCorridor)

    /// A place on the map (circle, polygon, corridor), decided by fixes; else a beacon.
    public var isGeographic: Bool {
        switch self {
        case .beacon, .phone: return false
        case .circle, .polygon, .corridor: return true
        }
    }

    /// Polygons and corridors, kept in the monitor's shape store.
    public var isShape: Bool {
        switch self {
        case .polygon, .corridor: return true
        case .circle, .beacon, .phone: return false
        }
    }
}

/// Per-condition decision settings (Locus beyond CLMonitor). Defaults documented in the README.
public struct ConditionSettings: Equatable, Sendable {
    /// Geofences: the fix must be this far inside the edge to enter, this far outside to exit.
    public var enterMarginM: Double = 0
    public var exitMarginM: Double = 15
    /// Minimum time the new state must hold before it is reported.
    public var dwellMs: Int64 = 0
    /// Hold the state while the fix's accuracy circle straddles the edge.
    public var accuracyGate = true
    /// Report a satisfied/unsatisfied pair when the path between two outside fixes crosses the circle.
    public var transit = false
    /// Beacons: unsatisfied after this long without a sighting (nil: the engine's default).
    public var exitTimeoutMs: Int64? = nil
    /// Beacons: satisfied only while the filtered proximity is at least this close.
    public var proximity: ProximityRequirement? = nil

    public init() {}

    /// "inside iff distance <= radius", no hysteresis, no dwell, no accuracy gate.
    public static var raw: ConditionSettings {
        var settings = ConditionSettings()
        settings.exitMarginM = 0
        settings.accuracyGate = false
        return settings
    }
}

/// One beacon reception handed to the engine (from an iBeacon or AltBeacon frame).
public struct Sighting: Equatable, Sendable {
    public var identity: BeaconIdentity
    public var rssi: Int8?
    /// Measured power at 1 m (the frame's TX power byte), dBm.
    public var measuredPower: Int8
    public var address: BLEAddress
    public var time: UTCTime

    public init(identity: BeaconIdentity, rssi: Int8?, measuredPower: Int8, address: BLEAddress, time: UTCTime) {
        self.identity = identity
        self.rssi = rssi
        self.measuredPower = measuredPower
        self.address = address
        self.time = time
    }

    /// The sighting in an advertising report, if it carries an iBeacon or AltBeacon frame.
    @_noAllocation
    public static func from(_ report: AdvertisingReport, time: UTCTime) -> Sighting? {
        switch BeaconDecoder.decode(report.data) {
        case .iBeacon(let uuid, let major, let minor, let power)?:
            return Sighting(identity: BeaconIdentity(uuid: uuid, major: major, minor: minor), rssi: report.rssi,
                            measuredPower: power, address: report.address, time: time)
        case .altBeacon(_, let id1, let id2, let id3, let reference, _)?:
            return Sighting(identity: BeaconIdentity(uuid: id1, major: id2, minor: id3), rssi: report.rssi,
                            measuredPower: reference, address: report.address, time: time)
        default:
            return nil
        }
    }
}

/// iOS 18's `CLMonitor.Event` diagnostics.
public struct EventDiagnostics: OptionSet, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The fix was too coarse to decide this condition.
    public static let accuracyLimited = EventDiagnostics(rawValue: 1)
    /// The condition could not be added: capacity is full.
    public static let conditionLimitExceeded = EventDiagnostics(rawValue: 2)
    /// The gateway cannot monitor this kind of condition (a beacon condition without Bluetooth).
    public static let conditionUnsupported = EventDiagnostics(rawValue: 4)
    /// The state directory is not writable: monitoring works in memory only.
    public static let persistenceUnavailable = EventDiagnostics(rawValue: 8)

    public var names: [String] {
        var result: [String] = []
        forEachName { result.append($0.description) }
        return result
    }

    /// The names of the flags set, in a fixed order (for writers that must not allocate).
    @inline(__always)
    public func forEachName(_ body: (StaticString) -> Void) {
        if contains(.accuracyLimited) { body("accuracyLimited") }
        if contains(.conditionLimitExceeded) { body("conditionLimitExceeded") }
        if contains(.conditionUnsupported) { body("conditionUnsupported") }
        if contains(.persistenceUnavailable) { body("persistenceUnavailable") }
    }
}

/// Why an event happened: the observation that decided it, for technicians reading the log.
///
/// Every record keeps one of these (its last event's; the observation a dwell started with beside
/// it while the dwell lasts), so the measurements that need no more than seven digits are stored
/// as Float: 24 bytes a record fewer, 240 KB at 10,000 conditions.
public struct Explanation: Equatable, Sendable {
    public enum Source: UInt8, Equatable, Sendable {
        case fix = 1, sighting = 2, timeout = 3, transit = 4, assumption = 5
    }
    // Stored by alignment (8, 4, 1 bytes): 56 bytes.
    /// Geofences: the fix, its horizontal accuracy and the distance to the edge (negative inside).
    public var latitude: Double = 0
    public var longitude: Double = 0
    public var edgeDistanceM: Double = 0
    /// How long the new state had held when it was reported.
    public var dwellMs: Int64 = 0
    private var storedAccuracyM: Float = 0
    private var storedRSSIFiltered: Float = 0
    private var storedDistanceM: Float = 0
    private var storedSamples: Int32 = 0
    public var source: Source
    /// Beacons: the RSSI window's minimum and maximum.
    public var rssiMinimum: Int8 = 0
    public var rssiMaximum: Int8 = 0

    public init(source: Source) { self.source = source }

    public var accuracyM: Double {
        get { Double(storedAccuracyM) }
        set { storedAccuracyM = Float(newValue) }
    }

    /// Beacons: filtered RSSI, sample count, and the distance estimate.
    public var rssiFiltered: Double {
        get { Double(storedRSSIFiltered) }
        set { storedRSSIFiltered = Float(newValue) }
    }

    public var rssiSamples: Int {
        get { Int(storedSamples) }
        set { storedSamples = Int32(clamping: newValue) }
    }

    public var distanceM: Double {
        get { Double(storedDistanceM) }
        set { storedDistanceM = Float(newValue) }
    }

    /// Polygons and corridors: the edge nearest the fix, numbered from 1 (edge k runs from vertex
    /// k to vertex k + 1 as written); 0 for circles. Kept where a beacon's sample count is, which
    /// a geographic explanation has no use for (the log's format is unchanged).
    public var nearestEdge: Int {
        get { source == .fix || source == .transit ? Int(storedSamples) : 0 }
        set { storedSamples = Int32(clamping: newValue) }
    }
}

/// CLMonitor's `MonitoringRecord.lastEvent` / `CLMonitor.Event`.
public struct MonitorEvent: Equatable, Sendable {
    public var monitor: FixedName
    public var identifier: FixedName
    public var state: ConditionState
    public var date: UTCTime
    /// Wildcard beacon conditions: the concrete identity that satisfied them.
    public var refinement: BeaconIdentity?
    public var diagnostics: EventDiagnostics
    public var explanation: Explanation

    public init(monitor: FixedName, identifier: FixedName, state: ConditionState, date: UTCTime,
                refinement: BeaconIdentity?, diagnostics: EventDiagnostics, explanation: Explanation) {
        self.monitor = monitor
        self.identifier = identifier
        self.state = state
        self.date = date
        self.refinement = refinement
        self.diagnostics = diagnostics
        self.explanation = explanation
    }
}

extension BeaconProximity {
    /// The category a configured `proximity = "..."` requirement names.
    public init(_ requirement: ProximityRequirement) {
        switch requirement {
        case .immediate: self = .immediate
        case .near: self = .near
        case .far: self = .far
        }
    }
}
