import LocusCore
import LocusDevices

/// The MQTT uplink: the log is the outbox. The uplink is one more reader of the crash-safe log,
/// with its own cursor: it publishes every record `what` asks for, in log order, at QoS 1, and
/// its cursor moves only when the broker has acknowledged (PUBACK) everything up to it. The
/// cursor is committed to the log (an `uplink` record, stated by every checkpoint), so after a
/// reconnect, a restart, a power cut or a broker restart the uplink sends again from it: a
/// message may arrive twice, never not at all, and each carries `gateway` and `seq` so the fleet
/// keeps exactly one copy.
///
/// Topics (`<prefix>` is `topic_prefix`, by default `locus/<gateway>`):
///   `<prefix>/event/<monitor>/<identifier>`  every event
///   `<prefix>/state/<monitor>/<identifier>`  retained: the record's state after the event
///   `<prefix>/gpio/<output>`                 retained: the line's last change
///   `<prefix>/visit`, `<prefix>/fix`         visits and fixes, when `what` has them
///   `<prefix>/status`                        retained "online"; the will says "offline"
///   `<prefix>/config`, `<prefix>/command`    what the gateway did with the fleet's messages
/// With `[remote]` it subscribes to `<prefix>/remote/+` (the fleet's configuration and commands,
/// docs/remote.md) and hands each message to the loop (`nextRemote`), which acknowledges it
/// once handled.
/// and, with `home_assistant = true`, discovery configs under `homeassistant/`.
///
/// Steady state: a turn reads only the log's new bytes (`LogTail`), renders into buffers
/// allocated at start, and allocates nothing per message.
///
/// What it owns, each part its own type: the broker connection (`BrokerConnection`: lookup,
/// TCP, TLS, and the MQTT session with the window of QoS 1 messages awaiting PUBACK and the
/// reconnect backoff), the outbox (`UplinkOutbox`: the log tail, the delivered and committed
/// positions, the commit cadence, the backlog), the rendering (`UplinkRendering`: topics,
/// payload, labels), the announcements of a new connection, the live sightings' rate limits
/// (`SightingLimits`) and the counters (`UplinkCounters`).
final class Uplink: LoopComponent {
    /// The output queue: a turn's messages (`max_inflight` of them at most) and the rest of a
    /// partly sent one.
    static let outputBytes = 96 << 10
    /// Room kept in the output for what one step writes (an event and its state, or a discovery
    /// config), with topics and headers.
    static let eventRoom = max(UplinkJSON.maximumDiscoveryBytes + UplinkJSON.maximumEventBytes + UplinkJSON.maximumStateBytes,
                               UplinkJSON.maximumRemoteBytes + UplinkTopics.maximumPrefixBytes) + 1024

    let settings: SiteConfig.Uplink
    private let connection: BrokerConnection
    private var outbox: UplinkOutbox
    private var rendering: UplinkRendering
    /// What goes out first on a new connection: the status, Home Assistant's subscription and
    /// configs, and (when the broker kept nothing of us) every record's state.
    private var announcement = Announcement()
    private var sightings = SightingLimits(capacity: Uplink.sightingSlots)
    /// `what` has "presence": the period's summary per tag, and its message's buffer.
    private var presence: UplinkPresence
    private var presenceLine: JSONWriter
    /// The phones file's names, for presence messages that name phones.
    var phones: Unmanaged<PhoneResolution>? {
        get { presence.phones }
        set { presence.phones = newValue }
    }
    private(set) var counters = UplinkCounters()
    private var lastError: String? = nil
    /// The fleet's configurations and commands (nil without `[remote]`), and the messages read
    /// for the loop and not yet handled.
    let remote: RemoteSteering?
    private var remoteMessages: [RemoteInbox.Message] = []
    /// The packet id of the remote subscription's SUBSCRIBE (its SUBACK's).
    private var remoteSubscription: UInt16? = nil
    /// The fleet's `republish` under way (nil: none).
    private var republishing: Republish? = nil
    /// The broker node being tried or used: an index into `settings.brokers`.
    private(set) var node = 0

    /// The node the connection goes to.
    var broker: BrokerAddress { settings.brokers[node] }

