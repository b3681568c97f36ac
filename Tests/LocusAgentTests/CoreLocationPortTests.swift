import Foundation
import LocusCoreLocation
import LocusMonitor
import Testing

/// Core Location's monitor and live-update calls, written as Core Location programs write them
/// (only the import changed), against a real `locus run` on the simulated board.
@Suite(.serialized) struct CoreLocationPortTests {
    /// The port finds the agent through LOCUS_STATE_DIRECTORY (Core Location's calls name none).
    static func useAgent(_ state: String) { setenv("LOCUS_STATE_DIRECTORY", state, 1) }

    @Test func aCLMonitorProgramRunsWithItsImportChanged() async throws {
        let site = try AgentEndToEndTests.site("cl-monitor")
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        Self.useAgent(site.state)

        // As a Core Location program writes it.
        let monitor = await CLMonitor("road")
        let depot = CLLocationCoordinate2D(latitude: 45.05, longitude: 7.0)
        await monitor.add(CLMonitor.CircularGeographicCondition(center: depot, radius: 100), identifier: "depot", assuming: .unsatisfied)
        let uuid = UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
        await monitor.add(CLMonitor.BeaconIdentityCondition(uuid: uuid, major: 7), identifier: "dock")
        var states: [String: CLMonitor.Event.State] = [:]
        for identifier in await monitor.identifiers {
            guard let lastEvent = await monitor.record(for: identifier)?.lastEvent else { continue }
            states[identifier] = lastEvent.state
        }
        #expect(await monitor.underlyingError == nil)
        #expect(states["depot"] == .unsatisfied && states.keys.sorted() == ["depot", "dock", "fence"], "\(states)")
        let record = try #require(await monitor.record(for: "depot"))
        #expect((record.condition as? CLMonitor.CircularGeographicCondition)?.radius == 100)
        #expect((await monitor.record(for: "dock")?.condition as? CLMonitor.BeaconIdentityCondition)?.major == 7)
        await monitor.remove("dock")
        #expect(await monitor.identifiers == ["depot", "fence"])
        // What the agent says of itself: the monitors, this program's grants, the room left.
        let info = try await AgentInfo.ask(stateDirectory: site.state)
        #expect(info.monitors.contains("road") && info.persistence, "\(info)")
        #expect(info.grants.contains("read") && info.grants.contains("change"), "\(info)")
        #expect(info.conditions >= 2 && info.capacity > info.conditions && info.conditionsLeft == info.capacity - info.conditions, "\(info)")

        let watchdog = Task { try await Task.sleep(for: .seconds(60)); _ = agent.stop(signal: SIGTERM) }
        defer { watchdog.cancel() }
        let feeder = try AgentEndToEndTests.feed(site, nmea: syntheticTrack(seconds: 30, startLatitude: 45.0, longitude: 7.0, speedMps: 10), hci: nil)
        defer { feeder.waitUntilExit() }
        var seen: [String] = []
        for try await event in await monitor.events where event.identifier != "dock" {
            switch event.state {
            case .satisfied: seen.append("\(event.identifier) satisfied")
            case .unknown, .unsatisfied: seen.append("\(event.identifier) \(event.state)")
            case .unmonitored: seen.append("\(event.identifier) unmonitored")
            }
            #expect(!event.accuracyLimited && !event.authorizationDenied && event.refinement == nil)
            if seen.count == 3 { break }
        }
        // The site's fence: left, entered and left again by the 300 m track; the depot, 5.5 km
        // north, stays as assumed, so it has no event (events only on change).
        #expect(seen == ["fence unsatisfied", "fence satisfied", "fence unsatisfied"], "\(seen)")
        // Every condition removed: none left, and the room they took is free again.
        await monitor.removeAll()
        let refusal = await monitor.underlyingError
        #expect(await monitor.identifiers.isEmpty && refusal == nil, "\(String(describing: refusal))")
        #expect(try await AgentInfo.ask(stateDirectory: site.state).conditions == info.conditions - 2)
    }

