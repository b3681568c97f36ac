/// Splits an H4 byte stream (HCI over UART: a packet-type byte, then the packet) into HCI event
/// packets. The simulated board's Bluetooth feed is such a stream; a UART-attached controller
/// speaks the same framing. Only events (0x04) are expected; any other byte where a packet
/// should start is junk, counted and skipped until the next 0x04.
public struct H4Framer: ~Copyable {
    /// Type byte + event code + parameter length + 255 parameters.
    public static let maximumPacketSize = 258

    private let packet: UnsafeMutableRawBufferPointer
    private var filled = 0
    public private(set) var packets = 0
    public private(set) var junkBytes = 0

    public init() {
        packet = UnsafeMutableRawBufferPointer.allocate(byteCount: H4Framer.maximumPacketSize, alignment: 8)
    }

    deinit { packet.deallocate() }

    /// Hands every complete event packet (type byte first) to `body`.
    @_noAllocation
    public mutating func consume(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        for byte in bytes {
            if filled == 0 && byte != 0x04 {
                junkBytes += 1
                continue
            }
            packet[filled] = byte
            filled += 1
            if filled >= 3 && filled == 3 + Int(packet[2]) {
                packets += 1
                body(UnsafeRawBufferPointer(rebasing: packet[0..<filled]))
                filled = 0
            }
        }
    }
}
