/// A place the device stayed at (CLVisit), reported twice: at arrival, once the stay has lasted
/// the visit minimum (`departure` nil, as CLVisit's `departureDate` is `distantFuture`), and at
/// departure (both times known).
public struct Visit: Equatable, Sendable {
    public var arrival: UTCTime
    /// nil: the device is still there (the arrival report).
    public var departure: UTCTime?
    public var latitude: Double
    public var longitude: Double
    /// Largest distance of a fix of the stay from its centre, metres (the visit's accuracy).
    public var radiusM: Double

    public init(arrival: UTCTime, departure: UTCTime?, latitude: Double, longitude: Double, radiusM: Double) {
        self.arrival = arrival
        self.departure = departure
        self.latitude = latitude
        self.longitude = longitude
        self.radiusM = radiusM
    }

    public var isArrival: Bool { departure == nil }
}

/// Turns stays into visits: a stay of at least `minimumMs` is reported when it has lasted that
/// long (its arrival) and again when it ends (its departure). A departure whose arrival was not
/// reported yet (no fix or tick came between) is preceded by it, so every visit is seen twice.
public struct VisitDetector: Sendable {
    public let minimumNs: Int64
    /// The arrival time of the stay whose arrival was reported (one report per stay).
    private var reportedArrivalNs: Int64? = nil

    public init(minimumMs: Int64) {
        precondition(minimumMs >= 0)
        minimumNs = minimumMs * 1_000_000
    }

    /// The departure visit, when movement ended a stay of at least the minimum.
    @_noAllocation
    public func visit(for transition: StationaryDetector.Transition) -> Visit? {
        guard case .resumedMoving(let stay) = transition, stay.lastNearNs - stay.arrivalNs >= minimumNs else { return nil }
        return Visit(arrival: UTCTime(nanoseconds: stay.arrivalNs), departure: UTCTime(nanoseconds: stay.lastNearNs),
                     latitude: stay.latitude, longitude: stay.longitude, radiusM: stay.radiusM)
    }

    /// The arrival visit of `stay` once it has lasted the minimum at `nowNs`; once per stay.
    @_noAllocation
    public mutating func arrival(_ stay: StationaryDetector.Stay?, nowNs: Int64) -> Visit? {
        guard let stay, nowNs - stay.arrivalNs >= minimumNs, reportedArrivalNs != stay.arrivalNs else { return nil }
        reportedArrivalNs = stay.arrivalNs
        return Visit(arrival: UTCTime(nanoseconds: stay.arrivalNs), departure: nil,
                     latitude: stay.latitude, longitude: stay.longitude, radiusM: stay.radiusM)
    }

    /// When the arrival of `stay` falls due, if it has not been reported.
    public func arrivalDueNs(_ stay: StationaryDetector.Stay?) -> Int64? {
        guard let stay, reportedArrivalNs != stay.arrivalNs else { return nil }
        return stay.arrivalNs + minimumNs
    }
}
