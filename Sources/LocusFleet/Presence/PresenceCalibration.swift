import Foundation

/// Learns what the floor plan cannot say: each gateway's receive offset (dB), and each tag's
/// RSSI at 1 m. Gateways hear each other's own iBeacon at known positions, so every heard pair
/// says `rssi = beaconPower(sender) + offset(listener) - pathLoss(sender, listener)`; the least
/// squares solution of all pairs, with the mean offset fixed at 0 (the gauge: only sums of a
/// beacon power and an offset are observable), gives the offsets. A tag placed at a known spot
/// then gives its power as the median over gateways of `rssi - offset + pathLoss`.
public enum PresenceCalibration {
    /// Gateway `listener` heard gateway `sender`'s iBeacon at `rssiDBm` (a period's summary).
    public struct Hearing: Sendable {
        public var listener: Int
        public var sender: Int
        public var rssiDBm: Double
        public init(listener: Int, sender: Int, rssiDBm: Double) {
            self.listener = listener
            self.sender = sender
            self.rssiDBm = rssiDBm
        }
    }

    /// A tag's summaries while it lay at a known spot.
    public struct TagAtSpot: Sendable {
        public var tag: UInt64
        public var spot: PresenceFloorPlan.Point
        public var observations: [PresenceObservation]
        public init(tag: UInt64, spot: PresenceFloorPlan.Point, observations: [PresenceObservation]) {
            self.tag = tag
            self.spot = spot
            self.observations = observations
        }
    }

    public struct Result: Sendable {
        /// Receive offset per gateway, dB, mean 0 over the gateways that were solved.
        public var gatewayOffsetsDB: [Double]
        /// Whether each gateway took part (heard or was heard); the others keep offset 0.
        public var gatewaySolved: [Bool]
        /// Each gateway's own iBeacon's RSSI at 1 m, as this gauge sees it, dBm.
        public var beaconPowersDBm: [Double]
        public var tagPowersDBm: [UInt64: Double]
        /// Root-mean-square of the pairs' residuals, dB: how well the model fits.
        public var residualRMSDB: Double
        public var hearingsUsed: Int
        public var iterations: Int
    }

    /// At most this many sweeps of the alternating solution (it converges in tens).
    static let iterationsMax = 2_000

    public static func solve(plan: PresenceFloorPlan, hearings: [Hearing], tags: [TagAtSpot] = []) -> Result {
        let count = plan.gateways.count
        let usable = hearings.filter { $0.listener != $0.sender && $0.listener < count && $0.sender < count }
        let losses = usable.map { gatewayPathLossDB(plan, from: $0.sender, to: $0.listener) }
        var solved = Array(repeating: false, count: count)
        for hearing in usable {
            solved[hearing.listener] = true
            solved[hearing.sender] = true
        }
        var (offsets, powers, iterations) = alternate(usable, losses, count: count)
        let solvedCount = solved.filter { $0 }.count
        let mean = solvedCount == 0 ? 0 : offsets.indices.filter { solved[$0] }.map { offsets[$0] }.reduce(0, +) / Double(solvedCount)
        for index in 0..<count {
            offsets[index] = solved[index] ? offsets[index] - mean : 0
            powers[index] += mean
        }
        var squares = 0.0
        for (index, hearing) in usable.enumerated() {
            let residual = hearing.rssiDBm - (powers[hearing.sender] + offsets[hearing.listener] - losses[index])
            squares += residual * residual
        }
        var tagPowers: [UInt64: Double] = [:]
        for tag in tags { tagPowers[tag.tag] = tagPower(plan, tag, offsets: offsets) }
        return Result(gatewayOffsetsDB: offsets, gatewaySolved: solved, beaconPowersDBm: powers, tagPowersDBm: tagPowers,
                      residualRMSDB: usable.isEmpty ? 0 : (squares / Double(usable.count)).squareRoot(),
                      hearingsUsed: usable.count, iterations: iterations)
    }

    /// Block coordinate descent on the least squares: each sweep sets every beacon power, then
    /// every offset, to the mean that minimises the squares given the other block.
    static func alternate(_ hearings: [Hearing], _ losses: [Double], count: Int) -> (offsets: [Double], powers: [Double], iterations: Int) {
        var offsets = Array(repeating: 0.0, count: count)
        var powers = Array(repeating: 0.0, count: count)
        for iteration in 1...iterationsMax {
            var sums = Array(repeating: 0.0, count: count), counts = Array(repeating: 0.0, count: count)
            for (index, hearing) in hearings.enumerated() {
                sums[hearing.sender] += hearing.rssiDBm + losses[index] - offsets[hearing.listener]
                counts[hearing.sender] += 1
            }
            for index in 0..<count where counts[index] > 0 { powers[index] = sums[index] / counts[index] }
            sums = Array(repeating: 0.0, count: count)
            counts = Array(repeating: 0.0, count: count)
            for (index, hearing) in hearings.enumerated() {
                sums[hearing.listener] += hearing.rssiDBm + losses[index] - powers[hearing.sender]
                counts[hearing.listener] += 1
            }
            var change = 0.0
            for index in 0..<count where counts[index] > 0 {
                let next = sums[index] / counts[index]
                change = max(change, abs(next - offsets[index]))
                offsets[index] = next
            }
            if change < 1e-9 { return (offsets, powers, iteration) }
        }
        return (offsets, powers, iterationsMax)
    }

    /// Path loss between two gateways (both antennas at their own heights).
    static func gatewayPathLossDB(_ plan: PresenceFloorPlan, from sender: Int, to listener: Int) -> Double {
        let a = plan.gateways[sender], b = plan.gateways[listener]
        let dx = a.position.x - b.position.x, dy = a.position.y - b.position.y
        let dz = (a.heightM ?? 0) - (b.heightM ?? 0)
        let distance = max((dx * dx + dy * dy + dz * dz).squareRoot(), 0.1)
        var walls = 0.0
        for wall in plan.walls where PresenceFloorPlan.segmentsCross(a.position, b.position, wall.from, wall.to) {
            walls += wall.attenuationDB
        }
        return 10 * plan.pathLossExponent * log10(distance) + walls
    }

    /// The median over the tag's observations of what each says the tag's power is.
    static func tagPower(_ plan: PresenceFloorPlan, _ tag: TagAtSpot, offsets: [Double]) -> Double? {
        let estimates = tag.observations.map { $0.rssiDBm - offsets[$0.gateway] + plan.pathLossDB(gateway: $0.gateway, to: tag.spot) }.sorted()
        guard !estimates.isEmpty else { return nil }
        let middle = estimates.count / 2
        return estimates.count % 2 == 1 ? estimates[middle] : (estimates[middle - 1] + estimates[middle]) / 2
    }
}
