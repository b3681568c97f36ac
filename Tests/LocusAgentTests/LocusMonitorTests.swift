import Foundation
import LocusMonitor
import Testing

/// The `LocusMonitor` library against a real `locus run` on the simulated board.
@Suite(.serialized) struct LocusMonitorTests {
    @Test func theSeedsCallsWorkAgainstARunningAgent() async throws {
        let site = try AgentEndToEndTests.site("library")
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }

        var monitor: Monitor? = try await Monitor("road", stateDirectory: site.state)
        let first = monitor!
        // A test that waits for events must end even if none come.
        let watchdog = Task { try await Task.sleep(for: .seconds(60)); await first.close() }
        defer { watchdog.cancel() }
        try await monitor!.add(CircularGeographicCondition(center: Coordinate(latitude: 45.05, longitude: 7.0), radius: 100),
                               identifier: "depot", assuming: .unsatisfied)
        try await monitor!.add(BeaconIdentityCondition(uuid: UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!, major: 7),
                               identifier: "dock")
        #expect(await monitor!.identifiers == ["depot", "dock", "fence"])
        let depot = try #require(await monitor!.record(for: "depot"))
        #expect(depot.lastEvent.state == .unsatisfied)
        #expect((depot.condition as? CircularGeographicCondition)?.radius == 100)
        #expect(((await monitor!.record(for: "dock"))?.condition as? BeaconIdentityCondition)?.major == 7)
        await #expect(throws: MonitorError.self) { try await Monitor("road", stateDirectory: site.state) }
        try await monitor!.remove("dock")
        #expect(await monitor!.identifiers == ["depot", "fence"])

