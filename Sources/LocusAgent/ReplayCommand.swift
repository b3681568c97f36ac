import LocusCore
import LocusDevices

/// `locus replay --config SITE.toml [--nmea FILE] [--hci FILE] [--speed max|N]`: the engine on
/// recordings with a virtual clock. Fixes take their time from NMEA, sightings from the capture's
/// timestamps; both are merged by time. Events are written as JSON lines.
enum ReplayCommand {
    static let usage = "usage: locus replay --config SITE.toml [--nmea FILE] [--hci FILE] [--speed max|N]"

    struct Options {
        var config: String? = nil
        var nmea: String? = nil
        var hci: String? = nil
        var speed: Double? = nil
    }

    /// One observation in time order.
    enum Observation {
        case fix(Fix)
        case sighting(Sighting)

        var timeNs: Int64 {
            switch self {
            case .fix(let fix): return fix.time?.totalNanoseconds ?? 0
            case .sighting(let sighting): return sighting.time.totalNanoseconds
            }
        }
    }

    static func run(_ arguments: [String]) -> Int32 {
        var options = Options()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let value = index + 1 < arguments.count ? arguments[index + 1] : nil
            switch argument {
            case "--config", "--nmea", "--hci", "--speed":
                guard let value else { return CommandLineInterface.usageError("replay: \(argument) needs a value", hint: usage) }
                switch argument {
                case "--config": options.config = value
                case "--nmea": options.nmea = value
                case "--hci": options.hci = value
                default:
                    if value == "max" { options.speed = nil }
                    else if let speed = Double(value), speed > 0 { options.speed = speed }
                    else { return CommandLineInterface.usageError("replay: --speed takes max or a positive number, not '\(value)'", hint: usage) }
                }
                index += 2
            default:
                return CommandLineInterface.usageError("replay: unknown argument '\(argument)'", hint: usage)
            }
        }
        guard let configPath = options.config else { return CommandLineInterface.usageError("replay needs --config SITE.toml", hint: usage) }
        guard options.nmea != nil || options.hci != nil else { return CommandLineInterface.usageError("replay needs --nmea FILE, --hci FILE or both", hint: usage) }
        let loaded: LoadedConfig
        switch LoadedConfig.load(configPath) {
        case .success(let value): loaded = value
        case .failure(let status): return status.code
        }
        var observations: [Observation] = []
        if let path = options.nmea {
            guard let fixes = readFixes(path, allowMissingChecksum: loaded.board.gnss?.allowMissingChecksum ?? false) else { return 1 }
            observations += fixes.map { .fix($0) }
        }
        if let path = options.hci {
            guard let sightings = readSightings(path) else { return 1 }
            observations += sightings.map { .sighting($0) }
        }
        // Stable merge by time: equal times keep file order (fixes before sightings).
        observations = observations.enumerated().sorted { a, b in
            a.element.timeNs != b.element.timeNs ? a.element.timeNs < b.element.timeNs : a.offset < b.offset
        }.map { $0.element }
        guard let first = observations.first else {
            Console.error("locus: replay: the recordings hold no timed fix or beacon sighting\n")
            return 1
        }
        let engine = EngineSetup.engine(for: loaded.site, board: loaded.board)
        let start = UTCTime(nanoseconds: first.timeNs)
        for (name, result) in EngineSetup.addConfigured(loaded.site, to: engine, now: start) {
            Console.error("locus: replay: condition \(name) not added: \(result == .limitExceeded ? "capacity.conditions is full" : "too many monitors")\n")
        }
        var sequence: Int64 = 0
        var previousNs = first.timeNs
        for observation in observations {
            let nowNs = observation.timeNs
            if let speed = options.speed, nowNs > previousNs {
                Clock.sleep(nanoseconds: Int64(Double(nowNs - previousNs) / speed))
            }
            previousNs = nowNs
            engine.tick(now: UTCTime(nanoseconds: nowNs))
            drain(engine, &sequence)
            switch observation {
            case .fix(let fix): engine.observe(fix)
            case .sighting(let sighting): engine.observe(sighting)
            }
            drain(engine, &sequence)
        }
        // Let timeouts that fall after the last observation play out (beacons leaving).
        if let deadline = engine.nextDeadline() {
            engine.tick(now: deadline)
            drain(engine, &sequence)
        }
        return 0
    }

    /// Every pending event goes to standard output, then is acknowledged (the replay's only sink).
    static func drain(_ engine: MonitorEngine, _ sequence: inout Int64) {
        while let event = engine.oldestPendingEvent() {
            sequence += 1
            Console.out(EventJSON.line(event, sequence: sequence) + "\n")
            engine.acknowledgeOldest()
        }
    }

    static func readFixes(_ path: String, allowMissingChecksum: Bool) -> [Fix]? {
        var decoder = NMEADecoder(allowMissingChecksum: allowMissingChecksum)
        var fixes: [Fix] = []
        let capacity = 4096 / 6 + 2
        let buffer = UnsafeMutableBufferPointer<Fix>.allocate(capacity: capacity)
        defer { buffer.deallocate() }
        var count = 0
        do {
            try Files.stream(path) { chunk in
                decoder.consume(chunk) { fix in
                    buffer[count] = fix
                    count += 1
                }
                for index in 0..<count where buffer[index].time != nil { fixes.append(buffer[index]) }
                count = 0
            }
        } catch {
            Console.error("locus: replay: cannot read \(path): \(error)\n")
            return nil
        }
        return fixes
    }

    /// Sightings from a btsnoop capture, or from lines of "UNIX_SECONDS HEX" (one HCI event each).
    static func readSightings(_ path: String) -> [Sighting]? {
        let contents: [UInt8]
        do {
            contents = try Files.read(path)
        } catch {
            Console.error("locus: replay: cannot read \(path): \(error)\n")
            return nil
        }
        var sightings: [Sighting] = []
        func collect(_ event: UnsafeRawBufferPointer, _ timeNs: Int64) {
            _ = HCIEvents.forEachReportDescribing(event) { report in
                if let sighting = Sighting.from(report, time: UTCTime(nanoseconds: timeNs)) { sightings.append(sighting) }
            }
        }
        if contents.withUnsafeBytes({ BTSnoop.isBTSnoop($0) }) {
            var failure: BTSnoop.Failure? = nil
            contents.withUnsafeBytes { raw in
                if case .failure(let problem) = BTSnoop.forEachEvent(raw, { time, event in collect(event, time * 1000) }) { failure = problem }
            }
            if let failure { Console.error("locus: replay: \(path): \(failure)\n") }
            return sightings
        }
        var lineNumber = 0
        for line in String(decoding: contents, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let text = String(line).trimmingSpaces
            if text.isEmpty || text.hasPrefix("#") { continue }
            let parts = text.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let seconds = Double(String(parts[0])), let bytes = HexText.bytes(String(parts[1])) else {
                Console.error("locus: replay: \(path):\(lineNumber): expected \"UNIX_SECONDS HEX\"\n")
                return nil
            }
            bytes.withUnsafeBytes { collect(HCIEvents.withoutPacketType($0), Int64(seconds * 1e9)) }
        }
        return sightings
    }
}