    var gateway: String { String(decoding: rendering.topics.gateway, as: UTF8.self) }

    struct Announcement {
        var status = false
        var subscribe = false
        var subscribeRemote = false
        /// Next condition (then output) to announce to Home Assistant; nil: none.
        var discovery: Int? = nil
        /// Next record whose state is announced again; nil: none.
        var states: Int? = nil
    }

    /// The settings made concrete: gateway id, prefix and client id. Fails with the reason when
    /// the gateway id cannot be known.
    init(_ settings: SiteConfig.Uplink, cursor: UplinkCursor?, places: PlaceLabels? = nil, remote: RemoteSteering? = nil,
         machineID: () -> String?) throws(UplinkSetupError) {
        self.settings = settings
        let gateway = try Uplink.gateway(settings, machineID: machineID)
        let prefix = settings.topicPrefix ?? UplinkTopics.defaultPrefix(gateway: gateway)
        rendering = UplinkRendering(topics: UplinkTopics(prefix: prefix, gateway: gateway), places: places)
        outbox = UplinkOutbox(cursor: cursor)
        let options = Uplink.connectOptions(settings, clientID: settings.clientID ?? gateway, statusTopic: prefix + "/status", will: true)
        precondition(Uplink.eventRoom <= Uplink.outputBytes, "the output holds at least one step's messages")
        precondition(Uplink.eventRoom >= UplinkJSON.maximumRemoteBytes + UplinkTopics.maximumPrefixBytes + 16, "a remote record fits the room kept")
        precondition(settings.maxInflight >= 2, "the window holds an event and its state")
        self.remote = remote
        presence = UplinkPresence(settings)
        presenceLine = JSONWriter(capacity: presence.lineBytes)
        remoteMessages.reserveCapacity(16)
        connection = BrokerConnection(settings: BrokerConnection.Settings(broker: settings.broker, tls: nil, connect: options),
                                      outputBytes: Uplink.outputBytes, windowCapacity: settings.maxInflight,
                                      remoteTopic: remote.map { _ in Array((prefix + "/remote/").utf8) }, remoteBytes: remote?.settings.maximumBytes ?? 0)
    }

    /// The gateway id: `uplink.gateway`, else the machine id.
    static func gateway(_ settings: SiteConfig.Uplink, machineID: () -> String?) throws(UplinkSetupError) -> String {
        guard let gateway = settings.gateway ?? machineID() else {
            throw UplinkSetupError("no gateway id: /etc/machine-id cannot be read; set uplink.gateway")
        }
        return gateway
    }

    /// The machine id (/etc/machine-id), the default gateway id: stable across restarts.
    static func machineID() -> String? {
        guard let bytes = try? Files.read("/etc/machine-id", limit: 256) else { return nil }
        // Bytes, not Characters: Character properties would link Unicode's tables into the binary.
        let id = bytes.filter { $0 > 0x20 && $0 < 0x7F }
        return id.isEmpty ? nil : String(decoding: id, as: UTF8.self)
    }

    var isConnected: Bool { connection.isOpen }

    // MARK: the loop's surface

    var maximumDescriptors: Int { connection.maximumDescriptors }

    func register(in poll: inout PollSet) { connection.register(in: &poll) }

    func deadlines(_ next: inout NextDeadline) {
        if let due = connection.deadlineNs() { next.consider(MonotonicInstant(nanoseconds: due)) }
        if connection.phase == .idle { next.consider(connection.session.retryAt ?? MonotonicInstant(nanoseconds: 0)) }
        if let due = outbox.commitDeadline { next.consider(due) }
        if let due = presence.dueNs { next.consider(MonotonicInstant(nanoseconds: due)) }
    }

