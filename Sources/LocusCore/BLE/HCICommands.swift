// Bluetooth HCI commands the BLE scanner sends, and the Command Complete return parameters it
// reads back. Standard library only; every command is a small fixed-size value.
//
// Reference: Bluetooth Core Specification (5.0 and later), Vol 4 "Host Controller Interface",
// cited by section title because numbers move between versions (5.x numbers in brackets):
//   Part E "HCI Command packet" [5.4.1]: opcode = OGF << 10 | OCF, sent little-endian, then a
//     one-octet parameter total length, then the parameters; multi-octet fields little-endian.
//   Part A "Protocol" [UART transport layer, 2]: packet indicator 0x01 precedes a command.
//   Part E "Read Local Supported Commands" [7.4.2], "LE Read Local Supported Features" [7.8.3],
//     "LE Set Scan Parameters" [7.8.10], "LE Set Scan Enable" [7.8.11],
//     "LE Set Extended Scan Parameters" [7.8.64], "LE Set Extended Scan Enable" [7.8.65],
//     "Supported Commands" [6.27], "Command Complete event" [7.7.14],
//     "LE Set Advertising Parameters" [7.8.5], "LE Set Advertising Data" [7.8.7],
//     "LE Set Advertising Enable" [7.8.9], "LE Set Extended Advertising Parameters" [7.8.53],
//     "LE Set Extended Advertising Data" [7.8.54], "LE Set Extended Advertising Enable" [7.8.56].
//   Part E "Legacy and extended advertising" [3.1.1]: a host that has used extended commands
//     gets Command Disallowed for legacy ones, so advertising follows the scan's kind.
//   Vol 6 Part B "Feature support" [4.6]: LE feature bit 12 = LE Extended Advertising.
//   Vol 1 Part F "Controller error codes" for the status names.
// Cross-checked against Linux's include/net/bluetooth/hci.h (hci_cp_le_set_scan_param,
// hci_cp_le_set_ext_scan_params + hci_cp_le_scan_phy_params, hci_cp_le_set_ext_scan_enable)
// and hci_core.h (use_ext_scan: commands[37] & 0x20 and & 0x40); the advertising commands against
// hci_cp_le_set_adv_param, hci_cp_le_set_adv_data (length + 31 octets), hci_cp_le_set_adv_enable,
// hci_cp_le_set_ext_adv_params (25 octets, 3-octet intervals), hci_cp_le_set_ext_adv_data
// (LE_SET_ADV_DATA_OP_COMPLETE 0x03, LE_SET_ADV_DATA_NO_FRAG 0x01), hci_cp_le_set_ext_adv_enable +
// hci_cp_ext_adv_set, and the event properties LE_LEGACY_NONCONN_IND = 0x0010 (legacy PDU bit 4,
// neither connectable nor scannable), LE_ADV_NONCONN_IND = 0x03.

/// The opcodes of the commands Locus sends. Raw value = OGF << 10 | OCF.
public enum HCIOpcode: UInt16, Sendable, CaseIterable, CustomStringConvertible {
    /// OGF 0x04 (Informational), OCF 0x0002.
    case readLocalSupportedCommands = 0x1002
    /// OGF 0x08 (LE Controller), OCF 0x0003.
    case leReadLocalSupportedFeatures = 0x2003
    /// OGF 0x08, OCF 0x0006.
    case leSetAdvertisingParameters = 0x2006
    /// OGF 0x08, OCF 0x0008.
    case leSetAdvertisingData = 0x2008
    /// OGF 0x08, OCF 0x000A.
    case leSetAdvertisingEnable = 0x200A
    /// OGF 0x08, OCF 0x000B.
    case leSetScanParameters = 0x200B
    /// OGF 0x08, OCF 0x000C.
    case leSetScanEnable = 0x200C
    /// OGF 0x08, OCF 0x0041 (Bluetooth 5.0).
    case leSetExtendedScanParameters = 0x2041
    /// OGF 0x08, OCF 0x0042 (Bluetooth 5.0).
    case leSetExtendedScanEnable = 0x2042
    /// OGF 0x08, OCF 0x0036 (Bluetooth 5.0).
    case leSetExtendedAdvertisingParameters = 0x2036
    /// OGF 0x08, OCF 0x0037 (Bluetooth 5.0).
    case leSetExtendedAdvertisingData = 0x2037
    /// OGF 0x08, OCF 0x0039 (Bluetooth 5.0).
    case leSetExtendedAdvertisingEnable = 0x2039

    public static let informationalGroup: UInt16 = 0x04
    public static let leControllerGroup: UInt16 = 0x08

    /// Opcode Group Field: the upper 6 bits.
    public var ogf: UInt16 { rawValue >> 10 }
    /// Opcode Command Field: the lower 10 bits.
    public var ocf: UInt16 { rawValue & 0x03FF }

