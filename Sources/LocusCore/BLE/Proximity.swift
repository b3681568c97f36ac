// Beacon proximity: a running RSSI filter, a distance estimate from RSSI and measured power, and
// CLProximity-style categories with hysteresis. Standard library only, deterministic (every
// function takes `now`), fixed size, and allocation-free on the hot path.

// MARK: - RSSI filter

/// A running trimmed-mean RSSI filter over a time window, in a fixed ring of samples.
///
/// Model: AltBeacon's `RunningAverageRssiFilter` (the Android Beacon Library default): keep the
/// samples younger than 20 s, sort them, drop the strongest and the weakest, average the rest.
/// AltBeacon drops `n/10 + 1` per side once it has 3 samples (15 % at 20 samples). This filter
/// drops `max(1, n * trimPercent / 100)` per side once it has 3 samples, with 20 % by default:
/// the 20 % trimmed mean is the usual general-purpose robust location estimator (Wilcox,
/// "Introduction to Robust Estimation and Hypothesis Testing", ch. 3), and beacon RSSI noise is
/// heavy-tailed (multipath fades, a body in the way, reflections). With 10 % this filter would
/// do worse than AltBeacon on the noise model; with 20 % it does better (see
/// `RSSIFilterTests.noiseSimulation`, which measures it against a plain mean and AltBeacon's
/// filter). 3 samples give the median, as in AltBeacon.
///
/// Capacity: `RSSIFilter.capacity` samples (32), no allocation after `init`. When the ring is
/// full the oldest sample is overwritten, so the effective window is the shorter of `windowMs`
/// and the last 32 samples: a beacon heard more often than 1.6 times a second fills the ring in
/// less than 20 s. Its estimate is then more current but averages fewer samples than
/// AltBeacon's unbounded list would (at 4 reports/s the simulation's RMS error is about 1.6x
/// AltBeacon's, at 10/s about 2.5x); still far better than a raw sample or a plain mean.
///
/// Time: milliseconds on any monotonic clock; the caller passes it. A sample counts at `nowMs`
/// when `0 <= nowMs - timeMs < windowMs` (AltBeacon's expiry rule; samples stamped later than
/// `nowMs` do not count yet).
public struct RSSIFilter: Sendable {
    /// Samples the ring holds.
    public static let capacity = 32
    /// AltBeacon's default sample expiration.
    public static let defaultWindowMs: Int64 = 20_000
    /// Trimmed per side, in percent of the samples in the window (see above for why 20).
    public static let defaultTrimPercent = 20

    /// Samples older than this do not count.
    public let windowMs: Int64
    /// Percent of the in-window samples dropped at each end (0...49).
    public let trimPercent: Int

    // Two parallel rings rather than one ring of (Int64, Int8) pairs: 9 bytes per sample
    // instead of a padded 16, which matters with one filter per tracked beacon.
    private var times: InlineArray<32, Int64>
    private var values: InlineArray<32, Int8>
    /// Slot the next sample goes to.
    private var next: Int
    /// Slots in use (grows to `capacity`, then stays).
    private var stored: Int

    public init(windowMs: Int64 = RSSIFilter.defaultWindowMs, trimPercent: Int = RSSIFilter.defaultTrimPercent) {
        precondition(windowMs > 0, "RSSIFilter: window must be positive")
        precondition((0...49).contains(trimPercent), "RSSIFilter: trimPercent must be 0...49")
        self.windowMs = windowMs
        self.trimPercent = trimPercent
        times = InlineArray(repeating: 0)
        values = InlineArray(repeating: 0)
        next = 0
        stored = 0
    }

    /// Whether an HCI RSSI is a measurement. The LE Advertising Report's RSSI is -127...+20 dBm
    /// and 127 means "not available" (Core 5.x, Vol 4, Part E, 7.7.65.2); 0 is what stacks and
    /// AltBeacon use for "no reading". Anything else outside -127...20 is a bad report.
    @_noAllocation
    public static func isMeasurement(_ rssi: Int8) -> Bool {
        rssi != 0 && rssi >= -127 && rssi <= 20
    }

    /// Moves every sample's time by `deltaMs` (the agent's clock was stepped).
    public mutating func shift(byMs deltaMs: Int64) {
        for index in 0..<stored { times[index] &+= deltaMs }
    }

