/// Counters a technician reads to see what the receiver sent and what Locus made of it.
public struct NMEAStatistics: Equatable, Sendable {
    /// Sentences framed (a '$' through the end of its line), good or bad.
    public var read = 0
    /// Checksum-valid sentences of a type Locus decodes, decoded.
    public var parsed = 0
    /// Checksum-valid sentences Locus does not use (proprietary, GSV, ...).
    public var ignored = 0
    /// Decodable types whose fields made no sense (bad time, missing fix type, ...).
    public var invalidFields = 0
    /// Decodable types sent before the receiver had a time (all fields empty): not errors.
    public var empty = 0
    public var spliced = 0
    public var garbled = 0
    public var overlong = 0
    public var badChecksum = 0
    public var missingChecksum = 0
    public var malformedChecksum = 0
    public var junkRuns = 0
    public var doubledDollars = 0
    /// Epochs completed, and those that carried a position.
    public var epochs = 0
    public var fixes = 0

    /// Sentences whose checksum held (whatever their content): the receiver is talking.
    public var intact: Int { parsed + ignored + invalidFields + empty }

    public var rejected: Int { spliced + garbled + overlong + badChecksum + missingChecksum + malformedChecksum + invalidFields }
}

/// Bytes from a receiver in, fixes out: framing, checksum, parsing and epoch assembly, with no
/// allocation (the buffer is inline) so it can run in the agent's hot loop.
///
/// Epochs: sentences carrying the same UTC time of day belong to one receiver cycle. A cycle ends
/// when the time changes, or early, on the sentence type that ended the previous cycle (learned,
/// like gpsd's cycle ender), so a fix is delivered as soon as its cycle is complete rather than
/// when the next one starts. Sentences without a time (GSA, VTG) join the current cycle.
public struct NMEADecoder {
    private var framer: NMEAFramer
    private var epoch: Epoch? = nil
    private var cycleEnder: NMEASentenceType? = nil
    /// The first cycle after start is usually partial (reading began mid-cycle): it teaches the
    /// cycle ender but is not reported, as gpsd does.
    private var completedBoundary = false
    /// Whether the previous delivered cycle had a position. The first cycle with a position after
    /// one without (first acquisition, or reacquisition after an outage) is reported without its
    /// position: its solution is the least settled one, and gpsd holds it back the same way.
    private var previousHadPosition = false
    private var calendar = GNSSCalendar()
    public private(set) var statistics = NMEAStatistics()

    /// Times closer than this are one cycle: receivers print the same instant with different
    /// precision in different sentences. 10 ms is far below the cycle of any 50 Hz receiver.
    static let sameCycleToleranceNs: Int64 = 10_000_000

    public init(allowMissingChecksum: Bool = false) {
        framer = NMEAFramer(allowMissingChecksum: allowMissingChecksum)
    }

    /// Feeds bytes; `emit` receives each completed epoch (with or without a position).
    @_noAllocation
    public mutating func consume(_ bytes: UnsafeRawBufferPointer, _ emit: (Fix) -> Void) {
        var index = 0
        // Bounded: every call to advance consumes at least one byte or returns at the end.
        while index < bytes.count {
            let (step, next) = framer.advance(bytes, from: index)
            index = next
            switch step {
            case .needMoreBytes: break
            case .sentence: handleSentence(emit)
            case .rejected(let reason): count(reason)
            }
        }
        statistics.junkRuns = framer.junkRuns
        statistics.doubledDollars = framer.doubledDollars
    }

    /// End of input. A cycle still in progress was cut off before its last sentence (its ender
    /// never came), so it is dropped rather than reported half-merged.
    @_noAllocation
    public mutating func finish(_ emit: (Fix) -> Void) {
        epoch = nil
    }

    private mutating func count(_ reason: NMEAFramer.Rejection) {
        statistics.read += 1
        switch reason {
        case .spliced: statistics.spliced += 1
        case .garbled: statistics.garbled += 1
        case .overlong: statistics.overlong += 1
        case .badChecksum: statistics.badChecksum += 1
        case .missingChecksum: statistics.missingChecksum += 1
        case .malformedChecksum: statistics.malformedChecksum += 1
        }
    }

    private mutating func handleSentence(_ emit: (Fix) -> Void) {
        statistics.read += 1
        let report: NMEAReport?? = framer.withSentence { sentence in
            guard let type = NMEASentences.type(of: sentence) else { return .none }
            return .some(NMEASentences.parse(type, sentence))
        }
        guard let parsed = report else {
            statistics.ignored += 1
            return
        }
        guard let report = parsed else {
            statistics.invalidFields += 1
            return
        }
        if report.empty {
            statistics.empty += 1
            return
        }
        statistics.parsed += 1
        merge(report, emit)
    }

    private mutating func merge(_ report: NMEAReport, _ emit: (Fix) -> Void) {
        if let time = report.timeOfDayNs {
            if let current = epoch?.fix.timeOfDayNs, abs(current - time) <= NMEADecoder.sameCycleToleranceNs {
                // Same cycle, printed with different precision (GLL 200620.303, GGA 200620.30):
                // the epoch takes the time of its latest sentence.
                epoch?.fix.timeOfDayNs = time
            } else if let current = epoch?.fix.timeOfDayNs {
                // Time going backwards across midnight starts a new UTC day; going backwards at
                // any other hour is a receiver restart or a replayed log, not a new day.
                if time < current && report.date == nil && current >= 23 * 3_600_000_000_000 && time < 3_600_000_000_000 {
                    calendar.noteMidnight()
                }
                closeEpoch(emit)
            }
            if epoch == nil { epoch = Epoch(timeOfDayNs: time) }
        }
        guard epoch != nil else { return } // untimed sentences before the first timed one
        if let date = report.date { calendar.note(date) }
        epoch?.apply(report)
        if epoch?.emitted == false, completedBoundary, report.type == cycleEnder { deliver(emit) }
    }

