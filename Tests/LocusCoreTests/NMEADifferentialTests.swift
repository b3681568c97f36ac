import Foundation
import Testing
@testable import LocusCore

/// gpsd's regression logs, carried in Tests/Corpus/nmea with their gpsdecode output.
let nmeaCorpus = repositoryRoot + "/Tests/Corpus/nmea"

func corpusLogs() -> [String] {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: nmeaCorpus)) ?? []
    return names.filter { $0.hasSuffix(".log") }.sorted()
}

func decodeAll(_ bytes: [UInt8], allowMissingChecksum: Bool = false, chunk: Int = 4096) -> (fixes: [Fix], statistics: NMEAStatistics) {
    var decoder = NMEADecoder(allowMissingChecksum: allowMissingChecksum)
    var fixes: [Fix] = []
    var start = 0
    while start < bytes.count {
        let end = min(bytes.count, start + chunk)
        bytes[start..<end].withUnsafeBytes { raw in decoder.consume(raw) { fixes.append($0) } }
        start = end
    }
    decoder.finish { fixes.append($0) }
    return (fixes, decoder.statistics)
}

/// A gpsd TPV that carries a position: time (nil when gpsd had none) and degrees.
struct GpsdPosition {
    var time: String?
    var latitude: Double
    var longitude: Double
}

func gpsdPositions(_ log: String) throws -> [GpsdPosition] {
    let text = try String(contentsOfFile: "\(nmeaCorpus)/\(log).gpsdecode.json", encoding: .utf8)
    var result: [GpsdPosition] = []
    for line in text.split(whereSeparator: \.isNewline) where line.contains("\"TPV\"") {
        guard let latitude = gpsdNumber(line, "lat"), let longitude = gpsdNumber(line, "lon") else { continue }
        result.append(GpsdPosition(time: gpsdString(line, "time"), latitude: latitude, longitude: longitude))
    }
    return result
}

/// gpsd writes `nan` for some fields, which strict JSON parsers refuse; read fields directly.
func gpsdNumber(_ line: Substring, _ key: String) -> Double? {
    guard let range = line.range(of: "\"\(key)\":") else { return nil }
    let rest = line[range.upperBound...]
    let end = rest.firstIndex { $0 == "," || $0 == "}" } ?? rest.endIndex
    return Double(rest[..<end])
}

func gpsdString(_ line: Substring, _ key: String) -> String? {
    guard let range = line.range(of: "\"\(key)\":\"") else { return nil }
    let rest = line[range.upperBound...]
    guard let end = rest.firstIndex(of: "\"") else { return nil }
    return String(rest[..<end])
}

@Suite struct NMEADifferentialTests {
    /// Fixes of ours that gpsd did not report, each explained. Anything not listed fails the test.
    static let explainedDivergences: [String: String] = [
        // The capture was taken during the receiver's 2019-04-06 week-number overflow; gpsd
        // reports no TPV at all for 23:57:26.020 (its cycle detection dropped that second), while
        // the receiver's RMC, GGA and GLL for it are complete and valid.
        "gp-320fw-2019-04-06-overflow.log": "2019-04-06T23:57:26.020Z",
    ]

    @Test func everyFixWeReportGpsdReportsToo() throws {
        let logs = corpusLogs()
        try #require(logs.count >= 50, "the repository's corpus (Tests/Corpus) is missing (\(nmeaCorpus))")
        var ours = 0
        var matched = 0
        var table = "log                                   ours  matched  rate\n"
        for log in logs {
            let bytes = try readRepositoryFile("Tests/Corpus/nmea/\(log)")
            let positions = try gpsdPositions(log)
            let fixes = decodeAll(bytes).fixes.filter { $0.hasPosition }
            var logMatched = 0
            for fix in fixes {
                let time = fix.time?.iso8601
                let found = positions.contains { $0.time == time && abs($0.latitude - fix.latitude!) <= 1e-6 && abs($0.longitude - fix.longitude!) <= 1e-6 }
                if found {
                    logMatched += 1
                } else {
                    let near = positions.filter { $0.time == time }.map { "\($0.latitude),\($0.longitude)" }
                    #expect(Self.explainedDivergences[log] == time, "\(near) \(positions.count) \(log): our fix at \(time ?? "no time") (\(fix.latitude!), \(fix.longitude!)) has no gpsd counterpart")
                }
            }
            ours += fixes.count
            matched += logMatched
            let rate = fixes.isEmpty ? 1 : Double(logMatched) / Double(fixes.count)
            table += log.padding(toLength: 36, withPad: " ", startingAt: 0) + String(format: "%6d %8d  %5.1f%%\n", fixes.count, logMatched, rate * 100)
        }
        let rate = Double(matched) / Double(max(ours, 1))
        table += String(format: "total                               %6d %8d  %5.2f%%\n", ours, matched, rate * 100)
        print(table)
        #expect(ours >= 900, "too few fixes decoded: \(ours)")
        #expect(rate >= 0.995)
    }

    @Test func decodedValuesAgreeWithGpsd() throws {
        // Beyond lat/lon: altitude, speed and track on a log with all of them (gpsdf: u-blox 8).
        let bytes = try readRepositoryFile("Tests/Corpus/nmea/gpsdf.log")
        let text = try String(contentsOfFile: "\(nmeaCorpus)/gpsdf.log.gpsdecode.json", encoding: .utf8)
        var gpsd: [String: Substring] = [:]
        for line in text.split(whereSeparator: \.isNewline) where line.contains("\"TPV\"") {
            if let time = gpsdString(line, "time") { gpsd[time] = line }
        }
        let fixes = decodeAll(bytes).fixes.filter { $0.hasPosition }
        try #require(fixes.count >= 40)
        for fix in fixes {
            let reference = try #require(gpsd[fix.time!.iso8601])
            #expect(Double(fix.mode.rawValue) == gpsdNumber(reference, "mode"))
            #expect(abs(fix.altitudeMSLM! - gpsdNumber(reference, "altMSL")!) < 1e-3)
            #expect(abs(fix.geoidSeparationM! - gpsdNumber(reference, "geoidSep")!) < 1e-3)
            if let speed = gpsdNumber(reference, "speed") { #expect(abs(fix.speedMps! - speed) < 1e-3) }
            if let track = gpsdNumber(reference, "track"), let ours = fix.trackDeg { #expect(abs(ours - track) < 1e-3) }
        }
    }
}
