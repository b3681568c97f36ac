// The seeds' live-updates logger: prints each location update until the device stands still,
// then stops (breaking out of the loop ends the agent's stream). With `significant` instead of a
// preset it is the significant-change service: an update only after a move of about a
// kilometre, the radios at the coarse tier that implies. Needs a running agent (`locus run`);
// build with `swift build --product live-updates-logger`.
//
//   live-updates-logger [STATE_DIR] [PRESET | significant]
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
let choice = arguments.dropFirst().first
let configuration = choice.flatMap { presets[$0] } ?? .fitness
let updates = choice == "significant"
    ? LocationUpdate.significantChanges(distance: 1_000, stateDirectory: stateDirectory)
    : LocationUpdate.liveUpdates(configuration, stateDirectory: stateDirectory)
do {
    for try await update in updates {
        if let location = update.location {
            let accuracy = location.horizontalAccuracy.map { String(format: " ±%.0f m", $0) } ?? ""
            say(String(format: "%.6f, %.6f", location.coordinate.latitude, location.coordinate.longitude) + accuracy)
        } else if update.locationUnavailable {
            say("no fix")
        }
        if update.isStationary && choice != "significant" {
            say("stationary: stopping")
            break
        }
    }
} catch {
    say("live-updates-logger: \(error)")
    exit(1)
}
