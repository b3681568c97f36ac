/// Boundary-aware sampling: when the next fix is needed so that no geofence edge can be crossed
/// unseen. From the last fix, the device cannot reach the nearest edge sooner than
/// (distance to edge - accuracy) / maximum speed; the next fix is due then, but never later than
/// the tier allows and never sooner than the receiver can fix.
public struct SamplingPlanner: Equatable, Sendable {
    /// The receiver's fix interval (its fastest rate).
    public let minimumIntervalNs: Int64
    /// The tier's longest interval.
    public let maximumIntervalNs: Int64
    public let maximumSpeedMps: Double

    public init(minimumIntervalMs: Int64, maximumIntervalMs: Int64, maximumSpeedMps: Double) {
        precondition(minimumIntervalMs > 0 && maximumSpeedMps > 0)
        self.minimumIntervalNs = minimumIntervalMs * 1_000_000
        self.maximumIntervalNs = max(minimumIntervalMs, maximumIntervalMs) * 1_000_000
        self.maximumSpeedMps = maximumSpeedMps
    }

    public init(_ configuration: LiveConfiguration, _ tier: TierPolicy) {
        self.init(minimumIntervalMs: configuration.fixIntervalMs, maximumIntervalMs: tier.maximumIntervalMs,
                  maximumSpeedMps: configuration.maximumSpeedMps)
    }

    /// The time of the next fix after one taken at `now`. `distanceToEdgeM` nil means no
    /// geofence to watch; an unknown accuracy counts as the distance itself (fix again soon).
    @_noAllocation
    public func nextFixTime(now: UTCTime, distanceToEdgeM: Double?, accuracyM: Double?) -> UTCTime {
        var intervalNs = maximumIntervalNs
        if let distanceToEdgeM {
            let clearM = distanceToEdgeM - (accuracyM ?? distanceToEdgeM)
            if clearM <= 0 || !clearM.isFinite {
                intervalNs = minimumIntervalNs
            } else {
                let seconds = clearM / maximumSpeedMps
                intervalNs = seconds >= Double(maximumIntervalNs) / 1e9 ? maximumIntervalNs : Int64(seconds * 1e9)
            }
        }
        intervalNs = min(max(intervalNs, minimumIntervalNs), maximumIntervalNs)
        return UTCTime(nanoseconds: now.totalNanoseconds + intervalNs)
    }
}

/// Distance from a point to the nearest circular geofence edge (inside or outside), metres:
/// the input to `SamplingPlanner`. Linear in the number of fences (an exact distance to each):
/// the reference that `CircleIndex.nearestEdgeM` (same answers, a few cells visited) is tested
/// against.
public struct FenceEdges: Sendable {
    private var centres: [GeoPoint] = []
    private var radiiM: [Double] = []

    public init() {}

    public mutating func add(latitude: Double, longitude: Double, radiusM: Double) {
        centres.append(GeoPoint(latitude: latitude, longitude: longitude))
        radiiM.append(radiusM)
    }

    public var isEmpty: Bool { centres.isEmpty }

    /// Not `@_noAllocation`: it reads the arrays (retain/release); it allocates nothing.
    public func nearestEdgeM(latitude: Double, longitude: Double) -> Double? {
        guard !centres.isEmpty else { return nil }
        let point = GeoPoint(latitude: latitude, longitude: longitude)
        var nearest = Double.infinity
        for index in 0..<centres.count {
            let distance = abs(Geodesy.distanceM(point, centres[index]) - radiiM[index])
            if distance < nearest { nearest = distance }
        }
        return nearest
    }
}
