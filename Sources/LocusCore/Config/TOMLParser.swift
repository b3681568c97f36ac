/// A strict TOML 1.0 parser without dates and times (see `TOMLValue`).
///
/// It reads UTF-8 bytes, never `String`s: comparing and splitting bytes needs no Unicode tables,
/// which keeps the device binary small. The input is validated as UTF-8 first; after that every
/// decision is on ASCII bytes. Nesting of arrays and inline tables is bounded
/// (`maximumNesting`) so a hostile file cannot exhaust the stack.
public struct TOMLParser {
    /// Deepest nesting of values accepted, counted as toml++ counts it (`TOML_MAX_NESTED_VALUES`):
    /// every value is one level, scalars included, so `a = 1` is at depth 1 and a scalar fits in
    /// at most 255 arrays or inline tables.
    public static let maximumNesting = 256

    private let bytes: [UInt8]
    private var index = 0
    private let root: TOMLTable
    private var current: TOMLTable
    private var nesting = 0

    public static func parse(_ source: [UInt8]) throws(TOMLError) -> TOMLDocument {
        var parser = TOMLParser(source)
        try parser.parseDocument()
        return TOMLDocument(root: parser.root, source: source)
    }

    private init(_ source: [UInt8]) {
        bytes = source
        root = TOMLTable(origin: .header, offset: SourceOffset(0))
        current = root
    }

    // MARK: document structure

