/// btsnoop captures (RFC 1761 framing, as written by `btmon -w`, Android's HCI snoop log and
/// hcidump): the HCI events in them, with their capture times.
public enum BTSnoop {
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        case notBTSnoop
        case unsupportedDatalink(UInt32)
        case truncatedRecord(offset: Int)

        public var description: String {
            switch self {
            case .notBTSnoop: return "not a btsnoop file (no \"btsnoop\" header)"
            case .unsupportedDatalink(let type): return "unsupported btsnoop datalink type \(type) (expected 1001, 1002 or 2001)"
            case .truncatedRecord(let offset): return "record at byte \(offset) is cut off"
            }
        }
    }

    /// Microseconds from 0000-01-01 (btsnoop's epoch) to 1970-01-01.
    public static let unixEpochOffsetUs: Int64 = 0x00DC_DDB3_0F2F_8000

    public static func isBTSnoop(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let magic: StaticString = "btsnoop"
        guard bytes.count >= 16 else { return false }
        for index in 0..<7 where bytes[index] != magic.utf8Start[index] { return false }
        return bytes[7] == 0
    }

    /// Calls `body` with each HCI event (starting at the event code, no H4 type byte) and its
    /// capture time in Unix microseconds. Commands, ACL data and other packets are skipped.
    /// Returns the number of events, or the problem that stopped reading (events before it were
    /// delivered).
    public static func forEachEvent(_ bytes: UnsafeRawBufferPointer, _ body: (Int64, UnsafeRawBufferPointer) -> Void) -> Result<Int, Failure> {
        guard isBTSnoop(bytes) else { return .failure(.notBTSnoop) }
        let datalink = uint32BE(bytes, 12)
        guard datalink == 1001 || datalink == 1002 || datalink == 2001 else { return .failure(.unsupportedDatalink(datalink)) }
        var offset = 16
        var events = 0
        while offset < bytes.count {
            guard offset + 24 <= bytes.count else { return .failure(.truncatedRecord(offset: offset)) }
            let included = Int(uint32BE(bytes, offset + 4))
            let flags = uint32BE(bytes, offset + 8)
            let timestamp = Int64(bitPattern: UInt64(uint32BE(bytes, offset + 16)) << 32 | UInt64(uint32BE(bytes, offset + 20)))
            let start = offset + 24
            guard start + included <= bytes.count else { return .failure(.truncatedRecord(offset: offset)) }
            let packet = UnsafeRawBufferPointer(rebasing: bytes[start..<(start + included)])
            offset = start + included
            let time = timestamp - unixEpochOffsetUs
            switch datalink {
            case 1001:
                // Unencapsulated HCI: flag bit 1 = command/event, bit 0 = received.
                if flags & 0x3 == 0x3 { body(time, packet); events += 1 }
            case 1002:
                // H4 (UART): the first byte is the packet type.
                if packet.count >= 1, packet[0] == HCIEvents.packetTypeEvent {
                    body(time, UnsafeRawBufferPointer(rebasing: packet[1...]))
                    events += 1
                }
            default:
                // Linux monitor (btmon): the low 16 bits of the flags are the opcode; 3 = event.
                if flags & 0xFFFF == 3 { body(time, packet); events += 1 }
            }
        }
        return .success(events)
    }

    @inline(__always)
    static func uint32BE(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }
}
