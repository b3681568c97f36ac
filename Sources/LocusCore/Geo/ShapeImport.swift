/// Shapes drawn in a GIS, read for a site file (`locus shapes import`): GeoJSON (RFC 7946:
/// Polygon, MultiPolygon, LineString, MultiLineString, Point with a radius; in Features and
/// FeatureCollections) and WKT (POLYGON, MULTIPOLYGON, LINESTRING, MULTILINESTRING, and Traccar's
/// CIRCLE). Each shape is checked as the site file checks it; what cannot become a condition is
/// named with the reason, and the rest is still imported.
///
/// Decisions: GeoJSON and WKT write longitude first; Traccar's WKT writes latitude first, which
/// `latitudeFirst` selects (and CIRCLE is always latitude first, as Traccar writes it). A polygon
/// with holes is refused (Locus polygons have none: inside the hole would count as inside). A
/// line becomes a corridor `width` metres wide: the feature's "width" property, else the one
/// given. Identifiers come from a feature's "id", "name" or "title", made into a condition id
/// (letters, digits, '-', '_', at most 32), else "shape-N".
public enum ShapeImport {
    public struct Shape: Equatable {
        public var identifier: String
        public var condition: Condition
    }

    public struct Result {
        public var shapes: [Shape] = []
        /// One line per item that could not be imported.
        public var problems: [String] = []
    }

    public struct Options {
        public var latitudeFirst = false
        /// A corridor's width when the feature has none, metres.
        public var widthM: Double? = nil

        public init(latitudeFirst: Bool = false, widthM: Double? = nil) {
            self.latitudeFirst = latitudeFirst
            self.widthM = widthM
        }
    }

    /// GeoJSON when the text starts with '{', WKT otherwise.
    public static func read(_ bytes: [UInt8], options: Options) -> Result {
        var importer = Importer(options: options)
        let first = bytes.first { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }
        if first == UInt8(ascii: "{") {
            do throws(JSONError) {
                importer.geoJSON(try JSONParser.parse(bytes), label: "the document", name: nil)
            } catch {
                importer.result.problems.append("not GeoJSON: \(error)")
            }
        } else {
            importer.wkt(bytes)
        }
        return importer.result
    }

    /// The site file's lines for the shapes, under `[[monitor.MONITOR.condition]]`.
    public static func toml(_ shapes: [Shape], monitor: String) -> String {
        var text = ""
        func positions(_ latitudes: [Double], _ longitudes: [Double]) -> String {
            var list = "["
            for index in latitudes.indices {
                if index > 0 { list += ", " }
                list += "[" + decimal(latitudes[index]) + ", " + decimal(longitudes[index]) + "]"
            }
            return list + "]"
        }
        for shape in shapes {
            text += "[[monitor.\(monitor).condition]]\nid = \"\(shape.identifier)\"\n"
            switch shape.condition {
            case .polygon(let polygon):
                text += "polygon = " + positions(polygon.latitudes, polygon.longitudes) + "\n"
            case .corridor(let corridor):
                text += "corridor = { path = " + positions(corridor.latitudes, corridor.longitudes) + ", width = " + decimal(corridor.widthM, 2) + " }\n"
            case .circle(let circle):
                text += "circle = { lat = " + decimal(circle.latitude) + ", lon = " + decimal(circle.longitude) + ", radius = " + decimal(circle.radiusM, 2) + " }\n"
            case .beacon, .phone:
                break
            }
            text += "\n"
        }
        return text
    }

    static func decimal(_ value: Double, _ decimals: Int = 7) -> String {
        var text = JSONWriter.rendering(capacity: 48) { $0.text(value, decimals: decimals) }
        // 51.9500000 reads as 51.95: the trailing zeros carry nothing.
        if text.utf8.contains(UInt8(ascii: ".")) {
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
        }
        return text
    }