    func status(into line: inout JSONWriter) {
        line.beginObject("uplink")
        line.string("broker", broker.description)
        if settings.brokers.count > 1 {
            line.integer("node", node + 1)
            line.integer("nodes", settings.brokers.count)
        }
        line.string("gateway", gateway)
        line.string("state", stateName)
        line.integer("cursor", outbox.committed)
        line.integer("in_flight", connection.session.window.count)
        line.integer("published", counters.published)
        line.integer("acknowledged", counters.acknowledged)
        if settings.content.contains(.sightings) { line.integer("sightings_published", sightings.published) }
        if presence.isEnabled {
            line.integer("presence_published", presence.published)
            line.integer("presence_skipped", presence.skipped)
        }
        if let peer = connection.peer { line.string("peer", peer.description) } else { line.null("peer") }
        line.integer("connections", counters.connections)
        line.integer("failures", counters.failures)
        // PUBACKs for no message in flight: a broker's mistake, counted, never acted on.
        line.integer("unknown_acknowledgements", counters.unknownAcknowledgements)
        if let lastError { line.string("last_error", lastError) } else { line.null("last_error") }
        if let republishing {
            line.beginObject("republishing")
            line.integer("from", republishing.from)
            line.integer("through", republishing.through)
            line.integer("position", republishing.tail.position)
            line.endObject()
        }
        line.endObject()
        remote?.status(into: &line)
    }

    /// The backlog's part of the status, which needs the log.
    func backlogStatus(_ log: EventLog, now: AgentTime, into line: inout JSONWriter) {
        outbox.backlogStatus(log, window: connection.session.window, now: now, into: &line)
    }

    private var stateName: StaticString {
        switch connection.phase {
        case .idle: return connection.session.retryAt == nil ? "starting" : "waiting to reconnect"
        case .resolving: return "looking up the broker"
        case .connecting: return "connecting"
        case .handshaking: return "TLS handshake"
        case .accepting: return "waiting for CONNACK"
        case .open: return "connected"
        }
    }

    /// `[uplink]` changes take effect at the next start (LoadedConfig.changesAtRestart).
    func reload(_ config: LoadedConfig, now: AgentTime) {}

    /// A clean goodbye: "offline" on the status topic (the broker drops the will on DISCONNECT),
    /// then DISCONNECT, as far as the socket takes them now; the delivered position committed.
    /// "offline" goes at QoS 1, as "online" and the records did: a subscriber's queue at the
    /// broker keeps QoS 1 messages in order, where a QoS 0 one would overtake a backlog still
    /// queued for it and leave "online" last.
    func shutdown(now: AgentTime) {
        guard connection.isOpen else { return connection.close() }
        let offline: StaticString = "offline"
        let packetID = connection.session.window.unrecordedPacketID()
        _ = connection.output.publish(topic: rendering.topics.status(), payload: UnsafeRawBufferPointer(start: offline.utf8Start, count: offline.utf8CodeUnitCount),
                                      qos: .atLeastOnce, retain: true, packetID: packetID)
        _ = connection.output.disconnect()
        _ = connection.flush(now.monotonic.nanoseconds)
        connection.close()
    }

    /// The delivered position, committed to the log before the agent stops.
    func commitAtShutdown(_ log: EventLog, now: AgentTime) { outbox.commit(log, now, window: connection.session.window, force: true) }

    // MARK: the turn

    /// The turn's work: connect when due, read the broker's packets, commit the delivered
    /// position, publish what the log has that the window and the output have room for, send.
    func service(_ poll: borrowing PollSet, _ now: AgentTime, log: EventLog, engine: MonitorEngine, outputs: [FixedName]) {
        let nowNs = now.monotonic.nanoseconds
        if connection.phase == .idle && connection.session.mayConnect(at: now.monotonic) {
            startConnecting(now)
        }
        if let problem = connection.service(poll, nowNs: nowNs) { lost(problem, now) }
        while let packet = connection.nextIncoming() { received(packet) }
        connection.takeSteps { step in took(step, now) }
        // What the broker acknowledged is committed whether or not the connection is still
        // open (its deadline stands either way).
        outbox.commit(log, now, window: connection.session.window, force: false)
        publishPresence(now)
        guard connection.isOpen else { return }
        announce(engine: engine, outputs: outputs)
        publishFromLog(log)
        if republishing != nil { republishFromLog(log) }
        if let problem = connection.flush(nowNs) { lost(problem, now) }
        outbox.reportDeleted(log)
    }

