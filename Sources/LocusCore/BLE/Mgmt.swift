// The Linux Bluetooth management interface (mgmt, HCI_CHANNEL_CONTROL): the commands Locus sends
// to have the kernel scan for it, the events it reads back, and the HCI_CHANNEL_MONITOR records
// that say who else has an adapter open. Standard library only; no allocation on the read path.
//
// Reference: bluez doc/mgmt-api.txt and Linux include/net/bluetooth/mgmt.h (6.1):
//   struct mgmt_hdr { le16 opcode; le16 index; le16 len; }, then `len` parameter octets.
//   Commands go to one adapter by index, or to none (0xFFFF, MGMT_INDEX_NONE). Every answer is a
//   Command Complete (opcode, status, return parameters) or Command Status (opcode, status) event.
//   Read Advertising Features (0x003D) returns Supported_Flags le32, Max_Adv_Data_Len,
//   Max_Scan_Rsp_Len, Max_Instances, Num_Instances, Instance[]; Add Advertising (0x003E) takes
//   Instance, Flags le32, Duration le16, Timeout le16, Adv_Data_Len, Scan_Rsp_Len, the data
//   (struct mgmt_cp_add_advertising; flag bit 0 connectable, bit 1 discoverable: the kernel then
//   writes the Flags structure in front of the data); Remove Advertising (0x003F) takes Instance;
//   the Advertising Removed event (0x0024) carries Instance.
// Monitor records (include/net/bluetooth/hci_mon.h, hci_sock.c create_monitor_ctrl_open):
//   struct hci_mon_hdr { le16 opcode; le16 index; le16 len; }; CTRL_OPEN (14) carries
//   cookie le32, format le16 (0 raw, 1 user, 2 control), version[3], flags le32 (bit 0 trusted),
//   comm_len u8, comm[comm_len] (the process name, NUL padded).

/// The mgmt commands Locus sends. mgmt numbers its own opcodes; they are not HCI opcodes.
public enum MgmtOpcode: UInt16, Sendable, CustomStringConvertible {
    case readVersion = 0x0001
    case readSupportedCommands = 0x0002
    case readIndexList = 0x0003
    case readControllerInfo = 0x0004
    case setPowered = 0x0005
    case readAdvertisingFeatures = 0x003D
    case addAdvertising = 0x003E
    case removeAdvertising = 0x003F
    case readAdvMonitorFeatures = 0x0051
    case addAdvPatternsMonitor = 0x0052
    case removeAdvMonitor = 0x0053

    /// The names mgmt-api.txt and btmon use, so a log line can be grepped in both.
    public var description: String {
        switch self {
        case .readVersion: return "Read Management Version Information"
        case .readSupportedCommands: return "Read Management Supported Commands"
        case .readIndexList: return "Read Controller Index List"
        case .readControllerInfo: return "Read Controller Information"
        case .setPowered: return "Set Powered"
        case .readAdvertisingFeatures: return "Read Advertising Features"
        case .addAdvertising: return "Add Advertising"
        case .removeAdvertising: return "Remove Advertising"
        case .readAdvMonitorFeatures: return "Read Advertisement Monitor Features"
        case .addAdvPatternsMonitor: return "Add Advertisement Patterns Monitor"
        case .removeAdvMonitor: return "Remove Advertisement Monitor"
        }
    }
}

/// One mgmt command in fixed storage: header (opcode, index, length) then parameters.
public struct MgmtCommand: Sendable {
    public static let headerCount = 6
    /// The beacon monitor (1 + 4 patterns of 34 octets) is the longest command here.
    public static let maximumParameterCount = 1 + 4 * MgmtCommand.patternCount
    /// Index for commands that concern no adapter (MGMT_INDEX_NONE).
    public static let noIndex: UInt16 = 0xFFFF
    /// struct mgmt_adv_pattern: ad_type, offset, length, value[HCI_MAX_AD_LENGTH = 31].
    public static let patternCount = 3 + 31

    public let opcode: MgmtOpcode
    public let index: UInt16
    private var storage = InlineArray<144, UInt8>(repeating: 0)
    public private(set) var count = MgmtCommand.headerCount

    private init(_ opcode: MgmtOpcode, index: UInt16) {
        self.opcode = opcode
        self.index = index
        put16(opcode.rawValue, at: 0)
        put16(index, at: 2)
    }

