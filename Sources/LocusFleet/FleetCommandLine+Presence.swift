extension FleetCommandLine {
    static let presenceUsage = """
               locus-fleet presence bench [--seed N] [--hours H] [--json]
               locus-fleet presence run --plan FILE [broker options] [--publish PREFIX [--home-assistant]] [--database URL]
                                        [--calibration FILE] [--key FILE] [--seconds N]
               locus-fleet presence calibrate --plan FILE [broker options] --seconds N [--out FILE] [TAG=X,Y...]
        """

    static let presenceHelp = """
          presence  bench: the presence estimator (docs/presence.md) in its seeded simulation:
                    ESPresense-companion's set-up in its one-reading mode beside its published
                    figures, then each floor plan through the gateways' summaries with
                    calibration on and off. --seed N decides everything (default 1); --hours H
                    each pipeline run's length (default 0.5, the CI size); --json the report
                    as JSON
                    run: the fleet's presence from the gateways' <prefix>/presence messages
                    (their [uplink] what has "presence"): subscribes to FILTER/presence
                    (--prefix FILTER, default locus/+; the broker options are config's), decides each tag's area on the floor plan FILE (its
                    gateways by their ids) once a second, prints each change; --publish PREFIX
                    also publishes each tag's area, retained, to PREFIX/<tag> (phones as
                    phone-NAME), and with --home-assistant announces each tag as a Home
                    Assistant device tracker whose location is its area; --database URL keeps each
                    change in presence_changes and each tag's area in presence_current;
                    --calibration FILE applies what calibrate learned; --key FILE signs the
                    commands of the plan's [[rule]] tables (an area's tag entering or
                    leaving, or the area occupied or vacated, sends a command as command
                    send does; stored for command status with --database); --seconds N
                    stops after N seconds
                    calibrate: listens N seconds, then learns each gateway's receive offset
                    from the other gateways hearing its own beacon (the plan's [[gateway]]
                    beacon = "UUID/MAJOR/MINOR") and each TAG's power from its known spot
                    X,Y (m); prints what it learned and how many of the decisions of
                    what it heard it changes; --out FILE for presence run --calibration

        """

    struct PresenceOptions {
        var seed: UInt64 = 1
        var hours: Double? = nil
        var json = false
    }

    static func parsePresence(_ arguments: [String]) throws(UsageError) -> PresenceOptions {
        let parsed = try RemoteArguments.parse(arguments, valued: ["--seed", "--hours"], flags: ["--json"])
        guard parsed.positional == ["bench"] else { throw UsageError(message: "the subcommand is bench, run or calibrate") }
        var options = PresenceOptions()
        options.json = parsed.flags.contains("--json")
        if let value = parsed["--seed"] {
            guard let seed = UInt64(value) else { throw UsageError(message: "--seed takes an unsigned integer, got '\(value)'") }
            options.seed = seed
        }
        if let value = parsed["--hours"] {
            guard let hours = Double(value), hours > 0, hours <= 1_000 else { throw UsageError(message: "--hours takes a number in (0, 1000], got '\(value)'") }
            options.hours = hours
        }
        return options
    }

    static func presence(_ arguments: [String]) -> Int32 {
        if arguments.first == "run" { return presenceRun(Array(arguments.dropFirst())) }
        if arguments.first == "calibrate" { return presenceCalibrate(Array(arguments.dropFirst())) }
        let options: PresenceOptions
        do { options = try parsePresence(arguments) } catch { return usageError("presence: \(error.message)") }
        let size = options.hours.map { PresenceBench.Size.hours($0) } ?? .ci
        let report = PresenceBench.run(seed: options.seed, size: size)
        FleetOutput.out(options.json ? report.json : report.text)
        return 0
    }
}
