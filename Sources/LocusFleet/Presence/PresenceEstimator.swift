import Foundation

/// The settings of the presence model (docs/presence.md, "The model").
public struct PresenceModel: Sendable {
    /// Noise of one reading around the path-loss prediction, dB.
    public var readingSigmaDB = 2.5
    /// Noise no averaging removes (offsets left after calibration, shadowing), dB.
    public var modelSigmaDB = 1.0
    /// Share of summaries that sit in a fade, and how deep and how spread the fade is, dB.
    public var fadeShare = 0.1
    public var fadeDepthDB = 6.0
    public var fadeSpreadDB = 3.0
    /// Probability per update that a tag changes area: the hysteresis.
    public var switchProbability = 0.01
    /// The least evidence one update can give an area, as a share of the best area's: caps what
    /// a single update can do against the hysteresis.
    public var evidenceFloor = 0.02
    /// Off: the area is the likeliest area of each update alone (for comparison only).
    public var hysteresis = true
    /// The tracker's motion model between periods: a tag keeps its place, or with this
    /// probability walks, spreading its position by `walkSpreadM`.
    public var walkProbability = 0.1
    public var walkSpreadM = 1.2
    /// No summary from any gateway for this long: the tag is away.
    public var awayTimeoutMs: Int64 = 15_000
    /// The coarse grid has at most this many cells.
    public var gridCellsMax = 1_500

    public init() {}
}

/// One gateway's summary of one tag for one period, as the estimator uses it.
public struct PresenceObservation: Sendable {
    /// Index of the gateway in the floor plan.
    public var gateway: Int
    /// The gateway's filtered RSSI, dBm.
    public var rssiDBm: Double
    /// Readings behind it.
    public var count: Int
    public init(gateway: Int, rssiDBm: Double, count: Int) {
        self.gateway = gateway
        self.rssiDBm = rssiDBm
        self.count = count
    }
}

/// Where one period's summaries put a tag.
public struct PresenceFix: Sendable {
    /// The posterior mean position.
    public var position: PresenceFloorPlan.Point
    /// The posterior's root-mean-square spread around it, metres: the confidence.
    public var spreadM: Double
    /// Posterior probability of each area, then of "in no area" (last element).
    public var areaProbabilities: [Double]
    /// The area with the most posterior mass; nil: "in no area".
    public var likeliestArea: Int? {
        let best = areaProbabilities.indices.max { areaProbabilities[$0] < areaProbabilities[$1] }!
        return best == areaProbabilities.count - 1 ? nil : best
    }
}

/// Places a tag from the gateways' summaries: a posterior over a grid on the floor plan, from a
/// dB-domain likelihood with a fade component, refined around its mean when it is narrow.
public struct PresenceEstimator: Sendable {
    public let plan: PresenceFloorPlan
    public let model: PresenceModel
    /// Per-gateway receive offsets, dB (from `PresenceCalibration`; zeros when uncalibrated).
    public let gatewayOffsetsDB: [Double]
    let grid: PresenceGrid

    public init(plan: PresenceFloorPlan, model: PresenceModel = PresenceModel(), gatewayOffsetsDB: [Double]? = nil) {
        self.plan = plan
        self.model = model
        self.gatewayOffsetsDB = gatewayOffsetsDB ?? Array(repeating: 0, count: plan.gateways.count)
        precondition(self.gatewayOffsetsDB.count == plan.gateways.count, "one offset per gateway")
        grid = PresenceGrid(plan: plan, cellsMax: model.gridCellsMax)
    }

    /// The fix from one period's observations of a tag whose RSSI at 1 m is `tagPowerDBm`; nil
    /// without observations.
    public func locate(_ observations: [PresenceObservation], tagPowerDBm: Double) -> PresenceFix? {
        guard !observations.isEmpty else { return nil }
        let terms = self.terms(observations, tagPowerDBm: tagPowerDBm)
        var fix = grid.posterior(weights: grid.relativeLikelihoods(grid.logLikelihoods(terms)), areaCount: plan.areas.count)
        // A posterior narrower than a cell is refined on finer local grids, a quarter of the
        // step each round, while it stays narrower than the step (three rounds at most).
        var stepM = grid.stepM
        for _ in 0..<3 where fix.spreadM < stepM {
            stepM /= 4
            (fix.position, fix.spreadM) = refine(around: fix.position, stepM: stepM, terms: terms)
        }
        return fix
    }

