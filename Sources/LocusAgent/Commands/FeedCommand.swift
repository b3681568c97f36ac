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

    struct Item {
        var timeNs: Int64?
        var bytes: [UInt8]
        var port: Int
    }

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
        var items: [Item] = []
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
            guard let lines = nmeaItems(nmea, port: ports.count) else { return 1 }
            items += lines
            guard let master = openPort(path) else { return 1 }
            ports.append((path, master))
        }
        if let hci = values["--hci"], let path = values["--ble"] {
            guard let sightings = ReplayCommand.readEvents(hci) else { return 1 }
            items += sightings.map { Item(timeNs: $0.timeNs, bytes: [0x04] + $0.event, port: ports.count) }
            guard let master = openPort(path) else { return 1 }
            ports.append((path, master))
        }
        guard waitForReaders(ports, seconds: options.waitSeconds) else { return 1 }
        play(timeline(items), into: ports, speed: options.speed, gnssPath: values["--gnss"])
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
        return true
    }

    /// Writes the items at their recorded pace (scaled by `speed`), then one summary line a port.
    static func play(_ items: [Item], into ports: [(path: String, master: Int32)], speed: Double?, gnssPath: String?) {
        var written = Array(repeating: 0, count: ports.count)
        var dropped = Array(repeating: 0, count: ports.count)
        let startNs = MonotonicClock.now()
        let firstNs = items.first?.timeNs ?? 0
        for item in items {
            if let speed, let time = item.timeNs {
                let due = startNs + Int64(Double(time - firstNs) / speed)
                Clock.sleep(nanoseconds: due - MonotonicClock.now())
            }
            if Files.writeSome(ports[item.port].master, item.bytes) { written[item.port] += 1 } else { dropped[item.port] += 1 }
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

    /// Every line of an NMEA file with the UTC time its sentence carries (nil for sentences
    /// without one, which go out with the line before them).
    static func nmeaItems(_ path: String, port: Int) -> [Item]? {
        let contents: [UInt8]
        do { contents = try Files.read(path) } catch {
            Console.error("locus: feed: cannot read \(path): \(error)\n")
            return nil
        }
        var lines: [[UInt8]] = []
        var start = 0
        for (index, byte) in contents.enumerated() where byte == 0x0A {
            lines.append(Array(contents[start...index]))
            start = index + 1
        }
        if start < contents.count { lines.append(Array(contents[start...]) + [0x0D, 0x0A]) }
        // The date comes from RMC or ZDA; lines before the first one use the first date seen.
        var date: CivilDate? = lines.lazy.compactMap { sentenceDate($0) }.first
        var previousTimeOfDay: Int64? = nil
        var items: [Item] = []
        for line in lines {
            if let found = sentenceDate(line) { date = found }
            var time: Int64? = nil
            if let timeOfDay = sentenceTimeOfDay(line), let day = date {
                if let previous = previousTimeOfDay, timeOfDay + 43_200_000_000_000 < previous, sentenceDate(line) == nil {
                    date = day.addingDays(1)
                }
                previousTimeOfDay = timeOfDay
                time = UTCTime(date: date ?? day, timeOfDayNs: timeOfDay).totalNanoseconds
            }
            items.append(Item(timeNs: time, bytes: line, port: port))
        }
        return items
    }

    static func fields(_ line: [UInt8]) -> [ArraySlice<UInt8>] {
        let end = line.firstIndex(of: UInt8(ascii: "*")) ?? line.firstIndex(of: 0x0D) ?? line.count
        return line[..<end].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
    }

    static func sentenceType(_ field: ArraySlice<UInt8>) -> String {
        guard field.count >= 6, field.first == UInt8(ascii: "$") else { return "" }
        return String(decoding: field.suffix(3), as: UTF8.self)
    }

    static func number(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return bytes.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }

    static func sentenceTimeOfDay(_ line: [UInt8]) -> Int64? {
        let parts = fields(line)
        guard let first = parts.first else { return nil }
        let index: Int
        switch sentenceType(first) {
        case "RMC", "GGA", "GNS", "GST", "ZDA", "GBS": index = 1
        case "GLL": index = 5
        default: return nil
        }
        guard parts.count > index else { return nil }
        let field = parts[index]
        guard field.count >= 6, let hours = number(field.prefix(2)), let minutes = number(field.dropFirst(2).prefix(2)),
              let seconds = number(field.dropFirst(4).prefix(2)), hours < 24, minutes < 60, seconds < 61 else { return nil }
        var nanoseconds: Int64 = 0
        let fraction = field.dropFirst(7)
        if field.count > 7, field[field.startIndex + 6] == UInt8(ascii: "."), let digits = number(fraction.prefix(9)) {
            nanoseconds = Int64(digits)
            for _ in fraction.prefix(9).count..<9 { nanoseconds *= 10 }
        }
        return (Int64(hours) * 3600 + Int64(minutes) * 60 + Int64(seconds)) * 1_000_000_000 + nanoseconds
    }

    static func sentenceDate(_ line: [UInt8]) -> CivilDate? {
        let parts = fields(line)
        guard let first = parts.first else { return nil }
        var date: CivilDate? = nil
        switch sentenceType(first) {
        case "RMC":
            guard parts.count > 9, parts[9].count == 6, let day = number(parts[9].prefix(2)), let month = number(parts[9].dropFirst(2).prefix(2)),
                  let year = number(parts[9].suffix(2)), (1...31).contains(day), (1...12).contains(month) else { return nil }
            date = CivilDate(year: 2000 + year, month: month, day: day)
        case "ZDA":
            guard parts.count > 4, let day = number(parts[2]), let month = number(parts[3]), let year = number(parts[4]),
                  (1...31).contains(day), (1...12).contains(month), year >= 1980 else { return nil }
            date = CivilDate(year: year, month: month, day: day)
        default:
            return nil
        }
        // GPS week rollover, as the decoder corrects it: a date before 2017 is 1024 weeks late.
        if let found = date, found < CivilDate(year: 2017, month: 1, day: 1) { return found.addingDays(7168) }
        return date
    }

    /// Items in play order: untimed lines keep their place after the timed line before them; the
    /// recordings merge by time when both have dates, else each starts at the beginning.
    static func timeline(_ items: [Item]) -> [Item] {
        var timed: [Item] = []
        var lastTime: [Int: Int64] = [:]
        for item in items {
            var copy = item
            if copy.timeNs == nil { copy.timeNs = lastTime[item.port] } else { lastTime[item.port] = copy.timeNs }
            timed.append(copy)
        }
        // Lines before the first timed line of their port play at the port's first time.
        var firstTime: [Int: Int64] = [:]
        for item in timed { if let time = item.timeNs, firstTime[item.port] == nil { firstTime[item.port] = time } }
        for index in timed.indices where timed[index].timeNs == nil { timed[index].timeNs = firstTime[timed[index].port] ?? 0 }
        let starts = firstTime.values
        if let earliest = starts.min(), let latest = starts.max(), latest - earliest > 86_400_000_000_000 {
            // Unrelated recordings: both start together.
            for index in timed.indices { timed[index].timeNs! += earliest - (firstTime[timed[index].port] ?? earliest) }
        }
        return timed.enumerated().sorted { a, b in
            a.element.timeNs! != b.element.timeNs! ? a.element.timeNs! < b.element.timeNs! : a.offset < b.offset
        }.map { $0.element }
    }
}
