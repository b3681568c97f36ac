import AllocCounter
import Foundation
import Glibc
@testable import LocusAgent
import LocusCore
import LocusDevices
import Testing

/// Beacon ranging as the loop runs it: HCI events through the Bluetooth source (a feed on a
/// pseudo-terminal, stamped with a scripted `now`), the sightings to `Ranging`, its lines taken
/// at each second. Every line is compared with a computation of the same sightings written here,
/// from the documented rules and not from the product's code: which beacons are tracked, the
/// 20 % trimmed mean over the last 32 measurements younger than 20 s, the log-distance model
/// `d = 10^((P - rssi) / 20)` with the frame's own measured power (Foundation's `pow`),
/// CLProximity's thresholds with 10 % hysteresis, unknown after 2 s unheard, gone after 30 s
/// silent, nearest first.
@Suite(.serialized) struct RangingComponentTests {
    typealias H = ComponentHarness

    /// The BLE corpus's recorded iBeacon event (v065, ble_monitor's test_ibeacon_tracker):
    /// E2C56DB5-DFFB-48D2-B060-D0F5A71096E0, major 100, minor 0, measured power -59, RSSI -77.
    static let recorded = HexText.bytes(AgentEndToEndTests.iBeaconEvent)!
    /// The corpus's recorded AltBeacon event (hci_events.tsv row 9): another UUID, never ranged.
    static let altBeacon = HexText.bytes("043e280201020105988527406d1c1bffffffbeacd3162f5af3ee494799db09756062d0fc005a0005c400d4")!

    /// One sighting on the timeline.
    struct Sent {
        var ms: Int64
        var major: UInt16
        var minor: UInt16
        var power: Int8
        /// nil: the report says "not available" (127).
        var rssi: Int8?
        var other = false
    }

    /// The recorded event with this beacon's minor, major, measured power and RSSI bytes (and an
    /// address of its own), as a tag moving about would send it.
    static func event(_ sent: Sent) -> [UInt8] {
        if sent.other { return altBeacon }
        var bytes = recorded
        precondition(bytes.count == 45 && bytes[18] == 0xFF && bytes[22] == 0x15, "iBeacon layout of the recorded event")
        bytes[7] = UInt8(truncatingIfNeeded: sent.minor)
        bytes[8] = UInt8(truncatingIfNeeded: sent.major)
        bytes[39] = UInt8(sent.major >> 8)
        bytes[40] = UInt8(truncatingIfNeeded: sent.major)
        bytes[41] = UInt8(sent.minor >> 8)
        bytes[42] = UInt8(truncatingIfNeeded: sent.minor)
        bytes[43] = UInt8(bitPattern: sent.power)
        bytes[44] = sent.rssi.map { UInt8(bitPattern: $0) } ?? 0x7F
        return bytes
    }

    /// Four beacons of the UUID and an AltBeacon of another, over 50 s: A walks in from far to
    /// immediate (every ninth report without RSSI), B (measured power -70) stops at 15 s and
    /// drops out 30 s later, C is heard only every 3 s (unknown in between), D has another major.
    static func timeline() -> [Sent] {
        let noise: [Int] = [0, 4, -3, 1, -6, 2, 0, 7, -2, 3, -4]
        var sent: [Sent] = []
        for k in 0..<48 {
            let rssi = -85 + (40 * k) / 47 + noise[k % noise.count]
            sent.append(Sent(ms: 200 + 1_000 * Int64(k), major: 100, minor: 1, power: -59, rssi: k % 9 == 8 ? nil : Int8(rssi)))
        }
        var k = 0
        while 350 + 700 * Int64(k) < 15_000 {
            sent.append(Sent(ms: 350 + 700 * Int64(k), major: 100, minor: 2, power: -70, rssi: Int8(-72 + noise[(k * 3) % noise.count])))
            k += 1
        }
        for k in 0..<15 {
            sent.append(Sent(ms: 5_250 + 3_000 * Int64(k), major: 100, minor: 3, power: -59, rssi: Int8(-60 + noise[(k * 5) % noise.count])))
        }
        for k in 0..<80 {
            sent.append(Sent(ms: 125 + 500 * Int64(k), major: 200, minor: 1, power: -59, rssi: Int8(-50 + noise[(k * 7) % noise.count])))
        }
        for k in 0..<25 { sent.append(Sent(ms: 900 + 2_000 * Int64(k), major: 0, minor: 0, power: 0, rssi: nil, other: true)) }
        return sent.sorted { $0.ms < $1.ms }
    }

