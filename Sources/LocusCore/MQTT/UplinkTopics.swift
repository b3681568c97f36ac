/// The uplink's topic names, written into one buffer allocated when the uplink starts, so that a
/// publish in the loop makes no String:
///
///     <prefix>/event/<monitor>/<identifier>        every event (QoS 1)
///     <prefix>/state/<monitor>/<identifier>        the record's current state (retained)
///     <prefix>/gpio/<output>                       output changes
///     <prefix>/visit, /fix, /status, /test
///     <prefix>/sighting/<UUID>/<major>/<minor>     live beacon sightings (QoS 0)
///     homeassistant/binary_sensor/<object id>/config    Home Assistant discovery
///
/// A sighting's identity takes three levels, so that a subscriber can follow one UUID
/// (`<prefix>/sighting/E2C56DB5-…/+/+`) or one beacon without parsing payloads.
///
/// Each topic method returns bytes inside the buffer, valid until the next topic call.
public struct UplinkTopics: ~Copyable {
    /// A gateway id as the `[uplink]` check accepts it (letters, digits, '-', '_', '.').
    public static let maximumGatewayBytes = 64
    public static let maximumPrefixBytes = 200

    /// The longest suffix after the prefix: "/event/" or "/state/", two names and a slash.
    static let suffixRoom = 7 + 2 * FixedName.capacity + 1
    /// After the gateway in a discovery topic: "_<monitor>_<identifier>/config".
    static let discoveryRoom = 1 + FixedName.capacity + 1 + FixedName.capacity + 7
    /// Home Assistant's default discovery prefix, its binary sensors, and Locus's object ids.
    static let discoveryHead: StaticString = "homeassistant/binary_sensor/locus_"

    /// gateway | prefix and topic suffix | discovery head, object-id gateway and suffix
    private let storage: UnsafeMutableRawBufferPointer
    private let gatewayCount: Int
    private let prefixCount: Int
    /// Where the discovery topic starts, and where its per-record part starts.
    private let discoveryStart: Int
    private let discoveryFixed: Int

    /// `prefix` must pass `prefixProblem` (the site check says why when it does not).
    public init(prefix: String, gateway: String) {
        precondition(UplinkTopics.prefixProblem(prefix) == nil, "an unchecked topic prefix")
        precondition(!gateway.isEmpty, "an empty gateway id")
        gatewayCount = gateway.utf8.count
        prefixCount = prefix.utf8.count
        let head = UplinkTopics.discoveryHead.utf8CodeUnitCount
        discoveryStart = gatewayCount + prefixCount + UplinkTopics.suffixRoom
        discoveryFixed = discoveryStart + head + gatewayCount
        storage = .allocate(byteCount: discoveryFixed + UplinkTopics.discoveryRoom, alignment: 1)
        var index = 0
        for byte in gateway.utf8 {
            storage[index] = byte
            index += 1
        }
        for byte in prefix.utf8 {
            storage[index] = byte
            index += 1
        }
        index = discoveryStart
        for offset in 0..<head {
            storage[index] = UplinkTopics.discoveryHead.utf8Start[offset]
            index += 1
        }
        for byte in gateway.utf8 {
            storage[index] = UplinkTopics.objectIDByte(byte)
            index += 1
        }
    }

    deinit { storage.deallocate() }

    /// `[uplink] topic_prefix`'s default.
    public static func defaultPrefix(gateway: String) -> String { "locus/" + gateway }