    /// Records a sample; returns false (and records nothing) for a reading that is not a
    /// measurement (127 "not available", 0, or out of range). Overwrites the oldest sample when
    /// the ring is full.
    @_noAllocation
    @discardableResult
    public mutating func add(rssi: Int8, atMs timeMs: Int64) -> Bool {
        guard RSSIFilter.isMeasurement(rssi) else { return false }
        times[next] = timeMs
        values[next] = rssi
        next = next + 1 == RSSIFilter.capacity ? 0 : next + 1
        if stored < RSSIFilter.capacity { stored += 1 }
        return true
    }

    /// Forgets every sample (the beacon left, or its identity changed).
    @_noAllocation
    public mutating func reset() {
        next = 0
        stored = 0
    }

    /// The filtered RSSI in dBm at `nowMs`: the trimmed mean of the samples in the window; nil
    /// when there is none.
    @_noAllocation
    public func value(nowMs: Int64) -> Double? {
        var window = InlineArray<32, Int8>(repeating: 0)
        let count = gather(nowMs: nowMs, into: &window)
        guard count > 0 else { return nil }
        RSSIFilter.insertionSort(&window, count: count)
        let trim = trimCount(count)
        var sum = 0
        var index = trim
        while index < count - trim {
            sum += Int(window[index])
            index += 1
        }
        return Double(sum) / Double(count - 2 * trim)
    }

    /// Samples in the window at `nowMs`.
    @_noAllocation
    public func count(nowMs: Int64) -> Int {
        var count = 0
        var slot = 0
        while slot < stored {
            if inWindow(times[slot], nowMs: nowMs) { count += 1 }
            slot += 1
        }
        return count
    }

    /// Strongest sample in the window (for explanations).
    @_noAllocation
    public func maximum(nowMs: Int64) -> Int8? {
        statistics(nowMs: nowMs)?.maximum
    }

    /// Weakest sample in the window (for explanations).
    @_noAllocation
    public func minimum(nowMs: Int64) -> Int8? {
        statistics(nowMs: nowMs)?.minimum
    }

    /// Plain (untrimmed) mean of the samples in the window (for explanations and comparison).
    @_noAllocation
    public func mean(nowMs: Int64) -> Double? {
        statistics(nowMs: nowMs)?.mean
    }

    /// Everything an event explanation reports about the window, in one pass plus one sort.
    @_noAllocation
    public func statistics(nowMs: Int64) -> RSSIStatistics? {
        var window = InlineArray<32, Int8>(repeating: 0)
        let count = gather(nowMs: nowMs, into: &window)
        guard count > 0 else { return nil }
        RSSIFilter.insertionSort(&window, count: count)
        let trim = trimCount(count)
        var sum = 0
        var trimmedSum = 0
        var index = 0
        while index < count {
            let rssi = Int(window[index])
            sum += rssi
            if index >= trim && index < count - trim { trimmedSum += rssi }
            index += 1
        }
        return RSSIStatistics(
            count: count,
            minimum: window[0],
            maximum: window[count - 1],
            mean: Double(sum) / Double(count),
            filtered: Double(trimmedSum) / Double(count - 2 * trim)
        )
    }

    /// Samples dropped at each end for `count` samples in the window.
    @_noAllocation
    func trimCount(_ count: Int) -> Int {
        guard count >= 3 else { return 0 }
        let share = count * trimPercent / 100
        return trimPercent == 0 ? 0 : (share < 1 ? 1 : share)
    }

    @_noAllocation
    private func inWindow(_ timeMs: Int64, nowMs: Int64) -> Bool {
        // Subtraction in full width: timestamps are far from Int64's limits, but a bad clock
        // must not trap the agent.
        let age = nowMs &- timeMs
        return age >= 0 && age < windowMs
    }

    /// Copies the in-window RSSIs into `window` (unordered); returns how many.
    @_noAllocation
    private func gather(nowMs: Int64, into window: inout InlineArray<32, Int8>) -> Int {
        var count = 0
        var slot = 0
        while slot < stored {
            if inWindow(times[slot], nowMs: nowMs) {
                window[count] = values[slot]
                count += 1
            }
            slot += 1
        }
        return count
    }

    /// Insertion sort of the first `count` elements: at most 32 elements, no allocation, no
    /// closure (the stdlib's `sort` needs an Array or a MutableSpan plus a comparator).
    @_noAllocation
    static func insertionSort(_ items: inout InlineArray<32, Int8>, count: Int) {
        var index = 1
        while index < count {
            let item = items[index]
            var hole = index
            while hole > 0 && items[hole - 1] > item {
                items[hole] = items[hole - 1]
                hole -= 1
            }
            items[hole] = item
            index += 1
        }
    }
}

