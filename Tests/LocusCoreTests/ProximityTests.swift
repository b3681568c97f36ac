import AllocCounter
import Foundation
@testable import LocusCore
import Testing
import TestSupport

/// AltBeacon's RunningAverageRssiFilter, transcribed as the baseline: drop samples aged 20 s or
/// more, sort, drop `size/10 + 1` at each end when there are more than 2, average the rest.
private struct AltBeaconRunningAverage {
    var samples: [(timeMs: Int64, rssi: Int)] = []

    mutating func add(_ rssi: Int, atMs timeMs: Int64) { samples.append((timeMs, rssi)) }

    mutating func value(nowMs: Int64) -> Double {
        samples.removeAll { nowMs - $0.timeMs >= 20_000 }
        let sorted = samples.map(\.rssi).sorted()
        var start = 0
        var end = sorted.count - 1
        if sorted.count > 2 {
            start = sorted.count / 10 + 1
            end = sorted.count - sorted.count / 10 - 2
        }
        return Double(sorted[start...end].reduce(0, +)) / Double(end - start + 1)
    }
}

private func close(_ a: Double?, _ b: Double, within tolerance: Double = 1e-9) -> Bool {
    guard let a else { return false }
    return abs(a - b) <= tolerance * max(1, abs(b))
}

@Suite struct RSSIFilterTests {
    @Test func ignoresNotAvailableZeroAndOutOfRange() {
        var filter = RSSIFilter()
        for rssi: Int8 in [127, 0, 21, -128] {
            let accepted = filter.add(rssi: rssi, atMs: 0)
            #expect(!accepted, "rssi \(rssi)")
        }
        #expect(filter.count(nowMs: 0) == 0)
        #expect(filter.value(nowMs: 0) == nil)
        #expect(filter.statistics(nowMs: 0) == nil)
        for rssi: Int8 in [-127, 20] {
            let accepted = filter.add(rssi: rssi, atMs: 0)
            #expect(accepted, "rssi \(rssi)")
        }
        #expect(filter.count(nowMs: 0) == 2)
    }

    @Test func samplesExpireAfterTheWindow() {
        var filter = RSSIFilter()
        filter.add(rssi: -60, atMs: 1_000)
        filter.add(rssi: -70, atMs: 11_000)
        #expect(filter.value(nowMs: 500) == nil)           // both in the future of `now`
        #expect(filter.value(nowMs: 1_000) == -60)
        #expect(filter.count(nowMs: 20_999) == 2)
        #expect(filter.value(nowMs: 20_999) == -65)
        #expect(filter.count(nowMs: 21_000) == 1)           // aged exactly 20 s: gone
        #expect(filter.value(nowMs: 21_000) == -70)
        #expect(filter.value(nowMs: 31_000) == nil)
        #expect(filter.count(nowMs: 31_000) == 0)

        var short = RSSIFilter(windowMs: 5_000)
        short.add(rssi: -50, atMs: 0)
        #expect(short.value(nowMs: 4_999) == -50)
        #expect(short.value(nowMs: 5_000) == nil)
    }

