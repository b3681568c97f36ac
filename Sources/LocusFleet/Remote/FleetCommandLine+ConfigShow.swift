import LocusCore

/// The reading side of `config` (show, diff, status) and `group`.
extension FleetCommandLine {
    /// Parses a read-only subcommand's arguments (`--database` and `valued`) and its database;
    /// `shape` names the arguments it takes (`VERSION VERSION`).
    static func readingArguments(_ shape: String, _ arguments: [String], valued: Set<String> = [], flags: Set<String> = [],
                                 positional: ClosedRange<Int>) throws(UsageError) -> (RemoteArguments, ConnectionString) {
        let parsed = try RemoteArguments.parse(arguments, valued: databaseOptions.union(valued), flags: flags)
        guard positional.contains(parsed.positional.count) else {
            if parsed.positional.count > positional.upperBound {
                throw UsageError(message: "unexpected argument '\(parsed.positional[positional.upperBound])'")
            }
            throw UsageError(message: "expected \(shape)")
        }
        return (parsed, try openDatabase(parsed))
    }

    static func configShow(_ arguments: [String]) -> Int32 {
        let parsed: RemoteArguments
        let connectionString: ConnectionString
        let version: Int64?
        do throws(UsageError) {
            (parsed, connectionString) = try readingArguments("", arguments, valued: ["--version", "--gateway"], positional: 0...0)
            version = try parsed.integer("--version", in: 1...Int64.max)
            if version != nil && parsed["--gateway"] != nil { throw UsageError(message: "give --version or --gateway, not both") }
        } catch {
            return usageError("config show: \(error.message)")
        }
        do {
            let (versions, desired) = try withDatabase(connectionString, "reading the versions") { (connection) throws(PostgresError) in
                (try FleetConfigStore.all(on: connection), try FleetConfigStore.desired(on: connection))
            }
            if let gateway = parsed["--gateway"] {
                guard let found = desired.first(where: { $0.gateway == gateway }) else {
                    return failure("config show: no version targets gateway '\(gateway)'")
                }
                FleetOutput.out(describe(found.version, gateway: gateway) + found.version.fragment)
            } else if let version {
                guard let found = versions.first(where: { $0.version == version }) else {
                    return failure("config show: there is no version \(version) (locus-fleet config show lists them)")
                }
                FleetOutput.out(describe(found, gateway: nil) + found.fragment)
            } else {
                if versions.isEmpty { FleetOutput.out("no configuration version yet (locus-fleet config set)\n") }
                for version in versions {
                    let desiredBy = desired.filter { $0.version.version == version.version }.count
                    FleetOutput.out("version \(version.version): \(version.createdAt), \(version.target.description), "
                                    + "desired by \(desiredBy) gateway\(desiredBy == 1 ? "" : "s")\(version.note.map { ", note: \($0)" } ?? "")\n")
                }
            }
            return 0
        } catch {
            return failure("config show: \(error.message)")
        }
    }

    /// TOML comments above a shown fragment (the output still reads as the fragment).
    static func describe(_ version: ConfigVersion, gateway: String?) -> String {
        var header = "# version \(version.version), \(version.createdAt), for \(version.target.description)\n"
        if let gateway { header += "# the desired version of gateway \(gateway)\n" }
        if let note = version.note { header += "# note: \(note.split(separator: "\n").joined(separator: " "))\n" }
        return header
    }

    static func configDiff(_ arguments: [String]) -> Int32 {
        let parsed: RemoteArguments
        let connectionString: ConnectionString
        var numbers: [Int64] = []
        do throws(UsageError) {
            (parsed, connectionString) = try readingArguments("VERSION VERSION", arguments, positional: 2...2)
            for text in parsed.positional {
                guard let number = Int64(text), number > 0 else { throw UsageError(message: "'\(text)' is not a version number") }
                numbers.append(number)
            }
        } catch {
            return usageError("config diff: \(error.message)")
        }
        do {
            let found = try withDatabase(connectionString, "reading the versions") { (connection) throws(PostgresError) in
                [try FleetConfigStore.find(numbers[0], on: connection), try FleetConfigStore.find(numbers[1], on: connection)]
            }
            for (number, version) in zip(numbers, found) where version == nil {
                return failure("config diff: there is no version \(number) (locus-fleet config show lists them)")
            }
            let old = found[0]!, new = found[1]!
            for version in [old, new] where LineDiff.split(version.fragment).count > LineDiff.maximumLines {
                return failure("config diff: version \(version.version) has over \(LineDiff.maximumLines) lines, too many to compare here")
            }
            let diff = LineDiff.unified(old.fragment, new.fragment, oldName: "version \(old.version) (\(old.target.description), \(old.createdAt))",
                                        newName: "version \(new.version) (\(new.target.description), \(new.createdAt))")
            FleetOutput.out(diff.isEmpty ? "versions \(old.version) and \(new.version) have the same fragment\n" : diff)
            return 0
        } catch {
            return failure("config diff: \(error.message)")
        }
    }

