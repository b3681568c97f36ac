import AllocCounter
import Foundation
@testable import LocusCore
import Testing

/// The uplink's topics and payloads: what a broker's subscribers and Home Assistant read.
@Suite struct UplinkPayloadTests {
    static let uuid = RenderTests.uuid
    static let date = RenderTests.date
    static func name(_ text: String) -> FixedName { FixedName(text)! }

    static let longMonitor = name(String(repeating: "m", count: 32))
    static let longIdentifier = name(String(repeating: "i", count: 32))

    static func render(_ body: (inout JSONWriter) -> Void) -> (text: String, object: [String: Any]) {
        var line = JSONWriter(capacity: 8192)
        body(&line)
        let text = line.string
        let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
        #expect(object != nil, "does not parse: \(text)")
        #expect(!text.hasSuffix("\n"))
        return (text, object ?? [:])
    }

    static func keys(_ object: [String: Any]) -> Set<String> { Set(object.keys) }

    static func change(monitor: Bool) -> LogPayload.GPIOChange {
        LogPayload.GPIOChange(output: name("siren"), value: true, cause: monitor ? .pulseStart : .latchCleared,
                              monitor: monitor ? name("harbour") : nil, identifier: monitor ? name("berth") : nil)
    }

    static let fix = LogPayload.LoggedFix(timeNs: 1_711_195_201_250_000_000, latitude: 52.850123456, longitude: -5.313551234,
                                          accuracyM: 4.25, speedMps: 0.514, trackDeg: 359.95, mode: 3)

    static let sighting = Sighting(identity: BeaconIdentity(uuid: uuid, major: 100, minor: 7), rssi: -63, measuredPower: -59,
                                   address: BLEAddress(value: 0xC0FFEE), time: date)

    // MARK: payloads

