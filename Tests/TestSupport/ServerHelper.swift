import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The repository's one way to start a test server, shared with its scripts: Scripts/lib/start-broker
/// and Scripts/lib/start-postgres (Scripts/lib/broker.sh and postgres.sh say what they configure).
/// The helper is this process's child and stays beside its server for the server's life; when
/// this process is gone, however it ends (kill -9, or a `swift test` stopped while its test
/// process runs on and then ends), the helper stops the server within a second.
public enum ServerHelper {
    /// The checkout these sources are in (tests and locus-bench run from it).
    public static let repositoryRoot: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }()

    public static func path(_ name: String) -> String { repositoryRoot + "/Scripts/lib/" + name }

    /// Runs the helper `name` with `arguments` and waits (at most `timeoutS` seconds) until it
    /// has written `ready`, a line of fields: the running helper and the fields. The helper's
    /// standard error is kept in `directory`/helper.err and quoted when it fails.
    public static func start(_ name: String, _ arguments: [String], directory: String, ready: String,
                             timeoutS: Double) throws -> (helper: SpawnedProcess, fields: [String]) {
        unlink(ready)
        let errors = directory + "/helper.err"
        let helper = try SpawnedProcess(path(name), arguments, errorPath: errors)
        let deadline = Date().addingTimeInterval(timeoutS)
        while true {
            if let text = try? String(contentsOfFile: ready, encoding: .utf8), text.hasSuffix("\n") {
                return (helper, text.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) })
            }
            guard helper.isRunning else {
                throw SpawnedProcess.SpawnError("\(name) failed: \(tail(errors))")
            }
            guard Date() < deadline else {
                helper.send(SIGTERM)
                helper.waitForExit()
                throw SpawnedProcess.SpawnError("\(name) was not ready within \(Int(timeoutS)) s: \(tail(errors))")
            }
            usleep(20_000)
        }
    }

    /// The last lines of a file, for a failure's message.
    public static func tail(_ path: String, lines: Int = 5) -> String {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(lines).joined(separator: " | ")
    }
}
