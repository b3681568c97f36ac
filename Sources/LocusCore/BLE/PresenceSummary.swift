// The gateway's side of fleet presence (docs/presence.md): what each tag sounded like during one
// reporting period, reduced to a few numbers per tag, so the fleet can place the tag from every
// gateway that heard it without receiving every advertisement.

/// Per-tag summaries for the current period, in tables sized once at `init`.
///
/// `record` takes one advertisement (the tag's identity, a beacon's or a phone's, its RSSI, its
/// measured power and the time) and allocates nothing. `drain` hands out at most `summariesPerPeriodMax` summaries,
/// the loudest first (ties: the most recently heard first), counts what it had to leave out, and
/// starts the next period. A tag that does not fit in the table is counted, not stored.
///
/// The filtered RSSI is a trimmed mean that drops the weakest 30 % and the strongest 10 % of the
/// period's readings. Multipath fades are one-sided (a reflection cancels part of the signal, it
/// never adds 6 dB), so the trim is one-sided too. With Gaussian noise of 2.5 dB and 10 % of the
/// readings 6 dB low, ten readings give a spread of 0.94 dB against the plain mean's 0.98 dB and
/// the median's 1.08 dB, and a bias of +0.4 dB that does not depend on the count from six
/// readings up, so it cancels between gateways (docs/presence.md, "The gateway's summary").
public struct PresenceSummary: ~Copyable {
    /// Readings kept per tag and period; later readings overwrite the oldest.
    public static let readingsPerTagMax = 32

    /// One tag's period, as sent to the fleet.
    public struct Entry: Equatable, Sendable {
        public var tag: BeaconIdentity
        /// Advertisements heard in the period (may exceed the readings kept).
        public var count: Int
        /// The trimmed mean of the kept readings, dBm.
        public var rssiDBm: Double
        public var rssiMinimumDBm: Int8
        public var rssiMaximumDBm: Int8
        /// The tag's advertised RSSI at 1 m, dBm (0: not calibrated).
        public var measuredPowerDBm: Int8
        /// The gateway's own log-distance estimate from `rssiDBm`; nil without a measured power.
        public var distanceM: Double?
        public var lastHeardMs: Int64
    }

    /// What one `drain` did.
    public struct DrainReport: Equatable, Sendable {
        public var periodEndMs: Int64
        /// Summaries handed out.
        public var emitted: Int
        /// Tags heard but left out because the period's output limit was reached.
        public var tagsOverLimit: Int
        /// Readings not stored because the tag table was full.
        public var readingsDropped: Int
    }

    private struct Slot {
        var key: BeaconIdentity
        var count: Int
        var lastHeardMs: Int64
        var minimum: Int8
        var maximum: Int8
        var measuredPower: Int8
    }

    public let tagsMax: Int
    public let summariesPerPeriodMax: Int
    public let distanceModel: DistanceModel
    private let slots: UnsafeMutableBufferPointer<Slot>
    /// `readingsPerTagMax` readings per slot, slot after slot.
    private let readings: UnsafeMutableBufferPointer<Int8>
    /// Open-addressing table from a key's hash to its slot; -1 = empty. At most half full.
    private let table: UnsafeMutableBufferPointer<Int32>
    /// Scratch for `drain`: the slots in output order, and each slot's filtered RSSI.
    private let order: UnsafeMutableBufferPointer<Int32>
    private let filtered: UnsafeMutableBufferPointer<Double>
    private let mask: Int
    public private(set) var tagsHeard = 0
    private var readingsDropped = 0

    public init(tagsMax: Int, summariesPerPeriodMax: Int, distanceModel: DistanceModel = .logDistance(pathLossExponent: 2.5)) {
        precondition(tagsMax > 0 && summariesPerPeriodMax > 0, "PresenceSummary: capacities must be positive")
        self.tagsMax = tagsMax
        self.summariesPerPeriodMax = summariesPerPeriodMax
        self.distanceModel = distanceModel
        var size = 16
        while size < tagsMax * 2 { size <<= 1 }
        mask = size - 1
        slots = .allocate(capacity: tagsMax)
        readings = .allocate(capacity: tagsMax * PresenceSummary.readingsPerTagMax)
        readings.initialize(repeating: 0)
        table = .allocate(capacity: size)
        table.initialize(repeating: -1)
        order = .allocate(capacity: tagsMax)
        order.initialize(repeating: 0)
        filtered = .allocate(capacity: tagsMax)
        filtered.initialize(repeating: 0)
    }

    deinit {
        slots.deallocate()
        readings.deallocate()
        table.deallocate()
        order.deallocate()
        filtered.deallocate()
    }