    @Test func trimsBothEnds() {
        // Default: 20 % per side, at least one once there are 3 samples.
        let filter = RSSIFilter()
        #expect([1, 2, 3, 4, 9, 10, 14, 15, 20, 32].map(filter.trimCount) == [0, 0, 1, 1, 1, 2, 2, 3, 4, 6])
        // 10 %, as AltBeacon's documentation describes its filter: at least one per side.
        let tenPercent = RSSIFilter(trimPercent: 10)
        #expect([2, 3, 9, 10, 19, 20, 32].map(tenPercent.trimCount) == [0, 1, 1, 1, 1, 2, 3])
        #expect(RSSIFilter(trimPercent: 0).trimCount(32) == 0)

        // Two samples: nothing to trim.
        var two = RSSIFilter()
        two.add(rssi: -50, atMs: 0)
        two.add(rssi: -90, atMs: 0)
        #expect(two.value(nowMs: 0) == -70)

        // Three samples: the median, as AltBeacon gives.
        var three = RSSIFilter()
        for rssi: Int8 in [-100, -60, -50] { three.add(rssi: rssi, atMs: 0) }
        #expect(three.value(nowMs: 0) == -60)

        // Ten samples at 10 %: one outlier at each end goes, whatever the arrival order.
        var ten = RSSIFilter(trimPercent: 10)
        let middle: [Int8] = [-61, -60, -59, -61, -60, -59, -61, -60]
        ten.add(rssi: -30, atMs: 0)
        for (index, rssi) in middle.enumerated() { ten.add(rssi: rssi, atMs: Int64(index)) }
        ten.add(rssi: -110, atMs: 9)
        #expect(ten.value(nowMs: 10) == -60.125)
        #expect(ten.mean(nowMs: 10) == -62.1)                // (-481 - 30 - 110) / 10
        // The same at the default 20 %: two per side, so one -61 and one -59 go too.
        var tenDefault = RSSIFilter()
        tenDefault.add(rssi: -30, atMs: 0)
        for (index, rssi) in middle.enumerated() { tenDefault.add(rssi: rssi, atMs: Int64(index)) }
        tenDefault.add(rssi: -110, atMs: 9)
        #expect(close(tenDefault.value(nowMs: 10), -361.0 / 6))   // -61 -61 -60 -60 -60 -59

        // Twenty samples, three outliers on the same side: all go (4 per side).
        var twenty = RSSIFilter()
        for index in 0..<17 { twenty.add(rssi: -70, atMs: Int64(index)) }
        for (index, rssi) in ([-45, -48, -50] as [Int8]).enumerated() { twenty.add(rssi: rssi, atMs: Int64(17 + index)) }
        #expect(twenty.value(nowMs: 19) == -70)

        // Without trimming the filter is a plain mean.
        var plain = RSSIFilter(trimPercent: 0)
        for rssi: Int8 in [-100, -60, -50] { plain.add(rssi: rssi, atMs: 0) }
        #expect(close(plain.value(nowMs: 0), -70))
    }

    @Test func statisticsDescribeTheWindow() throws {
        var filter = RSSIFilter()
        for (index, rssi) in ([-66, -70, -80, -75, -71] as [Int8]).enumerated() {
            filter.add(rssi: rssi, atMs: Int64(index) * 1_000)
        }
        let statistics = try #require(filter.statistics(nowMs: 4_000))
        #expect(statistics.count == 5)
        #expect(statistics.minimum == -80)
        #expect(statistics.maximum == -66)
        #expect(close(statistics.mean, -72.4))
        #expect(close(statistics.filtered, -72))    // 5 samples: one per side goes, -70 -71 -75 stay
        #expect(filter.minimum(nowMs: 4_000) == -80)
        #expect(filter.maximum(nowMs: 4_000) == -66)
        #expect(close(filter.mean(nowMs: 4_000), -72.4))
        #expect(statistics.filtered == filter.value(nowMs: 4_000))
        // The window moves: at 20.5 s only the samples from 1 s on count.
        #expect(filter.maximum(nowMs: 20_500) == -70)
    }

    @Test func fullRingOverwritesTheOldest() {
        var filter = RSSIFilter()
        // 40 samples, -1...-40 dBm, all within the window: the first 8 are overwritten.
        for index in 0..<40 { filter.add(rssi: Int8(-1 - index), atMs: Int64(index)) }
        #expect(filter.count(nowMs: 40) == RSSIFilter.capacity)
        #expect(filter.maximum(nowMs: 40) == -9)
        #expect(filter.minimum(nowMs: 40) == -40)
        #expect(filter.mean(nowMs: 40) == Double((9...40).reduce(0, +)) / -32)
        // Trimmed: 6 at each end of -9...-40 leave -15...-34.
        #expect(filter.value(nowMs: 40) == Double((15...34).reduce(0, +)) / -20)

        filter.reset()
        #expect(filter.count(nowMs: 40) == 0)
        #expect(filter.value(nowMs: 40) == nil)
    }

