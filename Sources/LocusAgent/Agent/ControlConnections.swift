import LocusCore
import LocusDevices

/// The control socket's transport: the listeners (control.sock, and read.sock for clients that
/// may only read), one `ClientSlot` per connection, the framing (a request is a line), each
/// connection's grants, and the one reply buffer every line is rendered into before it goes out
/// as bytes (`ControlServer.send`). What the requests do is not here: the loop reads them with
/// `nextRequest` and hands each to its function in `ControlOperations` (or `PlaceQueries`), with
/// the components that operation uses and these connections to answer on.
///
/// A connection's grants (read, positions, change) are decided at accept from its peer
/// credentials and socket (`AccessPolicy`), and again on SIGHUP; a request that needs a grant the
/// connection lacks is refused here (`ControlRequest.requiredGrant`) and never reaches its
/// operation. What goes out without a request (events to subscribers, stream and ranging lines,
/// the late reply to a location request) is delivered here too: it is a connection's output, and
/// a connection that cannot take it is dismissed here.
final class ControlConnections: LoopComponent {
    /// Output buffer per connection: a subscriber that falls further behind than this catches
    /// up from the log; a reply larger than this cannot be sent (the connection is closed).
    static let outputBytes = 64 << 10

    /// A request read from a connection.
    struct Request {
        let slot: Int
        let id: Int64?
        let operation: ControlRequest
    }

    /// One connection's state beside its socket. `reset` is the one place it starts over.
    struct ClientSlot {
        /// Its subscription's place in the log, if it subscribed.
        var subscription: LogCursor? = nil
        /// The monitor it opened (CLMonitor: one open instance per name).
        var claim: FixedName? = nil
        /// It asked for updates: its stream ends with it.
        var streaming = false
        /// The stream of the connection that used this slot before has to be ended.
        var streamEnded = false
        /// It asked for beacon ranging: its ranging ends with it (through `streamEnded`).
        var ranging = false
        /// A location request of this connection is waiting (its reply comes later).
        var locating = false
        /// What the connection may do, decided at accept (and again on SIGHUP).
        var grants = AccessGrants()

        /// The connection ended (or a new one takes the slot): it starts over.
        mutating func reset() {
            subscription = nil
            claim = nil
            grants = []
            if streaming || ranging || locating { streamEnded = true }
            streaming = false
            ranging = false
            locating = false
        }
    }

    /// A connection registered this turn: its slot and its place in the poll set.
    struct Registration {
        var slot: Int
        var index: PollSet.Index?
    }

    /// nil: the socket could not be created (the agent runs without it, and said why).
    private let server: ControlServer?
    private var slots: [ClientSlot]
    /// `[privacy] fixes`: what positions the lines rendered for clients show.
    private(set) var privacy: SiteConfig.FixPrivacy
    /// `[geocoding] annotate`: events, records and visits carry the place nearest them.
    let labels: PlaceLabels?
    /// Who may do what (the site's `[access]`, groups resolved).
    private var access: AccessPolicy
    /// Replies and subscribers' events, one line at a time.
    private var line = JSONWriter(capacity: ControlConnections.outputBytes)
    private var listenIndex: PollSet.Index? = nil
    private var readOnlyIndex: PollSet.Index? = nil
    /// The connections registered this turn (allocated once: a turn allocates nothing, and an
    /// idle agent's turn looks at no slot).
    private let registered: UnsafeMutableBufferPointer<Registration>
    /// Connections registered this turn, in `registered`.
    private(set) var registeredCount = 0
    /// Slots whose stream is to be ended (`nextEndedStream`).
    private var endedStreams = 0
    /// Replies larger than a connection's buffer (the connection was closed), and clients
    /// dismissed for not reading their events or updates, since start.
    private(set) var oversizedReplies = 0
    private(set) var dismissed = 0

