import Foundation
import LocusCore
import LocusDevices
import Testing

/// `locus log export` (JSON lines and CSV), `locus events` and `locus monitor ... records` on a
/// log that holds every record kind with its optional parts (refinement, diagnostics, privacy's
/// missing position, escapes in text, a condition's every setting), compared byte for byte with
/// the goldens in Tests/Scenarios/ (LOCUS_EXPORT_GOLDEN=write regenerates them after an
/// intended change).
@Suite struct LogExportFormatTests {
    static let baseTimeNs: Int64 = 1_711_195_200_000_000_000
    static let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!

    static func name(_ text: String) -> FixedName { FixedName(text)! }

    static func payload(_ body: (inout ByteWriter) -> Void) -> [UInt8] {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 8)
        defer { buffer.deallocate() }
        var writer = ByteWriter(buffer)
        body(&writer)
        precondition(!writer.overflow)
        return Array(writer.written)
    }

    static func events() -> [MonitorEvent] {
        var fix = Explanation(source: .fix)
        fix.latitude = 52.850123456
        fix.longitude = -5.313551234
        fix.accuracyM = 4.25
        fix.edgeDistanceM = -12.345
        fix.dwellMs = 3_000
        var transit = Explanation(source: .transit)
        transit.latitude = .nan   // `[privacy] fixes = "none"`: no position kept
        transit.longitude = .nan
        transit.accuracyM = -1
        transit.edgeDistanceM = 7.5
        var sighting = Explanation(source: .sighting)
        sighting.rssiSamples = 12
        sighting.rssiFiltered = -63.4
        sighting.rssiMinimum = -71
        sighting.rssiMaximum = -58
        sighting.distanceM = 2.75
        var quiet = Explanation(source: .sighting)
        quiet.rssiSamples = 0
        var far = Explanation(source: .sighting)
        far.rssiSamples = 3
        far.rssiFiltered = -90.5
        far.rssiMinimum = -95
        far.rssiMaximum = -88
        far.distanceM = -1
        var timeout = Explanation(source: .timeout)
        timeout.dwellMs = 15_000
        let date = UTCTime(nanoseconds: baseTimeNs + 1_250_000_000)
        let refinement = BeaconIdentity(uuid: uuid, major: 100, minor: 65_535)
        return [
            MonitorEvent(monitor: name("harbour"), identifier: name("berth"), state: .satisfied, date: date,
                         refinement: nil, diagnostics: [], explanation: fix),
            MonitorEvent(monitor: name("harbour"), identifier: name("fair-way_2"), state: .unsatisfied, date: date,
                         refinement: nil, diagnostics: [.accuracyLimited, .persistenceUnavailable], explanation: transit),
            MonitorEvent(monitor: name("cargo"), identifier: name("anyCrate"), state: .satisfied, date: date,
                         refinement: refinement, diagnostics: [.accuracyLimited], explanation: sighting),
            MonitorEvent(monitor: name("cargo"), identifier: name("quiet"), state: .satisfied, date: date,
                         refinement: refinement, diagnostics: [], explanation: quiet),
            MonitorEvent(monitor: name("cargo"), identifier: name("far"), state: .satisfied, date: date,
                         refinement: nil, diagnostics: [.conditionLimitExceeded, .conditionUnsupported], explanation: far),
            MonitorEvent(monitor: name("cargo"), identifier: name("anyCrate"), state: .unsatisfied,
                         date: UTCTime(nanoseconds: -1_000_000), refinement: nil, diagnostics: [], explanation: timeout),
            MonitorEvent(monitor: name("cargo"), identifier: name("assumed"), state: .unknown, date: date,
                         refinement: nil, diagnostics: [], explanation: Explanation(source: .assumption)),
        ]
    }

    static func conditions() -> [LogPayload.ConditionEntry] {
        var settings = ConditionSettings()
        settings.enterMarginM = 2.5
        settings.exitMarginM = 10
        settings.dwellMs = 3_000
        settings.accuracyGate = false
        settings.transit = true
        var beaconSettings = ConditionSettings()
        beaconSettings.exitTimeoutMs = 15_000
        beaconSettings.proximity = .near
        var immediate = ConditionSettings()
        immediate.proximity = .immediate
        var far = ConditionSettings()
        far.proximity = .far
        return [
            LogPayload.ConditionEntry(monitor: name("harbour"), identifier: name("berth"),
                                      condition: .circle(CircularGeographicCondition(latitude: 52.85012, longitude: -5.31355, radiusM: 60.125)),
                                      settings: settings, assuming: .unsatisfied, fromSiteFile: true),
            LogPayload.ConditionEntry(monitor: name("cargo"), identifier: name("anyCrate"),
                                      condition: .beacon(BeaconIdentityCondition(uuid: uuid)),
                                      settings: beaconSettings, assuming: .unknown, fromSiteFile: false),
            LogPayload.ConditionEntry(monitor: name("cargo"), identifier: name("crate7"),
                                      condition: .beacon(BeaconIdentityCondition(uuid: uuid, major: 1, minor: 7)),
                                      settings: immediate, assuming: .satisfied, fromSiteFile: false),
            LogPayload.ConditionEntry(monitor: name("cargo"), identifier: name("fleet1"),
                                      condition: .beacon(BeaconIdentityCondition(uuid: uuid, major: 1)),
                                      settings: far, assuming: .unknown, fromSiteFile: true),
        ]
    }

    /// A state directory with every record kind (`conditionsOnly`: the conditions, events and
    /// removal, without checkpoints, which a rebuild starts from); returns its path.
    static func writeLog(_ label: String, conditionsOnly: Bool = false) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locus-export-format-\(getpid())-\(label)").path
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var store = try LogStore.open(directory: directory, segmentSizeBytes: 1 << 20, retainBytes: 1 << 30)
        var time = baseTimeNs
        func append(_ type: LogRecordType, _ bytes: [UInt8], flags: LogRecordFlags = LogRecordFlags()) throws {
            time += 1_500_000_000
            try store.append(type: type, time: time, payload: bytes, flags: flags)
        }
        if conditionsOnly {
            for entry in conditions() { try append(.conditionAdded, payload { LogPayload.write(entry, &$0) }) }
            for event in events() { try append(.event, payload { LogPayload.write(event, &$0) }) }
            try append(.conditionRemoved, payload { LogPayload.writeRemoval(monitor: name("cargo"), identifier: name("crate7"), &$0) })
            return directory
        }
        try append(.start, Array("locus 1.0 \"quoted\" back\\slash\ttab\nnewline \u{01} Zürich".utf8))
        for entry in conditions() { try append(.conditionAdded, payload { LogPayload.write(entry, &$0) }) }
        for event in events() { try append(.event, payload { LogPayload.write(event, &$0) }) }
        try append(.gpio, payload { LogPayload.write(LogPayload.GPIOChange(output: name("relay1"), value: true, cause: .level,
                                                                           monitor: name("harbour"), identifier: name("berth")), &$0) })
        try append(.gpio, payload { LogPayload.write(LogPayload.GPIOChange(output: name("buzzer"), value: false, cause: .pulseEnd), &$0) })
        try append(.consumer, payload { LogPayload.writeConsumer(monitor: name("cargo"), sequence: 42, &$0) })
        try append(.fix, payload { LogPayload.write(LogPayload.LoggedFix(timeNs: time, latitude: 52.8501234567, longitude: 5.3135512345,
                                                                        accuracyM: 3.45, speedMps: 1.2345, trackDeg: 271.25, mode: 3), &$0) })
        try append(.fix, payload { LogPayload.write(LogPayload.LoggedFix(timeNs: time, latitude: .nan, longitude: .nan,
                                                                        accuracyM: -1, speedMps: -1, trackDeg: -1, mode: 1), &$0) })
        try append(.visit, payload { LogPayload.write(Visit(arrival: UTCTime(nanoseconds: baseTimeNs), departure: UTCTime(nanoseconds: time),
                                                            latitude: 52.85, longitude: -5.31, radiusM: 37.25), &$0) })
        try append(.conditionRemoved, payload { LogPayload.writeRemoval(monitor: name("cargo"), identifier: name("crate7"), &$0) })
        try append(.checkpoint, payload { $0.put(UInt16(3)) }, flags: .moreFollow)
        try append(.checkpoint, payload { $0.put(UInt16(0)) })
        try append(.diagnostic, Array("log: 2 records cut".utf8))
        try append(.event, [0xFF, 0x01])   // undecodable
        try append(.gpio, [0x00])
        try append(.uplink, payload { LogPayload.writeUplink(UplinkCursor(delivered: 21, chained: 20), &$0) })
        try append(.stop, [])
        return directory
    }

    func checkGolden(_ output: String, file: String) throws {
        let path = "\(repositoryRoot)/Tests/Scenarios/\(file)"
        if ProcessInfo.processInfo.environment["LOCUS_EXPORT_GOLDEN"] == "write" {
            try output.write(toFile: path, atomically: true, encoding: .utf8)
            return
        }
        let golden = try String(contentsOfFile: path, encoding: .utf8)
        #expect(output == golden, "\(file) differs from the golden output (LOCUS_EXPORT_GOLDEN=write to regenerate)")
    }

    @Test func exportOfEveryRecordKindMatchesTheGoldens() throws {
        let directory = try Self.writeLog("export")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let jsonl = try locus(["log", "export", "--state", directory])
        #expect(jsonl.status == 0, "\(jsonl.error)")
        try checkGolden(jsonl.output, file: "export-every-kind.jsonl")
        for line in jsonl.output.split(separator: "\n") {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "\(line)")
        }
        let csv = try locus(["log", "export", "--state", directory, "--format", "csv"])
        #expect(csv.status == 0, "\(csv.error)")
        try checkGolden(csv.output, file: "export-every-kind.csv")
        let events = try locus(["events", "--state", directory])
        #expect(events.status == 0, "\(events.error)")
        try checkGolden(events.output, file: "export-every-kind.events.jsonl")
        let cargo = try locus(["events", "--state", directory, "--monitor", "cargo", "--after-seq", "9"])
        let expected = events.output.split(separator: "\n").filter { line in
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            return object?["monitor"] as? String == "cargo" && (object?["seq"] as? Int ?? 0) > 9
        }
        #expect(cargo.output == expected.map { $0 + "\n" }.joined())
    }

    @Test func recordsOfEveryConditionKindMatchTheGolden() throws {
        let directory = try Self.writeLog("records", conditionsOnly: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var output = ""
        for monitor in ["harbour", "cargo"] {
            let records = try locus(["monitor", monitor, "records", "--state", directory])
            #expect(records.status == 0, "\(records.error)")
            output += records.output
        }
        let one = try locus(["monitor", "cargo", "record", "fleet1", "--state", directory])
        #expect(one.status == 0, "\(one.error)")
        output += one.output
        try checkGolden(output, file: "export-every-kind.records.jsonl")
    }
}
