/// RFC 4648 base64 with padding (the signature line).
public enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let count = min(3, bytes.count - index)
            var group: UInt32 = 0
            for offset in 0..<3 { group = group << 8 | UInt32(offset < count ? bytes[index + offset] : 0) }
            for position in 0..<4 {
                output.append(position <= count ? alphabet[Int(group >> UInt32(18 - 6 * position) & 0x3F)] : UInt8(ascii: "="))
            }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// nil for text that is not padded base64.
    public static func decode(_ text: String) -> [UInt8]? {
        let characters = Array(text.utf8)
        guard characters.count % 4 == 0 else { return nil }
        var output: [UInt8] = []
        var index = 0
        while index < characters.count {
            var group: UInt32 = 0
            var padding = 0
            for offset in 0..<4 {
                let character = characters[index + offset]
                var value: UInt32 = 0
                if character == UInt8(ascii: "=") && index + 4 == characters.count && offset >= 2 {
                    padding += 1
                } else {
                    guard padding == 0, let position = alphabet.firstIndex(of: character) else { return nil }
                    value = UInt32(position)
                }
                group = group << 6 | value
            }
            for offset in 0..<(3 - padding) { output.append(UInt8(truncatingIfNeeded: group >> UInt32(16 - 8 * offset))) }
            index += 4
        }
        return output
    }
}
