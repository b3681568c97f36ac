import LocusCore

/// Splits the broker's byte stream into packets, as `MQTTFramer` does on the gateway, with one
/// difference a collector needs: a packet larger than `maximumPacketBytes` is not a reason to
/// close the connection (the broker would send it again at once, for ever). Its first
/// `keptBytes` are kept, the rest read past, and it is handed over `.oversized`, so the ingest
/// quarantines and acknowledges it like any other message that is not a record.
struct IngestFramer {
    enum Framed {
        case whole([UInt8])
        /// The packet's first bytes (its fixed header included) and its whole size.
        case oversized([UInt8], Int)
    }

    enum Failure: Error, CustomStringConvertible {
        case malformedLength
        var description: String { "a remaining length longer than four bytes" }
    }

    let maximumPacketBytes: Int
    let keptBytes: Int
    /// What an oversized packet keeps beyond `keptBytes` of payload: its fixed header, topic and
    /// packet id, whatever their length.
    static let headroom = 5 + 2 + MQTT.maximumStringBytes + 2
    private var header: [UInt8] = []
    private var packet: [UInt8] = []
    /// The packet's whole size once its fixed header is complete; 0 before.
    private var expected = 0
    /// Bytes of the packet read so far (kept or not).
    private var seen = 0
    private(set) var failure: Failure? = nil

    init(maximumPacketBytes: Int, keptBytes: Int) {
        self.maximumPacketBytes = maximumPacketBytes
        self.keptBytes = keptBytes
    }

    mutating func consume(_ bytes: UnsafeRawBufferPointer, _ body: (Framed) -> Void) {
        guard failure == nil else { return }
        var index = 0
        while index < bytes.count {
            if expected == 0 {
                header.append(bytes[index])
                index += 1
                guard header.count >= 2 else { continue }
                if header[header.count - 1] & 0x80 != 0 {
                    guard header.count < 5 else {
                        failure = .malformedLength
                        return
                    }
                    continue
                }
                var remaining = 0
                for position in stride(from: header.count - 1, through: 1, by: -1) { remaining = remaining << 7 | Int(header[position] & 0x7F) }
                expected = header.count + remaining
                packet = header
                seen = header.count
                header.removeAll(keepingCapacity: true)
            } else {
                let take = min(expected - seen, bytes.count - index)
                let keep = max(0, min(take, (expected > maximumPacketBytes ? keptBytes + Self.headroom : expected) - packet.count))
                if keep > 0 { packet.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<index + keep])) }
                seen += take
                index += take
            }
            if expected > 0 && seen == expected {
                body(expected > maximumPacketBytes ? .oversized(packet, expected) : .whole(packet))
                packet = []
                expected = 0
                seen = 0
            }
        }
    }

    /// An oversized packet's PUBLISH fields from its first bytes: topic, packet id, the payload's
    /// kept part and whole size; nil when it is not a PUBLISH or its header runs past them.
    static func oversizedPublish(_ head: [UInt8], totalBytes: Int) -> FleetBroker.Message? {
        guard let first = head.first, first >> 4 == MQTT.PacketType.publish.rawValue,
              let qos = MQTT.QoS(rawValue: (first >> 1) & 0x3), qos != .exactlyOnce else { return nil }
        var offset = 1
        while offset < head.count && head[offset] & 0x80 != 0 { offset += 1 }
        offset += 1
        guard offset + 2 <= head.count else { return nil }
        let topicBytes = Int(head[offset]) << 8 | Int(head[offset + 1])
        offset += 2
        guard offset + topicBytes + (qos == .atMostOnce ? 0 : 2) <= head.count else { return nil }
        let topic = String(decoding: head[offset..<offset + topicBytes], as: UTF8.self)
        offset += topicBytes
        var packetID: UInt16 = 0
        if qos != .atMostOnce {
            packetID = UInt16(head[offset]) << 8 | UInt16(head[offset + 1])
            offset += 2
            guard packetID != 0 else { return nil }
        }
        let payloadBytes = totalBytes - offset
        let kept = Array(head[offset..<min(head.count, offset + FleetBroker.keptPayloadBytes)])
        return FleetBroker.Message(topic: topic, payload: kept, payloadBytes: payloadBytes, qos: qos, packetID: packetID,
                                   retained: first & 0x1 != 0, duplicate: first & 0x8 != 0)
    }
}
