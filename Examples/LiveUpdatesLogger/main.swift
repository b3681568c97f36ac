// The seeds' live-updates logger: prints each location update until the device stands still,
// then stops (breaking out of the loop ends the agent's stream). Needs a running agent
// (`locus run`); build with `swift build --product live-updates-logger`.
//
//   live-updates-logger [STATE_DIR] [PRESET]
import Foundation
import LocusMonitor

/// One line at a time, unbuffered: the lines reach a pipe or the journal as they happen.
func say(_ text: String) { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }

let arguments = CommandLine.arguments.dropFirst()
let stateDirectory = arguments.first ?? Monitor.defaultStateDirectory
let presets: [String: LocationUpdate.LiveConfiguration] = [
    "default": .default, "automotiveNavigation": .automotiveNavigation, "otherNavigation": .otherNavigation,
    "fitness": .fitness, "airborne": .airborne,
]
let configuration = arguments.dropFirst().first.flatMap { presets[$0] } ?? .fitness
do {
    for try await update in LocationUpdate.liveUpdates(configuration, stateDirectory: stateDirectory) {
        if let location = update.location {
            let accuracy = location.horizontalAccuracy.map { String(format: " ±%.0f m", $0) } ?? ""
            say(String(format: "%.6f, %.6f", location.coordinate.latitude, location.coordinate.longitude) + accuracy)
        } else if update.locationUnavailable {
            say("no fix")
        }
        if update.isStationary {
            say("stationary: stopping")
            break
        }
    }
} catch {
    say("live-updates-logger: \(error)")
    exit(1)
}