    private mutating func parseDocument() throws(TOMLError) {
        if let invalid = UTF8Validation.firstInvalidByte(in: bytes) {
            throw error(at: invalid, "the file is not valid UTF-8 (byte 0x\(hex(bytes[invalid])))")
        }
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }
        while index < bytes.count {
            skipWhitespace()
            guard let byte = peek() else { break }
            switch byte {
            case ASCII.hash, ASCII.newline, ASCII.carriageReturn:
                break
            case ASCII.leftBracket:
                if peek(1) == ASCII.leftBracket { try parseArrayTableHeader() } else { try parseTableHeader() }
            default:
                try parseKeyValue(into: current, sealing: false)
            }
            try expectEndOfLine()
        }
    }

    /// After a statement: optional whitespace, an optional comment, then a newline or the end.
    private mutating func expectEndOfLine() throws(TOMLError) {
        skipWhitespace()
        if peek() == ASCII.hash { try skipComment() }
        guard let byte = peek() else { return }
        if byte == ASCII.newline { index += 1; return }
        if byte == ASCII.carriageReturn, peek(1) == ASCII.newline { index += 2; return }
        if byte == ASCII.carriageReturn { throw error("a carriage return must be followed by a line feed") }
        throw error("expected the end of the line, found \(describe(byte))")
    }

    private mutating func skipComment() throws(TOMLError) {
        index += 1
        while let byte = peek(), byte != ASCII.newline {
            if byte == ASCII.carriageReturn, peek(1) == ASCII.newline { return }
            if isControl(byte) { throw error("control character \(describe(byte)) in a comment") }
            index += 1
        }
    }

    private mutating func parseTableHeader() throws(TOMLError) {
        let start = index
        index += 1
        skipWhitespace()
        let path = try parseKey()
        skipWhitespace()
        try expect(ASCII.rightBracket, "expected ']' to close the table header")
        var table = root
        for (position, part) in path.enumerated().dropLast() {
            table = try descendForHeader(table, part, isLast: false, keyOffset: path[position].offset)
        }
        let last = path[path.count - 1]
        if let existing = table.entry(last.name) {
            guard case .table(let target) = existing.value else {
                throw error(at: last.offset.byte, "'\(dotted(path))' is already defined as \(article(existing.value)) at \(where_(existing.keyOffset))")
            }
            guard target.origin == .implicit else {
                throw error(at: last.offset.byte, "table [\(dotted(path))] is defined twice (first at \(where_(target.offset)))")
            }
            target.origin = .header
            current = target
        } else {
            let table2 = TOMLTable(origin: .header, offset: SourceOffset(start))
            table.insert(last.name, .table(table2), keyOffset: last.offset, valueOffset: SourceOffset(start))
            current = table2
        }
    }

    private mutating func parseArrayTableHeader() throws(TOMLError) {
        let start = index
        index += 2
        skipWhitespace()
        let path = try parseKey()
        skipWhitespace()
        guard peek() == ASCII.rightBracket, peek(1) == ASCII.rightBracket else {
            throw error("expected ']]' to close the array-of-tables header")
        }
        index += 2
        var table = root
        for (position, part) in path.enumerated().dropLast() {
            table = try descendForHeader(table, part, isLast: false, keyOffset: path[position].offset)
        }
        let last = path[path.count - 1]
        let element = TOMLTable(origin: .arrayElement, offset: SourceOffset(start))
        if let existing = table.entry(last.name) {
            guard case .array(let array) = existing.value, array.isArrayOfTables else {
                throw error(at: last.offset.byte, "[[\(dotted(path))]] conflicts with '\(dotted(path))' defined as \(article(existing.value)) at \(where_(existing.keyOffset))")
            }
            array.append(.table(element), at: SourceOffset(start))
        } else {
            let array = TOMLArray(isArrayOfTables: true)
            array.append(.table(element), at: SourceOffset(start))
            table.insert(last.name, .array(array), keyOffset: last.offset, valueOffset: SourceOffset(start))
        }
        current = element
    }

    /// One step along a header path: into an existing table, the last element of an array of
    /// tables, or a new implicit table.
    private mutating func descendForHeader(_ table: TOMLTable, _ part: KeyPart, isLast: Bool, keyOffset: SourceOffset) throws(TOMLError) -> TOMLTable {
        guard let existing = table.entry(part.name) else {
            let child = TOMLTable(origin: .implicit, offset: keyOffset)
            table.insert(part.name, .table(child), keyOffset: keyOffset, valueOffset: keyOffset)
            return child
        }
        switch existing.value {
        case .table(let child):
            if child.origin == .inline {
                throw error(at: keyOffset.byte, "the inline table '\(part.name)' (at \(where_(existing.keyOffset))) cannot be extended")
            }
            return child
        case .array(let array) where array.isArrayOfTables:
            guard case .table(let last) = array.elements[array.count - 1] else { preconditionFailure("array of tables holds a non-table") }
            return last
        default:
            throw error(at: keyOffset.byte, "'\(part.name)' is already defined as \(article(existing.value)) at \(where_(existing.keyOffset))")
        }
    }

    // MARK: key = value

    private struct KeyPart {
        var name: String
        var offset: SourceOffset
    }

    /// Parses `key = value` into `table`. Inside an inline table (`sealing`), the tables a dotted
    /// key creates are part of that inline table and sealed with it.
    private mutating func parseKeyValue(into table: TOMLTable, sealing: Bool) throws(TOMLError) {
        let path = try parseKey()
        skipWhitespace()
        try expect(ASCII.equals, "expected '=' after the key '\(dotted(path))'")
        skipWhitespace()
        let valueOffset = SourceOffset(index)
        let value = try parseValue()
        var target = table
        for part in path.dropLast() {
            if let existing = target.entry(part.name) {
                guard case .table(let child) = existing.value, child.origin == .dotted else {
                    throw error(at: part.offset.byte, "cannot add keys to '\(part.name)' here: it is \(describeDefinition(existing)) at \(where_(existing.keyOffset))")
                }
                target = child
            } else {
                let child = TOMLTable(origin: .dotted, offset: part.offset)
                target.insert(part.name, .table(child), keyOffset: part.offset, valueOffset: part.offset)
                target = child
            }
        }
        let last = path[path.count - 1]
        if let existing = target.entry(last.name) {
            throw error(at: last.offset.byte, "duplicate key '\(dotted(path))' (first defined at \(where_(existing.keyOffset)))")
        }
        target.insert(last.name, value, keyOffset: last.offset, valueOffset: valueOffset)
    }

    private mutating func parseKey() throws(TOMLError) -> [KeyPart] {
        var parts: [KeyPart] = []
        while true {
            let offset = SourceOffset(index)
            parts.append(KeyPart(name: try parseSimpleKey(), offset: offset))
            skipWhitespace()
            guard peek() == ASCII.dot else { return parts }
            index += 1
            skipWhitespace()
        }
    }

    private mutating func parseSimpleKey() throws(TOMLError) -> String {
        guard let byte = peek() else { throw error("expected a key, found the end of the file") }
        if byte == ASCII.quote {
            if peek(1) == ASCII.quote, peek(2) == ASCII.quote { throw error("a key cannot be a multi-line string") }
            return try parseBasicString()
        }
        if byte == ASCII.apostrophe {
            if peek(1) == ASCII.apostrophe, peek(2) == ASCII.apostrophe { throw error("a key cannot be a multi-line string") }
            return try parseLiteralString()
        }
        let start = index
        while let next = peek(), isBareKeyByte(next) { index += 1 }
        if start == index { throw error("expected a key, found \(describe(byte))") }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    // MARK: values

    private mutating func parseValue() throws(TOMLError) -> TOMLValue {
        nesting += 1
        defer { nesting -= 1 }
        if nesting > TOMLParser.maximumNesting {
            throw error("values are nested more than \(TOMLParser.maximumNesting) levels deep (each array or inline table is a level)")
        }
        guard let byte = peek() else { throw error("expected a value, found the end of the file") }
        switch byte {
        case ASCII.quote:
            if peek(1) == ASCII.quote, peek(2) == ASCII.quote { return .string(try parseMultilineBasicString()) }
            return .string(try parseBasicString())
        case ASCII.apostrophe:
            if peek(1) == ASCII.apostrophe, peek(2) == ASCII.apostrophe { return .string(try parseMultilineLiteralString()) }
            return .string(try parseLiteralString())
        case ASCII.leftBracket:
            return .array(try parseArray())
        case ASCII.leftBrace:
            return .table(try parseInlineTable())
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            if matches("true") { index += 4; return .boolean(true) }
            if matches("false") { index += 5; return .boolean(false) }
            throw error("expected a value, found '\(word())' (strings need quotes)")
        default:
            return try parseNumber()
        }
    }

    private mutating func parseArray() throws(TOMLError) -> TOMLArray {
        let open = index
        index += 1
        let array = TOMLArray(isArrayOfTables: false)
        while true {
            try skipWhitespaceNewlinesAndComments()
            guard let byte = peek() else { throw error(at: open, "this array is never closed with ']'") }
            if byte == ASCII.rightBracket { index += 1; return array }
            let offset = SourceOffset(index)
            array.append(try parseValue(), at: offset)
            try skipWhitespaceNewlinesAndComments()
            guard let separator = peek() else { throw error(at: open, "this array is never closed with ']'") }
            if separator == ASCII.comma { index += 1; continue }
            if separator == ASCII.rightBracket { index += 1; return array }
            throw error("expected ',' or ']' in the array, found \(describe(separator))")
        }
    }

    private mutating func parseInlineTable() throws(TOMLError) -> TOMLTable {
        let table = TOMLTable(origin: .dotted, offset: SourceOffset(index))
        index += 1
        skipWhitespace()
        if peek() == ASCII.rightBrace {
            index += 1
            seal(table)
            return table
        }
        while true {
            skipWhitespace()
            try parseKeyValue(into: table, sealing: true)
            skipWhitespace()
            guard let byte = peek() else { throw error("this inline table is never closed with '}'") }
            if byte == ASCII.comma {
                index += 1
                skipWhitespace()
                if peek() == ASCII.rightBrace { throw error("a trailing comma is not allowed in an inline table") }
                continue
            }
            if byte == ASCII.rightBrace { index += 1; break }
            if byte == ASCII.newline || byte == ASCII.carriageReturn {
                throw error("an inline table must be on one line: close it with '}' before the line ends")
            }
            throw error("expected ',' or '}' in the inline table, found \(describe(byte))")
        }
        seal(table)
        return table
    }

    /// Marks an inline table and the tables its dotted keys created as closed to later additions.
    private func seal(_ table: TOMLTable) {
        table.origin = .inline
        for entry in table.entries {
            if case .table(let child) = entry.value, child.origin == .dotted { seal(child) }
        }
    }

    // MARK: strings

    private mutating func parseBasicString() throws(TOMLError) -> String {
        let open = index
        index += 1
        var text: [UInt8] = []
        while true {
            guard let byte = peek() else { throw error(at: open, "this string is never closed with '\"'") }
            switch byte {
            case ASCII.quote:
                index += 1
                return String(decoding: text, as: UTF8.self)
            case ASCII.backslash:
                try parseEscape(into: &text)
            case ASCII.newline, ASCII.carriageReturn:
                throw error(at: open, "this string is never closed with '\"' on its line (use \"\"\" for multi-line strings)")
            default:
                if isControl(byte) { throw error("control character \(describe(byte)) in a string (write it as an escape)") }
                text.append(byte)
                index += 1
            }
        }
    }

    private mutating func parseMultilineBasicString() throws(TOMLError) -> String {
        let open = index
        index += 3
        skipNewlineOnce()
        var text: [UInt8] = []
        while true {
            guard let byte = peek() else { throw error(at: open, "this multi-line string is never closed with '\"\"\"'") }
            if byte == ASCII.quote, peek(1) == ASCII.quote, peek(2) == ASCII.quote {
                // Up to two quotes may sit right before the closing delimiter: """a"""""
                var extra = 0
                while extra < 2, peek(3 + extra) == ASCII.quote { extra += 1 }
                for _ in 0..<extra { text.append(ASCII.quote) }
                index += 3 + extra
                return String(decoding: text, as: UTF8.self)
            }
            if byte == ASCII.backslash {
                if try skipLineEndingBackslash() { continue }
                try parseEscape(into: &text)
                continue
            }
            try appendMultilineByte(byte, to: &text)
        }
    }

    private mutating func parseLiteralString() throws(TOMLError) -> String {
        let open = index
        index += 1
        let start = index
        while true {
            guard let byte = peek() else { throw error(at: open, "this string is never closed with \"'\"") }
            if byte == ASCII.apostrophe {
                let text = String(decoding: bytes[start..<index], as: UTF8.self)
                index += 1
                return text
            }
            if byte == ASCII.newline || byte == ASCII.carriageReturn {
                throw error(at: open, "this string is never closed with \"'\" on its line (use ''' for multi-line strings)")
            }
            if isControl(byte) { throw error("control character \(describe(byte)) in a string") }
            index += 1
        }
    }

    private mutating func parseMultilineLiteralString() throws(TOMLError) -> String {
        let open = index
        index += 3
        skipNewlineOnce()
        var text: [UInt8] = []
        while true {
            guard let byte = peek() else { throw error(at: open, "this multi-line string is never closed with \"'''\"") }
            if byte == ASCII.apostrophe, peek(1) == ASCII.apostrophe, peek(2) == ASCII.apostrophe {
                var extra = 0
                while extra < 2, peek(3 + extra) == ASCII.apostrophe { extra += 1 }
                for _ in 0..<extra { text.append(ASCII.apostrophe) }
                index += 3 + extra
                return String(decoding: text, as: UTF8.self)
            }
            try appendMultilineByte(byte, to: &text)
        }
    }

    /// Newlines (CRLF kept as CRLF, as toml++ does) and ordinary bytes inside multi-line strings.
    private mutating func appendMultilineByte(_ byte: UInt8, to text: inout [UInt8]) throws(TOMLError) {
        if byte == ASCII.carriageReturn {
            guard peek(1) == ASCII.newline else { throw error("a carriage return must be followed by a line feed") }
            text.append(ASCII.newline)
            index += 2
            return
        }
        if byte != ASCII.newline, isControl(byte) { throw error("control character \(describe(byte)) in a string") }
        text.append(byte)
        index += 1
    }

    private mutating func skipNewlineOnce() {
        if peek() == ASCII.newline { index += 1 }
        else if peek() == ASCII.carriageReturn, peek(1) == ASCII.newline { index += 2 }
    }

    /// A backslash that ends a line trims it and all whitespace and newlines after it.
    private mutating func skipLineEndingBackslash() throws(TOMLError) -> Bool {
        var probe = index + 1
        while probe < bytes.count, bytes[probe] == ASCII.space || bytes[probe] == ASCII.tab { probe += 1 }
        guard probe < bytes.count, bytes[probe] == ASCII.newline || (bytes[probe] == ASCII.carriageReturn && probe + 1 < bytes.count && bytes[probe + 1] == ASCII.newline) else {
            return false
        }
        index = probe
        while let byte = peek() {
            if byte == ASCII.space || byte == ASCII.tab || byte == ASCII.newline { index += 1; continue }
            if byte == ASCII.carriageReturn, peek(1) == ASCII.newline { index += 2; continue }
            break
        }
        return true
    }

    private mutating func parseEscape(into text: inout [UInt8]) throws(TOMLError) {
        let start = index
        index += 1
        guard let code = peek() else { throw error(at: start, "a string ends in the middle of an escape") }
        index += 1
        switch code {
        case UInt8(ascii: "b"): text.append(0x08)
        case UInt8(ascii: "t"): text.append(0x09)
        case UInt8(ascii: "n"): text.append(0x0A)
        case UInt8(ascii: "f"): text.append(0x0C)
        case UInt8(ascii: "r"): text.append(0x0D)
        case ASCII.quote: text.append(ASCII.quote)
        case ASCII.backslash: text.append(ASCII.backslash)
        case UInt8(ascii: "u"): try appendUnicodeEscape(digits: 4, start: start, into: &text)
        case UInt8(ascii: "U"): try appendUnicodeEscape(digits: 8, start: start, into: &text)
        default:
            throw error(at: start, "invalid escape '\\\(String(decoding: [code], as: UTF8.self))' in a string (valid: \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX)")
        }
    }

    private mutating func appendUnicodeEscape(digits: Int, start: Int, into text: inout [UInt8]) throws(TOMLError) {
        var value: UInt32 = 0
        for _ in 0..<digits {
            guard let byte = peek(), let digit = hexDigitValue(byte) else {
                throw error(at: start, "a \\u escape needs \(digits) hexadecimal digits")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        guard let scalar = Unicode.Scalar(value) else {
            throw error(at: start, "the escape names U+\(hex32(value)), which is not a Unicode scalar value")
        }
        UTF8.encode(scalar) { text.append($0) }
    }

    // MARK: numbers

    private mutating func parseNumber() throws(TOMLError) -> TOMLValue {
        let start = index
        while let byte = peek(), isNumberByte(byte) { index += 1 }
        let token = Array(bytes[start..<index])
        if token.isEmpty {
            throw error("expected a value, found \(describe(bytes[start]))")
        }
        if let next = peek(), next == UInt8(ascii: ":") || ((next == ASCII.space || next == UInt8(ascii: "T")) && looksLikeDate(token)) {
            throw error(at: start, "dates and times are not supported in Locus configuration files")
        }
        if looksLikeDate(token) {
            throw error(at: start, "dates and times are not supported in Locus configuration files")
        }
        switch TOMLNumber.parse(token) {
        case .integer(let value): return .integer(value)
        case .float(let value): return .float(value)
        case .invalid(let reason):
            let text = String(decoding: token, as: UTF8.self)
            if !token.contains(where: isDigit) {
                throw error(at: start, "expected a value, found '\(text)' (strings need quotes: \"\(text)\")")
            }
            throw error(at: start, "'\(text)' is not a valid \(reason)")
        }
    }

    private func looksLikeDate(_ token: [UInt8]) -> Bool {
        // 1979-05-27: four digits then '-'; a number never has '-' after a digit without an 'e'.
        token.count >= 5 && token[0...3].allSatisfy(isDigit) && token[4] == UInt8(ascii: "-")
    }

    // MARK: scanning

    private func peek(_ offset: Int = 0) -> UInt8? {
        let position = index + offset
        return position < bytes.count ? bytes[position] : nil
    }

    private func matches(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { return false }
        let pointer = word.utf8Start
        for offset in 0..<count where bytes[index + offset] != pointer[offset] { return false }
        // "trueish" is not `true` followed by junk the caller would misreport.
        if let next = peek(count), isBareKeyByte(next) { return false }
        return true
    }

    private func word() -> String {
        var end = index
        while end < bytes.count, isBareKeyByte(bytes[end]) || bytes[end] == ASCII.dot { end += 1 }
        return String(decoding: bytes[index..<max(end, index + 1)], as: UTF8.self)
    }

    private mutating func skipWhitespace() {
        while let byte = peek(), byte == ASCII.space || byte == ASCII.tab { index += 1 }
    }

    private mutating func skipWhitespaceNewlinesAndComments() throws(TOMLError) {
        while let byte = peek() {
            switch byte {
            case ASCII.space, ASCII.tab, ASCII.newline: index += 1
            case ASCII.carriageReturn:
                guard peek(1) == ASCII.newline else { throw error("a carriage return must be followed by a line feed") }
                index += 2
            case ASCII.hash: try skipComment()
            default: return
            }
        }
    }

    private mutating func expect(_ byte: UInt8, _ message: String) throws(TOMLError) {
        guard peek() == byte else { throw error(message) }
        index += 1
    }

    // MARK: errors

    private func error(_ message: String) -> TOMLError { error(at: index, message) }

    private func error(at byte: Int, _ message: String) -> TOMLError {
        TOMLError(location: TOMLDocument.location(of: byte, in: bytes), message: message)
    }

    private func where_(_ offset: SourceOffset) -> String {
        "line \(TOMLDocument.location(of: offset.byte, in: bytes).line)"
    }

    private func dotted(_ path: [KeyPart]) -> String {
        var text = ""
        for (position, part) in path.enumerated() {
            if position > 0 { text += "." }
            text += part.name
        }
        return text
    }

    private func article(_ value: TOMLValue) -> String {
        switch value {
        case .array(let array) where !array.isArrayOfTables: return "an array value"
        case .array: return "an array of tables"
        case .integer: return "an integer"
        case .table: return "a table"
        default: return "a \(value.typeName)"
        }
    }

    private func describeDefinition(_ entry: TOMLTable.Entry) -> String {
        if case .table(let table) = entry.value {
            switch table.origin {
            case .inline: return "an inline table, closed once written,"
            case .header, .implicit: return "a table defined by a [header]"
            case .arrayElement, .dotted: return "a table"
            }
        }
        return article(entry.value) + " defined"
    }

    private func describe(_ byte: UInt8) -> String {
        if byte >= 0x21 && byte < 0x7F { return "'\(String(decoding: [byte], as: UTF8.self))'" }
        switch byte {
        case ASCII.space: return "a space"
        case ASCII.tab: return "a tab"
        case ASCII.newline: return "the end of the line"
        default: return "byte 0x\(hex(byte))"
        }
    }
}

// MARK: byte classes

enum ASCII {
    static let tab: UInt8 = 0x09
    static let newline: UInt8 = 0x0A
    static let carriageReturn: UInt8 = 0x0D
    static let space: UInt8 = 0x20
    static let quote: UInt8 = 0x22
    static let hash: UInt8 = 0x23
    static let apostrophe: UInt8 = 0x27
    static let comma: UInt8 = 0x2C
    static let dot: UInt8 = 0x2E
    static let equals: UInt8 = 0x3D
    static let leftBracket: UInt8 = 0x5B
    static let backslash: UInt8 = 0x5C
    static let rightBracket: UInt8 = 0x5D
    static let leftBrace: UInt8 = 0x7B
    static let rightBrace: UInt8 = 0x7D
}

@inline(__always) func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

@inline(__always) func isControl(_ byte: UInt8) -> Bool {
    (byte < 0x20 && byte != ASCII.tab) || byte == 0x7F
}

@inline(__always) func isBareKeyByte(_ byte: UInt8) -> Bool {
    isDigit(byte) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x5F || byte == 0x2D
}

@inline(__always) func isNumberByte(_ byte: UInt8) -> Bool {
    // Everything a TOML number (or a date, to reject it clearly) can be made of.
    isBareKeyByte(byte) || byte == UInt8(ascii: "+") || byte == ASCII.dot
}

func hexDigitValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case 0x30...0x39: return byte - 0x30
    case 0x41...0x46: return byte - 0x41 + 10
    case 0x61...0x66: return byte - 0x61 + 10
    default: return nil
    }
}

func hex(_ byte: UInt8) -> String {
    let digits: StaticString = "0123456789ABCDEF"
    let pointer = digits.utf8Start
    return String(decoding: [pointer[Int(byte >> 4)], pointer[Int(byte & 0xF)]], as: UTF8.self)
}

func hex32(_ value: UInt32) -> String {
    var text = ""
    var shift: UInt32 = 24
    var started = false
    while true {
        let byte = UInt8(truncatingIfNeeded: value >> shift)
        if byte != 0 || started || shift <= 8 {
            text += hex(byte)
            started = true
        }
        if shift == 0 { break }
        shift -= 8
    }
    return text
}
