/// What CONNECT says (§3.1): who the client is, whether the broker keeps its session, how long it
/// may stay silent, the message the broker publishes if it vanishes, and its credentials.
public struct MQTTConnectOptions: Sendable {
    public struct Will: Sendable {
        public var topic: [UInt8]
        public var payload: [UInt8]
        public var qos: MQTT.QoS
        public var retain: Bool

        public init(topic: [UInt8], payload: [UInt8], qos: MQTT.QoS, retain: Bool) {
            self.topic = topic
            self.payload = payload
            self.qos = qos
            self.retain = retain
        }
    }

    public var clientID: [UInt8]
    /// false: the broker keeps the session (subscriptions, unacknowledged QoS 1 messages) across
    /// connections, as the uplink and the ingest want.
    public var cleanSession: Bool
    /// Seconds; 0 turns keep-alive off (§3.1.2.10).
    public var keepAliveS: UInt16
    public var will: Will?
    public var username: [UInt8]?
    public var password: [UInt8]?

    public init(clientID: [UInt8], cleanSession: Bool, keepAliveS: UInt16, will: Will? = nil, username: [UInt8]? = nil, password: [UInt8]? = nil) {
        self.clientID = clientID
        self.cleanSession = cleanSession
        self.keepAliveS = keepAliveS
        self.will = will
        self.username = username
        self.password = password
    }
}

/// Writes the packets a client sends, one after another, into a buffer allocated once (a
/// connection's output queue). A packet that does not fit, or a field the protocol cannot carry,
/// is not written at all and the call returns false.
public struct MQTTWriter: ~Copyable {
    private let storage: UnsafeMutableRawBufferPointer
    public private(set) var count = 0

    public init(capacity: Int) {
        precondition(capacity >= 5)
        storage = .allocate(byteCount: capacity, alignment: 8)
    }

    deinit { storage.deallocate() }

    public var capacity: Int { storage.count }

    /// The packets written since the last `reset()` (or `drop`).
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(storage)[0..<count]) }

    @_noAllocation
    public mutating func reset() { count = 0 }

    /// The first `written` bytes went out: the rest moves to the front.
    @_noAllocation
    public mutating func drop(_ written: Int) {
        precondition(written >= 0 && written <= count)
        let rest = count - written
        if rest > 0 { storage.baseAddress!.copyMemory(from: storage.baseAddress! + written, byteCount: rest) }
        count = rest
    }

    // MARK: packets

    /// CONNECT with protocol level 4 (3.1.1). False when it does not fit or a field is not
    /// allowed (an empty client id with a kept session, a password without a user name, a field
    /// longer than 65,535 bytes).
    public mutating func connect(_ options: MQTTConnectOptions) -> Bool {
        guard !options.clientID.isEmpty || options.cleanSession, options.password == nil || options.username != nil else { return false }
        var flags: UInt8 = options.cleanSession ? 0x02 : 0
        var body = 10 + 2 + options.clientID.count
        var fields = [options.clientID]
        if let will = options.will {
            flags |= 0x04 | will.qos.rawValue << 3 | (will.retain ? 0x20 : 0)
            body += 4 + will.topic.count + will.payload.count
            fields.append(will.topic)
            fields.append(will.payload)
        }
        if let username = options.username {
            flags |= 0x80
            body += 2 + username.count
            fields.append(username)
        }
        if let password = options.password {
            flags |= 0x40
            body += 2 + password.count
            fields.append(password)
        }
        guard fields.allSatisfy({ $0.count <= MQTT.maximumStringBytes }), begin(0x10, body) else { return false }
        append(StaticString("MQTT"))
        append(byte: MQTT.protocolLevel)
        append(byte: flags)
        append(uint16: options.keepAliveS)
        for field in fields { field.withUnsafeBytes { append(string: $0) } }
        return true
    }

    /// PUBLISH (§3.3). `packetID` is ignored at QoS 0 (it has none) and must not be 0 above it.
    @_noAllocation
    public mutating func publish(topic: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer, qos: MQTT.QoS, retain: Bool,
                                 duplicate: Bool = false, packetID: UInt16) -> Bool {
        guard topic.count > 0, topic.count <= MQTT.maximumStringBytes, qos == .atMostOnce || packetID != 0 else { return false }
        let first: UInt8 = 0x30 | (duplicate && qos != .atMostOnce ? 0x08 : 0) | qos.rawValue << 1 | (retain ? 0x01 : 0)
        guard begin(first, 2 + topic.count + (qos == .atMostOnce ? 0 : 2) + payload.count) else { return false }
        append(string: topic)
        if qos != .atMostOnce { append(uint16: packetID) }
        append(payload)
        return true
    }

    /// PUBACK (§3.4): the answer to a QoS 1 PUBLISH the client received.
    @_noAllocation
    public mutating func puback(packetID: UInt16) -> Bool {
        guard packetID != 0, begin(0x40, 2) else { return false }
        append(uint16: packetID)
        return true
    }

    /// SUBSCRIBE (§3.8) to one topic filter.
    @_noAllocation
    public mutating func subscribe(packetID: UInt16, filter: UnsafeRawBufferPointer, qos: MQTT.QoS) -> Bool {
        guard packetID != 0, filter.count > 0, filter.count <= MQTT.maximumStringBytes, begin(0x82, 2 + 2 + filter.count + 1) else { return false }
        append(uint16: packetID)
        append(string: filter)
        append(byte: qos.rawValue)
        return true
    }

    /// PINGREQ (§3.12).
    @_noAllocation
    public mutating func pingreq() -> Bool { begin(0xC0, 0) }

    /// DISCONNECT (§3.14): a clean goodbye; the broker discards the will.
    @_noAllocation
    public mutating func disconnect() -> Bool { begin(0xE0, 0) }

    // MARK: bytes

    /// The fixed header for a body of `length` bytes, if the whole packet fits.
    @_noAllocation
    private mutating func begin(_ first: UInt8, _ length: Int) -> Bool {
        guard length <= MQTT.maximumRemainingLength, count + 1 + MQTTWriter.lengthBytes(length) + length <= storage.count else { return false }
        append(byte: first)
        var value = length
        repeat {
            var byte = UInt8(value & 0x7F)
            value >>= 7
            if value > 0 { byte |= 0x80 }
            append(byte: byte)
        } while value > 0
        return true
    }

    /// How many bytes the remaining length `length` takes (§2.2.3).
    @_noAllocation
    public static func lengthBytes(_ length: Int) -> Int {
        length < 128 ? 1 : length < 16_384 ? 2 : length < 2_097_152 ? 3 : 4
    }

    @_noAllocation
    private mutating func append(byte: UInt8) {
        storage[count] = byte
        count += 1
    }

    @_noAllocation
    private mutating func append(uint16 value: UInt16) {
        append(byte: UInt8(value >> 8))
        append(byte: UInt8(value & 0xFF))
    }

    @_noAllocation
    private mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        (storage.baseAddress! + count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        count += bytes.count
    }

    @_noAllocation
    private mutating func append(_ text: StaticString) {
        append(string: UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// A length-prefixed string (§1.5.3).
    @_noAllocation
    private mutating func append(string bytes: UnsafeRawBufferPointer) {
        append(uint16: UInt16(bytes.count))
        append(bytes)
    }
}
