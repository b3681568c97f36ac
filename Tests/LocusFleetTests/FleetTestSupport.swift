import Foundation
import LocusCore
import LocusFleet
import Testing
import TestSupport

/// The fleet suites' shared pieces: the repository, the host binaries (`locus` makes the logs,
/// `locus-fleet` is the program under test), one PostgreSQL cluster for the suites that do not
/// restart it, and the logs, made once per test process.
enum Fleet {
    static let repositoryRoot: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }()

    /// A binary built next to the test bundle (`swift build --build-tests` builds both).
    static func binary(_ name: String) throws -> String { try BuiltBinary.path(name, repositoryRoot: repositoryRoot) }

    struct Run {
        var status: Int32
        var output: String
        var error: String
    }

    /// Runs a program to its end; `environment` adds to this process's.
    static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = FileHandle.nullDevice
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        try process.run()
        // Both pipes drained at once: a large output must not block the child on a full pipe.
        nonisolated(unsafe) var errorData = Data()
        let reader = Thread { errorData = error.fileHandleForReading.readDataToEndOfFile() }
        reader.start()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !reader.isFinished { usleep(1_000) }
        return Run(status: process.terminationStatus, output: String(decoding: outputData, as: UTF8.self),
                   error: String(decoding: errorData, as: UTF8.self))
    }

    static func fleet(_ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        try run(try binary("locus-fleet"), arguments, environment: environment)
    }

    static func locus(_ arguments: [String]) throws -> Run {
        try run(try binary("locus"), arguments)
    }

    /// The test process's own temporary directory, removed when it exits.
    static let temporaryRoot: String = {
        atexit { try? FileManager.default.removeItem(atPath: NSTemporaryDirectory() + "locus-fleet-tests-\(getpid())") }
        return NSTemporaryDirectory() + "locus-fleet-tests-\(getpid())"
    }()

    /// A new empty directory under the test process's own temporary directory.
    static func temporaryDirectory(_ name: String) throws -> String {
        let path = temporaryRoot + "/\(name)-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// The cluster of the suites that leave the server running (each test has its own database).
    static let cluster = Result { try TestPostgres() }

    /// A migrated database of its own on the shared cluster: its URL (TCP, SCRAM).
    static func migratedDatabase(_ name: String) throws -> String {
        let cluster = try Fleet.cluster.get()
        let url = cluster.url(database: try cluster.createDatabase(name))
        let migrate = try fleet(["migrate", "--database", url])
        guard migrate.status == 0 else { throw TestPostgres.PostgresFailure("migrate: \(migrate.error)") }
        return url
    }

    static func connect(_ url: String) throws -> PostgresConnection { try PostgresConnection.connect(url) }

    /// The lines of `locus log export` of a state directory, each parsed.
    static func exportLines(_ text: String) throws -> [JSONValue] {
        try text.split(separator: "\n").map { try JSONParser.parse(Array($0.utf8)) }
    }
}
