import Foundation

/// The seeded world the presence bench runs in (docs/presence.md, "The bench"): floor plans,
/// a radio with path loss, noise, fades, walls and hidden gateway offsets, and tags that walk
/// and stand. One UInt64 seed decides everything; time is advanced by the simulation.
public enum PresenceSimulation {}

/// SplitMix64 (Steele, Lea and Flood, 2014), the project's generator, written again here because
/// LocusFleet cannot depend on the test support target; Box-Muller for Gaussian draws.
struct PresenceRandom {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1): the top 53 bits.
    mutating func unit() -> Double { Double(next() >> 11) * 0x1p-53 }

    mutating func uniform(_ low: Double, _ high: Double) -> Double { low + (high - low) * unit() }

    mutating func chance(_ probability: Double) -> Bool { unit() < probability }

    mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }

    /// Standard normal (Box-Muller; the second value of the pair is not kept, for simplicity).
    mutating func gaussian() -> Double {
        let u = max(unit(), 0x1p-60)
        return (-2 * log(u)).squareRoot() * cos(2 * Double.pi * unit())
    }

    /// An independent generator for one part of the world, so adding draws to one part does not
    /// change the others.
    mutating func split() -> PresenceRandom { PresenceRandom(seed: next()) }
}

extension PresenceSimulation {
    /// The radio between tags and gateways: the plan's path loss with the truths the estimator
    /// does not know (receive offsets, beacon powers, wall attenuations that differ from the
    /// plan's) and the noise of single readings.
    struct Radio {
        let plan: PresenceFloorPlan
        var receiveOffsetsDB: [Double]
        /// Each gateway's own iBeacon's RSSI at 1 m (before the listener's offset), dBm.
        var beaconPowersDBm: [Double]
        var wallAttenuationsDB: [Double]
        var readingSigmaDB = 2.5
        /// The share of readings in a short multipath fade, and its depth.
        var dipShare = 0.1
        var dipDB = 6.0
        /// Readings weaker than this are not heard.
        var sensitivityDBm = -100.0

        /// A radio with no hidden truths: what the plan says is what happens.
        init(plan: PresenceFloorPlan) {
            self.plan = plan
            receiveOffsetsDB = Array(repeating: 0, count: plan.gateways.count)
            beaconPowersDBm = Array(repeating: -59, count: plan.gateways.count)
            wallAttenuationsDB = plan.walls.map(\.attenuationDB)
        }

        /// Hidden receive offsets of up to `offsetDB` either way, beacon powers of -59 dBm give
        /// or take 3 dB, and walls 2 dB away from the plan's figure.
        init(plan: PresenceFloorPlan, hiddenOffsetDB offsetDB: Double, random: inout PresenceRandom) {
            self.init(plan: plan)
            receiveOffsetsDB = plan.gateways.map { _ in random.uniform(-offsetDB, offsetDB) }
            beaconPowersDBm = plan.gateways.map { _ in -59 + random.uniform(-3, 3) }
            wallAttenuationsDB = plan.walls.map { max(0, $0.attenuationDB + random.uniform(-2, 2)) }
        }

        /// The true mean RSSI at `gateway` of a transmitter at `point` whose RSSI at 1 m is
        /// `powerDBm`, with the true walls and the gateway's hidden offset. The transmitter is at
        /// `heightM` (nil: a tag's height).
        func meanRSSI(gateway: Int, from point: PresenceFloorPlan.Point, heightM: Double? = nil, powerDBm: Double) -> Double {
            let station = plan.gateways[gateway]
            var walls = 0.0
            for (index, wall) in plan.walls.enumerated() where PresenceFloorPlan.segmentsCross(station.position, point, wall.from, wall.to) {
                walls += wallAttenuationsDB[index]
            }
            let dx = station.position.x - point.x, dy = station.position.y - point.y
            let dz = station.heightM.map { $0 - (heightM ?? plan.tagHeightM) } ?? 0
            let distance = max((dx * dx + dy * dy + dz * dz).squareRoot(), 0.1)
            return powerDBm + receiveOffsetsDB[gateway] - 10 * plan.pathLossExponent * log10(distance) - walls
        }

        /// One noisy reading around `mean`: Gaussian noise, and sometimes a multipath dip.
        func reading(mean: Double, random: inout PresenceRandom) -> Double {
            var rssi = mean + readingSigmaDB * random.gaussian()
            if random.chance(dipShare) { rssi -= dipDB }
            return rssi
        }
    }
}

extension PresenceFloorPlan {
    /// A uniform random point of area `area` at least `marginM` inside it (never more than 0.4
    /// of its narrower side): rejection sampling over its corners' box, where a point whose
    /// neighbours `marginM` away in the eight directions are not all in the area is drawn again.
    func randomPoint(in area: Int, marginM: Double = 0, random: inout PresenceRandom) -> Point {
        let corners = areas[area].shape.corners
        let low = Point(corners.map(\.x).min()!, corners.map(\.y).min()!)
        let high = Point(corners.map(\.x).max()!, corners.map(\.y).max()!)
        let margin = min(marginM, 0.4 * min(high.x - low.x, high.y - low.y))
        for _ in 0..<10_000 {
            let point = Point(random.uniform(low.x, high.x), random.uniform(low.y, high.y))
            if areaIndex(at: point) == area && isInside(point, byM: margin) { return point }
        }
        preconditionFailure("area \(areas[area].name) has almost no points of its own")
    }

    /// Whether the points `marginM` away from `point` in eight directions are all in its area
    /// or off the plan (the outside walls are no boundary between areas).
    func isInside(_ point: Point, byM marginM: Double) -> Bool {
        let area = areaIndex(at: point)
        let (low, high) = bounds
        let directions = [(1.0, 0.0), (-1, 0), (0, 1), (0, -1), (0.7, 0.7), (0.7, -0.7), (-0.7, 0.7), (-0.7, -0.7)]
        return directions.allSatisfy { direction in
            let neighbour = Point(point.x + direction.0 * marginM, point.y + direction.1 * marginM)
            let offPlan = neighbour.x < low.x || neighbour.x > high.x || neighbour.y < low.y || neighbour.y > high.y
            return offPlan || areaIndex(at: neighbour) == area
        }
    }
}
