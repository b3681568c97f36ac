// The gateway's own iBeacon (site `[bluetooth] advertise`): what it sends and how often, as the
// bytes both the HCI commands (HCICommands.swift) and the kernel's Add Advertising (Mgmt.swift)
// carry. Standard library only; fixed-size values.
//
// Layout (Bluetooth Core Specification Vol 3 Part C "Advertising and scan response data format"
// [11] and Core Specification Supplement Part A "Flags" [1.3] and "Manufacturer Specific Data"
// [1.4]; Apple's iBeacon frame as the project's decoder reads it, BeaconDecoder.manufacturer):
//   02 01 06                 Flags: LE General Discoverable, BR/EDR not supported
//   1A FF 4C 00 02 15        26 octets of manufacturer data: company 0x004C (little-endian),
//                            iBeacon type 0x02, 0x15 = 21 octets follow
//   UUID (16, big-endian) major (2, big-endian) minor (2, big-endian) measured power (1, signed)
// 30 octets in all, within the 31 a legacy advertising PDU carries.

/// A non-connectable iBeacon the gateway advertises. Only valid values can be built: the
/// interval within 100 ms to 10.24 s (0x00A0...0x4000 units of 0.625 ms: the legacy range for
/// non-connectable advertising, which every controller accepts).
public struct BeaconAdvertisement: Equatable, Sendable, CustomStringConvertible {
    public static let unitRange: ClosedRange<UInt16> = 0x00A0...0x4000
    /// The iBeacon convention's measured power at 1 m when nobody has measured it.
    public static let defaultMeasuredPower: Int8 = -59
    /// 1 s: a receiver scanning 10 % of the time still hears it about every 10 s, and the
    /// radio transmits 3 short PDUs a second.
    public static let defaultIntervalUnits: UInt16 = 1600

    public let uuid: BeaconUUID
    public let major: UInt16
    public let minor: UInt16
    /// RSSI at 1 m in dBm, the frame's last octet (what ranging compares the heard RSSI with).
    public let measuredPower: Int8
    /// Advertising interval in units of 0.625 ms.
    public let intervalUnits: UInt16

    /// Nil when the interval is outside `unitRange`.
    public init?(uuid: BeaconUUID, major: UInt16, minor: UInt16, measuredPower: Int8 = BeaconAdvertisement.defaultMeasuredPower,
                 intervalUnits: UInt16 = BeaconAdvertisement.defaultIntervalUnits) {
        guard BeaconAdvertisement.unitRange.contains(intervalUnits) else { return nil }
        self.uuid = uuid
        self.major = major
        self.minor = minor
        self.measuredPower = measuredPower
        self.intervalUnits = intervalUnits
    }

    /// From `UUID/MAJOR/MINOR` (a canonical UUID and two decimal numbers of 0 to 65535, the name
    /// presence messages and the fleet's floor plan, `[[gateway]] beacon`, give a beacon); nil
    /// when the text is not that or the interval is out of range.
    public init?(_ identity: String, measuredPower: Int8 = BeaconAdvertisement.defaultMeasuredPower,
                 intervalUnits: UInt16 = BeaconAdvertisement.defaultIntervalUnits) {
        let parts = identity.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, let uuid = BeaconUUID(String(parts[0])),
              let major = BeaconAdvertisement.decimal(parts[1]), let minor = BeaconAdvertisement.decimal(parts[2]) else { return nil }
        self.init(uuid: uuid, major: major, minor: minor, measuredPower: measuredPower, intervalUnits: intervalUnits)
    }

    /// Digits only (no sign, no spaces), 0...65535.
    private static func decimal(_ text: Substring) -> UInt16? {
        guard !text.isEmpty, text.utf8.count <= 5 else { return nil }
        var value = 0
        for byte in text.utf8 {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value <= 0xFFFF ? UInt16(value) : nil
    }

    /// "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/100/7".
    public var description: String { uuid.description + "/" + String(major) + "/" + String(minor) }

    public var intervalMilliseconds: Int { Int(intervalUnits) * ScanSettings.unitMicroseconds / 1000 }

    /// The Flags structure: LE General Discoverable Mode (bit 1) and BR/EDR Not Supported (bit 2).
    public static let flags: UInt8 = 0x06
    /// Apple's company identifier and the iBeacon type and length octets.
    public static let appleCompany: UInt16 = 0x004C
    public static let iBeaconType: UInt8 = 0x02
    public static let iBeaconLength: UInt8 = 0x15
    /// The manufacturer-specific structure's octets with its length octet (1 + 26).
    public static let iBeaconStructureCount = 27

    /// Flags then the iBeacon: what a controller sends on the air (30 octets).
    public var advertisingData: AdvertisingBytes {
        var bytes = AdvertisingBytes()
        bytes.append(0x02)
        bytes.append(ADType.flags)
        bytes.append(BeaconAdvertisement.flags)
        appendIBeacon(to: &bytes)
        return bytes
    }

    /// The iBeacon structure alone (27 octets): the kernel writes the Flags structure itself
    /// when it is asked to advertise as discoverable (Add Advertising flag bit 1).
    public var iBeaconStructure: AdvertisingBytes {
        var bytes = AdvertisingBytes()
        appendIBeacon(to: &bytes)
        return bytes
    }

    private func appendIBeacon(to bytes: inout AdvertisingBytes) {
        bytes.append(UInt8(BeaconAdvertisement.iBeaconStructureCount - 1))
        bytes.append(ADType.manufacturerData)
        bytes.append(UInt8(truncatingIfNeeded: BeaconAdvertisement.appleCompany))
        bytes.append(UInt8(truncatingIfNeeded: BeaconAdvertisement.appleCompany >> 8))
        bytes.append(BeaconAdvertisement.iBeaconType)
        bytes.append(BeaconAdvertisement.iBeaconLength)
        for index in 0..<16 { bytes.append(uuid.byte(index)) }
        bytes.append(UInt8(truncatingIfNeeded: major >> 8))
        bytes.append(UInt8(truncatingIfNeeded: major))
        bytes.append(UInt8(truncatingIfNeeded: minor >> 8))
        bytes.append(UInt8(truncatingIfNeeded: minor))
        bytes.append(UInt8(bitPattern: measuredPower))
    }
}

/// Up to 31 octets of advertising data (the legacy PDU's limit), in fixed storage.
public struct AdvertisingBytes: RandomAccessCollection, Equatable, Sendable {
    public static let capacity = 31
    private var storage = InlineArray<31, UInt8>(repeating: 0)
    public private(set) var count = 0

    public init() {}

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }
    public subscript(position: Int) -> UInt8 {
        precondition(position >= 0 && position < count, "AdvertisingBytes index out of range")
        return storage[position]
    }

    mutating func append(_ byte: UInt8) {
        precondition(count < AdvertisingBytes.capacity, "advertising data longer than 31 octets")
        storage[count] = byte
        count += 1
    }

    public static func == (left: AdvertisingBytes, right: AdvertisingBytes) -> Bool {
        guard left.count == right.count else { return false }
        for index in 0..<left.count where left.storage[index] != right.storage[index] { return false }
        return true
    }

    /// The octets as a raw buffer, valid inside `body` (for the decoders).
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        storage.span.withUnsafeBytes { raw in body(UnsafeRawBufferPointer(rebasing: raw[0..<count])) }
    }
}
