import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A throw-away PostgreSQL cluster for the tests (Debian's PostgreSQL 15), started by
/// Scripts/lib/start-postgres (the scripts' way: ServerHelper; Scripts/lib/postgres.sh configures
/// it): `initdb` in a temporary directory, the server on 127.0.0.1 at a free port with its unix
/// socket in the same directory, SCRAM-SHA-256 passwords over TCP (so the tests prove
/// authentication), trust on the socket for the tests' own setup through psql, and fsync on (the
/// server's default). Stops, restarts and resumes go through postgres.sh's functions.
///
/// initdb and postgres refuse to run as root: as root they run as Debian's `postgres` user, with
/// the directory owned by that user. The cluster stops and its directory goes when the object
/// does, or at the latest when the test process exits; when the process is killed, start-postgres
/// stops the cluster and the next test process removes the directory.
public final class TestPostgres: @unchecked Sendable {
    public static let binaries = "/usr/lib/postgresql/15/bin"
    /// The superuser initdb makes (trust on the socket only; TCP needs its password).
    public static let superuser = "fleet_admin"
    public static let superuserPassword = "admin-secret"
    /// The role the tests connect as over TCP.
    public static let user = "fleet"
    public static let password = "fleet-secret"

    public let directory: String
    public let port: UInt16
    private let helper: SpawnedProcess

    /// A new cluster; with `primary`, a synchronous standby of that running cluster instead
    /// (pg_basebackup, streaming as `standby`; the primary waits for it at every commit).
    public init(standbyOf primary: TestPostgres? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binaries + "/postgres") else {
            throw PostgresFailure("\(Self.binaries)/postgres is missing: run Scripts/install-deps --test (Debian package postgresql)")
        }
        Self.discardAbandoned(runAsPostgres: getuid() == 0)
        directory = NSTemporaryDirectory() + "locus-postgres-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        do {
            let standby = primary.map { ["--standby-of", $0.directory] } ?? []
            let started = try ServerHelper.start("start-postgres", standby + [directory], directory: directory,
                                                 ready: directory + "/postgres.ready", timeoutS: 120)
            helper = started.helper
            port = UInt16(started.fields[0]) ?? 0
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw PostgresFailure("PostgreSQL did not start: \(error)")
        }
        Self.registerForExit(self)
    }

    deinit { discard() }

    /// Stops the server (immediately: nothing is kept) and removes the directory.
    public func discard() {
        helper.send(SIGTERM)
        helper.waitForExit()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// `postgres://USER:PASSWORD@127.0.0.1:PORT/DATABASE`: TCP with SCRAM.
    public func url(database: String, user: String = TestPostgres.user, password: String = TestPostgres.password) -> String {
        "postgres://\(user):\(password)@127.0.0.1:\(port)/\(database)"
    }

    /// A new, empty database owned by the test role; its name is `prefix` and a random suffix.
    public func createDatabase(_ prefix: String) throws -> String {
        let name = prefix.lowercased().filter { $0.isLetter || $0.isNumber || $0 == "_" } + "_\(UInt32.random(in: 0...UInt32.max))"
        try psql("create database \(name) owner \(Self.user)")
        return name
    }

    /// Runs SQL as the superuser through the socket; returns psql's unaligned, tuples-only output.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") throws -> String {
        let result = try Self.run(Self.binaries + "/psql", ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", directory, "-p", String(port),
                                                           "-U", Self.superuser, "-d", database, "-c", sql])
        guard result.status == 0 else { throw PostgresFailure("psql: \(sql): \(result.error)") }
        return result.output
    }

    /// Starts the stopped server again, on its port.
    public func start() throws { try postgresFunction("postgres_resume") }

    public func stop() throws { try postgresFunction("postgres_stop fast") }

    /// `pg_ctl stop -m immediate`: as a crash or a power cut (nothing flushed at the end).
    public func crash() throws { try postgresFunction("postgres_stop immediate") }

    /// A standby becomes a primary that takes writes (`pg_ctl promote`).
    public func promote() throws { try postgresFunction("postgres_promote") }

    /// `pg_ctl restart -m fast`: every connection is ended, the server comes back on the same port.
    public func restart() throws { try postgresFunction("postgres_restart") }

    /// Runs one of Scripts/lib/postgres.sh's functions on this cluster.
    private func postgresFunction(_ call: String) throws {
        let script = ". \"$1/postgres.sh\" && postgres_dir=\"$2\" && postgres_port=\"$3\" && " + call
        let result = try Self.run("/bin/bash", ["-c", script, "postgres", ServerHelper.path(""), directory, String(port)])
        guard result.status == 0 else { throw PostgresFailure("\(call): \(result.error) \(log)") }
    }

    /// What the server logged.
    public var log: String { (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? "" }

    /// Runs a program to its end, its output in files. Not Foundation's Process: it hands the
    /// child a descriptor whose closing tells it the child has ended, and pg_ctl's server (a
    /// grandchild that runs on) would inherit it and keep waitUntilExit waiting. posix_spawn
    /// here closes every descriptor above 2 in the child, so the server inherits nothing.
    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        let base = NSTemporaryDirectory() + "locus-postgres-run-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer {
            try? FileManager.default.removeItem(atPath: base + ".out")
            try? FileManager.default.removeItem(atPath: base + ".err")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, base + ".out", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, base + ".err", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard SpawnedProcess.addCloseFrom(&actions, 3) == 0 else { throw PostgresFailure("posix_spawn_file_actions_addclosefrom_np failed") }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw PostgresFailure("cannot run \(executable): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw PostgresFailure("waitpid \(executable): \(String(cString: strerror(errno)))") }
        }
        let exitStatus = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        let output = (try? String(contentsOfFile: base + ".out", encoding: .utf8)) ?? ""
        let error = (try? String(contentsOfFile: base + ".err", encoding: .utf8)) ?? ""
        return (exitStatus, output.trimmingCharacters(in: .whitespacesAndNewlines), error.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    // MARK: at exit

    /// Clusters of test processes that are gone (a crash skips the exit handler): stopped and removed.
    private static func discardAbandoned(runAsPostgres: Bool) {
        let temporary = NSTemporaryDirectory()
        for name in (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? [] where name.hasPrefix("locus-postgres-") {
            let parts = name.split(separator: "-")
            guard parts.count == 4, let owner = Int32(parts[2]), owner != getpid(), kill(owner, 0) != 0, errno == ESRCH else { continue }
            let data = temporary + name + "/data"
            let stop = [binaries + "/pg_ctl", "-D", data, "stop", "-m", "immediate"]
            _ = try? run(runAsPostgres ? "/usr/sbin/runuser" : stop[0], runAsPostgres ? ["-u", "postgres", "--"] + stop : Array(stop.dropFirst()))
            try? FileManager.default.removeItem(atPath: temporary + name)
        }
    }

    private nonisolated(unsafe) static var living: [Weak] = []
    private static let lock = NSLock()
    private struct Weak { weak var cluster: TestPostgres? }

    /// Clusters kept in a suite's static are never deinitialized: stop them when the process exits.
    private static func registerForExit(_ cluster: TestPostgres) {
        lock.lock()
        defer { lock.unlock() }
        if living.isEmpty { atexit { TestPostgres.discardAll() } }
        living.append(Weak(cluster: cluster))
    }

    private static func discardAll() {
        lock.lock()
        let clusters = living.compactMap(\.cluster)
        living = []
        lock.unlock()
        clusters.forEach { $0.discard() }
    }

    public struct PostgresFailure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }
}
