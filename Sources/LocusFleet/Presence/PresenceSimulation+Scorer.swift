extension PresenceSimulation {
    /// Compares one tracker's decisions with the truth, period by period. Simpler than what it
    /// checks: it only counts.
    struct Scorer {
        enum Standing { case no, inside, nearBoundary }

        /// A standing tag closer than this to another area is reported apart: on a boundary no
        /// radio can tell the two areas apart, so any decision there flips now and then.
        static let boundaryMarginM = 0.5
        /// A stay shorter than this is passing through an area, not a move into it.
        static let stayMs: Int64 = 10_000

        struct Move {
            var area: Int
            var crossedMs: Int64
            var arrivalMs: Int64
        }

        var errors: [Double] = []
        var periods = 0
        var wrong = 0
        var standingChanges: [Standing: Int] = [:]
        var standingMs: [Standing: Int64] = [:]
        var fromCrossingMs: [Int64] = []
        var fromArrivalMs: [Int64] = []
        var missed = 0
        var lastDecisions: [PresenceTracker.Decision?]
        /// Per walking tag: the area it last crossed into, until that area is decided.
        var pending: [Move?]

        init(tags: Int) {
            lastDecisions = Array(repeating: nil, count: tags)
            pending = Array(repeating: nil, count: tags)
        }

        /// The tag's true area changed on a walk that ends at `arrivalMs`: a new move starts; the
        /// last one, if it was a stay and never decided, is a miss that took the whole stay.
        mutating func crossed(tag: Int, into area: Int, atMs nowMs: Int64, arrivalMs: Int64) {
            if let open = pending[tag], nowMs - open.crossedMs >= Scorer.stayMs {
                missed += 1
                fromCrossingMs.append(nowMs - open.crossedMs)
                fromArrivalMs.append(max(0, nowMs - open.arrivalMs))
            }
            pending[tag] = Move(area: area, crossedMs: nowMs, arrivalMs: arrivalMs)
        }

        mutating func period(tag: Int, decision: PresenceTracker.Decision, truth: Int?, error: Double?, standing: Standing, endMs: Int64) {
            periods += 1
            if decision.isAway || decision.area != truth { wrong += 1 }
            if let error { errors.append(error) }
            if standing != .no {
                standingMs[standing, default: 0] += PresenceSimulation.periodMs
                if let last = lastDecisions[tag], last != decision { standingChanges[standing, default: 0] += 1 }
            }
            if let open = pending[tag], !decision.isAway, decision.area == open.area {
                fromCrossingMs.append(endMs - open.crossedMs)
                fromArrivalMs.append(max(0, endMs - open.arrivalMs))
                pending[tag] = nil
            }
            // Changes are counted from the first time the tag is placed: before that it is away
            // only because no period has ended yet.
            if lastDecisions[tag] != nil || !decision.isAway { lastDecisions[tag] = decision }
        }

        func changesPerHour(_ standing: Standing) -> (rate: Double, hours: Double) {
            let hours = Double(standingMs[standing] ?? 0) / 3_600_000
            return (hours > 0 ? Double(standingChanges[standing] ?? 0) / hours : .nan, hours)
        }

        func score() -> PipelineScore {
            let crossing = fromCrossingMs.map { Double($0) / 1000 }.sorted()
            let arrival = fromArrivalMs.map { Double($0) / 1000 }.sorted()
            let inside = changesPerHour(.inside), boundary = changesPerHour(.nearBoundary)
            return PipelineScore(errors: PresenceErrorStatistics(errors), wrongAreaShare: Double(wrong) / Double(max(periods, 1)),
                                 standingChangesPerHour: inside.rate, standingHours: inside.hours,
                                 boundaryChangesPerHour: boundary.rate, boundaryHours: boundary.hours,
                                 moves: crossing.count, movesMissed: missed,
                                 fromArrivalMedianS: PresenceErrorStatistics.quantile(arrival, 0.5), fromArrivalMaxS: arrival.last ?? .nan,
                                 fromCrossingMedianS: PresenceErrorStatistics.quantile(crossing, 0.5), fromCrossingMaxS: crossing.last ?? .nan)
        }
    }
}
