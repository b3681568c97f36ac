import AllocCounter
@testable import LocusCore
import TestSupport
import Testing

/// Polygon and corridor conditions in the monitor engine: the circle's rules (margins, accuracy
/// gate, dwell, events only on change) applied to the exact signed distance to the boundary,
/// checked against a reference that computes every fix exactly; the site file's shapes and their
/// errors at file:line:col; the log's round trip.
extension GeoPolygon {
    /// The ring without its last vertex (the test's three-vertex quay).
    func dropLast() -> GeoPolygon { try! GeoPolygon(latitudes: Array(latitudes.dropLast()), longitudes: Array(longitudes.dropLast())) }
}

@Suite struct ShapeConditionTests {
    static let t0 = UTCTime(seconds: 1_700_000_000)

    static func fix(_ latitude: Double, _ longitude: Double, at seconds: Int64, accuracyM: Double) -> Fix {
        var fix = Fix(timeOfDayNs: 0)
        fix.time = UTCTime(seconds: t0.seconds + seconds)
        fix.mode = .threeDimensional
        fix.latitude = latitude
        fix.longitude = longitude
        fix.latitudeSigmaM = accuracyM
        fix.longitudeSigmaM = 0
        return fix
    }


    /// The decision rules on an exactly located fix (README "Geofence decisions"), for the reference.
    static func observe(_ location: PolygonLocation, accuracyM: Double, settings: ConditionSettings, current: ConditionState) -> ConditionState {
        let spread = settings.accuracyGate ? accuracyM : 0
        let signed = location.isInside ? -location.boundaryDistanceM : location.boundaryDistanceM
        if signed <= -settings.enterMarginM - spread { return .satisfied }
        if signed > settings.exitMarginM + spread { return .unsatisfied }
        if settings.accuracyGate { return current }
        if current == .unknown { return location.isInside ? .satisfied : .unsatisfied }
        return current
    }

    /// A wandering track in and around the shape: every event the engine gives is the one the
    /// exact reference gives, at the same fix, with the exact distance and edge explained.
    func agreesWithTheExactReference(_ condition: Condition, locate: (Double, Double) -> PolygonLocation,
                                     edgeDistance: (Int, Double, Double) -> Double,
                                     around center: (Double, Double), radiusM: Double, seed: UInt64) throws -> Int {
        var random = SplitMix64(seed: seed)
        var settings = ConditionSettings()
        settings.exitMarginM = [0, 15][Int(seed % 2)]
        settings.enterMarginM = [0, 5][Int(seed / 2 % 2)]
        let engine = MonitorEngine(capacity: .init(conditions: 4, events: 16))
        let monitor = FixedName("yard")!, identifier = FixedName("shape")!
        #expect(engine.add(monitor: monitor, identifier: identifier, condition: condition, settings: settings, now: Self.t0) == .added)
        var expected = ConditionState.unknown, events = 0
        var position = center, heading = random.uniform(-180, 180)
        for second in 1...1_500 {
            // A random walk, pulled back toward the shape when it strays beyond 1.3 radii.
            let away = Geodesy.inverseSolution(center.0, center.1, position.0, position.1)
            if away.distanceM > 1.3 * radiusM { heading = away.azimuth2Deg + 180 }
            heading += random.uniform(-40, 40)
            let step = Geodesy.direct(position.0, position.1, azimuthDeg: heading, distanceM: radiusM * random.uniform(0.005, 0.08))
            position = (step.latitude, step.longitude)
            let accuracy = random.uniform(0.5, 12)
            engine.observe(Self.fix(position.0, position.1, at: Int64(second), accuracyM: accuracy))
            let location = locate(position.0, position.1)
            let observed = Self.observe(location, accuracyM: accuracy, settings: settings, current: expected)
            let happened = drain(engine)
            if observed != expected && observed != .unknown {
                expected = observed
                try #require(happened.count == 1, "second \(second): \(observed) expected, \(happened.map(\.state)) given")
                let event = happened[0]
                #expect(event.state == observed)
                let signed = location.isInside ? -location.boundaryDistanceM : location.boundaryDistanceM
                // Explained to a centimetre (the bracket's middle, or exact).
                #expect(abs(event.explanation.edgeDistanceM - signed) < 5e-3, "\(event.explanation.edgeDistanceM) against \(signed)")
                // The edge named is a nearest one (at a corner, either of its two).
                let named = edgeDistance(event.explanation.nearestEdge - 1, position.0, position.1)
                #expect(abs(named - edgeDistance(location.nearestEdge, position.0, position.1)) < 5e-3, "edge \(event.explanation.nearestEdge)")
                events += 1
            } else {
                #expect(happened.isEmpty, "second \(second): no change expected (\(expected)), \(happened.map(\.state)) given")
            }
        }
        return events
    }

