import Foundation

/// The package's executables as the tests find them: built next to the test bundle (`swift build
/// --build-tests` builds them all), else in `.build/debug` of the repository.
public enum BuiltBinary {
    public struct Missing: Error, CustomStringConvertible {
        public let name: String
        public var description: String { "\(name) was not built next to the tests (run `swift build --build-tests` first)" }
    }

    public static func path(_ name: String, repositoryRoot: String) throws -> String {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory.deleteLastPathComponent()
        }
        let fallback = repositoryRoot + "/.build/debug/" + name
        guard FileManager.default.isExecutableFile(atPath: fallback) else { throw Missing(name: name) }
        return fallback
    }
}
