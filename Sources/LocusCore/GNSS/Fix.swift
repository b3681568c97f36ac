/// One position solution: everything one receiver cycle (epoch) said, merged.
///
/// Unknown values are nil, never zero: a fix without altitude is a 2D fix, not one at sea level.
/// Positions are Double degrees computed from the sentence digits in integer arithmetic first, so
/// no precision is lost between the receiver and the geofence test.
public struct Fix: Equatable, Sendable {
    public enum Mode: Int, Equatable, Sendable {
        /// Mode not seen yet (gpsd's 0).
        case unknown = 0
        /// The receiver says it has no fix.
        case noFix = 1
        case twoDimensional = 2
        case threeDimensional = 3
    }

    /// GGA quality indicator (and GNS mode letters mapped onto it).
    public enum Quality: Int, Equatable, Sendable {
        case invalid = 0, gps = 1, differential = 2, pps = 3, rtkFixed = 4, rtkFloat = 5
        case deadReckoning = 6, manual = 7, simulated = 8
    }

    /// UTC time of the fix, when the date is known (nil until an RMC or ZDA gave one).
    public var time: UTCTime?
    /// UTC time of day in nanoseconds since midnight (always known for a fix).
    public var timeOfDayNs: Int64
    public var mode: Mode = .unknown
    public var quality: Quality?
    public var latitude: Double?
    public var longitude: Double?
    /// Altitude above mean sea level, metres.
    public var altitudeMSLM: Double?
    /// Geoid separation (WGS84 ellipsoid minus MSL), metres.
    public var geoidSeparationM: Double?
    public var speedMps: Double?
    /// Course over ground, degrees true.
    public var trackDeg: Double?
    public var satellitesUsed: Int?
    public var hdop: Double?
    public var pdop: Double?
    public var vdop: Double?
    /// GST 1-sigma errors, metres.
    public var latitudeSigmaM: Double?
    public var longitudeSigmaM: Double?
    public var altitudeSigmaM: Double?

    public init(timeOfDayNs: Int64) {
        self.timeOfDayNs = timeOfDayNs
    }

    /// User equivalent range error assumed when only HDOP is known. 5 m is a typical 1-sigma
    /// UERE for single-frequency civil GPS (satellite clock and ephemeris ~2 m, ionosphere ~4 m,
    /// troposphere, multipath and receiver noise ~1 m each, root-sum-square).
    public static let assumedUEREM = 5.0

    /// Horizontal accuracy estimate, metres (about 1 sigma, like Core Location's
    /// `horizontalAccuracy`): from GST's latitude and longitude sigmas when the receiver sent
    /// them (their root-sum-square, the DRMS), else HDOP × `assumedUEREM`. nil without either.
    public var horizontalAccuracyM: Double? {
        if let latitudeSigmaM, let longitudeSigmaM {
            return LibM.sqrt(latitudeSigmaM * latitudeSigmaM + longitudeSigmaM * longitudeSigmaM)
        }
        if let hdop { return hdop * Fix.assumedUEREM }
        return nil
    }

    /// Vertical accuracy estimate, metres (about 1 sigma, like Core Location's
    /// `verticalAccuracy`), for a 3D fix: GST's altitude sigma when the receiver sent it, else
    /// VDOP × `assumedUEREM`. nil without either, or without a 3D fix.
    public var verticalAccuracyM: Double? {
        guard mode == .threeDimensional, altitudeMSLM != nil else { return nil }
        if let altitudeSigmaM { return altitudeSigmaM }
        if let vdop { return vdop * Fix.assumedUEREM }
        return nil
    }

    /// True when the fix has a usable horizontal position.
    public var hasPosition: Bool {
        mode.rawValue >= Mode.twoDimensional.rawValue && latitude != nil && longitude != nil
    }
}

/// A UTC instant: seconds since the Unix epoch plus nanoseconds. Leap seconds are not counted
/// (POSIX time), as in NMEA's UTC fields.
public struct UTCTime: Equatable, Comparable, Hashable, Sendable {
    public var seconds: Int64
    public var nanoseconds: Int32

    public init(seconds: Int64, nanoseconds: Int32 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public init(date: CivilDate, timeOfDayNs: Int64) {
        let days = date.daysSinceEpoch
        seconds = days * 86_400 + timeOfDayNs / 1_000_000_000
        nanoseconds = Int32(timeOfDayNs % 1_000_000_000)
    }

    public static func < (a: UTCTime, b: UTCTime) -> Bool {
        a.seconds != b.seconds ? a.seconds < b.seconds : a.nanoseconds < b.nanoseconds
    }

    public var totalNanoseconds: Int64 { seconds * 1_000_000_000 + Int64(nanoseconds) }

    public var date: CivilDate { CivilDate(daysSinceEpoch: floorDivide(seconds, 86_400)) }
}

/// A proleptic Gregorian calendar date.
public struct CivilDate: Equatable, Comparable, Sendable {
    public var year: Int
    public var month: Int
    public var day: Int

    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// Days since 1970-01-01 (Howard Hinnant's days_from_civil: exact, no tables, no loops).
    public var daysSinceEpoch: Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = floorDivide(y, 400)
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    public init(daysSinceEpoch: Int64) {
        let z = daysSinceEpoch + 719_468
        let era = floorDivide(z, 146_097)
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        self.init(year: Int(yearOfEra + era * 400 + (month <= 2 ? 1 : 0)), month: Int(month), day: Int(day))
    }

    public var isValid: Bool {
        guard month >= 1 && month <= 12 && day >= 1 else { return false }
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
        switch month {
        case 2: return day <= (leap ? 29 : 28)
        case 4, 6, 9, 11: return day <= 30
        default: return day <= 31
        }
    }

    public static func < (a: CivilDate, b: CivilDate) -> Bool {
        (a.year, a.month, a.day) < (b.year, b.month, b.day)
    }

    public func addingDays(_ days: Int64) -> CivilDate { CivilDate(daysSinceEpoch: daysSinceEpoch + days) }
}

@inline(__always) func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
    let quotient = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? quotient - 1 : quotient
}
