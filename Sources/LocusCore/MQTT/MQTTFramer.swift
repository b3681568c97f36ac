/// Splits the byte stream from a broker into whole MQTT packets (fixed header included), into a
/// buffer allocated once. A packet larger than the buffer, or a remaining length longer than four
/// bytes, is a protocol violation: the framer stops and the connection is to be closed (§4.8).
/// `reset()` starts over for a new connection.
public struct MQTTFramer: ~Copyable {
    public enum Failure: Error, Equatable, Sendable {
        /// A fifth remaining-length byte (§2.2.3).
        case malformedLength
        /// The packet's whole size, beyond the framer's capacity.
        case tooLarge(Int)
    }

    private let packet: UnsafeMutableRawBufferPointer
    private var filled = 0
    /// The packet's whole size once its fixed header is complete; 0 before.
    private var expected = 0
    public private(set) var packets = 0
    public private(set) var failure: Failure? = nil

    /// `maximumPacketBytes`: the largest packet accepted, fixed header included (at least 5).
    public init(maximumPacketBytes: Int) {
        precondition(maximumPacketBytes >= 5)
        packet = UnsafeMutableRawBufferPointer.allocate(byteCount: maximumPacketBytes, alignment: 8)
    }

    deinit { packet.deallocate() }

    public var capacity: Int { packet.count }

    /// A new connection: nothing half-read, no failure.
    @_noAllocation
    public mutating func reset() {
        filled = 0
        expected = 0
        failure = nil
    }

    /// Hands every complete packet to `body`, in order; returns the failure that stopped it (the
    /// bytes after it are not read), or nil.
    @_noAllocation
    public mutating func consume(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) -> Failure? {
        frame(bytes, body)
    }

    /// The same without the allocation check on `body`: for a caller whose packets go on to a
    /// closure the compiler cannot see (BrokerConnection hands them to the uplink's handler;
    /// Scripts/bench counts that path's allocations instead).
    public mutating func consumeUnchecked(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) -> Failure? {
        frame(bytes, body)
    }

    private mutating func frame(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) -> Failure? {
        if let failure { return failure }
        var index = 0
        while index < bytes.count {
            if expected == 0 {
                // The fixed header: a type byte and one to four length bytes.
                packet[filled] = bytes[index]
                filled += 1
                index += 1
                guard filled >= 2 else { continue }
                let last = packet[filled - 1]
                if last & 0x80 != 0 {
                    guard filled < 5 else { return fail(.malformedLength) }
                    continue
                }
                var remaining = 0
                for position in stride(from: filled - 1, through: 1, by: -1) { remaining = remaining << 7 | Int(packet[position] & 0x7F) }
                expected = filled + remaining
                guard expected <= packet.count else { return fail(.tooLarge(expected)) }
            } else {
                let take = min(expected - filled, bytes.count - index)
                (packet.baseAddress! + filled).copyMemory(from: bytes.baseAddress! + index, byteCount: take)
                filled += take
                index += take
            }
            if expected > 0 && filled == expected {
                packets += 1
                body(UnsafeRawBufferPointer(rebasing: packet[0..<filled]))
                filled = 0
                expected = 0
            }
        }
        return nil
    }

    @_noAllocation
    private mutating func fail(_ reason: Failure) -> Failure {
        failure = reason
        return reason
    }
}
