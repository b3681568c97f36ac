import Foundation

/// A site's floor plan for presence (docs/presence.md): named areas, walls that attenuate, and
/// the gateways' positions, all in metres on one floor. Areas may touch; where they share a
/// boundary the area declared first wins, and a point in no area is in none.
public struct PresenceFloorPlan: Sendable {
    public struct Point: Equatable, Sendable {
        public var x: Double
        public var y: Double
        public init(_ x: Double, _ y: Double) {
            self.x = x
            self.y = y
        }
    }

    public enum Shape: Equatable, Sendable {
        /// Corners with `minimum.x <= maximum.x` and `minimum.y <= maximum.y`; edges included.
        case rectangle(minimum: Point, maximum: Point)
        /// A simple polygon, vertices in order; edges included.
        case polygon([Point])
    }

    public struct Area: Equatable, Sendable {
        public var name: String
        public var shape: Shape
    }

    public struct Wall: Equatable, Sendable {
        public var from: Point
        public var to: Point
        /// What a signal loses crossing the wall, dB.
        public var attenuationDB: Double
    }

    public struct Gateway: Equatable, Sendable {
        public var id: String
        public var position: Point
        /// Height above the floor in metres; nil: distances are measured in the plane.
        public var heightM: Double?
        /// The gateway's own iBeacon as presence messages name it (`UUID/MAJOR/MINOR`), which
        /// the other gateways hear for calibration; nil: it advertises none.
        public var beacon: String? = nil
    }

    public var areas: [Area]
    public var walls: [Wall]
    public var gateways: [Gateway]
    /// Log-distance path-loss exponent n: RSSI falls 10·n dB per decade of distance.
    public var pathLossExponent: Double
    /// The height tags are carried at, metres (used only with gateway heights).
    public var tagHeightM: Double
    /// Areas as conditions of fleet commands (`[[rule]]`), for `presence run`.
    public var rules: [PresenceRule] = []

    public init(areas: [Area], walls: [Wall] = [], gateways: [Gateway], pathLossExponent: Double = 2.5, tagHeightM: Double = 1.0) {
        self.areas = areas
        self.walls = walls
        self.gateways = gateways
        self.pathLossExponent = pathLossExponent
        self.tagHeightM = tagHeightM
    }

    /// The smallest rectangle holding every area: where the estimator looks for tags.
    public var bounds: (minimum: Point, maximum: Point) {
        var low = Point(.infinity, .infinity)
        var high = Point(-.infinity, -.infinity)
        for area in areas {
            for corner in area.shape.corners {
                low = Point(min(low.x, corner.x), min(low.y, corner.y))
                high = Point(max(high.x, corner.x), max(high.y, corner.y))
            }
        }
        return (low, high)
    }

    /// The index of the first declared area holding `point`, or nil.
    public func areaIndex(at point: Point) -> Int? {
        areas.firstIndex { $0.shape.contains(point) }
    }

    /// Distance from gateway `gateway` to a tag at `point`, metres, never below 0.1 m (the
    /// log-distance model is meaningless in the near field).
    public func distanceM(gateway: Int, to point: Point) -> Double {
        let station = gateways[gateway]
        let dx = station.position.x - point.x
        let dy = station.position.y - point.y
        let dz = station.heightM.map { $0 - tagHeightM } ?? 0
        return max((dx * dx + dy * dy + dz * dz).squareRoot(), 0.1)
    }

    /// The sum of the attenuations of the walls between gateway `gateway` and `point`, dB.
    public func wallLossDB(gateway: Int, to point: Point) -> Double {
        let station = gateways[gateway].position
        var loss = 0.0
        for wall in walls where PresenceFloorPlan.segmentsCross(station, point, wall.from, wall.to) {
            loss += wall.attenuationDB
        }
        return loss
    }

    /// The loss from 1 m to the tag predicted by the plan alone: 10·n·log10(d) plus walls, dB.
    public func pathLossDB(gateway: Int, to point: Point) -> Double {
        10 * pathLossExponent * log10(distanceM(gateway: gateway, to: point)) + wallLossDB(gateway: gateway, to: point)
    }

    /// Whether segments ab and cd properly cross (touching at an end does not count, so a path
    /// that ends on a wall is not attenuated by it).
    static func segmentsCross(_ a: Point, _ b: Point, _ c: Point, _ d: Point) -> Bool {
        func side(_ p: Point, _ q: Point, _ r: Point) -> Double {
            (q.x - p.x) * (r.y - p.y) - (q.y - p.y) * (r.x - p.x)
        }
        let d1 = side(c, d, a)
        let d2 = side(c, d, b)
        let d3 = side(a, b, c)
        let d4 = side(a, b, d)
        return ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0))
    }
}

extension PresenceFloorPlan.Shape {
    var corners: [PresenceFloorPlan.Point] {
        switch self {
        case .rectangle(let minimum, let maximum): return [minimum, maximum]
        case .polygon(let points): return points
        }
    }

    /// Inside or on the boundary.
    func contains(_ point: PresenceFloorPlan.Point) -> Bool {
        switch self {
        case .rectangle(let minimum, let maximum):
            return point.x >= minimum.x && point.x <= maximum.x && point.y >= minimum.y && point.y <= maximum.y
        case .polygon(let points):
            return PresenceFloorPlan.Shape.polygonContains(points, point)
        }
    }

    /// Even-odd ray casting, with points on an edge counted inside.
    private static func polygonContains(_ points: [PresenceFloorPlan.Point], _ point: PresenceFloorPlan.Point) -> Bool {
        var inside = false
        var previous = points[points.count - 1]
        for current in points {
            if onSegment(previous, current, point) { return true }
            if (current.y > point.y) != (previous.y > point.y) {
                let crossingX = current.x + (point.y - current.y) * (previous.x - current.x) / (previous.y - current.y)
                if point.x < crossingX { inside.toggle() }
            }
            previous = current
        }
        return inside
    }

    private static func onSegment(_ a: PresenceFloorPlan.Point, _ b: PresenceFloorPlan.Point, _ p: PresenceFloorPlan.Point) -> Bool {
        let cross = (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x)
        guard abs(cross) <= 1e-9 * max(1, abs(b.x - a.x) + abs(b.y - a.y)) else { return false }
        return p.x >= min(a.x, b.x) - 1e-9 && p.x <= max(a.x, b.x) + 1e-9 && p.y >= min(a.y, b.y) - 1e-9 && p.y <= max(a.y, b.y) + 1e-9
    }
}
