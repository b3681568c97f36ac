/// A Bluetooth device address: 48 bits, printed most significant byte first as BlueZ does
/// ("C6:B5:45:F6:F1:8E"); HCI sends it least significant byte first.
public struct BLEAddress: Hashable, Sendable, CustomStringConvertible {
    public var value: UInt64

    public init(value: UInt64) { self.value = value & 0xFFFF_FFFF_FFFF }

    /// From 6 bytes in HCI (little-endian) order.
    @inline(__always)
    init(littleEndian bytes: UnsafeRawBufferPointer, at offset: Int) {
        var value: UInt64 = 0
        var index = 5
        while index >= 0 {
            value = value << 8 | UInt64(bytes[offset + index])
            index -= 1
        }
        self.value = value
    }

    public var description: String {
        var text = ""
        var shift: UInt64 = 40
        while true {
            text += hex(UInt8(truncatingIfNeeded: value >> shift))
            if shift == 0 { break }
            text += ":"
            shift -= 8
        }
        return text
    }
}

/// One advertising report from an LE Advertising Report (legacy, subevent 0x02) or LE Extended
/// Advertising Report (subevent 0x0D). `data` points into the event buffer: valid only inside the
/// callback that received the report.
public struct AdvertisingReport {
    /// Legacy: 0 ADV_IND, 1 ADV_DIRECT_IND, 2 ADV_SCAN_IND, 3 ADV_NONCONN_IND, 4 SCAN_RSP.
    /// Extended: the Event_Type bit field (bit 4 = legacy PDU).
    public var eventType: UInt16
    /// 0 public, 1 random, 2 public identity, 3 random static identity, 0xFF anonymous.
    public var addressType: UInt8
    public var address: BLEAddress
    /// dBm; nil when the controller says "not available" (127).
    public var rssi: Int8?
    /// Extended reports only: the advertiser's TX power in dBm, nil when not available (127).
    public var txPower: Int8?
    public var isExtended: Bool
    public var data: UnsafeRawBufferPointer
}

/// Why an HCI event was not accepted. Every length is checked before it is used, so a hostile
/// or truncated event is rejected here and never read out of bounds.
public enum HCIEventError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not an LE Meta event carrying advertising reports (other events are not errors for the
    /// caller; they are ignored).
    case notAdvertising
    case truncated
    case lengthMismatch
    case badReportCount
    case reportOverrun
    case trailingBytes

    public var description: String {
        switch self {
        case .notAdvertising: return "not an LE advertising report event"
        case .truncated: return "event shorter than its header"
        case .lengthMismatch: return "parameter length does not match the event size"
        case .badReportCount: return "report count is 0 or does not fit the event"
        case .reportOverrun: return "a report runs past the end of the event"
        case .trailingBytes: return "bytes left over after the last report"
        }
    }
}

public enum HCIEvents {
    public static let packetTypeEvent: UInt8 = 0x04
    public static let leMetaEvent: UInt8 = 0x3E
    public static let advertisingReport: UInt8 = 0x02
    public static let extendedAdvertisingReport: UInt8 = 0x0D
    /// Bytes of one extended report before its data.
    static let extendedHeaderLength = 24
    /// Bytes of one legacy report around its data (type, address type, address, length, RSSI).
    static let legacyOverhead = 10

    /// Walks the advertising reports in one HCI event (starting at the event code; pass
    /// `skippingPacketType` when an H4 type byte 0x04 leads). Reports go to `body` only after the
    /// whole event has been validated, so a malformed event delivers nothing.
    @_noAllocation
    public static func forEachReport(in event: UnsafeRawBufferPointer, _ body: (AdvertisingReport) -> Void) -> Result<Int, HCIEventError> {
        switch validate(event) {
        case .failure(let error): return .failure(error)
        case .success(let count):
            deliver(event, count: count, body)
            return .success(count)
        }
    }

    /// The same walk without the allocation check, for output code whose callback builds text.
    public static func forEachReportDescribing(_ event: UnsafeRawBufferPointer, _ body: (AdvertisingReport) -> Void) -> Result<Int, HCIEventError> {
        switch validate(event) {
        case .failure(let error): return .failure(error)
        case .success(let count):
            deliver(event, count: count, body)
            return .success(count)
        }
    }

    /// Drops a leading H4 packet-type byte (0x04) if present.
    @inline(__always) @_noAllocation
    public static func withoutPacketType(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        if bytes.count >= 3, bytes[0] == packetTypeEvent, bytes[1] == leMetaEvent, Int(bytes[2]) == bytes.count - 3 {
            return UnsafeRawBufferPointer(rebasing: bytes[1...])
        }
        return bytes
    }

    private static func validate(_ event: UnsafeRawBufferPointer) -> Result<Int, HCIEventError> {
        guard event.count >= 2 else { return .failure(.truncated) }
        guard event[0] == leMetaEvent else { return .failure(.notAdvertising) }
        guard Int(event[1]) == event.count - 2 else { return .failure(.lengthMismatch) }
        guard event.count >= 4 else { return .failure(.truncated) }
        let subevent = event[2]
        guard subevent == advertisingReport || subevent == extendedAdvertisingReport else { return .failure(.notAdvertising) }
        let count = Int(event[3])
        // Each legacy report takes at least 10 bytes and each extended one 24: a count that cannot
        // fit is rejected before any report is walked.
        let minimum = subevent == advertisingReport ? legacyOverhead : extendedHeaderLength
        guard count >= 1, count * minimum <= event.count - 4 else { return .failure(.badReportCount) }
        var offset = 4
        for _ in 0..<count {
            let dataLengthOffset = subevent == advertisingReport ? offset + 8 : offset + 23
            guard dataLengthOffset < event.count else { return .failure(.reportOverrun) }
            let dataLength = Int(event[dataLengthOffset])
            let end = subevent == advertisingReport ? dataLengthOffset + 1 + dataLength + 1 : dataLengthOffset + 1 + dataLength
            guard end <= event.count else { return .failure(.reportOverrun) }
            offset = end
        }
        guard offset == event.count else { return .failure(.trailingBytes) }
        return .success(count)
    }

    private static func deliver(_ event: UnsafeRawBufferPointer, count: Int, _ body: (AdvertisingReport) -> Void) {
        var offset = 4
        let extended = event[2] == extendedAdvertisingReport
        for _ in 0..<count {
            if extended {
                let dataLength = Int(event[offset + 23])
                let rssi = Int8(bitPattern: event[offset + 13])
                let power = Int8(bitPattern: event[offset + 12])
                body(AdvertisingReport(
                    eventType: UInt16(event[offset]) | UInt16(event[offset + 1]) << 8,
                    addressType: event[offset + 2],
                    address: BLEAddress(littleEndian: event, at: offset + 3),
                    rssi: rssi == 127 ? nil : rssi,
                    txPower: power == 127 ? nil : power,
                    isExtended: true,
                    data: UnsafeRawBufferPointer(rebasing: event[(offset + 24)..<(offset + 24 + dataLength)])))
                offset += 24 + dataLength
            } else {
                let dataLength = Int(event[offset + 8])
                let rssi = Int8(bitPattern: event[offset + 9 + dataLength])
                body(AdvertisingReport(
                    eventType: UInt16(event[offset]),
                    addressType: event[offset + 1],
                    address: BLEAddress(littleEndian: event, at: offset + 2),
                    rssi: rssi == 127 ? nil : rssi,
                    txPower: nil,
                    isExtended: false,
                    data: UnsafeRawBufferPointer(rebasing: event[(offset + 9)..<(offset + 9 + dataLength)])))
                offset += 10 + dataLength
            }
        }
    }
}