    @Test func polygonEventsAreTheExactReferences() throws {
        var random = SplitMix64(seed: 360)
        var events = 0
        for index in 0..<12 {
            let radius = [40.0, 400, 5_000][index % 3]
            var center = (random.latitude() * 0.95, random.longitude())
            if index % 4 == 0 { center.1 = 179.9999 }
            if index == 5 { center.0 = 90 }
            let ring = GeoPolygonTests.star(&random, latitude: center.0, longitude: center.1, radiusM: radius, count: 5 + index,
                                            counterclockwise: index % 2 == 0)
            guard let polygon = try? GeoPolygon(latitudes: ring.latitudes, longitudes: ring.longitudes) else { continue }
            let edgeDistance = { (edge: Int, latitude: Double, longitude: Double) -> Double in
                let next = (edge + 1) % polygon.count
                return Geodesy.edgeProximity(latitude, longitude, polygon.latitudes[edge], polygon.longitudes[edge],
                                             polygon.latitudes[next], polygon.longitudes[next]).distanceM
            }
            events += try agreesWithTheExactReference(.polygon(polygon), locate: { polygon.locate(latitude: $0, longitude: $1) }, edgeDistance: edgeDistance,
                                                      around: center, radiusM: radius, seed: UInt64(index))
        }
        #expect(events > 60, "\(events) events")
    }

    @Test func corridorEventsAreTheExactReferences() throws {
        var random = SplitMix64(seed: 361)
        var events = 0
        for index in 0..<8 {
            let (latitudes, longitudes) = GeoCorridorTests.route(&random, antimeridian: index % 4 == 0, legs: 2 + index % 4, lengths: 30...300, turn: 90)
            let corridor = try GeoCorridor(latitudes: latitudes, longitudes: longitudes, widthM: [20.0, 60][index % 2])
            let edgeDistance = { (segment: Int, latitude: Double, longitude: Double) -> Double in
                Geodesy.edgeProximity(latitude, longitude, latitudes[segment], longitudes[segment], latitudes[segment + 1], longitudes[segment + 1]).distanceM
            }
            events += try agreesWithTheExactReference(.corridor(corridor), locate: { corridor.locate(latitude: $0, longitude: $1) }, edgeDistance: edgeDistance,
                                                      around: (latitudes[1], longitudes[1]), radiusM: 200, seed: UInt64(index))
        }
        #expect(events > 40, "\(events) events")
    }

    /// A truck keeping 3 m inside a 30 m corridor's border, its fixes scattered ±5 m (accuracy
    /// 5 m): one satisfied event and no flapping, with the default margins and gate.
    @Test func aTruckHuggingTheBorderDoesNotFlap() throws {
        let start = (51.95, 4.05)
        var latitudes = [start.0], longitudes = [start.1], heading = 80.0
        for _ in 0..<4 {
            let leg = Geodesy.direct(latitudes.last!, longitudes.last!, azimuthDeg: heading, distanceM: 800)
            latitudes.append(leg.latitude)
            longitudes.append(leg.longitude)
            heading = leg.azimuthDeg + 25
        }
        let corridor = try GeoCorridor(latitudes: latitudes, longitudes: longitudes, widthM: 30)
        let engine = MonitorEngine(capacity: .init(conditions: 4, events: 16))
        engine.add(monitor: FixedName("route")!, identifier: FixedName("lane")!, condition: .corridor(corridor), now: Self.t0)
        var random = SplitMix64(seed: 362)
        var states: [ConditionState] = []
        var second: Int64 = 0
        for leg in 0..<4 {
            let edge = Geodesy.inverseSolution(latitudes[leg], longitudes[leg], latitudes[leg + 1], longitudes[leg + 1])
            var along = 20.0
            while along < edge.distanceM - 20 {
                let onPath = Geodesy.direct(latitudes[leg], longitudes[leg], azimuthDeg: edge.azimuth1Deg, distanceM: along)
                // 12 m to the right of the path: 3 m inside the 15 m half width.
                let hugging = Geodesy.direct(onPath.latitude, onPath.longitude, azimuthDeg: onPath.azimuthDeg + 90, distanceM: 12)
                let noisy = Geodesy.direct(hugging.latitude, hugging.longitude, azimuthDeg: random.uniform(-180, 180), distanceM: random.uniform(0, 5))
                second += 1
                engine.observe(Self.fix(noisy.latitude, noisy.longitude, at: second, accuracyM: 5))
                states += drain(engine).map(\.state)
                along += 12
            }
        }
        #expect(second > 200)
        #expect(states == [.satisfied], "\(states)")
    }

