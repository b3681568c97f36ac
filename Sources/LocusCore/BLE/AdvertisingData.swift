/// AD structure types Locus reads (Bluetooth Assigned Numbers, "Common Data Types").
public enum ADType {
    public static let flags: UInt8 = 0x01
    public static let incomplete16: UInt8 = 0x02
    public static let complete16: UInt8 = 0x03
    public static let incomplete32: UInt8 = 0x04
    public static let complete32: UInt8 = 0x05
    public static let incomplete128: UInt8 = 0x06
    public static let complete128: UInt8 = 0x07
    public static let shortenedName: UInt8 = 0x08
    public static let completeName: UInt8 = 0x09
    public static let txPower: UInt8 = 0x0A
    /// Service solicitation lists: the services a device asks a central to offer.
    public static let solicited16: UInt8 = 0x14
    public static let solicited128: UInt8 = 0x15
    public static let solicited32: UInt8 = 0x1F
    public static let serviceData16: UInt8 = 0x16
    public static let serviceData32: UInt8 = 0x20
    public static let serviceData128: UInt8 = 0x21
    public static let manufacturerData: UInt8 = 0xFF
}

public enum AdvertisingDataError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A structure's length byte runs past the end of the data.
    case overrun(offset: Int)
    /// A structure with a length of 1 or more whose payload cannot be what its type says
    /// (a TX power that is not 1 byte, a 16-bit UUID list with an odd length, ...).
    case badField(type: UInt8, offset: Int)

    public var description: String {
        switch self {
        case .overrun(let offset): return "AD structure at byte \(offset) runs past the end of the data"
        case .badField(let type, let offset): return "AD structure 0x\(hex(type)) at byte \(offset) has an impossible length"
        }
    }
}

/// The outcome of walking advertising data: how many structures were good, and the first
/// problem if the data did not end cleanly.
public struct AdvertisingWalk: Equatable, Sendable {
    public var structures: Int
    public var error: AdvertisingDataError?
}

public enum AdvertisingData {
    /// Walks the AD structures (`length, type, payload[length - 1]`). A length of 0 ends the
    /// significant part (the rest is padding, as in scan responses padded to 31 bytes).
    ///
    /// The good structures before a problem are delivered and the problem is reported: a
    /// structure whose length runs past the end (a truncated tail, common in captures) or whose
    /// length cannot be right for its type stops the walk. Nothing is read out of bounds.
    @_noAllocation
    public static func forEachStructure(_ data: UnsafeRawBufferPointer, _ body: (UInt8, UnsafeRawBufferPointer) -> Void) -> AdvertisingWalk {
        walk(data, body)
    }

    /// The walk itself. (Two functions rather than one: the shape the optimizer inlines best into
    /// the beacon decoder, measured with `locus-bench ble`.)
    static func walk(_ data: UnsafeRawBufferPointer, _ body: (UInt8, UnsafeRawBufferPointer) -> Void) -> AdvertisingWalk {
        var offset = 0
        var count = 0
        // Bounded: each structure advances by at least 2 bytes.
        while offset < data.count {
            let length = Int(data[offset])
            if length == 0 { break }
            guard offset + 1 + length <= data.count else { return AdvertisingWalk(structures: count, error: .overrun(offset: offset)) }
            let type = data[offset + 1]
            guard plausible(type, payload: length - 1) else {
                return AdvertisingWalk(structures: count, error: .badField(type: type, offset: offset))
            }
            body(type, UnsafeRawBufferPointer(rebasing: data[(offset + 2)..<(offset + 1 + length)]))
            offset += 1 + length
            count += 1
        }
        return AdvertisingWalk(structures: count, error: nil)
    }

    /// Whether a payload of this length can be what the type says.
    @inline(__always)
    private static func plausible(_ type: UInt8, payload: Int) -> Bool {
        switch type {
        case ADType.flags, ADType.txPower: return payload == 1
        case ADType.incomplete16, ADType.complete16: return payload % 2 == 0
        case ADType.incomplete32, ADType.complete32: return payload % 4 == 0
        case ADType.incomplete128, ADType.complete128: return payload % 16 == 0
        case ADType.serviceData16, ADType.manufacturerData: return payload >= 2
        case ADType.serviceData32: return payload >= 4
        case ADType.serviceData128: return payload >= 16
        default: return type > ADType.solicited32 || plausibleOther(type, payload: payload)
        }
    }

    /// The rarer types, out of line: solicitation lists. (Kept out of `plausible` so that the
    /// walk stays small enough for the optimizer to inline it into the beacon decoder: with the
    /// three cases in the switch an iBeacon report cost 472 instructions instead of 448; so 453.)
    @inline(never)
    private static func plausibleOther(_ type: UInt8, payload: Int) -> Bool {
        switch type {
        case ADType.solicited16: return payload % 2 == 0
        case ADType.solicited32: return payload % 4 == 0
        case ADType.solicited128: return payload % 16 == 0
        default: return true
        }
    }

    /// Little-endian 16-bit value at `offset` (company identifiers, 16-bit UUIDs).
    @inline(__always)
    static func uint16LE(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt16 {
        UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    /// Big-endian 16-bit value (iBeacon and AltBeacon major/minor, Eddystone TLM fields).
    @inline(__always)
    static func uint16BE(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt16 {
        UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    @inline(__always)
    static func uint32BE(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        UInt32(uint16BE(bytes, offset)) << 16 | UInt32(uint16BE(bytes, offset + 2))
    }
}
