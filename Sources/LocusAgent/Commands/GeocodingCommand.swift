import LocusCore
import LocusDevices

/// `locus geo index|reverse|forward|info|fold`: offline geocoding from a place index.
enum GeocodingCommand {
    static let usage = """
        usage: locus geo index SRC... -o places.idx
               locus geo reverse LAT LON [--index FILE | --config SITE] [--within METRES] [--scope any|populated|site] [--format text|json]
               locus geo reverse --batch [--index FILE | --config SITE] [--within METRES] [--scope ...]   (LAT LON lines on standard input)
               locus geo forward NAME [--index FILE | --config SITE] [--near LAT,LON] [--limit N] [--format text|json]
               locus geo forward --batch [--index FILE | --config SITE] [--near LAT,LON]               (names on standard input)
               locus geo info [--index FILE | --config SITE]
        --config SITE: the site file's [geocoding] index, and its max_distance and scope unless --within and --scope say
        """

    struct Options {
        var index = SiteConfig.Geocoding.installedIndex
        var within = Double.infinity
        var scope = PlaceScope.any
        /// `--config SITE`, and which of the site's settings the command line overrides.
        var config: String?
        var indexGiven = false
        var withinGiven = false
        var scopeGiven = false
        var json = false
        var batch = false
        var near: GeoPoint?
        var limit = 20
        var output: String?
        var positional: [String] = []
    }

    static func parse(_ arguments: [String]) -> Result<Options, GeoCommand.Problem> {
        var options = Options()
        var remaining = arguments[...]
        func value(_ flag: String) -> Result<String, GeoCommand.Problem> {
            guard let next = remaining.popFirst() else { return .failure(.init(message: "\(flag) needs a value")) }
            return .success(next)
        }
        while let argument = remaining.popFirst() {
            switch argument {
            case "--index", "-o", "--within", "--scope", "--format", "--near", "--limit", "--config":
                guard case .success(let text) = value(argument) else { return .failure(.init(message: "\(argument) needs a value")) }
                if let problem = apply(argument, text, to: &options) { return .failure(problem) }
            case "--batch": options.batch = true
            default:
                guard !argument.hasPrefix("--") || Double(argument) != nil else {
                    return .failure(.init(message: "unknown option '\(argument)'"))
                }
                options.positional.append(argument)
            }
        }
        return .success(options)
    }

    static func apply(_ flag: String, _ text: String, to options: inout Options) -> GeoCommand.Problem? {
        switch flag {
        case "--index":
            options.index = text
            options.indexGiven = true
        case "--config": options.config = text
        case "-o": options.output = text
        case "--within":
            guard let metres = Double(text), metres >= 0 else { return .init(message: "--within takes metres >= 0, not '\(text)'") }
            options.within = metres
            options.withinGiven = true
        case "--scope":
            options.scopeGiven = true
            switch text {
            case "any": options.scope = .any
            case "populated": options.scope = .populated
            case "site": options.scope = .site
            default: return .init(message: "--scope is any, populated or site, not '\(text)'")
            }
        case "--format":
            guard text == "text" || text == "json" else { return .init(message: "--format is text or json, not '\(text)'") }
            options.json = text == "json"
        case "--near":
            switch GeoCommand.point(text) {
            case .success(let point): options.near = GeoPoint(latitude: point.latitude, longitude: point.longitude)
            case .failure(let problem): return .init(message: "--near: \(problem.message)")
            }
        default:
            guard let limit = Int(text), limit > 0 else { return .init(message: "--limit takes a count > 0, not '\(text)'") }
            options.limit = limit
        }
        return nil
    }

