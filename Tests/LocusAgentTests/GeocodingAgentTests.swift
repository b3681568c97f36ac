import AllocCounter
import Foundation
@testable import LocusAgent
import LocusCore
import Testing

/// Geocoding in the agent, on an index built from Tests/Fixtures/geocoding with `locus geo index`:
/// `[geocoding]` and circles centred on places in `check-config` and at start, annotated events,
/// records, live updates and log exports, the control operations, `geo --config`, and a loop
/// turn with annotation that allocates nothing.
@Suite(.serialized) struct GeocodingAgentTests {
    typealias E2E = AgentEndToEndTests
    static let fixtures = repositoryRoot + "/Tests/Fixtures/geocoding/"

    /// The fixtures' index (10 GeoNames places, 3 of the site's), built once per test process.
    static let fixtureIndex: Result<String, LocusBinaryMissing> = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locus-geo-fixture-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/places.idx"
        guard let run = try? locus(["geo", "index", fixtures + "cities.txt", fixtures + "admin1.txt", fixtures + "site-places.tsv", "-o", path]),
              run.status == 0 else { return .failure(LocusBinaryMissing()) }
        return .success(path)
    }()

    static func index() throws -> String { try fixtureIndex.get() }

    static func geocoding(_ index: String, annotate: Bool = true) -> String {
        "\n[geocoding]\nindex = \"\(index)\"\nannotate = \(annotate)\nmax_distance = \"5 km\"\n"
    }

    static func placeCondition(_ id: String, _ place: String, radius: Int = 30) -> String {
        "\n[[monitor.yard.condition]]\nid = \"\(id)\"\ncircle = { place = \"\(place)\", radius = \(radius) }\n"
    }

    /// "FILE:LINE:COL" of the first occurrence of `text` in the file (1-based, as diagnostics say).
    static func location(of text: String, in path: String) throws -> String {
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        for (number, line) in lines.enumerated() {
            if let range = line.range(of: text) { return "\(path):\(number + 1):\(line.distance(from: line.startIndex, to: range.lowerBound) + 1)" }
        }
        throw E2E.WaitTimedOut(what: "\(text) in \(path)")
    }

    // MARK: the configuration

    @Test func checkConfigOpensTheIndexAndShowsEachPlacesCentre() throws {
        let index = try Self.index()
        let site = try E2E.site("geo-check", extra: Self.geocoding(index) + Self.placeCondition("gate", "Depot gate")
                                + Self.placeCondition("paris", "Paris, Texas", radius: 5000))
        let run = try locus(["check-config", site.sitePath])
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output.contains("\nplaces: \(index): 13 places (3 the site's); events annotated within 5 km (any place)\n"), "\(run.output)")
        #expect(run.output.contains("\nyard/gate: \"Depot gate\" is Depot gate at 45.0018000, 7.0000000 (radius 30 m)\n"), "\(run.output)")
        #expect(run.output.contains("\nyard/paris: \"Paris, Texas\" is Paris, Texas, US at 33.6609400, -95.5555100 (radius 5 km)\n"))
    }

    @Test func aPlaceThatIsNotThereOrIsNotOneIsAnErrorAtItsName() throws {
        let index = try Self.index()
        let site = try E2E.site("geo-names", extra: Self.geocoding(index) + Self.placeCondition("typo", "Depot gte")
                                + Self.placeCondition("paris", "Paris", radius: 5000) + Self.placeCondition("spring", "Springfield, US"))
        let run = try locus(["check-config", site.sitePath])
        #expect(run.status == 1 && run.output.isEmpty)
        let typo = try Self.location(of: "\"Depot gte\"", in: site.sitePath)
        let paris = try Self.location(of: "\"Paris\"", in: site.sitePath)
        let spring = try Self.location(of: "\"Springfield, US\"", in: site.sitePath)
        let conditions = (run.error.components(separatedBy: "condition[").count - 1)
        #expect(conditions == 3, "\(run.error)")
        #expect(run.error.contains("\(typo): 'monitor.yard.condition[1].circle.place' = \"Depot gte\" is no place in \(index) (did you mean \"Depot gate\"?)\n"),
                "\(run.error)")
        #expect(run.error.contains("\(paris): 'monitor.yard.condition[2].circle.place' = \"Paris\" names 3 places: Paris, Ile-de-France, FR (population 2138551); Parys, Orange Free State, ZA (population 71319); Paris, Texas, US (population 24782); qualify it with a country code or an administrative area: \"Paris, FR\" or \"Paris, Texas\"\n"),
                "\(run.error)")
        #expect(run.error.contains("\(spring): 'monitor.yard.condition[3].circle.place' = \"Springfield, US\" names 3 places: Springfield, Missouri, US"),
                "\(run.error)")
    }

    /// An index that cannot be used fails check-config and the start with one line: where it is
    /// named, the file, and the reason.
    @Test func anIndexThatCannotBeUsedFailsCheckConfigAndTheStart() throws {
        let good = try Data(contentsOf: URL(fileURLWithPath: try Self.index()))
        let site = try E2E.site("geo-refused", extra: Self.geocoding("places.idx"))
        let path = site.directory + "/places.idx"
        func check() throws -> LocusRun { try locus(["check-config", site.sitePath]) }
        let at = try Self.location(of: "\"places.idx\"", in: site.sitePath)
        var run = try check()
        #expect(run.status == 1 && run.error == "\(at): place index \(path): cannot open it: No such file or directory (build one with 'locus geo index')\n",
                "\(run.error)")
        var damaged = good
        damaged[damaged.count - 3] ^= 0x20
        try damaged.write(to: URL(fileURLWithPath: path))
        run = try check()
        #expect(run.error == "\(at): place index \(path): checksum mismatch: the file is corrupt (rebuild or copy it again)\n", "\(run.error)")
        try good.prefix(1000).write(to: URL(fileURLWithPath: path))
        run = try check()
        #expect(run.error == "\(at): place index \(path): truncated: 1000 of \(good.count) bytes\n", "\(run.error)")
        try Data("geonameid\tname\n".utf8).write(to: URL(fileURLWithPath: path))
        run = try check()
        #expect(run.error == "\(at): place index \(path): not a Locus place index (build one with `locus geo index`)\n", "\(run.error)")
        // The agent does not start on it.
        let start = try locus(["run", "--config", site.sitePath, "--state", site.state])
        #expect(start.status != 0 && start.error.contains("\(at): place index \(path): not a Locus place index"), "\(start.error)")
        #expect(!FileManager.default.fileExists(atPath: site.state + "/control.sock"))
        // Without [geocoding], a circle centred on a place needs the installed index.
        let bare = try E2E.site("geo-bare", extra: Self.placeCondition("gate", "Depot gate"))
        run = try locus(["check-config", bare.sitePath])
        let place = try Self.location(of: "\"Depot gate\"", in: bare.sitePath)
        #expect(run.error.hasPrefix("\(place): place index /usr/share/locus/places.idx: cannot open it: "), "\(run.error)")
    }

    // MARK: annotation

    /// The simulated track passes the fence, centred on the site's "Depot gate": subscribers,
    /// streams, records and the agent's own event lines name it; the log itself holds no place,
    /// and an export names it only with the site's `--config`.
    @Test func eventsRecordsUpdatesAndExportsCarryThePlace() throws {
        let index = try Self.index()
        let site = try E2E.site("geo-annotate", extra: Self.geocoding(index))
        let agent = try E2E.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let subscriber = try E2E.Connection(site.state + "/read.sock")
        #expect(subscriber.request(#"{"id":1,"op":"subscribe","monitor":"road","after_seq":0}"#)?["ok"] as? Bool == true)
        let stream = try E2E.Connection(site.state + "/read.sock")
        #expect(stream.request(#"{"id":1,"op":"updates"}"#)?["ok"] as? Bool == true)
        let feeder = try E2E.feed(site, nmea: syntheticTrack(seconds: 30, startLatitude: 45.0, longitude: 7.0, speedMps: 10), hci: nil)
        var events: [[String: Any]] = []
        while events.count < 3, let line = subscriber.next() {
            if let event = line["event"] as? [String: Any] { events.append(event) }
        }
        feeder.waitUntilExit()
        #expect(events.count == 3, "\(events)")
        for event in events {
            let place = try #require(event["place"] as? [String: Any], "\(event)")
            #expect(place["name"] as? String == "Depot gate" && place["site"] as? Bool == true)
            #expect((place["text"] as? String)?.hasSuffix(" of Depot gate") == true || place["text"] as? String == "at Depot gate", "\(place)")
        }
        var updates: [[String: Any]] = []
        while updates.count < 5, let line = stream.next() { if let update = line["update"] as? [String: Any] { updates.append(update) } }
        // Every update with a position names its place (one before the first fix has neither).
        let placed = updates.filter { $0["lat"] != nil }
        #expect(placed.count >= 4 && placed.allSatisfy { ($0["place"] as? [String: Any])?["name"] as? String == "Depot gate" }, "\(updates)")
        #expect(updates.filter { $0["lat"] == nil }.allSatisfy { $0["place"] == nil })
        let record = try #require(try E2E.Connection(site.state + "/read.sock")
            .request(#"{"id":2,"op":"record","monitor":"road","identifier":"fence"}"#)?["record"] as? [String: Any])
        #expect(((record["lastEvent"] as? [String: Any])?["place"] as? [String: Any])?["name"] as? String == "Depot gate", "\(record)")
        try E2E.waitFor("the agent's event line", seconds: 5) { agent.log.contains(" of Depot gate\n") || agent.log.contains("at Depot gate\n") }
        // The log holds coordinates, not places; the export computes them with the site's index.
        let plain = try locus(["log", "export", "--state", site.state])
        #expect(plain.status == 0 && plain.output.contains("\"type\":\"event\"") && !plain.output.contains("\"place\""))
        let annotated = try locus(["log", "export", "--config", site.sitePath, "--state", site.state])
        let lines = annotated.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let loggedEvents = lines.compactMap { $0["event"] as? [String: Any] }
        let ofFixes = loggedEvents.filter { ($0["explain"] as? [String: Any])?["source"] as? String == "fix" }
        #expect(ofFixes.count >= 3 && ofFixes.allSatisfy { $0["place"] != nil }, "\(annotated.output.suffix(600))")
        #expect(loggedEvents.filter { ($0["explain"] as? [String: Any])?["source"] as? String != "fix" }.allSatisfy { $0["place"] == nil })
        #expect(lines.filter { $0["type"] as? String == "fix" }.allSatisfy { $0["place"] != nil })
        let eventsCommand = try locus(["events", "--config", site.sitePath, "--state", site.state])
        #expect(eventsCommand.output.contains("\"place\":{\"name\":\"Depot gate\""), "\(eventsCommand.error)")
        #expect(!(try locus(["events", "--state", site.state])).output.contains("\"place\""))
    }

    // MARK: the control operations

    @Test func reverseGeocodeGeocodeAndAddWithAPlace() throws {
        let index = try Self.index()
        let site = try E2E.site("geo-ops", extra: Self.geocoding(index, annotate: false))
        let agent = try E2E.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let reader = try E2E.Connection(site.state + "/read.sock")
        let near = try #require(reader.request(#"{"id":1,"op":"reverse_geocode","latitude":45.0016,"longitude":7.0003}"#))
        let place = try #require(near["place"] as? [String: Any], "\(near)")
        #expect(near["id"] as? Int == 1 && place["name"] as? String == "Depot gate" && place["text"] as? String == "32 m SE of Depot gate")
        // Within the site's 5 km, nothing; asked for further among populated places, Moncalieri.
        #expect(reader.request(#"{"id":2,"op":"reverse_geocode","latitude":45.2,"longitude":7.3}"#)?["place"] is NSNull)
        let far = try #require(reader.request(#"{"id":3,"op":"reverse_geocode","latitude":45.0016,"longitude":7.0003,"within":100000,"scope":"populated"}"#))
        #expect((far["place"] as? [String: Any])?["name"] as? String == "Moncalieri", "\(far)")
        let springfields = try #require(reader.request(#"{"id":4,"op":"geocode","name":"Springfield, US"}"#))
        #expect(springfields["total"] as? Int == 3)
        #expect((springfields["places"] as? [[String: Any]])?.map { $0["admin1"] as? String ?? "" } == ["Missouri", "Massachusetts", "Illinois"])
        let one = try #require(reader.request(#"{"id":5,"op":"geocode","name":"Paris","limit":1}"#))
        #expect(one["total"] as? Int == 3 && (one["places"] as? [[String: Any]])?.count == 1)
        let none = try #require(reader.request(#"{"id":6,"op":"geocode","name":"Atlantis"}"#))
        #expect(none["ok"] as? Bool == true && none["total"] as? Int == 0 && (none["places"] as? [Any])?.isEmpty == true)

        // Adding a circle around a place: one place, or the reason.
        let control = try E2E.Connection(site.state + "/control.sock")
        let added = try #require(control.request(#"{"id":7,"op":"add","monitor":"yard","identifier":"dock","circle":{"place":"container dock","radius":40}}"#))
        #expect(added["result"] as? String == "added", "\(added)")
        let record = try #require(control.request(#"{"id":8,"op":"record","monitor":"yard","identifier":"dock"}"#)?["record"] as? [String: Any])
        let condition = try #require(record["condition"] as? [String: Any])
        #expect(condition["lat"] as? Double == 45.003 && condition["lon"] as? Double == 7.001 && condition["radius"] as? Double == 40)
        let typo = try #require(control.request(#"{"id":9,"op":"add","monitor":"yard","identifier":"x","circle":{"place":"Dok 3","radius":40}}"#))
        let typoError = try #require(typo["error"] as? [String: Any])
        #expect(typoError["code"] as? String == "not_found")
        #expect(typoError["message"] as? String == "'circle.place' \"Dok 3\" is no place in \(index) (did you mean \"Dock 3\"?)")
        let paris = try #require(control.request(#"{"id":10,"op":"add","monitor":"yard","identifier":"x","circle":{"place":"Paris","radius":40}}"#))
        let parisError = try #require(paris["error"] as? [String: Any])
        #expect(parisError["code"] as? String == "bad_argument" && (parisError["message"] as? String)?.contains("names 3 places") == true)
    }

    @Test func withoutAnIndexTheOperationsSaySo() throws {
        let site = try E2E.site("geo-none")
        let agent = try E2E.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let control = try E2E.Connection(site.state + "/control.sock")
        for (id, request) in [#""op":"reverse_geocode","latitude":1,"longitude":2"#, #""op":"geocode","name":"Paris""#,
                              #""op":"add","monitor":"m","identifier":"i","circle":{"place":"Dock 3","radius":5}"#].enumerated() {
            let reply = try #require(control.request("{\"id\":\(id),\(request)}"))
            let error = try #require(reply["error"] as? [String: Any], "\(reply)")
            #expect(reply["ok"] as? Bool == false && error["code"] as? String == "unavailable")
            #expect(error["message"] as? String == "no place index: add [geocoding] to the site file")
        }
    }

    // MARK: the command line

    @Test func geoReverseAndForwardTakeTheSitesIndex() throws {
        let index = try Self.index()
        let site = try E2E.site("geo-config", extra: Self.geocoding(index) + "scope = \"populated\"\n")
        // The site's max_distance (5 km) and scope (populated): nothing near the depot...
        let near = try locus(["geo", "reverse", "45.0016", "7.0003", "--config", site.sitePath])
        #expect(near.status == 1 && near.output == "no place within 5000 m\n", "\(near.output)\(near.error)")
        // ...unless the command line says otherwise.
        let wider = try locus(["geo", "reverse", "45.0016", "7.0003", "--config", site.sitePath, "--within", "100000"])
        #expect(wider.status == 0 && wider.output == "54 km W of Moncalieri, Piedmont, IT\n", "\(wider.output)\(wider.error)")
        let forward = try locus(["geo", "forward", "Springfield, Illinois", "--config", site.sitePath])
        #expect(forward.status == 0 && forward.output.hasPrefix("Springfield, Illinois, US  39.8017200 -89.6437100"), "\(forward.output)")
        let both = try locus(["geo", "forward", "Paris", "--config", site.sitePath, "--index", index])
        #expect(both.status == 2 && both.error.contains("give --index or --config, not both"))
        let bare = try E2E.site("geo-config-bare")
        let without = try locus(["geo", "info", "--config", bare.sitePath])
        #expect(without.status == 1 && without.error == "locus: geo: \(bare.sitePath) has no [geocoding] section (give --index FILE)\n")
    }

    // MARK: the loop's allocations

    /// One NMEA epoch (RMC and GGA) of second `second`, alternately 80 m and 120 m north of the
    /// benchmark's 100 m fence centred on 45.0 N, 7.0 E: an event every turn.
    static func fenceEpoch(_ second: Int) -> [UInt8] {
        func checksummed(_ body: String) -> String {
            var checksum: UInt8 = 0
            for byte in body.utf8.dropFirst() { checksum ^= byte }
            return body + String(format: "*%02X\r\n", checksum)
        }
        let time = String(format: "10%02d%02d.00", (second / 60) % 60, second % 60)
        let lat = String(format: "45%010.7f,N", (second % 2 == 0 ? 80.0 : 120.0) / 111_132.0 * 60)
        return Array((checksummed("$GPRMC,\(time),A,\(lat),00700.0000000,E,0.0,0.0,150324,,,A")
            + checksummed("$GPGGA,\(time),\(lat),00700.0000000,E,1,09,0.8,20.0,M,-30.0,M,,")).utf8)
    }

    /// A loop turn with a fix and an event while annotating (the event's log line, the
    /// subscriber's event and the stream's update each name the place) allocates nothing.
    @Test func aTurnWithAnnotationAllocatesNothing() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locus-geo-turn-\(getpid())").path
        try? FileManager.default.removeItem(atPath: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        unsetenv("WATCHDOG_USEC")
        let bench = try #require(AgentBenchmark(directory: directory, placeIndex: try Self.index()))
        #expect(bench.connect())
        bench.send(#"{"id":1,"op":"subscribe"}"#)
        bench.send(#"{"id":2,"op":"updates"}"#)
        let epoch = Self.fenceEpoch
        for second in 0..<20 {
            bench.write(epoch(second))
            bench.turn()
        }
        let warmUp = bench.replies(timeoutMs: 50).map { String(decoding: $0, as: UTF8.self) }
        #expect(warmUp.contains { $0.hasPrefix("{\"event\":") && $0.contains("\"place\":{\"name\":\"Depot gate\"") }, "\(warmUp.suffix(3))")
        #expect(warmUp.contains { $0.hasPrefix("{\"update\":") && $0.contains("\"place\":{") }, "\(warmUp.suffix(3))")
        let events = bench.events
        var counted = 0
        for second in 20..<60 {
            bench.write(epoch(second))
            counted += allocations { bench.turn() }
            _ = bench.replies()
        }
        #expect(bench.events - events == 40, "an event every turn")
        #expect(counted == 0, "\(counted) allocations in 40 turns")
    }
}