    // MARK: the reference

    struct Tracked {
        var samples: [(ms: Int64, rssi: Int)] = []
        var lastHeardMs: Int64 = 0
        var power: Int = 0
        var proximity = "unknown"
    }

    struct Listed: Equatable {
        var major: Int
        var minor: Int
        var rssi: Double?
        var distance: Double?
        var proximity: String
        var lastHeardMs: Int64
    }

    /// CLProximity's documented thresholds (0.5 m, 3 m) with the previous category kept within
    /// its range widened by 10 %.
    static func category(_ distance: Double?, previous: String) -> String {
        guard let distance else { return "unknown" }
        switch previous {
        case "immediate": if distance < 0.55 { return "immediate" }
        case "near": if distance >= 0.45 && distance < 3.3 { return "near" }
        case "far": if distance >= 2.7 { return "far" }
        default: break
        }
        return distance < 0.5 ? "immediate" : distance < 3 ? "near" : "far"
    }

    /// The 20 % trimmed mean of the last 32 measurements younger than 20 s (at least one per
    /// side once there are 3).
    static func trimmedMean(_ samples: [(ms: Int64, rssi: Int)], at ms: Int64) -> Double? {
        let window = samples.suffix(32).filter { ms - $0.ms >= 0 && ms - $0.ms < 20_000 }.map { $0.rssi }.sorted()
        guard !window.isEmpty else { return nil }
        let trim = window.count >= 3 ? max(1, window.count * 20 / 100) : 0
        let kept = window[trim..<(window.count - trim)]
        return Double(kept.reduce(0, +)) / Double(kept.count)
    }

    struct Reference {
        var constraints: [Int: (major: UInt16?, Void)] = [:]
        var beacons: [String: Tracked] = [:]

        static func key(_ major: UInt16, _ minor: UInt16) -> String { "\(major)/\(minor)" }

        func wanted(_ major: UInt16) -> Bool { constraints.values.contains { $0.major == nil || $0.major == major } }

        mutating func sighting(_ sent: Sent) {
            guard !sent.other, wanted(sent.major) else { return }
            var beacon = beacons[Self.key(sent.major, sent.minor)] ?? Tracked()
            if let rssi = sent.rssi { beacon.samples.append((sent.ms, Int(rssi))) }
            beacon.lastHeardMs = sent.ms
            beacon.power = Int(sent.power)
            beacons[Self.key(sent.major, sent.minor)] = beacon
        }

        mutating func stop(_ slot: Int) {
            constraints[slot] = nil
            beacons = beacons.filter { wanted(UInt16($0.key.split(separator: "/")[0])!) }
        }

        mutating func frame(_ slot: Int, at ms: Int64) -> [Listed] {
            beacons = beacons.filter { ms - $0.value.lastHeardMs < 30_000 }
            let major = constraints[slot]!.major
            var listed: [Listed] = []
            for (key, var beacon) in beacons {
                let parts = key.split(separator: "/").map { Int($0)! }
                guard major == nil || Int(major!) == parts[0] else { continue }
                var rssi: Double? = nil
                var distance: Double? = nil
                if ms - beacon.lastHeardMs < 2_000, let filtered = RangingComponentTests.trimmedMean(beacon.samples, at: ms) {
                    rssi = filtered
                    distance = pow(10, (Double(beacon.power) - filtered) / 20)
                }
                beacon.proximity = RangingComponentTests.category(distance, previous: beacon.proximity)
                beacons[key] = beacon
                listed.append(Listed(major: parts[0], minor: parts[1], rssi: rssi, distance: distance, proximity: beacon.proximity,
                                     lastHeardMs: beacon.lastHeardMs))
            }
            return listed.sorted { ($0.distance ?? .infinity, $0.major, $0.minor) < ($1.distance ?? .infinity, $1.major, $1.minor) }
        }
    }

