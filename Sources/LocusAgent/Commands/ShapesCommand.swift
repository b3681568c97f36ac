import LocusCore
import LocusDevices

/// `locus shapes import FILE`: polygons, lines and circles drawn in a GIS (GeoJSON or WKT) as
/// site-file conditions on standard output; what cannot be imported on standard error.
enum ShapesCommand {
    static let usage = "usage: locus shapes import FILE|- [--monitor NAME] [--width METRES] [--lat-lon]"

    static func run(_ arguments: [String]) -> Int32 {
        guard arguments.first == "import" else {
            return CommandLineInterface.usageError("shapes needs a subcommand: import", hint: usage)
        }
        var path: String? = nil
        var monitor = "imported"
        var options = ShapeImport.Options()
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--lat-lon":
                options.latitudeFirst = true
            case "--monitor", "--width":
                guard index + 1 < arguments.count else { return CommandLineInterface.usageError("shapes import: \(argument) needs a value", hint: usage) }
                let value = arguments[index + 1]
                index += 1
                if argument == "--monitor" {
                    guard Identifier.isValid(value) else {
                        return CommandLineInterface.usageError("shapes import: --monitor takes a monitor name (letters, digits, '-', '_'), not '\(value)'", hint: usage)
                    }
                    monitor = value
                } else {
                    var metres = Double(value) ?? .nan
                    if case .success(let parsed) = Quantity.distanceM(value) { metres = parsed }
                    guard metres > 0, metres <= 1_000_000 else {
                        return CommandLineInterface.usageError("shapes import: --width takes metres greater than 0 (\"30\" or \"30 m\"), not '\(value)'", hint: usage)
                    }
                    options.widthM = metres
                }
            default:
                guard path == nil, !argument.hasPrefix("--") || argument == "-" else {
                    return CommandLineInterface.usageError("shapes import: unexpected argument '\(argument)'", hint: usage)
                }
                path = argument
            }
            index += 1
        }
        guard let path else { return CommandLineInterface.usageError("shapes import needs a file (GeoJSON or WKT; '-' for standard input)", hint: usage) }
        let bytes: [UInt8]
        do {
            if path == "-" {
                var input: [UInt8] = []
                try Files.stream("-") { chunk in input.append(contentsOf: chunk) }
                bytes = input
            } else {
                bytes = try Files.read(path, limit: 64 << 20)
            }
        } catch {
            return CommandLineInterface.failure("shapes import", "cannot read \(path): \(error)")
        }
        let result = ShapeImport.read(bytes, options: options)
        Console.out(ShapeImport.toml(result.shapes, monitor: monitor))
        for problem in result.problems { Console.error("locus: shapes import: \(path): \(problem)\n") }
        Console.error("locus: shapes import: \(result.shapes.count) condition\(result.shapes.count == 1 ? "" : "s"), \(result.problems.count) not imported\n")
        return result.shapes.isEmpty || !result.problems.isEmpty ? 1 : 0
    }
}