    /// The command's name as the Core specification writes it (technicians grep btmon for it).
    public var description: String {
        switch self {
        case .readLocalSupportedCommands: return "Read Local Supported Commands"
        case .leReadLocalSupportedFeatures: return "LE Read Local Supported Features"
        case .leSetScanParameters: return "LE Set Scan Parameters"
        case .leSetScanEnable: return "LE Set Scan Enable"
        case .leSetExtendedScanParameters: return "LE Set Extended Scan Parameters"
        case .leSetExtendedScanEnable: return "LE Set Extended Scan Enable"
        case .leSetAdvertisingParameters: return "LE Set Advertising Parameters"
        case .leSetAdvertisingData: return "LE Set Advertising Data"
        case .leSetAdvertisingEnable: return "LE Set Advertising Enable"
        case .leSetExtendedAdvertisingParameters: return "LE Set Extended Advertising Parameters"
        case .leSetExtendedAdvertisingData: return "LE Set Extended Advertising Data"
        case .leSetExtendedAdvertisingEnable: return "LE Set Extended Advertising Enable"
        }
    }
}

/// LE_Scan_Type: passive scanning sends nothing over the air; active scanning sends a
/// SCAN_REQ to scannable advertisers and also reports their scan responses.
public enum HCIScanType: UInt8, Sendable {
    case passive = 0x00
    case active = 0x01
}

/// Own_Address_Type: the address put in SCAN_REQ PDUs (irrelevant for passive scanning).
/// `random` needs a random address set first (LE Set Random Address), which Locus does not do.
public enum HCIOwnAddressType: UInt8, Sendable {
    case `public` = 0x00
    case random = 0x01
    case resolvablePrivateOrPublic = 0x02
    case resolvablePrivateOrRandom = 0x03
}

/// Scanning_Filter_Policy. Beacon gateways take every advertiser (`basicUnfiltered`) and
/// match identities in the engine; the accept-list policies exist for completeness.
public enum HCIScanFilterPolicy: UInt8, Sendable {
    case basicUnfiltered = 0x00
    case basicFiltered = 0x01
    case extendedUnfiltered = 0x02
    case extendedFiltered = 0x03
}

/// One HCI command in fixed storage, kept in its H4 (UART transport) form:
/// `01 opcode_lo opcode_hi length parameters...`. Built only by the encoders below, so the
/// length octet always matches the parameters.
public struct HCICommand: Equatable, Sendable, CustomStringConvertible {
    /// LE Set Extended Advertising Data with a whole legacy PDU's data (4 + 31 octets) is the
    /// longest command here.
    public static let maximumParameterCount = 35
    /// Packet indicator (1) + opcode (2) + parameter total length (1).
    public static let headerCount = 4
    public static let packetIndicator: UInt8 = 0x01

    public let opcode: HCIOpcode
    private var storage = InlineArray<39, UInt8>(repeating: 0)
    /// Bytes in `storage`: header plus parameters.
    private var packetCount = HCICommand.headerCount

    public var ogf: UInt16 { opcode.ogf }
    public var ocf: UInt16 { opcode.ocf }
    public var parameterCount: Int { packetCount - HCICommand.headerCount }

    /// Parameter octet `index` (0-based, after the length octet).
    public func parameter(_ index: Int) -> UInt8 {
        precondition(index >= 0 && index < parameterCount, "HCICommand parameter index out of range")
        return storage[HCICommand.headerCount + index]
    }

    /// The whole H4 packet, as written to a UART controller or shown by `btmon`.
    public var packet: Packet { Packet(storage: storage, count: packetCount) }