    /// Takes one advertisement; false when it is not stored (not a measurement, or a new tag
    /// while the table is full, which is counted).
    @_noAllocation
    @discardableResult
    public mutating func record(tag: BeaconIdentity, rssiDBm: Int8, measuredPowerDBm: Int8, timeMs: Int64) -> Bool {
        guard RSSIFilter.isMeasurement(rssiDBm) else { return false }
        guard let slot = slotFor(tag, measuredPowerDBm: measuredPowerDBm, timeMs: timeMs) else {
            readingsDropped += 1
            return false
        }
        var entry = slots[slot]
        readings[slot * PresenceSummary.readingsPerTagMax + entry.count % PresenceSummary.readingsPerTagMax] = rssiDBm
        entry.count += 1
        entry.minimum = min(entry.minimum, rssiDBm)
        entry.maximum = max(entry.maximum, rssiDBm)
        entry.lastHeardMs = max(entry.lastHeardMs, timeMs)
        entry.measuredPower = measuredPowerDBm
        slots[slot] = entry
        return true
    }

    /// Hands out the period's summaries (loudest first, at most `summariesPerPeriodMax`) and
    /// starts the next period.
    @discardableResult
    public mutating func drain(periodEndMs: Int64, _ body: (Entry) -> Void) -> DrainReport {
        var index = 0
        while index < tagsHeard {
            filtered[index] = filteredRSSI(slot: index)
            order[index] = Int32(index)
            index += 1
        }
        sortOrderLoudestFirst()
        let emitted = min(tagsHeard, summariesPerPeriodMax)
        index = 0
        while index < emitted {
            body(entry(slot: Int(order[index])))
            index += 1
        }
        let report = DrainReport(periodEndMs: periodEndMs, emitted: emitted, tagsOverLimit: tagsHeard - emitted,
                                 readingsDropped: readingsDropped)
        reset()
        return report
    }

    /// Forgets the period without handing anything out.
    public mutating func reset() {
        var index = 0
        while index < table.count {
            table[index] = -1
            index += 1
        }
        tagsHeard = 0
        readingsDropped = 0
    }

    // MARK: internals

    @inline(__always)
    private static func hash(_ key: BeaconIdentity) -> Int {
        var x = (key.uuid.high ^ key.uuid.low &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(key.major) << 16 ^ UInt64(key.minor)) &* 0x9E37_79B9_7F4A_7C15
        x ^= x >> 33
        x = x &* 0xFF51_AFD7_ED55_8CCD
        x ^= x >> 33
        return Int(truncatingIfNeeded: x)
    }

    /// The tag's slot, opened if the tag is new and a slot is free.
    @inline(__always)
    private mutating func slotFor(_ key: BeaconIdentity, measuredPowerDBm: Int8, timeMs: Int64) -> Int? {
        var index = PresenceSummary.hash(key) & mask
        // Bounded: the table is at most half full, so an empty entry is reached.
        while table[index] >= 0 {
            let slot = Int(table[index])
            if slots[slot].key == key { return slot }
            index = (index + 1) & mask
        }
        guard tagsHeard < tagsMax else { return nil }
        let slot = tagsHeard
        tagsHeard += 1
        table[index] = Int32(slot)
        slots[slot] = Slot(key: key, count: 0, lastHeardMs: timeMs, minimum: .max, maximum: .min, measuredPower: measuredPowerDBm)
        return slot
    }

    /// The trimmed mean of the slot's kept readings (see the type's comment for the shares).
    private func filteredRSSI(slot: Int) -> Double {
        let kept = min(slots[slot].count, PresenceSummary.readingsPerTagMax)
        var window = InlineArray<32, Int8>(repeating: 0)
        var index = 0
        while index < kept {
            window[index] = readings[slot * PresenceSummary.readingsPerTagMax + index]
            index += 1
        }
        RSSIFilter.insertionSort(&window, count: kept)
        let weakDropped = kept * 3 / 10
        let strongDropped = kept / 10
        var sum = 0
        index = weakDropped
        while index < kept - strongDropped {
            sum += Int(window[index])
            index += 1
        }
        return Double(sum) / Double(kept - weakDropped - strongDropped)
    }

    private func entry(slot: Int) -> Entry {
        let stored = slots[slot]
        let rssi = filtered[slot]
        let distance = distanceModel.distance(rssi: rssi, measuredPower: MeasuredPower(atOneMeter: stored.measuredPower))
        return Entry(tag: stored.key, count: stored.count, rssiDBm: rssi, rssiMinimumDBm: stored.minimum,
                     rssiMaximumDBm: stored.maximum, measuredPowerDBm: stored.measuredPower, distanceM: distance,
                     lastHeardMs: stored.lastHeardMs)
    }

    /// Insertion sort of `order` by filtered RSSI, loudest first, then the most recently heard
    /// first: at most `tagsMax` slots, no allocation.
    private func sortOrderLoudestFirst() {
        var index = 1
        while index < tagsHeard {
            let item = order[index]
            var hole = index
            while hole > 0 && louder(item, than: order[hole - 1]) {
                order[hole] = order[hole - 1]
                hole -= 1
            }
            order[hole] = item
            index += 1
        }
    }

    @inline(__always)
    private func louder(_ a: Int32, than b: Int32) -> Bool {
        let rssiA = filtered[Int(a)]
        let rssiB = filtered[Int(b)]
        if rssiA != rssiB { return rssiA > rssiB }
        return slots[Int(a)].lastHeardMs > slots[Int(b)].lastHeardMs
    }
}
