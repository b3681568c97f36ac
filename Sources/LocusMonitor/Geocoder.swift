import Foundation

/// A place of the gateway's place index, as CLPlacemark describes one: a GeoNames populated place
/// ("Bremerhaven", locality Bremerhaven, administrative area Bremen, DE) or one of the site's own
/// places ("Dock 3": `isSitePlace`, no locality or country).
public struct Placemark: Sendable, Equatable {
    /// The place's name (CLPlacemark.name).
    public var name: String
    /// The town or city: the name of a gazetteer place; nil for a site's place.
    public var locality: String?
    /// The state or region (GeoNames' admin1 name).
    public var administrativeArea: String?
    /// ISO 3166-1 alpha-2, "DE"; nil for a site's place.
    public var isoCountryCode: String?
    /// The place's time zone identifier, "Europe/Berlin" (TimeZone(identifier:) takes it).
    public var timeZone: String?
    public var latitude: Double
    public var longitude: Double
    /// People living there (0 for a site's place or when GeoNames has no figure).
    public var population: Int
    /// GeoNames' id of a gazetteer place.
    public var geonameID: Int?
    /// Geodesic distance, metres: from the place to the point asked about (reverse), or from the
    /// gateway's last fix (forward, when there is one).
    public var distance: Double?
    /// Where the point asked about lies as seen from the place, degrees clockwise from north
    /// (reverse only).
    public var bearing: Double?
    /// One of the site's own places (its places file), not a gazetteer's.
    public var isSitePlace: Bool
    /// "2.1 km NE of Bremerhaven, Bremen, DE" (reverse only).
    public var text: String?

    public var coordinate: Coordinate { Coordinate(latitude: latitude, longitude: longitude) }

    /// From the agent's place object (`PlaceJSON`).
    init?(_ object: [String: Any]) {
        guard let name = object["name"] as? String, let latitude = object["latitude"] as? Double,
              let longitude = object["longitude"] as? Double else { return nil }
        self.name = name
        isSitePlace = object["site"] as? Bool ?? false
        locality = isSitePlace ? nil : name
        administrativeArea = object["admin1"] as? String
        isoCountryCode = object["country"] as? String
        timeZone = object["time_zone"] as? String
        self.latitude = latitude
        self.longitude = longitude
        population = object["population"] as? Int ?? 0
        geonameID = object["geonameid"] as? Int
        distance = object["distance_m"] as? Double
        bearing = object["bearing_deg"] as? Double
        text = object["text"] as? String
    }
}

/// CLGeocoder for Swift programs on a Locus gateway: offline geocoding by the running agent, from
/// the place index its site names (`[geocoding]`), through the control socket.
///
///     let geocoder = Geocoder()
///     if let place = try await geocoder.reverseGeocodeLocation(latitude: 53.566, longitude: 8.596).first {
///         print(place.text ?? place.name)            // 1.9 km NE of Bremerhaven, Bremen, DE
///     }
///     let springfields = try await geocoder.geocodeAddressString("Springfield, US")
///
/// Unlike CLGeocoder, nothing found is an empty array, not an error. A site without a place
/// index throws `MonitorError` `unavailable`; a refused request (no `positions` grant, as
/// `requestLocation`) throws `permission_denied`. Each call is one request on a connection of its
/// own.
public struct Geocoder: Sendable {
    /// Which places a reverse lookup may answer with.
    public enum Scope: String, Sendable {
        /// The gazetteer's and the site's.
        case any
        /// The gazetteer's populated places.
        case populated
        /// The site's own places.
        case site
    }

    public let stateDirectory: String

    public init(stateDirectory: String = Monitor.defaultStateDirectory) {
        self.stateDirectory = stateDirectory
    }

    /// The place nearest a point (at most one), within the site's `[geocoding] max_distance` and
    /// among its `scope`'s places unless `within` (metres) or `scope` say otherwise.
    public func reverseGeocodeLocation(latitude: Double, longitude: Double, within: Double? = nil, scope: Scope? = nil) async throws -> [Placemark] {
        var members: [String: Any] = ["op": "reverse_geocode", "latitude": latitude, "longitude": longitude]
        if let within { members["within"] = within }
        if let scope { members["scope"] = scope.rawValue }
        let reply = try await request(members)
        return (reply["place"] as? [String: Any]).flatMap(Placemark.init).map { [$0] } ?? []
    }

    /// The place nearest a location (CLGeocoder.reverseGeocodeLocation(_:)).
    public func reverseGeocodeLocation(_ location: Location) async throws -> [Placemark] {
        try await reverseGeocodeLocation(latitude: location.coordinate.latitude, longitude: location.coordinate.longitude)
    }

    /// The places a name names: "Bremerhaven", "Paris, FR", "Springfield, Illinois", "Dock 3"
    /// (case, accents and alternate names do not matter; a country code or region after a comma
    /// narrows it), the site's own places first, then by population, then nearest the gateway's
    /// last fix; at most `limit` (1...50).
    public func geocodeAddressString(_ address: String, limit: Int = 10) async throws -> [Placemark] {
        let reply = try await request(["op": "geocode", "name": address, "limit": limit])
        return (reply["places"] as? [[String: Any]] ?? []).compactMap(Placemark.init)
    }

    private func request(_ members: [String: Any]) async throws -> [String: Any] {
        let channel = try ControlChannel.open(stateDirectory: stateDirectory, for: .reading)
        defer { channel.hangUp() }
        return try await channel.request(members)
    }
}
