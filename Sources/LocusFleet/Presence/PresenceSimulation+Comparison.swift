extension PresenceSimulation {
    /// The ESPresense-companion baseline's tracks (its docs/accuracy.md): waypoints joined by 30
    /// linearly interpolated samples a segment, the last waypoint included.
    public struct Track: Sendable {
        public var name: String
        public var waypoints: [PresenceFloorPlan.Point]
        public var samplesPerSegment = 30

        /// The sample points: 30 a segment, then the last waypoint.
        public var samples: [PresenceFloorPlan.Point] {
            var points: [PresenceFloorPlan.Point] = []
            for (from, to) in zip(waypoints, waypoints.dropFirst()) {
                for step in 0..<samplesPerSegment {
                    let share = Double(step) / Double(samplesPerSegment)
                    points.append(.init(from.x + (to.x - from.x) * share, from.y + (to.y - from.y) * share))
                }
            }
            points.append(waypoints[waypoints.count - 1])
            return points
        }

        public static let diagonalWalk = Track(name: "diagonal_walk", waypoints: [.init(0.5, 0.5), .init(3.0, 2.0), .init(5.5, 3.5)])
        public static let livingToBedroom = Track(name: "living_to_bedroom",
                                                  waypoints: [.init(1, 2), .init(3, 2), .init(3.9, 2), .init(4.1, 2), .init(5, 2)])
    }

    /// The figures ESPresense-companion publishes for its NelderMead locator on these tracks
    /// (docs/accuracy.md; Apache License 2.0): quoted for the comparison, never computed here.
    public struct PublishedFigures: Sendable, Codable {
        public var medianM: Double
        public var p95M: Double
        public var meanM: Double?
        public var maximumM: Double?
        public var wrongAreaShare: Double

        public static func forTrack(_ name: String) -> PublishedFigures? {
            switch name {
            case "diagonal_walk": return PublishedFigures(medianM: 0.60, p95M: 1.33, meanM: 0.70, maximumM: 1.56, wrongAreaShare: 0.066)
            case "living_to_bedroom": return PublishedFigures(medianM: 0.60, p95M: 1.61, meanM: nil, maximumM: nil, wrongAreaShare: 0.223)
            default: return nil
            }
        }
    }

    /// What one run of a track gave.
    public struct ComparisonResult: Sendable, Codable {
        public var track: String
        public var samples: Int
        public var errors: PresenceErrorStatistics
        public var wrongAreaShare: Double
        public var published: PublishedFigures?
    }

    /// ESPresense's mode: one noisy reading per station per sample, the estimator without
    /// memory, `repetitions` independent walks of the track so the figures settle.
    public static func compare(track: Track, repetitions: Int, seed: UInt64, model: PresenceModel = PresenceModel()) -> ComparisonResult {
        let plan = Plans.plan(Plans.espresense)
        let estimator = PresenceEstimator(plan: plan, model: model)
        let radio = Radio(plan: plan)
        var random = PresenceRandom(seed: seed)
        var errors: [Double] = []
        var wrong = 0
        for _ in 0..<repetitions {
            for truth in track.samples {
                let observations = plan.gateways.indices.map { gateway in
                    PresenceObservation(gateway: gateway, count: 1,
                                        rssiDBm: radio.reading(mean: radio.meanRSSI(gateway: gateway, from: truth, powerDBm: -59), random: &random))
                }
                let fix = estimator.locate(observations, tagPowerDBm: -59)!
                errors.append(fix.position.distance(to: truth))
                if fix.likeliestArea != plan.areaIndex(at: truth) { wrong += 1 }
            }
        }
        return ComparisonResult(track: track.name, samples: errors.count, errors: PresenceErrorStatistics(errors),
                                wrongAreaShare: Double(wrong) / Double(errors.count), published: PublishedFigures.forTrack(track.name))
    }
}

extension PresenceObservation {
    init(gateway: Int, count: Int, rssiDBm: Double) {
        self.init(gateway: gateway, rssiDBm: rssiDBm, count: count)
    }
}

extension PresenceFloorPlan.Point {
    func distance(to other: PresenceFloorPlan.Point) -> Double {
        let dx = x - other.x, dy = y - other.y
        return (dx * dx + dy * dy).squareRoot()
    }
}

/// Median, 95th percentile, mean and maximum of a set of position errors, metres.
public struct PresenceErrorStatistics: Sendable, Codable {
    public var medianM: Double
    public var p95M: Double
    public var meanM: Double
    public var maximumM: Double

    public init(_ errors: [Double]) {
        let sorted = errors.sorted()
        medianM = PresenceErrorStatistics.quantile(sorted, 0.5)
        p95M = PresenceErrorStatistics.quantile(sorted, 0.95)
        meanM = sorted.isEmpty ? .nan : sorted.reduce(0, +) / Double(sorted.count)
        maximumM = sorted.last ?? .nan
    }

    /// Linear interpolation between order statistics (numpy's default), NaN when empty.
    public static func quantile(_ sorted: [Double], _ share: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let position = share * Double(sorted.count - 1)
        let low = Int(position)
        let high = min(low + 1, sorted.count - 1)
        return sorted[low] + (sorted[high] - sorted[low]) * (position - Double(low))
    }
}
