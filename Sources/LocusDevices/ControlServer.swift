import CLocus

/// The agent's control socket: a listening Unix stream socket and a fixed number of client slots,
/// each with a bounded request buffer and a bounded output buffer, allocated at start.
///
/// It never blocks the agent: reads and writes are non-blocking, a request longer than the limit
/// is refused, and a client that does not read its output is never waited for: `send` reports
/// that the output buffer is full and the caller decides (a subscriber catches up from the log
/// later). Framing only; the protocol lives in LocusCore.ControlProtocol. Everything it sends
/// is bytes the caller rendered (`send(_:_:)` takes a buffer; no String per reply).
///
/// Request buffer of a slot: `0 <= inboundStart <= inboundCount <= requestLimit`; bytes before
/// `inboundStart` were handed out as lines, bytes up to `inboundCount` were read.
public final class ControlServer {
    /// What `nextLine` found.
    public enum LineRead {
        /// A complete request line, without its newline (and CR): valid until the next call.
        case line(UnsafeRawBufferPointer)
        /// No complete line, and nothing more to read this turn.
        case waiting
        /// The client closed the connection or it failed; the slot is still the caller's to close.
        case closed
        /// A line longer than the request limit.
        case tooLarge
    }

    /// Socket reads per slot and turn (`startTurn` starts a new count): bounds one client's hold
    /// on the loop.
    public static let maximumReadsPerTurn = 16
    /// Connections accepted per listener and turn.
    public static let maximumAcceptsPerTurn = 64

    struct Client {
        var descriptor: Int32 = -1
        var inbound: UnsafeMutableRawBufferPointer
        var inboundStart = 0
        var inboundCount = 0
        var readsThisTurn = 0
        /// The turn `readsThisTurn` counts (a slot is not touched in turns it does not read).
        var readTurn = 0
        var outbound: UnsafeMutableRawBufferPointer
        var outboundStart = 0
        var outboundCount = 0
        var closeWhenFlushed = false
        var readOnly = false
        /// Who connected (SO_PEERCRED at accept): what the access decision is made from.
        var peer = PeerCredentials.unknown
    }

    public let path: String
    public let listener: Descriptor
    /// A second socket whose clients may only read (status, records, events): its file mode,
    /// not a list in the config, says who may (see README, "The control protocol").
    public let readOnlyPath: String?
    public let readOnlyListener: Descriptor?
    public let requestLimit: Int
    private var clients: [Client]
    private var turn = 0
    /// Connections open now.
    public private(set) var connections = 0

