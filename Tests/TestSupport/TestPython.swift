import Foundation

/// The tests' Python: the venv `Scripts/install-deps --test` sets up in `.build/pyvenv`, with the
/// oracles' packages (pyubx2, bluetooth-data-tools, dnspython, geographiclib, numpy).
public enum TestPython {
    /// The venv's python under `repositoryRoot`; `need` says what the caller needs it for.
    public static func path(repositoryRoot: String, need: String) throws -> String {
        let path = repositoryRoot + "/.build/pyvenv/bin/python"
        guard FileManager.default.isExecutableFile(atPath: path) else { throw Missing(path: path, need: need) }
        return path
    }

    public struct Missing: Error, CustomStringConvertible {
        public var path: String
        public var need: String
        public var description: String { "\(path) is missing: \(need) (run Scripts/install-deps --test)" }
    }
}