    /// Listens on STATE/control.sock and STATE/read.sock (`capacity` connections; none when 0).
    /// Last in the agent's start: the socket's appearance tells clients (and tests) it is set up.
    init(directory: String, capacity: Int, privacy: SiteConfig.FixPrivacy, access: AccessPolicy, labels: PlaceLabels? = nil) {
        var server: ControlServer? = nil
        if capacity > 0 {
            let path = Paths.join(directory, "control.sock")
            do {
                server = try ControlServer(path: path, mode: 0o660, readOnlyPath: Paths.join(directory, "read.sock"), capacity: capacity,
                                           requestLimit: ControlProtocol.maximumRequestBytes, outputBytes: ControlConnections.outputBytes)
            } catch {
                AgentLog.warning("locus: control: cannot listen on \(path): \(error); 'locus monitor' and 'locus events' will work on the state directory only while the agent is stopped")
            }
        }
        self.server = server
        self.privacy = privacy
        self.labels = labels
        self.access = access
        slots = Array(repeating: ClientSlot(), count: server?.capacity ?? 0)
        if let server { precondition(server.capacity == capacity, "the server takes as many connections as asked") }
        registered = .allocate(capacity: max(1, slots.count))
        registered.initialize(repeating: Registration(slot: 0, index: nil))
    }

    deinit {
        registered.deallocate()
    }

    /// Connection slots (0 without a socket).
    var capacity: Int { slots.count }

    // MARK: the loop's surface

    /// The two listeners and every connection.
    var maximumDescriptors: Int { 2 + slots.count }

    func register(in poll: inout PollSet) {
        registeredCount = 0
        guard let server else { return }
        server.startTurn()
        listenIndex = poll.add(server.listener)
        readOnlyIndex = poll.add(server.readOnlyListener)
        let registered = self.registered
        var count = 0
        server.forEachConnection { slot, descriptor, wantsWrite in
            precondition(count < registered.count, "a registration for each connection slot")
            registered[count] = Registration(slot: slot, index: poll.add(descriptor, write: wantsWrite))
            count += 1
        }
        registeredCount = count
    }

    func status(into line: inout JSONWriter) {
        line.beginObject("control")
        var connections = 0, subscribers = 0
        for slot in slots.indices where server?.isConnected(slot) == true {
            connections += 1
            if slots[slot].subscription != nil { subscribers += 1 }
        }
        line.integer("connections", connections)
        line.integer("subscribers", subscribers)
        line.integer("capacity", slots.count)
        line.integer("oversized_replies", oversizedReplies)
        line.integer("dismissed", dismissed)
        clients(into: &line)
        line.endObject()
    }

    func reload(_ config: LoadedConfig, now: AgentTime) {
        privacy = config.site.fixPrivacy
        access = config.accessPolicy
        // Grants follow the new file at once, for connections already open too.
        for slot in slots.indices where server?.isConnected(slot) == true {
            let before = slots[slot].grants
            decideGrants(slot)
            if slots[slot].grants != before { grantsChanged(slot) }
        }
    }

    // MARK: connections and requests

    /// New connections on either listener; one beyond capacity is told so and closed.
    func accept(_ poll: borrowing PollSet) {
        guard let server else { return }
        if poll.readable(listenIndex) { accept(server, on: server.listener) }
        if poll.readable(readOnlyIndex), let listener = server.readOnlyListener { accept(server, on: listener) }
    }

    private func accept(_ server: ControlServer, on listener: Descriptor) {
        line.reset()
        ControlReply.error(nil, ControlError(.busy, "all \(slots.count) control connections are in use (capacity.subscribers)"), into: &line)
        // A connection the server closed by itself may have left its stream (and its tier).
        server.acceptWaiting(on: listener, busyLine: line.bytes) { slot in
            precondition(server.isConnected(slot), "an accepted connection's slot is open")
            reset(slot)
            decideGrants(slot)
            precondition(slots[slot].subscription == nil, "a new connection starts without a subscription")
            precondition(slots[slot].claim == nil, "a new connection starts without a claim")
        }
    }

    /// Registered connection `connection` (`0..<registeredCount`): what it has queued is written
    /// if its socket has room; its slot when it has sent something (or hung up), else nil.
    func readySlot(_ connection: Int, _ poll: borrowing PollSet) -> Int? {
        precondition(connection >= 0, "a registered connection")
        precondition(connection < registeredCount, "a connection registered this turn")
        let registration = registered[connection]
        if poll.writable(registration.index) { server?.flush(registration.slot) }
        return poll.readable(registration.index) ? registration.slot : nil
    }

