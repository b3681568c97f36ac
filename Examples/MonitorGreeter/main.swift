// The seeds' greeter: says hello and goodbye as conditions of the monitor "gate" are satisfied
// and unsatisfied. Needs a running agent (`locus run`); build with `swift build --product monitor-greeter`.
//
//   monitor-greeter [STATE_DIR]
import Foundation
import LocusMonitor

/// One line at a time, unbuffered: the lines reach a pipe or the journal as they happen.
func say(_ text: String) { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }

let stateDirectory = CommandLine.arguments.dropFirst().first ?? Monitor.defaultStateDirectory
do {
    let monitor = try await Monitor("gate", stateDirectory: stateDirectory)
    try await monitor.add(CircularGeographicCondition(center: Coordinate(latitude: 37.33467, longitude: -122.00898), radius: 100),
                          identifier: "work", assuming: .unsatisfied)
    for identifier in await monitor.identifiers {
        if let record = await monitor.record(for: identifier) { say("\(identifier): \(record.lastEvent.state)") }
    }
    for try await event in monitor.events {
        switch event.state {
        case .satisfied: say("hello, \(event.identifier)")
        case .unsatisfied: say("goodbye, \(event.identifier)")
        case .unknown: say("\(event.identifier): not known yet")
        }
    }
} catch {
    say("monitor-greeter: \(error)")
    exit(1)
}
