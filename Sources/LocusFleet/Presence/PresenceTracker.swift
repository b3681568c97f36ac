/// Follows each tag over time in two layers. A belief over the estimator's grid cells (a Bayes
/// filter: the tag stays put, or walks with a small probability) gathers the periods of a tag
/// that stands still into a sharper position. A forward filter over the areas and "in no area"
/// (a hidden Markov model whose small switching probability is the hysteresis) turns the
/// belief's area masses into the decision. A tag not heard for the away timeout is away. Time
/// is passed in, never read.
public struct PresenceTracker: Sendable {
    /// What the tracker says about one tag.
    public struct Decision: Equatable, Sendable {
        /// The decided area; nil when away or in no area.
        public var area: Int?
        public var isAway: Bool
        public static let away = Decision(area: nil, isAway: true)
    }

    struct TagState: Sendable {
        /// Forward probabilities over the areas, then "in no area".
        var probabilities: [Double]
        var decided: Int
        var lastHeardMs: Int64
        var isAway: Bool
    }

    public let estimator: PresenceEstimator
    var tags: [UInt64: TagState] = [:]
    /// Per tag heard since it was last away: the belief over the grid's cells (sums to 1).
    var beliefs: [UInt64: [Double]] = [:]
    /// Each state's share of the grid's cells: the prior the posterior masses are divided by.
    let priors: [Double]

    public init(estimator: PresenceEstimator) {
        self.estimator = estimator
        let total = Double(estimator.grid.centers.count)
        priors = estimator.grid.areaCellCounts.map { Double($0) / total }
    }

    /// The tag's current decision (away if never heard).
    public func decision(tag: UInt64) -> Decision {
        guard let state = tags[tag], !state.isAway else { return .away }
        return Decision(area: state.decided == priors.count - 1 ? nil : state.decided, isAway: false)
    }

    /// Takes one period's observations of a tag heard at `nowMs`: returns the decision and the
    /// fix from the belief (nil without observations).
    @discardableResult
    public mutating func update(tag: UInt64, observations: [PresenceObservation], tagPowerDBm: Double,
                                nowMs: Int64) -> (decision: Decision, fix: PresenceFix)? {
        guard !observations.isEmpty else { return nil }
        let likelihoods = estimator.cellLikelihoods(observations, tagPowerDBm: tagPowerDBm)
        var belief = likelihoods
        if estimator.model.hysteresis, tags[tag]?.isAway == false, let previous = beliefs[tag] {
            belief = zip(moved(previous), likelihoods).map { $0 * $1 }
        }
        belief = normalized(belief)
        beliefs[tag] = belief
        let fix = estimator.grid.posterior(weights: belief, areaCount: estimator.plan.areas.count)
        return (update(tag: tag, fix: fix, nowMs: nowMs), fix)
    }

    /// The belief one period later: most of it stays, a share spreads as far as a walk goes,
    /// and a trace covers every cell so that a tag that moved unseen can still be found.
    func moved(_ belief: [Double]) -> [Double] {
        let walk = estimator.model.walkProbability
        let spread = estimator.grid.blurred(belief, sigmaM: estimator.model.walkSpreadM)
        let trace = 1e-9 / Double(belief.count)
        return zip(belief, spread).map { (1 - walk) * $0 + walk * $1 + trace }
    }

    /// Takes one period's area probabilities of a tag heard at `nowMs` and returns the decision.
    @discardableResult
    public mutating func update(tag: UInt64, fix: PresenceFix, nowMs: Int64) -> Decision {
        let evidence = evidence(fix)
        var state = tags[tag] ?? TagState(probabilities: evidence, decided: 0, lastHeardMs: nowMs, isAway: true)
        if state.isAway || !estimator.model.hysteresis {
            // A tag that comes back (or a filter without memory) starts from this update alone.
            state.probabilities = normalized(evidence)
        } else {
            state.probabilities = normalized(zip(predicted(state.probabilities), evidence).map { $0 * $1 })
        }
        state.decided = state.probabilities.indices.max { state.probabilities[$0] < state.probabilities[$1] }!
        state.lastHeardMs = nowMs
        state.isAway = false
        tags[tag] = state
        return decision(tag: tag)
    }

    /// Marks away every tag not heard for the away timeout; returns the tags that left.
    @discardableResult
    public mutating func expire(nowMs: Int64) -> [UInt64] {
        var left: [UInt64] = []
        for (tag, state) in tags where !state.isAway && nowMs - state.lastHeardMs >= estimator.model.awayTimeoutMs {
            tags[tag]!.isAway = true
            beliefs[tag] = nil
            left.append(tag)
        }
        return left
    }

    /// The update's likelihood of each state: posterior mass over prior, scaled so the best is
    /// 1 and floored, so no single update can overturn more than the floor allows.
    func evidence(_ fix: PresenceFix) -> [Double] {
        var ratios = Array(repeating: 0.0, count: priors.count)
        for index in priors.indices where priors[index] > 0 {
            ratios[index] = fix.areaProbabilities[index] / priors[index]
        }
        let best = ratios.max()!
        return priors.indices.map { index in
            priors[index] > 0 ? max(ratios[index] / best, estimator.model.evidenceFloor) : 0
        }
    }

    /// One step of the chain: stay with 1 - p, else move to any other reachable state alike.
    func predicted(_ probabilities: [Double]) -> [Double] {
        let reachable = priors.filter { $0 > 0 }.count
        guard reachable > 1 else { return probabilities }
        let stay = 1 - estimator.model.switchProbability
        let move = estimator.model.switchProbability / Double(reachable - 1)
        return probabilities.indices.map { index in
            guard priors[index] > 0 else { return 0 }
            return probabilities[index] * stay + (1 - probabilities[index]) * move
        }
    }

    func normalized(_ values: [Double]) -> [Double] {
        let sum = values.reduce(0, +)
        return values.map { $0 / sum }
    }
}