    /// Transit between sparse fixes: a path across a polygon (or a corridor) between two
    /// outside fixes gives a satisfied/unsatisfied pair at the times the path crosses the
    /// boundary; a path through a concave notch, outside all along, gives nothing.
    @Test func transitAcrossShapesBetweenSparseFixes() throws {
        // A U: 300 m wide, its notch 100 m wide and 200 m deep, open to the north.
        let south = 52.0, west = 5.0
        let dLat = 1 / 111_250.0, dLon = 1 / (111_250.0 * LibM.cos(52 * Double.pi / 180))
        func at(_ north: Double, _ east: Double) -> (Double, Double) { (south + north * dLat, west + east * dLon) }
        let corners = [at(0, 0), at(0, 300), at(300, 300), at(300, 200), at(100, 200), at(100, 100), at(300, 100), at(300, 0)]
        let u = try GeoPolygon(latitudes: corners.map(\.0), longitudes: corners.map(\.1))
        let lane = try GeoCorridor(latitudes: [at(-200, 500).0, at(500, 500).0], longitudes: [at(-200, 500).1, at(500, 500).1], widthM: 40)
        var settings = ConditionSettings()
        settings.transit = true
        let engine = MonitorEngine(capacity: .init(conditions: 4, events: 16))
        engine.add(monitor: FixedName("m")!, identifier: FixedName("u")!, condition: .polygon(u), settings: settings, assuming: .unsatisfied, now: Self.t0)
        engine.add(monitor: FixedName("m")!, identifier: FixedName("lane")!, condition: .corridor(lane), settings: settings, assuming: .unsatisfied, now: Self.t0)
        // West to east at 200 m north: across the U's left arm, the notch, its right arm, then the
        // lane (a transit is entry to last exit: the notch inside it is not a second pair).
        let from = at(200, -50), to = at(200, 600)
        engine.observe(Self.fix(from.0, from.1, at: 0, accuracyM: 3))
        engine.observe(Self.fix(to.0, to.1, at: 100, accuracyM: 3))
        // Each condition's pair is emitted together: in time order, the U's arms, then the lane.
        let events = drain(engine).sorted { $0.date.totalNanoseconds < $1.date.totalNanoseconds }
        #expect(events.map { "\($0.identifier) \($0.state)" } == ["u satisfied", "u unsatisfied", "lane satisfied", "lane unsatisfied"])
        // The times are where the path crosses the boundaries: 50 m, 350 m, 530 m and 570 m of 650 m.
        let seconds = events.map { Double($0.date.totalNanoseconds - Self.t0.totalNanoseconds) / 1e9 }
        for (second, metres) in zip(seconds, [50.0, 350, 530, 570]) {
            #expect(abs(second - metres / 650 * 100) < 0.05, "\(seconds)")
        }
        #expect(events.allSatisfy { $0.explanation.source == .transit && $0.explanation.edgeDistanceM < 0 })
        // Through the notch only (north to south at 150 m east, from 350 m to 150 m north): outside all along.
        let notch = MonitorEngine(capacity: .init(conditions: 4, events: 16))
        notch.add(monitor: FixedName("m")!, identifier: FixedName("u")!, condition: .polygon(u), settings: settings, assuming: .unsatisfied, now: Self.t0)
        let notchFrom = at(350, 150), notchTo = at(150, 150)
        notch.observe(Self.fix(notchFrom.0, notchFrom.1, at: 200, accuracyM: 3))
        notch.observe(Self.fix(notchTo.0, notchTo.1, at: 260, accuracyM: 3))
        #expect(drain(notch).isEmpty)
    }

