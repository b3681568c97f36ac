import Foundation
import Glibc
import LocusCore
import Testing
@testable import LocusDevices

@_silgen_name("openpty")
private func c_openpty(_ master: UnsafeMutablePointer<Int32>, _ slave: UnsafeMutablePointer<Int32>,
                       _ name: UnsafeMutablePointer<CChar>?, _ termios: UnsafeRawPointer?, _ winsize: UnsafeRawPointer?) -> Int32

/// A real pseudo-terminal standing in for the receiver: the test writes NMEA at the master, the
/// reader opens the slave through a symlink, as the agent opens /dev/serial0.
struct PseudoTerminal {
    let master: Int32
    let slavePath: String

    static func open() throws -> PseudoTerminal {
        var master: Int32 = -1
        var slave: Int32 = -1
        var name = [CChar](repeating: 0, count: 128)
        guard c_openpty(&master, &slave, &name, nil, nil) == 0 else { throw POSIXError(.EIO) }
        Glibc.close(slave) // the reader opens its own descriptor by path
        return PseudoTerminal(master: master, slavePath: String(cString: name))
    }

    func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeMutableBytes { Glibc.write(master, $0.baseAddress! + offset, $0.count - offset) }
            if count <= 0 { break }
            offset += count
        }
    }

    func close() { Glibc.close(master) }
}

private func nmeaCycles(_ range: Range<Int>) -> String {
    var text = ""
    for second in range {
        let time = String(format: "1200%02d.00", second)
        for body in ["$GPRMC,\(time),A,4807.0380,N,01131.0000,E,10.0,84.4,230324,003.1,W,A",
                     "$GPGGA,\(time),4807.0380,N,01131.0000,E,1,08,0.9,545.4,M,46.9,M,,",
                     "$GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1"] {
            var checksum: UInt8 = 0
            for byte in body.utf8.dropFirst() { checksum ^= byte }
            text += body + String(format: "*%02X\r\n", checksum)
        }
    }
    return text
}

/// The reader, a decoder and what they produced, pumped the way the agent's loop will.
final class Harness {
    var reader: SerialReader
    var decoder = NMEADecoder()
    var fixes: [Fix] = []
    var events: [SerialReader.Event] = []

    init(path: String) { reader = SerialReader(path: path, baud: 9600) }

    var positions: Int { fixes.filter(\.hasPosition).count }
    var isOpen: Bool { reader.isOpen }
    var bytesRead: Int64 { reader.bytesRead }
    var losses: Int { reader.losses }
    func saw(_ match: (SerialReader.Event) -> Bool) -> Bool { events.contains(where: match) }

    /// Reads until `condition` holds or two seconds pass, sleeping in poll(2) on the descriptor.
    func pump(until condition: () -> Bool) {
        let deadline = MonotonicClock.now() + 2_000_000_000
        while !condition() && MonotonicClock.now() < deadline {
            if reader.isOpen {
                var descriptor = pollfd(fd: reader.descriptor?.rawValue ?? -1, events: Int16(POLLIN), revents: 0)
                _ = poll(&descriptor, 1, 50)
            } else {
                usleep(20_000)
            }
            let now = MonotonicClock.now()
            if let event = reader.openIfDue(now: now) { events.append(event) }
            var collected: [Fix] = []
            var decoder = self.decoder
            let event = reader.read(now: now) { chunk in
                decoder.consume(chunk) { collected.append($0) }
            }
            self.decoder = decoder
            fixes += collected
            if let event { events.append(event) }
        }
    }
}

private func isLost(_ event: SerialReader.Event) -> Bool { if case .lost = event { return true } else { return false } }
private func isOpenFailed(_ event: SerialReader.Event) -> Bool { if case .openFailed = event { return true } else { return false } }

@Suite(.serialized) struct SerialReaderTests {
    @Test func bytesWrittenAtThePseudoTerminalComeOutAsFixesAndAReplugIsSurvived() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locus-serial-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let link = directory.appendingPathComponent("gnss").path
        defer { try? FileManager.default.removeItem(at: directory) }

        var terminal = try PseudoTerminal.open()
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: terminal.slavePath)
        let harness = Harness(path: link)

        #expect(harness.reader.openIfDue(now: MonotonicClock.now()) == .opened)
        terminal.write(nmeaCycles(0..<6))
        harness.pump { harness.positions >= 4 }
        #expect(harness.positions == 4)
        #expect(harness.bytesRead == Int64(nmeaCycles(0..<6).utf8.count))

        // Unplug: the writer goes away. The reader reports the loss and schedules a reopen.
        terminal.close()
        harness.pump { !harness.reader.isOpen }
        #expect(!harness.isOpen)
        #expect(harness.saw(isLost))
        #expect(harness.losses == 1)

        // While the old device is gone, attempts fail and back off.
        try FileManager.default.removeItem(atPath: link)
        harness.pump { harness.saw(isOpenFailed) }
        #expect(harness.events.first(where: isOpenFailed) == .openFailed(.notFound, retryInMs: 250))

        // Replug: a new pseudo-terminal behind the same path; decoding continues.
        terminal = try PseudoTerminal.open()
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: terminal.slavePath)
        harness.pump { harness.reader.isOpen }
        #expect(harness.isOpen, "\(harness.events)")
        let before = harness.positions
        terminal.write(nmeaCycles(10..<16))
        harness.pump { harness.positions >= before + 4 }
        #expect(harness.positions >= before + 4)
        terminal.close()
        harness.reader.close()
    }

    @Test func aMissingDeviceIsReportedAndRetriedWithBackoff() {
        var reader = SerialReader(path: "/nonexistent/ttyGNSS", baud: 9600)
        let start: Int64 = 1_000_000_000
        #expect(reader.openIfDue(now: start) == .openFailed(.notFound, retryInMs: 250))
        #expect(reader.openIfDue(now: start + 100_000_000) == nil)
        #expect(reader.openIfDue(now: start + 250_000_000) == .openFailed(.notFound, retryInMs: 500))
        var now = start + 750_000_000
        var last: SerialReader.Event? = nil
        for _ in 0..<10 {
            last = reader.openIfDue(now: now)
            now += 20_000_000_000
        }
        #expect(last == .openFailed(.notFound, retryInMs: 10_000))
    }

    @Test func anUnsupportedBaudRateIsAClearError() {
        var reader = SerialReader(path: "/dev/null", baud: 12345)
        #expect(reader.openIfDue(now: 0) == .openFailed(.invalidArgument, retryInMs: 250))
    }
}
