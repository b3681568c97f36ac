import AllocCounter
import Testing
@testable import LocusCore
import TestSupport

/// Appends `*hh` and an ending to a sentence body ("$GPGGA,...").
func sentence(_ body: String, ending: String = "\r\n") -> String {
    var checksum: UInt8 = 0
    for byte in body.utf8.dropFirst() { checksum ^= byte }
    return body + "*" + hex(checksum) + ending
}

private func fixes(_ text: String, allowMissingChecksum: Bool = false) -> (fixes: [Fix], statistics: NMEAStatistics) {
    decodeAll(Array(text.utf8), allowMissingChecksum: allowMissingChecksum)
}

/// Three cycles of a u-blox-like receiver; the first is the settling/partial one.
private func cycles(_ count: Int, talker: String = "GP", start: Int = 120000, latitude: String = "4807.0380") -> String {
    var text = ""
    for index in 0..<count {
        let time = "\(start + index).00"
        text += sentence("$\(talker)RMC,\(time),A,\(latitude),N,01131.0000,E,10.0,84.4,230324,003.1,W,A")
        text += sentence("$\(talker)GGA,\(time),\(latitude),N,01131.0000,E,1,08,0.9,545.4,M,46.9,M,,")
        text += sentence("$\(talker)GSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1")
    }
    return text
}

@Suite struct NMEAFramingTests {
    @Test func framesEveryLineEnding() {
        for ending in ["\r\n", "\n", "\r"] {
            var text = ""
            for index in 0..<4 {
                text += sentence("$GPGGA,12000\(index).00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,", ending: ending)
                text += sentence("$GPRMC,12000\(index).00,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W", ending: ending)
            }
            let result = fixes(text)
            #expect(result.statistics.parsed == 8, "ending \(Array(ending.utf8))")
            #expect(result.statistics.rejected == 0)
        }
    }

    @Test func rejectsAndCountsEachKindOfDamage() {
        var text = "garbage before\r\n"
        text += "$$" + String(sentence("$GPZDA,201530.00,04,07,2002,00,00").dropFirst())          // doubled dollar: kept
        text += "$GPGGA,12000"                                                                      // cut off by the next '$'
        text += sentence("$GPZDA,201531.00,04,07,2002,00,00")
        text += "$GPZDA,201532.00,04,07,2002,00,00*00\r\n"                                        // wrong checksum
        text += "$GPZDA,201533.00,04,07,2002,00,00\r\n"                                           // no checksum
        text += "$GPZDA,201534.00,04,07,2002,00,00*4\r\n"                                         // one digit
        text += "$GPZDA,20\u{01}1535.00\r\n"                                                       // control byte
        text += "$GPGSV" + String(repeating: ",1", count: 80) + "*00\r\n"                          // overlong
        text += sentence("$PUBX,00,081350.00,4717.113210,N")                                       // proprietary
        text += sentence("$GPGSV,3,1,11,03,03,111,00")                                             // not used
        let statistics = fixes(text).statistics
        #expect(statistics.doubledDollars == 1)
        #expect(statistics.spliced == 1)
        #expect(statistics.badChecksum == 1)
        #expect(statistics.missingChecksum == 1)
        #expect(statistics.malformedChecksum == 1)
        #expect(statistics.garbled == 1)
        #expect(statistics.overlong == 1)
        #expect(statistics.ignored == 2)
        #expect(statistics.parsed == 2)
        #expect(statistics.junkRuns == 1)
    }

    @Test func missingChecksumsAreAcceptedOnlyWhenAllowed() {
        let text = "$GPZDA,201533.00,04,07,2002,00,00\r\n"
        #expect(fixes(text).statistics.missingChecksum == 1)
        let allowed = fixes(text, allowMissingChecksum: true).statistics
        #expect(allowed.missingChecksum == 0 && allowed.parsed == 1)
    }

    @Test(arguments: ["GP", "GN", "GL", "GA", "GB", "BD", "GQ", "QZ"])
    func everyTalkerIsDecoded(_ talker: String) {
        let result = fixes(cycles(4, talker: talker))
        #expect(result.statistics.parsed == 12)
        #expect(result.fixes.filter { $0.hasPosition }.count == 2)
    }
}

