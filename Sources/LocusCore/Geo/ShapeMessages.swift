/// What a refused polygon or corridor tells its author: the vertex (0-based element of the ring
/// or path as written, for the file:line:col) and a sentence naming vertices from 1, as a GIS
/// numbers them.
public enum ShapeMessages {
    public static func polygon(_ error: ShapeError) -> (element: Int?, message: String) {
        switch error {
        case .tooFewVertices(let count):
            return (nil, "a polygon needs at least 3 distinct vertices, not \(count)")
        case .tooManyVertices(let count):
            return (nil, "\(count) vertices; a polygon has at most \(GeoPolygon.maximumVertices) (simplify it in the GIS)")
        case .invalidVertex(let index):
            return (index, "vertex \(index + 1) is not a position")
        case .repeatedVertex(let index):
            return (index, "vertex \(index + 1) repeats the one before it")
        case .doublesBack(let index):
            return (index, "the ring turns straight back at vertex \(index + 1) (a spike of no width)")
        case .edgeTooLong(let index, let lengthM):
            return (index, "the edge from vertex \(index + 1) is \(Quantity.formatDistance(lengthM)) long; edges are at most 10000 km (add vertices between)")
        case .selfIntersecting(let edge, let other):
            return (edge, "the edge from vertex \(edge + 1) crosses the edge from vertex \(other + 1): the ring must not cross or touch itself")
        case .noInterior:
            return (nil, "the ring encloses no area (it turns as much left as right)")
        }
    }

    public static func corridor(_ error: CorridorError) -> (element: Int?, message: String) {
        switch error {
        case .tooFewPoints(let count):
            return (nil, "a corridor's path needs at least 2 points, not \(count)")
        case .tooManyPoints(let count):
            return (nil, "\(count) points; a path has at most \(GeoPolygon.maximumVertices)")
        case .invalidPoint(let index):
            return (index, "point \(index + 1) is not a position")
        case .repeatedPoint(let index):
            return (index, "point \(index + 1) repeats the one before it")
        case .segmentTooLong(let index, let lengthM):
            return (index, "the segment from point \(index + 1) is \(Quantity.formatDistance(lengthM)) long; segments are at most 10000 km")
        case .badWidth:
            return (nil, "the width must be greater than 0 metres")
        }
    }
}
