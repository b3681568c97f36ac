/// One place as `locus geo index` reads it, before it goes into an index.
public struct GazetteerPlace: Sendable {
    public var geonameID: UInt32 = 0
    public var name: [UInt8]
    /// Every other name the place is found by: GeoNames' ASCII name and alternate names, or a
    /// site place's aliases.
    public var alternateNames: [[UInt8]] = []
    public var latitude: Double
    public var longitude: Double
    public var featureClass: UInt8 = UInt8(ascii: "P")
    public var featureCode: [UInt8] = []
    /// Two ASCII letters, or empty.
    public var country: [UInt8] = []
    public var admin1Code: [UInt8] = []
    public var population: UInt32 = 0
    public var timeZone: [UInt8] = []
    public var isSite = false

    public init(name: [UInt8], latitude: Double, longitude: Double) {
        self.name = name
        self.latitude = latitude
        self.longitude = longitude
    }
}

/// The three kinds of file `locus geo index` takes, told apart by their rows:
///
/// - a GeoNames gazetteer (`cities15000.txt`, `cities1000.txt`, a country dump such as `DE.txt`):
///   19 tab-separated columns, as GeoNames documents them (geonameid, name, asciiname,
///   alternatenames, latitude, longitude, feature class, feature code, country code, cc2, admin1
///   code, admin2-4, population, elevation, dem, timezone, modification date);
/// - GeoNames' `admin1CodesASCII.txt`: `CC.code`, name, ASCII name, geonameid — the names of the
///   administrative areas the gazetteer's admin1 codes refer to;
/// - a site's own places: `name<TAB>latitude<TAB>longitude[<TAB>aliases, comma-separated]`, an
///   optional header row starting `name` (the first row, after any `#` comments), and `#`
///   comments. They become feature class `S`, rank before the gazetteer's places and are
///   searchable on their own (`PlaceScope.site`).
public enum GazetteerFile: Equatable, Sendable {
    case geonames
    case admin1
    case sitePlaces

    public struct Problem: Error, Equatable, Sendable, CustomStringConvertible {
        public var line: Int
        public var column: Int
        public var message: String
        public var description: String { "\(line):\(column): \(message)" }
    }

    /// The kind of file whose first row (not a comment, not blank) is `row`, or nil.
    public static func kind(ofRow row: [UInt8]) -> GazetteerFile? {
        let fields = row.split(separator: 0x09, omittingEmptySubsequences: false)
        switch fields.count {
        case 19: return .geonames
        case 4 where fields[0].count > 3 && fields[0][fields[0].startIndex + 2] == UInt8(ascii: ".") && number(fields[1]) == nil:
            return .admin1
        case 3, 4: return .sitePlaces
        default: return nil
        }
    }

    /// Reads every row of a file of this kind, calling `place` for each place or `admin1` for each
    /// area name; the first malformed row stops it with its line and column.
    public func read(_ text: [UInt8], place: (GazetteerPlace) -> Void,
                     admin1: ([UInt8], [UInt8]) -> Void) -> Problem? {
        var lineNumber = 0
        var lineStart = 0
        var rows = 0
        while lineStart < text.count {
            lineNumber += 1
            var lineEnd = lineStart
            while lineEnd < text.count && text[lineEnd] != 0x0A { lineEnd += 1 }
            var row = Array(text[lineStart..<lineEnd])
            if row.last == 0x0D { row.removeLast() }
            lineStart = lineEnd + 1
            if row.isEmpty || row[0] == UInt8(ascii: "#") { continue }
            rows += 1
            let fields = row.split(separator: 0x09, omittingEmptySubsequences: false).map { Array($0) }
            let result: Result<Void, Problem>
            switch self {
            case .geonames: result = Self.geonamesRow(fields, line: lineNumber).map(place)
            case .admin1: result = Self.admin1Row(fields, line: lineNumber).map { admin1($0.code, $0.name) }
            case .sitePlaces:
                // The header is the first row, after any comments.
                if rows == 1 && fields.first == Array("name".utf8) { continue }
                result = Self.siteRow(fields, line: lineNumber).map(place)
            }
            if case .failure(let problem) = result { return problem }
        }
        return nil
    }

    static func column(_ fields: [[UInt8]], _ index: Int) -> Int {
        var column = 1
        for field in fields.prefix(index) { column += field.count + 1 }
        return column
    }

