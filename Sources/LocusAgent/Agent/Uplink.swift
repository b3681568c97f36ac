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
/// and, with `home_assistant = true`, discovery configs under `homeassistant/`.
///
/// Steady state: a turn reads only the log's new bytes (`LogTail`), renders into buffers
/// allocated at start, and allocates nothing per message.
final class Uplink: LoopComponent {
    /// The output queue: a turn's messages (`max_inflight` of them at most) and the rest of a
    /// partly sent one.
    static let outputBytes = 96 << 10
    /// Room kept in the output for what one step writes (an event and its state, or a discovery
    /// config), with topics and headers.
    static let eventRoom = UplinkJSON.maximumDiscoveryBytes + UplinkJSON.maximumEventBytes + UplinkJSON.maximumStateBytes + 1024
    /// How often the delivered position is committed to the log while messages are acknowledged
    /// (a crash resends at most this much).
    static let commitIntervalNs: Int64 = 1_000_000_000
    static let commitMessages = 256

    let settings: SiteConfig.Uplink
    let gateway: String
    let prefix: String
    private let connection: BrokerConnection
    private var window: PublishWindow
    private var topics: UplinkTopics
    private var payload = JSONWriter(capacity: max(UplinkJSON.maximumDiscoveryBytes, UplinkJSON.maximumEventBytes))
    private let tail: LogTail
    private var backoff = ReconnectBackoff()
    private var retryAt: MonotonicInstant? = nil
    private var openedAt: MonotonicInstant? = nil
    /// The delivered position last written to the log, and messages acknowledged since.
    private var committed: UInt64
    /// The last record the tail passed, and the last of a kind that carries "prev" (events, GPIO
    /// changes, visits) that it published: the next such record's "prev" (nil: not known).
    private var lastRead: UInt64
    private var chained: UInt64?
    private var acknowledgedSinceCommit = 0
    private var acknowledgedSinceOpen = 0
    private var lastCommit = MonotonicInstant(nanoseconds: 0)
    /// Fix time (UTC ns) before which no fix is published (`fix_interval`).
    private var nextFixNs: Int64 = 0
    /// What goes out first on a new connection: the status, Home Assistant's subscription and
    /// configs, and (when the broker kept nothing of us) every record's state.
    private var announcement = Announcement()
    /// The agent's version, for Home Assistant's device.
    private let version: UnsafeMutableRawBufferPointer
    /// `[geocoding] annotate`: events, visits and fixes carry the place nearest them.
    private let places: PlaceLabels?

    /// Each recently published beacon and when its next sighting may go (UTC ns).
    private let sightings: UnsafeMutableBufferPointer<(identity: BeaconIdentity, nextNs: Int64)>
    private var sightingCount = 0
    private(set) var sightingsPublished = 0

    // Counters for status and the log.
    private(set) var published = 0
    private(set) var acknowledged = 0
    private(set) var connections = 0
    private(set) var failures = 0
    private var lastError: String? = nil
    private var unknownAcknowledgements = 0
    private var reportedDeleted: UInt64 = 0
    /// The oldest undelivered record's time when the connection was lost (the window knows it
    /// while connected).
    private var oldestAtLossNs: Int64? = nil

    struct Announcement {
        var status = false
        var subscribe = false
        /// Next condition (then output) to announce to Home Assistant; nil: none.
        var discovery: Int? = nil
        /// Next record whose state is announced again; nil: none.
        var states: Int? = nil
    }