    static func configStatus(_ arguments: [String]) -> Int32 {
        let parsed: RemoteArguments
        let connectionString: ConnectionString
        do throws(UsageError) {
            (parsed, connectionString) = try readingArguments("", arguments, flags: ["--json"], positional: 0...0)
        } catch {
            return usageError("config status: \(error.message)")
        }
        do {
            let states = try withDatabase(connectionString, "reading the configuration status") { (connection) throws(PostgresError) in
                try FleetConfigStore.status(on: connection)
            }
            FleetOutput.out(parsed.flags.contains("--json") ? configStatusJSON(states) : configStatusText(states))
            return states.contains(where: \.refused) ? 1 : 0
        } catch {
            return failure("config status: \(error.message)")
        }
    }

    /// `gw-0001: desired 5, applied 5` and the like, one line a gateway; the refused loud.
    static func configStatusText(_ states: [ConfigState]) -> String {
        if states.isEmpty { return "no gateway known yet\n" }
        return states.map { state in
            var line = "\(state.gateway): desired \(state.desired.map(String.init) ?? "none"), applied \(state.applied.map(String.init) ?? "none")"
            if let at = state.appliedAt { line += " (\(at))" }
            if state.refused {
                line += ", REFUSED version \(state.desired ?? 0): \(state.refusedReason ?? "no reason given")"
                if state.refusedVersion == 0 { line += " (the gateway could not read the message's version)" }
            } else if state.pending {
                line += ", pending" + (state.publishedAt.map { " (published \($0))" } ?? " (not published: locus-fleet config publish)")
            } else if let refused = state.refusedVersion {
                line += ", last refused version \(refused): \(state.refusedReason ?? "no reason given")"
            }
            return line + "\n"
        }.joined()
    }

    static func configStatusJSON(_ states: [ConfigState]) -> String {
        let objects = states.map { state in
            FleetJSON.object([("gateway", .string(state.gateway)), ("desired", .integer(state.desired)), ("applied", .integer(state.applied)),
                              ("applied_at", .string(state.appliedAt)), ("pending", .boolean(state.pending)),
                              ("refused", .boolean(state.refused)), ("refused_version", .integer(state.refusedVersion)),
                              ("refused_reason", .string(state.refusedReason)), ("published_at", .string(state.publishedAt))])
        }
        return FleetJSON.object([("gateways", .raw("[" + objects.joined(separator: ",") + "]"))]) + "\n"
    }

    // MARK: groups

    static func group(_ arguments: [String]) -> Int32 {
        guard let sub = arguments.first, sub == "set" || sub == "show" else {
            return usageError("group: set or show is needed")
        }
        let parsed: RemoteArguments
        let connectionString: ConnectionString
        do throws(UsageError) {
            (parsed, connectionString) = try readingArguments(sub == "set" ? "NAME GATEWAY..." : "[NAME]", Array(arguments.dropFirst()),
                                                              positional: sub == "set" ? 2...Int.max : 0...1)
            if sub == "set", let problem = parsed.positional.dropFirst().lazy.compactMap(gatewayProblem).first {
                throw UsageError(message: problem)
            }
            if let name = parsed.positional.first, name.isEmpty { throw UsageError(message: "a group's name is not empty") }
        } catch {
            return usageError("group \(sub): \(error.message)")
        }
        do {
            let name = parsed.positional.first
            let groups = try withDatabase(connectionString, "the groups") { (connection) throws(PostgresError) in
                if sub == "set" { try FleetConfigStore.setGroup(name!, Array(parsed.positional.dropFirst()), on: connection) }
                return try FleetConfigStore.groups(name, on: connection)
            }
            if let name, groups.isEmpty { return failure("group show: there is no group '\(name)'") }
            if groups.isEmpty { FleetOutput.out("no group yet (locus-fleet group set NAME GATEWAY...)\n") }
            for group in groups { FleetOutput.out("\(group.name): \(group.gateways.joined(separator: " "))\n") }
            return 0
        } catch {
            return failure("group \(sub): \(error.message)")
        }
    }
}
