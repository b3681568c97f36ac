import LocusCore
import LocusDevices

/// `locus decode nmea [FILE|-]`: one gpsd-style TPV JSON object per completed fix epoch on
/// standard output, then a one-line JSON summary on standard error.
enum DecodeCommand {
    static let usage = "usage: locus decode nmea [--allow-missing-checksum] [FILE|-] | decode adv --hex HEX | decode hci (--hex HEX | FILE)"

    static func run(_ arguments: [String]) -> Int32 {
        guard let kind = arguments.first else {
            return CommandLineInterface.usageError("decode needs a kind (nmea)", hint: usage)
        }
        switch kind {
        case "nmea": return nmea(Array(arguments.dropFirst()))
        case "adv": return BLEDecodeCommand.advertisingData(Array(arguments.dropFirst()))
        case "hci": return BLEDecodeCommand.hci(Array(arguments.dropFirst()))
        default:
            return CommandLineInterface.usageError("decode: unknown kind '\(kind)'", hint: usage)
        }
    }

    static func nmea(_ arguments: [String]) -> Int32 {
        var allowMissingChecksum = false
        var path: String? = nil
        for argument in arguments {
            if argument == "--allow-missing-checksum" {
                allowMissingChecksum = true
            } else if argument.hasPrefix("-") && argument != "-" {
                return CommandLineInterface.usageError("decode nmea: unknown option '\(argument)'", hint: usage)
            } else if path == nil {
                path = argument
            } else {
                return CommandLineInterface.usageError("decode nmea takes one FILE", hint: usage)
            }
        }
        let input = path ?? "-"
        let statistics: NMEAStatistics
        var line = JSONWriter(capacity: 1024)
        do {
            statistics = try NMEAFile.forEachFix(input, allowMissingChecksum: allowMissingChecksum) { fix in
                line.reset()
                FixJSON.write(fix, into: &line)
                line.newline()
                Console.out(line.bytes)
            }
        } catch {
            return CommandLineInterface.failure("decode nmea", "cannot read \(input == "-" ? "standard input" : input): \(error)")
        }
        line.reset()
        writeSummary(statistics, into: &line)
        line.newline()
        Console.error(line.bytes)
        return 0
    }

    /// {"class":"SUMMARY","sentences":N,...,"rejected":{...},...,"fixes":N}
    @_noAllocation
    static func writeSummary(_ statistics: NMEAStatistics, into line: inout JSONWriter) {
        line.beginObject()
        line.string("class", "SUMMARY")
        line.integer("sentences", statistics.read)
        line.integer("parsed", statistics.parsed)
        line.integer("ignored", statistics.ignored)
        line.integer("empty", statistics.empty)
        line.beginObject("rejected")
        line.integer("checksum", statistics.badChecksum)
        line.integer("no_checksum", statistics.missingChecksum)
        line.integer("malformed_checksum", statistics.malformedChecksum)
        line.integer("spliced", statistics.spliced)
        line.integer("garbled", statistics.garbled)
        line.integer("overlong", statistics.overlong)
        line.integer("bad_fields", statistics.invalidFields)
        line.endObject()
        line.integer("junk", statistics.junkRuns)
        line.integer("doubled_dollar", statistics.doubledDollars)
        line.integer("epochs", statistics.epochs)
        line.integer("fixes", statistics.fixes)
        line.endObject()
    }
}

/// Decoded fixes of an NMEA file or standard input, for the commands that read recordings.
enum NMEAFile {
    /// Calls `body` with every fix of `path` ("-" for standard input) and returns the decoder's
    /// statistics. The decoder's hot path must not allocate, so its callback only stores fixes
    /// into a buffer allocated once; `body` sees them after each chunk. A sentence is at least
    /// 6 bytes, which bounds how many one chunk can complete.
    static func forEachFix(_ path: String, allowMissingChecksum: Bool, _ body: (Fix) -> Void) throws(SystemError) -> NMEAStatistics {
        var decoder = NMEADecoder(allowMissingChecksum: allowMissingChecksum)
        let chunkSize = 4096
        let fixes = UnsafeMutableBufferPointer<Fix>.allocate(capacity: chunkSize / 6 + 2)
        defer { fixes.deallocate() }
        var count = 0
        try Files.stream(path, chunkSize: chunkSize) { chunk in
            decoder.consume(chunk) { fix in
                fixes[count] = fix
                count += 1
            }
            for index in 0..<count { body(fixes[index]) }
            count = 0
        }
        decoder.finish { fix in
            fixes[count] = fix
            count += 1
        }
        for index in 0..<count { body(fixes[index]) }
        return decoder.statistics
    }
}

