import Foundation
import LocusCore
import LocusMonitor

// Core Location's names over LocusMonitor (docs/swift-api.md, "Core Location's names"): a
// program written for CLMonitor and CLLocationUpdate builds against this module with its import
// changed from `CoreLocation` to `LocusCoreLocation`.

public typealias CLLocationDegrees = Double
public typealias CLLocationDistance = Double
public typealias CLLocationAccuracy = Double
public typealias CLLocationSpeed = Double
public typealias CLLocationSpeedAccuracy = Double
public typealias CLLocationDirection = Double
public typealias CLLocationDirectionAccuracy = Double
public typealias CLBeaconMajorValue = UInt16
public typealias CLBeaconMinorValue = UInt16
public typealias CLLocationCoordinate2D = Coordinate

/// Core Location's accuracy constants (metres; the negative ones are its markers for the tiers
/// that are not distances).
public let kCLLocationAccuracyBestForNavigation: CLLocationAccuracy = -2
public let kCLLocationAccuracyBest: CLLocationAccuracy = -1
public let kCLLocationAccuracyNearestTenMeters: CLLocationAccuracy = 10
public let kCLLocationAccuracyHundredMeters: CLLocationAccuracy = 100
public let kCLLocationAccuracyKilometer: CLLocationAccuracy = 1_000
public let kCLLocationAccuracyThreeKilometers: CLLocationAccuracy = 3_000
/// Core Location's distance for "no filter".
public let kCLDistanceFilterNone: CLLocationDistance = -1

/// True for a latitude in -90...90 and a longitude in -180...180 (CLLocationCoordinate2DIsValid).
public func CLLocationCoordinate2DIsValid(_ coordinate: CLLocationCoordinate2D) -> Bool {
    (-90...90).contains(coordinate.latitude) && (-180...180).contains(coordinate.longitude)
}

/// Core Location's authorization diagnostics on an event or an update. A gateway has no user to
/// ask, no restriction profile, no in-use requirement and no service session to hold: each is
/// false. The agent's access rules refuse a program when it connects instead (docs/access.md).
public protocol CLAuthorizationDiagnostics {}

extension CLAuthorizationDiagnostics {
    public var authorizationDenied: Bool { false }
    public var authorizationDeniedGlobally: Bool { false }
    public var authorizationRestricted: Bool { false }
    public var authorizationRequestInProgress: Bool { false }
    public var insufficientlyInUse: Bool { false }
    public var serviceSessionRequired: Bool { false }
}

/// Where the port finds the agent: `LOCUS_STATE_DIRECTORY` when set, else the default state
/// directory (`/var/lib/locus`). Core Location's calls name no daemon; this is the one setting.
enum Agent {
    static var stateDirectory: String {
        ProcessInfo.processInfo.environment["LOCUS_STATE_DIRECTORY"] ?? Monitor.defaultStateDirectory
    }
}

/// A location as Core Location gives it: every value a GNSS fix has, with Core Location's
/// conventions for what is not known (a negative accuracy marks its value invalid).
public final class CLLocation: Sendable, CustomStringConvertible {
    public let coordinate: CLLocationCoordinate2D
    /// Metres above mean sea level; valid when `verticalAccuracy` is not negative.
    public let altitude: CLLocationDistance
    /// Metres above the WGS84 ellipsoid (the receiver's MSL altitude plus its geoid separation);
    /// valid when `verticalAccuracy` is not negative.
    public let ellipsoidalAltitude: CLLocationDistance
    /// About one sigma, metres; -1 when unknown (the coordinate is then not to be trusted).
    public let horizontalAccuracy: CLLocationAccuracy
    /// About one sigma, metres (the receiver's altitude sigma, or its VDOP × 5 m); -1 when the
    /// fix has no altitude or the receiver gave neither, and the altitudes are then invalid.
    public let verticalAccuracy: CLLocationAccuracy
    /// Metres per second over ground; -1 when unknown.
    public let speed: CLLocationSpeed
    /// -1: a GNSS receiver's NMEA gives no speed accuracy.
    public let speedAccuracy: CLLocationSpeedAccuracy
    /// Degrees clockwise from true north; -1 when unknown.
    public let course: CLLocationDirection
    /// -1: a GNSS receiver's NMEA gives no course accuracy.
    public let courseAccuracy: CLLocationDirectionAccuracy
    public let timestamp: Date
    /// Where the location came from: `isSimulatedBySoftware` when the agent's receiver is
    /// simulated (the simulated board, a feed playing NMEA); nil for a location made by the
    /// program.
    public let sourceInformation: CLLocationSourceInformation?

