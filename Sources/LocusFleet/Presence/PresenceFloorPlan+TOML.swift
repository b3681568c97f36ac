import LocusCore

/// Reads a floor plan from TOML (docs/presence.md, "The floor-plan file"):
///
///     path_loss_exponent = 3.0          # optional, 2.5 if absent
///     tag_height_m = 1.0                # optional
///     [[area]]
///     name = "living"
///     rectangle = [0, 0, 4, 4]          # x0, y0, x1, y1 in metres; or polygon = [[x, y], ...]
///     [[wall]]
///     from = [4, 0]
///     to = [4, 1.6]
///     attenuation_db = 5
///     [[gateway]]
///     id = "hall"
///     x = 0.2
///     y = 3.8
///     z = 2.4                           # optional: without it distances are planar
///     [[rule]]                          # optional: an area as a fleet command's condition
///     when = "enters"                   # enters, leaves, occupied or vacated
///     area = "living"
///     tag = "phone:alice"               # optional: every tag without it
///     gateway = "hall"                  # any gateway id, in the plan or not
///     command = "pulse light 2s"        # as `locus-fleet command send` takes it
///     expires = "1min"                  # optional, 1min without it
///     name = "hall light"               # optional
///
/// Every error names the line and column of the value (or table) at fault and the field.
extension PresenceFloorPlan {
    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public var location: SourceLocation
        public var message: String
        public var description: String { "\(location): \(message)" }
    }

    public static func parse(toml text: String) throws(ParseError) -> PresenceFloorPlan {
        let document: TOMLDocument
        do {
            document = try TOMLParser.parse(Array(text.utf8))
        } catch {
            throw ParseError(location: error.location, message: error.message)
        }
        let reader = FloorPlanReader(document: document)
        return try reader.plan()
    }
}

/// The typed layer over a parsed document: one function per table kind.
private struct FloorPlanReader {
    let document: TOMLDocument

    typealias ParseError = PresenceFloorPlan.ParseError
    typealias Point = PresenceFloorPlan.Point

    func plan() throws(ParseError) -> PresenceFloorPlan {
        let root = document.root
        try onlyKeys(root, ["path_loss_exponent", "tag_height_m", "area", "wall", "gateway", "rule"], what: "the floor plan")
        let exponent = try optionalNumber(root, "path_loss_exponent", what: "the floor plan") ?? 2.5
        if !(exponent > 0 && exponent <= 10) {
            throw error(root.entry("path_loss_exponent")!.valueOffset, "path_loss_exponent must be in (0, 10], got \(exponent)")
        }
        let tagHeight = try optionalNumber(root, "tag_height_m", what: "the floor plan") ?? 1.0
        let areas = try tables(root, "area").map { item throws(ParseError) in try area(item.table, item.index) }
        let walls = try tables(root, "wall").map { item throws(ParseError) in try wall(item.table, item.index) }
        let gateways = try tables(root, "gateway").map { item throws(ParseError) in try gateway(item.table, item.index) }
        if areas.isEmpty { throw error(root.offset, "the floor plan needs at least one [[area]]") }
        if gateways.isEmpty { throw error(root.offset, "the floor plan needs at least one [[gateway]]") }
        try unique(areas.map(\.name), root, "area", field: "name")
        try unique(gateways.map(\.id), root, "gateway", field: "id")
        var plan = PresenceFloorPlan(areas: areas, walls: walls, gateways: gateways, pathLossExponent: exponent, tagHeightM: tagHeight)
        plan.rules = try tables(root, "rule").map { item throws(ParseError) in try rule(item.table, item.index, areas: areas.map(\.name)) }
        return plan
    }