    /// The settings made concrete: gateway id, prefix and client id. Fails with the reason when
    /// the gateway id cannot be known.
    init(_ settings: SiteConfig.Uplink, cursor: UplinkCursor?, places: PlaceLabels? = nil, machineID: () -> String?) throws(UplinkSetupError) {
        self.settings = settings
        self.places = places
        guard let gateway = settings.gateway ?? machineID() else {
            throw UplinkSetupError("no gateway id: /etc/machine-id cannot be read; set uplink.gateway")
        }
        self.gateway = gateway
        prefix = settings.topicPrefix ?? UplinkTopics.defaultPrefix(gateway: gateway)
        topics = UplinkTopics(prefix: prefix, gateway: gateway)
        window = PublishWindow(capacity: settings.maxInflight)
        committed = cursor?.delivered ?? 0
        lastRead = committed
        // No cursor: nothing was ever delivered, and the chain starts with the log.
        if let cursor { chained = cursor.chained } else { chained = 0 }
        sightings = .allocate(capacity: Uplink.sightingSlots)
        let versionBytes = Array(LocusVersion.string.utf8.prefix(UplinkJSON.maximumVersionBytes))
        version = .allocate(byteCount: versionBytes.count, alignment: 1)
        version.copyBytes(from: versionBytes)
        tail = LogTail(after: committed)
        let options = Uplink.connectOptions(settings, clientID: settings.clientID ?? gateway, statusTopic: prefix + "/status", will: true)
        connection = BrokerConnection(settings: BrokerConnection.Settings(broker: settings.broker, tls: nil, connect: options),
                                      outputBytes: Uplink.outputBytes)
    }

    deinit {
        version.deallocate()
        sightings.deallocate()
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
        if connection.phase == .idle { next.consider(retryAt ?? MonotonicInstant(nanoseconds: 0)) }
        if acknowledgedSinceCommit > 0 { next.consider(lastCommit + Uplink.commitIntervalNs) }
    }

    func status(into line: inout JSONWriter) {
        line.beginObject("uplink")
        line.string("broker", settings.broker.description)
        line.string("gateway", gateway)
        line.string("state", stateName)
        line.integer("cursor", committed)
        line.integer("in_flight", window.count)
        line.integer("published", published)
        line.integer("acknowledged", acknowledged)
        if settings.content.contains(.sightings) { line.integer("sightings_published", sightingsPublished) }
        if let peer = connection.peer { line.string("peer", peer.description) } else { line.null("peer") }
        line.integer("connections", connections)
        line.integer("failures", failures)
        // PUBACKs for no message in flight: a broker's mistake, counted, never acted on.
        line.integer("unknown_acknowledgements", unknownAcknowledgements)
        if let lastError { line.string("last_error", lastError) } else { line.null("last_error") }
        line.endObject()
    }

    /// The backlog's part of the status, which needs the log.
    func backlogStatus(_ log: EventLog, now: AgentTime, into line: inout JSONWriter) {
        line.beginObject("uplink_backlog")
        let delivered = window.delivered(readThrough: tail.position)
        line.integer("records", log.newest - min(delivered, log.newest))
        line.integer("bytes", log.backlogBytes(after: delivered))
        if let oldestNs = window.oldest?.timeNs ?? oldestAtLossNs, delivered < log.newest {
            line.integer("oldest_age_s", max(0, (now.utc.totalNanoseconds - oldestNs) / 1_000_000_000))
        } else {
            line.null("oldest_age_s")
        }
        line.integer("deleted_undelivered", log.undeliveredDeleted)
        line.endObject()
    }