        let feeder = try AgentEndToEndTests.feed(site, nmea: syntheticTrack(seconds: 30, startLatitude: 45.0, longitude: 7.0, speedMps: 10), hci: nil)
        // Take one event, then stop iterating and release the monitor.
        var taken: [String] = []
        var takenDate = Date.distantPast
        // The dock, unseen, may have been decided before its removal on a loaded machine (its exit
        // timeout is 3 s): that event was logged and comes too. The fence's are the ones looked at.
        for try await event in monitor!.events where event.identifier != "dock" {
            taken.append("\(event.identifier) \(event.state)")
            takenDate = event.date
            break
        }
        #expect(taken == ["fence unsatisfied"])
        await monitor!.close()
        monitor = nil
        feeder.waitUntilExit()
        try AgentEndToEndTests.waitFor("the fence to be left", seconds: 10) {
            AgentEndToEndTests.events(try AgentEndToEndTests.records(site.state)).filter { $0.name == "road/fence" }.count >= 3
        }
        // Opened again: what was not taken, in order, and nothing twice.
        let again = try await Monitor("road", stateDirectory: site.state)
        let againWatchdog = Task { try await Task.sleep(for: .seconds(60)); await again.close() }
        defer { againWatchdog.cancel() }
        // CLMonitor's rule: the record's lastEvent is the last event taken, not the agent's newest.
        let before = try #require(await again.record(for: "fence"))
        #expect(before.lastEvent.date == takenDate && before.lastEvent.state == .unsatisfied, "\(before.lastEvent)")
        var rest: [String] = []
        var lastDate = Date.distantPast
        for try await event in again.events where event.identifier != "dock" {
            rest.append("\(event.identifier) \(event.state)")
            lastDate = event.date
            if rest.count == 2 { break }
        }
        #expect(rest == ["fence satisfied", "fence unsatisfied"])
        let after = try #require(await again.record(for: "fence"))
        #expect(after.lastEvent.date == lastDate && lastDate > takenDate, "taken: the record moves on")
    }

    /// Polygons and corridors through the library: added, read back from the records, decided
    /// on the fed track; a ring that crosses itself refused with the agent's words.
    @Test func polygonAndCorridorConditionsThroughTheLibrary() async throws {
        let site = try AgentEndToEndTests.site("shapes")
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let monitor = try await Monitor("yard", stateDirectory: site.state)
        let watchdog = Task { try await Task.sleep(for: .seconds(60)); await monitor.close() }
        defer { watchdog.cancel() }
        let quay = PolygonCondition(vertices: [Coordinate(latitude: 45.0009, longitude: 6.9995), Coordinate(latitude: 45.0009, longitude: 7.0005),
                                               Coordinate(latitude: 45.0018, longitude: 7.0005), Coordinate(latitude: 45.0018, longitude: 6.9995)])
        let lane = CorridorCondition(path: [Coordinate(latitude: 44.9995, longitude: 7.0), Coordinate(latitude: 45.003, longitude: 7.0)], width: 20)
        try await monitor.add(quay, identifier: "quay", assuming: .unsatisfied)
        try await monitor.add(lane, identifier: "lane", assuming: .unsatisfied)
        #expect((await monitor.record(for: "quay"))?.condition as? PolygonCondition == quay)
        #expect((await monitor.record(for: "lane"))?.condition as? CorridorCondition == lane)
        let bowTie = PolygonCondition(vertices: [Coordinate(latitude: 45, longitude: 7), Coordinate(latitude: 45.001, longitude: 7.001),
                                                 Coordinate(latitude: 45.001, longitude: 7), Coordinate(latitude: 45, longitude: 7.001)])
        do {
            try await monitor.add(bowTie, identifier: "bow")
            Issue.record("a ring that crosses itself was added")
        } catch let error as MonitorError {
            #expect("\(error)".contains("the edge from vertex 1 crosses the edge from vertex 3"), "\(error)")
        }
        let feeder = try AgentEndToEndTests.feed(site, nmea: syntheticTrack(seconds: 30, startLatitude: 45.0, longitude: 7.0, speedMps: 10), hci: nil)
        defer { feeder.waitUntilExit() }
        var seen: [String] = []
        for try await event in monitor.events where event.identifier != "fence" {
            seen.append("\(event.identifier) \(event.state)")
            if seen.count == 3 { break }
        }
        #expect(seen == ["lane satisfied", "quay satisfied", "quay unsatisfied"])
    }

    /// The seeds' spellings compile as written (the nested condition names, diagnostics read as
    /// properties), and a beacon condition's proximity requirement reaches the agent and comes back.
    /// A reload that changes what a program may do reaches it at once: `AgentInfo.grantChanges`
    /// yields the new grants, and a stream the program may no longer have ends with
    /// `permission_denied` (here `[privacy] fixes = "none"` takes positions from everyone).
    @Test func aReloadThatChangesTheGrantsTellsTheProgramAndEndsWhatItMayNoLongerHave() async throws {
        let site = try AgentEndToEndTests.site("library-grants", extra: LiveUpdateAgentTests.updates)
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let watchdog = Task { try await Task.sleep(for: .seconds(60)); _ = agent.stop(signal: SIGKILL) }
        defer { watchdog.cancel() }
        var changes = AgentInfo.grantChanges(stateDirectory: site.state).makeAsyncIterator()
        #expect(try await changes.next() == ["read", "positions", "change"], "the grants now, first")
        let stream = Task {
            for try await _ in LocationUpdate.liveUpdates(stateDirectory: site.state) {}
        }
        try AgentEndToEndTests.waitFor("the stream", seconds: 20) { Self.updatesStatus(site.state)["streams"] as? Int == 1 }

        let original = try String(contentsOfFile: site.sitePath, encoding: .utf8)
        try (original + "\n[privacy]\nfixes = \"none\"\n").write(toFile: site.sitePath, atomically: true, encoding: .utf8)
        kill(agent.process.processIdentifier, SIGHUP)
        #expect(try await changes.next() == ["read", "change"])
        do {
            try await stream.value
            Issue.record("the stream went on without positions")
        } catch let error as MonitorError {
            #expect(error.code == "permission_denied" && error.message.contains("positions"), "\(error)")
        }
        #expect(Self.updatesStatus(site.state)["streams"] as? Int == 0)

        try original.write(toFile: site.sitePath, atomically: true, encoding: .utf8)
        kill(agent.process.processIdentifier, SIGHUP)
        #expect(try await changes.next() == ["read", "positions", "change"])
    }

    @Test func theSeedsSpellingsAndABeaconsProximityRequirement() async throws {
        let site = try AgentEndToEndTests.site("library-spellings")
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let monitor = try await Monitor("road", stateDirectory: site.state)
        defer { Task { await monitor.close() } }
        let uuid = UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
        try await monitor.add(Monitor.CircularGeographicCondition(center: Coordinate(latitude: 45.05, longitude: 7.0), radius: 100),
                              identifier: "depot", assuming: .unsatisfied)
        try await monitor.add(Monitor.BeaconIdentityCondition(uuid: uuid, major: 7, proximity: .near), identifier: "dock")
        try await monitor.add(Monitor.BeaconIdentityCondition(uuid: uuid), identifier: "anywhere")
        let dock = try #require(await monitor.record(for: "dock")?.condition as? BeaconIdentityCondition)
        #expect(dock.major == 7 && dock.minor == nil && dock.proximity == .near)
        let anywhere = try #require(await monitor.record(for: "anywhere")?.condition as? BeaconIdentityCondition)
        #expect(anywhere.proximity == nil)
        // What the agent stored, read independently of the library: the record's settings.
        let reply = try AgentEndToEndTests().rawRequest(site.state + "/read.sock", #"{"op":"record","monitor":"road","identifier":"dock"}"# + "\n")
        #expect(reply.contains(#""proximity":"near""#), "\(reply)")
        let depot = try #require(await monitor.record(for: "depot"))
        let event = depot.lastEvent
        #expect(!event.accuracyLimited && !event.conditionLimitExceeded && !event.conditionUnsupported && !event.persistenceUnavailable)
    }

    @Test func twoClientsEachGetTheirMonitorsEventsAndAStoppedAgentEndsTheSequence() async throws {
        let site = try AgentEndToEndTests.site("library-two")
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let road = try await Monitor("road", stateDirectory: site.state, resumes: false)
        let cargo = try await Monitor("cargo", stateDirectory: site.state)
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            await road.close()
            await cargo.close()
        }
        defer { watchdog.cancel() }
        let feeder = try AgentEndToEndTests.feed(site, nmea: syntheticTrack(seconds: 30, startLatitude: 45.0, longitude: 7.0, speedMps: 10),
                                                 hci: AgentEndToEndTests.sightings(from: 5, to: 8))
        defer { feeder.waitUntilExit() }
        async let roadEvents: [String] = {
            var seen: [String] = []
            for try await event in road.events {
                seen.append("\(event.identifier) \(event.state)")
                if seen.count == 3 { break }
            }
            return seen
        }()
        async let cargoEvents: [String] = {
            var seen: [String] = []
            for try await event in cargo.events {
                let text = "\(event.identifier) \(event.state) \(event.refinement.map { "\($0.major)/\($0.minor)" } ?? "-")"
                // The tag's first decision may come before its first sighting: unseen for its exit
                // timeout on the agent's clock, which the fast feed's fixes hurry.
                if seen.isEmpty && text == "tag unsatisfied -" { continue }
                seen.append(text)
                if seen.count == 2 { break }
            }
            return seen
        }()
        #expect(try await roadEvents == ["fence unsatisfied", "fence satisfied", "fence unsatisfied"])
        #expect(try await cargoEvents == ["tag satisfied 100/0", "tag unsatisfied -"])

        // The agent stops: an iterating program gets a clear error, not a silent end.
        _ = agent.stop()
        do {
            for try await _ in road.events {}
            Issue.record("the sequence ended without an error")
        } catch let error as MonitorError {
            #expect(error.code == "disconnected", "\(error)")
        }
    }

    /// `Geocoder` (CLGeocoder's calls) against the agent's place index, and the placemarks an
    /// annotating site's events carry.
    @Test func theGeocoderAsksTheAgentsPlaceIndex() async throws {
        let index = try GeocodingAgentTests.index()
        let site = try AgentEndToEndTests.site("library-geocoder", extra: GeocodingAgentTests.geocoding(index))
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let geocoder = Geocoder(stateDirectory: site.state)
        let near = try await geocoder.reverseGeocodeLocation(latitude: 45.0016, longitude: 7.0003)
        let gate = try #require(near.first)
        #expect(near.count == 1 && gate.name == "Depot gate" && gate.isSitePlace && gate.locality == nil && gate.isoCountryCode == nil)
        #expect(gate.text == "32 m SE of Depot gate" && gate.population == 0 && gate.geonameID == nil && gate.timeZone == nil)
        #expect(gate.distance.map { abs($0 - 32.4575) < 1e-3 } == true && gate.bearing.map { abs($0 - 133.2184) < 1e-3 } == true)
        #expect(gate.coordinate == Coordinate(latitude: 45.0018, longitude: 7.0))
        #expect(try await geocoder.reverseGeocodeLocation(latitude: 45.2, longitude: 7.3).isEmpty, "beyond the site's 5 km")
        let turin = try #require(try await geocoder.reverseGeocodeLocation(latitude: 45.07, longitude: 7.68, within: 10_000, scope: .populated).first)
        #expect(turin.name == "Turin" && turin.locality == "Turin" && turin.administrativeArea == "Piedmont" && turin.isoCountryCode == "IT")
        #expect(turin.timeZone == "Europe/Rome" && turin.population == 847_287 && turin.geonameID == 3_165_524 && !turin.isSitePlace)
        let springfields = try await geocoder.geocodeAddressString("Springfield, US")
        #expect(springfields.map { $0.administrativeArea } == ["Missouri", "Massachusetts", "Illinois"])
        #expect(springfields.allSatisfy { $0.distance == nil && $0.bearing == nil && $0.text == nil }, "no fix to measure from yet")
        #expect(try await geocoder.geocodeAddressString("Paris", limit: 1).map { $0.isoCountryCode } == ["FR"])
        #expect(try await geocoder.geocodeAddressString("Atlantis").isEmpty)

        // The events of an annotating site carry their placemark; forward results, once there is
        // a fix, their distance from it.
        let monitor = try await Monitor("road", stateDirectory: site.state)
        let watchdog = Task { try await Task.sleep(for: .seconds(60)); await monitor.close() }
        defer { watchdog.cancel() }
        let feeder = try AgentEndToEndTests.feed(site, nmea: syntheticTrack(seconds: 30, startLatitude: 45.0, longitude: 7.0, speedMps: 10), hci: nil)
        defer { feeder.waitUntilExit() }
        var placemarks: [String] = []
        for try await event in monitor.events {
            placemarks.append(event.placemark?.name ?? "-")
            if placemarks.count == 2 { break }
        }
        await monitor.close()
        #expect(placemarks == ["Depot gate", "Depot gate"])
        let distance = try #require(try await geocoder.geocodeAddressString("Turin").first?.distance)
        #expect(distance > 53_000 && distance < 56_000, "\(distance)")
    }

    @Test func theGeocoderSaysWhenTheSiteHasNoPlaceIndex() async throws {
        let site = try AgentEndToEndTests.site("library-geocoder-none")
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        do {
            _ = try await Geocoder(stateDirectory: site.state).geocodeAddressString("Paris")
            Issue.record("a site without an index answered")
        } catch let error as MonitorError {
            #expect(error.code == "unavailable" && error.message == "no place index: add [geocoding] to the site file")
        }
    }

    @Test func theGreeterExampleRunsAgainstAnAgent() throws {
        let site = try AgentEndToEndTests.site("greeter")
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let greeter = Process()
        greeter.executableURL = URL(fileURLWithPath: try locusBinary().replacingOccurrences(of: "/locus", with: "/monitor-greeter"))
        guard FileManager.default.isExecutableFile(atPath: greeter.executableURL!.path) else {
            // LOCUS_BINARY points at a device build: the examples are host programs, tested with the host build.
            return
        }
        greeter.arguments = [site.state]
        let outputPath = site.directory + "/greeter.out"
        FileManager.default.createFile(atPath: outputPath, contents: nil)
        greeter.standardOutput = FileHandle(forWritingAtPath: outputPath)
        try greeter.run()
        defer { greeter.terminate(); greeter.waitUntilExit() }
        var text = ""
        try? AgentEndToEndTests.waitFor("the greeter's first line", seconds: 20) {
            text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            return text.contains("work: unsatisfied")
        }
        #expect(text.contains("work: unsatisfied"), "\(text)")
        #expect(try locus(["monitor", "gate", "identifiers", "--state", site.state]).output == "work\n")
    }

    /// The agent's update-stream count and radio tier, from `locus status`.
    static func updatesStatus(_ state: String) -> [String: Any] {
        guard let output = try? locus(["status", "--state", state]).output,
              let object = try? JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any] else { return [:] }
        return object["updates"] as? [String: Any] ?? [:]
    }

    @Test func liveUpdatesDeliverPositionsSayStationaryAndBreakingStopsThem() async throws {
        let site = try AgentEndToEndTests.site("library-updates", extra: LiveUpdateAgentTests.updates)
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        // 15 s north at 10 m/s, then standing: stationary 10 s after stopping.
        let track = segmentedTrack([(15, 10), (40, 0)], startLatitude: 45.0, longitude: 7.0)
        let collected = try await withThrowingTaskGroup(of: [LocationUpdate]?.self) { group in
            group.addTask {
                var updates: [LocationUpdate] = []
                for try await update in LocationUpdate.liveUpdates(.fitness, accuracy: .best, stateDirectory: site.state) {
                    updates.append(update)
                    if update.isStationary { break }
                }
                return updates
            }
            group.addTask {
                // The stream is open once the agent counts it; then the recording plays.
                try AgentEndToEndTests.waitFor("the stream", seconds: 20) { Self.updatesStatus(site.state)["streams"] as? Int == 1 }
                #expect(Self.updatesStatus(site.state)["radios"] as? String == "best", "a client's finer tier raises the radios")
                let feeder = try AgentEndToEndTests.feed(site, nmea: track, hci: nil)
                feeder.waitUntilExit()
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                throw AgentEndToEndTests.WaitTimedOut(what: "live updates")
            }
            var result: [LocationUpdate] = []
            var finished = 0
            for try await value in group {
                if let value { result = value }
                finished += 1
                if finished == 2 { group.cancelAll(); break }
            }
            return result
        }
        let located = collected.compactMap { $0.location }
        #expect(located.count >= 10, "\(collected.count) updates")
        // The positions are the track's: second n north of 45°.
        for location in located {
            let second = Int(location.timestamp.timeIntervalSince1970) - 1_710_496_800
            let expected = 45.0 + Double(min(second, 15)) * 10 / 111_132.0
            #expect(abs(location.coordinate.latitude - expected) < 1e-8, "second \(second)")
        }
        let last = try #require(collected.last)
        #expect(last.isStationary && last.stationary && last.location != nil)
        #expect(collected.dropLast().allSatisfy { !$0.isStationary })
        // Breaking out released the stream: the agent drops it and its finer tier.
        try AgentEndToEndTests.waitFor("the stream to end", seconds: 10) { Self.updatesStatus(site.state)["streams"] as? Int == 0 }
        #expect(Self.updatesStatus(site.state)["radios"] as? String == "hundredMeters")
    }

    @Test func theLiveUpdatesLoggerStopsWhenStationary() throws {
        let site = try AgentEndToEndTests.site("logger", extra: LiveUpdateAgentTests.updates)
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        let logger = Process()
        logger.executableURL = URL(fileURLWithPath: try locusBinary().replacingOccurrences(of: "/locus", with: "/live-updates-logger"))
        guard FileManager.default.isExecutableFile(atPath: logger.executableURL!.path) else { return }
        logger.arguments = [site.state, "fitness"]
        let output = Pipe()
        logger.standardOutput = output
        try logger.run()
        try AgentEndToEndTests.waitFor("the stream", seconds: 20) { Self.updatesStatus(site.state)["streams"] as? Int == 1 }
        let feeder = try AgentEndToEndTests.feed(site, nmea: segmentedTrack([(10, 10), (30, 0)], startLatitude: 45.0, longitude: 7.0), hci: nil)
        let watchdog = DispatchWorkItem { logger.terminate() }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: watchdog)
        logger.waitUntilExit()
        watchdog.cancel()
        feeder.waitUntilExit()
        let lines = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n")
        #expect(logger.terminationStatus == 0)
        #expect(lines.last == "stationary: stopping", "\(lines.suffix(3))")
        #expect(lines.filter { $0.hasPrefix("45.0") }.count >= 10, "\(lines.count) lines")
    }

    // MARK: single location request, visits, significant change

    /// The library's calls against a real agent: visits as they happen (arrival, then departure),
    /// the same visits read back from the log, requestLocation answered from the last fix.
    @Test func visitsArriveTwiceReadBackFromTheLogAndRequestLocationAnswers() async throws {
        let site = try AgentEndToEndTests.site("library-visits", extra: LiveUpdateAgentTests.updates)
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        // 15 s north, 30 s standing, 15 s north again: one visit (visit_minimum 5 s).
        let track = segmentedTrack([(15, 10), (30, 0), (15, 10)], startLatitude: 45.0, longitude: 7.0)
        let visits = try await withThrowingTaskGroup(of: [LocationUpdate.Visit]?.self) { group in
            group.addTask {
                var visits: [LocationUpdate.Visit] = []
                for try await visit in LocationUpdate.visits(stateDirectory: site.state) {
                    visits.append(visit)
                    if !visit.isArrival { break }
                }
                return visits
            }
            group.addTask {
                try AgentEndToEndTests.waitFor("the stream", seconds: 20) { Self.updatesStatus(site.state)["streams"] as? Int == 1 }
                let feeder = try AgentEndToEndTests.feed(site, nmea: track, hci: nil)
                feeder.waitUntilExit()
                return nil
            }
            group.addTask {
                try await Task.sleep(for: .seconds(60))
                throw AgentEndToEndTests.WaitTimedOut(what: "visits")
            }
            var result: [LocationUpdate.Visit] = []
            var finished = 0
            for try await value in group {
                if let value { result = value }
                finished += 1
                if finished == 2 { group.cancelAll(); break }
            }
            return result
        }
        #expect(visits.count == 2, "\(visits)")
        let start = Date(timeIntervalSince1970: 1_710_496_800)
        if visits.count == 2 {
            #expect(visits[0].isArrival && visits[0].departureDate == .distantFuture && !visits[1].isArrival)
            #expect(visits[0].arrivalDate == visits[1].arrivalDate && abs(visits[0].arrivalDate.timeIntervalSince(start) - 15) <= 2)
            #expect(abs(visits[1].departureDate.timeIntervalSince(start) - 44) <= 2, "\(visits[1].departureDate)")
            #expect(abs(visits[1].coordinate.latitude - (45.0 + 150 / 111_132.0)) < 1e-4)
        }
        // After a restart a program reads them from the log (the site updater's, the same stop).
        try AgentEndToEndTests.waitFor("two visit records", seconds: 10) {
            try AgentEndToEndTests.records(site.state).filter { $0["type"] as? String == "visit" }.count == 2
        }
        let recent = try await LocationUpdate.recentVisits(stateDirectory: site.state)
        #expect(recent.count == 2 && recent[0].isArrival && !recent[1].isArrival && (recent[0].sequence ?? 0) < (recent[1].sequence ?? 0), "\(recent)")
        let later = try await LocationUpdate.recentVisits(since: recent[1].departureDate, stateDirectory: site.state)
        #expect(later.count == 1 && later.first?.sequence == recent[1].sequence, "only the departure is at or after its own time")

        // The last fix is recent and within 100 m: answered at once.
        let located = try await LocationUpdate.requestLocation(accuracy: .hundredMeters, maxAge: 3_600, stateDirectory: site.state)
        #expect(!located.accuracyLimited && (located.location.horizontalAccuracy ?? 99) <= 100)
        #expect(abs(located.location.coordinate.latitude - (45.0 + 300 / 111_132.0)) < 2e-4, "\(located.location.coordinate)")
        // Nothing new comes (the recording ended): a fresh fix asked for times out without one.
        do {
            _ = try await LocationUpdate.requestLocation(maxAge: 0, timeout: 1, stateDirectory: site.state)
            Issue.record("no fix can answer a request for a fresh one")
        } catch let error as MonitorError {
            #expect(error.code == "location_unavailable", "\(error)")
        }
    }
}
