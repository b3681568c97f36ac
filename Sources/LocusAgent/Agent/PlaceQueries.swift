import LocusCore
import LocusDevices

/// The control protocol's geocoding operations (docs/geocoding.md): `reverse_geocode`,
/// `geocode`, and the circle of an `add` centred on a place. It holds what they use and nothing
/// else: the place index of the configuration the agent started with (its mapping lives as long as
/// the agent) with the site's defaults, a name search with its folding buffers and the candidate
/// buffer of a `geocode` reply, both allocated once. A site without a place index answers these
/// with `unavailable`. It answers on the connections the loop passes, like `ControlOperations`.
final class PlaceQueries {
    typealias Request = ControlConnections.Request

    static let noPlaceIndex = "no place index: add [geocoding] to the site file"

    /// The place index with the site's defaults (nil: the site has no index).
    private let places: PlaceLabels?
    private let indexPath: String
    private let search = PlaceNameSearch()
    /// A `geocode` reply's places (allocated once: `ControlProtocol.geocodeLimit`).
    private let candidates: UnsafeMutableBufferPointer<PlaceCandidate>

    init(_ config: LoadedConfig) {
        places = config.placeLookup
        indexPath = config.places?.path ?? ""
        candidates = .allocate(capacity: ControlProtocol.geocodeLimit)
        candidates.initialize(repeating: PlaceCandidate(place: 0, distanceM: .nan))
    }

    deinit { candidates.deallocate() }

    /// `reverse_geocode`: the place nearest a point, within `withinM` among `scope`'s places (the
    /// site's `[geocoding]` when the request does not say), or `"place": null`.
    func reverseGeocode(_ request: Request, _ connections: ControlConnections, latitude: Double, longitude: Double, withinM: Double?,
                        scope: PlaceScope?) {
        guard let places else { return connections.refuse(request, .unavailable, Self.noPlaceIndex) }
        let match = places.index.nearest(to: GeoPoint(latitude: latitude, longitude: longitude), within: withinM ?? places.maximumDistanceM,
                                         scope: scope ?? places.scope)
        connections.send(request.slot) { line in ControlReply.place(request.id, match, in: places.index, into: &line) }
    }

    /// `geocode`: the places a name names, the site's first, then by population, then by
    /// nearness to `near` (the last fix as clients may see it), the best `limit`.
    func geocode(_ request: Request, _ connections: ControlConnections, _ name: String, limit: Int, near: GeoPoint?) {
        guard let places else { return connections.refuse(request, .unavailable, Self.noPlaceIndex) }
        let room = UnsafeMutableBufferPointer(rebasing: candidates[0..<min(limit, candidates.count)])
        var text = name
        let result = text.withUTF8 { bytes in search.search(UnsafeRawBufferPointer(bytes), in: places.index, near: near, into: room) }
        if let problem = result.problem { return connections.refuse(request, .badArgument, "'name' is \(problem)") }
        connections.send(request.slot) { line in
            ControlReply.places(request.id, total: result.total, UnsafeMutableBufferPointer(rebasing: room[0..<result.written]), in: places.index,
                                into: &line)
        }
    }

    /// The circle of an `add` centred on a place, found as the site file's are; nil when the
    /// name names no place or several (refused with the nearest spellings or the candidates).
    func circle(_ request: Request, _ connections: ControlConnections, _ name: String, radiusM: Double) -> Condition? {
        guard let places else {
            connections.refuse(request, .unavailable, Self.noPlaceIndex)
            return nil
        }
        let resolution = places.index.resolve(name, search: search)
        guard case .found(let place) = resolution else {
            let problem = resolution.problem(name, index: places.index, indexPath: indexPath, search: search) ?? ""
            let code: ControlError.Code
            if case .notFound = resolution { code = .notFound } else { code = .badArgument }
            connections.refuse(request, code, "'circle.place' \"\(name)\" \(problem)")
            return nil
        }
        let record = places.index.record(place)
        AgentLog.info("locus: control: place \"\(name)\" is \(places.index.displayName(place)) (\(record.latitude), \(record.longitude))")
        return .circle(CircularGeographicCondition(latitude: record.latitude, longitude: record.longitude, radiusM: radiusM))
    }
}