    private func startConnecting(_ now: AgentTime) {
        counters.connections += 1
        if let problem = Uplink.loadCredentials(settings, into: connection) { return lost(problem, now) }
        if let problem = connection.start(nowNs: now.monotonic.nanoseconds) { lost(problem, now) }
    }

    /// The TLS files and the password, read again before each attempt, so a file put right
    /// takes effect without a restart. The reason when one cannot be read.
    static func loadCredentials(_ settings: SiteConfig.Uplink, into connection: BrokerConnection) -> String? {
        if settings.broker.tls {
            do {
                connection.settings.tls = try TLSConfiguration(caFile: settings.caFile ?? SiteConfig.Uplink.systemCAFile,
                                                               certificateFile: settings.certFile, keyFile: settings.keyFile)
            } catch {
                return error.message
            }
        }
        if let path = settings.passwordFile {
            guard let password = Files.readSecret(path) else { return "cannot read the password file \(path)" }
            connection.settings.connect.password = password
        }
        return nil
    }

    /// CONNECT's options: a kept session, the will on the status topic.
    static func connectOptions(_ settings: SiteConfig.Uplink, clientID: String, statusTopic: String, will: Bool) -> MQTTConnectOptions {
        let offline = MQTTConnectOptions.Will(topic: Array(statusTopic.utf8), payload: Array("offline".utf8), qos: .atLeastOnce, retain: true)
        return MQTTConnectOptions(clientID: Array(clientID.utf8), cleanSession: !will,
                                  keepAliveS: UInt16(clamping: settings.keepAliveMs / 1000), will: will ? offline : nil,
                                  username: settings.username.map { Array($0.utf8) }, password: nil)
    }

    /// The connection ended (or could not be made): reported, and tried again after the backoff,
    /// on the broker's next node when it has several (a cluster keeps the session, and the
    /// cursor sends again what the lost node had not acknowledged).
    private func lost(_ problem: String, _ now: AgentTime) {
        counters.failures += 1
        // What was in flight was not acknowledged: the tail goes back to the delivered position,
        // so the next connection sends it again.
        outbox.rewind(connection.session.window)
        // A republish's messages in flight were not acknowledged either: its range starts again.
        if let republishing { republishing.tail.reposition(after: republishing.from - 1) }
        let (delayNs, wasOpen) = connection.session.lost(now: now.monotonic, random: Randomness.next())
        let failed = broker
        if settings.brokers.count > 1 {
            node = (node + 1) % settings.brokers.count
            connection.settings.broker = broker
        }
        if lastError != problem || wasOpen {
            let next = settings.brokers.count > 1 ? "; trying node \(node + 1) of \(settings.brokers.count), \(broker), in" : "; trying again in"
            AgentLog.warning("locus: uplink: \(settings.brokers.count > 1 ? "\(failed): " : "")\(problem)\(next) \(Quantity.describe(nanoseconds: delayNs))")
        }
        lastError = problem
    }

    private func took(_ step: BrokerConnection.Step, _ now: AgentTime) {
        switch step {
        case .resolved(let addresses, let fromHostsFile):
            AgentLog.info("locus: uplink: \(broker.host) is \(addresses.map { $0.description }.joined(separator: ", "))\(fromHostsFile ? " (/etc/hosts)" : "")")
        case .connected(let address, let port):
            AgentLog.info("locus: uplink: TCP connected to \(address.family == .v6 ? "[\(address)]" : "\(address)"):\(port)")
        case .secured(let agreed):
            AgentLog.info("locus: uplink: TLS \(agreed), certificate verified for \(broker.host)")
        case .accepted(let sessionPresent):
            opened(sessionPresent: sessionPresent, now)
        }
    }

    /// CONNACK accepted: sending goes on from the delivered position (`lost` put the tail there).
    private func opened(sessionPresent: Bool, _ now: AgentTime) {
        let delivered = outbox.position
        announcement = Announcement(status: true, subscribe: settings.homeAssistant, subscribeRemote: remote != nil,
                                    discovery: settings.homeAssistant ? 0 : nil, states: sessionPresent ? nil : 0)
        lastError = nil
        AgentLog.notice("locus: uplink: connected to \(broker) as \(gateway); sending from log record \(delivered + 1)")
    }