    func rule(_ table: TOMLTable, _ index: Int, areas: [String]) throws(ParseError) -> PresenceRule {
        let what = "rule \(index + 1)"
        try onlyKeys(table, ["when", "area", "tag", "gateway", "command", "expires", "name"], what: what)
        let whenText = try string(table, "when", what: what)
        guard let when = PresenceRule.When(rawValue: whenText) else {
            let known = PresenceRule.When.allCases.map(\.rawValue)
            let hint = Spelling.closest(to: whenText, among: known).map { " (did you mean '\($0)'?)" } ?? ""
            throw error(table.entry("when")!.valueOffset, "\(what): when must be \(known.joined(separator: ", ")), got \"\(whenText)\"\(hint)")
        }
        let area = try string(table, "area", what: what)
        guard areas.contains(area) else {
            let hint = Spelling.closest(to: area, among: areas).map { " (did you mean '\($0)'?)" } ?? ""
            throw error(table.entry("area")!.valueOffset, "\(what): area \"\(area)\" is not an [[area]] of the plan\(hint)")
        }
        var tag = table.entry("tag") == nil ? nil : try string(table, "tag", what: what)
        if let beacon = tag, Self.isBeaconName(beacon) { tag = beacon.uppercased() }
        if let tag, !(tag.hasPrefix("phone:") && tag.count > 6) && !Self.isBeaconName(tag) {
            throw error(table.entry("tag")!.valueOffset, "\(what): tag must be \"phone:NAME\" or \"UUID/MAJOR/MINOR\" as presence run prints it, got \"\(tag)\"")
        }
        let gateway = try string(table, "gateway", what: what)
        if let problem = FleetCommandLine.gatewayProblem(gateway) { throw error(table.entry("gateway")!.valueOffset, "\(what): \(problem)") }
        let command = try string(table, "command", what: what)
        let action: String, keys: [(String, RemoteMessage.Value)]
        do throws(FleetCommandLine.UsageError) {
            let words = command.split(separator: " ").map(String.init)
            (action, keys) = try FleetCommandLine.commandAction(.parse(words, valued: ["--accuracy", "--timeout", "--duration"]))
        } catch {
            throw self.error(table.entry("command")!.valueOffset, "\(what): command \"\(command)\": \(error.message)")
        }
        var expiresMs: Int64 = 60_000
        if let entry = table.entry("expires") {
            let text = try string(table, "expires", what: what)
            guard case .success(let ms) = Quantity.durationMs(text), ms >= 1_000 else {
                throw error(entry.valueOffset, "\(what): expires must be a duration of a second or more (30s, 5min), got \"\(text)\"")
            }
            expiresMs = ms
        }
        let name = table.entry("name") == nil ? nil : try string(table, "name", what: what)
        return PresenceRule(number: index + 1, name: name, when: when, area: area, tag: tag, gateway: gateway,
                            action: action, keys: keys, command: command, expiresMs: expiresMs)
    }

    /// `UUID/MAJOR/MINOR` with a UUID and two numbers of 0 to 65535: a beacon tag's name.
    static func isBeaconName(_ text: String) -> Bool {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 3 && BeaconUUID(String(parts[0])) != nil
            && parts.dropFirst().allSatisfy { UInt16($0) != nil }
    }

    func area(_ table: TOMLTable, _ index: Int) throws(ParseError) -> PresenceFloorPlan.Area {
        let what = "area \(index + 1)"
        try onlyKeys(table, ["name", "rectangle", "polygon"], what: what)
        let name = try string(table, "name", what: what)
        switch (table.entry("rectangle"), table.entry("polygon")) {
        case (let rectangle?, nil):
            let numbers = try numberList(rectangle, count: 4, what: "\(what) (\"\(name)\"): rectangle", shape: "[x0, y0, x1, y1]")
            guard numbers[0] < numbers[2], numbers[1] < numbers[3] else {
                throw error(rectangle.valueOffset, "\(what) (\"\(name)\"): rectangle [x0, y0, x1, y1] needs x0 < x1 and y0 < y1")
            }
            return .init(name: name, shape: .rectangle(minimum: Point(numbers[0], numbers[1]), maximum: Point(numbers[2], numbers[3])))
        case (nil, let polygon?):
            return .init(name: name, shape: .polygon(try points(polygon, what: "\(what) (\"\(name)\"): polygon")))
        default:
            throw error(table.offset, "\(what) (\"\(name)\") needs exactly one of rectangle = [x0, y0, x1, y1] or polygon = [[x, y], ...]")
        }
    }

    func wall(_ table: TOMLTable, _ index: Int) throws(ParseError) -> PresenceFloorPlan.Wall {
        let what = "wall \(index + 1)"
        try onlyKeys(table, ["from", "to", "attenuation_db"], what: what)
        guard let fromEntry = table.entry("from"), let toEntry = table.entry("to") else {
            throw error(table.offset, "\(what) needs from = [x, y] and to = [x, y]")
        }
        let from = try numberList(fromEntry, count: 2, what: "\(what): from", shape: "[x, y]")
        let to = try numberList(toEntry, count: 2, what: "\(what): to", shape: "[x, y]")
        let attenuation = try number(table, "attenuation_db", what: what)
        if attenuation < 0 { throw error(table.entry("attenuation_db")!.valueOffset, "\(what): attenuation_db must not be negative") }
        return .init(from: Point(from[0], from[1]), to: Point(to[0], to[1]), attenuationDB: attenuation)
    }