    /// The parameters only (what `hci_send_cmd` takes), valid inside `body`.
    public func withUnsafeParameters<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let range = HCICommand.headerCount..<packetCount
        return try storage.span.withUnsafeBytes { (raw) throws(Failure) -> Result in
            try body(UnsafeRawBufferPointer(rebasing: raw[range]))
        }
    }

    public static func == (left: HCICommand, right: HCICommand) -> Bool {
        guard left.packetCount == right.packetCount else { return false }
        for index in 0..<left.packetCount where left.storage[index] != right.storage[index] { return false }
        return true
    }

    /// "LE Set Scan Enable (0x200C) 01 00": opcode name and parameters in hex, for logs.
    public var description: String {
        var text = opcode.description + " (0x" + hex(UInt8(truncatingIfNeeded: opcode.rawValue >> 8))
            + hex(UInt8(truncatingIfNeeded: opcode.rawValue)) + ")"
        for index in 0..<parameterCount { text += " " + hex(parameter(index)) }
        return text
    }

    /// A command's H4 bytes as a collection (tests compare it with `Array(...)`).
    public struct Packet: RandomAccessCollection, Sendable {
        fileprivate let storage: InlineArray<39, UInt8>
        public let count: Int
        public var startIndex: Int { 0 }
        public var endIndex: Int { count }
        public subscript(position: Int) -> UInt8 {
            precondition(position >= 0 && position < count, "HCICommand.Packet index out of range")
            return storage[position]
        }
    }

    // MARK: building (encoders only)

    private init(_ opcode: HCIOpcode) {
        self.opcode = opcode
        storage[0] = HCICommand.packetIndicator
        storage[1] = UInt8(truncatingIfNeeded: opcode.rawValue)
        storage[2] = UInt8(truncatingIfNeeded: opcode.rawValue >> 8)
    }

    /// Out of line: the encoders append octet by octet, and a call is smaller than the checks.
    @inline(never)
    private mutating func append(_ byte: UInt8) {
        precondition(parameterCount < HCICommand.maximumParameterCount, "HCI parameters longer than maximumParameterCount")
        storage[packetCount] = byte
        packetCount += 1
        storage[3] = UInt8(truncatingIfNeeded: parameterCount)
    }

    private mutating func appendLittleEndian(_ value: UInt16) {
        append(UInt8(truncatingIfNeeded: value))
        append(UInt8(truncatingIfNeeded: value >> 8))
    }

    /// `count` zero octets (unused peer addresses, reserved fields).
    private mutating func appendZeros(_ count: Int) {
        for _ in 0..<count { append(0x00) }
    }

    /// A 3-octet little-endian field (the extended advertising intervals).
    private mutating func appendLittleEndian24(_ value: UInt32) {
        append(UInt8(truncatingIfNeeded: value))
        append(UInt8(truncatingIfNeeded: value >> 8))
        append(UInt8(truncatingIfNeeded: value >> 16))
    }

    // MARK: encoders

    /// Read Local Supported Commands: no parameters. Returns Status + 64 octets of
    /// Supported_Commands (see `HCISupportedCommands`).
    public static func readLocalSupportedCommands() -> HCICommand {
        HCICommand(.readLocalSupportedCommands)
    }

    /// LE Read Local Supported Features: no parameters. Returns Status + 8 octets of LE_Features.
    public static func leReadLocalSupportedFeatures() -> HCICommand {
        HCICommand(.leReadLocalSupportedFeatures)
    }

    /// LE Set Scan Parameters (7 octets): LE_Scan_Type, LE_Scan_Interval (2), LE_Scan_Window (2),
    /// Own_Address_Type, Scanning_Filter_Policy. `settings` is already range-checked.
    public static func leSetScanParameters(_ settings: ScanSettings) -> HCICommand {
        var command = HCICommand(.leSetScanParameters)
        command.append(settings.scanType.rawValue)
        command.appendLittleEndian(settings.intervalUnits)
        command.appendLittleEndian(settings.windowUnits)
        command.append(settings.ownAddressType.rawValue)
        command.append(settings.filterPolicy.rawValue)
        return command
    }

    /// LE Set Scan Enable (2 octets): LE_Scan_Enable, Filter_Duplicates.
    public static func leSetScanEnable(_ enable: Bool, filterDuplicates: Bool) -> HCICommand {
        var command = HCICommand(.leSetScanEnable)
        command.append(enable ? 0x01 : 0x00)
        command.append(filterDuplicates ? 0x01 : 0x00)
        return command
    }

    /// LE_Scanning_PHYs bit 0: LE 1M (bit 2 would be LE Coded; bit 1, 2M, is not a scanning PHY).
    public static let scanningPHY1M: UInt8 = 0x01

    /// LE Set Extended Scan Parameters on the LE 1M PHY (8 octets): Own_Address_Type,
    /// Scanning_Filter_Policy, Scanning_PHYs = 0x01, then for that one PHY: Scan_Type,
    /// Scan_Interval (2), Scan_Window (2). Beacons advertise legacy PDUs on 1M, so Coded is not
    /// scanned (it would halve the 1M listening time on single-radio controllers).
    public static func leSetExtendedScanParameters(_ settings: ScanSettings) -> HCICommand {
        var command = HCICommand(.leSetExtendedScanParameters)
        command.append(settings.ownAddressType.rawValue)
        command.append(settings.filterPolicy.rawValue)
        command.append(scanningPHY1M)
        command.append(settings.scanType.rawValue)
        command.appendLittleEndian(settings.intervalUnits)
        command.appendLittleEndian(settings.windowUnits)
        return command
    }

    /// LE Set Extended Scan Enable (6 octets): Enable, Filter_Duplicates, Duration (2, units of
    /// 10 ms), Period (2, units of 1.28 s). Duration 0 and Period 0 scan until disabled, which is
    /// what a gateway wants; the duty cycle comes from the interval and window instead.
    public static func leSetExtendedScanEnable(
        _ enable: Bool, filterDuplicates: Bool, durationUnits: UInt16 = 0, periodUnits: UInt16 = 0
    ) -> HCICommand {
        var command = HCICommand(.leSetExtendedScanEnable)
        command.append(enable ? 0x01 : 0x00)
        command.append(filterDuplicates ? 0x01 : 0x00)
        command.appendLittleEndian(durationUnits)
        command.appendLittleEndian(periodUnits)
        return command
    }

    // MARK: advertising (the gateway's own beacon)

    /// Advertising_Type ADV_NONCONN_IND: neither connectable nor scannable.
    public static let advertisingNonConnectable: UInt8 = 0x03
    /// Advertising_Channel_Map: channels 37, 38 and 39.
    public static let advertisingAllChannels: UInt8 = 0x07
    /// Advertising_Event_Properties: bit 4 "use legacy advertising PDUs" and nothing else, which
    /// is ADV_NONCONN_IND.
    public static let legacyNonConnectableProperties: UInt16 = 0x0010
    /// Advertising_TX_Power 0x7F: the host has no preference.
    public static let noTXPowerPreference: UInt8 = 0x7F
    /// Operation 0x03: complete data; Fragment_Preference 0x01: the controller should not fragment.
    public static let completeData: UInt8 = 0x03
    public static let noFragmentation: UInt8 = 0x01
    /// Primary_Advertising_PHY and Secondary_Advertising_PHY value for LE 1M.
    public static let advertisingPHY1M: UInt8 = 0x01

    /// LE Set Advertising Parameters (15 octets): Advertising_Interval_Min (2),
    /// Advertising_Interval_Max (2), Advertising_Type, Own_Address_Type, Peer_Address_Type,
    /// Peer_Address (6), Advertising_Channel_Map, Advertising_Filter_Policy. Non-connectable from
    /// the public address, on all three channels, both intervals the advertisement's.
    public static func leSetAdvertisingParameters(_ advertisement: BeaconAdvertisement) -> HCICommand {
        var command = HCICommand(.leSetAdvertisingParameters)
        command.appendLittleEndian(advertisement.intervalUnits)
        command.appendLittleEndian(advertisement.intervalUnits)
        command.append(advertisingNonConnectable)
        command.append(HCIOwnAddressType.public.rawValue)
        command.appendZeros(7)                     // peer address type and address: unused
        command.append(advertisingAllChannels)
        command.append(0x00)                       // filter policy: no accept list
        return command
    }

    /// LE Set Advertising Data (32 octets): Advertising_Data_Length, then Advertising_Data, always
    /// 31 octets, the unused ones zero.
    public static func leSetAdvertisingData(_ data: AdvertisingBytes) -> HCICommand {
        var command = HCICommand(.leSetAdvertisingData)
        command.append(UInt8(data.count))
        for index in 0..<AdvertisingBytes.capacity { command.append(index < data.count ? data[index] : 0x00) }
        return command
    }

    /// LE Set Advertising Enable (1 octet).
    public static func leSetAdvertisingEnable(_ enable: Bool) -> HCICommand {
        var command = HCICommand(.leSetAdvertisingEnable)
        command.append(enable ? 0x01 : 0x00)
        return command
    }

    /// LE Set Extended Advertising Parameters (25 octets) for a legacy ADV_NONCONN_IND set:
    /// Advertising_Handle, Advertising_Event_Properties (2), Primary_Advertising_Interval_Min (3),
    /// _Max (3), Primary_Advertising_Channel_Map, Own_Address_Type, Peer_Address_Type,
    /// Peer_Address (6), Advertising_Filter_Policy, Advertising_TX_Power, Primary_Advertising_PHY
    /// (LE 1M, required for legacy PDUs), Secondary_Advertising_Max_Skip, Secondary_Advertising_PHY
    /// (LE 1M; unused by legacy PDUs), Advertising_SID, Scan_Request_Notification_Enable.
    public static func leSetExtendedAdvertisingParameters(_ advertisement: BeaconAdvertisement, handle: UInt8) -> HCICommand {
        var command = HCICommand(.leSetExtendedAdvertisingParameters)
        command.append(handle)
        command.appendLittleEndian(legacyNonConnectableProperties)
        command.appendLittleEndian24(UInt32(advertisement.intervalUnits))
        command.appendLittleEndian24(UInt32(advertisement.intervalUnits))
        command.append(advertisingAllChannels)
        command.append(HCIOwnAddressType.public.rawValue)
        command.appendZeros(8)                     // peer address type and address: unused; filter policy 0
        command.append(noTXPowerPreference)
        command.append(advertisingPHY1M)           // primary PHY
        command.append(0x00)                       // secondary max skip
        command.append(advertisingPHY1M)           // secondary PHY
        command.appendZeros(2)                     // advertising SID 0, no scan request notifications
        return command
    }

    /// LE Set Extended Advertising Data (4 + length octets): Advertising_Handle, Operation
    /// (complete), Fragment_Preference (none), Advertising_Data_Length, Advertising_Data.
    public static func leSetExtendedAdvertisingData(_ data: AdvertisingBytes, handle: UInt8) -> HCICommand {
        var command = HCICommand(.leSetExtendedAdvertisingData)
        command.append(handle)
        command.append(completeData)
        command.append(noFragmentation)
        command.append(UInt8(data.count))
        for index in 0..<data.count { command.append(data[index]) }
        return command
    }

    /// LE Set Extended Advertising Enable for one set (6 octets): Enable, Num_Sets = 1, then
    /// Advertising_Handle, Duration (2, 0 = until disabled), Max_Extended_Advertising_Events (0 = no
    /// limit). Disabling names the set too, so no other set is touched.
    public static func leSetExtendedAdvertisingEnable(_ enable: Bool, handle: UInt8) -> HCICommand {
        var command = HCICommand(.leSetExtendedAdvertisingEnable)
        command.append(enable ? 0x01 : 0x00)
        command.append(0x01)
        command.append(handle)
        command.appendZeros(3)                     // duration 0, no event limit
        return command
    }
}

