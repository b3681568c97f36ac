import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A throw-away PostgreSQL cluster for the tests (Debian's PostgreSQL 15): `initdb` in a
/// temporary directory, the server on 127.0.0.1 at a free port with its unix socket in the same
/// directory, SCRAM-SHA-256 passwords over TCP (so the tests prove authentication), trust on the
/// socket for the tests' own setup through psql, and fsync on (the server's default).
///
/// initdb and postgres refuse to run as root: a root test process (CI) runs them as Debian's
/// `postgres` user through runuser, with the directory owned by that user. The cluster stops
/// and its directory goes when the object does, or at the latest when the test process exits.
/// Scripts/lib/postgres.sh is the shell twin.
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
    private let runAsPostgres: Bool

    public init() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binaries + "/postgres") else {
            throw PostgresFailure("\(Self.binaries)/postgres is missing: run Scripts/install-deps --test (Debian package postgresql)")
        }
        runAsPostgres = getuid() == 0
        Self.discardAbandoned(runAsPostgres: runAsPostgres)
        directory = NSTemporaryDirectory() + "locus-postgres-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        port = try TestBroker.freePort()
        Self.registerForExit(self)
        try initialize()
        try start()
        try psql("create role \(Self.user) login createdb password '\(Self.password)'")
    }

    deinit { discard() }

    /// Stops the server (immediately: nothing is kept) and removes the directory.
    public func discard() {
        _ = try? pgctl(["stop", "-m", "immediate"])
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

    public func start() throws {
        let result = try pgctl(["start", "-w", "-t", "30", "-l", directory + "/server.log"])
        guard result.status == 0 else { throw PostgresFailure("pg_ctl start: \(result.error) \(log)") }
    }

    public func stop() throws {
        let result = try pgctl(["stop", "-m", "fast", "-w"])
        guard result.status == 0 else { throw PostgresFailure("pg_ctl stop: \(result.error)") }
    }

    /// `pg_ctl restart -m fast`: every connection is ended, the server comes back on the same port.
    public func restart() throws {
        let result = try pgctl(["restart", "-m", "fast", "-w", "-t", "30", "-l", directory + "/server.log"])
        guard result.status == 0 else { throw PostgresFailure("pg_ctl restart: \(result.error) \(log)") }
    }

    /// What the server logged.
    public var log: String { (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? "" }

    // MARK: setting up

    private func initialize() throws {
        let passwordFile = directory + "/superuser-password"
        try Self.superuserPassword.write(toFile: passwordFile, atomically: true, encoding: .utf8)
        if runAsPostgres {
            let chown = try Self.run("/bin/chown", ["-R", "postgres:postgres", directory])
            guard chown.status == 0 else { throw PostgresFailure("chown postgres \(directory): \(chown.error)") }
        }
        // --no-sync: initdb's own final sync only; the server keeps fsync on.
        let result = try asServer(Self.binaries + "/initdb", ["-D", directory + "/data", "-U", Self.superuser, "--pwfile", passwordFile,
                                                              "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
                                                              "--locale=C", "--no-sync", "--no-instructions"])
        guard result.status == 0 else { throw PostgresFailure("initdb: \(result.output) \(result.error)") }
        let settings = ["listen_addresses = '127.0.0.1'", "port = \(port)", "unix_socket_directories = '\(directory)'",
                        "fsync = on", "password_encryption = 'scram-sha-256'", "max_connections = 40"]
        let configuration = directory + "/data/postgresql.conf"
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: configuration))
        handle.seekToEndOfFile()
        handle.write(Data(("\n" + settings.joined(separator: "\n") + "\n").utf8))
        try handle.close()
    }

    private func pgctl(_ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        try asServer(Self.binaries + "/pg_ctl", ["-D", directory + "/data"] + arguments)
    }

    /// The server's programs: as `postgres` when this process is root.
    private func asServer(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String, error: String) {
        if runAsPostgres { return try Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", executable] + arguments) }
        return try Self.run(executable, arguments)
    }

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
        guard addCloseFrom(&actions, 3) == 0 else { throw PostgresFailure("posix_spawn_file_actions_addclosefrom_np failed") }
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

    /// glibc's posix_spawn_file_actions_addclosefrom_np (2.34), which Swift's Glibc module does
    /// not import.
    private static let addCloseFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32 = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            fatalError("glibc 2.34 or later is needed (posix_spawn_file_actions_addclosefrom_np)")
        }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

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
