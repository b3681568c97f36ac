import LocusCore
import LocusDevices

/// `locus replay --config SITE.toml [--nmea FILE] [--hci FILE] [--speed max|N]`: the agent on
/// recordings, on simulated time (`ReplayRun`). The recordings play on one time line (NMEA at the
/// times its sentences carry, HCI events at their capture times); events are written as JSON
/// lines as the log takes them.
enum ReplayCommand {
    static let usage = "usage: locus replay --config SITE.toml [--nmea FILE] [--hci FILE] [--state DIR] [--speed max|N] [--format jsonl|text] [--updates | --power-report [--locate-every S [--locate-accuracy TIER] [--locate-max-age S]]]"

    struct Options {
        var config: String? = nil
        var nmea: String? = nil
        var hci: String? = nil
        var speed: Double? = nil
        var state: String? = nil
        var text = false
        var updates = false
        var powerReport = false
        // MARK: single location request
        /// `--locate-every S`: the power report adds a location request every S seconds.
        var locate: ReplayUpdates.LocateSchedule? = nil
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
        let options: Options
        switch parse(arguments) {
        case .success(let value): options = value
        case .failure(let status): return status.code
        }
        let loaded: LoadedConfig
        switch LoadedConfig.load(options.config!) {
        case .success(let value): loaded = value
        case .failure: return 1
        }
        if !options.powerReport { return ReplayRun.play(loaded, options) }
        guard let observations = observations(options, loaded) else { return 1 }
        return ReplayUpdates.powerReport(observations, loaded: loaded, locate: options.locate)
    }

