// Benchmark driver, host only. Scripts/bench runs it under callgrind twice per workload (input
// loading only, then loading plus the work) so that the instruction difference divided by the
// item count is the cost per item, independent of the machine's clock.
import AllocCounter
import Foundation
import LocusCore

func load(_ paths: [String]) -> [[UInt8]] {
    paths.map { [UInt8](FileManager.default.contents(atPath: $0) ?? Data()) }
}

func nmea(_ inputs: [[UInt8]], decode: Bool, repeats: Int) {
    var sentences = 0
    var fixes = 0
    var allocationsCounted = 0
    let start = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<repeats {
        for bytes in inputs {
            guard decode else { sentences += bytes.count > 0 ? 1 : 0; continue }
            var decoder = NMEADecoder()
            allocationsCounted += bytes.withUnsafeBytes { raw in
                allocations {
                    decoder.consume(raw) { _ in fixes += 1 }
                    decoder.finish { _ in }
                }
            }
            sentences += decoder.statistics.read
        }
    }
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    if decode {
        print("sentences \(sentences) epochs \(fixes) allocations \(allocationsCounted) seconds \(elapsed) sentences_per_second \(Int(Double(sentences) / max(elapsed, 1e-9)))")
    }
}

let arguments = CommandLine.arguments.dropFirst()
guard let workload = arguments.first else {
    print("usage: locus-bench nmea (--decode|--load-only) [--repeat N] FILE...")
    exit(2)
}
var rest = Array(arguments.dropFirst())
let decode = rest.first == "--decode"
rest.removeFirst()
var repeats = 1
if rest.first == "--repeat" { repeats = Int(rest[1]) ?? 1; rest.removeFirst(2) }
switch workload {
case "nmea": nmea(load(rest), decode: decode, repeats: repeats)
default:
    print("unknown workload \(workload)")
    exit(2)
}
