import Testing
@testable import LocusCore

@Suite struct LogPayloadTests {
    private let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!

    private func roundTrip(_ entry: LogPayload.ConditionEntry) -> LogPayload.ConditionEntry? {
        var bytes = [UInt8](repeating: 0, count: LogPayload.maximumConditionSize)
        return bytes.withUnsafeMutableBytes { raw in
            var writer = ByteWriter(raw)
            LogPayload.write(entry, &writer)
            #expect(!writer.overflow)
            var reader = ByteReader(writer.written)
            let decoded = LogPayload.readCondition(&reader)
            #expect(reader.isAtEnd)
            return decoded
        }
    }

    @Test func conditionsRoundTrip() {
        var settings = ConditionSettings()
        settings.dwellMs = 5_000
        settings.transit = true
        settings.exitTimeoutMs = 12_000
        settings.proximity = .near
        let entries = [
            LogPayload.ConditionEntry(monitor: FixedName("gate")!, identifier: FixedName("depot")!,
                                      condition: .circle(CircularGeographicCondition(latitude: 37.33467, longitude: -122.00898, radiusM: 100)),
                                      settings: settings, assuming: .unsatisfied, fromSiteFile: true),
            LogPayload.ConditionEntry(monitor: FixedName("gate")!, identifier: FixedName("dock")!,
                                      condition: .beacon(BeaconIdentityCondition(uuid: uuid, major: 0, minor: 65535)),
                                      settings: ConditionSettings(), assuming: .unknown, fromSiteFile: false),
            LogPayload.ConditionEntry(monitor: FixedName("m")!, identifier: FixedName("any")!,
                                      condition: .beacon(BeaconIdentityCondition(uuid: uuid)),
                                      settings: ConditionSettings.raw, assuming: .satisfied, fromSiteFile: true),
        ]
        for entry in entries { #expect(roundTrip(entry) == entry) }
    }

    /// Visits are reported at arrival and at departure; the record says which. A record written
    /// before that (40 bytes: the five fields, built here by hand in little-endian) still reads,
    /// as the departure it was; an unknown kind is refused.
    @Test func visitsRoundTripAndOldRecordsStillRead() {
        func decode(_ bytes: [UInt8]) -> Visit? {
            bytes.withUnsafeBytes { raw in
                var reader = ByteReader(raw)
                return LogPayload.readVisit(&reader)
            }
        }
        func encode(_ visit: Visit) -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: 64)
            let count = bytes.withUnsafeMutableBytes { raw in
                var writer = ByteWriter(raw)
                LogPayload.write(visit, &writer)
                return writer.written.count
            }
            return Array(bytes[..<count])
        }
        let departure = Visit(arrival: UTCTime(seconds: 1_710_496_800), departure: UTCTime(seconds: 1_710_497_400),
                              latitude: 45.0324, longitude: 7.0001, radiusM: 28)
        var arrival = departure
        arrival.departure = nil
        #expect(encode(departure).count == 41 && decode(encode(departure)) == departure)
        #expect(decode(encode(arrival)) == arrival && decode(encode(arrival))?.isArrival == true)

        func little<T: FixedWidthInteger>(_ value: T) -> [UInt8] { (0..<(T.bitWidth / 8)).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
        let old = little(Int64(1_710_496_800) * 1_000_000_000) + little(Int64(1_710_497_400) * 1_000_000_000)
            + little(45.0324.bitPattern) + little(7.0001.bitPattern) + little(28.0.bitPattern)
        #expect(old.count == 40 && decode(old) == departure)
        #expect(decode(old + [2]) == nil && decode(Array(old.prefix(39))) == nil)
    }

    @Test func eventsRoundTrip() {
        var explanation = Explanation(source: .sighting)
        explanation.rssiFiltered = -61.5
        explanation.rssiMinimum = -70
        explanation.rssiMaximum = -55
        explanation.rssiSamples = 12
        explanation.distanceM = 1.25
        let event = MonitorEvent(monitor: FixedName("gate")!, identifier: FixedName("dock")!, state: .satisfied,
                                 date: UTCTime(seconds: 1_700_000_000, nanoseconds: 123_000_000),
                                 refinement: BeaconIdentity(uuid: uuid, major: 1, minor: 7),
                                 diagnostics: [.accuracyLimited, .persistenceUnavailable], explanation: explanation)
        var bytes = [UInt8](repeating: 0, count: LogPayload.maximumEventSize)
        let decoded: MonitorEvent? = bytes.withUnsafeMutableBytes { raw in
            var writer = ByteWriter(raw)
            LogPayload.write(event, &writer)
            var reader = ByteReader(writer.written)
            return LogPayload.readEvent(&reader)
        }
        #expect(decoded == event)
    }

    @Test func truncatedAndGarbledPayloadsAreRefused() {
        let entry = LogPayload.ConditionEntry(monitor: FixedName("gate")!, identifier: FixedName("depot")!,
                                              condition: .circle(CircularGeographicCondition(latitude: 1, longitude: 2, radiusM: 3)),
                                              settings: ConditionSettings(), assuming: .unknown, fromSiteFile: true)
        var bytes = [UInt8](repeating: 0, count: LogPayload.maximumConditionSize)
        let length = bytes.withUnsafeMutableBytes { raw -> Int in
            var writer = ByteWriter(raw)
            LogPayload.write(entry, &writer)
            return writer.count
        }
        for cut in 0..<length {
            let decoded = bytes[0..<cut].withUnsafeBytes { raw -> LogPayload.ConditionEntry? in
                var reader = ByteReader(raw)
                return LogPayload.readCondition(&reader)
            }
            #expect(decoded == nil, "cut at \(cut)")
        }
        var tiny = [UInt8](repeating: 0, count: 8)
        tiny.withUnsafeMutableBytes { raw in
            var writer = ByteWriter(raw)
            LogPayload.write(entry, &writer)
            #expect(writer.overflow)
        }
    }
}