/// What the filter saw in its window, for an event's explanation.
public struct RSSIStatistics: Equatable, Sendable {
    /// Samples in the window.
    public var count: Int
    /// Weakest and strongest sample, dBm.
    public var minimum: Int8
    public var maximum: Int8
    /// Plain mean, dBm.
    public var mean: Double
    /// Trimmed mean (the filter's value), dBm.
    public var filtered: Double
}

// MARK: - Measured power

/// The RSSI a receiver sees 1 m from the beacon, in dBm: the calibration every distance model
/// starts from. Beacon formats advertise it differently, so it is built from the format's field.
public struct MeasuredPower: Equatable, Sendable {
    /// RSSI at 1 m, dBm.
    public var dBmAtOneMeter: Double

    /// Free-space loss between 0 m and 1 m that Google's Eddystone spec tells integrators to use:
    /// "measure the actual output of your beacon from 1 meter away and then add 41 dBm to that.
    /// 41dBm is the signal loss that occurs over 1 meter" (Eddystone-UID/URL frame
    /// specifications, "Tx Power"). Free-space path loss at 1 m and 2.44 GHz is 40.2 dB.
    public static let eddystoneLossAtOneMeterDb = 41.0

    public init(dBmAtOneMeter: Double) {
        self.dBmAtOneMeter = dBmAtOneMeter
    }

    /// iBeacon "measured power" and AltBeacon "reference RSSI": already the RSSI at 1 m.
    public init(atOneMeter dBm: Int8) {
        dBmAtOneMeter = Double(dBm)
    }

    /// Eddystone (UID, URL, EID) and UriBeacon "Tx power": calibrated at 0 m, so the power at
    /// 1 m is 41 dB lower.
    public init(eddystoneTxPowerAtZeroMeters dBm: Int8) {
        dBmAtOneMeter = Double(dBm) - MeasuredPower.eddystoneLossAtOneMeterDb
    }
}

extension Beacon {
    /// The beacon's own calibration, converted to RSSI at 1 m; nil for frames that carry none
    /// (Eddystone-TLM).
    public var measuredPower: MeasuredPower? {
        switch self {
        case .iBeacon(_, _, _, let power): return MeasuredPower(atOneMeter: power)
        case .altBeacon(_, _, _, _, let power, _): return MeasuredPower(atOneMeter: power)
        case .eddystoneUID(_, _, let power): return MeasuredPower(eddystoneTxPowerAtZeroMeters: power)
        case .eddystoneURL(let power, _): return MeasuredPower(eddystoneTxPowerAtZeroMeters: power)
        case .eddystoneEID(let power, _): return MeasuredPower(eddystoneTxPowerAtZeroMeters: power)
        case .uriBeacon(let power, _): return MeasuredPower(eddystoneTxPowerAtZeroMeters: power)
        // TLM frames carry no calibration. `default` rather than listing them keeps this
        // file compiling while new frame types are added; give each its calibration here.
        default: return nil
        }
    }
}

// MARK: - Distance

/// How RSSI becomes metres. Every model is an estimate: at 1 m expect 0.5-2 m, at 20 m anything
/// from 10 to 40 m (AltBeacon's documentation says the same of its own). Use distances to rank
/// and to categorise, not to measure.
public enum DistanceModel: Equatable, Sendable {
    /// Log-distance path loss: `d = 10^((measuredPower - rssi) / (10 n))` metres, with the
    /// measured power at the 1 m reference distance. `n` is the path-loss exponent: 2.0 in free
    /// space (Friis; AltBeacon's `PathLossDistanceCalculator` default); for beacons indoors
    /// typically 2.0-3.0. Rappaport, "Wireless Communications" (2nd ed., table 4.2) lists
    /// 1.6-1.8 for in-building line of sight, 2-3 obstructed in factories, 4-6 obstructed in
    /// buildings. Fit n per site when distances matter: two RSSI readings at known distances.
    case logDistance(pathLossExponent: Double)
    /// A curve fitted to measured (rssi, distance) pairs: with `r = rssi / measuredPower`,
    /// `d = r^10` for `r < 1`, else `d = coefficient * r^exponent + intercept` (AltBeacon's
    /// `CurveFittedDistanceCalculator`).
    case curveFit(coefficient: Double, exponent: Double, intercept: Double)

    /// Free space, n = 2.0: the default.
    public static let freeSpace = DistanceModel.logDistance(pathLossExponent: 2.0)