// MARK: scan settings

/// Why a `ScanSettings` was refused. Times are printed in milliseconds.
public enum ScanSettingsError: Error, Equatable, Sendable, CustomStringConvertible {
    case intervalOutOfRange(units: Int)
    case windowOutOfRange(units: Int)
    case windowLongerThanInterval(windowUnits: Int, intervalUnits: Int)

    public var description: String {
        let range = ScanSettings.formatUnits(Int(ScanSettings.unitRange.lowerBound)) + " to "
            + ScanSettings.formatUnits(Int(ScanSettings.unitRange.upperBound))
        switch self {
        case .intervalOutOfRange(let units):
            return "scan interval " + ScanSettings.formatUnits(units) + " is outside " + range
        case .windowOutOfRange(let units):
            return "scan window " + ScanSettings.formatUnits(units) + " is outside " + range
        case .windowLongerThanInterval(let window, let interval):
            return "scan window " + ScanSettings.formatUnits(window) + " is longer than the interval "
                + ScanSettings.formatUnits(interval)
        }
    }
}

/// How the controller scans: type, interval and window (units of 0.625 ms), duplicate filtering.
/// Only valid values can be built: interval and window within 0x0004...0x4000 (2.5 ms to
/// 10.24 s, the LE Set Scan Parameters range; the extended command accepts up to 0xFFFF, but one
/// range for both keeps a setting portable between controllers) and window <= interval.
public struct ScanSettings: Equatable, Sendable {
    public static let unitMicroseconds = 625
    public static let unitRange: ClosedRange<UInt16> = 0x0004...0x4000