    /// A condition id from a feature's name: letters and digits kept, anything else '-', at most
    /// 32 bytes; nil when nothing is left.
    static func identifier(_ name: String) -> String? {
        var bytes: [UInt8] = []
        for byte in name.utf8 {
            let keep = (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x5F || byte == 0x2D
            if keep { bytes.append(byte) } else if bytes.last != 0x2D && !bytes.isEmpty { bytes.append(0x2D) }
            if bytes.count == Identifier.maximumLength { break }
        }
        while bytes.last == 0x2D { bytes.removeLast() }
        return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
    }

    struct Importer {
        let options: Options
        var result = Result()
        var taken: Set<String> = []

        init(options: Options) { self.options = options }

        mutating func add(_ condition: Condition, name: String?) {
            var base = name.flatMap(ShapeImport.identifier) ?? "shape-\(result.shapes.count + 1)"
            if base.utf8.count > Identifier.maximumLength - 3 { base = String(decoding: Array(base.utf8.prefix(Identifier.maximumLength - 3)), as: UTF8.self) }
            var identifier = base, suffix = 2
            while taken.contains(identifier) {
                identifier = "\(base)-\(suffix)"
                suffix += 1
            }
            taken.insert(identifier)
            result.shapes.append(Shape(identifier: identifier, condition: condition))
        }

        mutating func polygon(_ latitudes: [Double], _ longitudes: [Double], label: String, name: String?) {
            do throws(ShapeError) {
                add(.polygon(try GeoPolygon(latitudes: latitudes, longitudes: longitudes)), name: name)
            } catch {
                result.problems.append("\(label): \(ShapeMessages.polygon(error).message)")
            }
        }

        mutating func corridor(_ latitudes: [Double], _ longitudes: [Double], widthM: Double?, label: String, name: String?) {
            guard let width = widthM ?? options.widthM else {
                result.problems.append("\(label): a line becomes a corridor, which needs a width: give the feature a \"width\" property (metres) or --width")
                return
            }
            do throws(CorridorError) {
                add(.corridor(try GeoCorridor(latitudes: latitudes, longitudes: longitudes, widthM: width)), name: name)
            } catch {
                result.problems.append("\(label): \(ShapeMessages.corridor(error).message)")
            }
        }

        mutating func circle(_ latitude: Double, _ longitude: Double, radiusM: Double?, label: String, name: String?) {
            guard let radiusM, radiusM > 0, radiusM <= 10_000_000, abs(latitude) <= 90, abs(longitude) <= 180 else {
                result.problems.append("\(label): a point becomes a circle, which needs a position and a \"radius\" property (metres > 0)")
                return
            }
            add(.circle(CircularGeographicCondition(latitude: latitude, longitude: longitude, radiusM: radiusM)), name: name)
        }

        // MARK: GeoJSON

        mutating func geoJSON(_ value: JSONValue, label: String, name: String?, width: Double? = nil, radius: Double? = nil) {
            switch value["type"]?.string {
            case "FeatureCollection":
                guard case .array(let features)? = value["features"] else {
                    result.problems.append("\(label): a FeatureCollection without \"features\"")
                    return
                }
                for (index, feature) in features.enumerated() { geoJSON(feature, label: "feature \(index + 1)", name: nil) }
            case "Feature":
                let properties = value["properties"]
                let title = ["id", "name", "title"].lazy.compactMap { properties?[$0]?.string ?? value[$0]?.string }.first
                let label = title.map { "\(label) '\($0)'" } ?? label
                guard let geometry = value["geometry"] else {
                    result.problems.append("\(label): no geometry")
                    return
                }
                geoJSON(geometry, label: label, name: title, width: properties?["width"]?.number, radius: properties?["radius"]?.number)
            case "Polygon":
                polygonRings(value["coordinates"], label: label, name: name)
            case "MultiPolygon":
                guard case .array(let polygons)? = value["coordinates"] else { return malformed(label, "MultiPolygon") }
                for (index, rings) in polygons.enumerated() {
                    polygonRings(rings, label: "\(label) part \(index + 1)", name: name.map { "\($0)-\(index + 1)" })
                }
            case "LineString":
                guard let path = positions(value["coordinates"]) else { return malformed(label, "LineString") }
                corridor(path.latitudes, path.longitudes, widthM: width, label: label, name: name)
            case "MultiLineString":
                guard case .array(let lines)? = value["coordinates"] else { return malformed(label, "MultiLineString") }
                for (index, line) in lines.enumerated() {
                    guard let path = positions(line) else { return malformed("\(label) part \(index + 1)", "LineString") }
                    corridor(path.latitudes, path.longitudes, widthM: width, label: "\(label) part \(index + 1)", name: name.map { "\($0)-\(index + 1)" })
                }
            case "Point":
                guard let point = positions(.array(value["coordinates"].map { [$0] } ?? [])), point.latitudes.count == 1 else {
                    return malformed(label, "Point")
                }
                circle(point.latitudes[0], point.longitudes[0], radiusM: radius, label: label, name: name)
            case "GeometryCollection":
                guard case .array(let geometries)? = value["geometries"] else { return malformed(label, "GeometryCollection") }
                for (index, geometry) in geometries.enumerated() {
                    geoJSON(geometry, label: "\(label) part \(index + 1)", name: name.map { "\($0)-\(index + 1)" }, width: width, radius: radius)
                }
            case let type?:
                result.problems.append("\(label): a \(type) is not a shape Locus monitors")
            case nil:
                result.problems.append("\(label): no \"type\"")
            }
        }

        mutating func malformed(_ label: String, _ type: String) {
            result.problems.append("\(label): its \(type) coordinates are not [longitude, latitude] positions")
        }

        mutating func polygonRings(_ value: JSONValue?, label: String, name: String?) {
            guard case .array(let rings)? = value, let outer = rings.first.flatMap(positions) else { return malformed(label, "Polygon") }
            guard rings.count == 1 else {
                result.problems.append("\(label): has \(rings.count - 1) hole\(rings.count == 2 ? "" : "s"); Locus polygons have none (inside a hole would count as inside): remove or split it in the GIS")
                return
            }
            polygon(outer.latitudes, outer.longitudes, label: label, name: name)
        }

        /// [[lon, lat], ...] (a third coordinate, altitude, ignored).
        func positions(_ value: JSONValue?) -> (latitudes: [Double], longitudes: [Double])? {
            guard case .array(let elements)? = value else { return nil }
            var latitudes: [Double] = [], longitudes: [Double] = []
            for element in elements {
                guard case .array(let pair) = element, pair.count >= 2, let x = pair[0].number, let y = pair[1].number else { return nil }
                let (latitude, longitude) = options.latitudeFirst ? (x, y) : (y, x)
                guard abs(latitude) <= 90, abs(longitude) <= 180 else { return nil }
                latitudes.append(latitude)
                longitudes.append(longitude)
            }
            return (latitudes, longitudes)
        }

        // MARK: WKT

        /// One geometry per line (or per ';'), as GIS exports and Traccar's areas write them.
        mutating func wkt(_ bytes: [UInt8]) {
            var number = 0
            for item in bytes.split(whereSeparator: { $0 == 0x0A || $0 == 0x3B }) {
                let text = String(decoding: item, as: UTF8.self)
                guard text.utf8.contains(where: { $0 != 0x20 && $0 != 0x0D && $0 != 0x09 }) else { continue }
                number += 1
                var scanner = WKTScanner(Array(item))
                let label = "geometry \(number)"
                guard let type = scanner.word() else {
                    result.problems.append("\(label): not WKT (POLYGON, MULTIPOLYGON, LINESTRING, MULTILINESTRING or CIRCLE)")
                    continue
                }
                wktGeometry(type, &scanner, label: label)
            }
            if number == 0 { result.problems.append("no geometry found: the file is empty") }
        }

        mutating func wktGeometry(_ type: String, _ scanner: inout WKTScanner, label: String) {
            switch type {
            case "POLYGON":
                guard let rings = scanner.list(depth: 2) else { return wktMalformed(label, type) }
                polygonRings(.array(rings), label: label, name: nil)
            case "MULTIPOLYGON":
                guard let polygons = scanner.list(depth: 3) else { return wktMalformed(label, type) }
                for (index, rings) in polygons.enumerated() { polygonRings(rings, label: "\(label) part \(index + 1)", name: nil) }
            case "LINESTRING":
                guard let line = scanner.list(depth: 1), let path = positions(line.first) else { return wktMalformed(label, type) }
                corridor(path.latitudes, path.longitudes, widthM: nil, label: label, name: nil)
            case "MULTILINESTRING":
                guard let lines = scanner.list(depth: 2) else { return wktMalformed(label, type) }
                for (index, line) in lines.enumerated() {
                    guard let path = positions(line) else { return wktMalformed(label, type) }
                    corridor(path.latitudes, path.longitudes, widthM: nil, label: "\(label) part \(index + 1)", name: nil)
                }
            case "CIRCLE":
                // Traccar: CIRCLE (lat lon, radius).
                guard let list = scanner.list(depth: 1), case .array(let items)? = list.first, items.count == 2,
                      case .array(let center) = items[0], center.count == 2, let latitude = center[0].number, let longitude = center[1].number,
                      case .array(let radius) = items[1], radius.count == 1, let metres = radius[0].number else { return wktMalformed(label, type) }
                circle(latitude, longitude, radiusM: metres, label: label, name: nil)
            default:
                result.problems.append("\(label): a \(type) is not a shape Locus monitors")
            }
        }

        mutating func wktMalformed(_ label: String, _ type: String) {
            result.problems.append("\(label): a \(type) whose coordinates cannot be read")
        }
    }

    /// WKT's nested lists: `((x y, x y), (x y))` as arrays of arrays whose innermost elements are
    /// the numbers of one position; `EMPTY` is an empty list.
    struct WKTScanner {
        let bytes: [UInt8]
        var position = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        mutating func skipSpace() {
            while position < bytes.count, bytes[position] == 0x20 || bytes[position] == 0x09 || bytes[position] == 0x0D { position += 1 }
        }

        /// A keyword, upper-cased.
        mutating func word() -> String? {
            skipSpace()
            let start = position
            while position < bytes.count, bytes[position] | 0x20 >= 0x61, bytes[position] | 0x20 <= 0x7A { position += 1 }
            guard position > start else { return nil }
            return String(decoding: bytes[start..<position].map { $0 & ~0x20 }, as: UTF8.self)
        }

        /// `depth` levels of parentheses around comma-separated positions (space-separated
        /// numbers), as JSON-like arrays: depth 1 gives [[x, y], ...] wrapped once.
        mutating func list(depth: Int) -> [JSONValue]? {
            skipSpace()
            // A Z, M or ZM tag after the type: the extra coordinates are ignored.
            if position < bytes.count, bytes[position] != UInt8(ascii: "(") { _ = word() }
            guard let value = group(depth: depth) else { return nil }
            skipSpace()
            guard position == bytes.count, case .array(let items) = value else { return nil }
            return depth == 1 ? [value] : items
        }

        mutating func group(depth: Int) -> JSONValue? {
            skipSpace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "(") else { return nil }
            position += 1
            var items: [JSONValue] = []
            while true {
                if depth > 1 {
                    guard let inner = group(depth: depth - 1) else { return nil }
                    items.append(inner)
                } else {
                    var numbers: [JSONValue] = []
                    while let number = number() { numbers.append(.number(number)) }
                    guard !numbers.isEmpty else { return nil }
                    items.append(.array(numbers))
                }
                skipSpace()
                guard position < bytes.count else { return nil }
                if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
                if bytes[position] == UInt8(ascii: ")") { position += 1; return .array(items) }
                return nil
            }
        }

        mutating func number() -> Double? {
            skipSpace()
            let start = position
            while position < bytes.count, (bytes[position] >= 0x30 && bytes[position] <= 0x39) || bytes[position] == 0x2E
                    || bytes[position] == 0x2D || bytes[position] == 0x2B || bytes[position] | 0x20 == 0x65 { position += 1 }
            guard position > start else { return nil }
            guard case .number(let value)? = try? JSONParser.parse(Array(bytes[start..<position])) else {
                position = start
                return nil
            }
            return value
        }
    }
}