    @Test func observingShapesAllocatesNothing() throws {
        var random = SplitMix64(seed: 363)
        let engine = MonitorEngine(capacity: .init(conditions: 64, events: 256, vertices: 2_000))
        var fixes: [Fix] = []
        for index in 0..<40 {
            let center = (40 + random.uniform(0, 0.1), 8 + random.uniform(0, 0.1))
            let ring = GeoPolygonTests.star(&random, latitude: center.0, longitude: center.1, radiusM: 300, count: 20, counterclockwise: true)
            let polygon = try GeoPolygon(latitudes: ring.latitudes, longitudes: ring.longitudes)
            engine.add(monitor: FixedName("m")!, identifier: FixedName("p\(index)")!, condition: .polygon(polygon), now: Self.t0)
            fixes.append(Self.fix(center.0, center.1, at: Int64(index + 1), accuracyM: 3))
            fixes.append(Self.fix(ring.latitudes[0], ring.longitudes[0], at: Int64(index + 1), accuracyM: 3))
        }
        _ = engine.nearestFenceEdgeM(latitude: 40.05, longitude: 8.05)
        let count = allocations {
            for position in 0..<fixes.count { // an index loop: `for in` allocates in debug builds
                engine.observe(fixes[position])
                _ = engine.nearestFenceEdgeM(latitude: fixes[position].latitude!, longitude: fixes[position].longitude!)
            }
        }
        #expect(count == 0)
        #expect(engine.hasPendingEvent())
    }

    @Test func theNearestFenceEdgeCountsShapes() throws {
        let engine = MonitorEngine(capacity: .init(conditions: 8, events: 16))
        let polygon = try GeoPolygon(latitudes: [45, 45, 45.01, 45.01], longitudes: [7, 7.01, 7.01, 7])
        engine.add(monitor: FixedName("m")!, identifier: FixedName("yard")!, condition: .polygon(polygon), now: Self.t0)
        engine.add(monitor: FixedName("m")!, identifier: FixedName("far")!,
                   condition: .circle(CircularGeographicCondition(latitude: 46, longitude: 7, radiusM: 100)), now: Self.t0)
        for (latitude, longitude) in [(45.005, 7.005), (45.0001, 7.005), (44.99, 7.02), (45.3, 7.3)] {
            let exact = polygon.locate(latitude: latitude, longitude: longitude).boundaryDistanceM
            let circle = Geodesy.distanceM(latitude, longitude, 46, 7) - 100
            let nearest = try #require(engine.nearestFenceEdgeM(latitude: latitude, longitude: longitude))
            #expect(abs(nearest - min(exact, circle)) < 1e-6, "\(nearest) against \(exact), \(circle)")
        }
    }

    // MARK: - The site file

    static func siteErrors(_ conditions: String, capacity: String = "") -> [String] {
        let text = "board = \"b\"\n\(capacity)\n[[monitor.yard.condition]]\nid = \"c\"\n\(conditions)\n"
        do {
            _ = try SiteConfig.parse(Array(text.utf8), file: "site.toml")
            return []
        } catch {
            return error.diagnostics.map { $0.description }
        }
    }

