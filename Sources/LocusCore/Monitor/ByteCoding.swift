/// Little-endian writing into a caller's fixed buffer; running past its end sets `overflow`
/// instead of writing (the caller checks once at the end).
public struct ByteWriter {
    public let buffer: UnsafeMutableRawBufferPointer
    public private(set) var count = 0
    public private(set) var overflow = false

    public init(_ buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

    public var written: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: buffer[0..<count]) }

    @inline(__always)
    public mutating func put(_ value: UInt8) {
        guard count < buffer.count else { overflow = true; return }
        buffer[count] = value
        count += 1
    }

    public mutating func put(_ value: UInt16) { put(UInt8(truncatingIfNeeded: value)); put(UInt8(truncatingIfNeeded: value >> 8)) }
    public mutating func put(_ value: UInt32) { put(UInt16(truncatingIfNeeded: value)); put(UInt16(truncatingIfNeeded: value >> 16)) }
    public mutating func put(_ value: UInt64) { put(UInt32(truncatingIfNeeded: value)); put(UInt32(truncatingIfNeeded: value >> 32)) }
    public mutating func put(_ value: Int64) { put(UInt64(bitPattern: value)) }
    public mutating func put(_ value: Double) { put(value.bitPattern) }
    public mutating func put(_ value: Bool) { put(UInt8(value ? 1 : 0)) }

    public mutating func put(_ name: FixedName) {
        put(UInt8(name.count))
        for index in 0..<name.count { put(name[index]) }
    }
}

/// Little-endian reading; a short or malformed payload sets `failed` and yields zeros.
public struct ByteReader {
    public let bytes: UnsafeRawBufferPointer
    public private(set) var offset = 0
    public private(set) var failed = false

    public init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    public var isAtEnd: Bool { offset == bytes.count }

    @inline(__always)
    public mutating func uint8() -> UInt8 {
        guard offset < bytes.count else { failed = true; return 0 }
        offset += 1
        return bytes[offset - 1]
    }

    // Whole little-endian words when they are there; byte by byte (short input: the bytes that
    // are there, zeros for the rest, `failed` set) otherwise.
    public mutating func uint16() -> UInt16 {
        guard bytes.count - offset >= 2 else { return UInt16(uint8()) | UInt16(uint8()) << 8 }
        offset += 2
        return UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: offset - 2, as: UInt16.self))
    }

    public mutating func uint32() -> UInt32 {
        guard bytes.count - offset >= 4 else { return UInt32(uint16()) | UInt32(uint16()) << 16 }
        offset += 4
        return UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset - 4, as: UInt32.self))
    }

    public mutating func uint64() -> UInt64 {
        guard bytes.count - offset >= 8 else { return UInt64(uint32()) | UInt64(uint32()) << 32 }
        offset += 8
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset - 8, as: UInt64.self))
    }
    public mutating func int64() -> Int64 { Int64(bitPattern: uint64()) }
    public mutating func double() -> Double { Double(bitPattern: uint64()) }
    public mutating func bool() -> Bool { uint8() != 0 }

    public mutating func name() -> FixedName? {
        let count = Int(uint8())
        guard !failed, offset + count <= bytes.count else { failed = true; return nil }
        let name = FixedName(bytes: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]))
        offset += count
        if name == nil { failed = true }
        return name
    }
}
