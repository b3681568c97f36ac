import AllocCounter
import Foundation
@testable import LocusCore
import Testing

/// The renderers (events as JSON and text, TPV, updates, visits, records, conditions) on values
/// with every optional part, against the lines the String renderers printed before the byte-level
/// writer replaced them (the expected lines below were produced by that code).
@Suite struct RenderTests {
    static let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
    static let date = UTCTime(nanoseconds: 1_711_195_201_250_000_000)

    static func name(_ text: String) -> FixedName { FixedName(text)! }

    static func events() -> [(MonitorEvent, Int64)] {
        var fix = Explanation(source: .fix)
        fix.latitude = 52.850123456
        fix.longitude = -5.313551234
        fix.accuracyM = 4.25
        fix.edgeDistanceM = -12.345
        fix.dwellMs = 3_000
        var outside = Explanation(source: .fix)
        outside.latitude = 52.85
        outside.longitude = 5.31
        outside.accuracyM = -1
        outside.edgeDistanceM = 0.05
        outside.dwellMs = 90_000
        var transit = Explanation(source: .transit)
        transit.latitude = .nan
        transit.longitude = .nan
        transit.accuracyM = 12
        transit.edgeDistanceM = 7.5
        transit.dwellMs = 1_500
        var sighting = Explanation(source: .sighting)
        sighting.rssiSamples = 12
        sighting.rssiFiltered = -63.5
        sighting.rssiMinimum = -71
        sighting.rssiMaximum = -58
        sighting.distanceM = 2.75
        var quiet = Explanation(source: .sighting)
        quiet.rssiSamples = 0
        var far = Explanation(source: .sighting)
        far.rssiSamples = 3
        far.rssiFiltered = -90.4
        far.rssiMinimum = -95
        far.rssiMaximum = -88
        far.distanceM = -1
        var timeout = Explanation(source: .timeout)
        timeout.dwellMs = 15_000
        let refinement = BeaconIdentity(uuid: uuid, major: 100, minor: 65_535)
        return [
            (MonitorEvent(monitor: name("harbour"), identifier: name("berth"), state: .satisfied, date: date,
                          refinement: nil, diagnostics: [], explanation: fix), 1),
            (MonitorEvent(monitor: name("harbour"), identifier: name("berth"), state: .unsatisfied, date: date,
                          refinement: nil, diagnostics: [.accuracyLimited], explanation: outside), 123_456),
            (MonitorEvent(monitor: name("a-very-long-monitor-name"), identifier: name("fair-way_2"), state: .unsatisfied, date: date,
                          refinement: nil, diagnostics: [.accuracyLimited, .persistenceUnavailable], explanation: transit), 7),
            (MonitorEvent(monitor: name("cargo"), identifier: name("anyCrate"), state: .satisfied, date: date,
                          refinement: refinement, diagnostics: [], explanation: sighting), 8),
            (MonitorEvent(monitor: name("cargo"), identifier: name("quiet"), state: .satisfied, date: date,
                          refinement: refinement, diagnostics: [], explanation: quiet), 9),
            (MonitorEvent(monitor: name("cargo"), identifier: name("far"), state: .satisfied, date: date,
                          refinement: nil, diagnostics: [.conditionLimitExceeded, .conditionUnsupported, .accuracyLimited, .persistenceUnavailable],
                          explanation: far), 10),
            (MonitorEvent(monitor: name("cargo"), identifier: name("anyCrate"), state: .unsatisfied, date: UTCTime(nanoseconds: -1_000_000),
                          refinement: nil, diagnostics: [], explanation: timeout), 11),
            (MonitorEvent(monitor: name("cargo"), identifier: name("assumed"), state: .unknown, date: date,
                          refinement: nil, diagnostics: [], explanation: Explanation(source: .assumption)), 0),
        ]
    }

