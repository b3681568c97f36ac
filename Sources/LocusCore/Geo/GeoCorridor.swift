/// A corridor: the band along a path of geodesic segments, `widthM` wide (half of it each side,
/// round at the ends and the bends): the route a truck must keep to. Inside when the nearest
/// point of the path is at most half the width away.
public struct GeoCorridor: Equatable, Sendable {
    public let latitudes: [Double]
    public let longitudes: [Double]
    public let widthM: Double

    /// Refused (`CorridorError`): fewer than two points, a point that is not a position, a
    /// repeated point, a segment beyond a quarter meridian, a width not positive and finite.
    public init(latitudes: [Double], longitudes: [Double], widthM: Double) throws(CorridorError) {
        precondition(latitudes.count == longitudes.count, "a latitude and a longitude per point")
        guard widthM > 0 && widthM.isFinite else { throw .badWidth(widthM) }
        guard latitudes.count >= 2 else { throw .tooFewPoints(latitudes.count) }
        guard latitudes.count <= GeoPolygon.maximumVertices else { throw .tooManyPoints(latitudes.count) }
        for index in latitudes.indices where !GeoPoint(latitude: latitudes[index], longitude: longitudes[index]).isValid {
            throw .invalidPoint(index: index)
        }
        for index in 1..<latitudes.count {
            let lengthM = Geodesy.distanceM(latitudes[index - 1], longitudes[index - 1], latitudes[index], longitudes[index])
            guard lengthM > 0 else { throw .repeatedPoint(index: index) }
            guard lengthM <= GeoPolygon.longestEdgeM else { throw .segmentTooLong(index: index - 1, lengthM: lengthM) }
        }
        self.latitudes = latitudes
        self.longitudes = longitudes
        self.widthM = widthM
    }

    /// A path checked before (the shape store's copy).
    init(checked latitudes: [Double], _ longitudes: [Double], widthM: Double) {
        self.latitudes = latitudes
        self.longitudes = longitudes
        self.widthM = widthM
    }

    /// Inside or out, the distance to the band's edge (metres, either way), and the segment
    /// nearest.
    public func locate(latitude: Double, longitude: Double) -> PolygonLocation {
        GeoCorridor.locate(latitude, longitude, count: latitudes.count, halfWidthM: widthM / 2,
                           vertex: { (latitudes[$0], longitudes[$0]) })
    }

    /// `locate` over any store of a path's points (the monitor's shape store keeps its own).
    @inline(__always)
    static func locate(_ latitude: Double, _ longitude: Double, count: Int, halfWidthM: Double,
                       vertex: (Int) -> (latitude: Double, longitude: Double)) -> PolygonLocation {
        var nearestM = Double.infinity, nearestSegment = 0
        for segment in 0..<(count - 1) {
            let (a, b) = (vertex(segment), vertex(segment + 1))
            let proximity = Geodesy.edgeProximity(latitude, longitude, a.latitude, a.longitude, b.latitude, b.longitude)
            if proximity.distanceM < nearestM { (nearestM, nearestSegment) = (proximity.distanceM, segment) }
        }
        return PolygonLocation(isInside: nearestM <= halfWidthM, boundaryDistanceM: abs(nearestM - halfWidthM), nearestEdge: nearestSegment)
    }
}

/// Why a path and width are not a corridor.
public enum CorridorError: Error, Equatable, Sendable {
    case tooFewPoints(Int)
    /// More than `GeoPolygon.maximumVertices`.
    case tooManyPoints(Int)
    case invalidPoint(index: Int)
    case repeatedPoint(index: Int)
    case segmentTooLong(index: Int, lengthM: Double)
    /// The width is not a positive, finite number of metres.
    case badWidth(Double)
}
