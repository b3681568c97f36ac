/// A beacon frame found in advertising data. Identities are fixed-size values, never Strings:
/// the engine hashes and compares them in its hot loop.
public enum Beacon: Equatable {
    /// Apple iBeacon: manufacturer data 0x004C, type 0x02, length 0x15.
    case iBeacon(uuid: BeaconUUID, major: UInt16, minor: UInt16, measuredPower: Int8)
    /// AltBeacon: any company, beacon code 0xBEAC. `reserved` is absent in the short variant
    /// some beacons send (AD length 0x1A), which the reference parser accepts too.
    case altBeacon(company: UInt16, id1: BeaconUUID, id2: UInt16, id3: UInt16, referenceRSSI: Int8, reserved: UInt8?)
    /// Eddystone-UID: a 10-byte namespace and 6-byte instance; TX power at 0 m.
    case eddystoneUID(namespace: EddystoneNamespace, instance: UInt64, txPower: Int8)
    /// Eddystone-URL: the compressed URL as sent (expand with `EddystoneURL.expand`).
    case eddystoneURL(txPower: Int8, url: EddystoneURL)
    /// Eddystone-TLM version 0 (plain). Temperature is nil when the beacon reports 0x8000.
    case eddystoneTLM(voltageMV: UInt16, temperatureC: Double?, advertisingCount: UInt32, uptimeTenths: UInt32)
    /// Eddystone-TLM version 1 (encrypted, for EID beacons).
    case eddystoneEncryptedTLM(data: EddystoneCiphertext, salt: UInt16, mic: UInt16)
    /// Eddystone-EID: an 8-byte rotating ephemeral identifier.
    case eddystoneEID(txPower: Int8, identifier: UInt64)
    /// UriBeacon (service 0xFED8), Eddystone-URL's predecessor: same URL compression.
    case uriBeacon(txPower: Int8, url: EddystoneURL)

    public var kind: String {
        switch self {
        case .iBeacon: return "ibeacon"
        case .altBeacon: return "altbeacon"
        case .eddystoneUID: return "eddystone-uid"
        case .eddystoneURL: return "eddystone-url"
        case .eddystoneTLM: return "eddystone-tlm"
        case .eddystoneEncryptedTLM: return "eddystone-etlm"
        case .eddystoneEID: return "eddystone-eid"
        case .uriBeacon: return "uribeacon"
        }
    }
}

/// Eddystone-UID namespace: 10 bytes, kept as two words.
public struct EddystoneNamespace: Hashable, Sendable, CustomStringConvertible {
    /// Bytes 0...7, big-endian.
    public var high: UInt64
    /// Bytes 8...9.
    public var low: UInt16

    public var description: String {
        var text = ""
        for index in 0..<8 { text += hex(UInt8(truncatingIfNeeded: high >> UInt64(56 - 8 * index))) }
        return text + hex(UInt8(low >> 8)) + hex(UInt8(truncatingIfNeeded: low))
    }
}

/// The 12 encrypted bytes of an Eddystone eTLM frame.
public struct EddystoneCiphertext: Equatable, Sendable, CustomStringConvertible {
    public var bytes: InlineArray<12, UInt8>

    public static func == (a: EddystoneCiphertext, b: EddystoneCiphertext) -> Bool {
        for index in 0..<12 where a.bytes[index] != b.bytes[index] { return false }
        return true
    }

    public var description: String {
        var text = ""
        for index in 0..<12 { text += hex(bytes[index]) }
        return text
    }
}

/// A compressed Eddystone URL: scheme prefix code and up to 17 encoded bytes.
public struct EddystoneURL: Equatable, Sendable {
    public static let capacity = 17
    public var scheme: UInt8
    public var encoded: InlineArray<17, UInt8>
    public var count: Int

    public static func == (a: EddystoneURL, b: EddystoneURL) -> Bool {
        guard a.scheme == b.scheme, a.count == b.count else { return false }
        for index in 0..<a.count where a.encoded[index] != b.encoded[index] { return false }
        return true
    }

    static let schemes: [String] = ["http://www.", "https://www.", "http://", "https://"]
    static let expansions: [String] = [
        ".com/", ".org/", ".edu/", ".net/", ".info/", ".biz/", ".gov/",
        ".com", ".org", ".edu", ".net", ".info", ".biz", ".gov",
    ]

    /// The URL as text (allocates; for output, not the hot path). nil when a byte is one of the
    /// reserved codes (0x0E...0x20, 0x7F...0xFF).
    public var expanded: String? {
        guard Int(scheme) < EddystoneURL.schemes.count else { return nil }
        var text = EddystoneURL.schemes[Int(scheme)]
        for index in 0..<count {
            let byte = encoded[index]
            if Int(byte) < EddystoneURL.expansions.count {
                text += EddystoneURL.expansions[Int(byte)]
            } else if byte > 0x20 && byte < 0x7F {
                text.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                return nil
            }
        }
        return text
    }
}

public enum BeaconDecoder {
    public static let appleCompany: UInt16 = 0x004C
    public static let eddystoneService: UInt16 = 0xFEAA
    public static let uriBeaconService: UInt16 = 0xFED8

