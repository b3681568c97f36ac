import LocusCore
import LocusDevices

/// `locus feed`: plays recordings into pseudo-terminals, as a receiver and a Bluetooth controller
/// would send them, for the simulated board (Boards/sim.toml), the demo and the end-to-end tests.
///
/// NMEA lines go out at the times their sentences carry, HCI events (H4-framed) at their capture
/// times; when both recordings carry dates they play on one time line. Like a real UART, nothing
/// waits for the reader: a line the reader is too slow for is dropped (and counted). Playing
/// starts once the agent has opened every port (bounded by --wait).
enum FeedCommand {
    static let usage = "usage: locus feed [--nmea FILE --gnss PATH] [--hci FILE --ble PATH] [--speed N|max] [--wait SECONDS] [--linger SECONDS]"


    /// What the command line asked for.
    struct Options {
        var values: [String: String]
        /// nil: as fast as the ports take it.
        var speed: Double?
        var waitSeconds: Int64
        var lingerSeconds: Int64
    }

    static func run(_ arguments: [String]) -> Int32 {
        let options: Options
        switch parse(arguments) {
        case .success(let value): options = value
        case .failure(let status): return status.code
        }
        let values = options.values
        var recordings = RecordingTimeline.Recordings()
        var ports: [(path: String, master: Int32)] = []
        // The links go with the ports: pseudo-terminal numbers are reused, and a link left behind
        // would lead a reader to whichever terminal gets the number next.
        defer {
            for port in ports {
                _ = Files.close(port.master)
                _ = Files.remove(port.path)
            }
        }
        if let nmea = values["--nmea"], let path = values["--gnss"] {
            guard recordings.addNMEA(nmea, port: ports.count) else { return 1 }
            guard let master = openPort(path) else { return 1 }
            ports.append((path, master))
        }
        if let hci = values["--hci"], let path = values["--ble"] {
            guard let sightings = ReplayCommand.readEvents(hci) else { return 1 }
            recordings.addEvents(sightings, port: ports.count)
            guard let master = openPort(path) else { return 1 }
            ports.append((path, master))
        }
        guard waitForReaders(ports, seconds: options.waitSeconds) else { return 1 }
        recordings.items = RecordingTimeline.merge(recordings.items)
        play(recordings, into: ports, speed: options.speed, gnssPath: values["--gnss"])
        Clock.sleep(nanoseconds: options.lingerSeconds * 1_000_000_000)
        return 0
    }

    static func parse(_ arguments: [String]) -> Result<Options, ExitStatus> {
        func usageError(_ message: String) -> Result<Options, ExitStatus> {
            .failure(ExitStatus(code: CommandLineInterface.usageError(message, hint: usage)))
        }
        var values: [String: String] = [:]
        var index = 0
        let known = ["--nmea", "--gnss", "--hci", "--ble", "--speed", "--wait", "--linger"]
        while index < arguments.count {
            let argument = arguments[index]
            guard known.contains(argument) else { return usageError("feed: unexpected argument '\(argument)'") }
            guard index + 1 < arguments.count else { return usageError("feed: \(argument) needs a value") }
            values[argument] = arguments[index + 1]
            index += 2
        }
        guard (values["--nmea"] == nil) == (values["--gnss"] == nil), (values["--hci"] == nil) == (values["--ble"] == nil),
              values["--nmea"] != nil || values["--hci"] != nil else {
            return usageError("feed needs --nmea FILE with --gnss PATH, --hci FILE with --ble PATH, or both")
        }
        var speed: Double? = 1
        if let text = values["--speed"] {
            if text == "max" { speed = nil } else if let value = Double(text), value > 0 { speed = value } else {
                return usageError("feed: --speed takes max or a positive number, not '\(text)'")
            }
        }
        guard let waitSeconds = Int64(values["--wait"] ?? "30"), waitSeconds >= 0, let lingerSeconds = Int64(values["--linger"] ?? "0"), lingerSeconds >= 0 else {
            return usageError("feed: --wait and --linger take whole seconds")
        }
        return .success(Options(values: values, speed: speed, waitSeconds: waitSeconds, lingerSeconds: lingerSeconds))
    }

    /// Start once every port has a reader (a pty master hangs up while no slave is open).
    static func waitForReaders(_ ports: [(path: String, master: Int32)], seconds: Int64) -> Bool {
        let waitUntil = MonotonicClock.now() + seconds * 1_000_000_000
        while !ports.allSatisfy({ Files.peerIsOpen($0.master) }) {
            if MonotonicClock.now() > waitUntil {
                Console.error("locus: feed: nobody opened \(ports.filter { !Files.peerIsOpen($0.master) }.map { $0.path }) within \(seconds) s\n")
                return false
            }
            Clock.sleep(nanoseconds: 50_000_000)
        }
        // A reader that just opened its port flushes what waits there once (a UART's stale
        // bytes): let that pass before the first line.
        Clock.sleep(nanoseconds: 100_000_000)
        return true
    }

    /// Writes the items at their recorded pace (scaled by `speed`), then one summary line a port.
    static func play(_ recordings: RecordingTimeline.Recordings, into ports: [(path: String, master: Int32)], speed: Double?, gnssPath: String?) {
        var written = Array(repeating: 0, count: ports.count)
        var dropped = Array(repeating: 0, count: ports.count)
        let startNs = MonotonicClock.now()
        let firstNs = recordings.items.first?.timeNs ?? 0
        for item in recordings.items {
            if let speed, let time = item.timeNs {
                let due = startNs + Int64(Double(time - firstNs) / speed)
                Clock.sleep(nanoseconds: due - MonotonicClock.now())
            }
            if Files.writeSome(ports[item.port].master, recordings.bytes(of: item)) { written[item.port] += 1 } else { dropped[item.port] += 1 }
        }
        for (index, port) in ports.enumerated() {
            Console.error("locus: feed: \(port.path): \(written[index]) \(gnssPath == port.path ? "NMEA lines" : "HCI events") written, \(dropped[index]) dropped\n")
        }
    }

    /// A pseudo-terminal with its slave linked at `path`.
    static func openPort(_ path: String) -> Int32? {
        let directory = Paths.directory(of: path)
        if !directory.isEmpty, let error = Files.makeDirectory(directory, mode: 0o750) {
            Console.error("locus: feed: cannot create \(directory): \(error)\n")
            return nil
        }
        switch Files.openPseudoTerminal() {
        case .success(let (master, slave)):
            // Never opened, a slave does not hang its master up: `waitForReaders` would start
            // playing before the reader is there, and the reader's open discards what came first.
            if let error = Files.openAndClose(slave) {
                Console.error("locus: feed: cannot open \(slave): \(error)\n")
                _ = Files.close(master)
                return nil
            }
            if let error = Files.symlink(slave, at: path) {
                Console.error("locus: feed: cannot link \(path) to \(slave): \(error)\n")
                _ = Files.close(master)
                return nil
            }
            return master
        case .failure(let error):
            Console.error("locus: feed: cannot open a pseudo-terminal: \(error)\n")
            return nil
        }
    }
}