    /// The event payload is `EventJSON`'s object with "gateway" put first and "prev" last: the
    /// same members and values, and between them the very bytes `locus events` prints.
    @Test func eventIsTheEventsLineWithTheGatewayFirstAndPrevLast() throws {
        let topics = UplinkTopics(prefix: "locus/depot-gw-07", gateway: "depot-gw-07")
        for (index, (event, sequence)) in RenderTests.events().enumerated() {
            let previous: UInt64? = index == 0 ? nil : UInt64(index * 3)
            let payload = Self.render { UplinkJSON.event(event, sequence: UInt64(sequence), previous: previous, gateway: topics.gateway, into: &$0) }
            let plain = Self.render { EventJSON.write(event, sequence: sequence, into: &$0) }
            var expected = plain.object
            expected["gateway"] = "depot-gw-07"
            var members = payload.object
            let prevMember = members.removeValue(forKey: "prev")
            #expect(NSDictionary(dictionary: members).isEqual(to: expected), "\(payload.text)")
            if let previous { #expect(prevMember as? Int == Int(previous)) } else { #expect(prevMember is NSNull) }
            let prev = previous.map { String($0) } ?? "null"
            #expect(payload.text == #"{"gateway":"depot-gw-07","# + plain.text.dropFirst().dropLast() + #","prev":\#(prev)}"#)
        }
    }

    @Test func recordPayloadsBeginWithGatewayAndSeq() {
        let topics = UplinkTopics(prefix: "locus/gw", gateway: "gw")
        let event = RenderTests.events()[3].0
        let payloads = [
            Self.render { UplinkJSON.state(event, sequence: 42, gateway: topics.gateway, into: &$0) }.text,
            Self.render { UplinkJSON.gpio(Self.change(monitor: true), time: Self.date, sequence: 42, previous: 41, gateway: topics.gateway, into: &$0) }.text,
            Self.render { UplinkJSON.visit(RenderTests.visit, sequence: 42, previous: nil, gateway: topics.gateway, into: &$0) }.text,
            Self.render { UplinkJSON.fix(Self.fix, sequence: 42, gateway: topics.gateway, into: &$0) }.text,
        ]
        for payload in payloads { #expect(payload.hasPrefix(#"{"gateway":"gw","seq":42,"#), "\(payload)") }
    }

    @Test func stateIsTheRecordsStateForItsRetainedTopic() {
        let topics = UplinkTopics(prefix: "locus/gw", gateway: "gw")
        let events = RenderTests.events()
        let refined = Self.render { UplinkJSON.state(events[3].0, sequence: 8, gateway: topics.gateway, into: &$0) }
        #expect(refined.text == #"{"gateway":"gw","seq":8,"monitor":"cargo","identifier":"anyCrate","state":"satisfied","date":"2024-03-23T12:00:01.250Z","refinement":{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":65535}}"#)
        let plain = Self.render { UplinkJSON.state(events[1].0, sequence: 123_456, gateway: topics.gateway, into: &$0) }
        #expect(Self.keys(plain.object) == ["gateway", "seq", "monitor", "identifier", "state", "date", "refinement"])
        #expect(plain.object["refinement"] is NSNull)
        #expect(plain.object["state"] as? String == "unsatisfied")
        #expect(plain.object["seq"] as? Int == 123_456)
    }

    @Test func gpioChangesAsTheLogExportWritesThem() {
        let topics = UplinkTopics(prefix: "locus/gw", gateway: "gw")
        let caused = Self.render { UplinkJSON.gpio(Self.change(monitor: true), time: Self.date, sequence: 9, previous: nil, gateway: topics.gateway, into: &$0) }
        #expect(caused.text == #"{"gateway":"gw","seq":9,"output":"siren","value":true,"cause":"pulse-start","time":"2024-03-23T12:00:01.250Z","monitor":"harbour","identifier":"berth","prev":null}"#)
        let alone = Self.render { UplinkJSON.gpio(Self.change(monitor: false), time: Self.date, sequence: 10, previous: 9, gateway: topics.gateway, into: &$0) }
        #expect(Self.keys(alone.object) == ["gateway", "seq", "output", "value", "cause", "time", "prev"])
        #expect(alone.object["prev"] as? Int == 9)
        #expect(alone.object["cause"] as? String == "latch-cleared")
        #expect(alone.object["value"] as? Bool == true)
    }

    @Test func visitsAndFixes() {
        let topics = UplinkTopics(prefix: "locus/gw", gateway: "gw")
        let visit = Self.render { UplinkJSON.visit(RenderTests.visit, sequence: 5, previous: 0, gateway: topics.gateway, into: &$0) }
        #expect(visit.text == #"{"gateway":"gw","seq":5,"arrival":"2024-03-23T12:00:00.000Z","departure":"2024-03-23T12:00:01.250Z","lat":52.850123457,"lon":-5.310000000,"radius":37.3,"prev":0}"#)
        var arriving = RenderTests.visit
        arriving.departure = nil
        let arrival = Self.render { UplinkJSON.visit(arriving, sequence: 4, previous: 3, gateway: topics.gateway, into: &$0) }
        #expect(arrival.object["departure"] is NSNull)
        #expect(arrival.object["prev"] as? Int == 3)

        let fix = Self.render { UplinkJSON.fix(Self.fix, sequence: 6, gateway: topics.gateway, into: &$0) }
        #expect(fix.text == #"{"gateway":"gw","seq":6,"time":"2024-03-23T12:00:01.250Z","mode":3,"lat":52.850123456,"lon":-5.313551234,"eph":4.3,"speed":0.514,"track":360.0}"#)
        // `[privacy] fixes = "none"`: the record keeps no position, and the payload has none.
        var hidden = Self.fix
        hidden.latitude = .nan
        hidden.longitude = .nan
        hidden.accuracyM = -1
        hidden.speedMps = -1
        hidden.trackDeg = -1
        let hiddenPayload = Self.render { UplinkJSON.fix(hidden, sequence: 7, gateway: topics.gateway, into: &$0) }
        #expect(hiddenPayload.text == #"{"gateway":"gw","seq":7,"time":"2024-03-23T12:00:01.250Z","mode":3}"#)
    }

    @Test func sightingsAndTestMessagesCarryNoSeq() {
        let topics = UplinkTopics(prefix: "locus/gw", gateway: "gw")
        let seen = Self.render { UplinkJSON.sighting(Self.sighting, gateway: topics.gateway, into: &$0) }
        #expect(seen.text == #"{"gateway":"gw","uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":7,"rssi":-63,"tx_power":-59,"time":"2024-03-23T12:00:01.250Z"}"#)
        var quiet = Self.sighting
        quiet.rssi = nil
        let unknown = Self.render { UplinkJSON.sighting(quiet, gateway: topics.gateway, into: &$0) }
        #expect(unknown.object["rssi"] is NSNull)
        #expect(unknown.object["seq"] == nil)
        let test = Self.render { UplinkJSON.test(gateway: topics.gateway, time: Self.date, into: &$0) }
        #expect(test.text == #"{"gateway":"gw","test":true,"time":"2024-03-23T12:00:01.250Z"}"#)
    }

    /// A gateway id with a quote (not one the site check accepts) is still valid JSON.
    @Test func theGatewayIsEscaped() {
        let topics = UplinkTopics(prefix: "locus/gw", gateway: "gw \"7\"")
        let test = Self.render { UplinkJSON.test(gateway: topics.gateway, time: Self.date, into: &$0) }
        #expect(test.object["gateway"] as? String == "gw \"7\"")
    }

    // MARK: topics

    @Test func topicsForFullLengthNames() {
        var topics = UplinkTopics(prefix: "locus/depot-gw-07", gateway: "depot-gw-07")
        func text(_ bytes: UnsafeRawBufferPointer) -> String { String(decoding: bytes, as: UTF8.self) }
        let m = String(repeating: "m", count: 32), i = String(repeating: "i", count: 32)
        #expect(text(topics.event(monitor: Self.longMonitor, identifier: Self.longIdentifier)) == "locus/depot-gw-07/event/\(m)/\(i)")
        #expect(text(topics.state(monitor: Self.longMonitor, identifier: Self.longIdentifier)) == "locus/depot-gw-07/state/\(m)/\(i)")
        #expect(text(topics.gpio(output: Self.longMonitor)) == "locus/depot-gw-07/gpio/\(m)")
        #expect(text(topics.visit()) == "locus/depot-gw-07/visit")
        #expect(text(topics.fix()) == "locus/depot-gw-07/fix")
        #expect(text(topics.status()) == "locus/depot-gw-07/status")
        #expect(text(topics.test()) == "locus/depot-gw-07/test")
        let beacon = BeaconIdentity(uuid: Self.uuid, major: 65_535, minor: 0)
        #expect(text(topics.sighting(beacon)) == "locus/depot-gw-07/sighting/E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/65535/0")
        #expect(text(topics.sighting(BeaconIdentity(uuid: Self.uuid, major: 10, minor: 9_999)))
                == "locus/depot-gw-07/sighting/E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/10/9999")
        #expect(text(topics.discoveryCondition(monitor: Self.longMonitor, identifier: Self.longIdentifier))
                == "homeassistant/binary_sensor/locus_depot-gw-07_\(m)_\(i)/config")
        #expect(text(topics.discoveryOutput(output: Self.longMonitor)) == "homeassistant/binary_sensor/locus_depot-gw-07_gpio_\(m)/config")
        // The prefix stays put under every topic written after it.
        #expect(text(topics.visit()) == "locus/depot-gw-07/visit")
        #expect(text(topics.gateway) == "depot-gw-07")
        #expect(text(topics.prefix) == "locus/depot-gw-07")
    }

