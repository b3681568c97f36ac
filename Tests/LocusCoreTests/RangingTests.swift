import AllocCounter
import Foundation
@testable import LocusCore
import TestSupport
import Testing

/// Beacon ranging's pure part: the distance model against outside formulas, the table's
/// capacity and bookkeeping, the frame's shape, the protocol's `range` op, and a ranging second
/// with 500 beacons that allocates nothing. (The order and proximity per second over an HCI
/// feed, against a computation written in the test, are in LocusAgentTests'
/// RangingComponentTests.)
@Suite struct RangingTests {
    static let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
    static let start: Int64 = 1_710_496_800

    static func sighting(major: UInt16 = 1, minor: UInt16, rssi: Int8?, power: Int8 = -59, ms: Int64, uuid: BeaconUUID = RangingTests.uuid) -> Sighting {
        Sighting(identity: BeaconIdentity(uuid: uuid, major: major, minor: minor), rssi: rssi, measuredPower: power,
                 address: BLEAddress(value: UInt64(minor)), time: time(ms))
    }

    static func time(_ ms: Int64) -> UTCTime { UTCTime(nanoseconds: (start * 1_000 + ms) * 1_000_000) }

    /// The log-distance path-loss model with the frame's own measured power P (RSSI at 1 m) and
    /// n = 2: d = 10^((P - RSSI) / (10 n)) (Rappaport, "Wireless Communications", eq. 4.68; the
    /// Android Beacon Library's PathLossDistanceCalculator), here with glibc's `pow`.
    static func logDistance(rssi: Double, power: Double) -> Double { pow(10, (power - rssi) / 20) }

    /// The curve David G. Young (Radius Networks) fitted to iOS's CLBeacon.accuracy, as the
    /// Android Beacon Library's CurveFittedDistanceCalculator evaluates it: ratio = rssi / P;
    /// ratio < 1: ratio^10; else 0.89976 * ratio^7.7095 + 0.111.
    static func altBeaconCurve(rssi: Double, power: Double) -> Double {
        let ratio = rssi / power
        return ratio < 1 ? pow(ratio, 10) : 0.89976 * pow(ratio, 7.7095) + 0.111
    }

    @Test func theDistanceModelIsTheLogDistanceFormulaWithTheFramesMeasuredPower() throws {
        var worst = 0.0
        for power in stride(from: -80.0, through: -40.0, by: 1) {
            for tenths in stride(from: -1_100, through: -250, by: 7) {
                let rssi = Double(tenths) / 10
                let modelled = try #require(BeaconRanger.distanceModel.distance(rssi: rssi, measuredPower: MeasuredPower(atOneMeter: Int8(power))))
                let outside = Self.logDistance(rssi: rssi, power: power)
                worst = max(worst, abs(modelled - outside) / outside)
            }
        }
        #expect(worst < 1e-13, "relative difference \(worst)")
        // The Radius Networks curve the library also carries is the same published formula.
        for rssi in stride(from: -100.0, through: -30, by: 0.5) {
            let modelled = try #require(DistanceModel.radiusNetworksIOSFit.distance(rssi: rssi, measuredPower: MeasuredPower(atOneMeter: -59)))
            let outside = Self.altBeaconCurve(rssi: rssi, power: -59)
            #expect(abs(modelled - outside) <= 1e-12 * outside, "\(rssi): \(modelled) vs \(outside)")
        }
    }

    /// docs/ranging.md's comparison table (measured power -59 dBm), recomputed from the two
    /// outside formulas: the rows the documentation states are the formulas' values.
    @Test func theDocumentedComparisonWithTheAltBeaconCurveHolds() {
        let rows: [(rssi: Double, logDistance: Double, curve: Double)] = [
            (-45, 0.20, 0.07), (-52, 0.45, 0.28), (-59, 1.00, 1.01), (-65, 2.00, 2.01), (-70, 3.55, 3.47),
            (-75, 6.31, 5.83), (-80, 11.22, 9.52), (-85, 19.95, 15.13), (-90, 35.48, 23.44),
        ]
        for row in rows {
            #expect(abs(Self.logDistance(rssi: row.rssi, power: -59) - row.logDistance) < 0.005, "\(row)")
            #expect(abs(Self.altBeaconCurve(rssi: row.rssi, power: -59) - row.curve) < 0.005, "\(row)")
            #expect(abs(BeaconRanger.distanceModel.distance(rssi: row.rssi, measuredPower: MeasuredPower(atOneMeter: -59))! - row.logDistance) < 0.005)
        }
        // The categories the two give differ only just above the immediate boundary (the curve
        // says immediate from -55.05 dBm, the log-distance model from -52.98) and within 0.1 dB
        // of the near/far boundary (-68.64 and -68.54), as the documentation says.
        for hundredths in stride(from: -10_000, through: -3_000, by: 1) {
            let rssi = Double(hundredths) / 100
            let ours = BeaconProximity.category(distance: Self.logDistance(rssi: rssi, power: -59))
            let theirs = BeaconProximity.category(distance: Self.altBeaconCurve(rssi: rssi, power: -59))
            if ours != theirs {
                #expect((rssi > -55.06 && rssi < -52.97) || (rssi > -68.65 && rssi < -68.53), "\(rssi): \(ours) vs \(theirs)")
            }
        }
    }

