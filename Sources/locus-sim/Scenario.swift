import Glibc
import TestSupport

/// One run drawn from a seed: a site (circles along a track, beacon conditions with wildcards,
/// GPIO actions, a sync policy), the track as 1 Hz fixes, beacons seen in windows, and the faults.
/// Everything is drawn here, before the run starts, so a seed is the whole run.
struct Scenario {
    struct Point {
        var timeS: Int
        var latitude: Double
        var longitude: Double
        /// Horizontal dilution of precision (the receiver's accuracy estimate scales with it);
        /// nil: no fix this second (the receiver says so: GGA quality 0, RMC status V).
        var hdop: Double?
    }

    struct Beacon {
        var uuid: String
        var major: UInt16
        var minor: UInt16
        var address: [UInt8]
        /// Seconds into the run when it is heard, [start, end).
        var windows: [(start: Int, end: Int)]
    }

    /// A fault and when it acts, in seconds from the start (`untilS` for the ones that last).
    enum Fault {
        case uartGarbage(atS: Int, bytes: Int)
        case uartCorruptSentence(atS: Int)
        case uartSilence(fromS: Int, untilS: Int)
        case wrongBaud(fromS: Int, untilS: Int)
        case gnssLate(fromS: Int, untilS: Int, lateS: Int)
        case hciHostile(atS: Int)
        case hciBurst(atS: Int, reports: Int)
        case clockJump(atS: Int, byS: Int)
        case diskFull(fromS: Int, untilS: Int)
        case syncFails(fromS: Int, untilS: Int)
        case powerCut(atS: Int, downS: Int)

        var kind: String {
            switch self {
            case .uartGarbage: return "uart-garbage"
            case .uartCorruptSentence: return "uart-corrupt-sentence"
            case .uartSilence: return "uart-silence"
            case .wrongBaud: return "uart-wrong-baud"
            case .gnssLate: return "gnss-time-late"
            case .hciHostile: return "hci-hostile-packet"
            case .hciBurst: return "hci-burst"
            case .clockJump: return "clock-jump"
            case .diskFull: return "disk-full"
            case .syncFails: return "fsync-fails"
            case .powerCut: return "power-cut"
            }
        }

        static let kinds = ["uart-garbage", "uart-corrupt-sentence", "uart-silence", "uart-wrong-baud", "gnss-time-late",
                            "hci-hostile-packet", "hci-burst", "clock-jump", "disk-full", "fsync-fails", "power-cut"]
    }

    let seed: UInt64
    var durationS = 0
    /// UTC seconds of the first fix.
    var startUTC: Int64 = 0
    var track: [Point] = []
    var beacons: [Beacon] = []
    var faults: [Fault] = []
    var clients: [SimulatedClient.Plan] = []
    /// The fleet's broker the uplink publishes to (nil: no `[uplink]`).
    var broker: SimulatedBroker.Plan? = nil
    var publishesFixes = false
    /// The fleet's configurations and commands (nil: no `[remote]`; only with a broker).
    var remote: RemotePlan? = nil
    var siteText = ""
    var boardText = ""
    /// The log is synced at every event (else every `syncIntervalMs`).
    var syncEveryEvent = true
    var syncIntervalMs = 1_000
    var eventCapacity = 64

