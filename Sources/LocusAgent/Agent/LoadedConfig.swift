import LocusCore
import LocusDevices

/// A site file and the board file it names, both checked.
struct LoadedConfig {
    var site: SiteConfig
    var board: BoardConfig
    var sitePath: String
    var boardPath: String
    /// `[access]` with its group names resolved on this system (at load: start and SIGHUP).
    var accessPolicy: AccessPolicy
    /// The place index, open when the site has `[geocoding]` or a circle centred on a place
    /// (whose centre has been found in it). The agent keeps the one it opened at start.
    var places: PlaceIndexFile? = nil
    /// The fleet's configuration over the site file (docs/remote.md): its version (0: none) and
    /// the SHA-256 of its message.
    var remoteVersion: UInt64 = 0
    var remoteDigest: [UInt8] = []
    /// The phones file's names and keys (`[phones] keys`), read at load; nil without `[phones]`.
    var phones: PhoneKeys? = nil

    /// The index with the site's `max_distance` and `scope`: what the geocoding operations use
    /// when a request does not say (nil without an index).
    var placeLookup: PlaceLabels? {
        guard let places else { return nil }
        return PlaceLabels(index: places.index, settings: site.geocoding ?? SiteConfig.Geocoding())
    }

    /// What events, visits and live updates are labelled with: `placeLookup` with `[geocoding]
    /// annotate = true`, else nil.
    var placeLabels: PlaceLabels? { site.geocoding?.annotate == true ? placeLookup : nil }

    /// The files did not check; the diagnostics have been printed (file:line:column each).
    struct Invalid: Error {}

    /// Loads and checks both files; on failure the diagnostics have been printed.
    /// A site file read and parsed alone (no board, no index): for the commands that take only
    /// some of its settings with `--config`. Problems are printed; nil then.
    static func readSite(_ path: String) -> SiteConfig? {
        let source: [UInt8]
        do { source = try Files.read(path) } catch {
            Console.error("locus: cannot read \(path): \(error)\n")
            return nil
        }
        do { return try SiteConfig.parse(source, file: path) } catch {
            for diagnostic in error.diagnostics { Console.error("\(diagnostic)\n") }
            return nil
        }
    }

    static func load(_ path: String) -> Result<LoadedConfig, Invalid> {
        let source: [UInt8]
        do { source = try Files.read(path) } catch {
            Console.error("locus: cannot read \(path): \(error)\n")
            return .failure(Invalid())
        }
        return check(source, path: path)
    }

    /// Checks a site file already read, the board file it names, and the two together: the one
    /// path both `check-config` and the commands that run a site take.
    /// `fleet`: the fleet's configuration over the site file; `say`: where each problem goes (a
    /// line; standard error by default).
    static func check(_ source: [UInt8], path: String, fleet: SiteConfig.FleetFragment? = nil,
                      say: (String) -> Void = { Console.error("\($0)\n") }) -> Result<LoadedConfig, Invalid> {
        var site: SiteConfig
        do { site = try SiteConfig.parse(source, file: path, fleet: fleet) } catch {
            for diagnostic in error.diagnostics { say("\(diagnostic)") }
            return .failure(Invalid())
        }
        let boardPath = Paths.resolve(site.board, relativeTo: Paths.directory(of: path))
        let boardSource: [UInt8]
        do { boardSource = try Files.read(boardPath) } catch {
            say("\(path):1:1: cannot read board file \(boardPath): \(error)")
            return .failure(Invalid())
        }
        let board: BoardConfig
        do { board = try BoardConfig.parse(boardSource, file: boardPath) } catch {
            for diagnostic in error.diagnostics { say("\(diagnostic)") }
            return .failure(Invalid())
        }
        // An action the fleet set is the fleet's to answer for: its problems name its message.
        let actionsFile = fleet.map { $0.report.document.root["action"] != nil ? $0.report.file : path } ?? path
        let problems = site.problems(with: board, file: actionsFile)
        if !problems.isEmpty {
            for diagnostic in problems { say("\(diagnostic)") }
            return .failure(Invalid())
        }
        guard case .success(let places) = openPlaces(&site, path: path, say: say),
              case .success(let phones) = openPhones(site, path: path, say: say) else { return .failure(Invalid()) }
        let policy = resolveAccess(site, path: path)
        return .success(LoadedConfig(site: site, board: board, sitePath: path, boardPath: boardPath, accessPolicy: policy, places: places,
                                     phones: phones))
    }