    /// Octet `offset` of the packet (header included).
    public subscript(offset: Int) -> UInt8 {
        precondition(offset >= 0 && offset < count, "MgmtCommand offset out of range")
        return storage[offset]
    }

    /// The whole packet, as written to the control socket, valid inside `body`.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        storage.span.withUnsafeBytes { raw in body(UnsafeRawBufferPointer(rebasing: raw[0..<count])) }
    }

    private mutating func put16(_ value: UInt16, at offset: Int) {
        storage[offset] = UInt8(truncatingIfNeeded: value)
        storage[offset + 1] = UInt8(truncatingIfNeeded: value >> 8)
    }

    @inline(never)
    private mutating func append(_ byte: UInt8) {
        precondition(count - MgmtCommand.headerCount < MgmtCommand.maximumParameterCount, "mgmt parameters too long")
        storage[count] = byte
        count += 1
        put16(UInt16(count - MgmtCommand.headerCount), at: 4)
    }

    public static func readVersion() -> MgmtCommand { MgmtCommand(.readVersion, index: noIndex) }
    public static func readSupportedCommands() -> MgmtCommand { MgmtCommand(.readSupportedCommands, index: noIndex) }
    public static func readIndexList() -> MgmtCommand { MgmtCommand(.readIndexList, index: noIndex) }
    public static func readControllerInfo(index: UInt16) -> MgmtCommand { MgmtCommand(.readControllerInfo, index: index) }
    public static func readAdvMonitorFeatures(index: UInt16) -> MgmtCommand { MgmtCommand(.readAdvMonitorFeatures, index: index) }

    public static func setPowered(index: UInt16, _ on: Bool) -> MgmtCommand {
        var command = MgmtCommand(.setPowered, index: index)
        command.append(on ? 1 : 0)
        return command
    }

    public static func readAdvertisingFeatures(index: UInt16) -> MgmtCommand { MgmtCommand(.readAdvertisingFeatures, index: index) }

    /// Add Advertising flag bit 1: advertise as discoverable, the Flags structure written by the
    /// kernel in front of the data (bit 0, connectable, stays clear: non-connectable unless the
    /// adapter's own connectable setting is on).
    public static let advertiseDiscoverable: UInt32 = 1 << 1

    /// Add Advertising: the gateway's iBeacon as instance `instance`, kept until removed (Duration
    /// 0: the kernel's default when it rotates instances; Timeout 0: no expiry), no scan response.
    public static func addAdvertising(index: UInt16, instance: UInt8, _ advertisement: BeaconAdvertisement) -> MgmtCommand {
        precondition(instance != 0, "instance 0 is reserved")
        var command = MgmtCommand(.addAdvertising, index: index)
        command.append(instance)
        let flags = advertiseDiscoverable
        for shift in stride(from: 0, to: 32, by: 8) { command.append(UInt8(truncatingIfNeeded: flags >> UInt32(shift))) }
        for _ in 0..<4 { command.append(0) }   // duration, timeout
        let data = advertisement.iBeaconStructure
        command.append(UInt8(data.count))
        command.append(0)                      // no scan response
        for index in 0..<data.count { command.append(data[index]) }
        return command
    }

    /// Remove Advertising; instance 0 would remove every instance (bluetoothd's too), so Locus
    /// only ever names its own.
    public static func removeAdvertising(index: UInt16, instance: UInt8) -> MgmtCommand {
        precondition(instance != 0, "instance 0 removes every instance")
        var command = MgmtCommand(.removeAdvertising, index: index)
        command.append(instance)
        return command
    }

    /// Remove Advertisement Monitor; handle 0 would remove every monitor (bluetoothd's too), so
    /// Locus only ever names its own.
    public static func removeAdvMonitor(index: UInt16, handle: UInt16) -> MgmtCommand {
        precondition(handle != 0, "handle 0 removes every monitor")
        var command = MgmtCommand(.removeAdvMonitor, index: index)
        command.append(UInt8(truncatingIfNeeded: handle))
        command.append(UInt8(truncatingIfNeeded: handle >> 8))
        return command
    }

    /// The beacon kinds Locus decodes, as mgmt patterns {AD type, offset in the AD data, value}.
    /// A controller that offloads monitors (MSFT/AOSP) filters by them; in software the kernel
    /// reports every advertisement whatever the patterns say.
    static let beaconPatterns: [(type: UInt8, offset: UInt8, value: [UInt8])] = [
        (0xFF, 0, [0x4C, 0x00, 0x02, 0x15]), // iBeacon: Apple company id, type 0x02, length 0x15
        (0xFF, 2, [0xBE, 0xAC]),             // AltBeacon code after any company id
        (0x16, 0, [0xAA, 0xFE]),             // Eddystone service data
        (0x03, 0, [0xAA, 0xFE]),             // Eddystone in the complete 16-bit UUID list
    ]

    /// Add Advertisement Patterns Monitor with `beaconPatterns`.
    public static func addBeaconMonitor(index: UInt16) -> MgmtCommand {
        var command = MgmtCommand(.addAdvPatternsMonitor, index: index)
        command.append(UInt8(beaconPatterns.count))
        for pattern in beaconPatterns {
            command.append(pattern.type)
            command.append(pattern.offset)
            command.append(UInt8(pattern.value.count))
            for slot in 0..<(patternCount - 3) { command.append(slot < pattern.value.count ? pattern.value[slot] : 0) }
        }
        return command
    }
}