    /// David G. Young's (Radius Networks) fit, published with the Android iBeacon Library in
    /// 2013 to approximate iOS's `CLBeacon.accuracy` ("0.89976, 7.7095 and 0.111 are the three
    /// constants calculated when solving for a best fit curve to our measured data points").
    /// Often quoted as AltBeacon's Nexus 5 default, which it is not: see `altBeaconNexus5`.
    public static let radiusNetworksIOSFit = DistanceModel.curveFit(coefficient: 0.89976, exponent: 7.7095, intercept: 0.111)

    /// The Nexus 5 (and Nexus 4) entry of AltBeacon's `model-distance-calculations.json`, the
    /// library's default device model.
    public static let altBeaconNexus5 = DistanceModel.curveFit(coefficient: 0.42093, exponent: 6.9476, intercept: 0.54992)

    /// Estimated distance in metres, or nil when it cannot be estimated: an RSSI that is not a
    /// negative dBm value, a measured power that is not negative (0 means "not calibrated"), a
    /// non-positive exponent, or NaN anywhere.
    @_noAllocation
    public func distance(rssi: Double, measuredPower: MeasuredPower) -> Double? {
        let power = measuredPower.dBmAtOneMeter
        guard rssi < 0, power < 0 else { return nil }   // also false for NaN
        switch self {
        case .logDistance(let n):
            guard n > 0 else { return nil }
            // Clamped to 300 dB of path loss: far beyond anything a receiver hears, and keeps
            // 10^x finite for absurd exponents.
            let exponent = min((power - rssi) / (10 * n), 30)
            return PathLossMath.exp10(exponent)
        case .curveFit(let coefficient, let exponent, let intercept):
            guard exponent > 0 else { return nil }
            let ratio = rssi / power
            if ratio < 1 { return PathLossMath.pow(ratio, 10) }
            return coefficient * PathLossMath.pow(ratio, exponent) + intercept
        }
    }
}

/// 10^x, 2^x and log2 x for the distance models.
///
/// Why not libm's `pow`: LocusCore imports only the standard library, and the stdlib has no
/// `pow`/`exp`/`log` for Double (its `_exp2`/`_log2` are underscored wrappers around LLVM
/// intrinsics that become libm calls anyway). Declaring `pow` with `@_silgen_name` would work
/// where libm is linked (CLocus links it; the device toolset passes -lm) but makes every product
/// that links LocusCore depend on that, and glibc's, musl's and another libm's last bits differ:
/// a replayed log on the host could then put a distance on the other side of a threshold than
/// the device did. These few lines of IEEE arithmetic give bit-identical results on every
/// build, relative error below 1e-14 over the range used here (the tests compare with glibc).
enum PathLossMath {
    static let ln2 = 0.693_147_180_559_945_309_417_232_121_458
    static let log2OfE = 1.442_695_040_888_963_407_359_924_681_002
    static let log2Of10 = 3.321_928_094_887_362_347_870_319_429_489

    /// 10^x.
    @_noAllocation
    static func exp10(_ x: Double) -> Double {
        exp2(x * log2Of10)
    }

    /// x^y for x > 0 (0 for x == 0, NaN below).
    @_noAllocation
    static func pow(_ x: Double, _ y: Double) -> Double {
        if x == 0 { return 0 }
        return exp2(y * log2(x))
    }

    /// 2^y: 2^k * e^(f ln 2) with k = round(y), |f| <= 1/2, e^t by its Taylor series to t^14
    /// (|t| <= 0.347, so the first omitted term is below 1e-19).
    @_noAllocation
    static func exp2(_ y: Double) -> Double {
        if y.isNaN { return y }
        if y >= 1024 { return .infinity }
        if y < -1075 { return 0 }
        // Round to nearest by hand: `rounded()` takes a FloatingPointRoundingRule, whose type
        // metadata the optimizer's allocation check rejects in the host build.
        var k = Int(y)                              // toward zero; |y| < 1076 here
        var f = y - Double(k)                       // exact
        if f > 0.5 { k += 1; f -= 1 } else if f < -0.5 { k -= 1; f += 1 }
        let t = f * ln2
        var p = 1.0 / 87_178_291_200                // 1/14!
        p = p * t + 1.0 / 6_227_020_800             // 1/13!
        p = p * t + 1.0 / 479_001_600
        p = p * t + 1.0 / 39_916_800
        p = p * t + 1.0 / 3_628_800
        p = p * t + 1.0 / 362_880
        p = p * t + 1.0 / 40_320
        p = p * t + 1.0 / 5_040
        p = p * t + 1.0 / 720
        p = p * t + 1.0 / 120
        p = p * t + 1.0 / 24
        p = p * t + 1.0 / 6
        p = p * t + 0.5
        p = p * t + 1
        p = p * t + 1
        return Double(sign: .plus, exponent: k, significand: p)
    }