    public init(path: String, mode: Int32, readOnlyPath: String? = nil, readOnlyMode: Int32 = 0o666,
                capacity: Int, requestLimit: Int, outputBytes: Int) throws(SystemError) {
        // The read-only socket first: once the control socket accepts, both are there (clients
        // and tests take the control socket's appearance for "set up").
        var readOnlyDescriptor: Descriptor? = nil
        if let readOnlyPath { readOnlyDescriptor = try ControlServer.listen(readOnlyPath, readOnlyMode) }
        let descriptor: Descriptor
        do { descriptor = try ControlServer.listen(path, mode) } catch {
            if let readOnlyPath, let readOnlyDescriptor {
                _ = locus_close(readOnlyDescriptor.rawValue)
                _ = locus_unlink(readOnlyPath)
            }
            throw error
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

    private static func listen(_ path: String, _ mode: Int32) throws(SystemError) -> Descriptor {
        let result = locus_unix_listen(path, 16)
        guard let descriptor = Descriptor(result) else { throw SystemError(code: -result) }
        let changed = locus_chmod(path, mode)
        if changed < 0 {
            _ = locus_close(descriptor.rawValue)
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
        _ = locus_close(listener.rawValue)
        _ = locus_unlink(path)
        if let readOnlyPath, let readOnlyListener {
            _ = locus_close(readOnlyListener.rawValue)
            _ = locus_unlink(readOnlyPath)
        }
    }

    /// Whether the client came through the read-only socket.
    public func isReadOnly(_ slot: Int) -> Bool { clients[slot].readOnly }

    /// The connected process's credentials, read when it was accepted.
    public func peer(_ slot: Int) -> PeerCredentials { clients[slot].peer }

    public var capacity: Int { clients.count }

    /// The client's connection, or nil for a free slot.
    public func descriptor(_ slot: Int) -> Descriptor? { Descriptor(clients[slot].descriptor) }

    public func isConnected(_ slot: Int) -> Bool { clients[slot].descriptor >= 0 }

    public func wantsWrite(_ slot: Int) -> Bool { clients[slot].descriptor >= 0 && clients[slot].outboundCount > 0 }

    /// Free space in the client's output buffer.
    public func room(_ slot: Int) -> Int { clients[slot].outbound.count - clients[slot].outboundCount }

    /// Accepts every waiting connection on `listening` (one of the two), at most
    /// `maximumAcceptsPerTurn`; `accepted` gets each new slot. One beyond capacity is sent
    /// `busyLine` and closed at once.
    public func acceptWaiting(on listening: Descriptor, busyLine: UnsafeRawBufferPointer, _ accepted: (Int) -> Void) {
        for _ in 0..<ControlServer.maximumAcceptsPerTurn {
            let descriptor = locus_unix_accept(listening.rawValue)
            if descriptor < 0 { break }
            guard let slot = clients.firstIndex(where: { $0.descriptor < 0 }) else {
                _ = locus_send(descriptor, busyLine.baseAddress, busyLine.count)
                _ = locus_close(descriptor)
                continue
            }
            clients[slot].descriptor = descriptor
            connections += 1
            clients[slot].inboundStart = 0
            clients[slot].inboundCount = 0
            clients[slot].readsThisTurn = 0
            clients[slot].outboundStart = 0
            clients[slot].outboundCount = 0
            clients[slot].closeWhenFlushed = false
            clients[slot].readOnly = listening == readOnlyListener
            clients[slot].peer = PeerCredentials.of(descriptor)
            accepted(slot)
        }
    }

    /// A new turn: every slot may read again (`maximumReadsPerTurn`).
    public func startTurn() { turn &+= 1 }

    /// Each open connection: its slot, descriptor, and whether it has output waiting.
    public func forEachConnection(_ body: (Int, Descriptor, Bool) -> Void) {
        guard connections > 0 else { return }
        for slot in clients.indices {
            let client = clients[slot]
            guard let descriptor = Descriptor(client.descriptor) else { continue }
            body(slot, descriptor, client.outboundCount > 0)
        }
    }

    /// The next complete line the client sent, reading from its socket when none is buffered.
    public func nextLine(_ slot: Int) -> LineRead {
        guard clients[slot].descriptor >= 0 else { return .closed }
        while true {
            let client = clients[slot]
            let base = client.inbound.baseAddress!
            if let newline = UnsafeRawBufferPointer(start: base + client.inboundStart, count: client.inboundCount - client.inboundStart)
                .firstIndex(of: 0x0A) {
                let start = client.inboundStart
                var end = start + newline
                clients[slot].inboundStart = end + 1
                if end > start && base.load(fromByteOffset: end - 1, as: UInt8.self) == 0x0D { end -= 1 }
                return .line(UnsafeRawBufferPointer(start: base + start, count: end - start))
            }
            // No line: keep the partial one at the front, then read more.
            let remaining = client.inboundCount - client.inboundStart
            if client.inboundStart > 0 {
                if remaining > 0 { base.copyMemory(from: base + client.inboundStart, byteCount: remaining) }
                clients[slot].inboundStart = 0
                clients[slot].inboundCount = remaining
            }
            let free = client.inbound.count - remaining
            if free == 0 { return .tooLarge }
            let reads = client.readTurn == turn ? client.readsThisTurn : 0
            guard reads < ControlServer.maximumReadsPerTurn else { return .waiting }
            clients[slot].readTurn = turn
            clients[slot].readsThisTurn = reads + 1
            let count = locus_read(client.descriptor, base + remaining, free)
            if count == 0 { return .closed }
            if count < 0 {
                let error = SystemError(code: Int32(truncatingIfNeeded: -count))
                return error == .wouldBlock || error == .interrupted ? .waiting : .closed
            }
            clients[slot].inboundCount = remaining + Int(count)
        }
    }

    /// Queues `bytes` for the client whole, or not at all (false: not enough room, or no client).
    public func send(_ slot: Int, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard clients[slot].descriptor >= 0, bytes.count <= room(slot) else { return false }
        guard bytes.count > 0 else { return true }
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
        connections -= 1
        clients[slot].inboundStart = 0
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

    /// Connects to `path`, or says why not (EACCES: the socket's or directory's mode keeps this
    /// user out; ENOENT or ECONNREFUSED: no agent listens).
    public init(connecting path: String) throws(SystemError) {
        let descriptor = locus_unix_connect(path)
        guard descriptor >= 0 else { throw SystemError(code: -descriptor) }
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