    public let scanType: HCIScanType
    public let intervalUnits: UInt16
    public let windowUnits: UInt16
    /// Duplicate filtering makes the controller report each advertiser once per scan enable:
    /// fine for discovery, wrong for presence (no RSSI track, no exit detection). Off by default.
    public let filterDuplicates: Bool
    public let ownAddressType: HCIOwnAddressType
    public let filterPolicy: HCIScanFilterPolicy

    public init(
        scanType: HCIScanType, intervalUnits: UInt16, windowUnits: UInt16, filterDuplicates: Bool = false,
        ownAddressType: HCIOwnAddressType = .public, filterPolicy: HCIScanFilterPolicy = .basicUnfiltered
    ) throws(ScanSettingsError) {
        guard ScanSettings.unitRange.contains(intervalUnits) else { throw .intervalOutOfRange(units: Int(intervalUnits)) }
        guard ScanSettings.unitRange.contains(windowUnits) else { throw .windowOutOfRange(units: Int(windowUnits)) }
        guard windowUnits <= intervalUnits else {
            throw .windowLongerThanInterval(windowUnits: Int(windowUnits), intervalUnits: Int(intervalUnits))
        }
        self.scanType = scanType
        self.intervalUnits = intervalUnits
        self.windowUnits = windowUnits
        self.filterDuplicates = filterDuplicates
        self.ownAddressType = ownAddressType
        self.filterPolicy = filterPolicy
    }

    /// From whole milliseconds, rounded to the nearest 0.625 ms unit (the controller's
    /// resolution): 10 ms = 16 units exactly, 1 ms would be 1.25 ms (and is out of range).
    public init(
        scanType: HCIScanType, intervalMs: Int, windowMs: Int, filterDuplicates: Bool = false
    ) throws(ScanSettingsError) {
        try self.init(scanType: scanType, intervalUnits: ScanSettings.units(ms: intervalMs),
                      windowUnits: ScanSettings.units(ms: windowMs), filterDuplicates: filterDuplicates)
    }

    /// A power tier's timing (see `ScanDutyCycle`), passive unless asked otherwise.
    public init(dutyCycle: ScanDutyCycle, scanType: HCIScanType = .passive, filterDuplicates: Bool = false) {
        // The tier table is checked by the tests; a failure here is a programmer error.
        do {
            try self.init(scanType: scanType, intervalUnits: dutyCycle.intervalUnits,
                          windowUnits: dutyCycle.windowUnits, filterDuplicates: filterDuplicates)
        } catch {
            preconditionFailure("ScanDutyCycle table out of range")
        }
    }

