import Foundation
import LocusCoreLocation
import LocusMonitor
import Testing

/// Streams that outlive the agent: a monitor's events, live updates, visits and ranging, each
/// open while `locus run` is stopped and started again mid-track, carry on with the new agent:
/// the monitor from its cursor (nothing missed, nothing twice), the visits read back from the
/// log, the updates saying `locationUnavailable` once and keeping their own settings.
/// (Nested in CoreLocationPortTests, whose `.serialized` covers it: the port's programs name
/// their agent through the process's LOCUS_STATE_DIRECTORY.)
extension CoreLocationPortTests {
    @Suite struct ResumingStreams {
        typealias E = AgentEndToEndTests

        /// What each stream saw, in order, as the test reads it.
        final class Seen: @unchecked Sendable {
            private let lock = NSLock()
            private var items: [String: [String]] = [:]
            func add(_ stream: String, _ item: String) { lock.withLock { items[stream, default: []].append(item) } }
            func of(_ stream: String) -> [String] { lock.withLock { items[stream] ?? [] } }
        }

        /// The track's NMEA seconds `range` (three sentences a second), and its sightings then.
        static func part(_ nmea: String, _ hci: String, seconds range: Range<Int>) -> (nmea: String, hci: String) {
            let sentences = nmea.split(separator: "\r\n", omittingEmptySubsequences: true)
            let lines = sentences[(range.lowerBound * 3)..<min(sentences.count, range.upperBound * 3)]
            let sightings = hci.split(separator: "\n").filter { line in
                guard let time = Double(line.prefix { $0 != " " }) else { return false }
                let second = Int(time) - E.trackStart
                return range.contains(second)
            }
            return (lines.joined(separator: "\r\n") + "\r\n", sightings.joined(separator: "\n") + "\n")
        }

        @Test func eventsUpdatesVisitsAndRangingCarryOnAcrossAnAgentRestart() async throws {
            let site = try E.site("resume", extra: LiveUpdateAgentTests.updates)
            var agent = try E.start(site)
            defer { _ = agent.stop(signal: SIGKILL) }
            CoreLocationPortTests.useAgent(site.state)
            // North at 10 m/s for 30 s (the site's fence, 200 m north, is entered and left), 20 s
            // standing (stationary, a visit), 10 s moving again (the visit's departure).
            let nmea = segmentedTrack([(30, 10), (20, 0), (10, 10)], startLatitude: 45.0, longitude: 7.0)
            let hci = RangingAgentTests.feed(seconds: 60)
            let seen = Seen()

            let monitor = await CLMonitor("road")
            let events = Task {
                for try await event in await monitor.events where event.identifier == "fence" {
                    seen.add("events", "\(event.state)")
                    if seen.of("events").count == 3 { break }
                }
            }
            // A heartbeat tracker: no automatic pause, the automotive model for the receiver.
            let options = LocationUpdate.Options(pausesAutomatically: false, activityType: .automotiveNavigation)
            let updates = Task {
                for try await update in LocationUpdate.liveUpdates(options: options, stateDirectory: site.state) {
                    guard let location = update.location else {
                        seen.add("updates", "unavailable")
                        continue
                    }
                    let metres = Int(((location.coordinate.latitude - 45.0) * 111_132).rounded())
                    seen.add("updates", update.isStationary ? "stationary \(metres)" : "\(metres)")
                    if update.isStationary && metres > 250 { break }
                }
            }
            let visits = Task {
                for try await visit in LocationUpdate.visits(stateDirectory: site.state) {
                    seen.add("visits", visit.isArrival ? "arrival" : "departure")
                    if !visit.isArrival { break }
                }
            }
            let ranging = Task {
                let constraint = BeaconIdentityConstraint(uuid: UUID(uuidString: RangingAgentTests.uuid)!, major: 100)
                for try await beacons in rangeBeacons(satisfying: constraint, stateDirectory: site.state) where !beacons.isEmpty {
                    seen.add("ranging", "\(beacons.count)")
                    if seen.of("ranging").contains("restarted") { break }
                }
            }
            let watchdog = Task {
                try await Task.sleep(for: .seconds(90))
                for task in [events, updates, visits, ranging] { task.cancel() }
            }
            defer { watchdog.cancel() }

            // The first agent: 8 s of the track, while every stream is open.
            try E.waitFor("the update and visit streams", seconds: 20) { LocusMonitorTests.updatesStatus(site.state)["streams"] as? Int == 2 }
            let first = Self.part(nmea, hci, seconds: 0..<8)
            let firstFeed = try E.feed(site, nmea: first.nmea, hci: first.hci, speed: "2")
            firstFeed.waitUntilExit()
            try E.waitFor("the first agent's event, updates and ranging", seconds: 20) {
                seen.of("events") == ["unsatisfied"] && seen.of("updates").count >= 3 && !seen.of("ranging").isEmpty
            }
            let status = LocusMonitorTests.updatesStatus(site.state)
            #expect(status["model"] as? String == "automotiveNavigation" && status["kept_awake"] as? Int == 1, "\(status)")

            // Stopped and started again: the rest of the track goes to the new agent at once, before
            // the programs are back (their events wait in the log for the monitor's cursor).
            let updatesBefore = seen.of("updates").count
            #expect(agent.stop() == 0)
            seen.add("ranging", "restarted")
            agent = try E.start(site)
            let rest = Self.part(nmea, hci, seconds: 8..<60)
            let secondFeed = try E.feed(site, nmea: rest.nmea, hci: rest.hci, speed: "4")
            defer { secondFeed.waitUntilExit() }

            try await events.value
            try await updates.value
            try await visits.value
            try await ranging.value
            #expect(seen.of("events") == ["unsatisfied", "satisfied", "unsatisfied"], "nothing missed, nothing twice: \(seen.of("events"))")
            let resumed = Array(seen.of("updates").dropFirst(updatesBefore))
            // The gap said at once; then the new agent's stream (which may say it has no fix yet).
            #expect(resumed.first == "unavailable", "\(resumed)")
            let located = try #require(resumed.firstIndex { Int($0) != nil }, "the new agent's positions: \(resumed)")
            #expect(Int(resumed[located])! > 80 && !resumed[located...].contains("unavailable"), "\(resumed)")
            // Standing still, updates keep coming (the pause is off), saying so.
            #expect(resumed.filter { $0.hasPrefix("stationary") }.count >= 1, "\(resumed)")
            #expect(seen.of("visits") == ["arrival", "departure"], "\(seen.of("visits"))")
            let afterRestart = seen.of("ranging").drop { $0 != "restarted" }
            #expect(afterRestart.count >= 2, "ranging goes on: \(seen.of("ranging"))")
            #expect(await monitor.underlyingError == nil)
        }

