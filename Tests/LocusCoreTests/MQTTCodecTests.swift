import AllocCounter
import Testing
@testable import LocusCore

/// The MQTT 3.1.1 codec against the standard's own examples (OASIS MQTT 3.1.1, section numbers
/// below) and its rules for malformed packets. The broker end to end (mosquitto) is the uplink's
/// test.
@Suite struct MQTTCodecTests {
    static func bytes(_ writer: borrowing MQTTWriter) -> [UInt8] { Array(writer.bytes) }

    static func decode(_ packet: [UInt8]) -> Result<MQTTPacket, MQTTProtocolError> {
        packet.withUnsafeBytes { MQTTPacket.decode($0) }
    }

    // §2.2.3, Table 2.4: the remaining length's size boundaries.
    @Test(arguments: [(0, [0x00]), (127, [0x7F]), (128, [0x80, 0x01]), (16_383, [0xFF, 0x7F]), (16_384, [0x80, 0x80, 0x01]),
                      (2_097_151, [0xFF, 0xFF, 0x7F]), (2_097_152, [0x80, 0x80, 0x80, 0x01])] as [(Int, [UInt8])])
    func remainingLengthIsEncodedAsTheStandardsTable(length: Int, expected: [UInt8]) {
        // A QoS 0 PUBLISH to "t": 3 bytes of topic, then the payload makes up the length.
        guard length >= 3 else {
            var writer = MQTTWriter(capacity: 16)
            let written1 = writer.pingreq()
            #expect(written1)
            #expect(Self.bytes(writer) == [0xC0] + expected)
            return
        }
        var writer = MQTTWriter(capacity: length + 8)
        let payload = [UInt8](repeating: 0x41, count: length - 3)
        let topic: [UInt8] = Array("t".utf8)
        let written = topic.withUnsafeBytes { topic in payload.withUnsafeBytes { payload in
            writer.publish(topic: topic, payload: payload, qos: .atMostOnce, retain: false, packetID: 0)
        } }
        #expect(written)
        #expect(Array(writer.bytes.prefix(1 + expected.count)) == [0x30] + expected)
        #expect(writer.count == 1 + expected.count + length)
        #expect(MQTTWriter.lengthBytes(length) == expected.count)
    }

    // §2.2.3: the largest length, 268,435,455 = FF FF FF 7F, read by the framer; a fifth length
    // byte is malformed.
    @Test func theFramerReadsTheLargestLengthAndRefusesAFifthByte() {
        var framer = MQTTFramer(maximumPacketBytes: 1024)
        let largest: [UInt8] = [0x30, 0xFF, 0xFF, 0xFF, 0x7F]
        let failure = largest.withUnsafeBytes { framer.consume($0) { _ in Issue.record("no packet expected") } }
        #expect(failure == .tooLarge(5 + 268_435_455))
        var second = MQTTFramer(maximumPacketBytes: 1024)
        let malformed: [UInt8] = [0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]
        #expect(malformed.withUnsafeBytes { second.consume($0) { _ in } } == .malformedLength)
        // Stopped: later bytes are not read until the next connection.
        let pingresp: [UInt8] = [0xD0, 0x00]
        var count = 0
        #expect(pingresp.withUnsafeBytes { second.consume($0) { _ in count += 1 } } == .malformedLength)
        second.reset()
        #expect(pingresp.withUnsafeBytes { second.consume($0) { _ in count += 1 } } == nil)
        #expect(count == 1)
    }

    // §3.1.2.11, Figure 3.6: the variable header of a CONNECT with user name, password, a QoS 1
    // will, clean session and a keep-alive of 10 s.
    @Test func connectMatchesTheStandardsExample() throws {
        var writer = MQTTWriter(capacity: 256)
        let options = MQTTConnectOptions(clientID: Array("gw1".utf8), cleanSession: true, keepAliveS: 10,
                                         will: .init(topic: Array("locus/gw1/status".utf8), payload: Array("offline".utf8), qos: .atLeastOnce, retain: false),
                                         username: Array("user".utf8), password: Array("secret".utf8))
        let written2 = writer.connect(options)
        #expect(written2)
        let packet = Self.bytes(writer)
        #expect(packet[0] == 0x10)
        #expect(Array(packet[2..<12]) == [0x00, 0x04, 0x4D, 0x51, 0x54, 0x54, 0x04, 0xCE, 0x00, 0x0A])
        // §3.1.3: the payload's fields in order: client id, will topic, will message, user, password.
        var expectedPayload: [UInt8] = []
        for field in ["gw1", "locus/gw1/status", "offline", "user", "secret"] {
            expectedPayload += [0, UInt8(field.utf8.count)] + Array(field.utf8)
        }
        #expect(Array(packet[12...]) == expectedPayload)
        #expect(Int(packet[1]) == packet.count - 2)
    }