    // MARK: the test

    static let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
    static let t0Ms = Int64(AgentEndToEndTests.trackStart) * 1_000

    static func parse(_ line: UnsafeRawBufferPointer) throws -> (time: String, beacons: [Listed], more: Int) {
        let object = try #require(JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var beacons: [Listed] = []
        for beacon in try #require(object["beacons"] as? [[String: Any]]) {
            #expect(beacon["uuid"] as? String == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
            let heardText = try #require(beacon["last_heard"] as? String)
            let heard = try #require(formatter.date(from: heardText))
            beacons.append(Listed(major: try #require(beacon["major"] as? Int), minor: try #require(beacon["minor"] as? Int),
                                  rssi: beacon["rssi"] as? Double, distance: beacon["distance_m"] as? Double,
                                  proximity: try #require(beacon["proximity"] as? String),
                                  lastHeardMs: Int64((heard.timeIntervalSince1970 * 1_000).rounded()) - t0Ms))
        }
        return (try #require(object["time"] as? String), beacons, try #require(object["more"] as? Int))
    }

    @Test func linesPerSecondMatchAnIndependentComputationOfTheSameSightings() throws {
        let (master, slave) = try H.openPTY()
        defer { close(master) }
        let bluetooth = BluetoothSource(board: try H.board("[bluetooth]\nfeed = \"\(slave)\"\n"), stateDirectory: "/", tier: .best)
        bluetooth.openIfDue(H.now())
        let ranging = Ranging(slots: 4)
        var reference = Reference()
        var poll = PollSet(capacity: 1)
        var seen: Set<String> = []
        var perSlot: [Int: Int] = [:]

        func at(_ ms: Int64) -> AgentTime {
            AgentTime(monotonic: MonotonicInstant(nanoseconds: ms * 1_000_000), utc: UTCTime(nanoseconds: (Self.t0Ms + ms) * 1_000_000))
        }
        func frames(until ms: Int64, from: inout Int64) throws {
            // Every half second up to `ms` (the lines fall due at whole and half seconds, as the
            // connections asked): the component's due lines against the reference's.
            while from <= ms {
                while let (slot, line) = ranging.nextLine(at(from)) {
                    let (time, beacons, more) = try Self.parse(line)
                    let expected = reference.frame(slot, at: from)
                    #expect(more == 0)
                    #expect(time.hasPrefix("2024-03-15T10:00:") || time.hasPrefix("2024-03-15T10:01:"))
                    #expect(beacons.map { "\($0.major)/\($0.minor)" } == expected.map { "\($0.major)/\($0.minor)" },
                            "order at \(from) ms, slot \(slot)")
                    for (got, want) in zip(beacons, expected) {
                        #expect(got.proximity == want.proximity, "\(want.major)/\(want.minor) at \(from) ms: \(got) vs \(want)")
                        #expect(got.lastHeardMs == want.lastHeardMs)
                        #expect((got.rssi == nil) == (want.rssi == nil) && abs((got.rssi ?? 0) - (want.rssi ?? 0)) <= 0.05 + 1e-9)
                        // The outside formula on the same RSSI and measured power, to the line's 2 decimals.
                        #expect((got.distance == nil) == (want.distance == nil) && abs((got.distance ?? 0) - (want.distance ?? 0)) <= 0.005 + 1e-9 * (want.distance ?? 0))
                        seen.insert(want.proximity)
                    }
                    perSlot[slot, default: 0] += 1
                }
                from += 500
            }
        }

