import LocusCore
import LocusDevices

/// `locus check-config FILE`: a site file (with its board file) or a board file alone.
enum CheckConfigCommand {
    static func run(_ arguments: [String]) -> Int32 {
        guard arguments.count == 1, let path = arguments.first, !path.hasPrefix("-") || path == "-" else {
            if let option = arguments.first(where: { $0.hasPrefix("-") }) {
                return CommandLineInterface.usageError("check-config: unknown option '\(option)'", hint: "usage: locus check-config FILE")
            }
            return CommandLineInterface.usageError("check-config needs exactly one FILE", hint: "usage: locus check-config FILE")
        }
        let source: [UInt8]
        do {
            source = try Files.read(path)
        } catch {
            return CommandLineInterface.failure("check-config", "cannot read \(path): \(error)")
        }
        switch ConfigFiles.kind(of: source) {
        case .board:
            return checkBoard(source, path: path)
        case .site, .unknown:
            return checkSite(source, path: path)
        }
    }

    private static func checkBoard(_ source: [UInt8], path: String) -> Int32 {
        do {
            let board = try BoardConfig.parse(source, file: path)
            Console.out("ok: \(path): \(ConfigFiles.summary(of: board))\n")
            return 0
        } catch {
            return report(error.diagnostics)
        }
    }

    private static func checkSite(_ source: [UInt8], path: String) -> Int32 {
        switch LoadedConfig.check(source, path: path) {
        case .failure:
            return 1
        case .success(let loaded):
            Console.out("ok: \(path): \(ConfigFiles.summary(of: loaded.site)); board '\(loaded.board.name)' (\(loaded.boardPath))\n")
            return 0
        }
    }

    private static func report(_ diagnostics: [ConfigDiagnostic]) -> Int32 {
        for diagnostic in diagnostics { Console.error("\(diagnostic)\n") }
        return 1
    }
}
