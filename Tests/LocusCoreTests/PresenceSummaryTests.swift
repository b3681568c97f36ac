import AllocCounter
import Testing
@testable import LocusCore
import TestSupport

/// The trimmed mean the summary documents, written the plain way: sort, drop the weakest 30 %
/// and the strongest 10 % (rounded down), average the rest.
private func oneSidedTrimmedMean(_ readings: [Int8]) -> Double {
    let sorted = readings.map(Int.init).sorted()
    let kept = sorted.dropFirst(sorted.count * 3 / 10).dropLast(sorted.count / 10)
    return Double(kept.reduce(0, +)) / Double(kept.count)
}

/// Tag number `key` as a beacon identity (major and minor).
private func tagIdentity(_ key: UInt64) -> BeaconIdentity {
    BeaconIdentity(uuid: BeaconUUID(high: 1, low: 2), major: UInt16(truncatingIfNeeded: key >> 16), minor: UInt16(truncatingIfNeeded: key))
}

private func drained(_ summary: inout PresenceSummary, periodEndMs: Int64 = 1_000) -> ([PresenceSummary.Entry], PresenceSummary.DrainReport) {
    var entries: [PresenceSummary.Entry] = []
    let report = summary.drain(periodEndMs: periodEndMs) { entries.append($0) }
    return (entries, report)
}

@Suite struct PresenceSummaryTests {
    @Test func summarisesEachTagsPeriod() {
        var summary = PresenceSummary(tagsMax: 8, summariesPerPeriodMax: 8)
        let readings: [Int8] = [-60, -61, -62, -59, -58, -66, -60, -61, -67, -60]
        for (index, rssi) in readings.enumerated() {
            summary.record(tag: tagIdentity(7), rssiDBm: rssi, measuredPowerDBm: -59, timeMs: Int64(index) * 100)
        }
        summary.record(tag: tagIdentity(9), rssiDBm: -80, measuredPowerDBm: 0, timeMs: 450)
        let (entries, report) = drained(&summary)
        #expect(report.emitted == 2 && report.tagsOverLimit == 0 && report.readingsDropped == 0)
        let tag = entries.first { $0.tag == tagIdentity(7) }!
        #expect(tag.count == 10 && tag.rssiMinimumDBm == -67 && tag.rssiMaximumDBm == -58 && tag.lastHeardMs == 900)
        #expect(abs(tag.rssiDBm - oneSidedTrimmedMean(readings)) < 1e-12)
        // -60.17 dBm from a tag calibrated at -59 dBm, n = 2.5: a little over 1 m.
        #expect(tag.distanceM.map { $0 > 1.0 && $0 < 1.2 } == true)
        // A tag without a measured power gets no distance.
        #expect(entries.first { $0.tag == tagIdentity(9) }?.distanceM == nil)
    }

    @Test func ignoresReadingsThatAreNotMeasurements() {
        var summary = PresenceSummary(tagsMax: 4, summariesPerPeriodMax: 4)
        for rssi: Int8 in [127, 0, 21] {
            let accepted = summary.record(tag: tagIdentity(1), rssiDBm: rssi, measuredPowerDBm: -59, timeMs: 0)
            #expect(!accepted)
        }
        #expect(drained(&summary).0.isEmpty)
    }

    @Test func handsOutTheLoudestFirstAndCountsTheRest() {
        var summary = PresenceSummary(tagsMax: 8, summariesPerPeriodMax: 3)
        let loudness: [UInt64: Int8] = [1: -90, 2: -50, 3: -70, 4: -60, 5: -80]
        for (key, rssi) in loudness.sorted(by: { $0.key < $1.key }) {
            summary.record(tag: tagIdentity(key), rssiDBm: rssi, measuredPowerDBm: -59, timeMs: Int64(key))
        }
        // Equal RSSI: the most recently heard goes first.
        summary.record(tag: tagIdentity(6), rssiDBm: -60, measuredPowerDBm: -59, timeMs: 100)
        let (entries, report) = drained(&summary)
        #expect(entries.map(\.tag) == [2, 6, 4].map(tagIdentity))
        #expect(report.emitted == 3 && report.tagsOverLimit == 3)
    }

    @Test func countsReadingsOfTagsThatDoNotFitAndStartsAFreshPeriod() {
        var summary = PresenceSummary(tagsMax: 2, summariesPerPeriodMax: 2)
        let firstStored = summary.record(tag: tagIdentity(1), rssiDBm: -70, measuredPowerDBm: -59, timeMs: 0)
        #expect(firstStored)
        let secondStored = summary.record(tag: tagIdentity(2), rssiDBm: -70, measuredPowerDBm: -59, timeMs: 0)
        #expect(secondStored)
        let thirdStored = summary.record(tag: tagIdentity(3), rssiDBm: -70, measuredPowerDBm: -59, timeMs: 0)
        #expect(!thirdStored)
        let knownTagStored = summary.record(tag: tagIdentity(1), rssiDBm: -71, measuredPowerDBm: -59, timeMs: 10)
        #expect(knownTagStored)
        let (first, report) = drained(&summary)
        #expect(first.count == 2 && report.readingsDropped == 1)
        let (second, secondReport) = drained(&summary, periodEndMs: 2_000)
        #expect(second.isEmpty && secondReport.readingsDropped == 0)
        // The table is free again: the tag left out last period fits now.
        let storedNextPeriod = summary.record(tag: tagIdentity(3), rssiDBm: -70, measuredPowerDBm: -59, timeMs: 2_100)
        #expect(storedNextPeriod)
    }

