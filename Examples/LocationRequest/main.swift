// The seeds' single location request (CLLocationManager.requestLocation): one position within
// 100 m, at most a minute old, then exit. The agent answers from its last fix when that will do,
// otherwise it wakes the receiver only as long as the answer needs. Needs a running agent
// (`locus run`); build with `swift build --product location-request`.
//
//   location-request [STATE_DIR]
import Foundation
import LocusMonitor

let stateDirectory = CommandLine.arguments.dropFirst().first ?? Monitor.defaultStateDirectory
do {
    let located = try await LocationUpdate.requestLocation(accuracy: .hundredMeters, maxAge: 60, timeout: 30,
                                                           stateDirectory: stateDirectory)
    let location = located.location
    var line = String(format: "%.6f, %.6f", location.coordinate.latitude, location.coordinate.longitude)
    if let accuracy = location.horizontalAccuracy { line += String(format: " ±%.0f m", accuracy) }
    line += String(format: ", %.0f s old", located.age)
    if located.accuracyLimited { line += " (less accurate than asked: the timeout came first)" }
    print(line)
} catch let error as MonitorError where error.code == "location_unavailable" {
    print("location unavailable: \(error.message)")
    exit(2)
} catch {
    print("location-request: \(error)")
    exit(1)
}
