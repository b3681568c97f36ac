import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A test server does not outlive the process it was started for. The owner here is a shell
/// that runs the helper (Scripts/lib/start-broker, start-postgres) as its child, as a test
/// process or a script does; it is killed with SIGKILL, so nothing of its own cleans up, and the
/// server must be gone within five seconds (the helper looks twice a second).
@Suite struct ServerLifetimeTests {
    @Test func brokerEndsWithItsOwner() throws {
        let directory = try Self.directory("broker")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let owner = try SpawnedProcess("/bin/bash", ["-c", "\"$0\" \"$1\" & wait", ServerHelper.path("start-broker"), directory])
        let fields = try Self.ready(directory + "/broker.ready", owner: owner)
        let broker = try #require(pid_t(fields[0]))
        let port = try #require(UInt16(fields[1]))
        #expect(Self.running(broker))
        #expect(TestBroker.accepts(port))

        owner.send(SIGKILL)
        owner.waitForExit()
        #expect(Self.gone(broker, withinS: 5), "mosquitto \(broker) outlived its owner")
        #expect(!TestBroker.accepts(port))
    }

    @Test func postgresEndsWithItsOwner() throws {
        let directory = try Self.directory("postgres")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let owner = try SpawnedProcess("/bin/bash", ["-c", "\"$0\" \"$1\" & wait", ServerHelper.path("start-postgres"), directory])
        let fields = try Self.ready(directory + "/postgres.ready", owner: owner, timeoutS: 120)
        let port = try #require(UInt16(fields[0]))
        // The postmaster's pid is the first line of its pid file.
        let pidFile = try String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8)
        let postmaster = try #require(pid_t(pidFile.split(separator: "\n").first ?? ""))
        #expect(Self.running(postmaster))
        #expect(TestBroker.accepts(port))

        owner.send(SIGKILL)
        owner.waitForExit()
        #expect(Self.gone(postmaster, withinS: 5), "the postmaster \(postmaster) outlived its owner")
        #expect(!TestBroker.accepts(port))
    }

    static func directory(_ name: String) throws -> String {
        let directory = NSTemporaryDirectory() + "locus-lifetime-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // As root, PostgreSQL runs as `postgres`, which must reach its directory.
        chmod(directory, 0o755)
        return directory
    }

    /// The helper's ready line, once written.
    static func ready(_ path: String, owner: SpawnedProcess, timeoutS: Double = 20) throws -> [String] {
        let deadline = Date().addingTimeInterval(timeoutS)
        while Date() < deadline, owner.isRunning {
            if let text = try? String(contentsOfFile: path, encoding: .utf8), text.hasSuffix("\n") {
                return text.split(separator: " ").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            }
            usleep(20_000)
        }
        throw SpawnedProcess.SpawnError("no \(path) (owner running: \(owner.isRunning))")
    }

    /// Running: in /proc and not a zombie (an orphan's zombie may wait long for its reaper).
    static func running(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        let state = stat[stat.index(after: close)...].split(separator: " ").first ?? "Z"
        return state != "Z" && state != "X"
    }

    static func gone(_ pid: pid_t, withinS seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if !running(pid) { return true }
            usleep(50_000)
        }
        return !running(pid)
    }
}
