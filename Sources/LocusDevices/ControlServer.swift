import CLocus

/// The agent's control socket: a listening Unix stream socket and a fixed number of client slots,
/// each with a bounded request buffer and a bounded output buffer, allocated at start.
///
/// It never blocks the agent: reads and writes are non-blocking, a request longer than the limit
/// is refused, and a client that does not read its output is never waited for: `send` reports
/// that the output buffer is full and the caller decides (a subscriber catches up from the log
/// later). Framing only; the protocol lives in LocusCore.ControlProtocol.
public final class ControlServer {
    public enum ReadOutcome: Equatable { case open, closed, tooLarge }

    struct Client {
        var descriptor: Int32 = -1
        var inbound: UnsafeMutableRawBufferPointer
        var inboundCount = 0
        var outbound: UnsafeMutableRawBufferPointer
        var outboundStart = 0
        var outboundCount = 0
        var closeWhenFlushed = false
        var readOnly = false
    }

    public let path: String
    public let listener: Int32
    /// A second socket whose clients may only read (status, records, events): its file mode,
    /// not a list in the config, says who may (see README, "The control protocol").
    public let readOnlyPath: String?
    public let readOnlyListener: Int32
    public let requestLimit: Int
    private var clients: [Client]

    public init(path: String, mode: Int32, readOnlyPath: String? = nil, readOnlyMode: Int32 = 0o666,
                capacity: Int, requestLimit: Int, outputBytes: Int) throws(SystemError) {
        let descriptor = try ControlServer.listen(path, mode)
        var readOnlyDescriptor: Int32 = -1
        if let readOnlyPath {
            do { readOnlyDescriptor = try ControlServer.listen(readOnlyPath, readOnlyMode) } catch {
                _ = locus_close(descriptor)
                _ = locus_unlink(path)
                throw error
            }
        }
        self.path = path
        listener = descriptor
        self.readOnlyPath = readOnlyPath
        readOnlyListener = readOnlyDescriptor
        self.requestLimit = requestLimit
        clients = (0..<capacity).map { _ in
            Client(inbound: .allocate(byteCount: requestLimit, alignment: 8), outbound: .allocate(byteCount: outputBytes, alignment: 8))
        }
    }

    private static func listen(_ path: String, _ mode: Int32) throws(SystemError) -> Int32 {
        let descriptor = locus_unix_listen(path, 16)
        if descriptor < 0 { throw SystemError(code: -descriptor) }
        let changed = locus_chmod(path, mode)
        if changed < 0 {
            _ = locus_close(descriptor)
            throw SystemError(code: -changed)
        }
        return descriptor
    }

    deinit {
        for index in clients.indices {
            close(index)
            clients[index].inbound.deallocate()
            clients[index].outbound.deallocate()
        }
        _ = locus_close(listener)
        _ = locus_unlink(path)
        if let readOnlyPath {
            _ = locus_close(readOnlyListener)
            _ = locus_unlink(readOnlyPath)
        }
    }

    /// Whether the client came through the read-only socket.
    public func isReadOnly(_ slot: Int) -> Bool { clients[slot].readOnly }

    public var capacity: Int { clients.count }

    /// The client's descriptor, or -1 for a free slot.
    public func descriptor(_ slot: Int) -> Int32 { clients[slot].descriptor }

    public func wantsWrite(_ slot: Int) -> Bool { clients[slot].descriptor >= 0 && clients[slot].outboundCount > 0 }

    /// Free space in the client's output buffer.
    public func room(_ slot: Int) -> Int { clients[slot].outbound.count - clients[slot].outboundCount }

    /// Accepts every waiting connection on `listener` (one of the two). One beyond capacity is
    /// told so and closed at once.
    public func acceptWaiting(on listening: Int32, busyLine: String) -> [Int] {
        var accepted: [Int] = []
        for _ in 0..<64 {
            let descriptor = locus_unix_accept(listening)
            if descriptor < 0 { break }
            guard let slot = clients.firstIndex(where: { $0.descriptor < 0 }) else {
                var text = busyLine
                _ = text.withUTF8 { locus_send(descriptor, $0.baseAddress, $0.count) }
                _ = locus_close(descriptor)
                continue
            }
            clients[slot].descriptor = descriptor
            clients[slot].inboundCount = 0
            clients[slot].outboundStart = 0
            clients[slot].outboundCount = 0
            clients[slot].closeWhenFlushed = false
            clients[slot].readOnly = listening == readOnlyListener
            accepted.append(slot)
        }
        return accepted
    }