    @Test func recentlyUnheardIsUnknownAndSilenceDropsTheBeacon() {
        let ranger = BeaconRanger(beaconCapacity: 8, slots: 2)
        ranger.observe(Self.sighting(minor: 1, rssi: -60, ms: 0))
        #expect(ranger.count == 0, "nothing is tracked while no client ranges")
        ranger.start(slot: 0, BeaconIdentityConstraint(uuid: Self.uuid, major: 1))
        ranger.observe(Self.sighting(minor: 1, rssi: -59, ms: 100))
        ranger.observe(Self.sighting(major: 2, minor: 1, rssi: -59, ms: 100))
        #expect(ranger.count == 1, "the constraint's major only")
        var frame = ranger.range(slot: 0, now: Self.time(1_000))
        #expect(frame.count == 1 && ranger.beacon(0).proximity == .near && ranger.beacon(0).distanceM == 1.0)
        frame = ranger.range(slot: 0, now: Self.time(2_100))
        #expect(frame.count == 1 && ranger.beacon(0).proximity == .unknown && ranger.beacon(0).rssi == nil && ranger.beacon(0).distanceM == nil)
        #expect(ranger.beacon(0).lastHeard == Self.time(100))
        ranger.expire(now: Self.time(30_099))
        #expect(ranger.range(slot: 0, now: Self.time(30_099)).count == 1)
        ranger.expire(now: Self.time(30_100))
        #expect(ranger.range(slot: 0, now: Self.time(30_100)).count == 0, "silent for the monitor's 30 s exit timeout")
        // A frame without calibration (measured power 0) has no estimate.
        ranger.observe(Self.sighting(minor: 9, rssi: -59, power: 0, ms: 31_000))
        frame = ranger.range(slot: 0, now: Self.time(31_500))
        #expect(frame.count == 1 && ranger.beacon(0).rssi == -59 && ranger.beacon(0).distanceM == nil && ranger.beacon(0).proximity == .unknown)
        ranger.stop(slot: 0)
        #expect(ranger.count == 0 && ranger.activeCount == 0, "no client: nothing tracked")
    }

    /// The agent's clock stepped (GNSS time took over): what the ranger stored moves with it, so
    /// a beacon heard a moment before the step is still recent and keeps its samples after it.
    @Test func aClockStepMovesWhatTheRangerStored() {
        let ranger = BeaconRanger(beaconCapacity: 4, slots: 1)
        ranger.start(slot: 0, BeaconIdentityConstraint(uuid: Self.uuid))
        for ms in stride(from: Int64(0), through: 900, by: 300) { ranger.observe(Self.sighting(minor: 1, rssi: -65, ms: ms)) }
        ranger.clockStepped(byNs: 3_600 * 1_000_000_000)
        ranger.expire(now: Self.time(3_601_000))
        let frame = ranger.range(slot: 0, now: Self.time(3_601_000))
        #expect(frame.count == 1 && ranger.beacon(0).lastHeard == Self.time(3_600_900))
        #expect(ranger.beacon(0).rssi == -65 && ranger.beacon(0).proximity == .near)
    }

