/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as iSCSI (RFC 3720), ext4 and SSE 4.2
/// compute it. Slicing-by-8: eight 256-entry tables, eight bytes per step.
public enum CRC32C {
    public static let initialState: UInt32 = 0xFFFF_FFFF

    /// The checksum of `bytes`.
    @_noAllocation
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        finish(update(initialState, bytes))
    }

    @inline(__always)
    public static func finish(_ state: UInt32) -> UInt32 { ~state }

    /// Continues a running (not yet finished) state over `bytes`.
    @_noAllocation
    public static func update(_ state: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard var pointer = bytes.baseAddress else { return state }
        var remaining = bytes.count
        var crc = state
        // The tables are built on first use (one 8 KiB allocation, at start-up when the log is
        // opened); every later call only reads them.
        let table = _unsafePerformance { tables }
        while remaining >= 8 {
            let word = UInt64(littleEndian: pointer.loadUnaligned(as: UInt64.self))
            let low = UInt32(truncatingIfNeeded: word) ^ crc
            let high = UInt32(truncatingIfNeeded: word >> 32)
            crc = table[7 &* 256 &+ Int(low & 0xFF)]
                ^ table[6 &* 256 &+ Int((low >> 8) & 0xFF)]
                ^ table[5 &* 256 &+ Int((low >> 16) & 0xFF)]
                ^ table[4 &* 256 &+ Int(low >> 24)]
                ^ table[3 &* 256 &+ Int(high & 0xFF)]
                ^ table[2 &* 256 &+ Int((high >> 8) & 0xFF)]
                ^ table[1 &* 256 &+ Int((high >> 16) & 0xFF)]
                ^ table[Int(high >> 24)]
            pointer += 8
            remaining &-= 8
        }
        while remaining > 0 {
            crc = table[Int((crc ^ UInt32(pointer.load(as: UInt8.self))) & 0xFF)] ^ (crc >> 8)
            pointer += 1
            remaining &-= 1
        }
        return crc
    }

    /// Table k maps a byte to its CRC contribution k bytes further on; built once, on first use.
    // Immutable after its one-time initialisation, which the language runtime synchronises.
    nonisolated(unsafe) private static let tables: UnsafePointer<UInt32> = {
        let table = UnsafeMutablePointer<UInt32>.allocate(capacity: 8 * 256)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            table[byte] = crc
        }
        for slice in 1..<8 {
            for byte in 0..<256 {
                let previous = table[(slice - 1) * 256 + byte]
                table[slice * 256 + byte] = (previous >> 8) ^ table[Int(previous & 0xFF)]
            }
        }
        return UnsafePointer(table)
    }()
}