        ranging.start(0, BeaconIdentityConstraint(uuid: Self.uuid, major: 100), at(0))
        reference.constraints[0] = (100, ())
        var started = false, stopped = false
        var nextFrame: Int64 = 500
        for sent in Self.timeline() {
            try frames(until: sent.ms, from: &nextFrame)
            if !started && sent.ms > 10_500 {
                ranging.start(1, BeaconIdentityConstraint(uuid: Self.uuid), at(10_500))
                reference.constraints[1] = (nil, ())
                started = true
            }
            if !stopped && sent.ms > 30_700 {
                ranging.end(1)
                reference.stop(1)
                stopped = true
            }
            let before = bluetooth.sightingsGathered
            H.write(master, Self.event(sent))
            for _ in 0..<20 where bluetooth.sightingsGathered == before {
                poll.removeAll()
                bluetooth.register(in: &poll)
                _ = poll.wait(timeoutMs: 1_000)
                bluetooth.read(poll, at(sent.ms))
                if ranging.isActive { for index in 0..<bluetooth.sightingCount { ranging.observe(bluetooth.sighting(index)) } }
            }
            #expect(bluetooth.sightingsGathered == before + 1, "one sighting per event")
            reference.sighting(sent)
        }
        try frames(until: 50_000, from: &nextFrame)
        #expect(perSlot == [0: 50, 1: 20], "50 lines of the first connection, 20 of the second: \(perSlot)")
        #expect(seen == ["immediate", "near", "far", "unknown"], "every category was exercised: \(seen)")
        #expect(ranging.ranger.count == 2, "A and C left: B dropped after 30 s silent, D with the second connection: \(ranging.ranger.count)")
        let status = try #require(try H.status(ranging)["ranging"] as? [String: Any])
        #expect(status["streams"] as? Int == 1 && status["lines"] as? Int == 70)
    }

    /// The component's part of a turn, as the loop calls it with a ranging client and 500
    /// beacons in range: the turn's sightings, then the line when its second has come. Nothing
    /// is allocated once running.
    @Test func aTurnWithSightingsAndALineAllocatesNothing() throws {
        let ranging = Ranging(slots: 8)
        func at(_ ms: Int64) -> AgentTime {
            AgentTime(monotonic: MonotonicInstant(nanoseconds: ms * 1_000_000), utc: UTCTime(nanoseconds: (Self.t0Ms + ms) * 1_000_000))
        }
        ranging.start(3, BeaconIdentityConstraint(uuid: Self.uuid), at(0))
        var sightings: [Sighting] = []
        for second in 0..<30 {
            for minor in 0..<500 {
                sightings.append(Sighting(identity: BeaconIdentity(uuid: Self.uuid, major: 1, minor: UInt16(minor)), rssi: Int8(-40 - (minor * 7 + second) % 50),
                                          measuredPower: -59, address: BLEAddress(value: UInt64(minor)),
                                          time: at(Int64(second) * 1_000 + Int64(minor)).utc))
            }
        }
        var lines = 0
        var longest = 0
        func second(_ index: Int) {
            for offset in (index * 500)..<((index + 1) * 500) { if ranging.isActive { ranging.observe(sightings[offset]) } }
            while let (_, line) = ranging.nextLine(at(Int64(index + 1) * 1_000)) {
                lines += 1
                longest = max(longest, line.count)
            }
        }
        for index in 0..<20 { second(index) }
        let allocated = allocations { for index in 20..<30 { second(index) } }
        #expect(allocated == 0)
        #expect(lines == 30 && longest <= Ranging.lineBytes && longest > 100 * 150, "\(lines) lines, the longest \(longest) bytes")
    }

    /// While a client ranges, the adapter scans continuously (the finest tier's window and
    /// interval); after, it goes back to what the radios' tier asks for, including a tier that
    /// changed meanwhile.
    @Test func theScanIsContinuousWhileBeaconsAreRanged() throws {
        let bluetooth = BluetoothSource(board: try H.board("[bluetooth]\nhci = 0\n"), stateDirectory: "/", tier: .hundredMeters)
        let hundred = TierPolicy(tier: .hundredMeters).scanSettings, best = TierPolicy(tier: .best).scanSettings
        let kilometer = TierPolicy(tier: .kilometer).scanSettings
        #expect(bluetooth.scanSettings == hundred && hundred != best)
        bluetooth.scanForRanging(true)
        #expect(bluetooth.scanSettings == best)
        bluetooth.reconfigure(kilometer)
        #expect(bluetooth.scanSettings == best, "ranging holds the scan")
        bluetooth.scanForRanging(false)
        #expect(bluetooth.scanSettings == kilometer)
        #expect(try H.status(bluetooth)["bluetooth"].flatMap { $0 as? [String: Any] }?["ranging_scan"] as? Bool == false)
    }
}
