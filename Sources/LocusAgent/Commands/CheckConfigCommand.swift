import LocusCore
import LocusDevices

/// `locus check-config FILE`: a site file (with its board file) or a board file alone.
enum CheckConfigCommand {
    static func run(_ arguments: [String]) -> Int32 {
        guard arguments.count == 1, let path = arguments.first, !path.hasPrefix("-") || path == "-" else {
            if let option = arguments.first(where: { $0.hasPrefix("-") }) {
                return CommandLineInterface.usageError("check-config: unknown option '\(option)'", hint: "usage: locus check-config FILE")
            }
            return CommandLineInterface.usageError("check-config needs exactly one FILE", hint: "usage: locus check-config FILE")
        }
        let source: [UInt8]
        do {
            source = try Files.read(path)
        } catch {
            return CommandLineInterface.failure("check-config", "cannot read \(path): \(error)")
        }
        switch ConfigFiles.kind(of: source) {
        case .board:
            return checkBoard(source, path: path)
        case .site, .unknown:
            return checkSite(source, path: path)
        }
    }

    private static func checkBoard(_ source: [UInt8], path: String) -> Int32 {
        do {
            let board = try BoardConfig.parse(source, file: path)
            Console.out("ok: \(path): \(ConfigFiles.summary(of: board))\n")
            return 0
        } catch {
            return report(error.diagnostics)
        }
    }

    private static func checkSite(_ source: [UInt8], path: String) -> Int32 {
        switch LoadedConfig.check(source, path: path) {
        case .failure:
            return 1
        case .success(let loaded):
            Console.out("ok: \(path): \(ConfigFiles.summary(of: loaded.site)); board '\(loaded.board.name)' (\(loaded.boardPath))\n")
            for line in placeLines(loaded) { Console.out(line + "\n") }
            for line in clusterLines(loaded) { Console.out(line + "\n") }
            return checkRemote(loaded)
        }
    }

    /// With a broker of several nodes (a cluster): the names that go into topic levels and hold
    /// '.' or a space, which a NATS cluster refuses by closing the connection (docs/fleet.md): a
    /// gateway publishing one would send it again for ever. Said, not refused: another cluster
    /// takes them.
    static func clusterLines(_ loaded: LoadedConfig) -> [String] {
        guard let uplink = loaded.site.uplink, uplink.brokers.count > 1 else { return [] }
        var names: [(what: String, name: String)] = []
        if let gateway = uplink.gateway { names.append(("gateway", gateway)) }
        if let prefix = uplink.topicPrefix { names.append(("topic_prefix", prefix)) }
        for monitor in loaded.site.monitors {
            names.append(("monitor", monitor.name))
            for condition in monitor.conditions { names.append(("condition", condition.identifier)) }
        }
        for output in loaded.board.gpio?.outputs ?? [] { names.append(("output", output.name)) }
        let refused = names.filter { $0.name.utf8.contains { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: " ") } }
        guard !refused.isEmpty else { return [] }
        return ["note: [uplink] names \(uplink.brokers.count) nodes; a NATS cluster refuses a topic with '.' or ' ' in a level, "
                + "and these names go into topics: \(refused.map { "\($0.what) '\($0.name)'" }.joined(separator: ", "))"]
    }

    /// With `[remote]`: the fleet's configuration the state directory holds, checked over the
    /// site file as the agent checks it at start (signature, gateway, the site's rules).
    private static func checkRemote(_ loaded: LoadedConfig) -> Int32 {
        guard let settings = loaded.site.remote, let uplink = loaded.site.uplink else { return 0 }
        let directory = Paths.resolve(loaded.site.stateDirectory, relativeTo: Paths.directory(of: loaded.sitePath))
        let path = Paths.join(directory, RemoteSteering.fileName)
        guard let message = try? Files.read(path, limit: settings.maximumBytes + 1) else {
            Console.out("remote: no configuration from the fleet in \(directory) (the site file alone)\n")
            return 0
        }
        let keyPath = Paths.resolve(settings.keyFile, relativeTo: Paths.directory(of: loaded.sitePath))
        guard let key = try? Files.read(keyPath, limit: 16 << 10) else {
            return CommandLineInterface.failure("check-config", "[remote] key: cannot read the fleet's public key \(keyPath)")
        }
        guard let gateway = try? Uplink.gateway(uplink, machineID: Uplink.machineID) else {
            return CommandLineInterface.failure("check-config", "no gateway id: /etc/machine-id cannot be read; set uplink.gateway")
        }
        let checked = message.withUnsafeBytes {
            RemoteSteering.check($0, key: key, gateway: gateway, settings: settings, sitePath: loaded.sitePath, applied: 0)
        }
        switch checked {
        case .success(let overlaid):
            let replaced = SiteConfig.Remote.settableKeys.filter { RemoteSteering.sets($0, message) }
            Console.out("remote: the fleet's configuration version \(overlaid.remoteVersion) (\(path)) replaces \(replaced.isEmpty ? "nothing" : replaced.joined(separator: ", ")): \(ConfigFiles.summary(of: overlaid.site))\n")
            return 0
        case .failure(let refusal):
            Console.error("remote: \(path) does not check: \(refusal.reason); the agent runs on the site file alone\n")
            return 1
        }
    }

    /// The place index and what it does, and each circle centred on a place with the centre found:
    ///
    ///     places: /usr/share/locus/places.idx: 34006 places (0 the site's); events annotated within 25 km (any place)
    ///     road/depot: "Depot gate" is Depot gate at 45.0018000, 7.0000000 (radius 30 m)
    static func placeLines(_ loaded: LoadedConfig) -> [String] {
        guard let places = loaded.places else { return [] }
        var lines: [String] = []
        var head = "places: \(places.path): \(places.summary)"
        if let geocoding = loaded.site.geocoding {
            let scope = geocoding.scope == .any ? "any place" : geocoding.scope == .populated ? "populated places" : "the site's places"
            head += geocoding.annotate ? "; events annotated within \(Quantity.formatDistance(geocoding.maximumDistanceM)) (\(scope))" : "; no annotation"
        }
        lines.append(head)
        for monitor in loaded.site.monitors {
            for condition in monitor.conditions {
                guard let place = condition.place, case .circle(let latitude, let longitude, let radius) = condition.kind else { continue }
                var line = JSONWriter(capacity: 512)
                line.text("\(monitor.name)/\(condition.identifier): \"\(place.name)\" is \(place.resolved ?? "?") at ")
                line.text(latitude, decimals: 7)
                line.text(", ")
                line.text(longitude, decimals: 7)
                line.text(" (radius \(Quantity.formatDistance(radius)))")
                lines.append(line.string)
            }
        }
        return lines
    }

    private static func report(_ diagnostics: [ConfigDiagnostic]) -> Int32 {
        for diagnostic in diagnostics { Console.error("\(diagnostic)\n") }
        return 1
    }
}