    /// The longest prefix and gateway with the longest topics.
    @Test func theBufferHoldsTheLongestTopics() {
        let prefix = String(repeating: "p", count: 200), gateway = String(repeating: "g", count: 64)
        var topics = UplinkTopics(prefix: prefix, gateway: gateway)
        #expect(topics.event(monitor: Self.longMonitor, identifier: Self.longIdentifier).count == 200 + 7 + 65)
        #expect(topics.sighting(BeaconIdentity(uuid: Self.uuid, major: 65_535, minor: 65_535)).count == 200 + 10 + 36 + 12)
        #expect(topics.discoveryCondition(monitor: Self.longMonitor, identifier: Self.longIdentifier).count == 34 + 64 + 66 + 7)
        #expect(String(decoding: topics.test(), as: UTF8.self) == prefix + "/test")
    }

    /// Home Assistant's object ids are [A-Za-z0-9_-]: the gateway's other characters become '_'.
    @Test func discoveryObjectIDsSanitiseTheGateway() {
        var topics = UplinkTopics(prefix: "fleet/depot.gw 07", gateway: "depot.gw 07/ä")
        let topic = String(decoding: topics.discoveryCondition(monitor: Self.name("Harbour-1"), identifier: Self.name("berth_2")), as: UTF8.self)
        #expect(topic == "homeassistant/binary_sensor/locus_depot_gw_07____Harbour-1_berth_2/config")
        #expect(String(decoding: topics.gateway, as: UTF8.self) == "depot.gw 07/ä")
        let config = Self.render {
            UplinkJSON.discoveryCondition(monitor: Self.name("Harbour-1"), identifier: Self.name("berth_2"), kind: .geographic,
                                          gateway: topics.gateway, prefix: topics.prefix, version: Self.version, into: &$0)
        }
        #expect(config.object["unique_id"] as? String == "locus_depot_gw_07____Harbour-1_berth_2")
        let device = config.object["device"] as? [String: Any]
        #expect(device?["identifiers"] as? [String] == ["locus_depot_gw_07___"])
        #expect(device?["name"] as? String == "Locus depot.gw 07/ä")
    }