    /// Why `prefix` cannot start the uplink's topics, or nil (MQTT 3.1.1 §4.7). Each reason reads
    /// after the value: `'topic_prefix' = "locus/" ends with '/' (...)`.
    public static func prefixProblem(_ prefix: String) -> String? {
        let bytes = prefix.utf8
        if bytes.isEmpty { return "is empty" }
        if bytes.count > maximumPrefixBytes { return "is longer than \(maximumPrefixBytes) bytes" }
        if bytes.first == UInt8(ascii: "$") { return "starts with '$', which brokers keep for themselves ($SYS)" }
        if bytes.first == UInt8(ascii: "/") { return "starts with '/', which makes an empty first topic level" }
        if bytes.last == UInt8(ascii: "/") { return "ends with '/' (the uplink adds '/event/...' itself)" }
        if bytes.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") || $0 == 0 }) {
            return "has '+', '#' or NUL, which are not allowed in a topic name"
        }
        // §1.5.3: a topic SHOULD NOT carry control characters; brokers may drop the connection.
        if bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) { return "has a control character, which a topic name should not carry" }
        return nil
    }

    /// Home Assistant's object ids are [A-Za-z0-9_-]: any other byte of the gateway id becomes '_'.
    @_noAllocation
    public static func objectIDByte(_ byte: UInt8) -> UInt8 {
        isDigit(byte) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x5F || byte == 0x2D ? byte : 0x5F
    }

    /// The gateway id as given (for the payloads' "gateway"), valid while the topics live.
    public var gateway: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(storage)[0..<gatewayCount]) }

    /// The topic prefix, valid while the topics live.
    public var prefix: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(storage)[gatewayCount..<(gatewayCount + prefixCount)])
    }

    // MARK: topics

    @_noAllocation
    public mutating func event(monitor: FixedName, identifier: FixedName) -> UnsafeRawBufferPointer {
        record("/event/", monitor, identifier)
    }

    @_noAllocation
    public mutating func state(monitor: FixedName, identifier: FixedName) -> UnsafeRawBufferPointer {
        record("/state/", monitor, identifier)
    }

    @_noAllocation
    public mutating func gpio(output: FixedName) -> UnsafeRawBufferPointer {
        var end = afterPrefix("/gpio/")
        put(output, at: &end)
        return topic(to: end)
    }

    @_noAllocation
    public mutating func visit() -> UnsafeRawBufferPointer { topic(to: afterPrefix("/visit")) }

    @_noAllocation
    public mutating func fix() -> UnsafeRawBufferPointer { topic(to: afterPrefix("/fix")) }

    /// The will's and the birth message's topic (Home Assistant's availability topic).
    @_noAllocation
    public mutating func status() -> UnsafeRawBufferPointer { topic(to: afterPrefix("/status")) }
    /// `<prefix>/presence`: the period's summary of every tag heard (docs/presence.md).
    public mutating func presence() -> UnsafeRawBufferPointer { topic(to: afterPrefix("/presence")) }

    /// `<prefix>/config` and `<prefix>/command`: what the gateway did with the fleet's
    /// configurations and commands (docs/remote.md).
    public mutating func remoteConfig() -> UnsafeRawBufferPointer { topic(to: afterPrefix("/config")) }
    public mutating func remoteCommand() -> UnsafeRawBufferPointer { topic(to: afterPrefix("/command")) }
    /// `<prefix>/remote/`: where the fleet's messages for this gateway are (`+` after it subscribes).
    public mutating func remoteInbox() -> UnsafeRawBufferPointer { topic(to: afterPrefix("/remote/")) }

    @_noAllocation
    public mutating func test() -> UnsafeRawBufferPointer { topic(to: afterPrefix("/test")) }

    /// `<prefix>/sighting/E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/100/7`: the UUID as Locus writes
    /// it everywhere (upper case), major and minor in decimal.
    @_noAllocation
    public mutating func sighting(_ identity: BeaconIdentity) -> UnsafeRawBufferPointer {
        var end = afterPrefix("/sighting/")
        for index in 0..<16 {
            if index == 4 || index == 6 || index == 8 || index == 10 { put(UInt8(ascii: "-"), at: &end) }
            let byte = identity.uuid.byte(index)
            put(UplinkTopics.hexDigit(byte >> 4), at: &end)
            put(UplinkTopics.hexDigit(byte & 0x0F), at: &end)
        }
        put(UInt8(ascii: "/"), at: &end)
        put(identity.major, at: &end)
        put(UInt8(ascii: "/"), at: &end)
        put(identity.minor, at: &end)
        return topic(to: end)
    }

    /// `homeassistant/binary_sensor/locus_<gateway>_<monitor>_<identifier>/config`.
    @_noAllocation
    public mutating func discoveryCondition(monitor: FixedName, identifier: FixedName) -> UnsafeRawBufferPointer {
        var end = discoveryFixed
        put(UInt8(ascii: "_"), at: &end)
        put(monitor, at: &end)
        put(UInt8(ascii: "_"), at: &end)
        put(identifier, at: &end)
        return discovery(to: end)
    }

    /// `homeassistant/binary_sensor/locus_<gateway>_gpio_<output>/config`.
    @_noAllocation
    public mutating func discoveryOutput(output: FixedName) -> UnsafeRawBufferPointer {
        var end = discoveryFixed
        put("_gpio_", at: &end)
        put(output, at: &end)
        return discovery(to: end)
    }

    // MARK: writing

    @_noAllocation
    private func record(_ kind: StaticString, _ monitor: FixedName, _ identifier: FixedName) -> UnsafeRawBufferPointer {
        var end = afterPrefix(kind)
        put(monitor, at: &end)
        put(UInt8(ascii: "/"), at: &end)
        put(identifier, at: &end)
        return topic(to: end)
    }

    /// Writes `suffix` after the prefix; returns where the topic now ends.
    @inline(__always)
    private func afterPrefix(_ suffix: StaticString) -> Int {
        var end = gatewayCount + prefixCount
        put(suffix, at: &end)
        return end
    }

    @inline(__always)
    private func topic(to end: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(storage)[gatewayCount..<end])
    }

    @inline(__always)
    private func discovery(to end: Int) -> UnsafeRawBufferPointer {
        var end = end
        put("/config", at: &end)
        return UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(storage)[discoveryStart..<end])
    }

    @inline(__always)
    private func put(_ byte: UInt8, at end: inout Int) {
        storage[end] = byte
        end += 1
    }

    @inline(__always)
    private func put(_ text: StaticString, at end: inout Int) {
        for offset in 0..<text.utf8CodeUnitCount { put(text.utf8Start[offset], at: &end) }
    }

    @inline(__always)
    private func put(_ name: FixedName, at end: inout Int) {
        for index in 0..<name.count { put(name[index], at: &end) }
    }

    /// Decimal, no leading zeros.
    @inline(__always)
    private func put(_ value: UInt16, at end: inout Int) {
        var divisor: UInt16 = 10_000
        while divisor > 1 && value < divisor { divisor /= 10 }
        while divisor > 0 {
            put(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value / divisor % 10), at: &end)
            divisor /= 10
        }
    }

    @inline(__always)
    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") &+ value : UInt8(ascii: "A") &+ (value &- 10)
    }
}
