import AllocCounter
@testable import LocusAgent
import LocusCore
import Testing

/// The agent's glue on the Bluetooth path (an H4 stream, the HCI event, the sightings buffer)
/// allocates nothing once running, like the parsers it calls.
@Suite struct AgentHotPathTests {
    static let event: [UInt8] = HexText.bytes(AgentEndToEndTests.iBeaconEvent)!

    @Test func anH4StreamBecomesSightingsWithoutAllocating() {
        let sightings = UnsafeMutableBufferPointer<Sighting>.allocate(capacity: 64)
        defer { sightings.deallocate() }
        var framer = H4Framer()
        // Three packets per chunk, split at an odd offset to exercise reassembly.
        let stream = Self.event + [0x17] + Self.event + Self.event
        let time = UTCTime(seconds: 1_710_496_800)
        var count = 0
        var rejected = 0
        var dropped = 0
        var reports = 0
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: stream.count, alignment: 8)
        defer { bytes.deallocate() }
        bytes.copyBytes(from: stream)
        let first = UnsafeRawBufferPointer(rebasing: bytes[0..<37])
        let second = UnsafeRawBufferPointer(rebasing: bytes[37...])
        func pass() {
            framer.consume(first) { packet in SightingGather.gather(packet, time, sightings, nil, &count, &rejected, &dropped, &reports) }
            framer.consume(second) { packet in SightingGather.gather(packet, time, sightings, nil, &count, &rejected, &dropped, &reports) }
            count = 0
        }
        pass() // warm-up: -Onone may allocate on a first call
        let allocated = allocations {
            for _ in 0..<1_000 { pass() }
        }
        #expect(allocated == 0)
        pass()
        framer.consume(UnsafeRawBufferPointer(start: nil, count: 0)) { _ in }
        #expect(framer.packets == 3 * 1_002 && framer.junkBytes == 1_002, "packets \(framer.packets), junk \(framer.junkBytes)")
        stream.withUnsafeBytes { raw in
            framer.consume(raw) { packet in SightingGather.gather(packet, time, sightings, nil, &count, &rejected, &dropped, &reports) }
        }
        #expect(count == 3 && rejected == 0 && dropped == 0)
        #expect(reports == 3 * 1_003, "every advertising report is counted, the beacons' and the others'")
        #expect(sightings[0].identity.major == 100 && sightings[0].identity.minor == 0)
    }
}