    @Test func connectKeepsTheSessionAndRetainsTheWill() {
        var writer = MQTTWriter(capacity: 256)
        let options = MQTTConnectOptions(clientID: Array("gw1".utf8), cleanSession: false, keepAliveS: 60,
                                         will: .init(topic: Array("s".utf8), payload: Array("offline".utf8), qos: .atLeastOnce, retain: true))
        let written3 = writer.connect(options)
        #expect(written3)
        // Will retain 1, will QoS 01, will flag 1, clean session 0.
        #expect(Self.bytes(writer)[9] == 0x2C)
    }

    @Test func connectRefusesWhatTheProtocolCannotCarry() {
        var writer = MQTTWriter(capacity: 256)
        // §3.1.3.1: an empty client id needs a clean session; §3.1.2.9: no password without a user.
        let written4 = writer.connect(MQTTConnectOptions(clientID: [], cleanSession: false, keepAliveS: 60))
        #expect(!written4)
        let written5 = writer.connect(MQTTConnectOptions(clientID: Array("a".utf8), cleanSession: false, keepAliveS: 60, password: Array("p".utf8)))
        #expect(!written5)
        let written6 = writer.connect(MQTTConnectOptions(clientID: [UInt8](repeating: 0x61, count: 65_536), cleanSession: true, keepAliveS: 60))
        #expect(!written6)
        #expect(writer.count == 0)
        var small = MQTTWriter(capacity: 16)
        let written7 = small.connect(MQTTConnectOptions(clientID: Array("a-long-client-id".utf8), cleanSession: true, keepAliveS: 60))
        #expect(!written7)
        #expect(small.count == 0)
    }

