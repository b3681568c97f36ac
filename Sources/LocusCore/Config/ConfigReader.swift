/// One problem found in a configuration file, located for the person who has to fix it.
public struct ConfigDiagnostic: Equatable, Sendable, CustomStringConvertible {
    public var file: String
    public var location: SourceLocation
    public var message: String

    public init(file: String, location: SourceLocation, message: String) {
        self.file = file
        self.location = location
        self.message = message
    }

    /// `file:line:col: message`, the form compilers use, so editors can jump to it.
    public var description: String { "\(file):\(location.line):\(location.column): \(message)" }
}

/// Every problem found in a configuration file (checking goes on after the first one).
public struct ConfigError: Error, CustomStringConvertible {
    public var diagnostics: [ConfigDiagnostic]

    /// Diagnostics are kept in file order, the order a person fixes them in.
    public init(_ diagnostics: [ConfigDiagnostic]) {
        self.diagnostics = diagnostics.enumerated().sorted { a, b in
            if a.element.file != b.element.file { return a.offset < b.offset }
            if a.element.location.line != b.element.location.line { return a.element.location.line < b.element.location.line }
            if a.element.location.column != b.element.location.column { return a.element.location.column < b.element.location.column }
            return a.offset < b.offset
        }.map { $0.element }
    }

    public var description: String {
        var text = ""
        for (index, diagnostic) in diagnostics.enumerated() {
            if index > 0 { text += "\n" }
            text += diagnostic.description
        }
        return text
    }
}

/// Collects diagnostics while the typed schema reads a document.
public final class ConfigReport {
    public let file: String
    public let document: TOMLDocument
    public private(set) var diagnostics: [ConfigDiagnostic] = []

    public init(file: String, document: TOMLDocument) {
        self.file = file
        self.document = document
    }

    public func fail(at offset: SourceOffset, _ message: String) {
        diagnostics.append(ConfigDiagnostic(file: file, location: document.location(of: offset), message: message))
    }

    public var hasErrors: Bool { !diagnostics.isEmpty }

    /// Parses `source` as TOML; a syntax error becomes the report's only diagnostic.
    public static func parse(_ source: [UInt8], file: String) throws(ConfigError) -> ConfigReport {
        do {
            return ConfigReport(file: file, document: try TOMLParser.parse(source))
        } catch {
            throw ConfigError([ConfigDiagnostic(file: file, location: error.location, message: error.message)])
        }
    }
}

/// Typed access to one TOML table. Every key the schema asks for is remembered, so `finish()`
/// can name keys nobody asked for (with a did-you-mean from the keys that exist here).
public struct TableReader {
    public let table: TOMLTable
    public let report: ConfigReport
    /// Dotted path for messages ("monitor.gate.condition[2]").
    public let path: String
    private var known: [String] = []

    public init(_ table: TOMLTable, report: ConfigReport, path: String) {
        self.table = table
        self.report = report
        self.path = path
    }

    public var offset: SourceOffset { table.offset }

    public func has(_ key: String) -> Bool { table[key] != nil }

    public func offset(of key: String) -> SourceOffset {
        table.entry(key)?.valueOffset ?? table.offset
    }

    /// Where element `index` of the array at `key` is (the array's own place when it is not one).
    public func offset(of key: String, element index: Int) -> SourceOffset {
        guard let entry = table.entry(key), case .array(let array) = entry.value, index < array.offsets.count else { return offset(of: key) }
        return array.offsets[index]
    }

