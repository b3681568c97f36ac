import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The fleet's side in the uplink's tests: an MQTT 3.1.1 subscriber written here from the
/// standard, independently of the agent's codec, that records every message it receives. It
/// connects and subscribes synchronously (returning after SUBACK), so a test that restarts the
/// broker can have it listening again before the agent's reconnect (which waits at least 0.75 s).
public final class TestCollector: @unchecked Sendable {
    public struct Message: Sendable {
        public let topic: String
        public let payload: Data
        public let retained: Bool
        public var text: String { String(decoding: payload, as: UTF8.self) }
        public var json: [String: Any]? { try? JSONSerialization.jsonObject(with: payload) as? [String: Any] }
    }

    public let port: UInt16
    public let filters: [String]
    private let lock = NSLock()
    private var collected: [Message] = []
    private var descriptor: Int32 = -1
    private var reader: Thread? = nil
    private var acknowledged = DispatchSemaphore(value: 0)

    public init(port: UInt16, filters: [String]) throws {
        self.port = port
        self.filters = filters
        try connect()
    }

    deinit { disconnect() }

    /// Every message so far, in arrival order.
    public var messages: [Message] {
        lock.lock()
        defer { lock.unlock() }
        return collected
    }

    /// Connects (clean session) and subscribes at QoS 1 to every filter; returns after SUBACK.
    public func connect() throws {
        disconnect()
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else {
            close(fd)
            throw TestBroker.BrokerError("the collector cannot connect to 127.0.0.1:\(port)")
        }
        descriptor = fd
        acknowledged = DispatchSemaphore(value: 0)
        let clientID = "collector-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        var connect: [UInt8] = Self.string("MQTT") + [4, 0x02, 0, 0] + Self.string(clientID)
        connect = [0x10] + Self.length(connect.count) + connect
        var subscribe: [UInt8] = [0, 1]
        for filter in filters { subscribe += Self.string(filter) + [1] }
        subscribe = [0x82] + Self.length(subscribe.count) + subscribe
        send(connect + subscribe)
        let thread = Thread { [weak self] in self?.read(fd) }
        reader = thread
        thread.start()
        guard acknowledged.wait(timeout: .now() + 10) == .success else {
            throw TestBroker.BrokerError("the collector got no SUBACK from 127.0.0.1:\(port)")
        }
    }

    public func disconnect() {
        guard descriptor >= 0 else { return }
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
        descriptor = -1
        usleep(20_000)
    }

    /// How many messages have come so far (without copying them).
    public var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return collected.count
    }

    /// Waits until `count` messages have come, looking every 100 µs, at most `seconds`: for a
    /// test that must act while a burst is still arriving.
    public func wait(forCount count: Int, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while self.count < count {
            if Date() >= deadline { return false }
            usleep(100)
        }
        return true
    }

    /// Waits until `condition` holds for the messages so far (polling), at most `seconds`.
    public func wait(seconds: Double, _ condition: ([Message]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition(messages) { return true }
            usleep(20_000)
        }
        return condition(messages)
    }

    // MARK: the wire

    private func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return }
            offset += sent
        }
    }

    private func read(_ fd: Int32) {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let got = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if got <= 0 { return }
            buffer += chunk[0..<got]
            var consumed = 0
            defer { buffer.removeFirst(consumed) }
            while let (type, flags, body, used) = Self.packet(buffer[consumed...]) {
                consumed += used
                switch type {
                case 9: acknowledged.signal()
                case 3: received(flags, body, fd)
                default: break
                }
            }
        }
    }

    private func received(_ flags: UInt8, _ body: [UInt8], _ fd: Int32) {
        guard body.count >= 2 else { return }
        let topicLength = Int(body[0]) << 8 | Int(body[1])
        guard body.count >= 2 + topicLength else { return }
        let topic = String(decoding: body[2..<(2 + topicLength)], as: UTF8.self)
        var index = 2 + topicLength
        let qos = (flags >> 1) & 3
        if qos > 0 {
            let id = Array(body[index..<(index + 2)])
            index += 2
            let puback: [UInt8] = [0x40, 2] + id
            puback.withUnsafeBytes { _ = Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        let message = Message(topic: topic, payload: Data(body[index...]), retained: flags & 1 != 0)
        lock.lock()
        collected.append(message)
        lock.unlock()
    }

    /// One whole packet at the front of `bytes`: type, flags, body, bytes used.
    private static func packet(_ slice: ArraySlice<UInt8>) -> (UInt8, UInt8, [UInt8], Int)? {
        let bytes = Array(slice.prefix(5))
        guard bytes.count >= 2 else { return nil }
        var remaining = 0
        var multiplier = 1
        var index = 1
        while true {
            guard index < bytes.count else { return nil }
            remaining += Int(bytes[index] & 0x7F) * multiplier
            multiplier *= 128
            index += 1
            if bytes[index - 1] & 0x80 == 0 { break }
        }
        guard slice.count >= index + remaining else { return nil }
        let start = slice.startIndex + index
        return (bytes[0] >> 4, bytes[0] & 0x0F, Array(slice[start..<(start + remaining)]), index + remaining)
    }

    private static func string(_ text: String) -> [UInt8] {
        let bytes = Array(text.utf8)
        return [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
    }

    private static func length(_ count: Int) -> [UInt8] {
        var value = count
        var bytes: [UInt8] = []
        repeat {
            var byte = UInt8(value % 128)
            value /= 128
            if value > 0 { byte |= 0x80 }
            bytes.append(byte)
        } while value > 0
        return bytes
    }
}