@Suite struct NMEASentenceTests {
    /// Found by the fuzzer: 18 decimals of a minute made 60 × 10^18 overflow (a trap, which would
    /// stop the agent). Such a coordinate is refused; 14 decimals (18 digits, the most a field
    /// may have) still read.
    @Test func absurdlyPreciseCoordinatesAreRefusedNotATrap() throws {
        // 18 digits, all of them decimals: what the fuzzer sent.
        let refused = fixes(cycles(4, latitude: ".605523144252631442"))
        #expect(!refused.fixes.contains { $0.hasPosition })
        let precise = fixes(cycles(4, latitude: "4807.03800000000000"))
        let fix = try #require(precise.fixes.first { $0.hasPosition })
        #expect(abs(fix.latitude! - (48 + 7.038 / 60)) < 1e-12)
    }

    @Test func ggaRmcGsaMergeIntoOneFix() throws {
        let result = fixes(cycles(4))
        // Cycle 1 may be partial (reading began mid-cycle) and only teaches the cycle ender;
        // cycle 2 is the first valid one (held back as settling); 3 and 4 are reported, 4 as soon
        // as its ender (GSA) arrives.
        let positions = result.fixes.filter { $0.hasPosition }
        try #require(positions.count == 2)
        let fix = positions[0]
        #expect(fix.time?.iso8601 == "2024-03-23T12:00:02.000Z")
        #expect(abs(fix.latitude! - (48 + 7.038 / 60)) < 1e-12)
        #expect(abs(fix.longitude! - (11 + 31.0 / 60)) < 1e-12)
        #expect(fix.mode == .threeDimensional)
        #expect(fix.quality == .gps)
        #expect(fix.satellitesUsed == 8)
        #expect(fix.altitudeMSLM == 545.4 && fix.geoidSeparationM == 46.9)
        #expect(abs(fix.speedMps! - 10.0 * 1852 / 3600) < 1e-12)
        #expect(fix.trackDeg == 84.4)
        #expect(fix.pdop == 2.5 && fix.hdop == 1.3 && fix.vdop == 2.1)
        #expect(fix.horizontalAccuracyM == 1.3 * Fix.assumedUEREM)
    }

    @Test func positionsKeepFullPrecision() throws {
        // High-precision NMEA (u-blox HPG, 8 decimals of minutes): no float32 round-off.
        let result = fixes(cycles(3, latitude: "4134.49795459"))
        let fix = try #require(result.fixes.last { $0.hasPosition })
        #expect(fix.latitude == 41.0 + 3449795459.0 / 1e8 / 60.0)
        #expect(abs(fix.latitude! - 41.574965909833) < 1e-12)
    }

    @Test func southAndWestAreNegative() throws {
        var text = ""
        for index in 0..<3 {
            text += sentence("$GNRMC,01403\(index).00,A,4332.69262,S,17235.48549,W,0.0,,110722,,,A,V".replacingOccurrences(of: ",V", with: ""))
            text += sentence("$GNGNS,01403\(index).00,4332.69262,S,17235.48549,W,RR,13,0.9,25.63,11.24,,")
        }
        let fix = try #require(fixes(text).fixes.last { $0.hasPosition })
        #expect(fix.latitude! < -43.54 && fix.longitude! < -172.59)
        #expect(fix.quality == .rtkFixed)
    }

