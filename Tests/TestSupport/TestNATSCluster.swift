import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The fleet's clustered broker for the tests: three real NATS 2.9 nodes (Debian's nats-server)
/// on 127.0.0.1, each started by Scripts/lib/start-nats from the worked example
/// Scripts/nats/node.conf, with MQTT on clustered JetStream (replicas 3). A node can be killed
/// (SIGKILL, as a crash), started again on its store and ports, stalled (SIGSTOP) and resumed.
/// Every node is killed when the object goes, and at the latest when the test process is gone.
public final class TestNATSCluster {
    public struct Node {
        public let name: String
        public let directory: String
        /// Clients (the ingest), routes (the other nodes), MQTT (the gateways).
        public let clientPort: UInt16
        public let routePort: UInt16
        public let mqttPort: UInt16
    }

    public private(set) var nodes: [Node]
    public let directory: String
    private var helpers: [SpawnedProcess?]
    private var pids: [pid_t]

    public init(size: Int = 3) throws {
        guard let _ = Self.executable else {
            throw TestBroker.BrokerError("nats-server is missing: run Scripts/install-deps --test (Debian package nats-server)")
        }
        directory = NSTemporaryDirectory() + "locus-nats-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        nodes = []
        helpers = Array(repeating: nil, count: size)
        pids = Array(repeating: 0, count: size)
        // Ports are picked free and then bound by nats-server: another process may take one in
        // between (an outgoing connection's ephemeral port). Then the cluster starts again on
        // new ports, at most three times.
        for attempt in 1...3 {
            try? FileManager.default.removeItem(atPath: directory)
            var made: [Node] = []
            for index in 0..<size {
                let node = directory + "/n\(index + 1)"
                try FileManager.default.createDirectory(atPath: node, withIntermediateDirectories: true)
                made.append(Node(name: "n\(index + 1)", directory: node, clientPort: try TestBroker.freePort(),
                                 routePort: try TestBroker.freePort(), mqttPort: try TestBroker.freePort()))
            }
            nodes = made
            do {
                for index in 0..<size { try start(index) }
                break
            } catch let error as TestBroker.BrokerError where attempt < 3 && "\(error)".contains("address already in use") {
                for index in 0..<size { kill(index) }
            }
        }
        try waitUntilServing()
    }

