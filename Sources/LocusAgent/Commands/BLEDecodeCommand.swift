import LocusCore
import LocusDevices

/// `locus decode adv --hex HEX` and `locus decode hci (--hex HEX | FILE)`.
enum BLEDecodeCommand {
    static func advertisingData(_ arguments: [String]) -> Int32 {
        guard arguments.count == 2, arguments[0] == "--hex" else {
            return CommandLineInterface.usageError("decode adv needs --hex HEX", hint: "usage: locus decode adv --hex 0201061aff4c000215...")
        }
        guard let bytes = HexText.bytes(arguments[1]) else {
            var line = JSONWriter(capacity: 256)
            printError("not hexadecimal (an even number of 0-9, a-f digits)", &line)
            return 1
        }
        let described = bytes.withUnsafeBytes { AdvertisementJSON.describe($0) }
        Console.out(described + "\n")
        let walk = bytes.withUnsafeBytes { AdvertisingData.forEachStructure($0) { _, _ in } }
        return walk.structures > 0 ? 0 : 1
    }

    static func hci(_ arguments: [String]) -> Int32 {
        var decoded = 0
        // Error objects; the reports' lines are AdvertisementJSON's.
        var line = JSONWriter(capacity: 1024)
        if arguments.count == 2 && arguments[0] == "--hex" {
            guard let bytes = HexText.bytes(arguments[1]) else {
                printError("not hexadecimal (an even number of 0-9, a-f digits)", &line)
                return 1
            }
            decoded += bytes.withUnsafeBytes { event(HCIEvents.withoutPacketType($0), timeUs: nil, &line) }
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
                let result = BTSnoop.forEachEvent(raw) { time, packet in decoded += event(packet, timeUs: time, &line) }
                if case .failure(let problem) = result { failure = problem }
            }
            if let failure { printError(failure.description, &line) }
        } else {
            for row in String(decoding: contents, as: UTF8.self).split(separator: "\n") {
                let text = String(row).trimmingSpaces
                if text.isEmpty || text.hasPrefix("#") { continue }
                guard let bytes = HexText.bytes(text) else {
                    printError("not hexadecimal: \(text)", &line)
                    continue
                }
                decoded += bytes.withUnsafeBytes { event(HCIEvents.withoutPacketType($0), timeUs: nil, &line) }
            }
        }
        return decoded > 0 ? 0 : 1
    }

    /// Prints one object per report of an advertising event; returns the number printed.
    /// Other events in a capture (command completes, ...) are skipped silently.
    private static func event(_ bytes: UnsafeRawBufferPointer, timeUs: Int64?, _ line: inout JSONWriter) -> Int {
        var lines: [String] = []
        let result = HCIEvents.forEachReportDescribing(bytes) { report in
            lines.append(AdvertisementJSON.describe(report.data, report: report, timeUs: timeUs))
        }
        switch result {
        case .success:
            for line in lines { Console.out(line + "\n") }
            return lines.count
        case .failure(.notAdvertising) where timeUs != nil:
            return 0
        case .failure(let error):
            printError(error.description, &line)
            return 0
        }
    }

    /// {"error":"..."} on standard output, where the reports go.
    private static func printError(_ message: String, _ line: inout JSONWriter) {
        line.reset()
        line.beginObject()
        line.string("error", message)
        line.endObject()
        line.newline()
        Console.out(line.bytes)
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
