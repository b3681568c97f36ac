import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real MQTT broker for the tests: Debian's mosquitto, started on 127.0.0.1 with the listeners
/// asked for (plain, TLS, mutual TLS), each on a free port; stopped when the object goes (or by
/// `stop()`, for the broker-restart tests; `start()` again on the same ports).
public final class TestBroker {
    public static let executable = "/usr/sbin/mosquitto"

    /// The listeners' ports, in the order given.
    public let ports: [UInt16]
    public let directory: String
    private let configuration: String
    private var process: SpawnedProcess?

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
        // max_queued_messages 0: mosquitto queues at most 1,000 QoS 1 messages for a subscriber
        // by default and drops the rest; a fleet's collector must see every one.
        var lines = ["per_listener_settings false", "allow_anonymous true", "persistence \(persistence)", "max_queued_messages 0",
                     "log_dest file \(directory)/broker.log", "log_type error", "log_type warning", "log_type notice"]
        if persistence { lines += ["persistence_location \(directory)/"] }
        for (port, options) in zip(ports, listeners) {
            lines.append("listener \(port) 127.0.0.1")
            lines += options
        }
        configuration = directory + "/mosquitto.conf"
        try (lines.joined(separator: "\n") + "\n").write(toFile: configuration, atomically: true, encoding: .utf8)
        // Started as root, mosquitto becomes its own user: it must be able to enter the directory.
        chmod(directory, 0o777)
        try start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts the broker and waits until every listener accepts connections (at most 10 s).
    public func start() throws {
        let process = try SpawnedProcess(Self.executable, ["-c", configuration])
        self.process = process
        let deadline = Date().addingTimeInterval(10)
        for port in ports {
            while !Self.accepts(port) {
                guard process.isRunning, Date() < deadline else {
                    throw BrokerError("mosquitto did not listen on 127.0.0.1:\(port): \(log)")
                }
                usleep(20_000)
            }
        }
    }

    /// Stops the broker (SIGKILL: no goodbye to anyone, as a crash or a power cut).
    public func stop() {
        guard let process, process.isRunning else { return }
        process.send(SIGKILL)
        process.waitForExit()
        self.process = nil
    }

    /// Stops the broker as an operator's restart does (SIGTERM): with persistence it saves its
    /// sessions and queued messages first.
    public func terminate() {
        guard let process, process.isRunning else { return }
        process.send(SIGTERM)
        process.waitForExit()
        self.process = nil
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