    @Test func gstGivesTheAccuracyEstimate() throws {
        var text = ""
        for index in 0..<3 {
            text += sentence("$GPGGA,02460\(index).00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
            text += sentence("$GPRMC,02460\(index).00,A,4807.038,N,01131.000,E,0.0,0.0,230324,,,A")
            text += sentence("$GPGST,02460\(index).00,3.2,6.6,4.7,47.3,3.0,4.0,22.0")
        }
        let fix = try #require(fixes(text).fixes.last { $0.hasPosition })
        #expect(fix.latitudeSigmaM == 3.0 && fix.longitudeSigmaM == 4.0 && fix.altitudeSigmaM == 22.0)
        #expect(fix.horizontalAccuracyM == 5.0)
    }

    @Test func gllVtgAndZdaAreDecoded() throws {
        var text = ""
        for index in 0..<3 {
            text += sentence("$GPGLL,4916.45,N,12311.12,W,22544\(index),A,A")
            text += sentence("$GPVTG,054.7,T,034.4,M,005.5,N,010.2,K,A")
            text += sentence("$GPZDA,22544\(index),04,07,2024,00,00")
        }
        let fix = try #require(fixes(text).fixes.last { $0.hasPosition })
        #expect(fix.time?.iso8601 == "2024-07-04T22:54:42.000Z")
        #expect(abs(fix.latitude! - (49 + 16.45 / 60)) < 1e-12 && abs(fix.longitude! + (123 + 11.12 / 60)) < 1e-12)
        #expect(fix.trackDeg == 54.7)
        #expect(abs(fix.speedMps! - 5.5 * 1852 / 3600) < 1e-12)
        #expect(fix.mode == .twoDimensional)
    }

    @Test func invalidStatusesGiveNoPosition() {
        var text = ""
        for index in 0..<4 {
            text += sentence("$GPRMC,12000\(index).00,V,4807.038,N,01131.000,E,,,230394,,,N")
            text += sentence("$GPGGA,12000\(index).00,4807.038,N,01131.000,E,0,00,99.9,,M,,M,,")
        }
        let result = fixes(text)
        #expect(!result.fixes.isEmpty)
        #expect(result.fixes.allSatisfy { !$0.hasPosition && $0.mode == .noFix && $0.latitude == nil })
    }

    @Test func zeroSatellitesVetoTheCycle() {
        // GGA from zero satellites while RMC still says 'A': a coasting solution, not a fix.
        var text = ""
        for index in 0..<4 {
            text += sentence("$GNRMC,12021\(index).000,A,5957.0062,N,01100.6429,E,0.00,0.00,310722,,,D,V")
            text += sentence("$GNGGA,12021\(index).000,5957.0062,N,01100.6429,E,2,00,1.3,168.9,M,39.5,M,,")
        }
        #expect(fixes(text).fixes.allSatisfy { !$0.hasPosition })
    }

    @Test func malformedFieldsAreCountedNotTrusted() {
        var text = ""
        text += sentence("$GPGGA,256000.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")   // hour 25
        text += sentence("$GPGGA,120000.00,9107.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")   // 91 degrees
        text += sentence("$GPGGA,120000.00,4867.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")   // 67 minutes
        text += sentence("$GPGGA,120000.00,48x7.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")   // not a number
        text += sentence("$GPGSA,A,7,04,05")                                                   // fix type 7
        let result = fixes(text)
        #expect(result.statistics.invalidFields == 2)
        #expect(result.fixes.allSatisfy { !$0.hasPosition })
    }
}

@Suite struct GNSSCalendarTests {
    @Test func weekRolloverDatesMoveForward1024Weeks() {
        var calendar = GNSSCalendar()
        calendar.note(CivilDate(year: 1999, month: 8, day: 22))   // a pre-2019 firmware on 2019-04-07
        #expect(calendar.date == CivilDate(year: 2019, month: 4, day: 7))
        calendar.note(CivilDate(year: 2024, month: 2, day: 29))
        #expect(calendar.date == CivilDate(year: 2024, month: 2, day: 29))
    }

