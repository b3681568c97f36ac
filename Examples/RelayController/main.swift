// A relay controller in a program rather than in the site file: while any crate of a fleet (a
// wildcard beacon condition) is near the dock, a GPIO line is held high with libgpiod's gpioset.
// Needs a running agent and gpiod's tools; build with `swift build --product relay-controller`.
//
//   relay-controller CHIP LINE [STATE_DIR]
import Foundation
import LocusMonitor

/// One line at a time, unbuffered: the lines reach a pipe or the journal as they happen.
func say(_ text: String) { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2, let line = Int(arguments[1]) else {
    say("usage: relay-controller CHIP LINE [STATE_DIR]")
    exit(2)
}
let fleet = UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
var holder: Process? = nil

/// gpioset holds the line for as long as it runs (libgpiod v1: --mode=signal).
@MainActor func relay(_ on: Bool) throws {
    holder?.terminate()
    holder?.waitUntilExit()
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/gpioset")
    process.arguments = ["--mode=signal", arguments[0], "\(line)=\(on ? 1 : 0)"]
    try process.run()
    holder = process
}

do {
    let monitor = try await Monitor("dock", stateDirectory: arguments.count > 2 ? arguments[2] : Monitor.defaultStateDirectory)
    try await monitor.add(Monitor.BeaconIdentityCondition(uuid: fleet), identifier: "crates", assuming: .unsatisfied)
    try relay(false)
    for try await event in monitor.events where event.identifier == "crates" {
        let crate = event.refinement.map { " (crate \($0.major)/\($0.minor))" } ?? ""
        say("\(event.date): relay \(event.state == .satisfied ? "on" : "off")\(crate)")
        try relay(event.state == .satisfied)
    }
} catch {
    say("relay-controller: \(error)")
    exit(1)
}
