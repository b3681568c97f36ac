// The seeds' greeter: says hello and goodbye as conditions of the monitor "gate" are satisfied
// and unsatisfied. Needs a running agent (`locus run`); build with `swift build --product monitor-greeter`.
//
//   monitor-greeter [STATE_DIR]
//
// It may be started by systemd socket activation when the agent has events of "gate" and no
// consumer of it is connected (the site's `start_socket`; units beside this file, docs/monitors.md).
// It then drains the events it had not taken, from its consumer cursor, and keeps running.
import Foundation
import LocusMonitor

/// One line at a time, unbuffered: the lines reach a pipe or the journal as they happen.
func say(_ text: String) { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }

/// Started by systemd on its socket (`LISTEN_FDS`, fd 3): the agent's connection was only the
/// trigger. Accept and close what arrives on it, so the socket never fills while this runs.
func acceptActivations() {
    let environment = ProcessInfo.processInfo.environment
    guard environment["LISTEN_PID"].flatMap({ Int32($0) }) == getpid(), let count = environment["LISTEN_FDS"].flatMap({ Int($0) }), count >= 1 else { return }
    let listener: Int32 = 3
    Thread.detachNewThread {
        while true {
            let connection = accept(listener, nil, nil)
            if connection >= 0 { close(connection) } else if errno != EINTR { return }
        }
    }
}

acceptActivations()
let stateDirectory = CommandLine.arguments.dropFirst().first ?? Monitor.defaultStateDirectory
do {
    let monitor = try await Monitor("gate", stateDirectory: stateDirectory)
    // Added once: started again later (after a restart, or by an event), the condition and its
    // record stay as they are.
    if !(await monitor.identifiers).contains("work") {
        let condition = Monitor.CircularGeographicCondition(center: Coordinate(latitude: 37.33467, longitude: -122.00898), radius: 100)
        try await monitor.add(condition, identifier: "work", assuming: .unsatisfied)
    }
    for identifier in await monitor.identifiers {
        if let record = await monitor.record(for: identifier) { say("\(identifier): \(record.lastEvent.state)") }
    }
    for try await event in monitor.events {
        switch event.state {
        case .satisfied: say("hello, \(event.identifier)")
        case .unsatisfied: say("goodbye, \(event.identifier)")
        case .unknown: say("\(event.identifier): not known yet")
        }
        if event.accuracyLimited { say("  (the fix was too coarse to be sure)") }
    }
} catch {
    say("monitor-greeter: \(error)")
    exit(1)
}