    /// A beacon at a fixed true RSSI of -70 dBm with Gaussian-ish noise (sd 4 dB) and 10 %
    /// outliers of +-20 dB. The filtered value must be much closer to the truth than a raw
    /// sample and no worse than a plain mean over the same window; and, the issue's "at least as
    /// well", no worse than AltBeacon's running average when both see the same samples (the
    /// whole 20 s window fits the ring: one report every 625 ms or slower). Faster reporters are
    /// measured and printed too: there AltBeacon's unbounded list averages more samples.
    @Test(arguments: [1_000 as Int64, 700, 250, 100])
    func noiseSimulation(intervalMs: Int64) {
        let truth = -70.0
        var random = SplitMix64(state: 0x10C5 &+ UInt64(intervalMs))
        var filter = RSSIFilter()
        var altBeacon = AltBeaconRunningAverage()
        var raw = 0.0, filtered = 0.0, plain = 0.0, reference = 0.0
        var scored = 0
        let steps = min(Int(2_000_000 / intervalMs), 8_000)   // 2000 s of reports, at most 8000
        for step in 0..<steps {
            let now = Int64(step) * intervalMs
            var sample = truth + 4 * random.gaussian()
            if random.unit() < 0.1 { sample += random.unit() < 0.5 ? 20 : -20 }
            let rssi = Int8(max(-127, min(20, sample.rounded())))
            filter.add(rssi: rssi, atMs: now)
            altBeacon.add(Int(rssi), atMs: now)
            guard now >= 20_000 else { continue }             // a full window first
            let error = { (value: Double) in (value - truth) * (value - truth) }
            raw += error(Double(rssi))
            filtered += error(filter.value(nowMs: now)!)
            plain += error(filter.mean(nowMs: now)!)
            reference += error(altBeacon.value(nowMs: now))
            scored += 1
        }
        let rms = { (sum: Double) in (sum / Double(scored)).squareRoot() }
        let show = { (value: Double) in String(format: "%.3f", value) }
        print("""
            proximity noise simulation, one report per \(intervalMs) ms, \(scored) estimates, RMS error: \
            raw \(show(rms(raw))) dB, plain mean \(show(rms(plain))) dB, \
            AltBeacon running average \(show(rms(reference))) dB, RSSIFilter \(show(rms(filtered))) dB
            """)
        #expect(rms(filtered) < rms(raw) / 3)
        #expect(rms(filtered) <= rms(plain))
        if RSSIFilter.defaultWindowMs / intervalMs <= Int64(RSSIFilter.capacity) {
            #expect(rms(filtered) <= rms(reference))
        }
    }
}

@Suite struct DistanceTests {
    @Test func logDistanceModel() {
        let oneMeter = MeasuredPower(dBmAtOneMeter: -59)
        #expect(close(DistanceModel.freeSpace.distance(rssi: -59, measuredPower: oneMeter), 1))
        #expect(close(DistanceModel.freeSpace.distance(rssi: -79, measuredPower: oneMeter), 10, within: 1e-14))
        #expect(close(DistanceModel.freeSpace.distance(rssi: -99, measuredPower: oneMeter), 100, within: 1e-14))
        #expect(close(DistanceModel.freeSpace.distance(rssi: -49, measuredPower: oneMeter), 0.316_227_766_016_837_94, within: 1e-14))
        let indoor = DistanceModel.logDistance(pathLossExponent: 3)
        #expect(close(indoor.distance(rssi: -89, measuredPower: oneMeter), 10, within: 1e-14))
        #expect(close(indoor.distance(rssi: -68, measuredPower: oneMeter), pow(10, 9.0 / 30), within: 1e-14))
    }

