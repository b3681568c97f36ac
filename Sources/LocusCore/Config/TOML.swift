/// The value model of a parsed TOML document.
///
/// Locus reads a strict subset of TOML 1.0: everything except dates and times, which no Locus
/// setting needs (durations are strings with units, "500ms"). Every key and value remembers the
/// byte offset it came from, so the typed schema on top can report `file:line:col` for a value
/// that parses as TOML but means nothing to Locus.
public enum TOMLValue {
    case string(String)
    case integer(Int64)
    case float(Double)
    case boolean(Bool)
    case array(TOMLArray)
    case table(TOMLTable)

    /// The TOML type name, as a technician would read it in an error message.
    public var typeName: String {
        switch self {
        case .string: return "string"
        case .integer: return "integer"
        case .float: return "float"
        case .boolean: return "boolean"
        case .array: return "array"
        case .table: return "table"
        }
    }
}

/// A byte offset into the source document; `TOMLDocument.location(of:)` turns it into line and
/// column for people.
public struct SourceOffset: Equatable, Sendable {
    public var byte: Int
    public init(_ byte: Int) { self.byte = byte }
}

/// One line/column position, both counted from 1; columns count Unicode scalars.
public struct SourceLocation: Equatable, Sendable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }
    public var description: String { "\(line):\(column)" }
}

/// A TOML table: keys in document order, each with its value and where both came from.
public final class TOMLTable {
    /// How a table came to exist; TOML's redefinition rules depend on it.
    public enum Origin: Equatable, Sendable {
        /// Created as a parent of a `[a.b.c]` header; may be defined by its own header once.
        case implicit
        /// Defined by a `[header]`.
        case header
        /// Created by a dotted key (`a.b = 1`); closed to headers, open to more dotted keys.
        case dotted
        /// An inline table `{ ... }`: sealed once written.
        case inline
        /// One element of an array of tables (`[[a]]`).
        case arrayElement
    }

    public struct Entry {
        public let key: String
        public internal(set) var value: TOMLValue
        public let keyOffset: SourceOffset
        public let valueOffset: SourceOffset
    }

    /// A key compared byte for byte. TOML keys are not Unicode-normalised ("\u00E9" and
    /// "e\u0301" are two keys), while `String`'s `==` and hashing use canonical equivalence.
    private struct ExactKey: Hashable {
        let text: String

        static func == (lhs: ExactKey, rhs: ExactKey) -> Bool {
            lhs.text.utf8.elementsEqual(rhs.text.utf8)
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(text.utf8.count)
            for byte in text.utf8 { hasher.combine(byte) }
        }
    }

    public internal(set) var origin: Origin
    /// Where the table was opened: its header, its `{`, or the first dotted key through it.
    public let offset: SourceOffset
    public private(set) var entries: [Entry] = []
    private var indexByKey: [ExactKey: Int] = [:]

    init(origin: Origin, offset: SourceOffset) {
        self.origin = origin
        self.offset = offset
    }

    public var count: Int { entries.count }
    public var keys: [String] { entries.map { $0.key } }

    public func entry(_ key: String) -> Entry? {
        guard let index = indexByKey[ExactKey(text: key)] else { return nil }
        return entries[index]
    }

    public subscript(key: String) -> TOMLValue? { entry(key)?.value }

    /// Adds a key that must not exist yet (the parser checks first).
    func insert(_ key: String, _ value: TOMLValue, keyOffset: SourceOffset, valueOffset: SourceOffset) {
        precondition(indexByKey[ExactKey(text: key)] == nil, "duplicate key reached insert")
        indexByKey[ExactKey(text: key)] = entries.count
        entries.append(Entry(key: key, value: value, keyOffset: keyOffset, valueOffset: valueOffset))
    }
}

/// A TOML array: a static array value (`[1, 2]`) or an array of tables (`[[a]]`).
public final class TOMLArray {
    public let isArrayOfTables: Bool
    public private(set) var elements: [TOMLValue] = []
    public private(set) var offsets: [SourceOffset] = []

    init(isArrayOfTables: Bool) {
        self.isArrayOfTables = isArrayOfTables
    }

    public var count: Int { elements.count }

    func append(_ value: TOMLValue, at offset: SourceOffset) {
        elements.append(value)
        offsets.append(offset)
    }
}

/// A parsed document: the root table plus what is needed to turn offsets into locations.
public struct TOMLDocument {
    public let root: TOMLTable
    public let source: [UInt8]
    /// Byte offset of the start of each line, for locating offsets without rescanning the file
    /// (a site file with 10,000 conditions asks for 10,000 locations).
    private let lineStarts: [Int]

    public init(root: TOMLTable, source: [UInt8]) {
        self.root = root
        self.source = source
        var starts = [0]
        for (index, byte) in source.enumerated() where byte == 0x0A { starts.append(index + 1) }
        lineStarts = starts
    }

    public func location(of offset: SourceOffset) -> SourceLocation {
        let byte = min(max(offset.byte, 0), source.count)
        // The last line start at or before `byte` (binary search).
        var low = 0
        var high = lineStarts.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if lineStarts[middle] <= byte { low = middle } else { high = middle - 1 }
        }
        var column = 1
        var index = lineStarts[low]
        while index < byte {
            if source[index] & 0xC0 != 0x80 { column += 1 }
            index += 1
        }
        return SourceLocation(line: low + 1, column: column)
    }

    static func location(of byte: Int, in source: [UInt8]) -> SourceLocation {
        var line = 1
        var column = 1
        var index = 0
        let end = min(byte, source.count)
        while index < end {
            let value = source[index]
            if value == 0x0A {
                line += 1
                column = 1
            } else if value & 0xC0 != 0x80 {
                // Count scalars, not bytes: continuation bytes do not start a new column.
                column += 1
            }
            index += 1
        }
        return SourceLocation(line: line, column: column)
    }
}

/// A syntax error: where it is and what is wrong, in words for the person editing the file.
public struct TOMLError: Error, Equatable, Sendable, CustomStringConvertible {
    public var location: SourceLocation
    public var message: String

    public init(location: SourceLocation, message: String) {
        self.location = location
        self.message = message
    }

    public var description: String { "\(location): \(message)" }
}