    public var intervalMicroseconds: Int { Int(intervalUnits) * ScanSettings.unitMicroseconds }
    public var windowMicroseconds: Int { Int(windowUnits) * ScanSettings.unitMicroseconds }
    /// Fraction of time the radio listens (window / interval): what beacon exit timeouts scale by.
    public var listeningFraction: Double { Double(windowUnits) / Double(intervalUnits) }

    /// Milliseconds to units, rounded to nearest; clamped into UInt16 so that a huge value is
    /// reported as out of range rather than trapping.
    static func units(ms: Int) -> UInt16 {
        guard ms > 0 else { return 0 }
        guard ms <= 60_000 else { return UInt16.max }
        return UInt16((ms * 1000 + ScanSettings.unitMicroseconds / 2) / ScanSettings.unitMicroseconds)
    }

    /// "10 ms", "2.5 ms", "10240 ms", "3.125 ms": exact, without floating point.
    static func formatUnits(_ units: Int) -> String {
        let microseconds = units * ScanSettings.unitMicroseconds
        var text = String(microseconds / 1000)
        var fraction = microseconds % 1000
        if fraction != 0 {
            var digits = ""
            var place = 100
            while fraction != 0 {
                digits += String(fraction / place)
                fraction %= place
                place /= 10
            }
            text += "." + digits
        }
        return text + " ms"
    }
}

/// Power tiers for BLE scanning. Every tier listens in 30 ms windows (48 units) and differs only
/// in how often a window opens, so the chance of catching one advertising event per window is the
/// same in all tiers and the listening fraction is simply window / interval:
///
/// - `continuous` 30 / 30 ms, 100 %: the radio never idles. With window = interval the controller
///   still moves to the next primary channel (37, 38, 39) every interval, so all three channels
///   are visited every 90 ms, within the common 100 ms beacon interval. 30 ms is also the Linux
///   kernel's default LE scan window (0x0030).
/// - `balanced` 30 / 300 ms, 10 %: a 100 ms beacon is heard about once a second on average;
///   missing every event for 10 s has probability about 0.9^100 = 3e-5, so a 10 s exit timeout
///   holds. Roughly a tenth of the receive current of `continuous`.
/// - `lowPower` 30 / 1280 ms, 2.3 %: a 100 ms beacon is heard about every 4.3 s; exit timeouts
///   need about 30 s (0.977^300 = 1e-3 chance of a false exit). 1.28 s is also the unit of the
///   extended scan Period, so the same timing can later be expressed with Duration/Period.
/// Scanning is passive by default: iBeacon and Eddystone frames are complete without a scan
/// response, and a passive scanner transmits nothing.
public enum ScanDutyCycle: Sendable, CaseIterable, CustomStringConvertible {
    case continuous
    case balanced
    case lowPower

    public var windowUnits: UInt16 { 48 }

    public var intervalUnits: UInt16 {
        switch self {
        case .continuous: return 48
        case .balanced: return 480
        case .lowPower: return 2048
        }
    }

    public var description: String {
        switch self {
        case .continuous: return "continuous"
        case .balanced: return "balanced"
        case .lowPower: return "lowPower"
        }
    }
}

// MARK: controller capabilities and sequences

/// Which scan commands a controller takes. Once a host has used an extended advertising or
/// scanning command, a Bluetooth 5 controller may answer legacy ones with Command Disallowed
/// until it is reset (Core Vol 4 Part E "Legacy and extended advertising" [3.1.1]), and some
/// controllers implement only the extended ones: so extended is used whenever it is supported,
/// as the Linux kernel does.
public enum HCIControllerKind: Equatable, Sendable, CustomStringConvertible {
    case legacy
    case extended

    public var description: String {
        switch self {
        case .legacy: return "legacy scan commands"
        case .extended: return "extended scan commands"
        }
    }
}

/// An HCI status code (Vol 1 Part F). 0 is success.
public struct HCIStatus: Equatable, Sendable, CustomStringConvertible {
    public let code: UInt8
    public init(code: UInt8) { self.code = code }

    public static let success = HCIStatus(code: 0x00)
    public static let unknownCommand = HCIStatus(code: 0x01)
    public static let hardwareFailure = HCIStatus(code: 0x03)
    public static let memoryCapacityExceeded = HCIStatus(code: 0x07)
    public static let commandDisallowed = HCIStatus(code: 0x0C)
    public static let unsupportedFeatureOrParameter = HCIStatus(code: 0x11)
    public static let invalidParameters = HCIStatus(code: 0x12)
    public static let unspecifiedError = HCIStatus(code: 0x1F)
    public static let controllerBusy = HCIStatus(code: 0x3A)
    public static let unknownAdvertisingIdentifier = HCIStatus(code: 0x42)