    func gateway(_ table: TOMLTable, _ index: Int) throws(ParseError) -> PresenceFloorPlan.Gateway {
        let what = "gateway \(index + 1)"
        try onlyKeys(table, ["id", "x", "y", "z", "beacon"], what: what)
        let id = try string(table, "id", what: what)
        let x = try number(table, "x", what: "\(what) (\"\(id)\")")
        let y = try number(table, "y", what: "\(what) (\"\(id)\")")
        let z = try optionalNumber(table, "z", what: "\(what) (\"\(id)\")")
        let beacon = table.entry("beacon") == nil ? nil : try string(table, "beacon", what: "\(what) (\"\(id)\")")
        if let beacon, beacon.split(separator: "/").count != 3 || BeaconUUID(String(beacon.split(separator: "/")[0])) == nil {
            throw error(table.entry("beacon")!.valueOffset, "\(what) (\"\(id)\"): beacon must be \"UUID/MAJOR/MINOR\", got \"\(beacon)\"")
        }
        return .init(id: id, position: Point(x, y), heightM: z, beacon: beacon?.uppercased())
    }
}

// MARK: - field readers

extension FloorPlanReader {
    func error(_ offset: SourceOffset, _ message: String) -> ParseError {
        ParseError(location: document.location(of: offset), message: message)
    }

    func onlyKeys(_ table: TOMLTable, _ allowed: Set<String>, what: String) throws(ParseError) {
        for entry in table.entries where !allowed.contains(entry.key) {
            throw error(entry.keyOffset, "\(what): unknown field '\(entry.key)' (known: \(allowed.sorted().joined(separator: ", ")))")
        }
    }

    /// The tables of an array of tables `[[key]]`, with their positions; none when absent.
    func tables(_ root: TOMLTable, _ key: String) throws(ParseError) -> [(table: TOMLTable, index: Int)] {
        guard let entry = root.entry(key) else { return [] }
        guard case .array(let array) = entry.value, array.isArrayOfTables else {
            throw error(entry.keyOffset, "'\(key)' must be an array of tables: write [[\(key)]] headers")
        }
        var result: [(table: TOMLTable, index: Int)] = []
        for (index, element) in array.elements.enumerated() {
            guard case .table(let table) = element else { continue }
            result.append((table, index))
        }
        return result
    }

    func string(_ table: TOMLTable, _ key: String, what: String) throws(ParseError) -> String {
        guard let entry = table.entry(key) else { throw error(table.offset, "\(what) needs \(key) = \"...\"") }
        guard case .string(let text) = entry.value, !text.isEmpty else {
            throw error(entry.valueOffset, "\(what): \(key) must be a non-empty string, got \(entry.value.typeName)")
        }
        return text
    }

    func number(_ table: TOMLTable, _ key: String, what: String) throws(ParseError) -> Double {
        guard let value = try optionalNumber(table, key, what: what) else { throw error(table.offset, "\(what) needs \(key) = <number>") }
        return value
    }

    func optionalNumber(_ table: TOMLTable, _ key: String, what: String) throws(ParseError) -> Double? {
        guard let entry = table.entry(key) else { return nil }
        guard let value = FloorPlanReader.double(entry.value), value.isFinite else {
            throw error(entry.valueOffset, "\(what): \(key) must be a number, got \(entry.value.typeName)")
        }
        return value
    }

    static func double(_ value: TOMLValue) -> Double? {
        switch value {
        case .integer(let integer): return Double(integer)
        case .float(let float): return float
        default: return nil
        }
    }

    func numberList(_ entry: TOMLTable.Entry, count: Int, what: String, shape: String) throws(ParseError) -> [Double] {
        guard case .array(let array) = entry.value else { throw error(entry.valueOffset, "\(what) must be \(shape), got \(entry.value.typeName)") }
        let numbers = array.elements.compactMap(FloorPlanReader.double).filter(\.isFinite)
        guard numbers.count == array.count, numbers.count == count else {
            throw error(entry.valueOffset, "\(what) must be \(count) numbers \(shape), got \(array.count) values")
        }
        return numbers
    }

    func points(_ entry: TOMLTable.Entry, what: String) throws(ParseError) -> [Point] {
        guard case .array(let array) = entry.value, array.count >= 3 else {
            throw error(entry.valueOffset, "\(what) must be at least 3 points [[x, y], ...]")
        }
        var result: [Point] = []
        for (index, element) in array.elements.enumerated() {
            guard case .array(let pair) = element, pair.count == 2,
                  let x = FloorPlanReader.double(pair.elements[0]), let y = FloorPlanReader.double(pair.elements[1]) else {
                throw error(array.offsets[index], "\(what): point \(index + 1) must be [x, y] (two numbers)")
            }
            result.append(Point(x, y))
        }
        return result
    }

    func unique(_ names: [String], _ root: TOMLTable, _ key: String, field: String) throws(ParseError) {
        var seen = Set<String>()
        for (index, name) in names.enumerated() where !seen.insert(name).inserted {
            let offset = (try? tables(root, key))?[index].table.offset ?? root.offset
            throw error(offset, "\(key) \(index + 1): \(field) \"\(name)\" is already used by an earlier \(key)")
        }
    }
}
