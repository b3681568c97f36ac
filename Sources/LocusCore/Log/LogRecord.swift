// The log's record codec: a self-delimiting, checksummed record, encoded into and decoded from
// caller-provided bytes. No I/O; LocusDevices' LogStore puts records into segment files and the
// engine defines what payloads mean.
//
// Record layout (all integers little-endian, no padding; a record starts where the previous one
// ends, the first at offset 0 of its segment file):
//
//    0       1       2       3       4       5       6       7       8
//    +-------+-------+---------------+-------------------------------+
//  0 | magic |  type |     flags     |         payload length        |
//    +---------------------------------------------------------------+
//  8 |                    sequence number (UInt64)                   |
//    +---------------------------------------------------------------+
// 16 |            time (Int64, UTC nanoseconds since 1970)           |
//    +-------------------------------+-------------------------------+
// 24 |  header CRC32C: bytes 0..<24  | record CRC32C: 0..<24, payload|
//    +-------------------------------+-------------------------------+
// 32 | payload: `payload length` bytes, at most 64 KiB ...
//
//  magic          0xB1: "Locus log record, format 1". An incompatible format changes it.
//  type           LogRecordType raw value; 0 is never written (zero-filled space is not a record).
//  flags          LogRecordFlags; bits 2-15 are reserved and must be 0.
//  payload length at most `LogRecord.maximumPayloadSize`.
//  sequence       +1 per record, across segments.
//  time           the writer's UTC clock in nanoseconds (not checked for order: clocks step).
//  header CRC     CRC32C of bytes 0..<24.
//  record CRC     CRC32C of bytes 0..<24 followed by the payload (the header CRC's running state,
//                 continued over the payload), so it also binds the payload to its header.
//
// Why two checksums: the length field decides how many bytes belong to the record, so it must be
// proven before it is used. The decoder checks the header CRC first, over a fixed 24 bytes; only
// a header that passes has its length believed, and even then the length is bounded by the
// maximum record size. A corrupt length therefore never makes a reader consume, wait for, or
// checksum bytes that are not the record's, and the reader can say precisely what went wrong:
// a torn write (header good, payload short), a corrupt header, or a corrupt payload. CRC32C
// detects every 1-, 2- and 3-bit error and every burst up to 32 bits in both spans.

/// What a record is about. The engine defines each payload; unknown non-zero codes (a newer
/// writer's) still decode, so a reader skips them rather than calling them corrupt.
public enum LogRecordType: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case start = 1
    case stop = 2
    case conditionAdded = 3
    case conditionRemoved = 4
    case event = 5
    case checkpoint = 6
    case diagnostic = 7
    case fix = 8
    case gpio = 9
    /// How far a control-socket client has consumed a monitor's events (see `ack`).
    case consumer = 10
    /// A stay at one place (CLVisit): arrival, departure, centre and radius.
    case visit = 11
    /// How far the MQTT uplink has delivered the log to the broker (see `LogPayload.writeUplink`).
    case uplink = 12
    /// A configuration or a command from the fleet, applied, run or refused (`LogPayload.RemoteResult`).
    case remote = 13
    // 14...127 reserved for later record kinds; 128...255 for site or test use.

    /// The name in the export (a static string, for writers that must not allocate).
    public var name: StaticString {
        switch self {
        case .start: return "start"
        case .stop: return "stop"
        case .conditionAdded: return "condition-added"
        case .conditionRemoved: return "condition-removed"
        case .event: return "event"
        case .checkpoint: return "checkpoint"
        case .diagnostic: return "diagnostic"
        case .fix: return "fix"
        case .gpio: return "gpio"
        case .consumer: return "consumer"
        case .visit: return "visit"
        case .uplink: return "uplink"
        case .remote: return "remote"
        }
    }

    public var description: String { name.description }
}

/// Header flags. A checkpoint (every record of every monitor) may need more than one record: its
/// records form a group, the first without `.continuation`, every one but the last with
/// `.moreFollow`. A single-record group has no flags. A group is complete once a record without
/// `.moreFollow` closes it; replay uses only complete checkpoints.
public struct LogRecordFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// More records of this group follow.
    public static let moreFollow = LogRecordFlags(rawValue: 1 << 0)
    /// This record continues a group begun by an earlier record.
    public static let continuation = LogRecordFlags(rawValue: 1 << 1)

    public static let known = LogRecordFlags(rawValue: 0b11)
}

/// A decoded (or to be encoded) record header.
public struct LogRecordHeader: Equatable, Sendable {
    /// The raw type byte; `type` is nil for codes this version does not know.
    public var typeCode: UInt8
    public var flags: LogRecordFlags
    public var payloadLength: Int
    public var sequence: UInt64
    /// UTC nanoseconds since 1970-01-01.
    public var time: Int64