    private func received(_ packet: BrokerConnection.Incoming) {
        switch packet {
        case .acknowledged:
            // The session took the message out of its window (and reset the backoff on the first).
            counters.acknowledged += 1
            outbox.acknowledged()
        case .unknownAcknowledgement:
            counters.unknownAcknowledgements += 1
        case .subscribed(let packetID, let refused):
            guard refused else { break }
            if packetID == remoteSubscription {
                AgentLog.warning("locus: uplink: the broker refused the subscription to \(String(decoding: rendering.topics.remoteInbox(), as: UTF8.self))+; the fleet's configurations and commands do not reach this gateway (the broker's ACL?)")
            } else {
                AgentLog.warning("locus: uplink: the broker refused the subscription to homeassistant/status; Home Assistant's restarts are not followed")
            }
        case .remote(let message):
            if message.kind == .other {
                connection.releaseRemote(message, acknowledge: true)
            } else {
                remoteMessages.append(message)
            }
        case .homeAssistantOnline:
            // Home Assistant came back: announce again (its configs are retained, but a broker
            // without persistence lost them).
            announcement.discovery = 0
            announcement.states = 0
        case .packet, .none:
            break // the connection's own: never handed over
        }
    }

    // MARK: the fleet's messages

    /// The next message from the fleet read this turn, oldest first, with its bytes (valid until
    /// `release`). The loop handles each before the uplink's next turn.
    func nextRemote() -> (message: RemoteInbox.Message, bytes: UnsafeRawBufferPointer)? {
        guard let message = remoteMessages.first else { return nil }
        return (message, connection.remoteBytes(message))
    }

    /// The oldest message handled: acknowledged (PUBACK) when `acknowledge`. Not acknowledging
    /// closes the connection, so that the broker sends it again when the next one opens (the
    /// log could not take its record: nothing acted on it).
    func release(acknowledge: Bool, _ now: AgentTime) {
        let message = remoteMessages.removeFirst()
        connection.releaseRemote(message, acknowledge: acknowledge)
        if !acknowledge && connection.isOpen {
            connection.close()
            lost("a message from the fleet could not be logged; reconnecting to have it again", now)
        }
    }

    // MARK: publishing

    private var hasRoom: Bool { connection.output.count + Uplink.eventRoom <= connection.output.capacity }

    /// One QoS 1 message of log record `sequence` (0: not a log record) into the output: the
    /// payload `rendering` holds, or `text`.
    /// The steady-state path (this, `publish`, `observe`) allocates nothing: the window, the
    /// writer, the topics and the payloads it calls carry `@_noAllocation`, and the agent's
    /// benchmark counts 0 allocations a published event. These glue methods cannot carry it
    /// themselves: they reach the connection, another object, which the compiler cannot prove
    /// stays alive.
    private func send(_ topic: UnsafeRawBufferPointer, retain: Bool, sequence: UInt64, timeNs: Int64 = 0, chained: UInt64? = nil,
                      text: StaticString? = nil) {
        precondition(connection.isOpen, "messages go out on an open connection only")
        if let chained { precondition(chained < sequence, "a record's \"prev\" names a record before it") }
        let packetID = connection.session.window.add(sequence: sequence, timeNs: timeNs, chained: chained)
        let body = text.map { UnsafeRawBufferPointer(start: $0.utf8Start, count: $0.utf8CodeUnitCount) } ?? rendering.payload.bytes
        let sent = connection.output.publish(topic: topic, payload: body, qos: .atLeastOnce, retain: retain, packetID: packetID)
        precondition(sent, "a message larger than the room kept for it")
        counters.published += 1
    }