/// mgmt status codes Locus names in its advice (mgmt-api.txt "Status codes").
public enum MgmtStatus {
    public static let success: UInt8 = 0x00
    public static let unknownCommand: UInt8 = 0x01
    public static let busy: UInt8 = 0x0A
    public static let rejected: UInt8 = 0x0B
    public static let notSupported: UInt8 = 0x0C
    public static let invalidParameters: UInt8 = 0x0D
    public static let notPowered: UInt8 = 0x0F
    public static let invalidIndex: UInt8 = 0x11
    public static let rfkilled: UInt8 = 0x12
    public static let permissionDenied: UInt8 = 0x14

    public static func name(_ status: UInt8) -> String {
        switch status {
        case success: return "Success"
        case unknownCommand: return "Unknown Command"
        case busy: return "Busy"
        case rejected: return "Rejected"
        case notSupported: return "Not Supported"
        case invalidParameters: return "Invalid Parameters"
        case notPowered: return "Not Powered"
        case invalidIndex: return "Invalid Index"
        case rfkilled: return "Blocked through rfkill"
        case permissionDenied: return "Permission Denied"
        default: return "0x" + hex(status)
        }
    }
}

/// One mgmt event, decoded. Byte ranges point into the read buffer: valid until the next read.
public enum MgmtEvent {
    case commandComplete(index: UInt16, opcode: UInt16, status: UInt8, parameters: UnsafeRawBufferPointer)
    case commandStatus(index: UInt16, opcode: UInt16, status: UInt8)
    case indexAdded(index: UInt16)
    case indexRemoved(index: UInt16)
    case newSettings(index: UInt16, settings: UInt32)
    case discovering(index: UInt16, on: Bool)
    /// Device Found (monitor nil) or Adv Monitor Device Found (the monitor's handle, 0 when the
    /// kernel reports every advertisement in software).
    case report(index: UInt16, monitor: UInt16?, AdvertisingReport)
    case advMonitorRemoved(index: UInt16, handle: UInt16)
    /// Another program removed an advertising instance (bluetoothd removes all when it starts).
    case advertisingRemoved(index: UInt16, instance: UInt8)
    /// An event Locus does not act on (bluetoothd's pairing, names, connections...).
    case other(index: UInt16, code: UInt16)
}

/// Why a mgmt event or monitor record was rejected.
public enum MgmtEventError: Error, Equatable, Sendable, CustomStringConvertible {
    case truncated
    case lengthMismatch
    case shortParameters
    case dataOverrun

    public var description: String {
        switch self {
        case .truncated: return "shorter than its 6-octet header"
        case .lengthMismatch: return "header length does not match the packet size"
        case .shortParameters: return "parameters shorter than the event's fixed fields"
        case .dataOverrun: return "advertising data length does not match the event"
        }
    }
}

/// The current-settings bits Locus reads (mgmt-api.txt "Read Controller Information").
public enum MgmtSettings {
    public static let powered: UInt32 = 1 << 0
    public static let lowEnergy: UInt32 = 1 << 9
}