    static func run(_ subcommand: String, _ arguments: [String]) -> Int32 {
        var options: Options
        switch parse(arguments) {
        case .success(let parsed): options = parsed
        case .failure(let problem): return CommandLineInterface.usageError("geo \(subcommand): \(problem.message)", hint: usage)
        }
        switch subcommand {
        case "index": return index(options)
        case "fold": return fold()
        default: break
        }
        if options.config != nil {
            switch siteSettings(options) {
            case .success(let fromSite): options = fromSite
            case .failure(let status): return status.code
            }
        }
        let file: PlaceIndexFile
        switch PlaceIndexFile.open(options.index) {
        case .success(let opened): file = opened
        case .failure(let refusal): return CommandLineInterface.failure("geo \(subcommand): \(options.index)", refusal.reason)
        }
        defer { withExtendedLifetime(file) {} }
        let places = file.index
        switch subcommand {
        case "reverse": return reverse(options, places)
        case "forward": return forward(options, places)
        default: return info(options, places)
        }
    }

    /// `--config SITE`: the site's `[geocoding]` index (relative to the site file), its
    /// `max_distance` and `scope` where the command line does not give them.
    static func siteSettings(_ options: Options) -> Result<Options, ExitStatus> {
        guard let path = options.config else { return .success(options) }
        guard !options.indexGiven else {
            return .failure(ExitStatus(code: CommandLineInterface.usageError("geo: give --index or --config, not both", hint: usage)))
        }
        guard let site = LoadedConfig.readSite(path) else { return .failure(ExitStatus(code: 1)) }
        guard let geocoding = site.geocoding else {
            return .failure(ExitStatus(code: CommandLineInterface.failure("geo", "\(path) has no [geocoding] section (give --index FILE)")))
        }
        var options = options
        options.index = Paths.resolve(geocoding.index, relativeTo: Paths.directory(of: path))
        if !options.withinGiven { options.within = geocoding.maximumDistanceM }
        if !options.scopeGiven { options.scope = geocoding.scope }
        return .success(options)
    }

    // MARK: reverse

    static func reverse(_ options: Options, _ places: PlaceIndex) -> Int32 {
        var line = JSONWriter(capacity: 1024)
        if options.batch {
            var found = 0
            forEachLine { text in
                let fields = text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\t" })
                line.reset()
                guard fields.count == 2, let latitude = Double(String(fields[0])), let longitude = Double(String(fields[1])),
                      latitude.isFinite, longitude.isFinite, abs(latitude) <= 90 else {
                    line.beginObject()
                    line.string("error", "'\(text)' is not LAT LON")
                    line.endObject()
                    line.newline()
                    Console.out(line.bytes)
                    return
                }
                if writeReverse(GeoPoint(latitude: latitude, longitude: longitude), options, places, json: true, into: &line) { found += 1 }
                Console.out(line.bytes)
            }
            return found > 0 ? 0 : 1
        }
        guard options.positional.count == 2 || options.positional.count == 1 else {
            return CommandLineInterface.usageError("geo reverse needs a point: LAT LON", hint: usage)
        }
        let pointText = options.positional.joined(separator: ",")
        guard case .success(let point) = GeoCommand.point(pointText) else {
            return CommandLineInterface.usageError("geo reverse: '\(options.positional.joined(separator: " "))' is not LAT LON in decimal degrees", hint: usage)
        }
        let found = writeReverse(GeoPoint(latitude: point.latitude, longitude: point.longitude), options, places, json: options.json, into: &line)
        Console.out(line.bytes)
        return found ? 0 : 1
    }

    /// One answer line; false when no place is within reach.
    static func writeReverse(_ point: GeoPoint, _ options: Options, _ places: PlaceIndex, json: Bool, into line: inout JSONWriter) -> Bool {
        let match = places.nearest(to: point, within: options.within, scope: options.scope)
        if let match {
            if json { PlaceJSON.write(match, in: places, into: &line) } else { PlaceText.write(match, in: places, into: &line) }
        } else if json {
            line.null()
        } else {
            line.text("no place")
            if options.within.isFinite {
                line.text(" within ")
                line.text(options.within, decimals: 0)
                line.text(" m")
            }
        }
        line.newline()
        return match != nil
    }