    @Test func aMonitorThatCannotBeOpenedSaysWhyAndItsEventsThrowIt() async throws {
        Self.useAgent(NSTemporaryDirectory() + "locus-no-agent-\(getpid())")
        let monitor = await CLMonitor("road")
        await monitor.add(CLMonitor.CircularGeographicCondition(center: CLLocationCoordinate2D(latitude: 45, longitude: 7), radius: 50),
                          identifier: "depot")
        #expect(await monitor.identifiers.isEmpty)
        let error = try #require(await monitor.underlyingError)
        #expect(!error.message.isEmpty, "\(error)")
        await #expect(throws: (any Error).self) {
            for try await _ in await monitor.events {}
        }
    }

    @Test func liveUpdatesWithAStationaryBreakAndAFirstWhere() async throws {
        let site = try AgentEndToEndTests.site("cl-updates", extra: LiveUpdateAgentTests.updates)
        let agent = try AgentEndToEndTests.start(site)
        defer { _ = agent.stop(signal: SIGKILL) }
        Self.useAgent(site.state)
        // 15 s north at 10 m/s, then standing: stationary 10 s after stopping.
        let track = segmentedTrack([(15, 10), (40, 0)], startLatitude: 45.0, longitude: 7.0)
        let feeding = Task.detached {
            try AgentEndToEndTests.waitFor("the stream", seconds: 20) { LocusMonitorTests.updatesStatus(site.state)["streams"] as? Int == 1 }
            let feeder = try AgentEndToEndTests.feed(site, nmea: track, hci: nil)
            feeder.waitUntilExit()
        }
        let watchdog = Task { try await Task.sleep(for: .seconds(60)); _ = agent.stop(signal: SIGTERM) }
        defer { watchdog.cancel() }

        // As a Core Location program writes it.
        let fast = try await CLLocationUpdate.liveUpdates(.fitness).first { update in
            (update.location?.horizontalAccuracy ?? 100) < 50 && (update.location?.speed ?? 0) > 5
        }
        let moving = try #require(fast?.location)
        #expect(moving.speed > 5 && moving.horizontalAccuracy >= 0 && moving.horizontalAccuracy < 50)
        #expect(moving.courseAccuracy == -1 && moving.speedAccuracy == -1)
        // The simulated board's receiver is a feed: its fixes are simulated, and say so.
        #expect(moving.sourceInformation?.isSimulatedBySoftware == true && moving.sourceInformation?.isProducedByAccessory == false)
        // The track's GGA: 20.0 m above the geoid, the geoid 30.0 m below the ellipsoid; its GSA:
        // VDOP 1.2, so about 6 m (1.2 × the 5 m range error assumed without GST).
        #expect(moving.altitude == 20 && moving.ellipsoidalAltitude == -10 && moving.verticalAccuracy == 6,
                "\(moving.altitude) \(moving.ellipsoidalAltitude) \(moving.verticalAccuracy)")
        #expect(abs(moving.course) < 1 || abs(moving.course - 360) < 1, "northbound: \(moving.course)")

        var last: CLLocation? = nil
        var stationary = false
        for try await update in CLLocationUpdate.liveUpdates(.fitness) {
            if let location = update.location { last = location }
            if update.isStationary {
                stationary = update.stationary
                break
            }
        }
        #expect(stationary)
        let stopped = try #require(last)
        // The track stops 150 m north of where it started (15 s at 10 m/s), give or take a fix.
        let start = CLLocation(latitude: 45.0, longitude: 7.0)
        #expect(abs(stopped.distance(from: start) - 150) < 20, "\(stopped.distance(from: start))")
        try await feeding.value
    }

    /// CLLocation's conventions: -1 for what is unknown, the altitudes invalid while the vertical
    /// accuracy is negative, and distances on the WGS84 ellipsoid (a degree of the equator is
    /// 111,319.491 m, GeographicLib's figure; a degree of meridian at the equator 110,574.389 m).
    @Test func aLocationFollowsCoreLocationsConventions() {
        let origin = CLLocation(latitude: 0, longitude: 0)
        #expect(abs(CLLocation(latitude: 0, longitude: 1).distance(from: origin) - 111_319.491) < 0.001)
        #expect(abs(CLLocation(latitude: 1, longitude: 0).distance(from: origin) - 110_574.389) < 0.001)
        #expect(origin.speed == -1 && origin.course == -1 && origin.speedAccuracy == -1 && origin.courseAccuracy == -1)
        #expect(origin.verticalAccuracy < 0, "no altitude: the altitudes are not to be used")
        #expect(origin.sourceInformation == nil, "made by the program, not measured")
        #expect(CLLocationCoordinate2DIsValid(CLLocationCoordinate2D(latitude: 90, longitude: -180)))
        #expect(!CLLocationCoordinate2DIsValid(CLLocationCoordinate2D(latitude: 90.5, longitude: 0)))
    }
}