    static let outputs = ["out0", "out1", "out2"]
    static let uuids = ["E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "B9407F30-F5F8-466E-AFF9-25556B57FE6D"]

    init(seed: UInt64) {
        self.seed = seed
        var random = SplitMix64(seed: seed)
        durationS = 300 + random.below(1_500)
        // 2019-05 to 2038: dates before the last GPS week rollover (2019-04-06) are taken for a
        // receiver's unrolled dates and moved 1024 weeks on (NMEADecoder), not what is drawn here.
        startUTC = 1_557_000_000 + Int64(random.below(600_000_000))
        track = Scenario.drawTrack(&random, durationS: durationS)
        beacons = Scenario.drawBeacons(&random, durationS: durationS)
        syncEveryEvent = random.chance(70)
        syncIntervalMs = 200 + random.below(2_000)
        eventCapacity = [8, 64, 256][random.below(3)]
        siteText = drawSite(&random)
        boardText = Scenario.board
        faults = Scenario.drawFaults(&random, durationS: durationS)
        clients = Scenario.drawClients(&random, durationS: durationS, monitors: monitorNames)
        // Drawn last, so the draws before it are those of the seeds kept as tests.
        broker = Scenario.drawBroker(&random, durationS: durationS)
        publishesFixes = random.chance(30)
        // Drawn after everything else, for the same reason.
        if broker != nil && random.chance(60) { remote = RemotePlan.draw(&random, durationS: durationS) }
    }

    /// The site file's own actions (a version from the fleet replaces them).
    var siteActionCount: Int { siteText.split(separator: "\n").filter { $0 == "[[action]]" }.count }

    /// The site's `[uplink]` to the simulator's broker at `port` (none without a broker).
    func uplinkText(port: UInt16) -> String {
        guard let broker else { return "" }
        return "\n[uplink]\nbroker = \"mqtt://127.0.0.1:\(port)\"\ngateway = \"sim-gw\"\n"
            + "what = [\"events\", \"gpio\", \"visits\"\(publishesFixes ? ", \"fixes\"" : "")]\n"
            + "max_inflight = \(broker.inflight)\nkeepalive = \"\(broker.keepaliveS)s\"\n"
            + (remote == nil ? "" : RemotePlan.siteText)
    }

    /// Half the seeds publish to a broker that refuses for a while, drops connections, holds
    /// PUBACKs back or sends them twice.
    static func drawBroker(_ random: inout SplitMix64, durationS: Int) -> SimulatedBroker.Plan? {
        guard random.chance(50) else { return nil }
        var plan = SimulatedBroker.Plan()
        plan.inflight = [2, 16, 64][random.below(3)]
        plan.keepaliveS = [5, 30, 60][random.below(3)]
        func window(_ longest: Int) -> (Int, Int) {
            let from = random.below(durationS)
            return (from, min(durationS, from + 1 + random.below(longest)))
        }
        for _ in 0..<random.below(3) {
            let (from, until) = window(300)
            plan.down.append((from, until, random.chance(50) ? .hangUp : .unavailable))
        }
        if random.chance(50) { plan.drops = (0..<(1 + random.below(5))).map { _ in random.below(durationS) }.sorted() }
        if random.chance(40) { let (from, until) = window(120); plan.slow.append((from, until, 1 + random.below(20))) }
        if random.chance(40) { let (from, until) = window(120); plan.duplicates.append((from, until)) }
        return plan
    }

    /// The site's monitor names (as drawn in `drawSite`).
    var monitorNames: [String] {
        var names: [String] = []
        for line in siteText.split(separator: "\n") where line.hasPrefix("[[monitor.") {
            guard let end = line.range(of: ".condition]]") else { continue }
            let name = String(line[line.index(line.startIndex, offsetBy: 10)..<end.lowerBound])
            if !names.contains(name) { names.append(name) }
        }
        return names
    }

    /// Up to three programs following events: every monitor's or one's, prompt or slow, some
    /// hanging up for good.
    static func drawClients(_ random: inout SplitMix64, durationS: Int, monitors: [String]) -> [SimulatedClient.Plan] {
        (0..<random.below(4)).map { _ in
            let pace: SimulatedClient.Plan.Pace = random.chance(60) ? .prompt : .slow(everyS: 5 + random.below(120), bytes: 64 + random.below(2_000))
            return SimulatedClient.Plan(connectS: random.below(max(1, durationS / 2)), monitor: random.chance(50) ? nil : random.pick(monitors),
                                        pace: pace, vanishS: random.chance(25) ? random.below(durationS) : nil)
        }
    }

    // MARK: the track

    /// Stops and moves: each leg stays put (with the receiver's noise) or moves at a walking,
    /// cycling or driving speed with a wandering heading. Near the antimeridian sometimes.
    static func drawTrack(_ random: inout SplitMix64, durationS: Int) -> [Point] {
        var latitude = random.uniform(-60, 60)
        var longitude = random.chance(10) ? 179.995 : random.uniform(-180, 180)
        var heading = random.uniform(0, 360)
        var points: [Point] = []
        var speed = 0.0
        var legEnds = 0
        var outageEnds = -1
        for second in 0..<durationS {
            if second >= legEnds {
                legEnds = second + 20 + random.below(240)
                speed = random.chance(40) ? 0 : [1.4, 5.0, 15.0, 30.0][random.below(4)]
            }
            if random.chance(1) { outageEnds = second + random.below(30) }
            heading += random.uniform(-15, 15)
            (latitude, longitude) = moved(latitude, longitude, distanceM: speed, bearingDeg: heading)
            // The receiver's noise: a metre or two, sometimes much more (multipath).
            let noiseM = random.chance(3) ? random.uniform(10, 60) : random.uniform(0, 2.5)
            let reported = moved(latitude, longitude, distanceM: noiseM, bearingDeg: random.uniform(0, 360))
            let hdop: Double? = second < outageEnds ? nil : (random.chance(5) ? random.uniform(3, 20) : random.uniform(0.6, 1.6))
            points.append(Point(timeS: second, latitude: reported.latitude, longitude: reported.longitude, hdop: hdop))
        }
        return points
    }

    /// A point `distanceM` from another on a sphere's tangent plane (enough for drawing tracks:
    /// the agent's geodesics decide, this only places points), longitude kept in [-180, 180).
    static func moved(_ latitude: Double, _ longitude: Double, distanceM: Double, bearingDeg: Double) -> (latitude: Double, longitude: Double) {
        let radians = bearingDeg * Double.pi / 180
        let northM = distanceM * cos(radians), eastM = distanceM * sin(radians)
        let newLatitude = latitude + northM / 6_371_000 * 180 / Double.pi
        var newLongitude = longitude + eastM / (6_371_000 * cos(latitude * Double.pi / 180)) * 180 / Double.pi
        if newLongitude >= 180 { newLongitude -= 360 } else if newLongitude < -180 { newLongitude += 360 }
        return (newLatitude, newLongitude)
    }

    static func drawBeacons(_ random: inout SplitMix64, durationS: Int) -> [Beacon] {
        (0..<random.below(5)).map { index in
            var windows: [(start: Int, end: Int)] = []
            var second = random.below(120)
            while second < durationS {
                let end = min(durationS, second + 10 + random.below(300))
                windows.append((second, end))
                second = end + 5 + random.below(300)
            }
            let address: [UInt8] = [0xC0 | UInt8(index), UInt8(random.below(256)), UInt8(random.below(256)), UInt8(random.below(256)),
                                    UInt8(random.below(256)), UInt8(random.below(256))]
            return Beacon(uuid: uuids[random.below(2)], major: UInt16(1 + random.below(2)), minor: UInt16(random.below(4)),
                          address: address, windows: windows)
        }
    }

    // MARK: the site

    static let board = """
    [board]
    name = "Simulated gateway (locus-sim)"

    [gnss]
    device = "sim/gnss"
    baud = 9600
    receiver = "generic-nmea"

    [bluetooth]
    feed = "sim/ble"

    [gpio]
    simulated = true

    [gpio.outputs]
    out0 = { line = 0 }
    out1 = { line = 1, active_low = true }
    out2 = { line = 2 }

    """

    /// Circles centred near the track (so it enters and leaves them), beacon conditions from
    /// exact to wildcard, and actions of every mode on some of them.
    func drawSite(_ random: inout SplitMix64) -> String {
        var text = "board = \"board.toml\"\n\n[capacity]\nconditions = 64\nevents = \(eventCapacity)\n\n[log]\n"
        text += syncEveryEvent ? "sync = \"every-event\"\n" : "sync = \"interval\"\nsync_interval = \"\(syncIntervalMs)ms\"\n"
        text += "fix_interval = \"\(random.pick(["0s", "1s", "10s"]))\"\n\n"
        var conditions: [String] = []
        for monitor in 0..<(1 + random.below(3)) {
            for index in 0..<(1 + random.below(4)) {
                let centre = track[random.below(track.count)]
                let radius = [15.0, 40.0, 100.0, 300.0][random.below(4)]
                let (latitude, longitude) = Scenario.moved(centre.latitude, centre.longitude, distanceM: random.uniform(0, radius),
                                                           bearingDeg: random.uniform(0, 360))
                let id = "place\(index)"
                text += "[[monitor.m\(monitor).condition]]\nid = \"\(id)\"\n"
                text += "circle = { lat = \(latitude), lon = \(longitude), radius = \(radius) }\n"
                text += "exit_margin = \(random.pick([0.0, 5.0, 20.0]))\ndwell = \"\(random.pick(["0s", "3s", "30s"]))\"\n"
                text += "accuracy_gate = \(random.chance(70))\ntransit = \(random.chance(50))\n"
                if random.chance(30) { text += "assuming = \"\(random.pick(["satisfied", "unsatisfied"]))\"\n" }
                text += "\n"
                conditions.append("m\(monitor)/\(id)")
            }
        }
        for index in 0..<random.below(4) {
            let uuid = Scenario.uuids[random.below(2)]
            var identity = "uuid = \"\(uuid)\""
            if random.chance(60) { identity += ", major = \(1 + random.below(2))" }
            if random.chance(30) && identity.contains("major") { identity += ", minor = \(random.below(4))" }
            text += "[[monitor.tags.condition]]\nid = \"tag\(index)\"\nbeacon = { \(identity) }\n"
            text += "exit_timeout = \"\(random.pick(["5s", "15s", "60s"]))\"\n\n"
            conditions.append("tags/tag\(index)")
        }
        for output in Scenario.outputs where random.chance(70) {
            let when = random.chance(20) ? conditions[random.below(conditions.count)].split(separator: "/")[0] + "/*" : random.pick(conditions)
            text += "[[action]]\nwhen = \"\(when)\"\ngpio = \"\(output)\"\n"
            switch random.below(3) {
            case 0: text += "state = \"satisfied\"\nmode = \"level\"\n\n"
            case 1: text += "state = \"\(random.pick(["any", "satisfied", "unsatisfied"]))\"\nmode = \"pulse\"\npulse = \"\(random.pick(["200ms", "2s"]))\"\n\n"
            default: text += "state = \"\(random.pick(["satisfied", "unsatisfied"]))\"\nmode = \"latch\"\n\n"
            }
        }
        return text
    }

    // MARK: the faults

    static func drawFaults(_ random: inout SplitMix64, durationS: Int) -> [Fault] {
        var faults: [Fault] = []
        func moment() -> Int { random.below(durationS) }
        func window(_ longest: Int) -> (Int, Int) {
            let from = moment()
            return (from, min(durationS, from + 1 + random.below(longest)))
        }
        if random.chance(50) { for _ in 0..<(1 + random.below(20)) { faults.append(.uartGarbage(atS: moment(), bytes: 1 + random.below(300))) } }
        if random.chance(50) { for _ in 0..<(1 + random.below(20)) { faults.append(.uartCorruptSentence(atS: moment())) } }
        if random.chance(30) { let (from, until) = window(300); faults.append(.uartSilence(fromS: from, untilS: until)) }
        if random.chance(20) { let (from, until) = window(120); faults.append(.wrongBaud(fromS: from, untilS: until)) }
        if random.chance(20) { let (from, until) = window(120); faults.append(.gnssLate(fromS: from, untilS: until, lateS: 1 + random.below(10))) }
        if random.chance(40) { for _ in 0..<(1 + random.below(20)) { faults.append(.hciHostile(atS: moment())) } }
        if random.chance(30) { for _ in 0..<(1 + random.below(3)) { faults.append(.hciBurst(atS: moment(), reports: 20 + random.below(200))) } }
        if random.chance(30) {
            for _ in 0..<(1 + random.below(3)) {
                let size = [5, 3_600, 86_400, 400 * 86_400][random.below(4)]
                faults.append(.clockJump(atS: moment(), byS: random.chance(50) ? size : -size))
            }
        }
        if random.chance(20) { let (from, until) = window(60); faults.append(.diskFull(fromS: from, untilS: until)) }
        if random.chance(20) { let (from, until) = window(60); faults.append(.syncFails(fromS: from, untilS: until)) }
        if random.chance(40) { for _ in 0..<(1 + random.below(3)) { faults.append(.powerCut(atS: moment(), downS: random.below(60))) } }
        return faults
    }
}