    private mutating func closeEpoch(_ emit: (Fix) -> Void) {
        guard let finished = epoch else { return }
        if !finished.emitted && completedBoundary { deliver(emit) }
        completedBoundary = true
        cycleEnder = finished.lastType
        epoch = nil
    }

    private mutating func deliver(_ emit: (Fix) -> Void) {
        guard let current = epoch else { return }
        epoch?.emitted = true
        var fix = current.fix
        fix.mode = current.mode
        if !fix.hasPosition {
            fix.latitude = nil
            fix.longitude = nil
        }
        if let date = calendar.date { fix.time = UTCTime(date: date, timeOfDayNs: fix.timeOfDayNs) }
        if fix.time == nil && fix.hasPosition {
            // Without a date a fix cannot be placed in time, and every event is logged with its
            // time: report the cycle, but not as a position (RMC or ZDA provide the date).
            fix.mode = .noFix
            fix.latitude = nil
            fix.longitude = nil
        }
        let hadPosition = fix.hasPosition
        if hadPosition && !previousHadPosition {
            fix.mode = .noFix
            fix.latitude = nil
            fix.longitude = nil
        }
        previousHadPosition = hadPosition
        statistics.epochs += 1
        if fix.hasPosition { statistics.fixes += 1 }
        emit(fix)
    }
}

/// One receiver cycle being merged: the fix so far and what the cycle's sentences said about it.
struct Epoch {
    var fix: Fix
    /// Whether a positional sentence vouched for the position (nil: none said either way).
    var valid: Bool? = nil
    var vetoed = false
    var sawGSA = false
    var emitted = false
    var lastType: NMEASentenceType? = nil

    init(timeOfDayNs: Int64) {
        fix = Fix(timeOfDayNs: timeOfDayNs)
    }

    /// A position counts only when a positional sentence said it is valid and no sentence vetoed
    /// the cycle; GSA's fix type then says 2D or 3D, else the presence of an altitude does.
    var mode: Fix.Mode {
        guard valid == true, !vetoed, fix.latitude != nil, fix.longitude != nil else {
            return valid == false || vetoed ? .noFix : (sawGSA && fix.mode == .noFix ? .noFix : .unknown)
        }
        if sawGSA, fix.mode == .twoDimensional || fix.mode == .threeDimensional { return fix.mode }
        return fix.altitudeMSLM != nil ? .threeDimensional : .twoDimensional
    }

    mutating func apply(_ report: NMEAReport) {
        lastType = report.type
        if let isValid = report.positionValid {
            // One sentence saying "invalid" does not cancel another's valid position in the same
            // cycle, but a valid position needs at least one sentence that vouches for it.
            valid = (valid ?? false) || isValid
            if isValid {
                if let latitude = report.latitude { fix.latitude = latitude }
                if let longitude = report.longitude { fix.longitude = longitude }
            }
        }
        if report.vetoed { vetoed = true }
        if let mode = report.gsaMode {
            fix.mode = mode
            sawGSA = true
        }
        if let value = report.quality { fix.quality = value }
        if let value = report.satellitesUsed { fix.satellitesUsed = value }
        if let value = report.hdop { fix.hdop = value }
        if let value = report.pdop { fix.pdop = value }
        if let value = report.vdop { fix.vdop = value }
        if report.positionValid != false {
            if let value = report.altitudeMSLM { fix.altitudeMSLM = value }
            if let value = report.geoidSeparationM { fix.geoidSeparationM = value }
            if let value = report.speedMps { fix.speedMps = value }
            if let value = report.trackDeg { fix.trackDeg = value }
        }
        if let value = report.latitudeSigmaM { fix.latitudeSigmaM = value }
        if let value = report.longitudeSigmaM { fix.longitudeSigmaM = value }
        if let value = report.altitudeSigmaM { fix.altitudeSigmaM = value }
    }
}

/// The date that goes with NMEA's time of day: from RMC or ZDA, carried across midnight, and
/// corrected for the GPS week-number rollover.
///
/// Receivers whose firmware predates a 1024-week rollover (the last was 2019-04-06) report
/// dates 1024 weeks (7168 days, ~19.6 years) in the past. No fix Locus handles can be from before
/// 2017-01-01 (the current leap second's epoch, the same bound gpsd uses), so a date before it is
/// moved forward by 1024 weeks until it is not.
struct GNSSCalendar {
    static let earliest = CivilDate(year: 2017, month: 1, day: 1)
    static let rolloverDays: Int64 = 7168

    private(set) var date: CivilDate? = nil

    mutating func note(_ reported: CivilDate) {
        var corrected = reported
        var bound = 0
        while corrected < GNSSCalendar.earliest && bound < 8 {
            corrected = corrected.addingDays(GNSSCalendar.rolloverDays)
            bound += 1
        }
        date = corrected
    }

    /// The time of day went backwards without a new date: a new UTC day began.
    mutating func noteMidnight() {
        if let current = date { date = current.addingDays(1) }
    }
}