    /// The phones file, when the site has `[phones]`: owned by root or the agent's user and
    /// unreadable by others (its keys are secrets), within `[capacity] phones`, and naming every
    /// phone a condition names. Problems are printed; a key never is.
    static func openPhones(_ site: SiteConfig, path: String, say: (String) -> Void) -> Result<PhoneKeys?, Invalid> {
        guard let phones = site.phones else {
            let problems = site.phoneProblems(nil, keysPath: "", file: path)
            for diagnostic in problems { say("\(diagnostic)") }
            return problems.isEmpty ? .success(nil) : .failure(Invalid())
        }
        let keysPath = Paths.resolve(phones.keysFile, relativeTo: Paths.directory(of: path))
        func refuse(_ message: String) -> Result<PhoneKeys?, Invalid> {
            say("\(ConfigDiagnostic(file: path, location: phones.location, message: "phones file \(keysPath) \(message)"))")
            return .failure(Invalid())
        }
        switch Files.mode(keysPath) {
        case .failure(let error): return refuse("cannot be read: \(error)")
        case .success(let status):
            if let problem = PhoneKeys.permissionProblem(mode: status.mode, owner: status.owner, agentUser: Accounts.currentUser) {
                return refuse(problem)
            }
        }
        let source: [UInt8]
        do { source = try Files.read(keysPath, limit: 1 << 20) } catch { return refuse("cannot be read: \(error)") }
        let keys: PhoneKeys
        do { keys = try PhoneKeys.parse(source, file: keysPath) } catch {
            for diagnostic in error.diagnostics { say("\(diagnostic)") }
            return .failure(Invalid())
        }
        if keys.phones.count > site.capacity.phones {
            return refuse("holds \(keys.phones.count) phones, more than capacity.phones = \(site.capacity.phones)")
        }
        let problems = site.phoneProblems(keys, keysPath: keysPath, file: path)
        for diagnostic in problems { say("\(diagnostic)") }
        return problems.isEmpty ? .success(keys) : .failure(Invalid())
    }

    /// The place index, when the site needs one, with every circle centred on a place given its
    /// centre. An index that cannot be used, a place name that names no place or several, and
    /// (with `annotate`) a place whose label would not fit an event are errors, printed.
    static func openPlaces(_ site: inout SiteConfig, path: String,
                           say: (String) -> Void = { Console.error("\($0)\n") }) -> Result<PlaceIndexFile?, Invalid> {
        guard site.needsPlaceIndex else { return .success(nil) }
        let written = site.geocoding?.index ?? SiteConfig.Geocoding.installedIndex
        let indexPath = Paths.resolve(written, relativeTo: Paths.directory(of: path))
        let places: PlaceIndexFile
        switch PlaceIndexFile.open(indexPath) {
        case .success(let file): places = file
        case .failure(let refusal):
            say("\(ConfigDiagnostic(file: path, location: site.placeIndexLocation, message: "place index \(indexPath): \(refusal.reason)"))")
            return .failure(Invalid())
        }
        let problems = site.resolvePlaces(in: places.index, indexPath: indexPath, file: path)
        if !problems.isEmpty {
            for diagnostic in problems { say("\(diagnostic)") }
            return .failure(Invalid())
        }
        if let geocoding = site.geocoding, geocoding.annotate, let largest = PlaceLabels.largestMember(in: places.index),
           largest.bytes > PlaceLabels.maximumMemberBytes {
            let message = "place index \(indexPath): place \"\(String(decoding: places.index.displayName(largest.place).utf8.prefix(60), as: UTF8.self))\" has names too long to label events with (\(largest.bytes) bytes; at most \(PlaceLabels.maximumMemberBytes)): shorten them, or set annotate = false"
            say("\(ConfigDiagnostic(file: path, location: geocoding.location, message: message))")
            return .failure(Invalid())
        }
        return .success(places)
    }