    @Test func curveFitModels() {
        let power = MeasuredPower(dBmAtOneMeter: -59)
        // At the calibration RSSI the ratio is 1: coefficient + intercept.
        #expect(close(DistanceModel.radiusNetworksIOSFit.distance(rssi: -59, measuredPower: power), 0.89976 + 0.111))
        #expect(close(DistanceModel.altBeaconNexus5.distance(rssi: -59, measuredPower: power), 0.42093 + 0.54992))
        // Stronger than calibration: ratio^10.
        #expect(close(DistanceModel.radiusNetworksIOSFit.distance(rssi: -50, measuredPower: power), pow(50.0 / 59, 10), within: 1e-13))
        // Weaker: the fitted curve, checked against glibc's pow.
        #expect(close(DistanceModel.radiusNetworksIOSFit.distance(rssi: -75, measuredPower: power),
                      0.89976 * pow(75.0 / 59, 7.7095) + 0.111, within: 1e-13))
        #expect(close(DistanceModel.altBeaconNexus5.distance(rssi: -90, measuredPower: power),
                      0.42093 * pow(90.0 / 59, 6.9476) + 0.54992, within: 1e-13))
    }

    @Test func noEstimateWithoutAMeasurementOrCalibration() {
        let power = MeasuredPower(dBmAtOneMeter: -59)
        for model in [DistanceModel.freeSpace, .radiusNetworksIOSFit, .altBeaconNexus5] {
            #expect(model.distance(rssi: 0, measuredPower: power) == nil)
            #expect(model.distance(rssi: 5, measuredPower: power) == nil)
            #expect(model.distance(rssi: .nan, measuredPower: power) == nil)
            #expect(model.distance(rssi: -70, measuredPower: MeasuredPower(dBmAtOneMeter: 0)) == nil)
        }
        #expect(DistanceModel.logDistance(pathLossExponent: 0).distance(rssi: -70, measuredPower: power) == nil)
        // Absurd inputs stay finite.
        let far = DistanceModel.logDistance(pathLossExponent: 0.01).distance(rssi: -127, measuredPower: power)
        #expect(far.map { $0.isFinite } == true)
    }

    @Test func eddystoneTxPowerIsAtZeroMeters() {
        // Eddystone advertises the power at 0 m; 41 dB less is the power at 1 m.
        let eddystone = MeasuredPower(eddystoneTxPowerAtZeroMeters: -18)
        #expect(eddystone.dBmAtOneMeter == -59)
        #expect(close(DistanceModel.freeSpace.distance(rssi: -59, measuredPower: eddystone), 1))
        #expect(MeasuredPower(atOneMeter: -59) == eddystone)

        #expect(Beacon.eddystoneEID(txPower: -20, identifier: 1).measuredPower?.dBmAtOneMeter == -61)
        #expect(Beacon.eddystoneUID(namespace: EddystoneNamespace(high: 1, low: 2), instance: 3, txPower: -10)
                    .measuredPower?.dBmAtOneMeter == -51)
        #expect(Beacon.iBeacon(uuid: BeaconUUID(high: 1, low: 2), major: 1, minor: 2, measuredPower: -59)
                    .measuredPower?.dBmAtOneMeter == -59)
        #expect(Beacon.altBeacon(company: 0x0118, id1: BeaconUUID(high: 1, low: 2), id2: 1, id3: 2, referenceRSSI: -65, reserved: 0)
                    .measuredPower?.dBmAtOneMeter == -65)
        #expect(Beacon.eddystoneTLM(voltageMV: 3000, temperatureC: nil, advertisingCount: 0, uptimeTenths: 0).measuredPower == nil)
    }

    @Test func ownMathMatchesLibm() {
        var worst = 0.0
        var x = -4.0
        while x <= 4.0 {
            let relative = abs(PathLossMath.exp10(x) - pow(10, x)) / pow(10, x)
            worst = max(worst, relative)
            x += 0.001_25
        }
        var r = 0.01
        while r <= 4.0 {
            for y in [0.5, 2, 6.9476, 7.7095, 10] {
                worst = max(worst, abs(PathLossMath.pow(r, y) - pow(r, y)) / pow(r, y))
            }
            let log = log2(r)
            worst = max(worst, abs(PathLossMath.log2(r) - log) / max(1, abs(log)))
            r += 0.003_7
        }
        print("proximity math: worst relative error against glibc \(worst)")
        #expect(worst < 1e-14)
        #expect(PathLossMath.exp2(10) == 1024)
        #expect(PathLossMath.exp2(-1) == 0.5)
        #expect(PathLossMath.log2(1024) == 10)
        #expect(PathLossMath.log2(1) == 0)
        #expect(PathLossMath.exp2(2_000) == .infinity)
        #expect(PathLossMath.exp2(-2_000) == 0)
        #expect(PathLossMath.log2(0) == -.infinity)
        #expect(PathLossMath.log2(-1).isNaN)
    }
}

