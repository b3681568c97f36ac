import LocusCore
import LocusDevices
import TestSupport

/// A scenario's bytes as the two ports receive them: NMEA epochs (RMC and GGA) once a second,
/// and H4 LE Advertising Report events from each beacon heard, with the radio faults applied.
struct Recording {
    var gnss: [SimulatedKernel.Arrival] = []
    var bluetooth: [SimulatedKernel.Arrival] = []
    /// Faults that touched the bytes, by kind (what was actually injected).
    var injected: [String: Int] = [:]

    init(_ scenario: Scenario, startNs: Int64) {
        var random = SplitMix64(seed: scenario.seed ^ 0x5EED_0F_B17E5)
        gnss = Recording.nmea(scenario, startNs: startNs, random: &random, injected: &injected)
        bluetooth = Recording.advertisements(scenario, startNs: startNs, random: &random, injected: &injected)
    }

    static func nmea(_ scenario: Scenario, startNs: Int64, random: inout SplitMix64, injected: inout [String: Int]) -> [SimulatedKernel.Arrival] {
        var arrivals: [SimulatedKernel.Arrival] = []
        for point in scenario.track {
            var bytes = epoch(point, utc: scenario.startUTC + Int64(point.timeS))
            var atS = Double(point.timeS) + 0.1
            for fault in scenario.faults {
                switch fault {
                case .uartSilence(let from, let until) where point.timeS >= from && point.timeS < until:
                    bytes = []
                case .wrongBaud(let from, let until) where point.timeS >= from && point.timeS < until:
                    // At the wrong rate every byte is framed wrongly: noise with the odd line end.
                    bytes = bytes.map { _ in random.chance(3) ? 0x0A : UInt8(random.below(256)) }
                case .gnssLate(let from, let until, let late) where point.timeS >= from && point.timeS < until:
                    atS += Double(late)
                case .uartCorruptSentence(let at) where at == point.timeS && !bytes.isEmpty:
                    bytes[1 + random.below(bytes.count - 1)] ^= UInt8(1 + random.below(255))
                case .uartGarbage(let at, let count) where at == point.timeS:
                    let garbage = (0..<count).map { _ in random.chance(5) ? UInt8(ascii: "$") : UInt8(random.below(256)) }
                    bytes.insert(contentsOf: garbage, at: random.below(bytes.count + 1))
                default:
                    continue
                }
                injected[fault.kind, default: 0] += 1
            }
            guard !bytes.isEmpty else { continue }
            let atNs = startNs + Int64(atS * 1e9)
            // A late stretch arrives in order: a receiver's buffer does not reorder.
            arrivals.append(SimulatedKernel.Arrival(atNs: max(atNs, arrivals.last?.atNs ?? 0), bytes: bytes))
        }
        return arrivals
    }

    /// `$GPRMC` and `$GPGGA` for one second of the track.
    static func epoch(_ point: Scenario.Point, utc: Int64) -> [UInt8] {
        let days = utc / 86_400, secondOfDay = Int(utc % 86_400)
        let date = CivilDate(daysSinceEpoch: days)
        let time = two(secondOfDay / 3_600) + two(secondOfDay / 60 % 60) + two(secondOfDay % 60) + ".00"
        let ddmmyy = two(date.day) + two(date.month) + two(date.year % 100)
        let latitude = angle(point.latitude, degreesDigits: 2, positive: "N", negative: "S")
        let longitude = angle(point.longitude, degreesDigits: 3, positive: "E", negative: "W")
        guard let hdop = point.hdop else {
            return sentence("GPRMC,\(time),V,,,,,,,\(ddmmyy),,,N") + sentence("GPGGA,\(time),,,,,0,00,99.9,,M,,M,,")
        }
        let satellites = hdop < 2 ? 9 : 5
        return sentence("GPRMC,\(time),A,\(latitude),\(longitude),0.0,0.0,\(ddmmyy),,,A")
            + sentence("GPGGA,\(time),\(latitude),\(longitude),1,\(two(satellites)),\(decimal(hdop, 1)),20.0,M,40.0,M,,")
    }