    func terms(_ observations: [PresenceObservation], tagPowerDBm: Double) -> [LikelihoodTerm] {
        observations.map { LikelihoodTerm($0, model: model, expectedAtOneMeterDBm: tagPowerDBm + gatewayOffsetsDB[$0.gateway]) }
    }

    /// Each coarse cell's likelihood of one period's observations, relative to the best cell's.
    func cellLikelihoods(_ observations: [PresenceObservation], tagPowerDBm: Double) -> [Double] {
        grid.relativeLikelihoods(grid.logLikelihoods(terms(observations, tagPowerDBm: tagPowerDBm)))
    }

    /// The posterior mean and spread on a 17 x 17 grid of `stepM` around `center` (eight steps
    /// either way: the posterior is narrower than that, so little is cut off).
    func refine(around center: PresenceFloorPlan.Point, stepM: Double, terms: [LikelihoodTerm]) -> (PresenceFloorPlan.Point, Double) {
        var points: [PresenceFloorPlan.Point] = []
        var logs: [Double] = []
        for row in -8...8 {
            for column in -8...8 {
                let point = PresenceFloorPlan.Point(center.x + Double(column) * stepM, center.y + Double(row) * stepM)
                points.append(point)
                logs.append(terms.reduce(0) { $0 + $1.logLikelihood(pathLossDB: plan.pathLossDB(gateway: $1.gateway, to: point)) })
            }
        }
        let best = logs.max()!
        let weights = logs.map { exp($0 - best) }
        let weightSum = weights.reduce(0, +)
        let mean = PresenceFloorPlan.Point(zip(weights, points).map { $0 * $1.x }.reduce(0, +) / weightSum,
                                           zip(weights, points).map { $0 * $1.y }.reduce(0, +) / weightSum)
        let spread = zip(weights, points).map { weight, point in
            let dx = point.x - mean.x, dy = point.y - mean.y
            return weight * (dx * dx + dy * dy)
        }.reduce(0, +) / weightSum
        return (mean, spread.squareRoot())
    }
}

/// One observation's contribution to the log-likelihood, with its constants worked out once:
/// a two-component mixture in dB of the clean reading and a one-sided fade.
struct LikelihoodTerm: Sendable {
    let gateway: Int
    /// The observed RSSI minus the RSSI expected at 1 m, dB: compared with minus the path loss.
    let excessDB: Double
    let cleanConstant: Double
    let cleanInverseVariance: Double
    let fadeConstant: Double
    let fadeInverseVariance: Double
    let fadeDepthDB: Double

    init(_ observation: PresenceObservation, model: PresenceModel, expectedAtOneMeterDBm: Double) {
        gateway = observation.gateway
        excessDB = observation.rssiDBm - expectedAtOneMeterDBm
        let readings = Double(max(observation.count, 1))
        let cleanVariance = model.readingSigmaDB * model.readingSigmaDB / readings + model.modelSigmaDB * model.modelSigmaDB
        let fadeVariance = cleanVariance + model.fadeSpreadDB * model.fadeSpreadDB
        cleanConstant = log(1 - model.fadeShare) - 0.5 * log(2 * Double.pi * cleanVariance)
        cleanInverseVariance = 1 / cleanVariance
        fadeConstant = log(model.fadeShare) - 0.5 * log(2 * Double.pi * fadeVariance)
        fadeInverseVariance = 1 / fadeVariance
        fadeDepthDB = model.fadeDepthDB
    }

    /// log p(observation | the tag is where the path loss is `pathLossDB`).
    @inline(__always)
    func logLikelihood(pathLossDB: Double) -> Double {
        let residual = excessDB + pathLossDB
        let clean = cleanConstant - 0.5 * residual * residual * cleanInverseVariance
        let faded = residual + fadeDepthDB
        let fade = fadeConstant - 0.5 * faded * faded * fadeInverseVariance
        return clean > fade ? clean + log1p(exp(fade - clean)) : fade + log1p(exp(clean - fade))
    }
}