// Nested in CoreLocationPortTests, whose `.serialized` covers them: each names its agent through
// the process's LOCUS_STATE_DIRECTORY, so no two may run at once.
extension CoreLocationPortTests {
    /// CLLocationManager's delegate calls, CLServiceSession, CLGeocoder and the other service types,
    /// against a real `locus run` on the simulated board.
    @Suite struct Services {
        typealias E = AgentEndToEndTests

        @MainActor final class Recorder: CLLocationManagerDelegate {
            var locations: [CLLocation] = []
            var visits: [CLVisit] = []
            var ranged: [[CLBeacon]] = []
            var errors: [String] = []
            var pauses = 0, resumes = 0, authorizationChanges = 0

            func locationManager(_ manager: CLLocationManager, didUpdateLocations locations: [CLLocation]) { self.locations += locations }
            func locationManager(_ manager: CLLocationManager, didFailWithError error: any Error) { errors.append("\(error)") }
            func locationManager(_ manager: CLLocationManager, didVisit visit: CLVisit) { visits.append(visit) }
            func locationManager(_ manager: CLLocationManager, didRange beacons: [CLBeacon], satisfying beaconConstraint: CLBeaconIdentityConstraint) {
                if !beacons.isEmpty { ranged.append(beacons) }
            }
            func locationManagerDidPauseLocationUpdates(_ manager: CLLocationManager) { pauses += 1 }
            func locationManagerDidResumeLocationUpdates(_ manager: CLLocationManager) { resumes += 1 }
            func locationManagerDidChangeAuthorization(_ manager: CLLocationManager) { authorizationChanges += 1 }
        }

        /// Waits on the main actor until `condition` holds (at most `seconds`).
        @MainActor static func until(_ what: String, seconds: Double = 30, _ condition: () -> Bool) async throws {
            let deadline = Date().addingTimeInterval(seconds)
            while !condition() {
                guard Date() < deadline else { throw E.WaitTimedOut(what: what) }
                try await Task.sleep(for: .milliseconds(50))
            }
        }