    static func fixes() -> [Fix] {
        var bare = Fix(timeOfDayNs: 0)
        bare.mode = .noFix
        var full = Fix(timeOfDayNs: 0)
        full.time = date
        full.mode = .threeDimensional
        full.quality = .rtkFixed
        full.latitude = 44.0687833
        full.longitude = -121.31406905
        full.altitudeMSLM = 1133.3
        full.geoidSeparationM = -20.1
        full.speedMps = 0.0514
        full.trackDeg = 359.99995
        full.satellitesUsed = 15
        full.latitudeSigmaM = 3
        full.longitudeSigmaM = 4
        var noSeparation = full
        noSeparation.geoidSeparationM = nil
        noSeparation.latitudeSigmaM = nil
        noSeparation.hdop = 0.9
        var flat = full
        flat.mode = .twoDimensional
        flat.quality = nil
        flat.speedMps = nil
        flat.trackDeg = nil
        flat.satellitesUsed = nil
        flat.latitudeSigmaM = nil
        var noPosition = full
        noPosition.latitude = nil
        var unknown = Fix(timeOfDayNs: 5)
        unknown.time = UTCTime(nanoseconds: 946_684_799_999_000_000)
        return [bare, full, noSeparation, flat, noPosition, unknown]
    }

    static func updates() -> [LocationUpdate] {
        let fixes = fixes()
        return [
            LocationUpdate(fix: fixes[0], time: date, isStationary: false, diagnostics: [.locationUnavailable]),
            LocationUpdate(fix: fixes[1], time: date, isStationary: true, diagnostics: [.stationary, .accuracyLimited]),
            LocationUpdate(fix: fixes[5], time: date, isStationary: false, diagnostics: []),
            LocationUpdate(fix: Fix(timeOfDayNs: 0), time: date, isStationary: false,
                           diagnostics: [.stationary, .locationUnavailable, .accuracyLimited]),
        ]
    }

    static func records() -> [(FixedName, MonitorEngine.Record)] {
        var settings = ConditionSettings()
        settings.enterMarginM = 2.5
        settings.dwellMs = 3_000
        settings.transit = true
        var beacon = ConditionSettings()
        beacon.exitTimeoutMs = 15_000
        beacon.proximity = .immediate
        let all = events()
        return [
            (name("berth"), MonitorEngine.Record(condition: .circle(CircularGeographicCondition(latitude: 52.85012, longitude: -5.31355, radiusM: 60.125)),
                                                 settings: settings, lastEvent: all[0].0, accuracyLimited: true, fromSiteFile: true, assumed: .unknown)),
            (name("anyCrate"), MonitorEngine.Record(condition: .beacon(BeaconIdentityCondition(uuid: uuid, major: 7)),
                                                    settings: beacon, lastEvent: all[3].0, accuracyLimited: false, fromSiteFile: false, assumed: .unknown)),
            (name("crate"), MonitorEngine.Record(condition: .beacon(BeaconIdentityCondition(uuid: uuid, major: 7, minor: 9)),
                                                 settings: ConditionSettings(), lastEvent: all[7].0, accuracyLimited: false, fromSiteFile: false, assumed: .unknown)),
        ]
    }

    static let visit = Visit(arrival: UTCTime(nanoseconds: 1_711_195_200_000_000_000), departure: date,
                             latitude: 52.8501234565, longitude: -5.31, radiusM: 37.25)

