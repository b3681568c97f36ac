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
        for try await event in monitor!.events {
            taken.append("\(event.identifier) \(event.state)")
            break
        }
        #expect(taken == ["fence unsatisfied"])
        monitor = nil
        feeder.waitUntilExit()
        try AgentEndToEndTests.waitFor("the fence to be left", seconds: 10) {
            AgentEndToEndTests.events(try AgentEndToEndTests.records(site.state)).filter { $0.name == "road/fence" }.count >= 3
        }
        // Opened again: what was not taken, in order, and nothing twice.
        let again = try await Monitor("road", stateDirectory: site.state)
        var rest: [String] = []
        for try await event in again.events {
            rest.append("\(event.identifier) \(event.state)")
            if rest.count == 2 { break }
        }
        #expect(rest == ["fence satisfied", "fence unsatisfied"])
    }
}