        @MainActor @Test func aDelegateProgramGetsLocationsPausesVisitsAndBeacons() async throws {
            let site = try E.site("cl-manager", extra: LiveUpdateAgentTests.updates)
            let agent = try E.start(site)
            defer { _ = agent.stop(signal: SIGKILL) }
            CoreLocationPortTests.useAgent(site.state)
            let radios = { LocusMonitorTests.updatesStatus(site.state)["radios"] as? String }

            // A service session asking full accuracy holds the radios at `best` until invalidated.
            let session = CLServiceSession(authorization: .whenInUse, fullAccuracyPurposeKey: "Docking")
            #expect(await session.waitUntilHeld())
            #expect(radios() == "best" && session.underlyingError == nil)
            session.invalidate()
            try await Self.until("the radios back at the site's tier") { radios() == "hundredMeters" }
            let background = CLBackgroundActivitySession()
            defer { background.invalidate() }

            // As a Core Location program writes it.
            let recorder = Recorder()
            let manager = CLLocationManager()
            manager.delegate = recorder
            manager.requestWhenInUseAuthorization()
            try await Self.until("authorization") { manager.authorizationStatus == .authorizedAlways }
            #expect(recorder.authorizationChanges == 1 && CLLocationManager.locationServicesEnabled())
            manager.desiredAccuracy = kCLLocationAccuracyNearestTenMeters
            manager.distanceFilter = 25
            manager.activityType = .automotiveNavigation
            manager.startUpdatingLocation()
            manager.startMonitoringVisits()
            let constraint = CLBeaconIdentityConstraint(uuid: UUID(uuidString: RangingAgentTests.uuid)!, major: 100)
            manager.startRangingBeacons(satisfying: constraint)
            #expect(manager.rangedBeaconConstraints == [constraint])
            do {
                try await Self.until("the streams") { LocusMonitorTests.updatesStatus(site.state)["streams"] as? Int == 2 }
            } catch {
                Issue.record("\(error): \(LocusMonitorTests.updatesStatus(site.state)), \(recorder.errors)")
                throw error
            }
            let status = LocusMonitorTests.updatesStatus(site.state)
            #expect(status["radios"] as? String == "nearestTenMeters" && status["model"] as? String == "automotiveNavigation", "\(status)")

            // 150 m north, 25 s standing (paused, a visit), 5 s moving again (resumed, its departure).
            let track = segmentedTrack([(15, 10), (25, 0), (6, 10)], startLatitude: 45.0, longitude: 7.0)
            let feeder = try E.feed(site, nmea: track, hci: RangingAgentTests.feed(seconds: 46), speed: "4")
            defer { feeder.waitUntilExit() }
            try await Self.until("a visit's departure", seconds: 40) { recorder.visits.contains { $0.departureDate != .distantFuture } }
            try await Self.until("the resumed updates", seconds: 10) { recorder.resumes == 1 }
            #expect(recorder.pauses == 1 && recorder.errors.isEmpty, "\(recorder.errors)")
            #expect(recorder.visits.count == 2 && recorder.visits[0].departureDate == .distantFuture
                    && recorder.visits[0].arrivalDate == recorder.visits[1].arrivalDate)
            #expect(abs(recorder.visits[0].coordinate.latitude - (45.0 + 140 / 111_132.0)) < 20 / 111_132.0)
            // The distance filter: along the 150 m drive, an update every 30 m (three fixes), not every fix.
            let start = CLLocation(latitude: 45.0, longitude: 7.0)
            let driving = recorder.locations.filter { $0.distance(from: start) < 145 }
            #expect(driving.count >= 3 && driving.count <= 6, "\(driving.map { Int($0.distance(from: start)) })")
            for (previous, next) in zip(driving, driving.dropFirst()) { #expect(next.distance(from: previous) >= 25) }
            let beacons = try #require(recorder.ranged.last)
            #expect(beacons.map { $0.minor.intValue } == [1, 2] && beacons[0].proximity == .immediate && beacons[1].proximity == .far)
            #expect(beacons.allSatisfy { $0.major == 100 && $0.rssi < 0 && $0.accuracy > 0 })

            // Stopping a service ends its stream at the agent; the others go on.
            manager.stopUpdatingLocation()
            manager.stopRangingBeacons(satisfying: constraint)
            try await Self.until("the update stream ended") { LocusMonitorTests.updatesStatus(site.state)["streams"] as? Int == 1 }
            #expect(manager.rangedBeaconConstraints.isEmpty && radios() == "hundredMeters")
            // One location: the last fix answers at once.
            let before = recorder.locations.count
            manager.requestLocation()
            try await Self.until("the requested location") { recorder.locations.count == before + 1 }
            #expect(manager.location === recorder.locations.last)
            #expect(manager.location?.sourceInformation?.isSimulatedBySoftware == true)
            manager.stopMonitoringVisits()
            try await Self.until("every stream ended") { LocusMonitorTests.updatesStatus(site.state)["streams"] as? Int == 0 }

            // The site stops giving out positions: the delegate hears of it, as of a user's "no".
            let original = try String(contentsOfFile: site.sitePath, encoding: .utf8)
            try (original + "\n[privacy]\nfixes = \"none\"\n").write(toFile: site.sitePath, atomically: true, encoding: .utf8)
            kill(agent.process.processIdentifier, SIGHUP)
            try await Self.until("the authorization change") { manager.authorizationStatus == .denied }
            #expect(recorder.authorizationChanges == 2)
        }

        @Test func theGeocoderAnswersFromTheAgentsPlaceIndex() async throws {
            let site = try E.site("cl-geocoder", extra: GeocodingAgentTests.geocoding(try GeocodingAgentTests.index()))
            let agent = try E.start(site)
            defer { _ = agent.stop(signal: SIGKILL) }
            CoreLocationPortTests.useAgent(site.state)
            let geocoder = CLGeocoder()
            let turin = try #require(try await geocoder.geocodeAddressString("Turin").first)
            #expect(turin.locality == "Turin" && turin.administrativeArea == "Piedmont" && turin.isoCountryCode == "IT")
            #expect(turin.timeZone?.identifier == "Europe/Rome")
            let near = try await geocoder.reverseGeocodeLocation(CLLocation(latitude: 45.0016, longitude: 7.0003))
            #expect(near.first?.name == "Depot gate" && near.first?.location.map { abs($0.coordinate.latitude - 45.0018) < 1e-9 } == true)
            let answered: [CLPlacemark]? = await withCheckedContinuation { continuation in
                geocoder.reverseGeocodeLocation(CLLocation(latitude: 45.0016, longitude: 7.0003)) { placemarks, _ in continuation.resume(returning: placemarks) }
            }
            #expect(answered?.first?.name == "Depot gate")
        }
    }
}