    /// The status, Home Assistant's configs and the records' states, while there is room.
    private func announce(engine: MonitorEngine, outputs: [FixedName]) {
        if announcement.status && connection.session.window.free >= 1 && hasRoom {
            announcement.status = false
            send(rendering.topics.status(), retain: true, sequence: 0, text: "online")
        }
        if announcement.subscribeRemote && connection.session.window.free >= 1 && hasRoom {
            announcement.subscribeRemote = false
            let packetID = connection.session.window.add(sequence: 0)
            remoteSubscription = packetID
            var filter = Array(rendering.topics.remoteInbox())
            filter.append(UInt8(ascii: "+"))
            _ = filter.withUnsafeBytes { connection.output.subscribe(packetID: packetID, filter: $0, qos: .atLeastOnce) }
        }
        if announcement.subscribe && connection.session.window.free >= 1 && hasRoom {
            announcement.subscribe = false
            // The subscription's id comes from the window too: its SUBACK takes it out.
            let packetID = connection.session.window.add(sequence: 0)
            _ = connection.output.subscribe(packetID: packetID, filter: BrokerPackets.homeAssistantStatusBytes, qos: .atMostOnce)
        }
        if let start = announcement.discovery { announcement.discovery = announceDiscovery(from: start, engine: engine, outputs: outputs) }
        if let start = announcement.states { announcement.states = announceStates(from: start, engine: engine) }
    }

    /// Home Assistant's config for each condition and output from `start` on, while there is
    /// room; returns where to go on (nil: done).
    private func announceDiscovery(from start: Int, engine: MonitorEngine, outputs: [FixedName]) -> Int? {
        var index = 0
        var next: Int? = nil
        engine.forEachRecord { monitor, identifier, record in
            defer { index += 1 }
            guard index >= start, next == nil else { return }
            guard connection.session.window.free >= 1 && hasRoom else { next = index; return }
            rendering.discoveryCondition(monitor: monitor, identifier: identifier, kind: UplinkJSON.ConditionKind(record.condition))
            send(rendering.topics.discoveryCondition(monitor: monitor, identifier: identifier), retain: true, sequence: 0)
        }
        if let next { return next }
        for (offset, output) in outputs.enumerated() where index + offset >= start {
            guard connection.session.window.free >= 1 && hasRoom else { return index + offset }
            rendering.discoveryOutput(output: output)
            send(rendering.topics.discoveryOutput(output: output), retain: true, sequence: 0)
        }
        return nil
    }

    /// Every record's state (retained), for a broker that kept nothing of this gateway.
    private func announceStates(from start: Int, engine: MonitorEngine) -> Int? {
        var index = 0
        var next: Int? = nil
        engine.forEachRecord { monitor, identifier, record in
            defer { index += 1 }
            guard index >= start, next == nil, record.lastEvent.state != .unknown else { return }
            guard connection.session.window.free >= 1 && hasRoom else { next = index; return }
            rendering.state(record.lastEvent, sequence: 0)
            send(rendering.topics.state(monitor: monitor, identifier: identifier), retain: true, sequence: 0)
        }
        return next
    }

    /// The log's records after the tail, as far as the window and the output have room.
    private func publishFromLog(_ log: EventLog) {
        guard connection.session.window.free >= 2 && hasRoom else { return }
        let before = outbox.position
        let durable = log.durable
        guard let read = log.readTail(outbox.tail, { header, bytes in publish(header, bytes, durable: durable) }) else { return }
        precondition(outbox.position >= before, "the uplink's tail moves forward only while connected")
        precondition(outbox.position <= log.newest, "the uplink's tail never passes the log's newest record")
        outbox.report(read)
    }