    /// log2 x for x > 0: x = m 2^e with m in [1/sqrt2, sqrt2), ln m = 2 atanh(s) with
    /// s = (m - 1) / (m + 1), |s| <= 0.172, by its series to s^21.
    @_noAllocation
    static func log2(_ x: Double) -> Double {
        if x.isNaN || x < 0 { return .nan }
        if x == 0 { return -.infinity }
        if x.isInfinite { return x }
        var e = Double(Int(x.exponent))
        var m = x.significand                       // [1, 2), subnormals normalised
        if m > 1.414_213_562_373_095_048_801_688_724_209 {
            m *= 0.5
            e += 1
        }
        let s = (m - 1) / (m + 1)
        let s2 = s * s
        var q = 1.0 / 21
        q = q * s2 + 1.0 / 19
        q = q * s2 + 1.0 / 17
        q = q * s2 + 1.0 / 15
        q = q * s2 + 1.0 / 13
        q = q * s2 + 1.0 / 11
        q = q * s2 + 1.0 / 9
        q = q * s2 + 1.0 / 7
        q = q * s2 + 1.0 / 5
        q = q * s2 + 1.0 / 3
        q = q * s2 + 1
        return e + 2 * s * q * log2OfE
    }
}

// MARK: - Categories

/// CLProximity's categories (same raw values), from an estimated distance.
///
/// Apple documents the categories only loosely (CLProximity; Apple's "Getting Started with
/// iBeacon" guide): immediate means the device is very close, likely held up to the beacon;
/// near is roughly 1-3 m with a clear line of sight; far means the beacon is detected but the
/// estimate is too uncertain for near or immediate. Locus fixes the boundaries as the Android
/// beacon libraries that emulate CLProximity commonly do:
///   immediate   d < 0.5 m
///   near        0.5 m <= d < 3.0 m
///   far         d >= 3.0 m
///   unknown     no distance (no samples in the window, no calibration)
/// and adds hysteresis so a beacon sitting at a boundary does not flap: the previous category is
/// kept while the distance stays within its range widened by `hysteresis` (10 % by default:
/// near holds from 0.45 m up to 3.3 m, immediate up to 0.55 m, far down to 2.7 m). With the
/// free-space model 10 % of distance is 0.83 dB of RSSI each side of the boundary.
public enum BeaconProximity: UInt8, Equatable, Hashable, Sendable, CustomStringConvertible {
    case unknown = 0
    case immediate = 1
    case near = 2
    case far = 3

    /// Upper bound of `immediate`, metres.
    public static let immediateLimit = 0.5
    /// Upper bound of `near`, metres.
    public static let nearLimit = 3.0
    /// Default widening of the previous category's range.
    public static let defaultHysteresis = 0.1

    /// The category for `distance` (metres; nil or NaN or negative: unknown), keeping
    /// `previous` while the distance is within `previous`'s range widened by `hysteresis`.
    @_noAllocation
    public static func category(distance: Double?, previous: BeaconProximity = .unknown,
                                hysteresis: Double = BeaconProximity.defaultHysteresis) -> BeaconProximity {
        guard let distance, distance >= 0 else { return .unknown }   // NaN fails `>=`
        let widen = 1 + hysteresis
        let narrow = 1 - hysteresis
        switch previous {
        case .immediate:
            if distance < immediateLimit * widen { return .immediate }
        case .near:
            if distance >= immediateLimit * narrow && distance < nearLimit * widen { return .near }
        case .far:
            if distance >= nearLimit * narrow { return .far }
        case .unknown:
            break
        }
        if distance < immediateLimit { return .immediate }
        if distance < nearLimit { return .near }
        return .far
    }

    /// Whether this category is `required` or closer (a condition with `proximity = "near"` is
    /// met by near and immediate); unknown meets nothing.
    @_noAllocation
    public func isWithin(_ required: BeaconProximity) -> Bool {
        self != .unknown && required != .unknown && rawValue <= required.rawValue
    }

    public var description: String {
        switch self {
        case .unknown: return "unknown"
        case .immediate: return "immediate"
        case .near: return "near"
        case .far: return "far"
        }
    }
}
