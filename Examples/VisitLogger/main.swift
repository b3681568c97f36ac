// The seeds' visit monitoring (CLLocationManager.startMonitoringVisits): the recent visits from
// the agent's log first (what a program reads after a restart), then each visit as it happens,
// at arrival (departure unknown) and again at departure. Needs a running agent (`locus run`);
// build with `swift build --product visit-logger`.
//
//   visit-logger [STATE_DIR]
import Foundation
import LocusMonitor

/// One line at a time, unbuffered: the lines reach a pipe or the journal as they happen.
func say(_ text: String) { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }

func describe(_ visit: LocationUpdate.Visit) -> String {
    let place = String(format: "%.5f, %.5f ±%.0f m", visit.coordinate.latitude, visit.coordinate.longitude, visit.horizontalAccuracy)
    if visit.departureDate == .distantFuture {
        return "arrived \(visit.arrivalDate) at \(place)"
    }
    return "stayed from \(visit.arrivalDate) to \(visit.departureDate) at \(place)"
}

let stateDirectory = CommandLine.arguments.dropFirst().first ?? Monitor.defaultStateDirectory
do {
    let aDayAgo = Date(timeIntervalSinceNow: -86_400)
    for visit in try await LocationUpdate.recentVisits(since: aDayAgo, limit: 20, stateDirectory: stateDirectory) {
        say("earlier: " + describe(visit))
    }
    for try await visit in LocationUpdate.visits(stateDirectory: stateDirectory) {
        say(describe(visit))
    }
} catch {
    say("visit-logger: \(error)")
    exit(1)
}