    @Test func keepsTheLatestReadingsWhenATagIsHeardMoreThanItsRingHolds() {
        var summary = PresenceSummary(tagsMax: 2, summariesPerPeriodMax: 2)
        for index in 0..<PresenceSummary.readingsPerTagMax { summary.record(tag: tagIdentity(1), rssiDBm: -90, measuredPowerDBm: -59, timeMs: Int64(index)) }
        for index in 0..<PresenceSummary.readingsPerTagMax { summary.record(tag: tagIdentity(1), rssiDBm: -50, measuredPowerDBm: -59, timeMs: Int64(100 + index)) }
        let entry = drained(&summary).0[0]
        #expect(entry.count == 2 * PresenceSummary.readingsPerTagMax && entry.rssiDBm == -50 && entry.rssiMinimumDBm == -90)
    }

    /// Fades only take signal away, so the one-sided trim keeps the filtered RSSI near the clean
    /// level where the plain mean is pulled down: 2.5 dB noise, 20 % of readings 8 dB low.
    @Test func filteredRSSIResistsOneSidedFades() {
        var random = SplitMix64(seed: 0x5EED)
        var summary = PresenceSummary(tagsMax: 2, summariesPerPeriodMax: 2)
        var filteredErrors: [Double] = []
        var meanErrors: [Double] = []
        for period in 0..<2_000 {
            var readings: [Int8] = []
            for _ in 0..<10 {
                let rssi = -70 + 2.5 * random.gaussian() - (random.chance(20) ? 8 : 0)
                readings.append(Int8(rssi.rounded()))
                summary.record(tag: tagIdentity(1), rssiDBm: readings.last!, measuredPowerDBm: -59, timeMs: Int64(period))
            }
            filteredErrors.append(drained(&summary).0[0].rssiDBm + 70)
            meanErrors.append(Double(readings.map(Int.init).reduce(0, +)) / 10 + 70)
        }
        func rms(_ values: [Double]) -> Double { (values.map { $0 * $0 }.reduce(0, +) / Double(values.count)).squareRoot() }
        #expect(rms(filteredErrors) < 0.7 * rms(meanErrors), "filtered \(rms(filteredErrors)) dB, mean \(rms(meanErrors)) dB")
    }

    @Test func recordAndDrainAllocateNothing() {
        var summary = PresenceSummary(tagsMax: 64, summariesPerPeriodMax: 16)
        var emitted = 0
        var loudest = -200.0
        let count = allocations {
            for round in 0..<10 {
                for tag in 0..<100 {
                    summary.record(tag: tagIdentity(UInt64(tag) &* 0x9E37), rssiDBm: Int8(-40 - tag % 50), measuredPowerDBm: -59, timeMs: Int64(round * 100 + tag))
                }
            }
            summary.drain(periodEndMs: 1_000) { entry in
                emitted += 1
                loudest = max(loudest, entry.rssiDBm)
            }
        }
        #expect(count == 0)
        #expect(emitted == 16 && loudest == -40)
    }
}

@Suite struct PresenceMessageTests {
    /// The longest a tag can render (the widest numbers, the longest phone name) stays within
    /// `UplinkJSON.maximumPresenceTagBytes`, which the uplink's buffer is sized by.
    @Test func theWorstCaseTagFitsItsShare() {
        let widest = PresenceSummary.Entry(tag: BeaconIdentity(uuid: BeaconUUID(high: .max, low: .max), major: .max, minor: .max),
                                           count: 1_000_000, rssiDBm: -127, rssiMinimumDBm: -127, rssiMaximumDBm: -127,
                                           measuredPowerDBm: -127, distanceM: 999_999.99, lastHeardMs: .max)
        for phone in [nil, FixedName(String(repeating: "p", count: FixedName.capacity))] {
            var line = JSONWriter(capacity: 1024)
            line.beginArray()
            UplinkJSON.presenceTag(widest, phone: phone, into: &line)
            UplinkJSON.presenceTag(widest, phone: phone, into: &line)
            line.endArray()
            // Two tags and the array's brackets: each tag with its comma within its share.
            #expect(line.count <= 2 * UplinkJSON.maximumPresenceTagBytes, "\(line.count) bytes")
            #expect(line.count / 2 < UplinkJSON.maximumPresenceTagBytes - 32, "a margin of 32 bytes: \(line.count / 2)")
        }
        var line = JSONWriter(capacity: 1024)
        UplinkJSON.presenceStart(gateway: UnsafeRawBufferPointer(start: nil, count: 0), time: UTCTime(seconds: 0), periodMs: 60_000, into: &line)
        UplinkJSON.presenceEnd(PresenceSummary.DrainReport(periodEndMs: 0, emitted: 0, tagsOverLimit: 1_000, readingsDropped: 1_000_000), into: &line)
        #expect(line.count + 128 < UplinkJSON.maximumPresenceFrameBytes, "the frame leaves room for a 128-byte gateway id: \(line.count)")
    }
}