    /// The next request a connection sent, decoded; protocol errors, refusals on read.sock, a
    /// request over the limit and a closed connection are dealt with here (nil: none left).
    func nextRequest(_ slot: Int) -> Request? {
        precondition(slots.indices.contains(slot), "a connection slot")
        guard let server else { return nil }
        while true {
            switch server.nextLine(slot) {
            case .waiting:
                return nil
            case .closed:
                hangUp(slot)
                return nil
            case .tooLarge:
                line.reset()
                ControlReply.error(nil, ControlError(.tooLarge, "a request is at most \(server.requestLimit) bytes, newline included"), into: &line)
                _ = server.send(slot, line.bytes)
                server.closeWhenFlushed(slot)
                reset(slot)
                return nil
            case .line(let bytes):
                guard !bytes.isEmpty else { continue }
                // The simplest requests (a flat `locate`) are read without a parse's allocations.
                // A request is read from an open connection: the slot is in use until it is answered.
                precondition(server.isConnected(slot), "a request comes from an open connection")
                if let flat = FlatRequest.decode(bytes), slots[slot].grants.isSuperset(of: flat.request.requiredGrant) {
                    return Request(slot: slot, id: flat.id, operation: flat.request)
                }
                let (id, decoded) = ControlProtocol.decode(Array(bytes))
                switch decoded {
                case .failure(let error):
                    refuse(slot, id, error.code, error.message)
                case .success(let operation) where !slots[slot].grants.isSuperset(of: operation.requiredGrant):
                    refuse(slot, id, .permissionDenied, access.refusal(operation.requiredGrant, held: slots[slot].grants, socket: socket(slot)))
                case .success(let operation):
                    return Request(slot: slot, id: id, operation: operation)
                }
            }
        }
    }

    /// Sends what the connection's requests queued.
    func flush(_ slot: Int) { server?.flush(slot) }

    /// A slot whose connection ended with a stream (updates or ranging) open: the loop ends its
    /// streams (nil: none).
    func nextEndedStream() -> Int? {
        guard endedStreams > 0 else { return nil }
        precondition(endedStreams <= slots.count, "at most one ended stream a slot")
        for slot in slots.indices where slots[slot].streamEnded {
            slots[slot].streamEnded = false
            endedStreams -= 1
            return slot
        }
        preconditionFailure("an ended stream without its slot")
    }

    /// A connection ends: its subscription, its claim and its stream with it.
    private func hangUp(_ slot: Int) {
        server?.close(slot)
        reset(slot)
    }

    private func reset(_ slot: Int) {
        let ended = slots[slot].streamEnded
        slots[slot].reset()
        if slots[slot].streamEnded && !ended { endedStreams += 1 }
        precondition(endedStreams <= slots.count, "at most one ended stream a slot")
    }

    // MARK: a connection's state, for the operations

    /// The connection's slot: what it subscribed to, opened, streams, and may do. The operations
    /// set the first four as they answer; `streamEnded` is this type's own.
    subscript(slot: Int) -> ClientSlot {
        get { slots[slot] }
        set {
            precondition(newValue.streamEnded == slots[slot].streamEnded && newValue.grants == slots[slot].grants,
                         "an operation changes what a connection does, not its grants or its ended stream")
            slots[slot] = newValue
        }
    }

    /// The open connection that has `monitor` open (its consumer), if any.
    func holder(of monitor: FixedName) -> Int? {
        guard let server else { return nil }
        // A claim lasts as long as its connection (a slot closed by a failed write keeps a stale one).
        return slots.indices.first { slots[$0].claim == monitor && server.isConnected($0) }
    }

    /// Whether a connection has `monitor` open (its consumer, CLMonitor's one open instance).
    func isOpen(_ monitor: FixedName) -> Bool { holder(of: monitor) != nil }

    // MARK: replies

    /// `{"id":..,"ok":true` and the members `body` writes, to the request's connection.
    func reply(_ request: Request, _ body: (inout JSONWriter) -> Void) {
        line.reset()
        ControlReply.ok(request.id, into: &line)
        body(&line)
        ControlReply.end(into: &line)
        send(request.slot)
    }

