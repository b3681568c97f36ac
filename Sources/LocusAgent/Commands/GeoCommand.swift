import LocusCore
import LocusDevices

/// `locus geo distance LAT1,LON1 LAT2,LON2`: the geodesic distance on WGS84 in metres, 4
/// decimals (the number `GeodSolve -i` prints as s12, to within a few nanometres).
enum GeoCommand {
    static let usage = "usage: locus geo distance LAT1,LON1 LAT2,LON2 | index | reverse | forward | info (locus help geo)"

    static func run(_ arguments: [String]) -> Int32 {
        guard let subcommand = arguments.first else {
            return CommandLineInterface.usageError("geo needs a subcommand (distance, index, reverse, forward, info)", hint: usage)
        }
        switch subcommand {
        case "distance": return distance(Array(arguments.dropFirst()))
        case "index", "reverse", "forward", "info", "fold": return GeocodingCommand.run(subcommand, Array(arguments.dropFirst()))
        default: return CommandLineInterface.usageError("geo: unknown subcommand '\(subcommand)'", hint: usage)
        }
    }

    static func distance(_ arguments: [String]) -> Int32 {
        guard arguments.count == 2 else {
            return CommandLineInterface.usageError("geo distance needs two points, LAT,LON each", hint: usage)
        }
        var points: [(latitude: Double, longitude: Double)] = []
        for argument in arguments {
            switch point(argument) {
            case .success(let parsed): points.append(parsed)
            case .failure(let problem): return CommandLineInterface.usageError("geo distance: \(problem.message)", hint: usage)
            }
        }
        let metres = Geodesy.distanceM(points[0].latitude, points[0].longitude, points[1].latitude, points[1].longitude)
        var line = JSONWriter(capacity: 64)
        line.number(metres, decimals: 4)
        line.newline()
        Console.out(line.bytes)
        return 0
    }

    struct Problem: Error {
        let message: String
    }

    /// "LAT,LON" in decimal degrees: latitude within ±90, longitude any finite value.
    static func point(_ text: String) -> Result<(latitude: Double, longitude: Double), Problem> {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2, let latitude = Double(String(parts[0])), let longitude = Double(String(parts[1])),
              latitude.isFinite, longitude.isFinite else {
            return .failure(Problem(message: "'\(text)' is not LAT,LON in decimal degrees"))
        }
        guard abs(latitude) <= 90 else {
            return .failure(Problem(message: "latitude \(parts[0]) in '\(text)' is outside -90...90"))
        }
        return .success((latitude, longitude))
    }
}
