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

/// The iBeacon report of the shared corpus (v065: an LE Advertising Report event, H4 byte
/// dropped), parsed `repeats` times: HCI event walk, AD walk, iBeacon decode.
func ble(decode: Bool, repeats: Int) {
    let event: [UInt8] = [0x3E, 0x2A, 0x02, 0x01, 0x00, 0x01, 0x43, 0x3E, 0xA2, 0xC9, 0x6B, 0x6A, 0x1E, 0x02, 0x01, 0x1A,
                          0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15, 0xE2, 0xC5, 0x6D, 0xB5, 0xDF, 0xFB, 0x48, 0xD2, 0xB0, 0x60,
                          0xD0, 0xF5, 0xA7, 0x10, 0x96, 0xE0, 0x00, 0x64, 0x00, 0x00, 0xC5, 0xB3]
    var majors = 0
    var reports = 0
    let counted = event.withUnsafeBytes { raw in
        allocations {
            for _ in 0..<repeats {
                guard decode else { majors &+= Int(raw[5]); continue }
                _ = HCIEvents.forEachReport(in: raw) { report in
                    reports += 1
                    if case .iBeacon(_, let major, _, _)? = BeaconDecoder.decode(report.data) { majors &+= Int(major) }
                }
            }
        }
    }
    if decode { print("reports \(reports) majors \(majors) allocations \(counted)") }
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
case "ble": ble(decode: decode, repeats: repeats)
default:
    print("unknown workload \(workload)")
    exit(2)
}