    deinit {
        for index in nodes.indices { kill(index) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    static var executable: String? {
        ["/usr/bin/nats-server", "/usr/sbin/nats-server"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The gateways' `[uplink] broker` array: every node's MQTT address.
    public var mqttBrokers: [String] { nodes.map { "mqtt://127.0.0.1:\($0.mqttPort)" } }
    /// The ingest's `--nats`: every node's client address.
    public var natsNodes: String { nodes.map { "127.0.0.1:\($0.clientPort)" }.joined(separator: ",") }

    /// Starts node `index` (again: on its store, configuration and ports).
    public func start(_ index: Int) throws {
        let node = nodes[index]
        let peers = nodes.enumerated().filter { $0.offset != index }.map { String($0.element.routePort) }
        do {
            let started = try ServerHelper.start("start-nats", [node.directory, node.name, String(node.clientPort), String(node.routePort),
                                                                String(node.mqttPort)] + peers,
                                                 directory: node.directory, ready: node.directory + "/nats.ready", timeoutS: 30)
            helpers[index] = started.helper
            pids[index] = pid_t(started.fields[0]) ?? 0
        } catch let error as SpawnedProcess.SpawnError {
            throw TestBroker.BrokerError("NATS node \(node.name) did not start: \(error) \(log(index))")
        }
    }

    /// SIGKILL: the node is gone at once, as in a crash or a power cut.
    public func kill(_ index: Int) {
        guard let helper = helpers[index], helper.isRunning else { helpers[index] = nil; return }
        Glibc.kill(pids[index], SIGCONT)
        Glibc.kill(pids[index], SIGKILL)
        helper.waitForExit()
        helpers[index] = nil
    }

    /// SIGSTOP: the node holds its connections and answers nothing.
    public func stall(_ index: Int) { Glibc.kill(pids[index], SIGSTOP) }
    public func resume(_ index: Int) { Glibc.kill(pids[index], SIGCONT) }

    public func log(_ index: Int) -> String {
        ServerHelper.tail(nodes[index].directory + "/nats.log", lines: 8)
    }

    /// Waits (at most `seconds`) until a QoS 1 MQTT message is taken through every running
    /// node: the cluster has its JetStream leader and the MQTT streams are in place.
    public func waitUntilServing(seconds: Int = 60, except stopped: Set<Int> = []) throws {
        let deadline = Date().addingTimeInterval(TimeInterval(seconds))
        for (index, node) in nodes.enumerated() where !stopped.contains(index) && helpers[index] != nil {
            while true {
                let publish = Process()
                publish.executableURL = URL(fileURLWithPath: "/usr/bin/mosquitto_pub")
                publish.arguments = ["-h", "127.0.0.1", "-p", String(node.mqttPort), "-q", "1", "-i", "locus-test-probe-\(index)",
                                     "-t", "locus-probe/ready", "-m", "ready"]
                publish.standardOutput = FileHandle.nullDevice
                publish.standardError = FileHandle.nullDevice
                try publish.run()
                publish.waitUntilExit()
                if publish.terminationStatus == 0 { break }
                guard Date() < deadline else {
                    throw TestBroker.BrokerError("the NATS cluster did not take a QoS 1 message through \(node.name) within \(seconds) s: \(log(index))")
                }
                usleep(250_000)
            }
        }
    }

    /// Waits (at most `seconds`) until node `index`'s replica of the MQTT messages' stream has
    /// caught up: a QoS 1 message goes through every node, then the stream's info, asked through
    /// that node, names a leader and every other replica current.
    public func waitUntilCurrent(_ index: Int, seconds: Int = 60) throws {
        try waitUntilServing(seconds: seconds)
        let deadline = Date().addingTimeInterval(TimeInterval(seconds))
        while true {
            if let info = try? streamInfo(through: index), Self.allCurrent(info, replicas: nodes.count) { return }
            guard Date() < deadline else { throw TestBroker.BrokerError("\(nodes[index].name)'s replicas did not catch up within \(seconds) s: \(log(index))") }
            usleep(250_000)
        }
    }

    /// True when the stream info names a leader and `replicas - 1` replicas, all current.
    static func allCurrent(_ info: [String: Any], replicas: Int) -> Bool {
        guard let cluster = info["cluster"] as? [String: Any], cluster["leader"] as? String != nil,
              let others = cluster["replicas"] as? [[String: Any]] else { return false }
        return others.count == replicas - 1 && others.allSatisfy { ($0["current"] as? Bool) == true && ($0["offline"] as? Bool) != true }
    }

    /// `$JS.API.STREAM.INFO.$MQTT_msgs` asked through node `index`'s client port, with the NATS
    /// text protocol written here.
    public func streamInfo(through index: Int) throws -> [String: Any] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestBroker.BrokerError("socket") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = nodes[index].clientPort.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { throw TestBroker.BrokerError("cannot connect to \(nodes[index].name)") }
        let request = "CONNECT {\"verbose\":false,\"headers\":true}\r\nSUB _INBOX.test 1\r\nPUB $JS.API.STREAM.INFO.$MQTT_msgs _INBOX.test 0\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), 0) }
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { throw TestBroker.BrokerError("no stream info from \(nodes[index].name)") }
            received.append(contentsOf: buffer[0..<count])
            let text = String(decoding: received, as: UTF8.self)
            guard let message = text.range(of: "MSG _INBOX.test ") else { continue }
            let header = text[message.upperBound...]
            guard let lineEnd = header.range(of: "\r\n"), let size = Int(header[..<lineEnd.lowerBound].split(separator: " ").last ?? "") else { continue }
            let body = Data(header[lineEnd.upperBound...].utf8)
            guard body.count >= size else { continue }
            guard let object = try JSONSerialization.jsonObject(with: body.prefix(size)) as? [String: Any] else {
                throw TestBroker.BrokerError("stream info is not a JSON object")
            }
            return object
        }
    }
}