    /// The first beacon frame in `data` (advertising data), or nil. Malformed AD data yields nil;
    /// the caller counts it through `AdvertisingData.forEachStructure`'s result.
    @_noAllocation
    public static func decode(_ data: UnsafeRawBufferPointer) -> Beacon? {
        var found: Beacon? = nil
        _ = AdvertisingData.forEachStructure(data) { type, payload in
            guard found == nil else { return }
            if type == ADType.manufacturerData {
                found = manufacturer(payload)
            } else if type == ADType.serviceData16, AdvertisingData.uint16LE(payload, 0) == eddystoneService {
                found = eddystone(UnsafeRawBufferPointer(rebasing: payload[2...]))
            } else if type == ADType.serviceData16, AdvertisingData.uint16LE(payload, 0) == uriBeaconService {
                found = uriBeacon(UnsafeRawBufferPointer(rebasing: payload[2...]))
            }
        }
        return found
    }

    /// Manufacturer-specific data (company identifier first, little-endian).
    @_noAllocation
    public static func manufacturer(_ payload: UnsafeRawBufferPointer) -> Beacon? {
        guard payload.count >= 4 else { return nil }
        let company = AdvertisingData.uint16LE(payload, 0)
        if company == appleCompany && payload[2] == 0x02 && payload[3] == 0x15 && payload.count == 25 {
            return .iBeacon(
                uuid: BeaconUUID(bytes: UnsafeRawBufferPointer(rebasing: payload[4..<20])),
                major: AdvertisingData.uint16BE(payload, 20),
                minor: AdvertisingData.uint16BE(payload, 22),
                measuredPower: Int8(bitPattern: payload[24]))
        }
        if payload[2] == 0xBE && payload[3] == 0xAC && (payload.count == 25 || payload.count == 26) {
            return .altBeacon(
                company: company,
                id1: BeaconUUID(bytes: UnsafeRawBufferPointer(rebasing: payload[4..<20])),
                id2: AdvertisingData.uint16BE(payload, 20),
                id3: AdvertisingData.uint16BE(payload, 22),
                referenceRSSI: Int8(bitPattern: payload[24]),
                reserved: payload.count == 26 ? payload[25] : nil)
        }
        return nil
    }

    /// A UriBeacon frame (after the 0xFED8 UUID): flags, TX power, scheme, compressed URI.
    @_noAllocation
    public static func uriBeacon(_ frame: UnsafeRawBufferPointer) -> Beacon? {
        guard frame.count >= 3, frame.count <= 3 + EddystoneURL.capacity, frame[2] <= 3 else { return nil }
        var url = EddystoneURL(scheme: frame[2], encoded: InlineArray(repeating: 0), count: frame.count - 3)
        for index in 0..<url.count { url.encoded[index] = frame[3 + index] }
        return .uriBeacon(txPower: Int8(bitPattern: frame[1]), url: url)
    }

    /// An Eddystone frame: the service data after the 0xFEAA UUID.
    @_noAllocation
    public static func eddystone(_ frame: UnsafeRawBufferPointer) -> Beacon? {
        guard frame.count >= 2 else { return nil }
        switch frame[0] {
        case 0x00 where frame.count == 18 || frame.count == 20:
            var high: UInt64 = 0
            for index in 2..<10 { high = high << 8 | UInt64(frame[index]) }
            var instance: UInt64 = 0
            for index in 12..<18 { instance = instance << 8 | UInt64(frame[index]) }
            return .eddystoneUID(namespace: EddystoneNamespace(high: high, low: AdvertisingData.uint16BE(frame, 10)),
                                 instance: instance, txPower: Int8(bitPattern: frame[1]))
        case 0x10 where frame.count >= 3 && frame.count <= 3 + EddystoneURL.capacity && frame[2] <= 3:
            var url = EddystoneURL(scheme: frame[2], encoded: InlineArray(repeating: 0), count: frame.count - 3)
            for index in 0..<url.count { url.encoded[index] = frame[3 + index] }
            return .eddystoneURL(txPower: Int8(bitPattern: frame[1]), url: url)
        case 0x20 where frame.count >= 14 && frame[1] == 0x00:
            let raw = Int16(bitPattern: AdvertisingData.uint16BE(frame, 4))
            return .eddystoneTLM(
                voltageMV: AdvertisingData.uint16BE(frame, 2),
                temperatureC: raw == Int16.min ? nil : Double(raw) / 256,
                advertisingCount: AdvertisingData.uint32BE(frame, 6),
                uptimeTenths: AdvertisingData.uint32BE(frame, 10))
        case 0x20 where frame.count == 18 && frame[1] == 0x01:
            var data = EddystoneCiphertext(bytes: InlineArray(repeating: 0))
            for index in 0..<12 { data.bytes[index] = frame[2 + index] }
            return .eddystoneEncryptedTLM(data: data, salt: AdvertisingData.uint16BE(frame, 14), mic: AdvertisingData.uint16BE(frame, 16))
        case 0x30 where frame.count == 10:
            var identifier: UInt64 = 0
            for index in 2..<10 { identifier = identifier << 8 | UInt64(frame[index]) }
            return .eddystoneEID(txPower: Int8(bitPattern: frame[1]), identifier: identifier)
        default:
            return nil
        }
    }
}
