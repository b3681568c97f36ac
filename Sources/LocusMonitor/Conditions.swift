import Foundation

/// A position in WGS84 degrees (CLLocationCoordinate2D).
public struct Coordinate: Sendable, Equatable {
    public var latitude: Double
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }
}

/// What a monitor can watch (CLMonitor's `CLCondition`).
public protocol MonitoringCondition: Sendable {
    /// The condition as the control protocol's `add` request carries it.
    var requestMember: (key: String, value: [String: Any]) { get }
}

/// `CLMonitor.CircularGeographicCondition`: inside a circle around `center`, `radius` metres.
public struct CircularGeographicCondition: MonitoringCondition, Equatable {
    public var center: Coordinate
    public var radius: Double

    public init(center: Coordinate, radius: Double) {
        self.center = center
        self.radius = radius
    }

    public var requestMember: (key: String, value: [String: Any]) {
        ("circle", ["lat": center.latitude, "lon": center.longitude, "radius": radius])
    }
}

/// `CLMonitor.BeaconIdentityCondition`: a UUID, optionally narrowed by major, then minor.
public struct BeaconIdentityCondition: MonitoringCondition, Equatable {
    public var uuid: UUID
    public var major: UInt16?
    public var minor: UInt16?

    public init(uuid: UUID) { self.uuid = uuid }

    public init(uuid: UUID, major: UInt16) {
        self.uuid = uuid
        self.major = major
    }

    public init(uuid: UUID, major: UInt16, minor: UInt16) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
    }

    public var requestMember: (key: String, value: [String: Any]) {
        var beacon: [String: Any] = ["uuid": uuid.uuidString]
        if let major { beacon["major"] = Int(major) }
        if let minor { beacon["minor"] = Int(minor) }
        return ("beacon", beacon)
    }
}

/// The concrete beacon a wildcard condition was satisfied by (an event's refinement).
public struct BeaconIdentity: Sendable, Equatable {
    public var uuid: UUID
    public var major: UInt16
    public var minor: UInt16
}