    /// A whole line `render` writes, to the connection in `slot`.
    func send(_ slot: Int, _ render: (inout JSONWriter) -> Void) {
        line.reset()
        render(&line)
        send(slot)
    }

    func ok(_ request: Request, result: StaticString) {
        line.reset()
        ControlReply.ok(request.id, result: result, into: &line)
        send(request.slot)
    }

    func refuse(_ request: Request, _ code: ControlError.Code, _ message: String) {
        refuse(request.slot, request.id, code, message)
    }

    private func refuse(_ slot: Int, _ id: Int64?, _ code: ControlError.Code, _ message: String) {
        line.reset()
        ControlReply.error(id, ControlError(code, message), into: &line)
        send(slot)
    }

    /// The line to the connection; one that cannot take it (its buffer full, or a reply larger
    /// than a buffer) is hung up.
    private func send(_ slot: Int) {
        guard let server else { return }
        if line.overflowed {
            oversizedReplies += 1
            AgentLog.warning("locus: control: a reply larger than \(ControlConnections.outputBytes) bytes; closing the connection (\(oversizedReplies) since start)")
        }
        if line.overflowed || !server.send(slot, line.bytes) { hangUp(slot) }
    }

    /// The last thing a connection that cannot keep up is told (if its buffer has room for it)
    /// before it is closed once what it has queued is written.
    private func dismiss(_ slot: Int, _ message: String) {
        guard let server else { return }
        dismissed += 1
        line.reset()
        ControlReply.error(nil, ControlError(.busy, message), into: &line)
        _ = server.send(slot, line.bytes)
        server.closeWhenFlushed(slot)
    }

    // MARK: lines without a request: events, streams, ranging, late replies

    /// A logged event to every subscriber that keeps up; one that cannot take it reads it from
    /// the log later (or, without a log, is told and hung up: events cannot be replayed).
    func publish(_ event: MonitorEvent, sequence: UInt64, _ log: EventLog) {
        precondition(sequence > 0, "a logged event has a sequence number")
        precondition(sequence <= log.newest, "a published event is in the log")
        guard let server else { return }
        var rendered = false
        for slot in slots.indices {
            guard var cursor = slots[slot].subscription, !cursor.behind else { continue }
            guard cursor.wants(event) else {
                cursor.took(sequence)
                slots[slot].subscription = cursor
                continue
            }
            if !rendered {
                line.reset()
                ControlReply.event(event, sequence: sequence, places: labels, into: &line)
                rendered = true
            }
            if server.send(slot, line.bytes) {
                cursor.took(sequence)
                slots[slot].subscription = cursor
                server.flush(slot)
            } else if log.isAvailable {
                // Too slow to keep up: the log has the event; read it from there when there is room.
                cursor.fellBehind()
                slots[slot].subscription = cursor
            } else {
                dismiss(slot, "events came faster than this client read them, and without a log they cannot be replayed; subscribe again")
                slots[slot].subscription = nil
                rendered = false
            }
        }
    }

    /// Subscribers that are behind get events from the log while their output has room, once
    /// they have read everything queued (a stuck client costs no log scans).
    func catchUp(_ log: EventLog) {
        guard let server, log.isAvailable else { return }
        for connection in 0..<registeredCount {
            let slot = registered[connection].slot
            guard var cursor = slots[slot].subscription, cursor.behind else { continue }
            guard server.isConnected(slot) else {
                slots[slot].subscription = nil
                continue
            }
            guard !server.wantsWrite(slot) else { continue }
            let before = cursor.position
            _ = log.read(&cursor) { sequence, event in
                precondition(sequence > before, "a subscriber catching up reads events after its position")
                line.reset()
                ControlReply.event(PrivacyFilter.event(event, privacy), sequence: sequence, places: labels, into: &line)
                return server.send(slot, line.bytes)
            }
            slots[slot].subscription = cursor
            server.flush(slot)
        }
    }

    /// A stream's lines to its connection. False when they do not fit (nil: more than a buffer):
    /// updates are not replayable, so the client is told, hung up, and the loop ends the stream.
    func sendStream(_ slot: Int, _ bytes: UnsafeRawBufferPointer?) -> Bool {
        precondition(slots.indices.contains(slot), "a connection slot")
        guard let server else { return false }
        if let bytes, server.send(slot, bytes) {
            server.flush(slot)
            return true
        }
        dismiss(slot, "updates came faster than this client read them; request updates again")
        slots[slot].streaming = false
        return false
    }