public enum MgmtEvents {
    public static let commandComplete: UInt16 = 0x0001
    public static let commandStatus: UInt16 = 0x0002
    public static let indexAdded: UInt16 = 0x0004
    public static let indexRemoved: UInt16 = 0x0005
    public static let newSettings: UInt16 = 0x0006
    public static let deviceFound: UInt16 = 0x0012
    public static let discovering: UInt16 = 0x0013
    public static let advMonitorRemoved: UInt16 = 0x002C
    public static let advertisingRemoved: UInt16 = 0x0024
    public static let advMonitorDeviceFound: UInt16 = 0x002F
    /// Device Found's fixed part: mgmt_addr_info (6 + 1), rssi, flags (4), eir_len (2).
    static let foundFixedCount = 14

    /// Decodes one event as read from the control socket (header first). Every length is checked
    /// before it is used.
    @_noAllocation
    public static func decode(_ packet: UnsafeRawBufferPointer) -> Result<MgmtEvent, MgmtEventError> {
        guard packet.count >= 6 else { return .failure(.truncated) }
        let code = le16(packet, 0), index = le16(packet, 2)
        guard Int(le16(packet, 4)) == packet.count - 6 else { return .failure(.lengthMismatch) }
        let body = UnsafeRawBufferPointer(rebasing: packet[6...])
        let fixed: Int
        switch code {
        case commandComplete, commandStatus: fixed = 3
        case newSettings: fixed = 4
        case discovering, advMonitorRemoved: fixed = 2
        case advertisingRemoved: fixed = 1
        case deviceFound: fixed = foundFixedCount
        case advMonitorDeviceFound: fixed = 2 + foundFixedCount
        default: fixed = 0
        }
        guard body.count >= fixed else { return .failure(.shortParameters) }
        switch code {
        case commandComplete:
            return .success(.commandComplete(index: index, opcode: le16(body, 0), status: body[2],
                                             parameters: UnsafeRawBufferPointer(rebasing: body[3...])))
        case commandStatus: return .success(.commandStatus(index: index, opcode: le16(body, 0), status: body[2]))
        case indexAdded: return .success(.indexAdded(index: index))
        case indexRemoved: return .success(.indexRemoved(index: index))
        case newSettings: return .success(.newSettings(index: index, settings: le32(body, 0)))
        case discovering: return .success(.discovering(index: index, on: body[1] != 0))
        case advMonitorRemoved: return .success(.advMonitorRemoved(index: index, handle: le16(body, 0)))
        case advertisingRemoved: return .success(.advertisingRemoved(index: index, instance: body[0]))
        case deviceFound, advMonitorDeviceFound:
            let skip = code == deviceFound ? 0 : 2
            guard let report = found(body, at: skip) else { return .failure(.dataOverrun) }
            return .success(.report(index: index, monitor: skip == 0 ? nil : le16(body, 0), report))
        default: return .success(.other(index: index, code: code))
        }
    }

    /// Device Found's layout from `offset`: address, address type (mgmt: 0 BR/EDR, 1 LE public,
    /// 2 LE random; HCI numbers them one lower), RSSI (127 = not available), flags, data length.
    @inline(__always)
    private static func found(_ body: UnsafeRawBufferPointer, at offset: Int) -> AdvertisingReport? {
        let length = Int(le16(body, offset + 12))
        guard offset + foundFixedCount + length == body.count else { return nil }
        let type = body[offset + 6], rssi = Int8(bitPattern: body[offset + 7])
        return AdvertisingReport(
            eventType: 0, addressType: type == 0 ? 0xFF : type &- 1,
            address: BLEAddress(littleEndian: body, at: offset), rssi: rssi == 127 ? nil : rssi,
            txPower: nil, isExtended: false,
            data: UnsafeRawBufferPointer(rebasing: body[(offset + foundFixedCount)...]))
    }