    // §3.3.2.3, Figure 3.11: topic "a/b", packet id 10.
    @Test func publishMatchesTheStandardsExampleAndDecodesBack() throws {
        var writer = MQTTWriter(capacity: 64)
        let topic: [UInt8] = Array("a/b".utf8)
        let payload: [UInt8] = Array(#"{"seq":1}"#.utf8)
        let written = topic.withUnsafeBytes { topic in payload.withUnsafeBytes { payload in
            writer.publish(topic: topic, payload: payload, qos: .atLeastOnce, retain: true, duplicate: true, packetID: 10)
        } }
        #expect(written)
        let packet = Self.bytes(writer)
        #expect(packet[0] == 0x3B)   // PUBLISH, DUP, QoS 1, RETAIN
        #expect(Array(packet[2..<9]) == [0x00, 0x03, 0x61, 0x2F, 0x62, 0x00, 0x0A])
        guard case .success(.publish(let publish)) = Self.decode(packet) else { Issue.record("not a PUBLISH"); return }
        #expect(Array(publish.topic) == topic && Array(publish.payload) == payload)
        #expect(publish.qos == .atLeastOnce && publish.retain && publish.duplicate && publish.packetID == 10)
    }

    @Test func publishAtQoS0HasNoPacketIDAndNoDuplicateFlag() {
        var writer = MQTTWriter(capacity: 64)
        let topic: [UInt8] = Array("a".utf8)
        let written = topic.withUnsafeBytes { writer.publish(topic: $0, payload: UnsafeRawBufferPointer(start: nil, count: 0), qos: .atMostOnce,
                                                               retain: false, duplicate: true, packetID: 7) }
        #expect(written)
        #expect(Self.bytes(writer) == [0x30, 0x03, 0x00, 0x01, 0x61])
        // A QoS 1 message needs an id.
        let written8 = topic.withUnsafeBytes { writer.publish(topic: $0, payload: $0, qos: .atLeastOnce, retain: false, packetID: 0) }
        #expect(!written8)
    }

    @Test func smallPacketsAreTheStandardsBytes() {
        var writer = MQTTWriter(capacity: 64)
        let written9 = writer.puback(packetID: 0x1234)
        #expect(written9)
        let written10 = writer.pingreq()
        #expect(written10)
        let written11 = writer.disconnect()
        #expect(written11)
        let filter: [UInt8] = Array("$share/ingest/locus/+/event/#".utf8)
        let written12 = filter.withUnsafeBytes { writer.subscribe(packetID: 1, filter: $0, qos: .atLeastOnce) }
        #expect(written12)
        let expected: [UInt8] = [0x40, 0x02, 0x12, 0x34, 0xC0, 0x00, 0xE0, 0x00, 0x82, UInt8(2 + 2 + filter.count + 1), 0x00, 0x01,
                                 0x00, UInt8(filter.count)] + filter + [0x01]
        #expect(Self.bytes(writer) == expected)
        writer.drop(4)
        #expect(Array(Self.bytes(writer).prefix(2)) == [0xC0, 0x00])
    }

    @Test func brokerPacketsDecode() {
        guard case .success(.connack(false, 0)) = Self.decode([0x20, 0x02, 0x00, 0x00]) else { Issue.record("CONNACK accepted"); return }
        guard case .success(.connack(true, 0)) = Self.decode([0x20, 0x02, 0x01, 0x00]) else { Issue.record("CONNACK session present"); return }
        guard case .success(.connack(false, 4)) = Self.decode([0x20, 0x02, 0x00, 0x04]) else { Issue.record("CONNACK refused"); return }
        #expect(MQTT.explain(connectReturnCode: 4).description.contains("user name or password"))
        guard case .success(.puback(0x0102)) = Self.decode([0x40, 0x02, 0x01, 0x02]) else { Issue.record("PUBACK"); return }
        guard case .success(.pubrel(5)) = Self.decode([0x62, 0x02, 0x00, 0x05]) else { Issue.record("PUBREL"); return }
        guard case .success(.pingresp) = Self.decode([0xD0, 0x00]) else { Issue.record("PINGRESP"); return }
        guard case .success(.suback(3, 1, false)) = Self.decode([0x90, 0x03, 0x00, 0x03, 0x01]) else { Issue.record("SUBACK"); return }
        guard case .success(.suback(3, 0x80, true)) = Self.decode([0x90, 0x04, 0x00, 0x03, 0x80, 0x00]) else { Issue.record("SUBACK refused"); return }
    }

    @Test(arguments: [
        ([0x20, 0x02, 0x01, 0x05], "a refusing CONNACK claims a session"),
        ([0x20, 0x03, 0x00, 0x00, 0x00], "CONNACK has no flags and two bytes"),
        ([0x41, 0x02, 0x00, 0x01], "an acknowledgement has fixed flags and a non-zero packet id"),
        ([0x40, 0x02, 0x00, 0x00], "an acknowledgement has fixed flags and a non-zero packet id"),
        ([0x36, 0x05, 0x00, 0x01, 0x61, 0x00, 0x01], "PUBLISH with QoS 3"),
        ([0x38, 0x03, 0x00, 0x01, 0x61], "a QoS 0 PUBLISH marked as a duplicate"),
        ([0x30, 0x03, 0x00, 0x01, 0x23], "PUBLISH's topic has a wildcard or a NUL"),
        ([0x30, 0x04, 0x00, 0x02, 0xC3, 0x28], "PUBLISH's topic is not UTF-8"),
        ([0x30, 0x04, 0x00, 0x05, 0x61, 0x62], "PUBLISH's topic runs past the packet"),
        ([0x32, 0x04, 0x00, 0x01, 0x61, 0x00], "a QoS 1 or 2 PUBLISH without a packet id"),
        ([0xC0, 0x00], "a broker sent a packet only a server receives"),
        ([0x00, 0x00], "packet type 0 or 15 is reserved"),
        ([0xD0, 0x01], "the remaining length does not match the packet's size"),
        ([0x92, 0x03, 0x00, 0x01, 0x00], "SUBACK has no flags, a packet id and a return code per filter"),
        ([0x90, 0x03, 0x00, 0x01, 0x03], "SUBACK has a return code other than 0, 1, 2 or 0x80"),
    ] as [([UInt8], String)])
    func malformedPacketsAreRefusedWithTheirReason(packet: [UInt8], reason: String) {
        guard case .failure(let error) = Self.decode(packet) else { Issue.record("accepted \(packet)"); return }
        #expect(error.description == reason)
    }

    /// A stream of packets cut at every place comes out whole and in order.
    @Test func theFramerReassemblesPacketsCutAnywhere() {
        var writer = MQTTWriter(capacity: 4096)
        let topic: [UInt8] = Array("locus/gw/event/harbour/berth".utf8)
        let payload = [UInt8](repeating: 0x7A, count: 300)   // a two-byte remaining length
        let written13 = writer.pingreq()
        #expect(written13)
        #expect(topic.withUnsafeBytes { topic in payload.withUnsafeBytes { writer.publish(topic: topic, payload: $0, qos: .atLeastOnce, retain: false, packetID: 9) } })
        let written14 = writer.puback(packetID: 9)
        #expect(written14)
        let stream = Self.bytes(writer)
        let sizes = [2, 1 + 2 + 2 + topic.count + 2 + 300, 4]
        for cut in 0...stream.count {
            var framer = MQTTFramer(maximumPacketBytes: 512)
            var seen: [[UInt8]] = []
            for part in [Array(stream[..<cut]), Array(stream[cut...])] {
                #expect(part.withUnsafeBytes { framer.consume($0) { seen.append(Array($0)) } } == nil)
            }
            #expect(seen.map(\.count) == sizes)
            #expect(seen.joined().elementsEqual(stream))
        }
    }

    @Test func publishingAndReadingAcknowledgementsAllocateNothing() {
        var writer = MQTTWriter(capacity: 4096)
        var framer = MQTTFramer(maximumPacketBytes: 512)
        let topic: [UInt8] = Array("locus/gw/event/harbour/berth".utf8)
        let payload: [UInt8] = Array(#"{"gateway":"gw","seq":1,"state":"satisfied"}"#.utf8)
        let acknowledgements: [UInt8] = [0x40, 0x02, 0x00, 0x01, 0x40, 0x02, 0x00, 0x02, 0xD0, 0x00]
        var acknowledged = 0
        let count = topic.withUnsafeBytes { topic in payload.withUnsafeBytes { payload in acknowledgements.withUnsafeBytes { incoming in
            allocations {
                for round in 0..<100 {
                    writer.reset()
                    _ = writer.publish(topic: topic, payload: payload, qos: .atLeastOnce, retain: false, packetID: UInt16(round + 1))
                    _ = framer.consume(incoming) { packet in
                        if case .success(.puback) = MQTTPacket.decode(packet) { acknowledged += 1 }
                    }
                }
            }
        } } }
        #expect(count == 0)
        #expect(acknowledged == 200)
    }
}

/// The uplink's window of unacknowledged messages: the delivered position moves only past
/// records whose every message is acknowledged, in any PUBACK order, and the chain ("prev") at
/// that position is what the oldest unacknowledged record was sent with. (The window is
/// noncopyable: each reading goes into a local before it is checked.)
@Suite struct PublishWindowTests {
    @Test func deliveredMovesOnlyPastWholeRecordsAndTheChainFollows() {
        var window = PublishWindow(capacity: 8)
        var position = (window.delivered(readThrough: 10), window.chained(current: 7))
        #expect(position == (10, 7))
        let status = window.add(sequence: 0)                                  // not a log record
        let event = window.add(sequence: 11, timeNs: 1, chained: 7)           // an event: two messages
        let state = window.add(sequence: 11, timeNs: 1, chained: 7)
        let fix = window.add(sequence: 12, timeNs: 2, chained: 11)            // a fix: no place in the chain
        let gpio = window.add(sequence: 14, timeNs: 3, chained: 11)
        position = (window.delivered(readThrough: 14), window.chained(current: 14))
        #expect(position == (10, 7))
        var known = window.acknowledge(state) && window.acknowledge(status) && window.acknowledge(fix)
        #expect(known)
        position = (window.delivered(readThrough: 14), window.chained(current: 14))
        #expect(position == (10, 7), "the event's other message is not acknowledged")
        known = window.acknowledge(event)
        position = (window.delivered(readThrough: 14), window.chained(current: 14))
        let oldest = window.oldest?.sequence
        #expect(known && position == (13, 11) && oldest == 14)
        known = window.acknowledge(gpio)
        let empty = window.isEmpty
        position = (window.delivered(readThrough: 14), window.chained(current: 14))
        #expect(known && empty && position == (14, 14))
        known = window.acknowledge(gpio)
        #expect(!known, "an id acknowledged twice is unknown the second time")
    }

    @Test func anUnknownChainStaysUnknown() {
        var window = PublishWindow(capacity: 4)
        _ = window.add(sequence: 5, chained: nil)
        var chained = window.chained(current: 5)
        #expect(chained == nil)
        window.removeAll()
        chained = window.chained(current: nil)
        let delivered = window.delivered(readThrough: 4)
        #expect(chained == nil && delivered == 4)
    }

    /// The goodbye's id: unused by the window (full or not), and the window's ids go on after it.
    @Test func anUnrecordedIDIsNeverTheWindowsOwn() {
        var window = PublishWindow(capacity: 2)
        let first = window.add(sequence: 1)
        let second = window.add(sequence: 2)
        let goodbye = window.unrecordedPacketID()
        let unknown = window.acknowledge(goodbye)
        #expect(goodbye != first && goodbye != second && !unknown && window.free == 0)
        let acknowledged = window.acknowledge(first)
        let next = window.add(sequence: 3)
        #expect(acknowledged && next == goodbye &+ 1)
    }
}
