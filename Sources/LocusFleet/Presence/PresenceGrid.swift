import Foundation

/// The coarse grid the estimator searches: square cells over the floor plan's bounds, each with
/// its area and its predicted path loss from every gateway, worked out once per plan.
struct PresenceGrid: Sendable {
    let stepM: Double
    /// Cells are numbered row by row: `row * columns + column`.
    let columns: Int
    let rows: Int
    let centers: [PresenceFloorPlan.Point]
    /// The area of each cell's centre; `areaCount` (one past the last area) for "in no area".
    let cellAreas: [Int]
    /// Cells per area, then in no area.
    let areaCellCounts: [Int]
    /// `pathLossDB[gateway * centers.count + cell]`.
    let pathLossDB: [Double]

    init(plan: PresenceFloorPlan, cellsMax: Int) {
        let (minimum, maximum) = plan.bounds
        let width = maximum.x - minimum.x
        let height = maximum.y - minimum.y
        precondition(width > 0 && height > 0 && cellsMax > 0, "a floor plan with an extent and a grid with cells")
        stepM = max(0.05, (width * height / Double(cellsMax)).squareRoot())
        columns = max(1, Int((width / stepM).rounded(.up)))
        rows = max(1, Int((height / stepM).rounded(.up)))
        var centers: [PresenceFloorPlan.Point] = []
        for row in 0..<rows {
            for column in 0..<columns {
                centers.append(.init(minimum.x + (Double(column) + 0.5) * width / Double(columns),
                                     minimum.y + (Double(row) + 0.5) * height / Double(rows)))
            }
        }
        self.centers = centers
        cellAreas = centers.map { plan.areaIndex(at: $0) ?? plan.areas.count }
        var counts = Array(repeating: 0, count: plan.areas.count + 1)
        for area in cellAreas { counts[area] += 1 }
        areaCellCounts = counts
        var table: [Double] = []
        table.reserveCapacity(plan.gateways.count * centers.count)
        for gateway in plan.gateways.indices {
            for center in centers { table.append(plan.pathLossDB(gateway: gateway, to: center)) }
        }
        pathLossDB = table
    }

    /// The log-likelihood of every cell.
    func logLikelihoods(_ terms: [LikelihoodTerm]) -> [Double] {
        let cellCount = centers.count
        var sums = Array(repeating: 0.0, count: cellCount)
        pathLossDB.withUnsafeBufferPointer { table in
            sums.withUnsafeMutableBufferPointer { sums in
                for term in terms {
                    let base = term.gateway * cellCount
                    for cell in 0..<cellCount { sums[cell] += term.logLikelihood(pathLossDB: table[base + cell]) }
                }
            }
        }
        return sums
    }

    /// Each cell's likelihood relative to the best cell's (so the largest is 1).
    func relativeLikelihoods(_ logLikelihoods: [Double]) -> [Double] {
        let best = logLikelihoods.max()!
        return logLikelihoods.map { exp($0 - best) }
    }

    /// The distribution over cells proportional to `weights`: its mean, spread and mass per area.
    func posterior(weights: [Double], areaCount: Int) -> PresenceFix {
        var weightSum = 0.0, x = 0.0, y = 0.0
        var masses = Array(repeating: 0.0, count: areaCount + 1)
        for cell in centers.indices {
            let weight = weights[cell]
            weightSum += weight
            x += weight * centers[cell].x
            y += weight * centers[cell].y
            masses[cellAreas[cell]] += weight
        }
        let mean = PresenceFloorPlan.Point(x / weightSum, y / weightSum)
        var spread = 0.0
        for cell in centers.indices {
            let dx = centers[cell].x - mean.x
            let dy = centers[cell].y - mean.y
            spread += weights[cell] * (dx * dx + dy * dy)
        }
        return PresenceFix(position: mean, spreadM: (spread / weightSum).squareRoot(),
                           areaProbabilities: masses.map { $0 / weightSum })
    }

    /// `values` blurred by a Gaussian of `sigmaM` (separable: rows, then columns; cut at three
    /// sigmas). What would spread past the floor's edge is dropped.
    func blurred(_ values: [Double], sigmaM: Double) -> [Double] {
        let sigmaCells = sigmaM / stepM
        let radius = max(1, Int((3 * sigmaCells).rounded(.up)))
        let kernel = (-radius...radius).map { exp(-0.5 * Double($0 * $0) / (sigmaCells * sigmaCells)) }
        let total = kernel.reduce(0, +)
        let weights = kernel.map { $0 / total }
        var across = Array(repeating: 0.0, count: values.count)
        for row in 0..<rows {
            for column in 0..<columns {
                var sum = 0.0
                for offset in max(-radius, -column)...min(radius, columns - 1 - column) {
                    sum += weights[offset + radius] * values[row * columns + column + offset]
                }
                across[row * columns + column] = sum
            }
        }
        var result = Array(repeating: 0.0, count: values.count)
        for row in 0..<rows {
            for column in 0..<columns {
                var sum = 0.0
                for offset in max(-radius, -row)...min(radius, rows - 1 - row) {
                    sum += weights[offset + radius] * across[(row + offset) * columns + column]
                }
                result[row * columns + column] = sum
            }
        }
        return result
    }
}
