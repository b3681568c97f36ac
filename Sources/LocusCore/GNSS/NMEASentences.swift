/// The sentence types Locus decodes. Any talker is accepted (GP, GN, GL, GA, GB, BD, GQ, QZ, ...):
/// the talker says which constellation, the type says what the fields mean.
public enum NMEASentenceType: UInt8, Equatable, Sendable {
    case gga, rmc, gns, gsa, gll, vtg, zda, gst
}

/// What one sentence said, before it is merged into the epoch. nil = not in this sentence.
struct NMEAReport {
    var type: NMEASentenceType
    var timeOfDayNs: Int64? = nil
    var date: CivilDate? = nil
    var latitude: Double? = nil
    var longitude: Double? = nil
    /// Status of the position: true valid, false the receiver says invalid, nil not stated.
    var positionValid: Bool? = nil
    /// GGA or GNS computed from zero satellites: a stale or coasting solution that other
    /// sentences of the same cycle repeat as valid. It vetoes the whole cycle (gpsd agrees).
    var vetoed = false
    /// The sentence carried no data yet (an empty time field: the receiver has no time).
    var empty = false
    var quality: Fix.Quality? = nil
    var gsaMode: Fix.Mode? = nil
    var satellitesUsed: Int? = nil
    var hdop: Double? = nil
    var pdop: Double? = nil
    var vdop: Double? = nil
    var altitudeMSLM: Double? = nil
    var geoidSeparationM: Double? = nil
    var speedMps: Double? = nil
    var trackDeg: Double? = nil
    var latitudeSigmaM: Double? = nil
    var longitudeSigmaM: Double? = nil
    var altitudeSigmaM: Double? = nil

    init(type: NMEASentenceType) { self.type = type }
}

enum NMEASentences {
    static let metresPerSecondPerKnot = 1852.0 / 3600.0

    /// Identifies `$ttSSS` (talker + type); nil for proprietary ($P...) and unknown types.
    static func type(of sentence: UnsafeBufferPointer<UInt8>) -> NMEASentenceType? {
        guard sentence.count >= 6, sentence[1] != UInt8(ascii: "P") else { return nil }
        guard sentence.count == 6 || sentence[6] == ASCII.comma else { return nil }
        let a = sentence[3], b = sentence[4], c = sentence[5]
        switch (a, b, c) {
        case (0x47, 0x47, 0x41): return .gga // GGA
        case (0x52, 0x4D, 0x43): return .rmc // RMC
        case (0x47, 0x4E, 0x53): return .gns // GNS
        case (0x47, 0x53, 0x41): return .gsa // GSA
        case (0x47, 0x4C, 0x4C): return .gll // GLL
        case (0x56, 0x54, 0x47): return .vtg // VTG
        case (0x5A, 0x44, 0x41): return .zda // ZDA
        case (0x47, 0x53, 0x54): return .gst // GST
        default: return nil
        }
    }

    @_noAllocation
    static func parse(_ type: NMEASentenceType, _ sentence: UnsafeBufferPointer<UInt8>) -> NMEAReport? {
        var fields = NMEAFields(sentence)
        switch type {
        case .gga: return gga(&fields)
        case .rmc: return rmc(&fields)
        case .gns: return gns(&fields)
        case .gsa: return gsa(&fields)
        case .gll: return gll(&fields)
        case .vtg: return vtg(&fields)
        case .zda: return zda(&fields)
        case .gst: return gst(&fields)
        }
    }

    // $GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47
    private static func gga(_ fields: inout NMEAFields) -> NMEAReport? {
        var report = NMEAReport(type: .gga)
        if fields.nextIsEmpty() { report.empty = true; return report }
        guard let time = fields.timeOfDay() else { return nil }
        report.timeOfDayNs = time
        report.latitude = fields.coordinate(maximumDegrees: 90)
        report.longitude = fields.coordinate(maximumDegrees: 180)
        if let quality = fields.integer() {
            report.quality = Fix.Quality(rawValue: quality)
            report.positionValid = quality > 0 && quality != 7 && quality != 8
        }
        report.satellitesUsed = fields.integer()
        if report.satellitesUsed == 0 { report.vetoed = true }
        report.hdop = fields.double()
        report.altitudeMSLM = fields.double()
        _ = fields.character()
        report.geoidSeparationM = fields.double()
        return report
    }

    // $GPRMC,123519,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W*6A  (NMEA 2.3+ adds a mode)
    private static func rmc(_ fields: inout NMEAFields) -> NMEAReport? {
        var report = NMEAReport(type: .rmc)
        if fields.nextIsEmpty() { report.empty = true; return report }
        guard let time = fields.timeOfDay() else { return nil }
        report.timeOfDayNs = time
        let status = fields.character()
        report.latitude = fields.coordinate(maximumDegrees: 90)
        report.longitude = fields.coordinate(maximumDegrees: 180)
        report.speedMps = fields.double().map { $0 * metresPerSecondPerKnot }
        report.trackDeg = fields.double()
        report.date = fields.dateDDMMYY()
        fields.skip(2)
        let mode = fields.character()
        report.positionValid = status == UInt8(ascii: "A") && mode != UInt8(ascii: "N")
        return report
    }