    public init(type: LogRecordType, flags: LogRecordFlags = [], payloadLength: Int, sequence: UInt64, time: Int64) {
        self.init(typeCode: type.rawValue, flags: flags, payloadLength: payloadLength, sequence: sequence, time: time)
    }

    public init(typeCode: UInt8, flags: LogRecordFlags, payloadLength: Int, sequence: UInt64, time: Int64) {
        self.typeCode = typeCode
        self.flags = flags
        self.payloadLength = payloadLength
        self.sequence = sequence
        self.time = time
    }

    public var type: LogRecordType? { LogRecordType(rawValue: typeCode) }

    /// Header plus payload: where the next record starts.
    public var recordSize: Int { LogRecord.headerSize + payloadLength }
}

/// Why bytes are not a record. Decoder reasons first; the last two are the store's (a record that
/// is intact but does not belong where it was found).
public enum LogRecordRejection: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// Fewer bytes than a header: a write torn inside the header.
    case truncatedHeader = 1
    /// At least a header's worth of zero bytes: space the file system extended but never wrote.
    case zeroFill
    case badMagic
    case headerChecksum
    /// The header checksum matched but the type byte is 0, which no writer produces.
    case invalidType
    case unsupportedFlags
    /// The header checksum matched but the length exceeds the maximum record size.
    case oversizedLength
    /// The header is intact but the payload runs past the end of the bytes: a torn write.
    case truncatedPayload
    case recordChecksum
    /// An intact record whose sequence number is not the one expected at its position.
    case outOfSequence
    /// Sequence numbers missing between two segment files (a segment deleted out of order).
    case sequenceGap

    public var description: String {
        switch self {
        case .truncatedHeader: return "torn header (fewer bytes than a record header)"
        case .zeroFill: return "zero bytes where a record should start (unwritten space)"
        case .badMagic: return "not a record (bad magic byte)"
        case .headerChecksum: return "header checksum mismatch"
        case .invalidType: return "record type 0"
        case .unsupportedFlags: return "unsupported flag bits"
        case .oversizedLength: return "length beyond the maximum record size"
        case .truncatedPayload: return "torn record (payload runs past the end)"
        case .recordChecksum: return "record checksum mismatch"
        case .outOfSequence: return "sequence number out of order"
        case .sequenceGap: return "sequence numbers missing before this segment"
        }
    }
}

/// The outcome of decoding at one position.
public enum LogRecordDecoding: Equatable, Sendable {
    /// An intact record; `payload` indexes the buffer that was decoded, and its upper bound is where
    /// the next record starts.
    case record(LogRecordHeader, payload: Range<Int>)
    case rejected(LogRecordRejection)
}

public enum LogRecordEncodingError: Error, Equatable, Sendable {
    case payloadTooLarge(Int)
    case bufferTooSmall(needed: Int)
}

public enum LogRecord {
    public static let magic: UInt8 = 0xB1
    public static let headerSize = 32
    /// Bytes covered by the header checksum.
    static let checkedHeaderSize = 24
    public static let maximumPayloadSize = 64 * 1024
    public static let maximumRecordSize = headerSize + maximumPayloadSize

    /// Encodes one record at the start of `buffer` and returns its size. The buffer must hold
    /// `headerSize + payload.count` bytes. Does not allocate.
    @_noAllocation
    public static func encode(_ header: LogRecordHeader, payload: UnsafeRawBufferPointer,
                              into buffer: UnsafeMutableRawBufferPointer) throws(LogRecordEncodingError) -> Int {
        guard payload.count <= maximumPayloadSize else { throw .payloadTooLarge(payload.count) }
        let size = headerSize + payload.count
        guard buffer.count >= size else { throw .bufferTooSmall(needed: size) }
        // Programmer errors, not operating ones: the writer owns these fields.
        precondition(header.typeCode != 0, "log record type 0 is reserved")
        precondition(header.flags.isSubset(of: .known), "unknown log record flags")
        precondition(header.payloadLength == payload.count, "header length differs from the payload")

        buffer[0] = magic
        buffer[1] = header.typeCode
        store16(header.flags.rawValue, buffer, 2)
        store32(UInt32(payload.count), buffer, 4)
        store64(header.sequence, buffer, 8)
        store64(UInt64(bitPattern: header.time), buffer, 16)
        let checkedHeader = UnsafeRawBufferPointer(start: buffer.baseAddress, count: checkedHeaderSize)
        let headerState = CRC32C.update(CRC32C.initialState, checkedHeader)
        store32(CRC32C.finish(headerState), buffer, 24)
        store32(CRC32C.finish(CRC32C.update(headerState, payload)), buffer, 28)
        if payload.count > 0 {
            (buffer.baseAddress! + headerSize).copyMemory(from: payload.baseAddress!, byteCount: payload.count)
        }
        // Paired assertion: what was written decodes to what was asked (debug builds; it doubles
        // the checksum work).
        assert(decode(UnsafeRawBufferPointer(rebasing: buffer[0..<size]), at: 0) == .record(header, payload: headerSize..<size))
        return size
    }

