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

    /// The files did not check; the diagnostics have been printed (file:line:column each).
    struct Invalid: Error {}

    /// Loads and checks both files; on failure the diagnostics have been printed.
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
    static func check(_ source: [UInt8], path: String) -> Result<LoadedConfig, Invalid> {
        let site: SiteConfig
        do { site = try SiteConfig.parse(source, file: path) } catch {
            for diagnostic in error.diagnostics { Console.error("\(diagnostic)\n") }
            return .failure(Invalid())
        }
        let boardPath = Paths.resolve(site.board, relativeTo: Paths.directory(of: path))
        let boardSource: [UInt8]
        do { boardSource = try Files.read(boardPath) } catch {
            Console.error("\(path):1:1: cannot read board file \(boardPath): \(error)\n")
            return .failure(Invalid())
        }
        let board: BoardConfig
        do { board = try BoardConfig.parse(boardSource, file: boardPath) } catch {
            for diagnostic in error.diagnostics { Console.error("\(diagnostic)\n") }
            return .failure(Invalid())
        }
        let problems = site.problems(with: board, file: path)
        if !problems.isEmpty {
            for diagnostic in problems { Console.error("\(diagnostic)\n") }
            return .failure(Invalid())
        }
        let policy = resolveAccess(site, path: path)
        return .success(LoadedConfig(site: site, board: board, sitePath: path, boardPath: boardPath, accessPolicy: policy))
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
    func changesAtRestart(_ fresh: LoadedConfig) -> [String] {
        var changes: [String] = []
        let (was, new) = (site.capacity, fresh.site.capacity)
        if was.conditions != new.conditions || was.events != new.events || was.subscribers != new.subscribers {
            changes.append("[capacity] changes take effect at the next start")
        }
        let (before, after) = (site.updates, fresh.site.updates)
        if before.preset != after.preset || before.accuracy != after.accuracy || before.batchCount != after.batchCount
            || before.batchAgeMs != after.batchAgeMs || before.distanceFilterM != after.distanceFilterM
            || before.significantChange != after.significantChange || before.visitMinimumMs != after.visitMinimumMs
            || before.stationaryWindowMs != after.stationaryWindowMs || before.motionInput != after.motionInput {
            changes.append("[updates] changes take effect at the next start")
        }
        if fresh.boardPath != boardPath { changes.append("a different board file takes effect at the next start") }
        if fresh.site.uplink != site.uplink { changes.append("[uplink] changes take effect at the next start") }
        return changes
    }
}