    /// One log record: false when there is no room for it now, or it is not yet durable (it comes
    /// again next turn). The fleet keeps one copy per (gateway, seq): a record a power cut could
    /// still take must not leave, since its seq would then be given to another record.
    ///
    /// `again`: a record the fleet's `republish` asked for, not the outbox's: its messages are not
    /// retained and its event has no state message (a retained topic keeps the newest state, not
    /// this one), carry no "prev" (the chain is the outbox's), move no cursor (the window holds
    /// them as sequence 0), and fixes are not thinned.
    private func publish(_ header: LogRecordHeader, _ bytes: UnsafeRawBufferPointer, durable: UInt64, again: Bool = false) -> Bool {
        guard header.sequence <= durable else { return false }
        guard connection.session.window.free >= 2 && hasRoom else { return false }
        if !again { precondition(header.sequence > outbox.position, "the tail hands over records after its position") }
        let before = again ? nil : outbox.read(header)
        let sequence = header.sequence, timeNs = header.time
        let windowSequence = again ? 0 : sequence
        var reader = ByteReader(bytes)
        var chained = !again
        switch LogRecordType(rawValue: header.typeCode) {
        case .event? where settings.content.contains(.events):
            guard let event = LogPayload.readEvent(&reader) else { return true }
            rendering.event(event, sequence: sequence, previous: before)
            send(rendering.topics.event(monitor: event.monitor, identifier: event.identifier), retain: false, sequence: windowSequence,
                 timeNs: timeNs, chained: before)
            if !again {
                rendering.state(event, sequence: sequence)
                send(rendering.topics.state(monitor: event.monitor, identifier: event.identifier), retain: true, sequence: sequence,
                     timeNs: timeNs, chained: before)
            }
        case .gpio? where settings.content.contains(.gpio):
            guard let change = LogPayload.readGPIO(&reader) else { return true }
            rendering.gpio(change, timeNs: timeNs, sequence: sequence, previous: before)
            send(rendering.topics.gpio(output: change.output), retain: !again, sequence: windowSequence, timeNs: timeNs, chained: before)
        case .visit? where settings.content.contains(.visits):
            guard let visit = LogPayload.readVisit(&reader) else { return true }
            rendering.visit(visit, sequence: sequence, previous: before)
            send(rendering.topics.visit(), retain: false, sequence: windowSequence, timeNs: timeNs, chained: before)
        case .remote?:
            guard let remote = LogPayload.readRemote(&reader) else { return true }
            rendering.remote(remote, timeNs: timeNs, sequence: sequence, previous: before)
            send(remote.kind == .config ? rendering.topics.remoteConfig() : rendering.topics.remoteCommand(), retain: false,
                 sequence: windowSequence, timeNs: timeNs, chained: before)
        case .fix? where settings.content.contains(.fixes) && (again || outbox.wantsFix(timeNs: timeNs)):
            guard let fix = LogPayload.readFix(&reader) else { return true }
            if !again { outbox.publishedFix(timeNs: timeNs, intervalMs: settings.fixIntervalMs) }
            rendering.fix(fix, sequence: sequence)
            send(rendering.topics.fix(), retain: false, sequence: windowSequence, timeNs: timeNs, chained: before)
            chained = false // a fix is no link of the chain
        default:
            chained = false
        }
        if chained { outbox.chain(sequence) }
        return true
    }

    // MARK: the fleet's republish

    /// A range of the log to publish again (`republish`), read by its own tail.
    struct Republish {
        let tail: LogTail
        let from: UInt64
        let through: UInt64
        var published = 0
    }

    /// The fleet's `republish from...to`: the records the log still has in the range go out again
    /// beside the outbox's, from the next turn. The range as it will be sent (`to` cut to the
    /// log's newest record), or why not.
    func republish(from: UInt64, to: UInt64, log: EventLog) -> Result<ClosedRange<UInt64>, RepublishRefusal> {
        guard republishing == nil else { return .failure(RepublishRefusal("a republish is under way already (\(republishing!.from)...\(republishing!.through))")) }
        guard from <= log.newest else { return .failure(RepublishRefusal("the log's newest record is \(log.newest); nothing from \(from) on")) }
        let through = min(to, log.newest)
        republishing = Republish(tail: LogTail(after: from - 1, bufferBytes: 16 << 10), from: from, through: through)
        AgentLog.notice("locus: uplink: republishing log records \(from) to \(through) for the fleet")
        return .success(from...through)
    }

    struct RepublishRefusal: Error {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    /// The range's next records, as far as the window and the output have room; done when its
    /// tail reaches the end of the range.
    private func republishFromLog(_ log: EventLog) {
        guard let range = republishing, connection.session.window.free >= 2 && hasRoom else { return }
        let durable = log.durable
        let through = range.through
        var published = 0
        let read = log.readTail(range.tail) { header, bytes in
            guard header.sequence <= through else { return false }
            guard publish(header, bytes, durable: durable, again: true) else { return false }
            published += 1
            return true
        }
        republishing?.published += published
        if let read, read.missing > 0 {
            AgentLog.warning("locus: uplink: republish: \(read.missing) records of the range were deleted by retention")
        }
        if range.tail.position >= through {
            AgentLog.notice("locus: uplink: republished log records \(range.from) to \(through) (\(republishing!.published) records)")
            republishing = nil
        }
    }