    // $GNGNS,014035.00,4332.69262,S,17235.48549,E,RR,13,0.9,25.63,11.24,,*70
    private static func gns(_ fields: inout NMEAFields) -> NMEAReport? {
        var report = NMEAReport(type: .gns)
        if fields.nextIsEmpty() { report.empty = true; return report }
        guard let time = fields.timeOfDay() else { return nil }
        report.timeOfDayNs = time
        report.latitude = fields.coordinate(maximumDegrees: 90)
        report.longitude = fields.coordinate(maximumDegrees: 180)
        if let modes = fields.raw() {
            // One letter per constellation; the best solution among them decides. N = no fix for
            // that system; M (manual input) and S (simulator) are not positions from the sky.
            var best = Fix.Quality.invalid
            for index in modes {
                let quality = gnsQuality(fields.byte(at: index))
                if quality != .manual && quality != .simulated && quality.rawValue > best.rawValue { best = quality }
            }
            report.quality = best
            report.positionValid = best != .invalid
        }
        report.satellitesUsed = fields.integer()
        if report.satellitesUsed == 0 { report.vetoed = true }
        report.hdop = fields.double()
        report.altitudeMSLM = fields.double()
        report.geoidSeparationM = fields.double()
        return report
    }

    private static func gnsQuality(_ letter: UInt8) -> Fix.Quality {
        switch letter {
        case UInt8(ascii: "A"): return .gps
        case UInt8(ascii: "D"), UInt8(ascii: "P"): return .differential
        case UInt8(ascii: "R"): return .rtkFixed
        case UInt8(ascii: "F"): return .rtkFloat
        case UInt8(ascii: "E"): return .deadReckoning
        case UInt8(ascii: "M"): return .manual
        case UInt8(ascii: "S"): return .simulated
        default: return .invalid
        }
    }

    // $GPGSA,A,3,04,05,,09,12,,,24,,,,,2.5,1.3,2.1*39
    private static func gsa(_ fields: inout NMEAFields) -> NMEAReport? {
        var report = NMEAReport(type: .gsa)
        _ = fields.character()
        switch fields.integer() {
        case 1?: report.gsaMode = .noFix
        case 2?: report.gsaMode = .twoDimensional
        case 3?: report.gsaMode = .threeDimensional
        default: return nil
        }
        fields.skip(12)
        report.pdop = fields.double()
        report.hdop = fields.double()
        report.vdop = fields.double()
        return report
    }

    // $GPGLL,4916.45,N,12311.12,W,225444,A,*1D
    private static func gll(_ fields: inout NMEAFields) -> NMEAReport? {
        var report = NMEAReport(type: .gll)
        report.latitude = fields.coordinate(maximumDegrees: 90)
        report.longitude = fields.coordinate(maximumDegrees: 180)
        if fields.nextIsEmpty() { report.empty = true; return report }
        guard let time = fields.timeOfDay() else { return nil }
        report.timeOfDayNs = time
        let status = fields.character()
        let mode = fields.character()
        report.positionValid = status == UInt8(ascii: "A") && mode != UInt8(ascii: "N")
        return report
    }

    // $GPVTG,054.7,T,034.4,M,005.5,N,010.2,K*48   (old form: $GPVTG,054.7,034.4,005.5,010.2)
    private static func vtg(_ fields: inout NMEAFields) -> NMEAReport? {
        var report = NMEAReport(type: .vtg)
        let track = fields.double()
        let marker = fields.raw()
        let isUnitForm = marker.map { $0.isEmpty || ($0.count == 1 && fields.byte(at: $0.lowerBound) == UInt8(ascii: "T")) } ?? true
        if isUnitForm {
            fields.skip(2)
            let knots = fields.double()
            fields.skip(1)
            let kilometresPerHour = fields.double()
            report.speedMps = knots.map { $0 * metresPerSecondPerKnot } ?? kilometresPerHour.map { $0 / 3.6 }
        } else {
            // The old form has no unit letters: track, magnetic track, knots, km/h.
            report.speedMps = fields.double().map { $0 * metresPerSecondPerKnot }
        }
        report.trackDeg = track
        return report
    }

    // $GPZDA,201530.00,04,07,2002,00,00*60
    private static func zda(_ fields: inout NMEAFields) -> NMEAReport? {
        var report = NMEAReport(type: .zda)
        if fields.nextIsEmpty() { report.empty = true; return report }
        guard let time = fields.timeOfDay() else { return nil }
        report.timeOfDayNs = time
        if let day = fields.integer(), let month = fields.integer(), let year = fields.integer() {
            let date = CivilDate(year: year, month: month, day: day)
            if date.isValid && year >= 1980 { report.date = date }
        }
        return report
    }

    // $GPGST,024603.00,3.2,6.6,4.7,47.3,5.8,5.6,22.0*58
    private static func gst(_ fields: inout NMEAFields) -> NMEAReport? {
        var report = NMEAReport(type: .gst)
        if fields.nextIsEmpty() { report.empty = true; return report }
        guard let time = fields.timeOfDay() else { return nil }
        report.timeOfDayNs = time
        fields.skip(4)
        report.latitudeSigmaM = fields.double()
        report.longitudeSigmaM = fields.double()
        report.altitudeSigmaM = fields.double()
        return report
    }
}