    @Test func theSiteFileTakesPolygonsAndCorridors() throws {
        let text = """
        board = "b"
        [[monitor.yard.condition]]
        id = "quay"
        polygon = [[51.9500, 4.0500], [51.9500, 4.0600], [51.9560, 4.0600], [51.9560, 4.0500], [51.9500, 4.0500]]
        exit_margin = 10
        [[monitor.yard.condition]]
        id = "lane"
        corridor = { path = [[51.95, 4.05], [51.96, 4.07]], width = "30 m" }
        dwell = "5s"
        """
        let site = try SiteConfig.parse(Array(text.utf8), file: "site.toml")
        let conditions = site.monitors[0].conditions
        guard case .polygon(let polygon) = conditions[0].kind, case .corridor(let corridor) = conditions[1].kind else {
            Issue.record("\(conditions.map(\.kind))")
            return
        }
        #expect(polygon.count == 4 && conditions[0].exitMarginM == 10)
        #expect(corridor.widthM == 30 && corridor.latitudes == [51.95, 51.96] && conditions[1].dwellMs == 5_000)
        #expect(site.vertexCount == 6)
        let engine = MonitorEngine(capacity: .init(conditions: 8, events: 8, vertices: site.capacity.vertices))
        #expect(EngineSetup.addConfigured(site, to: engine, now: Self.t0).isEmpty)
        // On the lane's path inside the quay: the quay at once, the lane after its 5 s dwell.
        engine.observe(Self.fix(51.9525, 4.055, at: 1, accuracyM: 2))
        #expect(drain(engine).map(\.identifier.description) == ["quay"])
        engine.observe(Self.fix(51.9525, 4.0551, at: 6, accuracyM: 2))
        #expect(drain(engine).map(\.identifier.description) == ["lane"])
    }