@Suite struct BeaconProximityTests {
    @Test func categoriesFromDistance() {
        #expect(BeaconProximity.category(distance: nil) == .unknown)
        #expect(BeaconProximity.category(distance: .nan) == .unknown)
        #expect(BeaconProximity.category(distance: -1) == .unknown)
        #expect(BeaconProximity.category(distance: 0) == .immediate)
        #expect(BeaconProximity.category(distance: 0.49) == .immediate)
        #expect(BeaconProximity.category(distance: 0.5) == .near)
        #expect(BeaconProximity.category(distance: 2.99) == .near)
        #expect(BeaconProximity.category(distance: 3.0) == .far)
        #expect(BeaconProximity.category(distance: 40) == .far)
        // Raw values are CLProximity's.
        #expect([BeaconProximity.unknown, .immediate, .near, .far].map(\.rawValue) == [0, 1, 2, 3])
        #expect(BeaconProximity.near.description == "near")
    }

    @Test func hysteresisHoldsThePreviousCategoryNearABoundary() {
        // near <-> far at 3.0 m, band 2.7 ... 3.3 m
        #expect(BeaconProximity.category(distance: 3.2, previous: .near) == .near)
        #expect(BeaconProximity.category(distance: 3.31, previous: .near) == .far)
        #expect(BeaconProximity.category(distance: 2.8, previous: .far) == .far)
        #expect(BeaconProximity.category(distance: 2.69, previous: .far) == .near)
        // immediate <-> near at 0.5 m, band 0.45 ... 0.55 m
        #expect(BeaconProximity.category(distance: 0.54, previous: .immediate) == .immediate)
        #expect(BeaconProximity.category(distance: 0.55, previous: .immediate) == .near)
        #expect(BeaconProximity.category(distance: 0.46, previous: .near) == .near)
        #expect(BeaconProximity.category(distance: 0.44, previous: .near) == .immediate)
        // Big jumps go straight to the new category; lost signal is unknown whatever came before.
        #expect(BeaconProximity.category(distance: 5, previous: .immediate) == .far)
        #expect(BeaconProximity.category(distance: 0.1, previous: .far) == .immediate)
        #expect(BeaconProximity.category(distance: nil, previous: .near) == .unknown)
        // From unknown there is nothing to hold.
        #expect(BeaconProximity.category(distance: 3.1, previous: .unknown) == .far)
        // Without hysteresis the plain thresholds apply.
        #expect(BeaconProximity.category(distance: 3.1, previous: .near, hysteresis: 0) == .far)

        // A beacon wobbling around 3 m changes category once at most.
        var category = BeaconProximity.unknown
        var changes = 0
        for step in 0..<200 {
            let distance = 3.0 + 0.25 * (step % 2 == 0 ? 1 : -1) * Double(step % 7) / 6
            let next = BeaconProximity.category(distance: distance, previous: category)
            if next != category { changes += 1 }
            category = next
        }
        #expect(changes <= 2)   // unknown -> first category, then held
    }

    @Test func requiredProximity() {
        #expect(BeaconProximity.immediate.isWithin(.near))
        #expect(BeaconProximity.near.isWithin(.near))
        #expect(!BeaconProximity.far.isWithin(.near))
        #expect(BeaconProximity.far.isWithin(.far))
        #expect(!BeaconProximity.unknown.isWithin(.far))
        #expect(!BeaconProximity.immediate.isWithin(.unknown))
    }
}

@Suite struct ProximityAllocationTests {
    @Test func hotPathAllocatesNothing() {
        var filter = RSSIFilter()
        let power = MeasuredPower(eddystoneTxPowerAtZeroMeters: -18)
        var category = BeaconProximity.unknown
        var checksum = 0.0
        func step(_ index: Int) {
            let now = Int64(index) * 100
            filter.add(rssi: Int8(-60 - index % 20), atMs: now)
            if let rssi = filter.value(nowMs: now) {
                checksum += rssi
                let distance = DistanceModel.freeSpace.distance(rssi: rssi, measuredPower: power)
                category = BeaconProximity.category(distance: distance, previous: category)
                checksum += DistanceModel.altBeaconNexus5.distance(rssi: rssi, measuredPower: power) ?? 0
            }
            if let statistics = filter.statistics(nowMs: now) { checksum += statistics.mean }
            checksum += Double(filter.count(nowMs: now))
        }
        step(0)                                                 // warm up metadata
        let count = allocations {
            for index in 1..<2_000 { step(index) }
        }
        #expect(count == 0)
        #expect(checksum != 0)
        #expect(category != .unknown)
    }
}
