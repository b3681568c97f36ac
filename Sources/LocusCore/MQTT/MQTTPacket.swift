/// MQTT 3.1.1 (OASIS Standard, 29 October 2014; cited below by section, "§3.3"): the packets a
/// client sends and receives, as bytes. Pure code: the uplink's socket and TLS live in
/// LocusDevices, its session in the agent; the fleet's ingest reuses the same codec on the host.
///
/// Only what a client needs is here. A client sends CONNECT, PUBLISH, PUBACK, SUBSCRIBE, PINGREQ
/// and DISCONNECT (`MQTTWriter`) and receives CONNACK, PUBLISH, PUBACK, SUBACK, PINGRESP and the
/// QoS 2 acknowledgements (`MQTTPacket.decode`); a packet only a server receives, arriving from a
/// broker, is a protocol violation (§4.8: the client closes the connection).
public enum MQTT {
    /// Control packet types, the high nibble of the fixed header's first byte (§2.2.1).
    public enum PacketType: UInt8, Sendable {
        case connect = 1, connack, publish, puback, pubrec, pubrel, pubcomp, subscribe, suback, unsubscribe, unsuback,
             pingreq, pingresp, disconnect
    }

    /// Quality of service (§4.3). The uplink publishes at least once; the store dedupes.
    public enum QoS: UInt8, Sendable {
        case atMostOnce = 0, atLeastOnce = 1, exactlyOnce = 2
    }

    /// The protocol level of 3.1.1 in CONNECT (§3.1.2.2).
    public static let protocolLevel: UInt8 = 4
    /// The largest remaining length four length bytes can express (§2.2.3).
    public static let maximumRemainingLength = 268_435_455
    /// A UTF-8 string field's length is a 16-bit prefix (§1.5.3).
    public static let maximumStringBytes = 65_535

    /// CONNACK's return code (§3.2.2.3), with what a technician does about it.
    public static func explain(connectReturnCode code: UInt8) -> StaticString {
        switch code {
        case 0: return "accepted"
        case 1: return "the broker refused the protocol level (it does not speak MQTT 3.1.1)"
        case 2: return "the broker refused the client id (check [uplink] client_id: unique per gateway, 1-23 characters for strict brokers)"
        case 3: return "the broker is unavailable (it accepted the connection but cannot serve it now)"
        case 4: return "the broker refused the user name or password (check [uplink] username and password_file)"
        case 5: return "the broker refused this client (not authorized: check the broker's ACL for this user and client id)"
        default: return "the broker answered with a return code MQTT 3.1.1 does not define"
        }
    }
}

/// Why bytes from a broker are not a packet this client accepts. Each is a protocol violation:
/// the connection is closed (§4.8) and the reason logged.
public struct MQTTProtocolError: Error, Sendable, CustomStringConvertible {
    public let reason: StaticString

    public init(_ reason: StaticString) { self.reason = reason }

    public var description: String { reason.description }
}

/// A packet a client received, decoded in place: topic and payload are slices of the packet's
/// bytes (valid while those are).
public enum MQTTPacket {
    /// CONNACK: whether the broker kept a session for this client id, and its return code
    /// (0 accepted; `MQTT.explain(connectReturnCode:)`).
    case connack(sessionPresent: Bool, returnCode: UInt8)
    case publish(MQTTPublish)
    case puback(packetID: UInt16)
    case pubrec(packetID: UInt16)
    case pubrel(packetID: UInt16)
    case pubcomp(packetID: UInt16)
    /// SUBACK: the first filter's granted QoS (0-2) or 0x80 for a refused one, and whether any of
    /// the filters was refused.
    case suback(packetID: UInt16, firstGrant: UInt8, anyRefused: Bool)
    case unsuback(packetID: UInt16)
    case pingresp