    @Test func aFullTableRefusesNewBeaconsCountsThemAndTheLineSaysSo() throws {
        let ranger = BeaconRanger(beaconCapacity: 4, slots: 2)
        ranger.start(slot: 0, BeaconIdentityConstraint(uuid: Self.uuid))
        ranger.start(slot: 1, BeaconIdentityConstraint(uuid: Self.uuid, major: 1, minor: 6))
        for minor in 1...6 { ranger.observe(Self.sighting(minor: UInt16(minor), rssi: Int8(-50 - minor), ms: Int64(minor))) }
        ranger.observe(Self.sighting(minor: 6, rssi: -60, ms: 10))
        #expect(ranger.count == 4 && ranger.refusedSightings == 3)
        let frame = ranger.range(slot: 0, now: Self.time(500))
        #expect(frame.count == 4 && frame.refused == 3)
        #expect((0..<4).map { ranger.beacon($0).identity.minor } == [1, 2, 3, 4], "nearest first")
        var line = JSONWriter(capacity: 4096)
        RangingJSON.frame(ranger.constraint(0), time: Self.time(500), frame, ranger, beaconsPerLine: 3, into: &line)
        let object = try #require(JSONSerialization.jsonObject(with: Data(line.bytes)) as? [String: Any])
        #expect((object["beacons"] as? [[String: Any]])?.count == 3 && object["more"] as? Int == 1 && object["refused"] as? Int == 3)
        #expect((object["ranging"] as? [String: Any])?["uuid"] as? String == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
        #expect(object["time"] as? String == "2024-03-15T10:00:00.500Z")
        let first = try #require((object["beacons"] as? [[String: Any]])?.first)
        #expect(first["minor"] as? Int == 1 && first["rssi"] as? Double == -51.0 && first["proximity"] as? String == "immediate")
        #expect(first["last_heard"] as? String == "2024-03-15T10:00:00.001Z")
        #expect(ranger.range(slot: 1, now: Self.time(500)).refused == 2, "minor 6 twice, for the client that wanted it")
        #expect(ranger.range(slot: 0, now: Self.time(600)).refused == 0, "counted since the client's previous line")
    }

    /// The longest a beacon and a line's own members can be rendered stays within the bounds the
    /// agent sizes its line buffer with.
    @Test func theWorstCaseLineFitsTheStatedBounds() throws {
        let ranger = BeaconRanger(beaconCapacity: 4, slots: 1)
        let uuid = BeaconUUID("FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF")!
        ranger.start(slot: 0, BeaconIdentityConstraint(uuid: uuid, major: 65_535, minor: 65_535))
        // -127 dBm against a measured power of -1: the farthest distance that still renders.
        ranger.observe(Sighting(identity: BeaconIdentity(uuid: uuid, major: 65_535, minor: 65_535), rssi: -127, measuredPower: -1,
                                address: BLEAddress(value: 0), time: UTCTime(seconds: 7_289_567_999, nanoseconds: 999_000_000)))
        let frame = ranger.range(slot: 0, now: UTCTime(seconds: 7_289_568_000))
        let beacon = ranger.beacon(0)
        #expect(beacon.proximity == .far && beacon.distanceM! > 1e5)
        var line = JSONWriter(capacity: 4096)
        line.beginArray()
        line.integer(0)
        let start = line.count
        RangingJSON.beacon(beacon, into: &line)
        #expect(line.count - start + 1 <= RangingJSON.maximumBeaconBytes, "\(line.count - start + 1) bytes")
        var whole = JSONWriter(capacity: 4096)
        RangingJSON.frame(ranger.constraint(0), time: UTCTime(seconds: 7_289_568_000), BeaconRanger.Frame(count: 0, refused: Int.max),
                          ranger, beaconsPerLine: 100, into: &whole)
        #expect(whole.count <= RangingJSON.maximumFrameBytes, "\(whole.count) bytes")
        _ = frame
    }