    /// Produced by the String renderers (JSONText) before the byte-level writer replaced them.
    static let expected = #"""
{"monitor":"harbour","identifier":"berth","state":"satisfied","date":"2024-03-23T12:00:01.250Z","seq":1,"refinement":null,"diagnostics":[],"explain":{"source":"fix","lat":52.850123456,"lon":-5.313551234,"accuracy_m":4.3,"edge_distance_m":-12.35,"dwell_ms":3000}}
    1  2024-03-23T12:00:01.250Z  harbour/berth           satisfied   fix, 12.3 m inside the edge (accuracy 4.3 m), held 3s
{"monitor":"harbour","identifier":"berth","state":"unsatisfied","date":"2024-03-23T12:00:01.250Z","seq":123456,"refinement":null,"diagnostics":["accuracyLimited"],"explain":{"source":"fix","lat":52.850000000,"lon":5.310000000,"edge_distance_m":0.05,"dwell_ms":90000}}
123456   2024-03-23T12:00:01.250Z  harbour/berth           unsatisfied fix, 0.1 m outside the edge, held 90s [accuracyLimited]
{"monitor":"a-very-long-monitor-name","identifier":"fair-way_2","state":"unsatisfied","date":"2024-03-23T12:00:01.250Z","seq":7,"refinement":null,"diagnostics":["accuracyLimited","persistenceUnavailable"],"explain":{"source":"transit","accuracy_m":12.0,"edge_distance_m":7.50,"dwell_ms":1500}}
    7  2024-03-23T12:00:01.250Z  a-very-long-monitor-name/fair-way_2 unsatisfied transit, 7.5 m outside the edge (accuracy 12.0 m), held 1500ms [accuracyLimited, persistenceUnavailable]
{"monitor":"cargo","identifier":"anyCrate","state":"satisfied","date":"2024-03-23T12:00:01.250Z","seq":8,"refinement":{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":65535},"diagnostics":[],"explain":{"source":"sighting","rssi_samples":12,"rssi_filtered":-63.5,"rssi_min":-71,"rssi_max":-58,"distance_m":2.75}}
    8  2024-03-23T12:00:01.250Z  cargo/anyCrate          satisfied   sighting of major 100 minor 65535, RSSI -64 dBm (~2.8 m)
{"monitor":"cargo","identifier":"quiet","state":"satisfied","date":"2024-03-23T12:00:01.250Z","seq":9,"refinement":{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":65535},"diagnostics":[],"explain":{"source":"sighting","rssi_samples":0}}
    9  2024-03-23T12:00:01.250Z  cargo/quiet             satisfied   sighting of major 100 minor 65535
{"monitor":"cargo","identifier":"far","state":"satisfied","date":"2024-03-23T12:00:01.250Z","seq":10,"refinement":null,"diagnostics":["accuracyLimited","conditionLimitExceeded","conditionUnsupported","persistenceUnavailable"],"explain":{"source":"sighting","rssi_samples":3,"rssi_filtered":-90.4,"rssi_min":-95,"rssi_max":-88}}
   10  2024-03-23T12:00:01.250Z  cargo/far               satisfied   sighting, RSSI -90 dBm [accuracyLimited, conditionLimitExceeded, conditionUnsupported, persistenceUnavailable]
{"monitor":"cargo","identifier":"anyCrate","state":"unsatisfied","date":"1969-12-31T23:59:59.999Z","seq":11,"refinement":null,"diagnostics":[],"explain":{"source":"timeout","unseen_ms":15000}}
   11  1969-12-31T23:59:59.999Z  cargo/anyCrate          unsatisfied not seen for 15s
{"monitor":"cargo","identifier":"assumed","state":"unknown","date":"2024-03-23T12:00:01.250Z","seq":0,"refinement":null,"diagnostics":[],"explain":{"source":"assumption"}}
    0  2024-03-23T12:00:01.250Z  cargo/assumed           unknown     assumed
{"class":"TPV","mode":1}
{"class":"TPV","mode":3,"time":"2024-03-23T12:00:01.250Z","lat":44.068783300,"lon":-121.314069050,"altMSL":1133.3000,"altHAE":1113.2000,"geoidSep":-20.100,"speed":0.051,"track":360.0000,"eph":5.000,"status":4,"satellites_used":15}
{"class":"TPV","mode":3,"time":"2024-03-23T12:00:01.250Z","lat":44.068783300,"lon":-121.314069050,"altMSL":1133.3000,"speed":0.051,"track":360.0000,"eph":4.500,"status":4,"satellites_used":15}
{"class":"TPV","mode":2,"time":"2024-03-23T12:00:01.250Z","lat":44.068783300,"lon":-121.314069050}
{"class":"TPV","mode":3,"time":"2024-03-23T12:00:01.250Z"}
{"class":"TPV","mode":0,"time":"1999-12-31T23:59:59.999Z"}
{"class":"TPV","mode":1,"time":"2024-03-23T12:00:01.250Z","isStationary":false,"diagnostics":["locationUnavailable"]}
{"class":"TPV","mode":3,"time":"2024-03-23T12:00:01.250Z","lat":44.068783300,"lon":-121.314069050,"altMSL":1133.3000,"altHAE":1113.2000,"geoidSep":-20.100,"speed":0.051,"track":360.0000,"eph":5.000,"status":4,"satellites_used":15,"isStationary":true,"diagnostics":["stationary","accuracyLimited"]}
{"class":"TPV","mode":1,"time":"1999-12-31T23:59:59.999Z","isStationary":false,"diagnostics":[]}
{"class":"TPV","mode":1,"time":"2024-03-23T12:00:01.250Z","isStationary":false,"diagnostics":["stationary","locationUnavailable","accuracyLimited"]}
{"class":"VISIT","arrival":"2024-03-23T12:00:00.000Z","departure":"2024-03-23T12:00:01.250Z","lat":52.850123457,"lon":-5.310000000,"radius":37.3}
{"identifier":"berth","condition":{"lat":52.8501200,"lon":-5.3135500,"radius":60.13},"settings":{"enter_margin":2.50,"exit_margin":15.00,"dwell_ms":3000,"accuracy_gate":true,"transit":true},"lastEvent":{"monitor":"harbour","identifier":"berth","state":"satisfied","date":"2024-03-23T12:00:01.250Z","seq":0,"refinement":null,"diagnostics":[],"explain":{"source":"fix","lat":52.850123456,"lon":-5.313551234,"accuracy_m":4.3,"edge_distance_m":-12.35,"dwell_ms":3000}},"accuracyLimited":true,"site_file":true}
{"lat":52.8501200,"lon":-5.3135500,"radius":60.13}
{"enter_margin":2.50,"exit_margin":15.00,"dwell_ms":3000,"accuracy_gate":true,"transit":true}
{"identifier":"anyCrate","condition":{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":7},"settings":{"enter_margin":0.00,"exit_margin":15.00,"dwell_ms":0,"accuracy_gate":true,"transit":false,"exit_timeout_ms":15000,"proximity":"immediate"},"lastEvent":{"monitor":"cargo","identifier":"anyCrate","state":"satisfied","date":"2024-03-23T12:00:01.250Z","seq":0,"refinement":{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":65535},"diagnostics":[],"explain":{"source":"sighting","rssi_samples":12,"rssi_filtered":-63.5,"rssi_min":-71,"rssi_max":-58,"distance_m":2.75}},"site_file":false}
{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":7}
{"enter_margin":0.00,"exit_margin":15.00,"dwell_ms":0,"accuracy_gate":true,"transit":false,"exit_timeout_ms":15000,"proximity":"immediate"}
{"identifier":"crate","condition":{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":7,"minor":9},"settings":{"enter_margin":0.00,"exit_margin":15.00,"dwell_ms":0,"accuracy_gate":true,"transit":false},"lastEvent":{"monitor":"cargo","identifier":"assumed","state":"unknown","date":"2024-03-23T12:00:01.250Z","seq":0,"refinement":null,"diagnostics":[],"explain":{"source":"assumption"}},"site_file":false}
{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":7,"minor":9}
{"enter_margin":0.00,"exit_margin":15.00,"dwell_ms":0,"accuracy_gate":true,"transit":false}
"""#

    /// Every value through the renderers' `write(into:)` (one line each, the writer reset
    /// between them), in the order of `expected`.
    static func renderedByWriter() -> String {
        var line = JSONWriter(capacity: 2048)
        var text = ""
        func take(_ line: inout JSONWriter) {
            line.newline()
            let overflowed = line.overflowed
            #expect(!overflowed)
            text += line.string
            line.reset()
        }
        for (event, sequence) in events() {
            EventJSON.write(event, sequence: sequence, into: &line)
            take(&line)
            EventText.write(event, sequence: sequence, into: &line)
            take(&line)
        }
        for fix in fixes() {
            FixJSON.write(fix, into: &line)
            take(&line)
        }
        for update in updates() {
            UpdateJSON.write(update, into: &line)
            take(&line)
        }
        UpdateJSON.write(visit, into: &line)
        take(&line)
        for (identifier, record) in records() {
            RecordJSON.write(identifier, record, into: &line)
            take(&line)
            ConditionJSON.write(record.condition, into: &line)
            take(&line)
            ConditionJSON.write(record.settings, into: &line)
            take(&line)
        }
        return text
    }

    @Test func theWriterRendersWhatTheStringRenderersDid() {
        let rendered = Self.renderedByWriter().split(separator: "\n", omittingEmptySubsequences: false)
        let expected = (Self.expected + "\n").split(separator: "\n", omittingEmptySubsequences: false)
        #expect(rendered.count == expected.count)
        for (got, want) in zip(rendered, expected) { #expect(got == want) }
    }

    /// An update carries the vertical accuracy after the TPV's members (which stay gpsd's):
    /// GST's altitude sigma when there is one, else VDOP × 5 m; none without a 3D fix.
    @Test func anUpdateCarriesTheVerticalAccuracy() {
        var fix = Self.fixes()[1]
        fix.vdop = 1.2
        func rendered(_ fix: Fix) -> String {
            var line = JSONWriter(capacity: 1024)
            UpdateJSON.write(LocationUpdate(fix: fix, time: Self.date, isStationary: false, diagnostics: []), into: &line)
            return line.string
        }
        #expect(rendered(fix).contains(#""satellites_used":15,"epv":6.000,"isStationary":false"#), "\(rendered(fix))")
        fix.altitudeSigmaM = 2.25
        #expect(rendered(fix).contains(#""epv":2.250,"#))
        var flat = fix
        flat.mode = .twoDimensional
        #expect(!rendered(flat).contains("epv"))
        var tpv = JSONWriter(capacity: 1024)
        FixJSON.write(fix, into: &tpv)
        #expect(!tpv.string.contains("epv"), "the TPV stays gpsd's")
    }

    @Test func everyJSONLineParses() throws {
        for line in Self.expected.split(separator: "\n") where line.hasPrefix("{") {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "\(line)")
        }
    }

    /// Events, TPVs, updates, visits, records and conditions hold no String: rendering them
    /// allocates nothing (their `write(into:)` are also `@_noAllocation`, checked in optimized builds).
    @Test func renderingAllocatesNothing() {
        var line = JSONWriter(capacity: 2048)
        let events = Self.events()
        let fixes = Self.fixes()
        let updates = Self.updates()
        let records = Self.records()
        let visit = Self.visit
        // Indexing, not `for ... in`: a debug build's unspecialized iterator boxes large elements.
        let count = allocations {
            for _ in 0..<10 {
                for index in 0..<events.count {
                    line.reset()
                    EventJSON.write(events[index].0, sequence: events[index].1, into: &line)
                    line.reset()
                    EventText.write(events[index].0, sequence: events[index].1, into: &line)
                }
                for index in 0..<fixes.count {
                    line.reset()
                    FixJSON.write(fixes[index], into: &line)
                }
                for index in 0..<updates.count {
                    line.reset()
                    UpdateJSON.write(updates[index], into: &line)
                }
                line.reset()
                UpdateJSON.write(visit, into: &line)
                for index in 0..<records.count {
                    line.reset()
                    RecordJSON.write(records[index].0, records[index].1, into: &line)
                }
            }
        }
        #expect(count == 0)
    }
}