    /// Reads what the client sent and hands each complete line (without its newline) to `body`.
    public func read(_ slot: Int, _ body: ([UInt8]) -> Void) -> ReadOutcome {
        guard clients[slot].descriptor >= 0 else { return .closed }
        for _ in 0..<16 {
            let free = clients[slot].inbound.count - clients[slot].inboundCount
            if free == 0 { return .tooLarge }
            let count = locus_read(clients[slot].descriptor, clients[slot].inbound.baseAddress! + clients[slot].inboundCount, free)
            if count == 0 { return .closed }
            if count < 0 {
                let error = SystemError(code: Int32(truncatingIfNeeded: -count))
                return error == .wouldBlock || error == .interrupted ? .open : .closed
            }
            let start = clients[slot].inboundCount
            clients[slot].inboundCount += Int(count)
            var lineStart = 0
            for index in start..<clients[slot].inboundCount where clients[slot].inbound[index] == 0x0A {
                let line = Array(UnsafeRawBufferPointer(rebasing: clients[slot].inbound[lineStart..<index]))
                lineStart = index + 1
                body(line.last == 0x0D ? Array(line.dropLast()) : line)
                if clients[slot].descriptor < 0 { return .closed }
            }
            if lineStart > 0 {
                let remaining = clients[slot].inboundCount - lineStart
                if remaining > 0 {
                    let base = clients[slot].inbound.baseAddress!
                    base.copyMemory(from: base + lineStart, byteCount: remaining)
                }
                clients[slot].inboundCount = remaining
            }
        }
        return .open
    }

    /// Queues `text` for the client whole, or not at all (false: not enough room).
    public func send(_ slot: Int, _ text: String) -> Bool {
        guard clients[slot].descriptor >= 0 else { return false }
        var copy = text
        return copy.withUTF8 { bytes in
            guard bytes.count <= room(slot) else { return false }
            var client = clients[slot]
            if client.outboundStart > 0 {
                let base = client.outbound.baseAddress!
                base.copyMemory(from: base + client.outboundStart, byteCount: client.outboundCount)
                client.outboundStart = 0
            }
            (client.outbound.baseAddress! + client.outboundCount).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
            client.outboundCount += bytes.count
            clients[slot] = client
            return true
        }
    }

    /// Writes queued output; false when the client has gone (the slot is then free).
    @discardableResult
    public func flush(_ slot: Int) -> Bool {
        guard clients[slot].descriptor >= 0 else { return false }
        while clients[slot].outboundCount > 0 {
            let start = clients[slot].outbound.baseAddress! + clients[slot].outboundStart
            let sent = locus_send(clients[slot].descriptor, start, clients[slot].outboundCount)
            if sent < 0 {
                let error = SystemError(code: Int32(truncatingIfNeeded: -sent))
                if error == .wouldBlock || error == .interrupted { return true }
                close(slot)
                return false
            }
            clients[slot].outboundStart += Int(sent)
            clients[slot].outboundCount -= Int(sent)
        }
        clients[slot].outboundStart = 0
        if clients[slot].closeWhenFlushed {
            close(slot)
            return false
        }
        return true
    }

    /// Closes once the queued output is written (an error reply before hanging up).
    public func closeWhenFlushed(_ slot: Int) {
        clients[slot].closeWhenFlushed = true
        flush(slot)
    }

    public func close(_ slot: Int) {
        guard clients[slot].descriptor >= 0 else { return }
        _ = locus_close(clients[slot].descriptor)
        clients[slot].descriptor = -1
        clients[slot].inboundCount = 0
        clients[slot].outboundCount = 0
        clients[slot].outboundStart = 0
    }
}

/// A client's connection to a running agent's control socket (the CLI's side).
public struct ControlConnection: ~Copyable {
    public let descriptor: Int32
    private var pending: [UInt8] = []

    /// nil when nothing listens at `path` (no agent running): the caller falls back to the state
    /// directory.
    public init?(path: String) {
        let descriptor = locus_unix_connect(path)
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
    }

    deinit { _ = locus_close(descriptor) }

    public func send(_ line: String) -> SystemError? {
        var copy = line + "\n"
        let result = copy.withUTF8 { locus_write_all(descriptor, $0.baseAddress, $0.count) }
        return result < 0 ? SystemError(code: -result) : nil
    }

    /// The next line, waiting at most `timeoutMs` (-1: forever); nil at end of stream or timeout.
    public mutating func readLine(timeoutMs: Int32) -> [UInt8]? {
        while true {
            if let newline = pending.firstIndex(of: 0x0A) {
                let line = Array(pending[..<newline])
                pending.removeFirst(newline + 1)
                return line
            }
            var fd = descriptor
            var events: Int16 = Int16(LOCUS_POLLIN)
            var revents: Int16 = 0
            let ready = locus_poll(&fd, &events, &revents, 1, timeoutMs)
            if ready <= 0 { return nil }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = chunk.withUnsafeMutableBytes { locus_read(descriptor, $0.baseAddress, $0.count) }
            if count <= 0 { return nil }
            pending += chunk[0..<Int(count)]
        }
    }
}
