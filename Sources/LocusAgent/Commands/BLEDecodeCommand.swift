import LocusCore
import LocusDevices

/// `locus decode adv --hex HEX` and `locus decode hci (--hex HEX | FILE)`.
enum BLEDecodeCommand {
    static func advertisingData(_ arguments: [String]) -> Int32 {
        guard arguments.count == 2, arguments[0] == "--hex" else {
            return CommandLineInterface.usageError("decode adv needs --hex HEX", hint: "usage: locus decode adv --hex 0201061aff4c000215...")
        }
        guard let bytes = HexText.bytes(arguments[1]) else {
            Console.out(errorObject("not hexadecimal (an even number of 0-9, a-f digits)") + "\n")
            return 1
        }
        var line = JSONWriter(capacity: AdvertisementJSON.capacity(dataCount: bytes.count))
        bytes.withUnsafeBytes { AdvertisementJSON.write($0, into: &line) }
        line.newline()
        Console.out(line.bytes)
        let walk = bytes.withUnsafeBytes { AdvertisingData.forEachStructure($0) { _, _ in } }
        return walk.structures > 0 ? 0 : 1
    }

    /// The lines of one HCI event: every report of an event of up to 255 bytes fits.
    static let eventLineCapacity = 64 * 1024

    static func hci(_ arguments: [String]) -> Int32 {
        var decoded = 0
        var lines = JSONWriter(capacity: eventLineCapacity)
        if arguments.count == 2 && arguments[0] == "--hex" {
            guard let bytes = HexText.bytes(arguments[1]) else {
                Console.out(errorObject("not hexadecimal (an even number of 0-9, a-f digits)") + "\n")
                return 1
            }
            decoded += bytes.withUnsafeBytes { event(HCIEvents.withoutPacketType($0), timeUs: nil, into: &lines) }
            return decoded > 0 ? 0 : 1
        }
        guard arguments.count == 1, let path = arguments.first, !path.hasPrefix("-") || path == "-" else {
            return CommandLineInterface.usageError("decode hci needs --hex HEX or one FILE", hint: "usage: locus decode hci (--hex HEX | FILE)")
        }
        let contents: [UInt8]
        do {
            contents = try path == "-" ? readAll() : Files.read(path)
        } catch {
            return CommandLineInterface.failure("decode hci", "cannot read \(path == "-" ? "standard input" : path): \(error)")
        }
        let isCapture = contents.withUnsafeBytes { BTSnoop.isBTSnoop($0) }
        if isCapture {
            var failure: BTSnoop.Failure? = nil
            contents.withUnsafeBytes { raw in
                let result = BTSnoop.forEachEvent(raw) { time, packet in decoded += event(packet, timeUs: time, into: &lines) }
                if case .failure(let problem) = result { failure = problem }
            }
            if let failure { Console.out(errorObject(failure.description) + "\n") }
        } else {
            for line in String(decoding: contents, as: UTF8.self).split(separator: "\n") {
                let text = String(line).trimmingSpaces
                if text.isEmpty || text.hasPrefix("#") { continue }
                guard let bytes = HexText.bytes(text) else {
                    Console.out(errorObject("not hexadecimal: \(text)") + "\n")
                    continue
                }
                decoded += bytes.withUnsafeBytes { event(HCIEvents.withoutPacketType($0), timeUs: nil, into: &lines) }
            }
        }
        return decoded > 0 ? 0 : 1
    }

    /// Prints one object per report of an advertising event; returns the number printed.
    /// Other events in a capture (command completes, ...) are skipped silently. The lines are
    /// written into `lines` (reset here) and printed only when the whole event decoded.
    private static func event(_ bytes: UnsafeRawBufferPointer, timeUs: Int64?, into lines: inout JSONWriter) -> Int {
        lines.reset()
        var count = 0
        let result = HCIEvents.forEachReportDescribing(bytes) { report in
            AdvertisementJSON.write(report.data, report: report, timeUs: timeUs, into: &lines)
            lines.newline()
            count += 1
        }
        switch result {
        case .success where lines.overflowed:
            Console.out(errorObject("the decoded event does not fit \(eventLineCapacity) bytes") + "\n")
            return 0
        case .success:
            Console.out(lines.bytes)
            return count
        case .failure(.notAdvertising) where timeUs != nil:
            return 0
        case .failure(let error):
            Console.out(errorObject(error.description) + "\n")
            return 0
        }
    }

    private static func errorObject(_ message: String) -> String {
        JSONWriter.rendering { line in
            line.beginObject()
            line.string("error", message)
            line.endObject()
        }
    }

    private static func readAll() throws(SystemError) -> [UInt8] {
        var bytes: [UInt8] = []
        try Files.stream("-") { chunk in bytes.append(contentsOf: chunk) }
        return bytes
    }
}

extension String {
    var trimmingSpaces: String {
        var bytes = Array(utf8)
        while let last = bytes.last, last == 0x20 || last == 0x09 || last == 0x0D { bytes.removeLast() }
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes.removeFirst() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