        /// An agent whose state directory was emptied starts its log over, numbering events from
        /// 1 again: a monitor that took events from the old log takes the new log's too.
        @Test func aMonitorCarriesOnWhenTheAgentsStateStartsOver() async throws {
            let site = try E.site("resume-wiped")
            var agent = try E.start(site)
            defer { _ = agent.stop(signal: SIGKILL) }
            let monitor = try await Monitor("road", stateDirectory: site.state)
            let seen = Seen()
            let events = Task {
                for try await event in monitor.events where event.identifier == "fence" {
                    seen.add("events", "\(event.state) \(event.sequence)")
                    if seen.of("events").count == 4 { break }
                }
            }
            let watchdog = Task { try await Task.sleep(for: .seconds(60)); events.cancel() }
            defer { watchdog.cancel() }
            let track = syntheticTrack(seconds: 30, startLatitude: 45.0, longitude: 7.0, speedMps: 10)
            try E.feed(site, nmea: track, hci: nil).waitUntilExit()
            try E.waitFor("the first log's events", seconds: 20) { seen.of("events").count == 3 }
            #expect(agent.stop() == 0)
            try FileManager.default.removeItem(atPath: site.state)
            agent = try E.start(site)
            try E.feed(site, nmea: track, hci: nil).waitUntilExit()
            try await events.value
            let taken = seen.of("events")
            // The new log's first event of the fence (its numbers start over) is taken, not skipped.
            let first = try #require(taken.last?.split(separator: " "))
            let before = try #require(taken[2].split(separator: " ").last.flatMap { Int($0) })
            #expect(first.first == "unsatisfied" && Int(first.last!)! < before, "\(taken)")
        }

        /// What Core Location would not throw lands in `underlyingError`: a condition the agent
        /// refuses leaves the agent's code and message there, and the monitor goes on.
        @Test func aRefusedConditionLandsInTheUnderlyingError() async throws {
            let site = try E.site("cl-refused")
            let agent = try E.start(site)
            defer { _ = agent.stop(signal: SIGKILL) }
            CoreLocationPortTests.useAgent(site.state)
            let monitor = await CLMonitor("road")
            #expect(await monitor.underlyingError == nil)
            await monitor.add(CLMonitor.CircularGeographicCondition(center: CLLocationCoordinate2D(latitude: 45, longitude: 7), radius: -5),
                              identifier: "depot")
            let refused = try #require(await monitor.underlyingError)
            #expect(refused.code == "bad_argument" && refused.message.contains("radius"), "\(refused)")
            #expect(await monitor.identifiers == ["fence"])
            await monitor.add(CLMonitor.CircularGeographicCondition(center: CLLocationCoordinate2D(latitude: 45, longitude: 7), radius: 50),
                              identifier: "depot")
            #expect(await monitor.identifiers == ["depot", "fence"])
        }
    }
}
