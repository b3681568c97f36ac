/// The place a position is labelled with, for renderers that annotate (`[geocoding] annotate`):
/// the nearest place of the index within `maximumDistanceM` among `scope`'s places. A renderer
/// given labels adds `"place": {PlaceJSON}` to the objects that carry a position (events of a
/// fix or a transit, visits, live updates, located replies) and the text "2.1 km NE of
/// Bremerhaven, Bremen, DE" to an event's explanation; given nil, it writes what it always did.
///
/// The label is computed when the object is rendered, from the coordinates it shows (after
/// `[privacy]`): nothing of it is logged, so the log's format does not change, and a coarsened
/// position gets the place of the coarsened position.
///
/// A value type over the mapped index's bytes (no references, nothing retained): the mapping
/// must outlive every copy (the agent keeps it open from start to exit). Lookups allocate
/// nothing.
public struct PlaceLabels {
    public let index: PlaceIndex
    public let maximumDistanceM: Double
    public let scope: PlaceScope

    /// The most a `"place":{...}` member may take, name and area escaped: what the renderers'
    /// fixed buffers leave room for. The agent refuses to annotate with an index holding a place
    /// whose member could be larger (`largestMember`).
    public static let maximumMemberBytes = 1_024

    public init(index: PlaceIndex, maximumDistanceM: Double, scope: PlaceScope) {
        self.index = index
        self.maximumDistanceM = maximumDistanceM
        self.scope = scope
    }

    /// Labels over `index` with the site's `[geocoding]` max_distance and scope.
    public init(index: PlaceIndex, settings: SiteConfig.Geocoding) {
        self.init(index: index, maximumDistanceM: settings.maximumDistanceM, scope: settings.scope)
    }

    /// The place for a position, or nil (none within reach, or no position: NaN).
    @_noAllocation
    public func match(latitude: Double, longitude: Double) -> PlaceMatch? {
        guard latitude.isFinite, longitude.isFinite else { return nil }
        return index.nearest(to: GeoPoint(latitude: latitude, longitude: longitude), within: maximumDistanceM, scope: scope)
    }

    /// `"place":{...}` into the open object `line`, when a place is within reach.
    @_noAllocation
    public func writeMember(latitude: Double, longitude: Double, into line: inout JSONWriter) {
        guard let match = match(latitude: latitude, longitude: longitude) else { return }
        line.key("place")
        PlaceJSON.write(match, in: index, into: &line)
    }

    /// ", 2.1 km NE of Bremerhaven, Bremen, DE" into a text line, when a place is within reach.
    @_noAllocation
    public func writeText(latitude: Double, longitude: Double, into line: inout JSONWriter) {
        guard let match = match(latitude: latitude, longitude: longitude) else { return }
        line.text(", ")
        PlaceText.write(match, in: index, into: &line)
    }

    /// An upper bound of the bytes `writeMember` writes for `place` (with its comma): the fixed
    /// members at their longest, the name and area twice (the object's and the text's) and the
    /// time zone, each escaped.
    public static func memberBound(_ place: Int, in index: PlaceIndex) -> Int {
        let record = index.record(place)
        let name = JSONWriter.escapedCount(index.name(of: record))
        let admin1 = JSONWriter.escapedCount(index.admin1(of: record))
        let timeZone = JSONWriter.escapedCount(index.timeZone(of: record))
        return fixedMemberBytes + 2 * (name + admin1) + timeZone
    }

    /// Everything of a place member but its names: keys, quotes, separators and the longest
    /// numbers (",\"place\":{...\"text\":\"20004 km NW of , , XX\"}").
    static let fixedMemberBytes = 320

    /// The place whose member would be largest, and that bound: checked once when the index is
    /// opened for annotation (against `maximumMemberBytes`).
    public static func largestMember(in index: PlaceIndex) -> (place: Int, bytes: Int)? {
        var largest: (place: Int, bytes: Int)? = nil
        for place in 0..<index.placeCount {
            let bytes = memberBound(place, in: index)
            if bytes > (largest?.bytes ?? 0) { largest = (place, bytes) }
        }
        return largest
    }
}