    private var stateName: StaticString {
        switch connection.phase {
        case .idle: return retryAt == nil ? "starting" : "waiting to reconnect"
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
        _ = connection.output.publish(topic: topics.status(), payload: UnsafeRawBufferPointer(start: offline.utf8Start, count: offline.utf8CodeUnitCount),
                                      qos: .atLeastOnce, retain: true, packetID: window.unrecordedPacketID())
        _ = connection.output.disconnect()
        _ = connection.flush(now.monotonic.nanoseconds)
        connection.close()
    }

    /// The delivered position, committed to the log before the agent stops.
    func commitAtShutdown(_ log: EventLog, now: AgentTime) { commit(log, now, force: true) }

    // MARK: the turn

    /// The turn's work: connect when due, read the broker's packets, publish what the log has
    /// that the window and the output have room for, send, and commit the delivered position.
    func service(_ poll: borrowing PollSet, _ now: AgentTime, log: EventLog, engine: MonitorEngine, outputs: [FixedName]) {
        let nowNs = now.monotonic.nanoseconds
        if connection.phase == .idle, retryAt.map({ now.monotonic >= $0 }) ?? true {
            startConnecting(now)
        }
        if let problem = connection.service(poll, nowNs: nowNs) { lost(problem, now) }
        while let packet = connection.nextIncoming() { received(packet) }
        connection.takeSteps { step in took(step, now) }
        guard connection.isOpen else { return }
        announce(engine: engine, outputs: outputs)
        publishFromLog(log)
        if let problem = connection.flush(nowNs) { lost(problem, now) }
        commit(log, now, force: false)
        reportDeleted(log)
    }

    private func startConnecting(_ now: AgentTime) {
        retryAt = nil
        connections += 1
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

    /// The connection ended (or could not be made): reported, and tried again after the backoff.
    private func lost(_ problem: String, _ now: AgentTime) {
        failures += 1
        let wasOpen = openedAt != nil
        openedAt = nil
        if let oldest = window.oldest { oldestAtLossNs = oldest.timeNs }
        // What was in flight was not acknowledged: the tail goes back to the delivered position,
        // so the next connection sends it again.
        let delivered = window.delivered(readThrough: tail.position)
        chained = window.chained(current: chained)
        lastRead = delivered
        tail.reposition(after: delivered)
        window.removeAll()
        let delayNs = backoff.next(random: UInt64.random(in: 0...UInt64.max))
        retryAt = now.monotonic + delayNs
        if lastError != problem || wasOpen {
            AgentLog.warning("locus: uplink: \(problem); trying again in \(Quantity.describe(nanoseconds: delayNs))")
        }
        lastError = problem
    }

    private func took(_ step: BrokerConnection.Step, _ now: AgentTime) {
        switch step {
        case .resolved(let addresses, let fromHostsFile):
            AgentLog.info("locus: uplink: \(settings.broker.host) is \(addresses.map { $0.description }.joined(separator: ", "))\(fromHostsFile ? " (/etc/hosts)" : "")")
        case .connected(let address, let port):
            AgentLog.info("locus: uplink: TCP connected to \(address.family == .v6 ? "[\(address)]" : "\(address)"):\(port)")
        case .secured(let agreed):
            AgentLog.info("locus: uplink: TLS \(agreed), certificate verified for \(settings.broker.host)")
        case .accepted(let sessionPresent):
            opened(sessionPresent: sessionPresent, now)
        }
    }

    /// CONNACK accepted: sending goes on from the delivered position (`lost` put the tail there).
    private func opened(sessionPresent: Bool, _ now: AgentTime) {
        openedAt = now.monotonic
        acknowledgedSinceOpen = 0
        let delivered = tail.position
        announcement = Announcement(status: true, subscribe: settings.homeAssistant, discovery: settings.homeAssistant ? 0 : nil,
                                    states: sessionPresent ? nil : 0)
        lastError = nil
        AgentLog.notice("locus: uplink: connected to \(settings.broker) as \(gateway); sending from log record \(delivered + 1)")
    }

    private func received(_ packet: BrokerConnection.Incoming) {
        switch packet {
        case .acknowledged(let packetID):
            if window.acknowledge(packetID) {
                // The broker works: a later failure starts the backoff from the beginning.
                if acknowledgedSinceOpen == 0 { backoff.reset() }
                acknowledged += 1
                acknowledgedSinceOpen += 1
                acknowledgedSinceCommit += 1
            } else {
                unknownAcknowledgements += 1
            }
        case .subscribed(let packetID, let refused):
            // The subscription's id came from the window too.
            _ = window.acknowledge(packetID)
            if refused { AgentLog.warning("locus: uplink: the broker refused the subscription to homeassistant/status; Home Assistant's restarts are not followed") }
        case .homeAssistantOnline:
            // Home Assistant came back: announce again (its configs are retained, but a broker
            // without persistence lost them).
            announcement.discovery = 0
            announcement.states = 0
        case .connack, .pingresp, .message, .none:
            break // the connection's own: never handed over
        }
    }

    // MARK: publishing

    private var hasRoom: Bool { connection.output.count + Uplink.eventRoom <= connection.output.capacity }

    /// One QoS 1 message of log record `sequence` (0: not a log record) into the output.
    /// The steady-state path (this, `publish`, `observe`) allocates nothing: the window, the
    /// writer, the topics and the payloads it calls carry `@_noAllocation`, and the agent's
    /// benchmark counts 0 allocations a published event. These glue methods cannot carry it
    /// themselves: they reach the connection, another object, which the compiler cannot prove
    /// stays alive.
    private func send(_ topic: UnsafeRawBufferPointer, retain: Bool, sequence: UInt64, timeNs: Int64 = 0, chained: UInt64? = nil,
                      text: StaticString? = nil) {
        let packetID = window.add(sequence: sequence, timeNs: timeNs, chained: chained)
        let body = text.map { UnsafeRawBufferPointer(start: $0.utf8Start, count: $0.utf8CodeUnitCount) } ?? payload.bytes
        let sent = connection.output.publish(topic: topic, payload: body, qos: .atLeastOnce, retain: retain, packetID: packetID)
        precondition(sent, "a message larger than the room kept for it")
        published += 1
    }

    /// The status, Home Assistant's configs and the records' states, while there is room.
    private func announce(engine: MonitorEngine, outputs: [FixedName]) {
        if announcement.status && window.free >= 1 && hasRoom {
            announcement.status = false
            send(topics.status(), retain: true, sequence: 0, text: "online")
        }
        if announcement.subscribe && window.free >= 1 && hasRoom {
            announcement.subscribe = false
            _ = connection.output.subscribe(packetID: window.add(sequence: 0), filter: BrokerPackets.homeAssistantStatusBytes,
                                            qos: .atMostOnce)
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
            guard window.free >= 1 && hasRoom else { next = index; return }
            payload.reset()
            UplinkJSON.discoveryCondition(monitor: monitor, identifier: identifier, kind: UplinkJSON.ConditionKind(record.condition),
                                          gateway: topics.gateway, prefix: topics.prefix, version: UnsafeRawBufferPointer(version), into: &payload)
            send(topics.discoveryCondition(monitor: monitor, identifier: identifier), retain: true, sequence: 0)
        }
        if let next { return next }
        for (offset, output) in outputs.enumerated() where index + offset >= start {
            guard window.free >= 1 && hasRoom else { return index + offset }
            payload.reset()
            UplinkJSON.discoveryOutput(output: output, gateway: topics.gateway, prefix: topics.prefix, version: UnsafeRawBufferPointer(version),
                                       into: &payload)
            send(topics.discoveryOutput(output: output), retain: true, sequence: 0)
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
            guard window.free >= 1 && hasRoom else { next = index; return }
            payload.reset()
            UplinkJSON.state(record.lastEvent, sequence: 0, gateway: topics.gateway, into: &payload)
            send(topics.state(monitor: monitor, identifier: identifier), retain: true, sequence: 0)
        }
        return next
    }

    /// The log's records after the tail, as far as the window and the output have room.
    private func publishFromLog(_ log: EventLog) {
        guard window.free >= 2 && hasRoom else { return }
        guard let read = log.readTail(tail, { header, bytes in publish(header, bytes) }) else { return }
        if read.missing > 0 {
            AgentLog.error("locus: uplink: \(read.missing) log records were deleted by retention before they were sent; going on from record \(tail.position + 1)")
        }
        if read.corrupt > 0 {
            AgentLog.error("locus: uplink: \(read.corrupt) damaged log regions skipped (locus log verify shows them)")
        }
    }

    /// One log record: false when there is no room for it now (it comes again next turn).
    private func publish(_ header: LogRecordHeader, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard window.free >= 2 && hasRoom else { return false }
        // Records missing before this one (deleted by retention, or damaged): the next "prev"
        // names the last of them, which no store holds, so the loss shows there as a gap.
        if header.sequence != lastRead &+ 1 { chained = header.sequence &- 1 }
        lastRead = header.sequence
        let before = chained
        var reader = ByteReader(bytes)
        let sequence = header.sequence, timeNs = header.time
        switch LogRecordType(rawValue: header.typeCode) {
        case .event? where settings.content.contains(.events):
            guard let event = LogPayload.readEvent(&reader) else { return true }
            payload.reset()
            UplinkJSON.event(event, sequence: sequence, previous: before, gateway: topics.gateway, places: places, into: &payload)
            send(topics.event(monitor: event.monitor, identifier: event.identifier), retain: false, sequence: sequence, timeNs: timeNs, chained: before)
            payload.reset()
            UplinkJSON.state(event, sequence: sequence, gateway: topics.gateway, into: &payload)
            send(topics.state(monitor: event.monitor, identifier: event.identifier), retain: true, sequence: sequence, timeNs: timeNs, chained: before)
            chained = sequence
        case .gpio? where settings.content.contains(.gpio):
            guard let change = LogPayload.readGPIO(&reader) else { return true }
            payload.reset()
            UplinkJSON.gpio(change, time: UTCTime(nanoseconds: timeNs), sequence: sequence, previous: before, gateway: topics.gateway, into: &payload)
            send(topics.gpio(output: change.output), retain: true, sequence: sequence, timeNs: timeNs, chained: before)
            chained = sequence
        case .visit? where settings.content.contains(.visits):
            guard let visit = LogPayload.readVisit(&reader) else { return true }
            payload.reset()
            UplinkJSON.visit(visit, sequence: sequence, previous: before, gateway: topics.gateway, places: places, into: &payload)
            send(topics.visit(), retain: false, sequence: sequence, timeNs: timeNs, chained: before)
            chained = sequence
        case .fix? where settings.content.contains(.fixes) && timeNs >= nextFixNs:
            guard let fix = LogPayload.readFix(&reader) else { return true }
            nextFixNs = timeNs + settings.fixIntervalMs * 1_000_000
            payload.reset()
            UplinkJSON.fix(fix, sequence: sequence, gateway: topics.gateway, places: places, into: &payload)
            send(topics.fix(), retain: false, sequence: sequence, timeNs: timeNs, chained: before)
        default:
            break
        }
        return true
    }

    // MARK: live sightings

    /// Beacons whose sightings are rate-limited at once; past it the least recently published
    /// one gives its slot up.
    static let sightingSlots = 256

    /// A sighting, published live at QoS 0 when `what` has "sightings" and the connection is up:
    /// at most one a beacon a `sighting_interval`. Sightings are not log records: while the
    /// broker is away they are not kept (the backlog is for events, GPIO changes, visits, fixes).
    func observe(_ sighting: Sighting) {
        guard settings.content.contains(.sightings), connection.isOpen, hasRoom else { return }
        let timeNs = sighting.time.totalNanoseconds
        var slot = -1
        var oldest = 0
        for index in 0..<sightingCount {
            if sightings[index].identity == sighting.identity { slot = index; break }
            if sightings[index].nextNs < sightings[oldest].nextNs { oldest = index }
        }
        if slot >= 0 {
            guard timeNs >= sightings[slot].nextNs else { return }
        } else if sightingCount < sightings.count {
            slot = sightingCount
            sightingCount += 1
        } else {
            slot = oldest
        }
        sightings[slot] = (sighting.identity, timeNs + settings.sightingIntervalMs * 1_000_000)
        payload.reset()
        UplinkJSON.sighting(sighting, gateway: topics.gateway, into: &payload)
        if connection.output.publish(topic: topics.sighting(sighting.identity), payload: payload.bytes, qos: .atMostOnce, retain: false, packetID: 0) {
            sightingsPublished += 1
        }
    }

    // MARK: the cursor

    /// Writes the delivered position to the log once a second while messages are acknowledged
    /// (or every `commitMessages`), and at the end.
    private func commit(_ log: EventLog, _ now: AgentTime, force: Bool) {
        guard acknowledgedSinceCommit > 0 || force else { return }
        guard force || acknowledgedSinceCommit >= Uplink.commitMessages || now.monotonic >= lastCommit + Uplink.commitIntervalNs else { return }
        let delivered = window.delivered(readThrough: tail.position)
        guard delivered > committed else { return }
        do {
            try log.commitUplink(UplinkCursor(delivered: delivered, chained: window.chained(current: chained)), now)
        } catch {
            // The log's own failure path reports it; the next commit tries again.
            return
        }
        committed = delivered
        acknowledgedSinceCommit = 0
        lastCommit = now.monotonic
    }

    /// Records retention deleted before they were delivered: said once per occurrence.
    private func reportDeleted(_ log: EventLog) {
        let deleted = log.undeliveredDeleted
        guard deleted > reportedDeleted else { return }
        AgentLog.error("locus: uplink: the log reached [log] retain with the broker away: \(deleted - reportedDeleted) records were deleted before they were delivered (\(deleted) in all)")
        reportedDeleted = deleted
    }
}

/// Why the uplink cannot be set up at start.
struct UplinkSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
