import Foundation
import LocusMonitor

// Core Location's service types over the agent: sessions, visits, beacons, placemarks and the
// geocoder.

/// CLActivityType: what the device is used for; the receiver's platform model follows it while
/// updates run (the most dynamic of the site's and the open streams').
public enum CLActivityType: Int, Sendable {
    case other = 1, automotiveNavigation, fitness, otherNavigation, airborne

    var configuration: LocationUpdate.LiveConfiguration {
        switch self {
        case .other: .default
        case .automotiveNavigation: .automotiveNavigation
        case .fitness: .fitness
        case .otherNavigation: .otherNavigation
        case .airborne: .airborne
        }
    }
}

/// The agent's tier for a CLLocationAccuracy: the coarsest whose accuracy is within it (Core
/// Location's negative markers and anything under 10 m are `best`).
func tier(_ accuracy: CLLocationAccuracy) -> LocationUpdate.Accuracy {
    switch accuracy {
    case ..<kCLLocationAccuracyNearestTenMeters: .best
    case ..<kCLLocationAccuracyHundredMeters: .nearestTenMeters
    case ..<kCLLocationAccuracyKilometer: .hundredMeters
    case ..<kCLLocationAccuracyThreeKilometers: .kilometer
    default: .threeKilometers
    }
}

/// CLServiceSession: while it lasts, the agent keeps the radios ready for this program. On a
/// gateway nothing asks a user, so the authorization requirement is only recorded; what the
/// session holds is the radios: at the site's tier, or at `best` for a session asking full
/// accuracy (`fullAccuracyPurposeKey`), or at the tier a Locus program names (`accuracy:`).
/// The hold is taken again when the agent restarts; `invalidate()` or releasing the session
/// lets the radios go.
public final class CLServiceSession: Sendable {
    public enum AuthorizationRequirement: Sendable { case none, whenInUse, always }

    public let authorizationRequirement: AuthorizationRequirement
    private let session: ServiceSession

    public convenience init(authorization: AuthorizationRequirement) {
        self.init(authorization: authorization, tier: nil)
    }

    public convenience init(authorization: AuthorizationRequirement, fullAccuracyPurposeKey: String) {
        self.init(authorization: authorization, tier: .best)
    }

    /// Not in Core Location: hold the radios at the tier `accuracy` implies.
    public convenience init(authorization: AuthorizationRequirement, accuracy: CLLocationAccuracy) {
        self.init(authorization: authorization, tier: tier(accuracy))
    }

    private init(authorization: AuthorizationRequirement, tier: LocationUpdate.Accuracy?) {
        authorizationRequirement = authorization
        session = ServiceSession(accuracy: tier, stateDirectory: Agent.stateDirectory)
    }

    public func invalidate() { session.invalidate() }

    /// Not in Core Location: whether the agent holds the radios for this session now, and why
    /// not when it refused (see `ServiceSession`).
    public var isHeld: Bool { session.isHeld }
    public var underlyingError: MonitorError? { session.error }
    public func waitUntilHeld(timeout: TimeInterval = 10) async -> Bool { await session.waitUntilHeld(timeout: timeout) }
}

/// CLBackgroundActivitySession: on a phone it keeps a backgrounded app's updates coming. A
/// gateway program has no foreground to leave: its streams run whether or not it holds one, so
/// the session holds nothing and `invalidate()` changes nothing. Kept so that Core Location code
/// that creates one builds and behaves as it would in the foreground.
public final class CLBackgroundActivitySession: Sendable {
    public init() {}
    public func invalidate() {}
}

/// CLVisit: a place the device stayed at. `departureDate` is `Date.distantFuture` until it left.
public final class CLVisit: Sendable {
    public let arrivalDate: Date
    public let departureDate: Date
    public let coordinate: CLLocationCoordinate2D
    /// The stay's radius, metres.
    public let horizontalAccuracy: CLLocationAccuracy

    init(_ visit: LocationUpdate.Visit) {
        arrivalDate = visit.arrivalDate
        departureDate = visit.departureDate
        coordinate = visit.coordinate
        horizontalAccuracy = visit.horizontalAccuracy
    }
}

/// CLBeaconIdentityConstraint: a UUID, optionally narrowed by major, then minor.
public typealias CLBeaconIdentityConstraint = BeaconIdentityConstraint

/// CLProximity.
public enum CLProximity: Int, Sendable {
    case unknown, immediate, near, far
}

/// CLBeacon: a beacon found by ranging.
public final class CLBeacon: Sendable {
    public let uuid: UUID
    public let major: NSNumber
    public let minor: NSNumber
    public let proximity: CLProximity
    /// Metres, -1 when unknown.
    public let accuracy: CLLocationAccuracy
    /// The filtered RSSI, dBm; 0 when unknown.
    public let rssi: Int
    public let timestamp: Date

    init(_ beacon: Beacon) {
        uuid = beacon.uuid
        major = NSNumber(value: beacon.major)
        minor = NSNumber(value: beacon.minor)
        proximity = switch beacon.proximity {
        case .immediate?: .immediate
        case .near?: .near
        case .far?: .far
        case nil: .unknown
        }
        accuracy = beacon.accuracy
        rssi = beacon.rssi
        timestamp = beacon.timestamp
    }
}

/// CLPlacemark from the agent's place index (its site places and populated places).
public final class CLPlacemark: Sendable {
    public let name: String?
    public let locality: String?
    public let administrativeArea: String?
    public let isoCountryCode: String?
    public let location: CLLocation?
    public let timeZone: TimeZone?

    init(_ placemark: Placemark) {
        name = placemark.name
        locality = placemark.locality
        administrativeArea = placemark.administrativeArea
        isoCountryCode = placemark.isoCountryCode
        location = CLLocation(latitude: placemark.latitude, longitude: placemark.longitude)
        timeZone = placemark.timeZone.flatMap(TimeZone.init(identifier:))
    }
}

/// CLGeocoder over the agent's offline place index (`[geocoding]`): no network.
public final class CLGeocoder: Sendable {
    public typealias CompletionHandler = @Sendable ([CLPlacemark]?, (any Error)?) -> Void
    private let geocoder = Geocoder(stateDirectory: Agent.stateDirectory)

    public init() {}

    public func reverseGeocodeLocation(_ location: CLLocation) async throws -> [CLPlacemark] {
        try await geocoder.reverseGeocodeLocation(latitude: location.coordinate.latitude, longitude: location.coordinate.longitude)
            .map(CLPlacemark.init)
    }

    public func geocodeAddressString(_ addressString: String) async throws -> [CLPlacemark] {
        try await geocoder.geocodeAddressString(addressString).map(CLPlacemark.init)
    }

    public func reverseGeocodeLocation(_ location: CLLocation, completionHandler: @escaping CompletionHandler) {
        Task { CLGeocoder.complete(await Result(catching: { try await self.reverseGeocodeLocation(location) }), completionHandler) }
    }

    public func geocodeAddressString(_ addressString: String, completionHandler: @escaping CompletionHandler) {
        Task { CLGeocoder.complete(await Result(catching: { try await self.geocodeAddressString(addressString) }), completionHandler) }
    }

    private static func complete(_ result: Result<[CLPlacemark], any Error>, _ handler: CompletionHandler) {
        switch result {
        case .success(let placemarks): handler(placemarks, nil)
        case .failure(let error): handler(nil, error)
        }
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