    /// Validates the record starting at `offset` of `bytes` (which may hold more records after
    /// it). Never reads outside `bytes`, and never believes a length the header checksum did not
    /// cover. Does not allocate.
    @_noAllocation
    public static func decode(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> LogRecordDecoding {
        precondition(offset >= 0 && offset <= bytes.count, "decode offset outside the buffer")
        let available = bytes.count - offset
        guard available >= headerSize else { return .rejected(.truncatedHeader) }
        let base = bytes.baseAddress! + offset
        let header = UnsafeRawBufferPointer(start: base, count: headerSize)
        guard header[0] == magic else {
            return .rejected(isZero(header) ? .zeroFill : .badMagic)
        }
        let headerState = CRC32C.update(CRC32C.initialState, UnsafeRawBufferPointer(start: base, count: checkedHeaderSize))
        guard CRC32C.finish(headerState) == load32(header, 24) else { return .rejected(.headerChecksum) }
        let typeCode = header[1]
        let flags = LogRecordFlags(rawValue: load16(header, 2))
        let length = Int(load32(header, 4))
        guard typeCode != 0 else { return .rejected(.invalidType) }
        guard flags.isSubset(of: .known) else { return .rejected(.unsupportedFlags) }
        guard length <= maximumPayloadSize else { return .rejected(.oversizedLength) }
        guard available - headerSize >= length else { return .rejected(.truncatedPayload) }
        let payload = UnsafeRawBufferPointer(start: base + headerSize, count: length)
        guard CRC32C.finish(CRC32C.update(headerState, payload)) == load32(header, 28) else {
            return .rejected(.recordChecksum)
        }
        let decoded = LogRecordHeader(typeCode: typeCode, flags: flags, payloadLength: length,
                                      sequence: load64(header, 8), time: Int64(bitPattern: load64(header, 16)))
        // Paired assertion with `encode`: an accepted header satisfies every encoder precondition.
        assert(decoded.typeCode != 0 && decoded.flags.isSubset(of: .known) && decoded.payloadLength <= maximumPayloadSize)
        let start = offset + headerSize
        return .record(decoded, payload: start..<(start + length))
    }

    @inline(__always)
    private static func isZero(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        while index < bytes.count {
            if bytes[index] != 0 { return false }
            index += 1
        }
        return true
    }

    @inline(__always)
    static func load16(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt16 {
        UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }

    @inline(__always)
    static func load32(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    @inline(__always)
    static func load64(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
        UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    @inline(__always)
    private static func store16(_ value: UInt16, _ bytes: UnsafeMutableRawBufferPointer, _ offset: Int) {
        bytes.storeBytes(of: value.littleEndian, toByteOffset: offset, as: UInt16.self)
    }

    @inline(__always)
    private static func store32(_ value: UInt32, _ bytes: UnsafeMutableRawBufferPointer, _ offset: Int) {
        bytes.storeBytes(of: value.littleEndian, toByteOffset: offset, as: UInt32.self)
    }

    @inline(__always)
    private static func store64(_ value: UInt64, _ bytes: UnsafeMutableRawBufferPointer, _ offset: Int) {
        bytes.storeBytes(of: value.littleEndian, toByteOffset: offset, as: UInt64.self)
    }
}

/// Follows checkpoint groups (see `LogRecordFlags`) through a stream of records in sequence
/// order, and remembers where the newest complete checkpoint starts: replay begins there, and
/// retention keeps the segment that holds it.
public struct LogCheckpointTracker: Equatable, Sendable {
    /// Sequence number of the first record of the newest complete checkpoint.
    public private(set) var lastComplete: UInt64?
    /// The first record of a checkpoint group that has not been closed yet.
    public private(set) var open: UInt64?

    public init() {}

    @_noAllocation
    public mutating func note(_ header: LogRecordHeader) {
        guard header.typeCode == LogRecordType.checkpoint.rawValue else { return }
        if !header.flags.contains(.continuation) {
            open = header.sequence
        } else if open == nil {
            return // the rest of a group whose start was cut off: not a usable checkpoint
        }
        if !header.flags.contains(.moreFollow) {
            lastComplete = open
            open = nil
        }
    }

    /// Records were lost here (a corrupt region, a gap): a group left open can no longer complete.
    public mutating func interrupt() { open = nil }
}
