/// A place as people read it: "2.1 km NE of Bremerhaven, Bremen, DE", "at Dock 3",
/// "350 m SW of Yard gate". The direction is where the point lies as seen from the place (8
/// compass points); the administrative area is left out when it repeats the name, the country
/// when the place has none (a site's own places).
///
/// Distances: under 1 km in whole metres, under 10 km in tenths of a kilometre, then whole
/// kilometres; under 10 m the point is "at" the place.
public enum PlaceText {
    public static let atPlaceM = 10.0

    /// The text into `line`: as plain text, or, with `quoted`, as the parts of a JSON string
    /// already opened with `beginString` (names escaped, the rest is ASCII that needs none).
    @_noAllocation
    public static func write(_ match: PlaceMatch, in index: PlaceIndex, into line: inout JSONWriter, quoted: Bool = false) {
        let distance = match.distanceM
        if distance < atPlaceM {
            line.text("at ")
        } else {
            let metres = Int64(distance + 0.5)
            if metres < 1_000 {
                line.text(metres)
                line.text(" m ")
            } else if distance < 9_950 {
                line.text(distance / 1_000, decimals: 1)
                line.text(" km ")
            } else {
                line.text(Int64(distance / 1_000 + 0.5))
                line.text(" km ")
            }
            compass(match.bearingDeg, into: &line)
            line.text(" of ")
        }
        writeName(match.place, in: index, into: &line, quoted: quoted)
    }

    /// "Bremerhaven, Bremen, DE": the name, the administrative area unless it repeats the name,
    /// the country code.
    @_noAllocation
    public static func writeName(_ place: Int, in index: PlaceIndex, into line: inout JSONWriter, quoted: Bool) {
        let record = index.record(place)
        let name = index.name(of: record)
        part(name, into: &line, quoted: quoted)
        let admin1 = index.admin1(of: record)
        if !admin1.isEmpty && !PlaceIndex.sameBytes(admin1, name) {
            line.text(", ")
            part(admin1, into: &line, quoted: quoted)
        }
        if record.hasCountry {
            line.text(", ")
            let (first, second) = record.countryBytes
            withUnsafeBytes(of: (first, second)) { part($0, into: &line, quoted: quoted) }
        }
    }

    @_noAllocation
    static func part(_ bytes: UnsafeRawBufferPointer, into line: inout JSONWriter, quoted: Bool) {
        if quoted { line.stringPart(bytes) } else { line.append(bytes) }
    }

    /// N, NE, E, SE, S, SW, W or NW for a bearing in degrees.
    @_noAllocation
    public static func compass(_ bearingDeg: Double, into line: inout JSONWriter) {
        var sector = Int((bearingDeg + 22.5) / 45)
        sector = ((sector % 8) + 8) % 8
        switch sector {
        case 0: line.text("N")
        case 1: line.text("NE")
        case 2: line.text("E")
        case 3: line.text("SE")
        case 4: line.text("S")
        case 5: line.text("SW")
        case 6: line.text("W")
        default: line.text("NW")
        }
    }
}

/// A place as a JSON object, the same in `locus geo`, the control operations, the events'
/// `place` and the uplink:
///
///     {"name":"Bremerhaven","admin1":"Bremen","country":"DE","time_zone":"Europe/Berlin",
///      "population":118610,"geonameid":2944368,"site":false,"latitude":53.55357,
///      "longitude":8.57553,"distance_m":2104.3871,"bearing_deg":44.1052,
///      "text":"2.1 km NE of Bremerhaven, Bremen, DE"}
///
/// `admin1`, `country`, `time_zone` and `geonameid` appear when the place has them; `distance_m`
/// and `bearing_deg` (from the place to the point asked about) and `text` for a reverse lookup,
/// `distance_m` alone for a forward one given a point to rank by.
public enum PlaceJSON {
    @_noAllocation
    public static func write(_ place: Int, in index: PlaceIndex, distanceM: Double, bearingDeg: Double, into writer: inout JSONWriter) {
        let record = index.record(place)
        writer.beginObject()
        writer.key("name")
        writer.string(bytes: index.name(of: record))
        let admin1 = index.admin1(of: record)
        if !admin1.isEmpty {
            writer.key("admin1")
            writer.string(bytes: admin1)
        }
        if record.hasCountry {
            let (first, second) = record.countryBytes
            writer.key("country")
            withUnsafeBytes(of: (first, second)) { writer.string(bytes: $0) }
        }
        let timeZone = index.timeZone(of: record)
        if !timeZone.isEmpty {
            writer.key("time_zone")
            writer.string(bytes: timeZone)
        }
        writer.integer("population", Int64(record.population))
        if record.geonameID != 0 { writer.integer("geonameid", Int64(record.geonameID)) }
        writer.boolean("site", record.isSite)
        writer.number("latitude", record.latitude, decimals: 7)
        writer.number("longitude", record.longitude, decimals: 7)
        if distanceM.isFinite { writer.number("distance_m", distanceM, decimals: 4) }
        if bearingDeg.isFinite {
            writer.number("bearing_deg", bearingDeg, decimals: 4)
            writer.beginString("text")
            PlaceText.write(PlaceMatch(place: place, distanceM: distanceM, bearingDeg: bearingDeg), in: index, into: &writer, quoted: true)
            writer.endString()
        }
        writer.endObject()
    }

    /// A reverse lookup's answer.
    @_noAllocation
    public static func write(_ match: PlaceMatch, in index: PlaceIndex, into writer: inout JSONWriter) {
        write(match.place, in: index, distanceM: match.distanceM, bearingDeg: match.bearingDeg, into: &writer)
    }
}

extension PlaceIndex {
    @_noAllocation
    static func sameBytes(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool { compare(a, b) == 0 }
}
