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
    var requestMember: (key: String, value: Any) { get }
    /// Its `settings` member, if it sets any.
    var requestSettings: [String: Any]? { get }
}

extension MonitoringCondition {
    public var requestSettings: [String: Any]? { nil }
}

/// `CLMonitor.CircularGeographicCondition`: inside a circle around `center`, `radius` metres.
public struct CircularGeographicCondition: MonitoringCondition, Equatable {
    public var center: Coordinate
    public var radius: Double

    public init(center: Coordinate, radius: Double) {
        self.center = center
        self.radius = radius
    }

    public var requestMember: (key: String, value: Any) {
        ("circle", ["lat": center.latitude, "lon": center.longitude, "radius": radius])
    }
}

/// Inside a polygon whose edges are geodesics (a Locus condition beyond Core Location's
/// circles): `vertices` in order, either way round, not repeating the first at the end (a ring
/// that does is taken once). The agent refuses a ring that crosses itself, has fewer than three
/// vertices or an edge beyond 10,000 km; over the control socket a request is at most 4,096
/// bytes, about 150 vertices (larger shapes go in the site file).
public struct PolygonCondition: MonitoringCondition, Equatable {
    public var vertices: [Coordinate]

    public init(vertices: [Coordinate]) { self.vertices = vertices }

    public var requestMember: (key: String, value: Any) {
        ("polygon", vertices.map { [$0.latitude, $0.longitude] })
    }
}

/// Within `width / 2` metres of a path of geodesic segments (a route to keep to).
public struct CorridorCondition: MonitoringCondition, Equatable {
    public var path: [Coordinate]
    public var width: Double

    public init(path: [Coordinate], width: Double) {
        self.path = path
        self.width = width
    }

    public var requestMember: (key: String, value: Any) {
        ("corridor", ["path": path.map { [$0.latitude, $0.longitude] }, "width": width])
    }
}

/// A phone or watch that advertises from rotating private addresses, by its name in the site's
/// phones file (which holds its identity resolving key): satisfied while the gateway hears it,
/// as a beacon condition is (a Locus condition beyond Core Location's).
public struct PhoneCondition: MonitoringCondition, Equatable {
    public var name: String
    /// As for beacons: satisfied only when the phone is at least this near.
    public var proximity: Proximity?

    public init(name: String, proximity: Proximity? = nil) {
        self.name = name
        self.proximity = proximity
    }

    public var requestMember: (key: String, value: Any) { ("phone", name) }

    public var requestSettings: [String: Any]? {
        proximity.map { ["proximity": $0.rawValue] }
    }
}

/// How near a beacon must be for its condition to be satisfied (CLProximity's ranges, estimated
/// from the filtered RSSI: immediate < 0.5 m, near < 3 m, far beyond).
public enum Proximity: String, Sendable {
    case immediate, near, far
}

/// `CLMonitor.BeaconIdentityCondition`: a UUID, optionally narrowed by major, then minor.
public struct BeaconIdentityCondition: MonitoringCondition, Equatable {
    public var uuid: UUID
    public var major: UInt16?
    public var minor: UInt16?
    /// The proximity requirement the site file's `proximity` key sets: satisfied only when the
    /// beacon is at least this near. nil (the default): any sighting satisfies it.
    public var proximity: Proximity?

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

    /// Any of the identity parts with a proximity requirement: `BeaconIdentityCondition(uuid: u,
    /// major: 7, proximity: .near)`.
    public init(uuid: UUID, major: UInt16? = nil, minor: UInt16? = nil, proximity: Proximity?) {
        precondition(minor == nil || major != nil, "a minor needs its major")
        self.uuid = uuid
        self.major = major
        self.minor = minor
        self.proximity = proximity
    }

    public var requestMember: (key: String, value: Any) {
        var beacon: [String: Any] = ["uuid": uuid.uuidString]
        if let major { beacon["major"] = Int(major) }
        if let minor { beacon["minor"] = Int(minor) }
        return ("beacon", beacon)
    }

    /// The condition's settings for the `add` request (only what differs from the defaults).
    public var requestSettings: [String: Any]? {
        proximity.map { ["proximity": $0.rawValue] }
    }
}

/// The concrete beacon a wildcard condition was satisfied by (an event's refinement).
public struct BeaconIdentity: Sendable, Equatable {
    public var uuid: UUID
    public var major: UInt16
    public var minor: UInt16
}