    static func advertisements(_ scenario: Scenario, startNs: Int64, random: inout SplitMix64,
                               injected: inout [String: Int]) -> [SimulatedKernel.Arrival] {
        var timed: [(atNs: Int64, bytes: [UInt8])] = []
        for beacon in scenario.beacons {
            for window in beacon.windows {
                for second in window.start..<window.end {
                    let atNs = startNs + Int64(second) * 1_000_000_000 + Int64(random.below(1_000)) * 1_000_000
                    timed.append((atNs, report(beacon, rssi: Int8(-95 + random.below(50)))))
                }
            }
        }
        for fault in scenario.faults {
            switch fault {
            case .hciHostile(let at):
                timed.append((startNs + Int64(at) * 1_000_000_000 + 500_000_000, hostile(&random)))
            case .hciBurst(let at, let count) where !scenario.beacons.isEmpty:
                let beacon = scenario.beacons[random.below(scenario.beacons.count)]
                let burst = (0..<count).flatMap { _ in report(beacon, rssi: Int8(-95 + random.below(50))) }
                timed.append((startNs + Int64(at) * 1_000_000_000 + 700_000_000, burst))
            default:
                continue
            }
            injected[fault.kind, default: 0] += 1
        }
        timed.sort { $0.atNs < $1.atNs }
        return timed.map { SimulatedKernel.Arrival(atNs: $0.atNs, bytes: $0.bytes) }
    }

    /// An H4 LE Advertising Report event with one iBeacon report (the layout of the corpus's
    /// v065 capture, Tests/Corpus/ble).
    static func report(_ beacon: Scenario.Beacon, rssi: Int8) -> [UInt8] {
        var data: [UInt8] = [0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15]
        data += uuidBytes(beacon.uuid)
        data += [UInt8(beacon.major >> 8), UInt8(beacon.major & 0xFF), UInt8(beacon.minor >> 8), UInt8(beacon.minor & 0xFF), 0xC5]
        let body: [UInt8] = [0x02, 0x01, 0x00, 0x01] + beacon.address + [UInt8(data.count)] + data + [UInt8(bitPattern: rssi)]
        return [0x04, 0x3E, UInt8(body.count)] + body
    }

    /// What a broken controller or a hostile neighbour sends: lengths that lie, reports that
    /// run past their event, packet types nobody asked for, plain noise.
    static func hostile(_ random: inout SplitMix64) -> [UInt8] {
        let noise = (0..<random.below(80)).map { _ in UInt8(random.below(256)) }
        switch random.below(4) {
        case 0: return [0x04, 0x3E, UInt8(random.below(256))] + noise
        case 1: return [0x04, 0x3E, UInt8(noise.count + 2), 0x02, UInt8(1 + random.below(255))] + noise
        case 2: return [UInt8(1 + random.below(4))] + noise
        default: return noise
        }
    }

    static func uuidBytes(_ text: String) -> [UInt8] {
        let digits = Array(text.utf8.filter { $0 != UInt8(ascii: "-") })
        return stride(from: 0, to: digits.count, by: 2).map { hexValue(digits[$0]) << 4 | hexValue(digits[$0 + 1]) }
    }

    static func hexValue(_ digit: UInt8) -> UInt8 {
        digit <= UInt8(ascii: "9") ? digit - UInt8(ascii: "0") : (digit | 0x20) - UInt8(ascii: "a") + 10
    }

    static func sentence(_ body: String) -> [UInt8] {
        var checksum: UInt8 = 0
        for byte in body.utf8 { checksum ^= byte }
        let hex = Array("0123456789ABCDEF".utf8)
        return [UInt8(ascii: "$")] + Array(body.utf8) + [UInt8(ascii: "*"), hex[Int(checksum >> 4)], hex[Int(checksum & 15)], 0x0D, 0x0A]
    }

    /// ddmm.mmmmmm,H (or dddmm.mmmmmm,H): six decimals of minutes, about 2 mm.
    static func angle(_ degrees: Double, degreesDigits: Int, positive: String, negative: String) -> String {
        let magnitude = abs(degrees)
        var whole = Int(magnitude)
        var microMinutes = Int(((magnitude - Double(whole)) * 60 * 1_000_000).rounded())
        if microMinutes >= 60_000_000 {
            whole += 1
            microMinutes -= 60_000_000
        }
        var head = String(whole)
        while head.count < degreesDigits { head = "0" + head }
        var fraction = String(microMinutes % 1_000_000)
        while fraction.count < 6 { fraction = "0" + fraction }
        return head + two(microMinutes / 1_000_000) + "." + fraction + "," + (degrees < 0 ? negative : positive)
    }

    static func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }

    static func decimal(_ value: Double, _ places: Int) -> String {
        var scale = 1
        for _ in 0..<places { scale *= 10 }
        let scaled = Int((value * Double(scale)).rounded())
        var fraction = String(scaled % scale)
        while fraction.count < places { fraction = "0" + fraction }
        return "\(scaled / scale).\(fraction)"
    }
}
