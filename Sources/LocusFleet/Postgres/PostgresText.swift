/// Values in PostgreSQL's text formats, for parameters and COPY data. Callers never splice a
/// value into SQL: a batch goes as COPY rows, or as a few array parameters (`unnest($1::text[], ...)`).
public enum PostgresText {
    /// An array literal `{"a","b",NULL}` of text elements, each quoted and escaped (`"` and `\`),
    /// so the element type's input function reads it (`text`, `jsonb`, `timestamptz`, `bytea`).
    public static func array(_ elements: [String?]) -> String {
        var literal: [UInt8] = [UInt8(ascii: "{")]
        literal.reserveCapacity(elements.reduce(2) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (index, element) in elements.enumerated() {
            if index > 0 { literal.append(UInt8(ascii: ",")) }
            guard let element else {
                literal.append(contentsOf: "NULL".utf8)
                continue
            }
            literal.append(UInt8(ascii: "\""))
            for byte in element.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { literal.append(UInt8(ascii: "\\")) }
                literal.append(byte)
            }
            literal.append(UInt8(ascii: "\""))
        }
        literal.append(UInt8(ascii: "}"))
        return String(decoding: literal, as: UTF8.self)
    }

    /// `bytea`'s hex input format: `\x4142`.
    public static func byteaHex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        text.reserveCapacity(2 + 2 * bytes.count)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// One field of COPY's text format into `row`: `\N` for NULL; backslash, tab, newline and
    /// carriage return escaped.
    public static func copyField(_ value: String?, into row: inout [UInt8]) {
        guard let value else {
            row.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "N")])
            return
        }
        row.appendEscaping(value) { byte in byte == UInt8(ascii: "\\") || byte == 0x09 || byte == 0x0A || byte == 0x0D } escape: { byte, row in
            switch byte {
            case 0x09: row.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x0A: row.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: row.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            default: row.append(contentsOf: [UInt8(ascii: "\\"), byte])
            }
        }
    }
}

extension Array where Element == UInt8 {
    /// Appends `string`'s UTF-8, each byte `needsEscape` picks written by `escape`; the runs
    /// between them are copied whole (the common field has no such byte at all).
    @inline(__always)
    mutating func appendEscaping(_ string: String, needsEscape: (UInt8) -> Bool, escape: (UInt8, inout [UInt8]) -> Void) {
        var string = string
        string.withUTF8 { bytes in
            var start = 0
            for index in bytes.indices where needsEscape(bytes[index]) {
                append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                escape(bytes[index], &self)
                start = index + 1
            }
            append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
        }
    }
}
