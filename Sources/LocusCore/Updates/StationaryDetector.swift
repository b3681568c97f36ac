/// Standing still, from GNSS alone: net displacement over a window, not instantaneous speed
/// (a parked receiver's Doppler speed and its multipath wander both say "moving" now and then).
///
/// A candidate stay starts at a fix and keeps the running mean of the positions since. A fix
/// within `radius + accuracy` of that mean extends it; once it has lasted `window`, the device is
/// stationary. Before that, one fix outside restarts the candidate there; after it, movement
/// needs `confirmationCount` fixes in a row outside, so one multipath outlier does not end a
/// stay. Constant space: a running sum and the first `arrivalSamples` fixes of the candidate
/// (to date the arrival after the fact, when the stay's centre is known).
public struct StationaryDetector: Sendable {
    public struct Stay: Equatable, Sendable {
        /// When the device got there: the first fix of the stay near its centre.
        public var arrivalNs: Int64
        /// The last fix near the centre (the departure, once movement is confirmed).
        public var lastNearNs: Int64
        public var latitude: Double
        public var longitude: Double
        /// Largest distance of an accepted fix from the centre, metres.
        public var radiusM: Double
    }

    public enum Transition: Equatable, Sendable {
        case none
        case becameStationary(Stay)
        /// Movement confirmed; the stay ended at `lastNearNs`.
        case resumedMoving(Stay)
    }

    public let radiusM: Double
    public let windowNs: Int64
    public let confirmationCount: Int
    public private(set) var isStationary = false

    static let arrivalSamples = 16
    private var samples = InlineArray<16, (timeNs: Int64, latitude: Double, longitude: Double)>(repeating: (0, 0, 0))
    private var sampleCount = 0
    private var startNs: Int64 = 0
    private var sumLatitude = 0.0
    private var sumLongitude = 0.0
    private var fixCount = 0
    private var outsideCount = 0
    private var stay = Stay(arrivalNs: 0, lastNearNs: 0, latitude: 0, longitude: 0, radiusM: 0)

    public init(radiusM: Double, windowMs: Int64, confirmationCount: Int = 2) {
        precondition(radiusM > 0 && windowMs > 0 && confirmationCount >= 1)
        self.radiusM = radiusM
        self.windowNs = windowMs * 1_000_000
        self.confirmationCount = confirmationCount
    }

    public init(_ configuration: LiveConfiguration) {
        self.init(radiusM: configuration.stationaryRadiusM, windowMs: configuration.stationaryWindowMs)
    }

    /// The current stay, while stationary.
    public var currentStay: Stay? { isStationary ? stay : nil }

    /// Stationary, and the last fix lay inside the stay (within the radius plus its accuracy of
    /// the centre): a probe's fix that shows the stop.
    public var lastFixInsideStay: Bool { isStationary && outsideCount == 0 }

    @_noAllocation
    public mutating func observe(latitude: Double, longitude: Double, accuracyM: Double, timeNs: Int64) -> Transition {
        observe(GeoPoint(latitude: latitude, longitude: longitude), accuracyM: accuracyM, timeNs: timeNs)
    }

    /// A fix at `point` (its ECEF coordinates already worked out).
    @_noAllocation
    public mutating func observe(_ point: GeoPoint, accuracyM: Double, timeNs: Int64) -> Transition {
        let latitude = point.latitude, longitude = point.longitude
        if fixCount == 0 {
            restart(latitude: latitude, longitude: longitude, timeNs: timeNs)
            return .none
        }
        let centreLatitude = sumLatitude / Double(fixCount)
        let centreLongitude = sumLongitude / Double(fixCount)
        let distanceM = Geodesy.chordM(GeoPoint(latitude: centreLatitude, longitude: centreLongitude), point)
        let limitM = radiusM + accuracyM
        if distanceM <= limitM {
            outsideCount = 0
            add(latitude: latitude, longitude: longitude, timeNs: timeNs)
            if isStationary {
                stay.latitude = sumLatitude / Double(fixCount)
                stay.longitude = sumLongitude / Double(fixCount)
                if distanceM > stay.radiusM { stay.radiusM = distanceM }
                if distanceM <= nearM(accuracyM) { stay.lastNearNs = timeNs }
                return .none
            }
            if timeNs - startNs >= windowNs {
                isStationary = true
                stay = beginStay(accuracyM: accuracyM, nowNs: timeNs)
                return .becameStationary(stay)
            }
            return .none
        }
        outsideCount += 1
        guard !isStationary || outsideCount >= confirmationCount else { return .none }
        let ended = stay
        let wasStationary = isStationary
        isStationary = false
        restart(latitude: latitude, longitude: longitude, timeNs: timeNs)
        return wasStationary ? .resumedMoving(ended) : .none
    }

    /// "Near" the centre, for dating arrival and departure: within half the radius plus accuracy.
    @inline(__always) private func nearM(_ accuracyM: Double) -> Double { radiusM / 2 + accuracyM }

    private mutating func restart(latitude: Double, longitude: Double, timeNs: Int64) {
        startNs = timeNs
        sumLatitude = 0
        sumLongitude = 0
        fixCount = 0
        sampleCount = 0
        outsideCount = 0
        add(latitude: latitude, longitude: longitude, timeNs: timeNs)
    }

    private mutating func add(latitude: Double, longitude: Double, timeNs: Int64) {
        sumLatitude += latitude
        sumLongitude += longitude
        fixCount += 1
        if sampleCount < StationaryDetector.arrivalSamples {
            samples[sampleCount] = (timeNs, latitude, longitude)
            sampleCount += 1
        }
    }

    private func beginStay(accuracyM: Double, nowNs: Int64) -> Stay {
        let latitude = sumLatitude / Double(fixCount)
        let longitude = sumLongitude / Double(fixCount)
        var arrivalNs = startNs
        var radius = 0.0
        var found = false
        for index in 0..<sampleCount {
            let distanceM = Geodesy.approximateDistanceM(latitude, longitude, samples[index].latitude, samples[index].longitude)
            if !found && distanceM <= nearM(accuracyM) {
                arrivalNs = samples[index].timeNs
                found = true
            }
            if found && distanceM > radius { radius = distanceM }
        }
        return Stay(arrivalNs: arrivalNs, lastNearNs: nowNs, latitude: latitude, longitude: longitude, radiusM: radius)
    }
}