    @Test func prefixRules() {
        #expect(UplinkTopics.defaultPrefix(gateway: "depot-gw-07") == "locus/depot-gw-07")
        #expect(UplinkTopics.prefixProblem("locus/depot-gw-07") == nil)
        #expect(UplinkTopics.prefixProblem(String(repeating: "a", count: 200)) == nil)
        let problems: [(String, String)] = [
            ("", "is empty"), ("/locus", "starts with '/'"), ("locus/", "ends with '/'"), ("locus/+", "'+', '#' or NUL"),
            ("locus/#", "'+', '#' or NUL"), ("lo\u{0}cus", "'+', '#' or NUL"), (String(repeating: "a", count: 201), "longer than 200 bytes"),
            ("$SYS/locus", "starts with '$'"), ("locus\tgw", "control character"),
        ]
        for (prefix, reason) in problems {
            let problem = UplinkTopics.prefixProblem(prefix)
            #expect(problem?.contains(reason) == true, "\(prefix): \(problem ?? "none")")
        }
    }

    // MARK: Home Assistant

    static var version: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: ("0.1.0" as StaticString).utf8Start, count: 5) }

    static let deviceKeys: Set<String> = ["identifiers", "name", "manufacturer", "model", "sw_version"]

    @Test func discoveryForAConditionHasExactlyTheKeysHomeAssistantReads() {
        let topics = UplinkTopics(prefix: "locus/depot-gw-07", gateway: "depot-gw-07")
        let config = Self.render {
            UplinkJSON.discoveryCondition(monitor: Self.name("harbour"), identifier: Self.name("berth"), kind: .geographic,
                                          gateway: topics.gateway, prefix: topics.prefix, version: Self.version, into: &$0)
        }
        let object = config.object
        #expect(Self.keys(object) == ["name", "unique_id", "default_entity_id", "state_topic", "value_template", "payload_on", "payload_off",
                                      "device_class", "availability_topic", "payload_available", "payload_not_available", "device"])
        #expect(object["name"] as? String == "harbour berth")
        #expect(object["unique_id"] as? String == "locus_depot-gw-07_harbour_berth")
        #expect(object["default_entity_id"] as? String == "binary_sensor.locus_depot_gw_07_harbour_berth")
        #expect(object["state_topic"] as? String == "locus/depot-gw-07/state/harbour/berth")
        #expect(object["value_template"] as? String == "{{ value_json.state if value_json.state in ['satisfied', 'unsatisfied'] else 'None' }}")
        #expect(object["payload_on"] as? String == "satisfied")
        #expect(object["payload_off"] as? String == "unsatisfied")
        #expect(object["device_class"] as? String == "presence")
        #expect(object["availability_topic"] as? String == "locus/depot-gw-07/status")
        #expect(object["payload_available"] as? String == "online")
        #expect(object["payload_not_available"] as? String == "offline")
        let device = object["device"] as? [String: Any] ?? [:]
        #expect(Self.keys(device) == Self.deviceKeys)
        #expect(device["identifiers"] as? [String] == ["locus_depot-gw-07"])
        #expect(device["name"] as? String == "Locus depot-gw-07")
        #expect(device["manufacturer"] as? String == "Locus")
        #expect(device["model"] as? String == "beacon gateway")
        #expect(device["sw_version"] as? String == "0.1.0")

        let beacon = Self.render {
            UplinkJSON.discoveryCondition(monitor: Self.name("cargo"), identifier: Self.name("anyCrate"), kind: UplinkJSON.ConditionKind(.beacon(BeaconIdentityCondition(uuid: Self.uuid))),
                                          gateway: topics.gateway, prefix: topics.prefix, version: Self.version, into: &$0)
        }
        #expect(beacon.object["device_class"] as? String == "occupancy")
    }

    @Test func discoveryForAnOutput() {
        let topics = UplinkTopics(prefix: "locus/depot-gw-07", gateway: "depot-gw-07")
        let config = Self.render {
            UplinkJSON.discoveryOutput(output: Self.name("siren"), gateway: topics.gateway, prefix: topics.prefix, version: Self.version, into: &$0)
        }
        let object = config.object
        #expect(Self.keys(object) == ["name", "unique_id", "default_entity_id", "state_topic", "value_template", "device_class",
                                      "availability_topic", "payload_available", "payload_not_available", "device"])
        #expect(object["name"] as? String == "GPIO siren")
        #expect(object["unique_id"] as? String == "locus_depot-gw-07_gpio_siren")
        #expect(object["default_entity_id"] as? String == "binary_sensor.locus_depot_gw_07_gpio_siren")
        #expect(object["state_topic"] as? String == "locus/depot-gw-07/gpio/siren")
        #expect(object["value_template"] as? String == "{{ 'ON' if value_json.value else 'OFF' }}")
        #expect(object["device_class"] as? String == "power")
        #expect(object["availability_topic"] as? String == "locus/depot-gw-07/status")
        #expect(Self.keys(object["device"] as? [String: Any] ?? [:]) == Self.deviceKeys)
    }

    /// Entity ids are lower-case letters, digits and single underscores inside (Home Assistant's
    /// `valid_entity_id`), whatever the names hold.
    @Test func defaultEntityIDsAreValidEntityIDs() throws {
        let pattern = try NSRegularExpression(pattern: #"^(?!.+__)(?!_)[\da-z_]+(?<!_)\.(?!_)[\da-z_]+(?<!_)$"#)
        let cases: [(String, String, String, String)] = [
            ("Depot.GW--07", "Harbour-North_", "_berth", "binary_sensor.locus_depot_gw_07_harbour_north_berth"),
            ("gw", "a__b", "C-", "binary_sensor.locus_gw_a_b_c"),
            ("---", "m", "i", "binary_sensor.locus_m_i"),
        ]
        for (gateway, monitor, identifier, expected) in cases {
            let topics = UplinkTopics(prefix: "locus/x", gateway: gateway)
            let config = Self.render {
                UplinkJSON.discoveryCondition(monitor: Self.name(monitor), identifier: Self.name(identifier), kind: .beacon,
                                              gateway: topics.gateway, prefix: topics.prefix, version: Self.version, into: &$0)
            }
            let id = config.object["default_entity_id"] as? String ?? ""
            #expect(id == expected)
            #expect(pattern.firstMatch(in: id, range: NSRange(id.startIndex..., in: id)) != nil, "\(id)")
        }
    }

    /// A prefix with a quote and a backslash is escaped in every topic a config names.
    @Test func discoveryTopicsAreEscaped() {
        let topics = UplinkTopics(prefix: #"site "7"\gw"#, gateway: "gw")
        let config = Self.render {
            UplinkJSON.discoveryCondition(monitor: Self.name("m"), identifier: Self.name("i"), kind: .beacon,
                                          gateway: topics.gateway, prefix: topics.prefix, version: Self.version, into: &$0)
        }
        #expect(config.object["state_topic"] as? String == #"site "7"\gw/state/m/i"#)
        #expect(config.object["availability_topic"] as? String == #"site "7"\gw/status"#)
    }

    // MARK: sizes

    /// The longest inputs: a 64-byte gateway id, a 200-byte prefix of quotes (each escaped to
    /// two bytes), 32-byte names, the widest numbers `JSONWriter` writes (21 bytes, 20 for an
    /// integer), every diagnostic, a refinement, the longest state, cause and source.
    @Test func theLongestPayloadsFitTheirMaximum() {
        let gateway = String(repeating: "g", count: 64)
        let topics = UplinkTopics(prefix: String(repeating: "\"", count: 200), gateway: gateway)
        let version = Array(repeating: UInt8(ascii: "9"), count: UplinkJSON.maximumVersionBytes)
        // Scaled by 10^decimals these are just below 9e18, the writer's widest number.
        func widest(_ decimals: Int) -> Double { -8.5e18 / pow(10, Double(decimals)) }
        let late = UTCTime(seconds: 253_402_300_799, nanoseconds: 999_000_000)
        var fix = Explanation(source: .transit)
        fix.latitude = widest(9)
        fix.longitude = widest(9)
        fix.accuracyM = 8.5e17
        fix.edgeDistanceM = widest(2)
        fix.dwellMs = .min
        var seen = Explanation(source: .sighting)
        seen.rssiSamples = .max
        seen.rssiFiltered = widest(1)
        seen.rssiMinimum = -128
        seen.rssiMaximum = -128
        seen.distanceM = 8.5e16
        let all: EventDiagnostics = [.accuracyLimited, .conditionLimitExceeded, .conditionUnsupported, .persistenceUnavailable]
        let refinement = BeaconIdentity(uuid: Self.uuid, major: 65_535, minor: 65_535)
        var largest = [String: Int](), maxima = [String: Int]()
        func measure(_ name: String, _ maximum: Int, _ body: (inout JSONWriter) -> Void) {
            var line = JSONWriter(capacity: maximum)
            body(&line)
            let overflowed = line.overflowed
            #expect(!overflowed, "\(name) does not fit \(maximum) bytes")
            largest[name] = max(largest[name] ?? 0, line.count)
            maxima[name] = maximum
        }
        for explanation in [fix, seen] {
            let event = MonitorEvent(monitor: Self.longMonitor, identifier: Self.longIdentifier, state: .unsatisfied, date: late,
                                     refinement: refinement, diagnostics: all, explanation: explanation)
            measure("event", UplinkJSON.maximumEventBytes) { UplinkJSON.event(event, sequence: UInt64(Int64.max), previous: .max, gateway: topics.gateway, into: &$0) }
            measure("state", UplinkJSON.maximumStateBytes) { UplinkJSON.state(event, sequence: .max, gateway: topics.gateway, into: &$0) }
        }
        let change = LogPayload.GPIOChange(output: Self.longMonitor, value: false, cause: .latchCleared, monitor: Self.longMonitor,
                                           identifier: Self.longIdentifier)
        measure("gpio", UplinkJSON.maximumGPIOBytes) { UplinkJSON.gpio(change, time: late, sequence: .max, previous: .max, gateway: topics.gateway, into: &$0) }
        let visit = Visit(arrival: late, departure: late, latitude: widest(9), longitude: widest(9), radiusM: widest(1))
        measure("visit", UplinkJSON.maximumVisitBytes) { UplinkJSON.visit(visit, sequence: .max, previous: .max, gateway: topics.gateway, into: &$0) }
        let logged = LogPayload.LoggedFix(timeNs: .max, latitude: widest(9), longitude: widest(9), accuracyM: 8.5e17,
                                          speedMps: 8.5e15, trackDeg: 8.5e17, mode: 255)
        measure("fix", UplinkJSON.maximumFixBytes) { UplinkJSON.fix(logged, sequence: .max, gateway: topics.gateway, into: &$0) }
        let sighting = Sighting(identity: refinement, rssi: -128, measuredPower: -128, address: BLEAddress(value: 0), time: late)
        measure("sighting", UplinkJSON.maximumSightingBytes) { UplinkJSON.sighting(sighting, gateway: topics.gateway, into: &$0) }
        measure("test", UplinkJSON.maximumTestBytes) { UplinkJSON.test(gateway: topics.gateway, time: late, into: &$0) }
        // Events, visits and fixes with a place (`[geocoding] annotate`) as large as an index may
        // hold for annotation, from the widest valid position.
        let labels = Self.largestPlaceLabels()
        var placed = fix
        (placed.latitude, placed.longitude) = (-89.999999999, -179.999999999)
        let placedEvent = MonitorEvent(monitor: Self.longMonitor, identifier: Self.longIdentifier, state: .unsatisfied, date: late,
                                       refinement: refinement, diagnostics: all, explanation: placed)
        measure("event", UplinkJSON.maximumEventBytes) {
            UplinkJSON.event(placedEvent, sequence: UInt64(Int64.max), previous: .max, gateway: topics.gateway, places: labels, into: &$0)
        }
        let placedVisit = Visit(arrival: late, departure: late, latitude: -89.999999999, longitude: -179.999999999, radiusM: widest(1))
        measure("visit", UplinkJSON.maximumVisitBytes) {
            UplinkJSON.visit(placedVisit, sequence: .max, previous: .max, gateway: topics.gateway, places: labels, into: &$0)
        }
        let placedFix = LogPayload.LoggedFix(timeNs: .max, latitude: -89.999999999, longitude: -179.999999999, accuracyM: 8.5e17,
                                             speedMps: 8.5e15, trackDeg: 8.5e17, mode: 255)
        measure("fix", UplinkJSON.maximumFixBytes) {
            UplinkJSON.fix(placedFix, sequence: .max, gateway: topics.gateway, places: labels, into: &$0)
        }
        version.withUnsafeBytes { version in
            measure("discovery", UplinkJSON.maximumDiscoveryBytes) {
                UplinkJSON.discoveryCondition(monitor: Self.longMonitor, identifier: Self.longIdentifier, kind: .geographic,
                                              gateway: topics.gateway, prefix: topics.prefix, version: version, into: &$0)
            }
            measure("discovery", UplinkJSON.maximumDiscoveryBytes) {
                UplinkJSON.discoveryOutput(output: Self.longMonitor, gateway: topics.gateway, prefix: topics.prefix, version: version, into: &$0)
            }
        }
        // A bound far above what it bounds would waste the uplink's buffers.
        for (name, size) in largest { #expect(size * 4 > maxima[name]! * 3, "\(name): \(size) of \(maxima[name]!) bytes") }
    }

    /// Labels over one place whose `"place"` member is as large as the agent accepts
    /// (`PlaceLabels.maximumMemberBytes`), reached from everywhere (no distance limit).
    static func largestPlaceLabels() -> PlaceLabels {
        var place = PlaceIndexTests.place(String(repeating: "n", count: 165), 89.5, 0.5, population: .max, admin1: "03", id: .max)
        place.timeZone = Array("America/Argentina/ComodRivadavia".utf8)
        let index = try! PlaceLabelTests.index(PlaceIndexTests.build([place], admin1: [("DE.03", String(repeating: "a", count: 165))]))
        let largest = PlaceLabels.largestMember(in: index)!.bytes
        precondition(largest <= PlaceLabels.maximumMemberBytes && largest > PlaceLabels.maximumMemberBytes - 32, "\(largest)")
        return PlaceLabels(index: index, maximumDistanceM: .infinity, scope: .any)
    }

    // MARK: allocation

    /// The loop's payloads and topics write into buffers allocated once: nothing per message.
    @Test func payloadsAndTopicsAllocateNothing() {
        var topics = UplinkTopics(prefix: "locus/depot-gw-07", gateway: "depot-gw-07")
        var line = JSONWriter(capacity: 4096)
        let events = RenderTests.events()
        let caused = Self.change(monitor: true)
        let visit = RenderTests.visit
        let fix = Self.fix
        let sighting = Self.sighting
        var total = 0
        let count = allocations {
            for _ in 0..<10 {
                for index in 0..<events.count {
                    let event = events[index].0
                    total += topics.event(monitor: event.monitor, identifier: event.identifier).count
                    line.reset()
                    UplinkJSON.event(event, sequence: UInt64(events[index].1), previous: 2, gateway: topics.gateway, into: &line)
                    total += topics.state(monitor: event.monitor, identifier: event.identifier).count
                    line.reset()
                    UplinkJSON.state(event, sequence: 1, gateway: topics.gateway, into: &line)
                    total += topics.discoveryCondition(monitor: event.monitor, identifier: event.identifier).count
                    line.reset()
                    UplinkJSON.discoveryCondition(monitor: event.monitor, identifier: event.identifier, kind: .beacon,
                                                  gateway: topics.gateway, prefix: topics.prefix, version: Self.version, into: &line)
                }
                total += topics.gpio(output: caused.output).count
                line.reset()
                UplinkJSON.gpio(caused, time: Self.date, sequence: 3, previous: 2, gateway: topics.gateway, into: &line)
                total += topics.visit().count
                line.reset()
                UplinkJSON.visit(visit, sequence: 4, previous: 3, gateway: topics.gateway, into: &line)
                total += topics.fix().count
                line.reset()
                UplinkJSON.fix(fix, sequence: 5, gateway: topics.gateway, into: &line)
                total += topics.sighting(sighting.identity).count
                line.reset()
                UplinkJSON.sighting(sighting, gateway: topics.gateway, into: &line)
                total += topics.status().count + topics.test().count + topics.discoveryOutput(output: caused.output).count
            }
        }
        #expect(count == 0)
        #expect(total > 0)
    }
}
