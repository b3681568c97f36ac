/// A 128-bit beacon proximity UUID as a fixed-size value (two words), never a String, so that
/// hashing and comparing it in the hot path costs a few instructions and no allocation.
public struct BeaconUUID: Hashable, Sendable, CustomStringConvertible {
    /// Bytes 0...7, big-endian (as written in the canonical text form).
    public var high: UInt64
    /// Bytes 8...15, big-endian.
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// From 16 bytes in transmission order (iBeacon and AltBeacon send the UUID big-endian,
    /// inside manufacturer data).
    public init(bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count >= 16)
        var high: UInt64 = 0
        var low: UInt64 = 0
        for index in 0..<8 { high = high << 8 | UInt64(bytes[index]) }
        for index in 8..<16 { low = low << 8 | UInt64(bytes[index]) }
        self.init(high: high, low: low)
    }

    /// From 16 bytes sent little-endian: the 128-bit service UUIDs of advertising data (AD types
    /// 0x06 and 0x07 lists, 0x15 solicitation, 0x21 service data) are the canonical bytes, all 16
    /// reversed. `1b c5 d5 a5 02 00 46 9a e1 11 b7 8d 60 b4 45 2d` is
    /// 2D45B460-8DB7-11E1-9A46-0002A5D5C51B.
    @_noAllocation
    public init(littleEndian bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count >= 16)
        var high: UInt64 = 0
        var low: UInt64 = 0
        for index in 0..<8 { high = high << 8 | UInt64(bytes[15 - index]) }
        for index in 8..<16 { low = low << 8 | UInt64(bytes[15 - index]) }
        self.init(high: high, low: low)
    }

    /// Parses the canonical 8-4-4-4-12 form (either case); nil for anything else.
    public init?(_ text: String) {
        var high: UInt64 = 0
        var low: UInt64 = 0
        var digits = 0
        var position = 0
        for byte in text.utf8 {
            if position == 8 || position == 13 || position == 18 || position == 23 {
                guard byte == UInt8(ascii: "-") else { return nil }
                position += 1
                continue
            }
            guard let value = hexDigitValue(byte) else { return nil }
            if digits < 16 { high = high << 4 | UInt64(value) } else { low = low << 4 | UInt64(value) }
            digits += 1
            position += 1
        }
        guard position == 36 else { return nil }
        self.init(high: high, low: low)
    }

    /// Canonical upper-case text form, as Core Location's `UUID.uuidString` prints it.
    public var description: String { JSONWriter.rendering(capacity: 40) { $0.text(self) } }

    public func byte(_ index: Int) -> UInt8 {
        index < 8 ? UInt8(truncatingIfNeeded: high >> UInt64(56 - 8 * index))
                  : UInt8(truncatingIfNeeded: low >> UInt64(56 - 8 * (index - 8)))
    }
}
