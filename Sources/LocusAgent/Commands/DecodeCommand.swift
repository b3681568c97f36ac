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
        do {
            statistics = try NMEAFile.forEachFix(input, allowMissingChecksum: allowMissingChecksum) { fix in
                Console.out(FixJSON.tpv(fix) + "\n")
            }
        } catch {
            return CommandLineInterface.failure("decode nmea", "cannot read \(input == "-" ? "standard input" : input): \(error)")
        }
        Console.error(summary(statistics) + "\n")
        return 0
    }

    static func summary(_ statistics: NMEAStatistics) -> String {
        var json = JSONText()
        json.string("class", "SUMMARY")
        json.integer("sentences", statistics.read)
        json.integer("parsed", statistics.parsed)
        json.integer("ignored", statistics.ignored)
        json.integer("empty", statistics.empty)
        var rejected = JSONText()
        rejected.integer("checksum", statistics.badChecksum)
        rejected.integer("no_checksum", statistics.missingChecksum)
        rejected.integer("malformed_checksum", statistics.malformedChecksum)
        rejected.integer("spliced", statistics.spliced)
        rejected.integer("garbled", statistics.garbled)
        rejected.integer("overlong", statistics.overlong)
        rejected.integer("bad_fields", statistics.invalidFields)
        json.raw("rejected", rejected.closed)
        json.integer("junk", statistics.junkRuns)
        json.integer("doubled_dollar", statistics.doubledDollars)
        json.integer("epochs", statistics.epochs)
        json.integer("fixes", statistics.fixes)
        return json.closed
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