    /// A ranging line to its connection. False when it does not fit: a client that does not
    /// read its lines is told, hung up, and the loop ends its ranging.
    func sendRanging(_ slot: Int, _ bytes: UnsafeRawBufferPointer) -> Bool {
        precondition(slots.indices.contains(slot), "a connection slot")
        precondition(bytes.count <= ControlConnections.outputBytes, "a ranging line fits a connection's output buffer")
        guard let server else { return false }
        if server.send(slot, bytes) {
            server.flush(slot)
            return true
        }
        dismiss(slot, "ranging lines came faster than this client read them; range again")
        slots[slot].ranging = false
        return false
    }

    /// The reply to a location request that waited; a connection that cannot take it is hung up.
    func sendReply(_ slot: Int, _ bytes: UnsafeRawBufferPointer) {
        precondition(slots.indices.contains(slot), "a connection slot")
        guard let server, slots[slot].locating else { return }
        slots[slot].locating = false
        if server.send(slot, bytes) { server.flush(slot) } else { hangUp(slot) }
    }
}

// MARK: access levels

extension ControlConnections {
    private func socket(_ slot: Int) -> ControlSocket { server?.isReadOnly(slot) == true ? .readOnly : .control }

    /// The connection's grants from its credentials and socket.
    private func decideGrants(_ slot: Int) {
        guard let server else { return }
        let peer = server.peer(slot)
        slots[slot].grants = access.grants(user: peer.user, group: peer.group, groups: peer.groups, socket: socket(slot))
    }

    /// A reload changed what the connection may do: it is told (`{"grants":[...]}`, a line
    /// without an id), and what it has open but may no longer have ends with `permission_denied`
    /// (its update stream, ranging or waiting location request, without `positions`). An open
    /// monitor and a subscription stay: they were granted when made.
    private func grantsChanged(_ slot: Int) {
        let grants = slots[slot].grants
        send(slot) { line in
            line.beginObject()
            line.beginArray("grants")
            for (_, grant) in AccessGrants.names where grants.contains(grant) { line.string(grant.name) }
            line.endArray()
            ControlReply.end(into: &line)
        }
        guard server?.isConnected(slot) == true, !grants.contains(.positions),
              slots[slot].streaming || slots[slot].ranging || slots[slot].locating else { return }
        refuse(slot, nil, .permissionDenied, "the site was reloaded and this connection no longer has the 'positions' grant; its stream ended")
        slots[slot].streaming = false
        slots[slot].ranging = false
        slots[slot].locating = false
        if !slots[slot].streamEnded {
            slots[slot].streamEnded = true
            endedStreams += 1
        }
        AgentLog.info("locus: control: connection \(slot) lost the 'positions' grant; its stream ended")
    }

    /// `status`'s `control.clients`: each connection, who it is, what it may do and what it does.
    /// (User names are looked up here, for a status request, not at accept.)
    private func clients(into line: inout JSONWriter) {
        guard let server else { return }
        line.beginArray("clients")
        for slot in slots.indices where server.isConnected(slot) {
            let peer = server.peer(slot)
            let client = slots[slot]
            line.beginObject()
            line.integer("slot", slot)
            line.string("socket", socket(slot).fileName)
            line.integer("pid", Int(peer.pid))
            line.integer("uid", Int64(peer.user))
            if let name = Accounts.userName(peer.user) { line.string("user", name) }
            line.integer("gid", Int64(peer.group))
            if let name = Accounts.groupName(peer.group) { line.string("group", name) }
            line.beginArray("access")
            for (_, grant) in AccessGrants.names where client.grants.contains(grant) { line.string(grant.name) }
            line.endArray()
            if let claim = client.claim { line.string("consumer_of", claim) }
            if let subscription = client.subscription {
                if let monitor = subscription.monitor { line.string("subscribed", monitor) } else { line.string("subscribed", "*") }
            }
            if client.streaming { line.boolean("updates", true) }
            line.endObject()
        }
        line.endArray()
    }
}