    // MARK: live sightings and presence

    /// The period's presence message when it is due, at QoS 0 when the connection is up and
    /// the output has room for it; else the period is counted as skipped.
    private func publishPresence(_ now: AgentTime) {
        guard presence.take(nowNs: now.monotonic.nanoseconds, time: now.utc, gateway: rendering.topics.gateway, into: &presenceLine) else { return }
        let room = connection.output.count + presenceLine.count + UplinkTopics.maximumPrefixBytes + 16 <= connection.output.capacity
        let sent = connection.isOpen && room
            && connection.output.publish(topic: rendering.topics.presence(), payload: presenceLine.bytes, qos: .atMostOnce, retain: false, packetID: 0)
        presence.counted(sent: sent)
    }

    /// Beacons whose sightings are rate-limited at once; past it the least recently published
    /// one gives its slot up.
    static let sightingSlots = 256

    /// A sighting, published live at QoS 0 when `what` has "sightings" and the connection is up:
    /// at most one a beacon a `sighting_interval`. Sightings are not log records: while the
    /// broker is away they are not kept (the backlog is for events, GPIO changes, visits, fixes).
    func observe(_ sighting: Sighting, _ now: AgentTime) {
        presence.observe(sighting, nowNs: now.monotonic.nanoseconds)
        guard settings.content.contains(.sightings), connection.isOpen, hasRoom else { return }
        guard sightings.admit(sighting.identity, timeNs: sighting.time.totalNanoseconds, intervalMs: settings.sightingIntervalMs) else { return }
        rendering.sighting(sighting)
        if connection.output.publish(topic: rendering.topics.sighting(sighting.identity), payload: rendering.payload.bytes, qos: .atMostOnce,
                                     retain: false, packetID: 0) {
            sightings.published += 1
        }
    }
}

/// The uplink's counters, for status and the log.
struct UplinkCounters {
    var published = 0
    var acknowledged = 0
    var connections = 0
    var failures = 0
    /// PUBACKs for no message in flight: a broker's mistake, counted, never acted on.
    var unknownAcknowledgements = 0
}

/// The live sightings' rate limits: each recently published beacon and when its next sighting
/// may go (UTC ns), in `capacity` slots allocated at start; past them the beacon whose next
/// sighting was due earliest gives its slot up.
struct SightingLimits: ~Copyable {
    private let slots: UnsafeMutableBufferPointer<(identity: BeaconIdentity, nextNs: Int64)>
    private var count = 0
    /// Sightings published (counted by the caller, which knows whether the output took it).
    var published = 0

    init(capacity: Int) {
        precondition(capacity > 0, "at least one beacon's sightings are rate-limited")
        slots = .allocate(capacity: capacity)
    }

    deinit { slots.deallocate() }

    /// Whether a sighting of `identity` at `timeNs` may go now; when it may, the beacon's next
    /// one waits `intervalMs`.
    mutating func admit(_ identity: BeaconIdentity, timeNs: Int64, intervalMs: Int64) -> Bool {
        precondition(intervalMs >= 0, "a sighting interval is not negative")
        var slot = -1
        var oldest = 0
        for index in 0..<count {
            if slots[index].identity == identity { slot = index; break }
            if slots[index].nextNs < slots[oldest].nextNs { oldest = index }
        }
        if slot >= 0 {
            guard timeNs >= slots[slot].nextNs else { return false }
        } else if count < slots.count {
            slot = count
            count += 1
        } else {
            slot = oldest
        }
        precondition(count <= slots.count, "rate-limited beacons within the slots")
        slots[slot] = (identity, timeNs + intervalMs * 1_000_000)
        return true
    }
}

/// Why the uplink cannot be set up at start.
struct UplinkSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