    @Test func badShapesAreRefusedWhereTheyAreWritten() {
        #expect(Self.siteErrors("polygon = [[45, 7], [45.001, 7.001], [45.001, 7], [45, 7.001]]")
            == ["site.toml:5:12: 'monitor.yard.condition[1].polygon': the edge from vertex 1 crosses the edge from vertex 3: the ring must not cross or touch itself"])
        #expect(Self.siteErrors("polygon = [[45, 7], [45.001, 7]]")
            == ["site.toml:5:11: 'monitor.yard.condition[1].polygon': a polygon needs at least 3 distinct vertices, not 2"])
        #expect(Self.siteErrors("polygon = [[45, 7], [45.001, 7], [91, 7]]")
            == ["site.toml:5:34: 'monitor.yard.condition[1].polygon' element 3 = [91.0, 7.0] is not a position (latitude within ±90, longitude within ±180)"])
        #expect(Self.siteErrors("polygon = [[45, 7], [45.001], [45, 7.1]]")
            == ["site.toml:5:21: 'monitor.yard.condition[1].polygon' element 2 must be a [lat, lon] pair"])
        #expect(Self.siteErrors("corridor = { path = [[45, 7], [45.001, 7]], width = 0 }")
            == ["site.toml:5:53: 'monitor.yard.condition[1].corridor.width' must be greater than 0 metres"])
        #expect(Self.siteErrors("corridor = { path = [[45, 7], [45, 7]], width = 10 }")
            == ["site.toml:5:31: 'monitor.yard.condition[1].corridor.path': point 2 repeats the one before it"])
        #expect(Self.siteErrors("polygon = [[45, 7], [45.001, 7], [45, 7.001]]\ncircle = { lat = 45, lon = 7, radius = 5 }")
            == ["site.toml:3:1: a condition is one of 'circle', 'beacon', 'phone', 'polygon' or 'corridor', not several"])
        #expect(Self.siteErrors("polygon = [[45, 7], [45.001, 7], [45, 7.001]]\nproximity = \"near\"")
            == ["site.toml:6:13: 'monitor.yard.condition[1].proximity' applies to beacon conditions, but this one is a polygon"])
        #expect(Self.siteErrors("polygon = [[45, 7], [45.001, 7], [45, 7.001], [44.999, 7.0005]]", capacity: "[capacity]\nvertices = 3")
            .first?.hasSuffix("the polygons and corridors have 4 vertices, more than capacity.vertices = 3; raise it (120 bytes a vertex)") == true)
    }

    /// GeoJSON (longitude first) and WKT (and Traccar's latitude-first WKT and CIRCLE) become
    /// site-file entries that read back as the same conditions; what cannot is named.
    @Test func importedShapesReadBackAsTheSiteFileReadsThem() throws {
        let geoJSON = """
        {"type":"FeatureCollection","features":[
         {"type":"Feature","properties":{"name":"Quay 3"},"geometry":{"type":"Polygon","coordinates":[[[4.05,51.95],[4.06,51.95],[4.06,51.956],[4.05,51.956],[4.05,51.95]]]}},
         {"type":"Feature","id":"lane","properties":{"width":30},"geometry":{"type":"LineString","coordinates":[[4.05,51.95,2.5],[4.07,51.96,2.5]]}},
         {"type":"Feature","properties":{"name":"Gate","radius":25},"geometry":{"type":"Point","coordinates":[4.055,51.953]}},
         {"type":"Feature","properties":{"name":"Holed"},"geometry":{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1],[0,0]],[[0.2,0.2],[0.3,0.2],[0.3,0.3],[0.2,0.2]]]}},
         {"type":"Feature","properties":{"name":"Bow"},"geometry":{"type":"Polygon","coordinates":[[[7,45],[7.001,45.001],[7,45.001],[7.001,45],[7,45]]]}},
         {"type":"Feature","properties":{"name":"Road"},"geometry":{"type":"LineString","coordinates":[[7,45],[7.01,45]]}}
        ]}
        """
        let result = ShapeImport.read(Array(geoJSON.utf8), options: .init())
        #expect(result.shapes.map(\.identifier) == ["Quay-3", "lane", "Gate"])
        #expect(result.problems == [
            "feature 4 'Holed': has 1 hole; Locus polygons have none (inside a hole would count as inside): remove or split it in the GIS",
            "feature 5 'Bow': the edge from vertex 1 crosses the edge from vertex 3: the ring must not cross or touch itself",
            "feature 6 'Road': a line becomes a corridor, which needs a width: give the feature a \"width\" property (metres) or --width"])
        let text = "board = \"b\"\n" + ShapeImport.toml(result.shapes, monitor: "yard")
        let site = try SiteConfig.parse(Array(text.utf8), file: "imported.toml")
        let read = site.monitors[0].conditions.map { EngineSetup.condition($0) }
        #expect(read == result.shapes.map(\.condition))
        guard case .polygon(let quay) = read[0], case .corridor(let lane) = read[1] else { return }
        #expect(quay.latitudes == [51.95, 51.95, 51.956, 51.956] && quay.longitudes == [4.05, 4.06, 4.06, 4.05])
        #expect(lane.widthM == 30 && lane.latitudes == [51.95, 51.96])

        let wkt = "POLYGON ((4.05 51.95, 4.06 51.95, 4.06 51.956, 4.05 51.95))\nMULTILINESTRING ((4.05 51.95, 4.07 51.96), (4.1 52, 4.2 52))\nPOINT (1 2)\n"
        let fromWKT = ShapeImport.read(Array(wkt.utf8), options: .init(widthM: 12))
        #expect(fromWKT.shapes.count == 3 && fromWKT.problems == ["geometry 3: a POINT is not a shape Locus monitors"])
        let traccar = ShapeImport.read(Array("POLYGON((51.95 4.05, 51.95 4.06, 51.956 4.06))\nCIRCLE (51.95 4.05, 100)".utf8), options: .init(latitudeFirst: true))
        #expect(traccar.shapes.map(\.condition) == [.polygon(quay.dropLast()), .circle(CircularGeographicCondition(latitude: 51.95, longitude: 4.05, radiusM: 100))])
    }

    @Test func shapesSurviveTheLog() throws {
        let polygon = try GeoPolygon(latitudes: [-16.5, -16.4, -16.45], longitudes: [179.9, -179.95, 179.8])
        let corridor = try GeoCorridor(latitudes: [0, 0.1, 0.2], longitudes: [10, 10.1, 10], widthM: 25.5)
        for condition in [Condition.polygon(polygon), .corridor(corridor)] {
            let entry = LogPayload.ConditionEntry(monitor: FixedName("m")!, identifier: FixedName("c")!, condition: condition,
                                                  settings: ConditionSettings(), assuming: .unknown, fromSiteFile: false)
            #expect(throughTheLog(entry) == entry)
        }
    }
}

/// A condition's log payload written in a buffer of `LogPayload.conditionSize` and read back
/// (nil when the buffer was too small).
func throughTheLog(_ entry: LogPayload.ConditionEntry) -> LogPayload.ConditionEntry? {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: LogPayload.conditionSize(entry.condition), alignment: 8)
    defer { buffer.deallocate() }
    var writer = ByteWriter(buffer)
    LogPayload.write(entry, &writer)
    guard !writer.overflow else { return nil }
    var reader = ByteReader(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[0..<writer.count]))
    return LogPayload.readCondition(&reader)
}