    @inline(__always)
    static func le16(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt16 {
        UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    @inline(__always)
    static func le32(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        UInt32(le16(bytes, offset)) | UInt32(le16(bytes, offset + 2)) << 16
    }
}

/// What Locus reads from Command Complete return parameters.
public enum MgmtReplies {
    /// Read Version: version u8, revision le16. Kernel scanning needs 1.18 (Linux 5.10) or later.
    public static func version(_ parameters: UnsafeRawBufferPointer) -> (version: UInt8, revision: UInt16)? {
        guard parameters.count >= 3 else { return nil }
        return (parameters[0], MgmtEvents.le16(parameters, 1))
    }

    /// Read Supported Commands: num_commands le16, num_events le16, then the command opcodes.
    public static func supports(_ parameters: UnsafeRawBufferPointer, _ opcode: MgmtOpcode) -> Bool {
        guard parameters.count >= 4 else { return false }
        let commands = Int(MgmtEvents.le16(parameters, 0))
        guard 4 + 2 * commands <= parameters.count else { return false }
        for slot in 0..<commands where MgmtEvents.le16(parameters, 4 + 2 * slot) == opcode.rawValue { return true }
        return false
    }

    /// Read Controller Index List: num_controllers le16, then the indexes.
    public static func indexListContains(_ parameters: UnsafeRawBufferPointer, _ index: UInt16) -> Bool? {
        guard parameters.count >= 2 else { return nil }
        let controllers = Int(MgmtEvents.le16(parameters, 0))
        guard 2 + 2 * controllers <= parameters.count else { return nil }
        for slot in 0..<controllers where MgmtEvents.le16(parameters, 2 + 2 * slot) == index { return true }
        return false
    }

    /// Read Controller Information: address (6), version, manufacturer (2), supported settings
    /// (4), current settings (4), ... (280 octets in all).
    public static func controllerInfo(_ parameters: UnsafeRawBufferPointer) -> (address: BLEAddress, settings: UInt32)? {
        guard parameters.count >= 280 else { return nil }
        return (BLEAddress(littleEndian: parameters, at: 0), MgmtEvents.le32(parameters, 13))
    }

    /// Read Advertising Features: Max_Instances (octet 6, after Supported_Flags le32,
    /// Max_Adv_Data_Len and Max_Scan_Rsp_Len), checked against Num_Instances and its list.
    public static func maximumAdvertisingInstances(_ parameters: UnsafeRawBufferPointer) -> UInt8? {
        guard parameters.count >= 8, 8 + Int(parameters[7]) <= parameters.count else { return nil }
        return parameters[6]
    }

    /// A reply whose first field is a handle or settings word (Add/Remove Monitor, Set Powered).
    public static func firstWord(_ parameters: UnsafeRawBufferPointer, octets: Int) -> UInt32? {
        guard parameters.count >= octets else { return nil }
        return octets == 2 ? UInt32(MgmtEvents.le16(parameters, 0)) : MgmtEvents.le32(parameters, 0)
    }
}

/// One socket another program has open on the Bluetooth subsystem, from the monitor channel's
/// replay (HCI_MON_CTRL_OPEN).
public struct HCISocketUser: Equatable, Sendable, CustomStringConvertible {
    public enum Channel: UInt16, Sendable { case raw = 0, user = 1, control = 2 }
    public var channel: Channel
    /// The adapter the socket is bound to; 0xFFFF for control sockets (never bound).
    public var index: UInt16
    /// The process name (comm) that opened it.
    public var name: String
    public var trusted: Bool

    public var description: String {
        let kind: String
        switch channel {
        case .raw: kind = "raw"
        case .user: kind = "user channel"
        case .control: kind = "mgmt"
        }
        return "'" + name + "' (" + kind + (index == 0xFFFF ? "" : " hci\(index)") + ")"
    }
}

public enum HCIMonitorRecords {
    public static let controlOpen: UInt16 = 14

    /// One record from the monitor socket: nil (not rejected) for records other than CTRL_OPEN or
    /// for formats without a socket owner; failure when a length does not hold.
    public static func user(in record: UnsafeRawBufferPointer) -> Result<HCISocketUser?, MgmtEventError> {
        guard record.count >= 6 else { return .failure(.truncated) }
        guard Int(MgmtEvents.le16(record, 4)) == record.count - 6 else { return .failure(.lengthMismatch) }
        guard MgmtEvents.le16(record, 0) == controlOpen else { return .success(nil) }
        let body = UnsafeRawBufferPointer(rebasing: record[6...])
        guard body.count >= 14 else { return .failure(.shortParameters) }
        let commLength = Int(body[13])
        guard 14 + commLength <= body.count else { return .failure(.dataOverrun) }
        guard let channel = HCISocketUser.Channel(rawValue: MgmtEvents.le16(body, 4)) else { return .success(nil) }
        var end = 14
        while end < 14 + commLength && body[end] != 0 { end += 1 }
        let name = String(decoding: UnsafeRawBufferPointer(rebasing: body[14..<end]), as: UTF8.self)
        return .success(HCISocketUser(channel: channel, index: MgmtEvents.le16(record, 2), name: name,
                                      trusted: MgmtEvents.le32(body, 9) & 1 != 0))
    }
}
