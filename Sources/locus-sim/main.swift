import LocusCore
import LocusDevices

// locus-sim: the deterministic simulator (docs/simulator.md). Each seed draws a site, a track,
// beacons and faults, and runs the real agent on a simulated kernel through them, checking the
// invariants after every turn (SeedRun). A failing seed prints the one command that runs it again.
//
//   locus-sim [--seeds N] [--first S] [--progress FILE]   N seeds from S (default 100 from 1)
//   locus-sim --seed S [--show]                          one seed; --show prints its site and faults

struct Options {
    var first: UInt64 = 1
    var count: UInt64 = 100
    var single = false
    var show = false
    var progress: String? = nil
}

func usage(_ message: String) -> Never {
    Console.error("locus-sim: \(message)\nusage: locus-sim [--seeds N] [--first S] [--progress FILE] | --seed S [--show]\n")
    Process.exit(2)
}

func parse(_ arguments: ArraySlice<String>) -> Options {
    var options = Options()
    var rest = arguments
    while let argument = rest.popFirst() {
        switch argument {
        case "--seeds", "--first", "--seed":
            guard let text = rest.popFirst(), let value = UInt64(text) else { usage("\(argument) takes a whole number") }
            switch argument {
            case "--seeds": options.count = value
            case "--first": options.first = value
            default:
                options.first = value
                options.count = 1
                options.single = true
            }
        case "--progress":
            guard let path = rest.popFirst() else { usage("--progress takes a file") }
            options.progress = path
        case "--show":
            options.show = true
        default:
            usage("unknown argument '\(argument)'")
        }
    }
    return options
}

/// One seed in a temporary directory, removed after a pass (kept after a failure with --seed).
func runSeed(_ seed: UInt64, _ options: Options) -> Result<SeedRun.Tally, SeedRun.Failure> {
    let scenario = Scenario(seed: seed)
    if options.show { Report.show(scenario) }
    // On tmpfs where there is one: the log's syncs cost nothing there, and what a sync keeps is
    // the simulated disk's business (SimulatedKernel.Disk), not the real one's.
    let parent = Files.isDirectory("/dev/shm") ? "/dev/shm" : "/tmp"
    guard case .success(let root) = Files.makeTemporaryDirectory(prefix: "locus-sim", in: parent) else {
        return .failure(SeedRun.Failure(atS: 0, what: "cannot make a temporary directory"))
    }
    var keep = false
    defer { if !keep { _ = Files.removeTree(root) } }
    do throws(SeedRun.Failure) {
        let run = try SeedRun(scenario, root: root)
        do throws(SeedRun.Failure) {
            try run.run()
        } catch {
            keep = options.single
            if keep { Console.error("locus-sim: seed \(seed): its files are kept in \(root)\n") }
            return .failure(error)
        }
        return .success(run.tally)
    } catch {
        return .failure(error)
    }
}

let options = parse(CommandLine.arguments.dropFirst())
AgentLog.muted = !options.single
var total = SeedRun.Tally()
var failed: [UInt64] = []
var seedsWith: [String: Int] = [:]
var longest: (seed: UInt64, seconds: Double) = (0, 0)
for seed in options.first..<(options.first + options.count) {
    if let path = options.progress { _ = Files.replace(path, contents: "\(seed)\n") }
    switch runSeed(seed, options) {
    case .success(let tally):
        total.add(tally)
        if tally.simulatedS > longest.seconds { longest = (seed, tally.simulatedS) }
        for kind in tally.injected.keys { seedsWith[kind, default: 0] += 1 }
    case .failure(let failure):
        failed.append(seed)
        Console.out("FAILED seed \(seed): \(failure)\n  run it again: Scripts/simulate --seed \(seed)\n")
    }
    let done = seed - options.first + 1
    if !options.single && done % 100 == 0 { Console.error("locus-sim: \(done) of \(options.count) seeds, \(failed.count) failed\n") }
}
Report.summary(total, seeds: options.count, failed: failed, seedsWith: seedsWith)
Console.out("longest run: seed \(longest.seed), \(SeedRun.seconds(longest.seconds)) s simulated\n")
Process.exit(failed.isEmpty ? 0 : 1)