    /// The site's `[access]` groups as ids. A group that does not exist on this system is a
    /// warning, not an error: it grants nothing (access stays closed), and the gateway still
    /// monitors and drives its relays.
    static func resolveAccess(_ site: SiteConfig, path: String) -> AccessPolicy {
        var policy = AccessPolicy(agentUser: Accounts.currentUser, privacy: site.fixPrivacy)
        policy.readSocket = site.access.readSocket
        func resolve(_ groups: [SiteConfig.Access.Group], _ key: String) -> [UInt32] {
            var ids: [UInt32] = []
            for group in groups {
                do {
                    if let id = try Accounts.groupID(group.name) {
                        ids.append(id)
                    } else {
                        let warning = ConfigDiagnostic(file: path, location: group.location,
                                                       message: "warning: group '\(group.name)' does not exist on this system; access.\(key) grants it nothing (groupadd \(group.name), or remove it)")
                        Console.error("\(warning)\n")
                    }
                } catch {
                    Console.error("\(ConfigDiagnostic(file: path, location: group.location, message: "warning: cannot look up group '\(group.name)': \(error); access.\(key) grants it nothing"))\n")
                }
            }
            return ids
        }
        policy.readGroups = resolve(site.access.read, "read")
        policy.positionsGroups = resolve(site.access.positions, "positions")
        policy.changeGroups = resolve(site.access.change, "change")
        return policy
    }

    /// What of `fresh` a SIGHUP cannot apply: capacities, `[updates]`, the board file take
    /// effect at the next start (one sentence each, for the log).
    /// The fleet's keys that a restart applies (`SiteConfig.Remote.restartKeys`) whose values
    /// `fresh` changes: the agent restarts itself to apply them.
    func restartKeysChanged(_ fresh: LoadedConfig) -> [String] {
        var keys: [String] = []
        if updatesDiffer(fresh) { keys.append("updates") }
        if fresh.site.geocoding != site.geocoding { keys.append("geocoding") }
        return keys
    }

    /// Whether `[updates]` differs in what the live updates set up at start.
    private func updatesDiffer(_ fresh: LoadedConfig) -> Bool {
        let (before, after) = (site.updates, fresh.site.updates)
        return before.preset != after.preset || before.accuracy != after.accuracy || before.batchCount != after.batchCount
            || before.batchAgeMs != after.batchAgeMs || before.distanceFilterM != after.distanceFilterM
            || before.significantChange != after.significantChange || before.visitMinimumMs != after.visitMinimumMs
            || before.stationaryWindowMs != after.stationaryWindowMs || before.motionInput != after.motionInput
    }

    func changesAtRestart(_ fresh: LoadedConfig) -> [String] {
        var changes: [String] = []
        let (was, new) = (site.capacity, fresh.site.capacity)
        if was.conditions != new.conditions || was.events != new.events || was.subscribers != new.subscribers {
            changes.append("[capacity] changes take effect at the next start")
        }
        if updatesDiffer(fresh) { changes.append("[updates] changes take effect at the next start") }
        if fresh.boardPath != boardPath { changes.append("a different board file takes effect at the next start") }
        if fresh.site.health != site.health { changes.append("[health] changes take effect at the next start") }
        if fresh.site.uplink != site.uplink { changes.append("[uplink] changes take effect at the next start") }
        if fresh.site.remote != site.remote { changes.append("[remote] changes take effect at the next start") }
        if fresh.site.geocoding != site.geocoding {
            changes.append("[geocoding] changes take effect at the next start (circles centred on places were found in the index as it is now)")
        }
        return changes
    }
}
