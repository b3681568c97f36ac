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
        #expect(CLLocationCoordinate2DIsValid(CLLocationCoordinate2D(latitude: 90, longitude: -180)))
        #expect(!CLLocationCoordinate2DIsValid(CLLocationCoordinate2D(latitude: 90.5, longitude: 0)))
    }
}
