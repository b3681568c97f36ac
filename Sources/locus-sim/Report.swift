import LocusDevices

/// What the simulator prints: a seed's draw (--show) and a batch's figures.
enum Report {
    static func show(_ scenario: Scenario) {
        Console.out("seed \(scenario.seed): \(scenario.durationS) s from UTC \(scenario.startUTC), \(scenario.beacons.count) beacon(s), ")
        Console.out("log synced \(scenario.syncEveryEvent ? "at every event" : "every \(scenario.syncIntervalMs) ms"), \(scenario.faults.count) fault(s)\n")
        for fault in scenario.faults { Console.out("  fault: \(fault)\n") }
        if let broker = scenario.broker { Console.out("  broker: \(broker)\n") }
        if let remote = scenario.remote {
            for configuration in remote.configurations { Console.out("  fleet: at \(configuration.atS) s version \(configuration.version), \(configuration.kind)\n") }
            for command in remote.commands { Console.out("  fleet: at \(command.atS) s command \(command.id) pulse \(command.output)\(command.expired ? " (expired)" : "")\n") }
        }
        Console.out("--- site.toml\n\(scenario.siteText)---\n")
    }

    static func summary(_ total: SeedRun.Tally, seeds: UInt64, failed: [UInt64], seedsWith: [String: Int]) {
        Console.out("seeds \(seeds), passed \(Int(seeds) - failed.count), failed \(failed.count)\(failed.isEmpty ? "" : " (\(failed.map { "\($0)" }.joined(separator: " ")))")\n")
        Console.out("simulated \(SeedRun.seconds(total.simulatedS / 3_600)) h in \(total.turns) turns, \(total.restarts) restarts after a power cut; ")
        Console.out("the log took \(total.records) records, \(total.events) events, \(total.gpioChanges) GPIO changes\n")
        Console.out("faults injected (kind: times, in how many seeds):\n")
        for kind in Scenario.Fault.kinds + SimulatedBroker.faultKinds.map(\.0) + RemoteFeed.kinds {
            Console.out("  \(kind): \(total.injected[kind] ?? 0), \(seedsWith[kind] ?? 0)\n")
        }
        Console.out("invariants checked (times):\n")
        for (name, count) in total.checks.sorted(by: { $0.key < $1.key }) { Console.out("  \(name): \(count)\n") }
    }
}