    public var isSuccess: Bool { code == 0 }

    /// The specification's name for the codes a scanner meets, nil for the rest.
    public var name: String? {
        switch code {
        case 0x00: return "Success"
        case 0x01: return "Unknown HCI Command"
        case 0x03: return "Hardware Failure"
        case 0x07: return "Memory Capacity Exceeded"
        case 0x0C: return "Command Disallowed"
        case 0x11: return "Unsupported Feature or Parameter Value"
        case 0x12: return "Invalid HCI Command Parameters"
        case 0x1F: return "Unspecified Error"
        case 0x3A: return "Controller Busy"
        case 0x42: return "Unknown Advertising Identifier"
        default: return nil
        }
    }

    /// "0x0C (Command Disallowed)" or "0x42".
    public var description: String {
        let number = "0x" + hex(code)
        if let name { return number + " (" + name + ")" }
        return number
    }
}

/// The first octet of a command's return parameters (every command here starts with Status).
/// Nil for an empty reply.
public func hciReturnStatus(_ returnParameters: UnsafeRawBufferPointer) -> HCIStatus? {
    returnParameters.isEmpty ? nil : HCIStatus(code: returnParameters[0])
}

/// Read Local Supported Commands' bitmap: octet N bit B set = command supported (Vol 4 Part E
/// "Supported Commands" [6.27], octets numbered from 0 as they arrive).
public struct HCISupportedCommands: Sendable {
    public static let octetCount = 64
    /// LE Set Extended Scan Parameters: octet 37 bit 5; LE Set Extended Scan Enable: octet 37
    /// bit 6 (Core spec table, and Linux use_ext_scan: commands[37] & 0x20, & 0x40).
    public static let extendedScanParameters = (octet: 37, bit: 5)
    public static let extendedScanEnable = (octet: 37, bit: 6)

    private var octets = InlineArray<64, UInt8>(repeating: 0)

    /// From the return parameters (Status, Supported_Commands[64]); nil unless the status is
    /// success and all 64 octets are present.
    public init?(returnParameters: UnsafeRawBufferPointer) {
        guard returnParameters.count >= 1 + HCISupportedCommands.octetCount, returnParameters[0] == 0 else { return nil }
        for index in 0..<HCISupportedCommands.octetCount { octets[index] = returnParameters[1 + index] }
    }

    public func supports(octet: Int, bit: Int) -> Bool {
        precondition(octet >= 0 && octet < HCISupportedCommands.octetCount && bit >= 0 && bit < 8, "bad command bit")
        return octets[octet] & (1 << UInt8(bit)) != 0
    }

    /// Both extended scan commands: one without the other cannot run a scan.
    public var supportsExtendedScanning: Bool {
        supports(octet: HCISupportedCommands.extendedScanParameters.octet, bit: HCISupportedCommands.extendedScanParameters.bit)
            && supports(octet: HCISupportedCommands.extendedScanEnable.octet, bit: HCISupportedCommands.extendedScanEnable.bit)
    }

    public var controllerKind: HCIControllerKind { supportsExtendedScanning ? .extended : .legacy }
}

/// LE Read Local Supported Features' 64-bit mask (Vol 6 Part B "Feature support").
public struct HCILEFeatures: Equatable, Sendable {
    public static let extendedAdvertisingBit = 12
    public let mask: UInt64

    /// From the return parameters (Status, LE_Features[8], little-endian); nil unless success.
    public init?(returnParameters: UnsafeRawBufferPointer) {
        guard returnParameters.count >= 9, returnParameters[0] == 0 else { return nil }
        var mask: UInt64 = 0
        for index in 0..<8 { mask |= UInt64(returnParameters[1 + index]) << UInt64(8 * index) }
        self.mask = mask
    }

    public var supportsExtendedAdvertising: Bool { mask & (1 << UInt64(HCILEFeatures.extendedAdvertisingBit)) != 0 }
}

/// A Command Complete event (code 0x0E): Num_HCI_Command_Packets, Command_Opcode (2), return
/// parameters. Parsed from the event code on (no H4 indicator).
public struct HCICommandComplete: Equatable, Sendable {
    public static let eventCode: UInt8 = 0x0E
    public let numberOfCommandPackets: UInt8
    /// Raw opcode: the controller may answer commands this file has no name for.
    public let opcode: UInt16
    /// Where the return parameters are in the event buffer that was parsed.
    public let returnParameters: Range<Int>

    /// Nil unless `event` is a whole Command Complete event: code 0x0E, length octet equal to the
    /// bytes that follow, and at least the 3 fixed octets.
    public init?(event: UnsafeRawBufferPointer) {
        guard event.count >= 5, event[0] == HCICommandComplete.eventCode, Int(event[1]) == event.count - 2 else { return nil }
        numberOfCommandPackets = event[2]
        opcode = UInt16(event[3]) | UInt16(event[4]) << 8
        returnParameters = 5..<event.count
    }
}