    static func parse(_ arguments: [String]) -> Result<Options, ExitStatus> {
        func usageError(_ message: String) -> Result<Options, ExitStatus> {
            .failure(ExitStatus(code: CommandLineInterface.usageError(message, hint: usage)))
        }
        var options = Options()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let value = index + 1 < arguments.count ? arguments[index + 1] : nil
            switch argument {
            case "--config", "--nmea", "--hci", "--speed", "--state", "--format":
                guard let value else { return usageError("replay: \(argument) needs a value") }
                switch argument {
                case "--config": options.config = value
                case "--nmea": options.nmea = value
                case "--hci": options.hci = value
                case "--state": options.state = value
                case "--format":
                    guard value == "jsonl" || value == "text" else { return usageError("replay: --format is jsonl or text, not '\(value)'") }
                    options.text = value == "text"
                default:
                    if value == "max" { options.speed = nil }
                    else if let speed = Double(value), speed > 0 { options.speed = speed }
                    else { return usageError("replay: --speed takes max or a positive number, not '\(value)'") }
                }
                index += 2
            case "--updates":
                options.updates = true
                index += 1
            case "--power-report":
                options.powerReport = true
                index += 1
            // MARK: single location request
            case "--locate-every", "--locate-accuracy", "--locate-max-age":
                guard let value else { return usageError("replay: \(argument) needs a value") }
                var schedule = options.locate ?? ReplayUpdates.LocateSchedule(everyS: 600, tier: nil)
                if argument == "--locate-max-age" {
                    guard let seconds = Double(value), seconds >= 0 else { return usageError("replay: --locate-max-age takes seconds, not '\(value)'") }
                    schedule.maxAgeMs = Int64(seconds * 1000)
                } else if argument == "--locate-every" {
                    guard let seconds = Double(value), seconds >= 1 else { return usageError("replay: --locate-every takes seconds (at least 1), not '\(value)'") }
                    schedule.everyS = seconds
                } else {
                    guard let tier = AccuracyTier.named(value) else { return usageError("replay: --locate-accuracy takes a tier, not '\(value)'") }
                    schedule.tier = tier
                }
                options.locate = schedule
                index += 2
            default:
                return usageError("replay: unknown argument '\(argument)'")
            }
        }
        guard options.config != nil else { return usageError("replay needs --config SITE.toml") }
        guard options.nmea != nil || options.hci != nil else { return usageError("replay needs --nmea FILE, --hci FILE or both") }
        if options.locate != nil && !options.powerReport { return usageError("replay: --locate-every, --locate-accuracy and --locate-max-age go with --power-report") }
        if options.updates || options.powerReport {
            guard !(options.updates && options.powerReport) else { return usageError("replay: --updates and --power-report are separate runs") }
            guard options.state == nil, !options.text else { return usageError("replay: --updates and --power-report take neither --state nor --format text") }
        }
        return .success(options)
    }

    /// The recordings' fixes and sightings merged by time (nil: a recording could not be read,
    /// or held nothing timed; said on standard error).
    static func observations(_ options: Options, _ loaded: LoadedConfig) -> [Observation]? {
        var observations: [Observation] = []
        if let path = options.nmea {
            guard let fixes = readFixes(path, allowMissingChecksum: loaded.board.gnss?.allowMissingChecksum ?? false) else { return nil }
            observations += fixes.map { .fix($0) }
        }
        if let path = options.hci {
            guard let sightings = readSightings(path) else { return nil }
            observations += sightings.map { .sighting($0) }
        }
        // Stable merge by time: equal times keep file order (fixes before sightings).
        observations = observations.enumerated().sorted { a, b in
            a.element.timeNs != b.element.timeNs ? a.element.timeNs < b.element.timeNs : a.offset < b.offset
        }.map { $0.element }
        guard !observations.isEmpty else {
            Console.error("locus: replay: the recordings hold no timed fix or beacon sighting\n")
            return nil
        }
        return observations
    }

    /// "1534758460.25" as nanoseconds, exactly (no float rounding of the fraction).
    static func unixNanoseconds(_ text: String) -> Int64? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, let seconds = Int64(String(parts[0])), seconds >= 0 else { return nil }
        var nanoseconds: Int64 = 0
        if parts.count == 2 {
            let digits = Array(parts[1].utf8)
            guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            for index in 0..<9 { nanoseconds = nanoseconds * 10 + (index < digits.count ? Int64(digits[index] - 0x30) : 0) }
        }
        return seconds * 1_000_000_000 + nanoseconds
    }

    static func readFixes(_ path: String, allowMissingChecksum: Bool) -> [Fix]? {
        var fixes: [Fix] = []
        do {
            _ = try NMEAFile.forEachFix(path, allowMissingChecksum: allowMissingChecksum) { fix in
                if fix.time != nil { fixes.append(fix) }
            }
        } catch {
            Console.error("locus: replay: cannot read \(path): \(error)\n")
            return nil
        }
        return fixes
    }

    /// Sightings from a btsnoop capture, or from lines of "UNIX_SECONDS HEX" (one HCI event each).
    static func readSightings(_ path: String) -> [Sighting]? {
        guard let events = readEvents(path) else { return nil }
        var sightings: [Sighting] = []
        for (timeNs, event) in events {
            event.withUnsafeBytes { raw in
                _ = HCIEvents.forEachReportDescribing(raw) { report in
                    if let sighting = Sighting.from(report, time: UTCTime(nanoseconds: timeNs)) { sightings.append(sighting) }
                }
            }
        }
        return sightings
    }

    /// The HCI events of a recording (without the H4 type byte) with their capture times.
    static func readEvents(_ path: String) -> [(timeNs: Int64, event: [UInt8])]? {
        let contents: [UInt8]
        do {
            contents = try Files.read(path)
        } catch {
            Console.error("locus: cannot read \(path): \(error)\n")
            return nil
        }
        var events: [(timeNs: Int64, event: [UInt8])] = []
        if contents.withUnsafeBytes({ BTSnoop.isBTSnoop($0) }) {
            var failure: BTSnoop.Failure? = nil
            contents.withUnsafeBytes { raw in
                if case .failure(let problem) = BTSnoop.forEachEvent(raw, { time, event in events.append((time * 1000, Array(event))) }) {
                    failure = problem
                }
            }
            if let failure { Console.error("locus: \(path): \(failure)\n") }
            return events
        }
        var lineNumber = 0
        for line in String(decoding: contents, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let text = String(line).trimmingSpaces
            if text.isEmpty || text.hasPrefix("#") { continue }
            let parts = text.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let timeNs = unixNanoseconds(String(parts[0])), let bytes = HexText.bytes(String(parts[1])) else {
                Console.error("locus: \(path):\(lineNumber): expected \"UNIX_SECONDS HEX\"\n")
                return nil
            }
            bytes.withUnsafeBytes { events.append((timeNs, Array(HCIEvents.withoutPacketType($0)))) }
        }
        return events
    }
}

/// A command's exit status, carried as an error by `Result`.
struct ExitStatus: Error { var code: Int32 }