    // MARK: forward

    static func forward(_ options: Options, _ places: PlaceIndex) -> Int32 {
        let search = PlaceNameSearch()
        var line = JSONWriter(capacity: 1 << 16)
        if options.batch {
            var found = 0
            forEachLine { name in
                line.reset()
                if writeForward(name, options, places, search, json: true, limit: Int(UInt32.max), into: &line) { found += 1 }
                Console.out(line.bytes)
            }
            return found > 0 ? 0 : 1
        }
        guard options.positional.count == 1 else {
            return CommandLineInterface.usageError("geo forward needs one name (quote it: \"Springfield, US\")", hint: usage)
        }
        let found = writeForward(options.positional[0], options, places, search, json: options.json, limit: options.limit, into: &line)
        Console.out(line.bytes)
        return found ? 0 : 1
    }

    /// The places named `name`: a JSON line {"query", "total", "places": [...]}, or a text line per
    /// place; false when none is.
    static func writeForward(_ name: String, _ options: Options, _ places: PlaceIndex, _ search: borrowing PlaceNameSearch,
                             json: Bool, limit: Int, into line: inout JSONWriter) -> Bool {
        var query = name
        var first = query.withUTF8 { bytes in
            search.search(UnsafeRawBufferPointer(bytes), in: places, near: options.near,
                          into: UnsafeMutableBufferPointer(start: nil, count: 0))
        }
        var candidates = [PlaceCandidate](repeating: PlaceCandidate(place: 0, distanceM: .nan), count: min(first.total, limit))
        if first.total > 0 {
            first = query.withUTF8 { bytes in
                candidates.withUnsafeMutableBufferPointer { buffer in
                    search.search(UnsafeRawBufferPointer(bytes), in: places, near: options.near, into: buffer)
                }
            }
        }
        if json {
            line.beginObject()
            line.string("query", name)
            if let problem = first.problem { line.string("error", problem.description) }
            line.integer("total", first.total)
            line.beginArray("places")
            for candidate in candidates.prefix(first.written) {
                PlaceJSON.write(candidate.place, in: places, distanceM: candidate.distanceM, bearingDeg: .nan, into: &line)
            }
            line.endArray()
            line.endObject()
            line.newline()
        } else if let problem = first.problem {
            line.text("\(problem)")
            line.newline()
        } else if first.total == 0 {
            line.text("no place named '\(name)'")
            line.newline()
        } else {
            for candidate in candidates.prefix(first.written) { writeCandidateText(candidate, places, into: &line) }
            if first.total > first.written {
                line.text("... and \(first.total - first.written) more (--limit)")
                line.newline()
            }
        }
        return first.total > 0
    }

    /// "Bremerhaven, Bremen, DE  53.5535700 8.5755300  population 118610  Europe/Berlin"
    static func writeCandidateText(_ candidate: PlaceCandidate, _ places: PlaceIndex, into line: inout JSONWriter) {
        let record = places.record(candidate.place)
        PlaceText.writeName(candidate.place, in: places, into: &line, quoted: false)
        line.text("  ")
        line.text(record.latitude, decimals: 7)
        line.text(" ")
        line.text(record.longitude, decimals: 7)
        if record.population > 0 {
            line.text("  population ")
            line.text(Int64(record.population))
        }
        if candidate.distanceM.isFinite {
            line.text("  ")
            line.text(candidate.distanceM / 1000, decimals: 1)
            line.text(" km away")
        }
        line.newline()
    }

    // MARK: index

