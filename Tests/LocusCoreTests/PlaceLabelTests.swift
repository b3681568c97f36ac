import AllocCounter
import Foundation
@testable import LocusCore
import Testing

/// Annotation (`[geocoding] annotate`): the renderers given `PlaceLabels` add the place nearest a
/// position, and only where there is one; without labels they write what they always did; the
/// bound the agent's buffers rely on holds; a turn's renders allocate nothing.
@Suite struct PlaceLabelTests {
    /// 2 km north-east of Bremerhaven: beyond the sample's site places' 1.6 km.
    static let point = (latitude: 53.5660, longitude: 8.5960)

    /// An index over a copy of `bytes` that lives as long as the test process (labels hold no
    /// reference to what they read).
    static func index(_ bytes: [UInt8]) throws -> PlaceIndex {
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 16)
        copy.copyBytes(from: bytes)
        return try PlaceIndex(bytes: UnsafeRawBufferPointer(copy))
    }

    static let sampleIndex = try! index(PlaceIndexTests.build(PlaceIndexTests.sample))

    static func labels(maximumDistanceM: Double = 25_000, scope: PlaceScope = .any) -> PlaceLabels {
        PlaceLabels(index: sampleIndex, maximumDistanceM: maximumDistanceM, scope: scope)
    }

    static func withLabels<T>(maximumDistanceM: Double = 25_000, scope: PlaceScope = .any, _ body: (PlaceLabels) throws -> T) rethrows -> T {
        try body(labels(maximumDistanceM: maximumDistanceM, scope: scope))
    }

    static let gateway: StaticString = "gw-1"
    static var gatewayBytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: gateway.utf8Start, count: gateway.utf8CodeUnitCount) }

    static func event(_ source: Explanation.Source, latitude: Double = point.latitude, longitude: Double = point.longitude) -> MonitorEvent {
        var explanation = Explanation(source: source)
        explanation.latitude = latitude
        explanation.longitude = longitude
        explanation.accuracyM = 3
        explanation.edgeDistanceM = -59.8
        return MonitorEvent(monitor: FixedName("harbour")!, identifier: FixedName("berth")!, state: .satisfied, date: RenderTests.date,
                            refinement: nil, diagnostics: [], explanation: explanation)
    }

    static func json(_ body: (inout JSONWriter) -> Void) throws -> [String: Any] {
        var line = JSONWriter(capacity: 8192)
        body(&line)
        let overflowed = line.overflowed, text = line.string
        #expect(!overflowed)
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    @Test func eventsWithAPositionCarryThePlaceNearestIt() throws {
        try Self.withLabels { labels in
            let fix = try Self.json { EventJSON.write(Self.event(.fix), sequence: 3, places: labels, into: &$0) }
            let place = try #require(fix["place"] as? [String: Any])
            #expect(place["name"] as? String == "Bremerhaven" && place["admin1"] as? String == "Bremen" && place["country"] as? String == "DE")
            #expect((place["text"] as? String)?.hasSuffix(" NE of Bremerhaven, Bremen, DE") == true, "\(place)")
            let exact = Geodesy.distanceM(53.55357, 8.57553, Self.point.latitude, Self.point.longitude)
            #expect((place["distance_m"] as? Double).map { abs($0 - exact) < 1e-3 } == true, "\(place)")
            #expect(try Self.json { EventJSON.write(Self.event(.transit), sequence: 3, places: labels, into: &$0) }["place"] != nil)
            // No position (a sighting, a timeout, privacy's NaN), nothing within reach: no member.
            for event in [Self.event(.sighting), Self.event(.timeout), Self.event(.assumption), Self.event(.fix, latitude: .nan, longitude: .nan),
                          Self.event(.fix, latitude: -33.9, longitude: 151.2)] {
                #expect(try Self.json { EventJSON.write(event, sequence: 3, places: labels, into: &$0) }["place"] == nil, "\(event.explanation)")
            }
            // Without labels, the line is what it always was.
            var plain = JSONWriter(capacity: 4096), labelled = JSONWriter(capacity: 4096)
            EventJSON.write(Self.event(.fix), sequence: 3, into: &plain)
            EventJSON.write(Self.event(.fix), sequence: 3, places: labels, into: &labelled)
            #expect(!plain.string.contains("place") && labelled.string.hasPrefix(String(plain.string.dropLast()) + ",\"place\":{"))
        }
    }

    @Test func eventTextEndsWithThePlace() throws {
        try Self.withLabels { labels in
            var line = JSONWriter(capacity: 1024)
            EventText.write(Self.event(.fix), sequence: 3, places: labels, into: &line)
            #expect(line.string.hasSuffix("satisfied   fix, 59.8 m inside the edge (accuracy 3.0 m), 1.9 km NE of Bremerhaven, Bremen, DE"), "\(line.string)")
            line.reset()
            EventText.write(Self.event(.sighting), sequence: 3, places: labels, into: &line)
            #expect(!line.string.contains(" of "))
            line.reset()
            var held = Self.event(.fix)
            held.explanation.dwellMs = 3_000
            held.diagnostics = [.accuracyLimited]
            EventText.write(held, sequence: 3, places: labels, into: &line)
            #expect(line.string.hasSuffix("(accuracy 3.0 m), held 3s, 1.9 km NE of Bremerhaven, Bremen, DE [accuracyLimited]"), "\(line.string)")
        }
    }

    @Test func withinAndScopeDecideThePlace() throws {
        try Self.withLabels(maximumDistanceM: 1_000) { labels in
            #expect(labels.match(latitude: Self.point.latitude, longitude: Self.point.longitude) == nil)
        }
        // Next to the site's dock: the dock, unless only populated places may label.
        try Self.withLabels { labels in
            #expect(labels.match(latitude: 53.5401, longitude: 8.5801).map { labels.index.record($0.place).isSite } == true)
        }
        try Self.withLabels(scope: .populated) { labels in
            #expect(labels.match(latitude: 53.5401, longitude: 8.5801).map { labels.index.displayName($0.place) } == "Bremerhaven, Bremen, DE")
        }
    }

    @Test func updatesVisitsLocatedRepliesRecordsAndUplinkPayloadsCarryIt() throws {
        try Self.withLabels { labels in
            var fix = Fix(timeOfDayNs: 0)
            fix.mode = .threeDimensional
            fix.latitude = Self.point.latitude
            fix.longitude = Self.point.longitude
            fix.time = RenderTests.date
            let update = LocationUpdate(fix: fix, time: RenderTests.date, isStationary: false, diagnostics: [])
            var scratch = JSONWriter(capacity: 2048)
            var line = JSONWriter(capacity: 4096)
            ControlReply.update(update, batch: 1, flush: .count, places: labels, scratch: &scratch, into: &line)
            let streamed = try #require(try JSONSerialization.jsonObject(with: Data(line.string.utf8)) as? [String: Any])
            #expect((streamed["update"] as? [String: Any])?["place"] != nil && (streamed["update"] as? [String: Any])?["batch"] as? Int == 1)
            var noFix = update
            noFix.fix = Fix(timeOfDayNs: 0)
            line.reset()
            ControlReply.update(noFix, batch: 1, flush: .count, places: labels, scratch: &scratch, into: &line)
            let unplaced = line.string
            #expect(!unplaced.contains("place") && unplaced.contains("\"update\""))
            let visit = Visit(arrival: RenderTests.date, departure: nil, latitude: Self.point.latitude, longitude: Self.point.longitude, radiusM: 40)
            #expect((try Self.json { ControlReply.visit(visit, places: labels, into: &$0) }["visit"] as? [String: Any])?["place"] != nil)
            #expect(try Self.json { ControlReply.visitRecord(visit, sequence: 9, places: labels, into: &$0) }["place"] != nil)
            let located = try Self.json { ControlReply.located(1, fix, ageMs: 10, accuracyLimited: false, places: labels, into: &$0) }
            #expect((located["result"] as? [String: Any])?["place"] != nil)
            let logged = LogPayload.LoggedFix(timeNs: 0, latitude: Self.point.latitude, longitude: Self.point.longitude, accuracyM: 4,
                                              speedMps: -1, trackDeg: -1, mode: 3)
            let gateway = Self.gatewayBytes
            var payload = JSONWriter(capacity: UplinkJSON.maximumEventBytes)
            UplinkJSON.event(Self.event(.fix), sequence: 4, previous: 3, gateway: gateway, places: labels, into: &payload)
            let event = payload.string
            #expect(event.contains("\"place\":{") && event.utf8.count <= UplinkJSON.maximumEventBytes)
            payload.reset()
            UplinkJSON.visit(visit, sequence: 5, previous: 4, gateway: gateway, places: labels, into: &payload)
            let visitPayload = payload.string
            #expect(visitPayload.contains("\"place\":{") && visitPayload.utf8.count <= UplinkJSON.maximumVisitBytes)
            payload.reset()
            UplinkJSON.fix(logged, sequence: 6, gateway: gateway, places: labels, into: &payload)
            let fixPayload = payload.string
            #expect((try? JSONSerialization.jsonObject(with: Data(fixPayload.utf8))) is [String: Any] && fixPayload.contains("\"place\":{"))
        }
    }

    /// The bound the agent checks an index against (`maximumMemberBytes`) covers the member as
    /// written, for names that need escaping and the longest distance and bearing.
    @Test func theMemberBoundCoversTheLongestRendering() throws {
        let long = String(repeating: "\"Ä\\", count: 40)
        let places = [PlaceIndexTests.place(long, -53.55, -171.4, population: .max, admin1: "03", id: .max)]
        let index = try Self.index(PlaceIndexTests.build(places, admin1: [("DE.03", long + "\u{1}")]))
        let labels = PlaceLabels(index: index, maximumDistanceM: .infinity, scope: .any)
        let largest = try #require(PlaceLabels.largestMember(in: index))
        #expect(index.name(of: index.record(largest.place)).count == long.utf8.count)
        var line = JSONWriter(capacity: 8192)
        line.beginObject()
        line.integer("seq", 1)
        let before = line.count
        // The antipode of the place: the longest distance there is.
        labels.writeMember(latitude: 53.55, longitude: 8.6, into: &line)
        let written = line.count - before, text = line.string
        #expect(written > 0 && written <= largest.bytes, "\(written) > \(largest.bytes)")
        #expect(text.contains("km"))
    }

    /// Labelling an event, an update and a visit allocates nothing: the loop may do it every turn.
    @Test func labellingAllocatesNothing() throws {
        do {
            let labels = Self.labels()
            var line = JSONWriter(capacity: 8192)
            var scratch = JSONWriter(capacity: 2048)
            var fix = Fix(timeOfDayNs: 0)
            fix.mode = .threeDimensional
            fix.latitude = Self.point.latitude
            fix.longitude = Self.point.longitude
            let update = LocationUpdate(fix: fix, time: RenderTests.date, isStationary: false, diagnostics: [])
            let visit = Visit(arrival: RenderTests.date, departure: nil, latitude: 53.54, longitude: 8.58, radiusM: 40)
            let event = Self.event(.fix)
            var total = 0
            var counts: [Int] = []
            for _ in 0..<2 {
                counts.append(allocations {
                    for _ in 0..<20 {
                        line.reset()
                        ControlReply.event(event, sequence: 1, places: labels, into: &line)
                        ControlReply.update(update, batch: 1, flush: .count, places: labels, scratch: &scratch, into: &line)
                        ControlReply.visit(visit, places: labels, into: &line)
                        EventText.write(event, sequence: 1, places: labels, into: &line)
                        total += line.count
                    }
                })
            }
            #expect(counts[1] == 0, "allocations per round: \(counts)")
            #expect(total > 0)
        }
    }
}