    static func geonamesRow(_ fields: [[UInt8]], line: Int) -> Result<GazetteerPlace, Problem> {
        guard fields.count == 19 else {
            return .failure(Problem(line: line, column: 1, message: "\(fields.count) columns; a GeoNames row has 19"))
        }
        guard let id = UInt32(decimal: fields[0]) else {
            return .failure(Problem(line: line, column: 1, message: "geonameid '\(text(fields[0]))' is not a number"))
        }
        let coordinates = coordinates(fields, latitude: 4, longitude: 5, line: line)
        guard case .success(let (latitude, longitude)) = coordinates else { return coordinates.map { _ in GazetteerPlace(name: [], latitude: 0, longitude: 0) } }
        guard !fields[1].isEmpty else { return .failure(Problem(line: line, column: column(fields, 1), message: "the name is empty")) }
        var place = GazetteerPlace(name: fields[1], latitude: latitude, longitude: longitude)
        place.geonameID = id
        if !fields[2].isEmpty { place.alternateNames.append(fields[2]) }
        for alternate in fields[3].split(separator: UInt8(ascii: ",")) where !alternate.isEmpty { place.alternateNames.append(Array(alternate)) }
        place.featureClass = fields[6].first ?? UInt8(ascii: " ")
        place.featureCode = fields[7]
        guard fields[8].isEmpty || fields[8].count == 2 else {
            return .failure(Problem(line: line, column: column(fields, 8), message: "country code '\(text(fields[8]))' is not two letters"))
        }
        place.country = fields[8]
        place.admin1Code = fields[10]
        if !fields[14].isEmpty {
            guard let population = UInt64(decimal: fields[14]) else {
                return .failure(Problem(line: line, column: column(fields, 14), message: "population '\(text(fields[14]))' is not a number"))
            }
            place.population = UInt32(min(population, UInt64(UInt32.max)))
        }
        place.timeZone = fields[17]
        return .success(place)
    }

    static func admin1Row(_ fields: [[UInt8]], line: Int) -> Result<(code: [UInt8], name: [UInt8]), Problem> {
        guard fields.count == 4, fields[0].count > 3, fields[0][2] == UInt8(ascii: ".") else {
            return .failure(Problem(line: line, column: 1, message: "an admin1 row is CC.code<TAB>name<TAB>ascii name<TAB>geonameid"))
        }
        return .success((fields[0], fields[1]))
    }

    static func siteRow(_ fields: [[UInt8]], line: Int) -> Result<GazetteerPlace, Problem> {
        guard fields.count == 3 || fields.count == 4 else {
            return .failure(Problem(line: line, column: 1, message: "\(fields.count) columns; a site place is name<TAB>latitude<TAB>longitude[<TAB>aliases]"))
        }
        guard !fields[0].isEmpty else { return .failure(Problem(line: line, column: 1, message: "the name is empty")) }
        let coordinates = coordinates(fields, latitude: 1, longitude: 2, line: line)
        guard case .success(let (latitude, longitude)) = coordinates else { return coordinates.map { _ in GazetteerPlace(name: [], latitude: 0, longitude: 0) } }
        var place = GazetteerPlace(name: fields[0], latitude: latitude, longitude: longitude)
        place.isSite = true
        place.featureClass = UInt8(ascii: "S")
        if fields.count == 4 {
            for alias in fields[3].split(separator: UInt8(ascii: ",")) {
                let trimmed = Array(alias.drop(while: { $0 == 0x20 }).reversed().drop(while: { $0 == 0x20 }).reversed())
                if !trimmed.isEmpty { place.alternateNames.append(trimmed) }
            }
        }
        return .success(place)
    }

    static func coordinates(_ fields: [[UInt8]], latitude: Int, longitude: Int, line: Int) -> Result<(Double, Double), Problem> {
        guard let lat = number(fields[latitude]), abs(lat) <= 90 else {
            return .failure(Problem(line: line, column: column(fields, latitude),
                                    message: "latitude '\(text(fields[latitude]))' is not a number within -90...90"))
        }
        guard let lon = number(fields[longitude]), abs(lon) <= 180 else {
            return .failure(Problem(line: line, column: column(fields, longitude),
                                    message: "longitude '\(text(fields[longitude]))' is not a number within -180...180"))
        }
        return .success((lat, lon))
    }

    static func number<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Double? {
        guard !bytes.isEmpty, bytes.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2E || $0 == 0x2D || $0 == 0x2B }),
              let value = Double(String(decoding: bytes, as: UTF8.self)), value.isFinite else { return nil }
        return value
    }

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes.prefix(40), as: UTF8.self) }
}

extension FixedWidthInteger where Self: UnsignedInteger {
    /// A decimal number of ASCII digits only, or nil (empty, another byte, or too large).
    init?(decimal bytes: [UInt8]) {
        guard !bytes.isEmpty else { return nil }
        var value: Self = 0
        for byte in bytes {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = times.addingReportingOverflow(Self(byte - 0x30))
            guard !overflow && !carry else { return nil }
            value = sum
        }
        self = value
    }
}
