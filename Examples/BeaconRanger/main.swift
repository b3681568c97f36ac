// The seeds' beacon ranging (CLLocationManager.startRangingBeacons(satisfying:)): a museum
// gateway shows the exhibit whose beacon is near or immediate, once a second, nearest first.
// Needs a running agent (`locus run`); build with `swift build --product beacon-ranger`.
//
//   beacon-ranger UUID [STATE_DIR]
import Foundation
import LocusMonitor

/// One line at a time, unbuffered: the lines reach a pipe or the journal as they happen.
func say(_ text: String) { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }

let arguments = CommandLine.arguments.dropFirst()
guard let text = arguments.first, let uuid = UUID(uuidString: text) else {
    say("usage: beacon-ranger UUID [STATE_DIR]")
    exit(2)
}
let stateDirectory = arguments.dropFirst().first ?? Monitor.defaultStateDirectory
let constraint = BeaconIdentityConstraint(uuid: uuid)
var showing: (major: UInt16, minor: UInt16)? = nil
do {
    for try await beacons in rangeBeacons(satisfying: constraint, stateDirectory: stateDirectory) {
        if let nearestBeacon = beacons.first {
            switch nearestBeacon.proximity {
            case .near?, .immediate?:
                if showing == nil || showing! != (nearestBeacon.major, nearestBeacon.minor) {
                    showing = (nearestBeacon.major, nearestBeacon.minor)
                    say(String(format: "exhibit %d.%d (%.1f m, %d dBm)", nearestBeacon.major, nearestBeacon.minor,
                               nearestBeacon.accuracy, nearestBeacon.rssi))
                }
            default:
                if showing != nil { say("no exhibit nearby") }
                showing = nil
            }
        }
    }
} catch {
    say("beacon-ranger: \(error)")
    exit(1)
}