    public convenience init(latitude: CLLocationDegrees, longitude: CLLocationDegrees) {
        self.init(coordinate: CLLocationCoordinate2D(latitude: latitude, longitude: longitude), altitude: 0, horizontalAccuracy: 0,
                  verticalAccuracy: -1, timestamp: Date())
    }

    public init(coordinate: CLLocationCoordinate2D, altitude: CLLocationDistance, horizontalAccuracy: CLLocationAccuracy,
                verticalAccuracy: CLLocationAccuracy, course: CLLocationDirection = -1, courseAccuracy: CLLocationDirectionAccuracy = -1,
                speed: CLLocationSpeed = -1, speedAccuracy: CLLocationSpeedAccuracy = -1, timestamp: Date,
                ellipsoidalAltitude: CLLocationDistance? = nil, sourceInformation: CLLocationSourceInformation? = nil) {
        self.sourceInformation = sourceInformation
        self.coordinate = coordinate
        self.altitude = altitude
        self.ellipsoidalAltitude = ellipsoidalAltitude ?? altitude
        self.horizontalAccuracy = horizontalAccuracy
        self.verticalAccuracy = verticalAccuracy
        self.speed = speed
        self.speedAccuracy = speedAccuracy
        self.course = course
        self.courseAccuracy = courseAccuracy
        self.timestamp = timestamp
    }

    /// From LocusMonitor's location, with Core Location's -1 for what the fix lacks.
    convenience init(_ location: Location) {
        self.init(coordinate: location.coordinate, altitude: location.altitude ?? 0, horizontalAccuracy: location.horizontalAccuracy ?? -1,
                  verticalAccuracy: location.altitude == nil ? -1 : location.verticalAccuracy ?? -1, course: location.course ?? -1,
                  speed: location.speed ?? -1, timestamp: location.timestamp,
                  ellipsoidalAltitude: location.ellipsoidalAltitude ?? location.altitude ?? 0,
                  sourceInformation: CLLocationSourceInformation(softwareSimulationState: location.isSimulated, andExternalAccessoryState: false))
    }

    /// The length of the geodesic between the two coordinates on the WGS84 ellipsoid, metres
    /// (Karney's method, the agent's own: exact to well under a millimetre).
    public func distance(from location: CLLocation) -> CLLocationDistance {
        Geodesy.distanceM(coordinate.latitude, coordinate.longitude, location.coordinate.latitude, location.coordinate.longitude)
    }

    public var description: String {
        "<\(coordinate.latitude),\(coordinate.longitude)> +/- \(horizontalAccuracy)m, speed \(speed) m/s, course \(course) @ \(timestamp)"
    }
}

/// CLLocationSourceInformation: whether a location was simulated in software (the agent's
/// receiver is simulated) or came from an accessory (a gateway's receiver is its own: false).
public final class CLLocationSourceInformation: Sendable {
    public let isSimulatedBySoftware: Bool
    public let isProducedByAccessory: Bool

    public init(softwareSimulationState isSoftware: Bool, andExternalAccessoryState wasProcessedByAccessory: Bool) {
        isSimulatedBySoftware = isSoftware
        isProducedByAccessory = wasProcessedByAccessory
    }
}