    /// The table (open addressing with backward-shift deletion, entries moved on removal) against
    /// a dictionary, through random sightings, expiries and clients coming and going.
    @Test func theTableAgreesWithADictionaryThroughInsertionsAndRemovals() {
        var random = SplitMix64(state: 42)
        let ranger = BeaconRanger(beaconCapacity: 64, slots: 3)
        var model: [BeaconIdentity: Int64] = [:]
        var constraints: [Int: BeaconIdentityConstraint] = [:]
        let uuids = [Self.uuid, BeaconUUID(high: 1, low: 2)]
        for step in 0..<20_000 {
            let ms = Int64(step) * 10
            switch random.next() % 100 {
            case 0:
                let slot = Int(random.next() % 3)
                let constraint = BeaconIdentityConstraint(uuid: uuids[Int(random.next() % 2)], major: random.next() % 2 == 0 ? nil : UInt16(random.next() % 4))
                ranger.start(slot: slot, constraint)
                constraints[slot] = constraint
                model = model.filter { identity, _ in constraints.values.contains { $0.matches(identity) } }
            case 1:
                let slot = Int(random.next() % 3)
                ranger.stop(slot: slot)
                constraints[slot] = nil
                model = model.filter { identity, _ in constraints.values.contains { $0.matches(identity) } }
            case 2...5:
                ranger.expire(now: Self.time(ms))
                model = model.filter { ms - $0.value < 30_000 }
            default:
                let identity = BeaconIdentity(uuid: uuids[Int(random.next() % 2)], major: UInt16(random.next() % 4), minor: UInt16(random.next() % 40))
                ranger.observe(Sighting(identity: identity, rssi: -60, measuredPower: -59, address: BLEAddress(value: 0), time: Self.time(ms)))
                if constraints.values.contains(where: { $0.matches(identity) }) && (model[identity] != nil || model.count < 64) {
                    model[identity] = ms
                }
            }
            #expect(ranger.count == model.count, "step \(step)")
            if ranger.count != model.count { return }
        }
        for slot in constraints.keys {
            let frame = ranger.range(slot: slot, now: Self.time(200_000))
            let listed = Set((0..<frame.count).map { ranger.beacon($0).identity })
            #expect(listed == Set(model.keys.filter { constraints[slot]!.matches($0) }))
            for index in 0..<frame.count { #expect(ranger.beacon(index).lastHeard == Self.time(model[ranger.beacon(index).identity]!)) }
        }
    }

    @Test func theRangeOperationDecodesItsConstraintAndRefusesBadOnes() {
        func decode(_ text: String) -> Result<ControlRequest, ControlError> { ControlProtocol.decode(Array(text.utf8)).request }
        guard case .success(.range(let constraint)) = decode(#"{"op":"range","constraint":{"uuid":"e2c56db5-dffb-48d2-b060-d0f5a71096e0","major":7}}"#) else {
            Issue.record("range not decoded")
            return
        }
        #expect(constraint == BeaconIdentityConstraint(uuid: Self.uuid, major: 7))
        guard case .success(.rangeStop) = decode(#"{"op":"range-stop"}"#) else { Issue.record("range-stop not decoded"); return }
        for bad in [#"{"op":"range"}"#, #"{"op":"range","constraint":{"uuid":"nope"}}"#,
                    #"{"op":"range","constraint":{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","minor":1}}"#,
                    #"{"op":"range","constraint":{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":70000}}"#] {
            guard case .failure(let error) = decode(bad) else { Issue.record("accepted \(bad)"); continue }
            #expect(error.code == .badArgument, "\(bad): \(error.message)")
        }
        #expect(ControlRequest.range(constraint: constraint).requiredGrant == .positions && ControlRequest.rangeStop.requiredGrant == .positions, "ranging reads positions")
    }

    /// One ranging second as the agent runs it with 500 beacons of the constraint in range, each
    /// heard once that second: the sightings, the expiry, the frame (sorted) and its line.
    @Test func aRangingSecondWith500BeaconsAllocatesNothing() {
        let ranger = BeaconRanger(beaconCapacity: 512, slots: 8)
        ranger.start(slot: 0, BeaconIdentityConstraint(uuid: Self.uuid))
        var random = SplitMix64(state: 3)
        var sightings: [Sighting] = []
        for second in 0..<25 {
            for minor in 0..<500 {
                sightings.append(Self.sighting(minor: UInt16(minor), rssi: Int8(-40 - Int(random.next() % 55)),
                                               ms: Int64(second) * 1_000 + Int64(random.next() % 1_000)))
            }
        }
        var line = JSONWriter(capacity: 24 << 10)
        func second(_ index: Int) {
            for offset in (index * 500)..<(index * 500 + 500) { ranger.observe(sightings[offset]) }
            let now = Self.time(Int64(index + 1) * 1_000)
            ranger.expire(now: now)
            let frame = ranger.range(slot: 0, now: now)
            line.reset()
            RangingJSON.frame(ranger.constraint(0), time: now, frame, ranger, beaconsPerLine: 100, into: &line)
        }
        for index in 0..<20 { second(index) }
        let allocated = allocations { for index in 20..<25 { second(index) } }
        #expect(allocated == 0)
        #expect(!line.overflowed && ranger.count == 500)
        let frame = ranger.range(slot: 0, now: Self.time(25_000))
        #expect(frame.count == 500)
        var previous = 0.0
        for index in 0..<frame.count {
            let distance = ranger.beacon(index).distanceM ?? .infinity
            #expect(distance >= previous)
            previous = distance
        }
    }
}