    /// One whole packet (fixed header included, as `MQTTFramer` hands it over).
    @_noAllocation
    public static func decode(_ packet: UnsafeRawBufferPointer) -> Result<MQTTPacket, MQTTProtocolError> {
        guard packet.count >= 2 else { return .failure(MQTTProtocolError("a packet is at least two bytes")) }
        let first = packet[0]
        let flags = first & 0x0F
        var reader = MQTTReader(packet)
        guard let remaining = reader.remainingLength(), remaining == reader.left else {
            return .failure(MQTTProtocolError("the remaining length does not match the packet's size"))
        }
        guard let type = MQTT.PacketType(rawValue: first >> 4) else {
            return .failure(MQTTProtocolError("packet type 0 or 15 is reserved"))
        }
        switch type {
        case .connack:
            guard flags == 0, remaining == 2, let acknowledge = reader.byte(), let code = reader.byte() else {
                return .failure(MQTTProtocolError("CONNACK has no flags and two bytes"))
            }
            guard acknowledge & 0xFE == 0 else { return .failure(MQTTProtocolError("CONNACK's reserved flag bits are set")) }
            // §3.2.2.2: a refusal never has the session-present flag.
            guard code == 0 || acknowledge == 0 else { return .failure(MQTTProtocolError("a refusing CONNACK claims a session")) }
            return .success(.connack(sessionPresent: acknowledge == 1, returnCode: code))
        case .publish:
            return MQTTPublish.decode(flags: flags, &reader).map { .publish($0) }
        case .puback, .pubrec, .pubcomp, .pubrel, .unsuback:
            // §2.2.2: PUBREL's flags are 0010, the others' 0000.
            guard flags == (type == .pubrel ? 0x2 : 0), remaining == 2, let id = reader.uint16(), id != 0 else {
                return .failure(MQTTProtocolError("an acknowledgement has fixed flags and a non-zero packet id"))
            }
            switch type {
            case .puback: return .success(.puback(packetID: id))
            case .pubrec: return .success(.pubrec(packetID: id))
            case .pubrel: return .success(.pubrel(packetID: id))
            case .pubcomp: return .success(.pubcomp(packetID: id))
            default: return .success(.unsuback(packetID: id))
            }
        case .suback:
            guard flags == 0, remaining >= 3, let id = reader.uint16(), id != 0 else {
                return .failure(MQTTProtocolError("SUBACK has no flags, a packet id and a return code per filter"))
            }
            var firstGrant: UInt8? = nil
            var anyRefused = false
            while let code = reader.byte() {
                guard code <= 2 || code == 0x80 else { return .failure(MQTTProtocolError("SUBACK has a return code other than 0, 1, 2 or 0x80")) }
                if firstGrant == nil { firstGrant = code }
                if code == 0x80 { anyRefused = true }
            }
            return .success(.suback(packetID: id, firstGrant: firstGrant ?? 0x80, anyRefused: anyRefused))
        case .pingresp:
            guard flags == 0, remaining == 0 else { return .failure(MQTTProtocolError("PINGRESP has no flags and no body")) }
            return .success(.pingresp)
        case .connect, .subscribe, .unsubscribe, .pingreq, .disconnect:
            return .failure(MQTTProtocolError("a broker sent a packet only a server receives"))
        }
    }
}

/// A PUBLISH as received (§3.3).
public struct MQTTPublish {
    public let topic: UnsafeRawBufferPointer
    public let payload: UnsafeRawBufferPointer
    public let qos: MQTT.QoS
    public let retain: Bool
    public let duplicate: Bool
    /// 0 for QoS 0 (it has none).
    public let packetID: UInt16

    @_noAllocation
    static func decode(flags: UInt8, _ reader: inout MQTTReader) -> Result<MQTTPublish, MQTTProtocolError> {
        guard let qos = MQTT.QoS(rawValue: (flags >> 1) & 0x3) else { return .failure(MQTTProtocolError("PUBLISH with QoS 3")) }
        // §3.3.1.2: DUP is 0 for every QoS 0 message.
        guard qos != .atMostOnce || flags & 0x8 == 0 else { return .failure(MQTTProtocolError("a QoS 0 PUBLISH marked as a duplicate")) }
        guard let topic = reader.string() else { return .failure(MQTTProtocolError("PUBLISH's topic runs past the packet")) }
        guard topic.count > 0 else { return .failure(MQTTProtocolError("PUBLISH with an empty topic")) }
        // §4.7.3 and §1.5.3: no wildcards in a topic name, well-formed UTF-8 without U+0000.
        for byte in topic where byte == UInt8(ascii: "+") || byte == UInt8(ascii: "#") || byte == 0 {
            return .failure(MQTTProtocolError("PUBLISH's topic has a wildcard or a NUL"))
        }
        guard UTF8Validation.firstInvalidByte(in: topic) == nil else { return .failure(MQTTProtocolError("PUBLISH's topic is not UTF-8")) }
        var packetID: UInt16 = 0
        if qos != .atMostOnce {
            guard let id = reader.uint16(), id != 0 else { return .failure(MQTTProtocolError("a QoS 1 or 2 PUBLISH without a packet id")) }
            packetID = id
        }
        return .success(MQTTPublish(topic: topic, payload: reader.rest(), qos: qos, retain: flags & 0x1 != 0,
                                    duplicate: flags & 0x8 != 0, packetID: packetID))
    }
}

/// Reads a packet's fields front to back; nil when a field runs past the end.
struct MQTTReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 1

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var left: Int { bytes.count - offset }

    /// The variable-length remaining length (§2.2.3): at most four bytes.
    @_noAllocation
    mutating func remainingLength() -> Int? {
        var value = 0
        var shift = 0
        for _ in 0..<4 {
            guard let byte = byte() else { return nil }
            value |= Int(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        return nil
    }

    @_noAllocation
    mutating func byte() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    @_noAllocation
    mutating func uint16() -> UInt16? {
        guard left >= 2 else { return nil }
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    /// A length-prefixed string's bytes (§1.5.3).
    @_noAllocation
    mutating func string() -> UnsafeRawBufferPointer? {
        guard let length = uint16(), left >= Int(length) else { return nil }
        defer { offset += Int(length) }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + Int(length)])
    }

    @_noAllocation
    mutating func rest() -> UnsafeRawBufferPointer {
        defer { offset = bytes.count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset...])
    }
}