    @Test func twoDigitYearsAndMidnight() throws {
        var text = ""
        for second in 57...59 {
            text += sentence("$GPRMC,2359\(second).00,A,4807.038,N,01131.000,E,0.0,0.0,311224,,,A")
            text += sentence("$GPGGA,2359\(second).00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
        }
        for second in 0...1 {
            // GGA alone after midnight: the date rolls over with the time of day.
            text += sentence("$GPGGA,00000\(second).00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
            text += sentence("$GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1")
        }
        text += sentence("$GPGGA,000002.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
        let times = fixes(text).fixes.compactMap { $0.hasPosition ? $0.time?.iso8601 : nil }
        #expect(times.contains("2024-12-31T23:59:59.000Z"))
        #expect(times.contains("2025-01-01T00:00:00.000Z"))
    }

    @Test func civilDateArithmeticRoundTrips() {
        for days in stride(from: Int64(-800_000), through: 800_000, by: 997) {
            let date = CivilDate(daysSinceEpoch: days)
            #expect(date.isValid && date.daysSinceEpoch == days)
        }
        #expect(CivilDate(year: 1970, month: 1, day: 1).daysSinceEpoch == 0)
        #expect(CivilDate(year: 2000, month: 3, day: 1).daysSinceEpoch == 11017)
    }
}

@Suite struct NMEAAllocationTests {
    @Test func decodingTheWholeCorpusAllocatesNothing() throws {
        // Warm-up: the first use of a type instantiates its runtime metadata (a one-time,
        // start-up allocation in unoptimized builds); the hot path is what runs after that.
        let warmUp = try readRepositoryFile("Tests/Corpus/nmea/gpsdf.log")
        let first = warmUp.withUnsafeBytes { raw in
            allocations {
                var decoder = NMEADecoder()
                decoder.consume(raw) { _ in }
            }
        }
        let second = warmUp.withUnsafeBytes { raw in
            allocations {
                var decoder = NMEADecoder()
                decoder.consume(raw) { _ in }
            }
        }
        print("NMEA decoder allocations: first use \(first), afterwards \(second)")
        #expect(second == 0)
        var total = 0
        for log in corpusLogs() {
            let bytes = try readRepositoryFile("Tests/Corpus/nmea/\(log)")
            var decoder = NMEADecoder()
            var positions = 0
            let count = bytes.withUnsafeBytes { raw in
                allocations {
                    decoder.consume(raw) { fix in if fix.hasPosition { positions += 1 } }
                    decoder.finish { _ in }
                }
            }
            #expect(count == 0, "\(log): \(count) allocations")
            if count != 0 { break }
            total += decoder.statistics.read
        }
        #expect(total > 15_000)
    }
}

@Suite struct NMEACorruptionTests {
    @Test(arguments: ["gpsdf.log", "nmea-rtk.log", "telit-he910.log", "junk-et-332.log", "quectel.log", "sirfstarv-nmea.log"])
    func corruptedLogsNeverCrashOrInventFixes(_ log: String) throws {
        let original = try readRepositoryFile("Tests/Corpus/nmea/\(log)")
        let reference = try gpsdPositions(log)
        // SplitMix64 from a fixed seed, so every run corrupts the same way.
        var generator = SplitMix64(state: UInt64(log.utf8.count) &* 7919)
        for round in 0..<60 {
            var bytes = original
            switch round % 4 {
            case 0: // bit flips
                for _ in 0..<(1 + generator.below(40)) {
                    let index = generator.below(bytes.count)
                    bytes[index] ^= UInt8(1 << generator.below(8))
                }
            case 1: // truncation
                bytes.removeLast(generator.below(bytes.count))
            case 2: // splices: a piece of the log pasted elsewhere
                for _ in 0..<(1 + generator.below(10)) {
                    let from = generator.below(bytes.count)
                    let length = min(generator.below(120), bytes.count - from)
                    let piece = Array(bytes[from..<(from + length)])
                    bytes.insert(contentsOf: piece, at: generator.below(bytes.count))
                }
            default: // deletions of random runs
                for _ in 0..<(1 + generator.below(20)) {
                    let from = generator.below(bytes.count)
                    bytes.removeSubrange(from..<min(bytes.count, from + generator.below(30)))
                }
            }
            for fix in decodeAll(bytes, chunk: 1 + generator.below(700)).fixes where fix.hasPosition {
                let time = fix.time?.iso8601
                let known = reference.contains { $0.time == time && abs($0.latitude - fix.latitude!) <= 1e-6 && abs($0.longitude - fix.longitude!) <= 1e-6 }
                #expect(known, "\(log) round \(round): invented fix at \(time ?? "-") \(fix.latitude!),\(fix.longitude!)")
            }
        }
    }
}
