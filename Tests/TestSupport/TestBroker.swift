import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real MQTT broker for the tests: Debian's mosquitto, started by Scripts/lib/start-broker (the
/// scripts' way: ServerHelper) on 127.0.0.1 with the listeners asked for (plain, TLS, mutual
/// TLS), each on a free port; stopped when the object goes (or by `stop()`, for the
/// broker-restart tests; `start()` again on the same ports), and at the latest when the test
/// process is gone, however it ends (a broker kept in a suite's static is never deinitialized).
public final class TestBroker {
    public static let executable = "/usr/sbin/mosquitto"

    /// The listeners' ports, in the order given.
    public let ports: [UInt16]
    public let directory: String
    /// Configuration lines for the first start; later starts keep the directory's configuration.
    private var configuration: [String]
    private var helper: SpawnedProcess?
    /// The running broker's pid (start-broker's child).
    public private(set) var pid: pid_t = 0

    /// `listeners`: each listener's own configuration lines (e.g. `cafile`, `certfile`,
    /// `keyfile`, `require_certificate true`); none for a plain listener.
    /// `ports`: the listeners' ports when the test has chosen them (a broker that comes back
    /// where the agent expects it); free ones otherwise.
    public init(listeners: [[String]], persistence: Bool = false, ports chosen: [UInt16]? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw BrokerError("\(Self.executable) is missing: run Scripts/install-deps --test (Debian package mosquitto)")
        }
        directory = NSTemporaryDirectory() + "locus-broker-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        ports = try chosen ?? listeners.map { _ in try Self.freePort() }
        // After start-broker's common lines (no queue limit for subscribers: a fleet's collector
        // must see every message).
        var lines = ["persistence \(persistence)", "log_type notice"]
        if persistence { lines += ["persistence_location \(directory)/"] }
        for (port, options) in zip(ports, listeners) {
            lines.append("listener \(port) 127.0.0.1")
            lines += options
        }
        configuration = lines
        try start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts the broker and waits until every listener accepts connections (at most 10 s).
    public func start() throws {
        do {
            let started = try ServerHelper.start("start-broker", [directory] + configuration, directory: directory,
                                                 ready: directory + "/broker.ready", timeoutS: 20)
            configuration = []
            helper = started.helper
            pid = pid_t(started.fields[0]) ?? 0
        } catch let error as SpawnedProcess.SpawnError {
            throw BrokerError("mosquitto did not start on 127.0.0.1:\(ports): \(error) \(log)")
        }
    }

    /// Stops the broker (SIGKILL: no goodbye to anyone, as a crash or a power cut).
    public func stop() { end(SIGKILL) }

    /// Stops the broker as an operator's restart does (SIGTERM): with persistence it saves its
    /// sessions and queued messages first.
    public func terminate() { end(SIGTERM) }

    /// Signals the broker and waits for start-broker, which reaps it and exits.
    private func end(_ signal: Int32) {
        guard let helper, helper.isRunning else { self.helper = nil; return }
        kill(pid, signal)
        helper.waitForExit()
        self.helper = nil
    }

    /// What the broker logged.
    public var log: String { (try? String(contentsOfFile: directory + "/broker.log", encoding: .utf8)) ?? "" }

    public struct BrokerError: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// A port nothing listens on now (bound to 0 and released).
    public static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw BrokerError("no free port on 127.0.0.1") }
        return UInt16(bigEndian: address.sin_port)
    }

    public static func accepts(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