/// One command of a setup or teardown sequence.
public struct HCIScanStep: Equatable, Sendable {
    public let command: HCICommand
    /// A failing status does not stop the sequence. Only for the "disable first" step: a scan
    /// left running by a crashed predecessor would make the parameters command fail with Command
    /// Disallowed, and disabling an idle scan is answered Command Disallowed by some (pre-5.0)
    /// controllers, which is harmless.
    public let toleratesFailure: Bool

    public init(_ command: HCICommand, toleratesFailure: Bool = false) {
        self.command = command
        self.toleratesFailure = toleratesFailure
    }
}

/// A short fixed sequence of steps (at most 3).
public struct HCIScanSteps: RandomAccessCollection, Sendable {
    private var storage: InlineArray<3, HCIScanStep>
    public let count: Int

    init(_ first: HCIScanStep, _ second: HCIScanStep? = nil, _ third: HCIScanStep? = nil) {
        storage = InlineArray(repeating: first)
        var count = 1
        if let second { storage[count] = second; count += 1 }
        if let third { storage[count] = third; count += 1 }
        self.count = count
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }
    public subscript(position: Int) -> HCIScanStep {
        precondition(position >= 0 && position < count, "HCIScanSteps index out of range")
        return storage[position]
    }
}

/// The exact commands the scanner sends to start and stop scanning.
public enum HCIScanSequence {
    /// Disable (failure tolerated), set parameters, enable.
    public static func setup(_ settings: ScanSettings, controller: HCIControllerKind) -> HCIScanSteps {
        switch controller {
        case .legacy:
            return HCIScanSteps(
                HCIScanStep(.leSetScanEnable(false, filterDuplicates: false), toleratesFailure: true),
                HCIScanStep(.leSetScanParameters(settings)),
                HCIScanStep(.leSetScanEnable(true, filterDuplicates: settings.filterDuplicates)))
        case .extended:
            return HCIScanSteps(
                HCIScanStep(.leSetExtendedScanEnable(false, filterDuplicates: false), toleratesFailure: true),
                HCIScanStep(.leSetExtendedScanParameters(settings)),
                HCIScanStep(.leSetExtendedScanEnable(true, filterDuplicates: settings.filterDuplicates)))
        }
    }

    /// Disable scanning. Its failure is reported but does not stop the rest of the shutdown.
    public static func teardown(controller: HCIControllerKind) -> HCIScanSteps {
        switch controller {
        case .legacy: return HCIScanSteps(HCIScanStep(.leSetScanEnable(false, filterDuplicates: false)))
        case .extended: return HCIScanSteps(HCIScanStep(.leSetExtendedScanEnable(false, filterDuplicates: false)))
        }
    }
}

/// The exact commands that start and stop the gateway's own beacon. They follow the scan's kind:
/// legacy advertising beside a legacy scan; beside an extended scan the extended advertising
/// commands with legacy PDUs (the same ADV_NONCONN_IND on the air), since a controller may refuse
/// legacy commands once extended ones were used.
public enum HCIAdvertisingSequence {
    /// The advertising set's handle in extended mode (any of 0x00...0xEF names a set; the raw
    /// mode runs only where nobody else uses the adapter).
    public static let handle: UInt8 = 0x01

    /// Set parameters, set data, enable. The scanner sends `teardown` first, its failure
    /// tolerated: advertising that a killed predecessor left on would make the parameters command
    /// fail with Command Disallowed, and disabling advertising that is off (or a set that does not
    /// exist yet) is answered Command Disallowed or Unknown Advertising Identifier by some
    /// controllers.
    public static func setup(_ advertisement: BeaconAdvertisement, controller: HCIControllerKind) -> HCIScanSteps {
        let data = advertisement.advertisingData
        switch controller {
        case .legacy:
            return HCIScanSteps(
                HCIScanStep(.leSetAdvertisingParameters(advertisement)),
                HCIScanStep(.leSetAdvertisingData(data)),
                HCIScanStep(.leSetAdvertisingEnable(true)))
        case .extended:
            return HCIScanSteps(
                HCIScanStep(.leSetExtendedAdvertisingParameters(advertisement, handle: handle)),
                HCIScanStep(.leSetExtendedAdvertisingData(data, handle: handle)),
                HCIScanStep(.leSetExtendedAdvertisingEnable(true, handle: handle)))
        }
    }

    /// Disable advertising (also the first step of a start, see `setup`).
    public static func teardown(controller: HCIControllerKind) -> HCIScanSteps {
        switch controller {
        case .legacy: return HCIScanSteps(HCIScanStep(.leSetAdvertisingEnable(false)))
        case .extended: return HCIScanSteps(HCIScanStep(.leSetExtendedAdvertisingEnable(false, handle: handle)))
        }
    }
}