    static func index(_ options: Options) -> Int32 {
        guard let output = options.output else { return CommandLineInterface.usageError("geo index needs -o OUTPUT", hint: usage) }
        guard !options.positional.isEmpty else {
            return CommandLineInterface.usageError("geo index needs at least one gazetteer file", hint: usage)
        }
        var builder = PlaceIndexBuilder()
        var described: [String] = []
        for path in options.positional {
            let text: [UInt8]
            do {
                text = try Files.read(path, limit: 2 << 30)
            } catch {
                return CommandLineInterface.failure("geo index: \(path)", "\(error)")
            }
            guard let kind = fileKind(text) else {
                return CommandLineInterface.failure("geo index: \(path)", "not a GeoNames gazetteer (19 columns), an admin1CodesASCII file (4 columns) or a site's places (name, latitude, longitude[, aliases])")
            }
            var places = 0, areas = 0
            let problem = kind.read(text, place: { place in
                builder.add(place)
                places += 1
            }, admin1: { code, name in
                builder.addAdmin1(code: code, name: name)
                areas += 1
            })
            if let problem { return CommandLineInterface.failure("geo index", "\(path):\(problem)") }
            let name = path.split(separator: "/").last.map(String.init) ?? path
            described.append(kind == .admin1 ? "\(name) (\(areas) areas)" : "\(name) (\(places) \(kind == .sitePlaces ? "site places" : "places"))")
        }
        let (bytes, summary) = builder.build(description: Array(described.joined(separator: ", ").utf8))
        if let error = Files.replace(output, bytes: bytes) {
            return CommandLineInterface.failure("geo index: \(output)", "\(error)")
        }
        var report = "\(output): \(summary.places) places (\(summary.sitePlaces) the site's), \(summary.names) names, \(summary.bytes) bytes"
        if summary.admin1Unnamed > 0 { report += "; \(summary.admin1Unnamed) places have an admin1 code no admin1 file names" }
        Console.error(report + "\n")
        return 0
    }

    /// The kind of gazetteer file by its first row that is neither blank nor a comment.
    static func fileKind(_ text: [UInt8]) -> GazetteerFile? {
        var start = 0
        while start < text.count {
            let end = text[start...].firstIndex(of: 0x0A) ?? text.count
            var row = Array(text[start..<end])
            if row.last == 0x0D { row.removeLast() }
            if !row.isEmpty && row[0] != UInt8(ascii: "#") { return GazetteerFile.kind(ofRow: row) }
            start = end + 1
        }
        return nil
    }

    // MARK: info, fold

    static func info(_ options: Options, _ places: PlaceIndex) -> Int32 {
        var line = JSONWriter(capacity: 4096)
        line.beginObject()
        line.string("index", options.index)
        line.key("source")
        line.string(bytes: places.sourceDescription)
        line.integer("places", places.siteStart)
        line.integer("site_places", places.placeCount - places.siteStart)
        line.integer("names", places.nameCount)
        line.integer("bytes", places.bytes.count)
        line.endObject()
        line.newline()
        Console.out(line.bytes)
        return 0
    }

    /// Standard input's lines folded as the index folds names (a diagnostic, and the folding
    /// tests' way in); a line that is not UTF-8 prints as an empty line.
    static func fold() -> Int32 {
        forEachLine { text in
            var copy = text
            let folded = copy.withUTF8 { NameFolding.fold(Array($0)) } ?? []
            folded.withUnsafeBytes { Console.out($0) }
            Console.out("\n")
        }
        return 0
    }

    /// Calls `body` with each line of standard input (without its line ending) as it arrives.
    static func forEachLine(_ body: (String) -> Void) {
        var pending: [UInt8] = []
        func emit(_ line: ArraySlice<UInt8>) {
            body(String(decoding: line.last == 0x0D ? line.dropLast() : line, as: UTF8.self))
        }
        do {
            try Files.stream("-", chunkSize: 1 << 16) { chunk in
                pending.append(contentsOf: chunk)
                var start = 0
                while let newline = pending[start...].firstIndex(of: 0x0A) {
                    emit(pending[start..<newline])
                    start = newline + 1
                }
                pending.removeFirst(start)
            }
        } catch {
            Console.error("locus: standard input: \(error)\n")
        }
        if !pending.isEmpty { emit(pending[...]) }
    }
}