/// A command's exit status, carried as an error by `Result`.
struct ExitStatus: Error { var code: Int32 }

/// A site file and the board file it names, both checked.
struct LoadedConfig {
    var site: SiteConfig
    var board: BoardConfig
    var sitePath: String
    var boardPath: String

    /// Loads and checks both files; on failure prints the diagnostics and returns the exit status.
    static func load(_ path: String) -> Result<LoadedConfig, ExitStatus> {
        let source: [UInt8]
        do { source = try Files.read(path) } catch {
            Console.error("locus: cannot read \(path): \(error)\n")
            return .failure(ExitStatus(code: 1))
        }
        let site: SiteConfig
        do { site = try SiteConfig.parse(source, file: path) } catch {
            for diagnostic in error.diagnostics { Console.error("\(diagnostic)\n") }
            return .failure(ExitStatus(code: 1))
        }
        let boardPath = Paths.resolve(site.board, relativeTo: Paths.directory(of: path))
        let boardSource: [UInt8]
        do { boardSource = try Files.read(boardPath) } catch {
            Console.error("\(path):1:1: cannot read board file \(boardPath): \(error)\n")
            return .failure(ExitStatus(code: 1))
        }
        let board: BoardConfig
        do { board = try BoardConfig.parse(boardSource, file: boardPath) } catch {
            for diagnostic in error.diagnostics { Console.error("\(diagnostic)\n") }
            return .failure(ExitStatus(code: 1))
        }
        let problems = site.problems(with: board, file: path)
        if !problems.isEmpty {
            for diagnostic in problems { Console.error("\(diagnostic)\n") }
            return .failure(ExitStatus(code: 1))
        }
        return .success(LoadedConfig(site: site, board: board, sitePath: path, boardPath: boardPath))
    }
}
