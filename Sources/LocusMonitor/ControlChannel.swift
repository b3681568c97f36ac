import Foundation

/// A failure reported by the agent (its error code and message) or by the connection.
public struct MonitorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The control protocol's code (`in_use`, `not_found`, `condition_limit_exceeded`, ...), or
    /// `disconnected` when the agent went away.
    public var code: String
    public var message: String
    public var description: String { "\(code): \(message)" }

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }
}

/// One connection to the agent's control socket: JSON lines, replies matched to requests by id,
/// streamed events queued until taken. A thread of its own reads the socket, so the actor
/// using it never blocks.
final class ControlChannel: @unchecked Sendable {
    private let descriptor: Int32
    private let lock = NSLock()
    private var nextID = 1
    private var waiting: [Int: CheckedContinuation<Data, Error>] = [:]
    private var events: [Data] = []
    private var eventWaiter: CheckedContinuation<Data?, Never>? = nil
    private var closed = false

    /// Which of the agent's sockets a call needs (docs/access.md): changing (open a monitor as
    /// its consumer, add, remove) goes through control.sock, only reading (live updates) through
    /// read.sock; each falls back to the other when its own refuses this user (EACCES), and the
    /// agent then decides from the user's groups.
    enum Purpose { case reading, changing }

    static func open(stateDirectory: String, for purpose: Purpose) throws -> ControlChannel {
        let control = stateDirectory + "/control.sock", read = stateDirectory + "/read.sock"
        let first = purpose == .reading ? read : control
        let second = purpose == .reading ? control : read
        do {
            return try ControlChannel(path: first)
        } catch let error as MonitorError where error.code == "permission_denied" || error.code == "disconnected" && purpose == .reading {
            // read.sock may be missing where an older agent runs; control.sock then serves.
            return try ControlChannel(path: second)
        }
    }

    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(descriptor)
            throw MonitorError(code: "bad_argument", message: "socket path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in for (index, byte) in bytes.enumerated() { raw[index] = byte } }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            let code = errno
            let reason = String(cString: strerror(code))
            close(descriptor)
            if code == EACCES {
                throw MonitorError(code: "permission_denied", message: "\(path): \(reason) (see docs/access.md: control.sock is for group locus)")
            }
            throw MonitorError(code: "disconnected", message: "no agent at \(path): \(reason)")
        }
        let thread = Thread { [self] in readLoop() }
        thread.start()
    }

    deinit { shutdown(descriptor, Int32(SHUT_RDWR)); close(descriptor) }

    func hangUp() { shutdown(descriptor, Int32(SHUT_RDWR)) }

    /// Sends a request (without `id`) and waits for its reply; an error reply throws.
    func request(_ members: [String: Any]) async throws -> [String: Any] {
        let line: Data = try await withCheckedThrowingContinuation { continuation in
            lock.lock()
            if closed {
                lock.unlock()
                continuation.resume(throwing: MonitorError(code: "disconnected", message: "the agent closed the connection"))
                return
            }
            let id = nextID
            nextID += 1
            waiting[id] = continuation
            lock.unlock()
            var object = members
            object["id"] = id
            guard var data = try? JSONSerialization.data(withJSONObject: object) else {
                fail(id, MonitorError(code: "bad_argument", message: "the request is not JSON"))
                return
            }
            data.append(0x0A)
            let sent = data.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent != data.count { fail(id, MonitorError(code: "disconnected", message: "cannot send to the agent")) }
        }
        let reply = (try? JSONSerialization.jsonObject(with: line)) as? [String: Any] ?? [:]
        if reply["ok"] as? Bool == true { return reply }
        let error = reply["error"] as? [String: Any]
        throw MonitorError(code: error?["code"] as? String ?? "error", message: error?["message"] as? String ?? "the agent refused the request")
    }

    /// The next streamed event's object, waiting as long as it takes; nil once the agent has gone.
    func nextEvent() async -> [String: Any]? {
        while let message = await nextStreamed() {
            if let event = message["event"] as? [String: Any] { return event }
        }
        return nil
    }

    /// The next streamed line (an event, an update, a visit, or an error the agent sent before
    /// hanging up), waiting as long as it takes; nil once the agent has gone.
    func nextStreamed() async -> [String: Any]? {
        guard let line = await nextEventLine() else { return nil }
        return (try? JSONSerialization.jsonObject(with: line)) as? [String: Any] ?? [:]
    }

    private func nextEventLine() async -> Data? {
        await withCheckedContinuation { continuation in
            lock.lock()
            if !events.isEmpty {
                let event = events.removeFirst()
                lock.unlock()
                continuation.resume(returning: event)
            } else if closed {
                lock.unlock()
                continuation.resume(returning: nil)
            } else {
                eventWaiter = continuation
                lock.unlock()
            }
        }
    }

    private func fail(_ id: Int, _ error: MonitorError) {
        lock.lock()
        let continuation = waiting.removeValue(forKey: id)
        lock.unlock()
        continuation?.resume(throwing: error)
    }

    private func readLoop() {
        var pending = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { break }
            pending += buffer[0..<count]
            while let newline = pending.firstIndex(of: 0x0A) {
                let line = Data(pending[..<newline])
                pending.removeFirst(newline + 1)
                guard let message = (try? JSONSerialization.jsonObject(with: line)) as? [String: Any] else { continue }
                // A reply carries its request's id; stream items (events, updates, visits,
                // ranging) carry none, nor does an error the agent sends before closing a stream.
                // (Told apart by the id, not by the members: `status`'s reply has a `ranging`.)
                let id = message["id"] as? Int
                deliver(line, isEvent: id == nil, id: id)
            }
        }
        lock.lock()
        closed = true
        let replies = waiting
        waiting = [:]
        let waiter = eventWaiter
        eventWaiter = nil
        lock.unlock()
        for continuation in replies.values {
            continuation.resume(throwing: MonitorError(code: "disconnected", message: "the agent closed the connection (stopped?)"))
        }
        waiter?.resume(returning: nil)
    }

    private func deliver(_ line: Data, isEvent: Bool, id: Int?) {
        lock.lock()
        if isEvent {
            if let waiter = eventWaiter {
                eventWaiter = nil
                lock.unlock()
                waiter.resume(returning: line)
            } else {
                events.append(line)
                lock.unlock()
            }
            return
        }
        let continuation = id.flatMap { waiting.removeValue(forKey: $0) }
        lock.unlock()
        continuation?.resume(returning: line)
    }
}
