/// Hexadecimal text to bytes, for `--hex` arguments and hex-line captures.
public enum HexText {
    /// Bytes of `text`, ignoring spaces, colons and a leading "0x"; nil for odd length or a
    /// non-hex character.
    public static func bytes(_ text: String) -> [UInt8]? {
        var result: [UInt8] = []
        var high: UInt8? = nil
        var characters = Array(text.utf8)
        if characters.count >= 2, characters[0] == UInt8(ascii: "0"), characters[1] | 0x20 == UInt8(ascii: "x") {
            characters.removeFirst(2)
        }
        for byte in characters {
            if byte == ASCII.space || byte == UInt8(ascii: ":") || byte == ASCII.tab { continue }
            guard let value = hexDigitValue(byte) else { return nil }
            if let first = high {
                result.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return high == nil ? result : nil
    }

    public static func string(_ bytes: UnsafeRawBufferPointer) -> String {
        var text = ""
        for byte in bytes { text += hex(byte).lowercasedASCII }
        return text
    }
}

extension String {
    /// ASCII lower-casing without Unicode tables.
    var lowercasedASCII: String {
        var bytes = Array(utf8)
        for index in bytes.indices where bytes[index] >= 0x41 && bytes[index] <= 0x5A { bytes[index] |= 0x20 }
        return String(decoding: bytes, as: UTF8.self)
    }
}