    /// The full dotted name of `key` in this table, for messages.
    public func label(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    private mutating func lookup(_ key: String, required: Bool) -> TOMLTable.Entry? {
        known.append(key)
        guard let entry = table.entry(key) else {
            if required { report.fail(at: table.offset, "missing required key '\(label(key))'") }
            return nil
        }
        return entry
    }

    private func wrongType(_ entry: TOMLTable.Entry, _ expected: String) {
        report.fail(at: entry.valueOffset, "'\(label(entry.key))' must be \(expected), not \(entry.value.typeName)")
    }

    public mutating func string(_ key: String, required: Bool = false) -> String? {
        guard let entry = lookup(key, required: required) else { return nil }
        guard case .string(let value) = entry.value else { wrongType(entry, "a string"); return nil }
        return value
    }

    public mutating func integer(_ key: String, in range: ClosedRange<Int64>, required: Bool = false) -> Int64? {
        guard let entry = lookup(key, required: required) else { return nil }
        guard case .integer(let value) = entry.value else { wrongType(entry, "an integer"); return nil }
        guard range.contains(value) else {
            report.fail(at: entry.valueOffset, "'\(label(key))' = \(value) is out of range (\(range.lowerBound)...\(range.upperBound))")
            return nil
        }
        return value
    }

    /// A float; integers are accepted too (`radius = 100` means 100.0 metres).
    public mutating func number(_ key: String, in range: ClosedRange<Double>, required: Bool = false) -> Double? {
        guard let entry = lookup(key, required: required) else { return nil }
        let value: Double
        switch entry.value {
        case .float(let float): value = float
        case .integer(let integer): value = Double(integer)
        default: wrongType(entry, "a number"); return nil
        }
        guard range.contains(value) else {
            report.fail(at: entry.valueOffset, "'\(label(key))' = \(value) is out of range (\(range.lowerBound)...\(range.upperBound))")
            return nil
        }
        return value
    }

    public mutating func boolean(_ key: String, required: Bool = false) -> Bool? {
        guard let entry = lookup(key, required: required) else { return nil }
        guard case .boolean(let value) = entry.value else { wrongType(entry, "true or false"); return nil }
        return value
    }

    /// One of a fixed set of words, reported with the full list when it is anything else.
    public mutating func choice<T>(_ key: String, _ options: [(String, T)], required: Bool = false) -> T? {
        guard let entry = lookup(key, required: required) else { return nil }
        guard case .string(let word) = entry.value else { wrongType(entry, "a string"); return nil }
        for (name, value) in options where name == word { return value }
        var names = ""
        for (index, option) in options.enumerated() { names += (index == 0 ? "" : " | ") + option.0 }
        var message = "'\(label(key))' = \"\(word)\" is not one of: \(names)"
        if let suggestion = Spelling.closest(to: word, among: options.map { $0.0 }) { message += " (did you mean \"\(suggestion)\"?)" }
        report.fail(at: entry.valueOffset, message)
        return nil
    }

    /// A duration string with a unit ("500ms", "10s", "5min"), in milliseconds.
    public mutating func duration(_ key: String, in range: ClosedRange<Int64> = 0...Int64.max, required: Bool = false) -> Int64? {
        guard let entry = lookup(key, required: required) else { return nil }
        guard case .string(let text) = entry.value else { wrongType(entry, "a duration string such as \"500ms\", \"10s\" or \"5min\""); return nil }
        switch Quantity.durationMs(text) {
        case .success(let value):
            guard range.contains(value) else {
                report.fail(at: entry.valueOffset, "'\(label(key))' = \"\(text)\" is out of range (\(Quantity.formatMs(range.lowerBound))...\(Quantity.formatMs(range.upperBound)))")
                return nil
            }
            return value
        case .failure(let problem):
            report.fail(at: entry.valueOffset, "'\(label(key))' = \"\(text)\": \(problem.message)")
            return nil
        }
    }

    /// A size string with a binary unit ("8MiB"), in bytes.
    public mutating func size(_ key: String, in range: ClosedRange<Int64> = 0...Int64.max, required: Bool = false) -> Int64? {
        guard let entry = lookup(key, required: required) else { return nil }
        guard case .string(let text) = entry.value else { wrongType(entry, "a size string such as \"8MiB\""); return nil }
        switch Quantity.sizeBytes(text) {
        case .success(let value):
            guard range.contains(value) else {
                report.fail(at: entry.valueOffset, "'\(label(key))' = \"\(text)\" is out of range (\(range.lowerBound)...\(range.upperBound) bytes)")
                return nil
            }
            return value
        case .failure(let problem):
            report.fail(at: entry.valueOffset, "'\(label(key))' = \"\(text)\": \(problem.message)")
            return nil
        }
    }

    /// A distance: a string with a unit ("25 km", "500 m") or a number of metres, in metres.
    public mutating func distance(_ key: String, in range: ClosedRange<Double>, required: Bool = false) -> Double? {
        guard let entry = lookup(key, required: required) else { return nil }
        let value: Double
        switch entry.value {
        case .float(let float): value = float
        case .integer(let integer): value = Double(integer)
        case .string(let text):
            switch Quantity.distanceM(text) {
            case .success(let metres): value = metres
            case .failure(let problem):
                report.fail(at: entry.valueOffset, "'\(label(key))' = \"\(text)\": \(problem.message)")
                return nil
            }
        default: wrongType(entry, "a distance such as \"25 km\" or \"500 m\" (or a number of metres)"); return nil
        }
        guard value.isFinite, range.contains(value) else {
            report.fail(at: entry.valueOffset, "'\(label(key))' is out of range (\(Quantity.formatDistance(range.lowerBound))...\(Quantity.formatDistance(range.upperBound)))")
            return nil
        }
        return value
    }

    /// `[[lat, lon], ...]`: positions in degrees (latitude within ±90°, longitude ±180°), each
    /// problem reported at its element.
    public mutating func positions(_ key: String, required: Bool = false) -> (latitudes: [Double], longitudes: [Double])? {
        guard let entry = lookup(key, required: required) else { return nil }
        guard case .array(let array) = entry.value else { wrongType(entry, "an array of [lat, lon] positions"); return nil }
        var latitudes: [Double] = [], longitudes: [Double] = []
        for (index, element) in array.elements.enumerated() {
            let at = array.offsets[index]
            guard case .array(let pair) = element, pair.elements.count == 2 else {
                report.fail(at: at, "'\(label(key))' element \(index + 1) must be a [lat, lon] pair")
                return nil
            }
            var values: [Double] = []
            for value in pair.elements {
                switch value {
                case .float(let float) where float.isFinite: values.append(float)
                case .integer(let integer): values.append(Double(integer))
                default: break
                }
            }
            guard values.count == 2 else {
                report.fail(at: at, "'\(label(key))' element \(index + 1) must hold two numbers, latitude and longitude in degrees")
                return nil
            }
            guard abs(values[0]) <= 90, abs(values[1]) <= 180 else {
                report.fail(at: at, "'\(label(key))' element \(index + 1) = [\(values[0]), \(values[1])] is not a position (latitude within ±90, longitude within ±180)")
                return nil
            }
            latitudes.append(values[0])
            longitudes.append(values[1])
        }
        return (latitudes, longitudes)
    }

    /// An array of strings (`["locus", "adm"]`); one that holds anything else is reported.
    public mutating func strings(_ key: String, required: Bool = false) -> [String]? {
        guard let entry = lookup(key, required: required) else { return nil }
        guard case .array(let array) = entry.value else { wrongType(entry, "an array of strings"); return nil }
        var strings: [String] = []
        for (index, element) in array.elements.enumerated() {
            guard case .string(let text) = element else {
                report.fail(at: array.offsets[index], "'\(label(key))' must hold strings, not \(element.typeName)")
                return nil
            }
            strings.append(text)
        }
        return strings
    }

    /// One string or an array of them (`"a"` or `["a", "b"]`), as an array; an empty array or one
    /// that holds anything else is reported.
    public mutating func oneOrMoreStrings(_ key: String, required: Bool = false) -> [String]? {
        guard let entry = lookup(key, required: required) else { return nil }
        switch entry.value {
        case .string(let value): return [value]
        case .array(let array) where array.elements.isEmpty:
            report.fail(at: entry.valueOffset, "'\(label(key))' is an empty array: name at least one")
            return nil
        case .array:
            known.removeLast()
            return strings(key)
        default:
            wrongType(entry, "a string or an array of strings")
            return nil
        }
    }

    /// A sub-table (a `[header]` table or an inline table).
    public mutating func table(_ key: String, required: Bool = false) -> TableReader? {
        guard let entry = lookup(key, required: required) else { return nil }
        guard case .table(let child) = entry.value else { wrongType(entry, "a table"); return nil }
        return TableReader(child, report: report, path: label(key))
    }

    /// The tables of an array of tables (`[[action]]`); an inline array of inline tables works too.
    public mutating func tables(_ key: String) -> [TableReader] {
        guard let entry = lookup(key, required: false) else { return [] }
        guard case .array(let array) = entry.value else { wrongType(entry, "an array of tables ([[\(label(key))]])"); return [] }
        var readers: [TableReader] = []
        for (index, element) in array.elements.enumerated() {
            guard case .table(let child) = element else {
                report.fail(at: array.offsets[index], "'\(label(key))' must hold tables, not \(element.typeName)")
                continue
            }
            readers.append(TableReader(child, report: report, path: "\(label(key))[\(index + 1)]"))
        }
        return readers
    }

    /// Every key of this table whose value is a table, for tables keyed by user-chosen names
    /// (`[gpio.outputs]`, `[monitor.NAME]`). These keys count as known.
    public mutating func namedTables() -> [(name: String, offset: SourceOffset, reader: TableReader)] {
        var result: [(name: String, offset: SourceOffset, reader: TableReader)] = []
        for entry in table.entries {
            known.append(entry.key)
            guard case .table(let child) = entry.value else {
                report.fail(at: entry.valueOffset, "'\(label(entry.key))' must be a table, not \(entry.value.typeName)")
                continue
            }
            result.append((entry.key, entry.keyOffset, TableReader(child, report: report, path: label(entry.key))))
        }
        return result
    }

    /// Counts `key` as known without reading it (a key the fleet's configuration replaces).
    public mutating func skip(_ key: String) { known.append(key) }

    /// Reports every key the schema did not ask for.
    public func finish() {
        for entry in table.entries where !known.contains(entry.key) {
            var message = "unknown key '\(label(entry.key))'"
            if let suggestion = Spelling.closest(to: entry.key, among: known) {
                message += " (did you mean '\(suggestion)'?)"
            } else {
                var names = ""
                for (index, name) in known.enumerated() { names += (index == 0 ? "" : ", ") + name }
                if !names.isEmpty { message += "; known keys here: \(names)" }
            }
            report.fail(at: entry.keyOffset, message)
        }
    }
}
