import LocusCore
import LocusDevices

/// `locus-fleet ingest`: the gateways' MQTT messages into the fleet database, each record once.
///
///     broker --PUBLISH QoS 1--> batch --COPY + merge, COMMIT--> PostgreSQL
///            <--PUBACK (after the commit)--
///
/// The session is persistent (clean session 0, a fixed client id): while the ingest is away the
/// broker queues what the gateways publish, and a message is acknowledged only once the
/// transaction holding it has committed. A crash, a lost connection or an unreachable database
/// before that leaves the message unacknowledged, so the broker sends it again; a message
/// stored and then sent again meets its own row (`RecordBatch`: stored once per (gateway, seq)).
/// Order does not matter: a record's place is its seq, whatever the order of arrival, so
/// several workers can share the topics (`--share`).
///
/// A batch is written when it is full (`batchMessages`) or when nothing more is waiting on the
/// socket (group commit: the busier the broker, the larger the batches, up to what the broker
/// lets be in flight unacknowledged; mosquitto's `max_inflight_messages`). It is written on a
/// thread of its own (`BatchWriter`) while the next is read: a broker that lets twice the batch
/// be in flight keeps both threads busy.
///
/// On a NATS cluster (`nats`) the ingest reads the stream NATS keeps the MQTT messages in, as
/// `JetStreamSource` says, on the same terms: acknowledged after the commit, sent again when
/// not. Each worker starts on a node chosen by its name and moves to the next when one is lost.
public final class Ingest {
    public struct Settings {
        /// The MQTT broker, or nil with `nats`.
        var broker: FleetBroker.Settings?
        /// The NATS cluster, or nil with `broker`.
        var nats: JetStreamSource.Settings? = nil
        var topics: IngestTopics
        var batchMessages = 1_000
        var progressIntervalMs: Int64 = 10_000
        /// The waits before each new connection to the broker after a failure; the last repeats.
        /// Short: a broker restarting takes seconds, and until a worker is back a share group's
        /// messages may reach nobody (docs/fleet.md, "Several workers").
        var reconnectDelaysMs = [100, 250, 500, 1_000]
    }

    public struct Counters: Equatable {
        public var messages = 0
        /// Records stored now, and records that were stored already (a redelivery, a duplicate).
        public var inserted = 0
        public var alreadyStored = 0
        public var quarantined = 0
        public var statuses = 0
        public var batches = 0
        public var connections = 0
        /// Messages under the prefix that the ingest does not store (a NATS stream holds every
        /// topic: retained states, fixes, sightings), acknowledged and let pass.
        public var passed = 0
    }

    let settings: Settings
    let database: FleetDatabase
    let notice: (String) -> Void
    private var broker: IngestSource? = nil
    /// The NATS node tried next: an index into `settings.nats.nodes`.
    private var node = 0
    private var batch = IngestBatch()
    /// The thread that writes a batch while the next is read (during `run`), and the batch with
    /// it: acknowledged once its COMMIT has returned.
    private var writer: BatchWriter? = nil
    private var writing: IngestBatch? = nil
    /// Where the writer leaves the outcome of the batch it wrote.
    private final class Slot { var written: Result<Written, FleetError>? = nil }
    private let slot = Slot()
    public private(set) var counters = Counters()
    private var reported = Counters()
    private var lastProgressMs = FleetClock.monotonicMs()
    /// The newest record's age when its batch committed (the gateway's clock to ours), last batch.
    private var lastLagMs: Int64? = nil

    init(_ settings: Settings, database: FleetDatabase, notice: @escaping (String) -> Void) {
        self.settings = settings
        self.database = database
        self.notice = notice
        if let nodes = settings.nats?.nodes, !nodes.isEmpty {
            // Workers named apart start on different nodes (FNV-1a of the name).
            let hash = Array((settings.nats?.name ?? "").utf8).reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 }
            node = Int(hash % UInt32(nodes.count))
        }
    }

    /// Runs until `stop()` says so (checked at least every second), then writes what it holds,
    /// acknowledges it and disconnects. Throws only when the database refuses the ingest's own
    /// statements (a schema that is not this version's): nothing can be stored then.
    public func run(until stop: () -> Bool) throws(FleetError) {
        let writer = BatchWriter()
        self.writer = writer
        defer {
            writer.stop()
            self.writer = nil
        }
        var failures = 0
        while !stop() {
            if broker == nil {
                do {
                    try connect()
                    failures = 0
                } catch {
                    let delayMs = settings.reconnectDelaysMs[min(failures, settings.reconnectDelaysMs.count - 1)]
                    failures += 1
                    notice("\(error.message); connecting again in \(Double(delayMs) / 1000) s")
                    pause(delayMs, unless: stop)
                    continue
                }
            }
            do {
                try step()
            } catch {
                if error.isRefused { throw error }
                drop(error.message)
            }
            progress(force: false)
        }
        if broker != nil {
            do {
                try finishWriting(waitMs: nil)
                if !batch.isEmpty {
                    startWriting()
                    try finishWriting(waitMs: nil)
                }
            } catch {
                if error.isRefused { throw error }
                drop(error.message)
            }
        }
        broker?.disconnect()
        broker = nil
        progress(force: true)
    }

    private func connect() throws(FleetError) {
        if let nats = settings.nats { return try connectNATS(nats) }
        guard let settings = settings.broker else { return }
        let made = try FleetBroker(settings)
        try made.subscribe(self.settings.topics.filters)
        counters.connections += 1
        let session = made.sessionPresent ? "the broker kept this client's session" : "a new session"
        notice("connected to \(settings.broker) (\(made.peer)) as \(String(decoding: settings.connect.clientID, as: UTF8.self)), "
               + "\(session); subscribed at QoS 1 to \(self.settings.topics.filters.joined(separator: ", "))")
        if !made.sessionPresent && counters.connections > 1 {
            notice("the broker kept no session for this client: what the gateways published while the ingest was away was not queued for it. "
                   + "Keep the broker's persistence on (mosquitto: persistence true) and the same --client-id; locus-fleet status shows any gap, and import fills it from the gateways' logs")
        }
        broker = made
        for incoming in made.takeEarly() { take(incoming) }
    }

    /// A node of the NATS cluster, the next one after a failure.
    private func connectNATS(_ nats: JetStreamSource.Settings) throws(FleetError) {
        let address = nats.nodes[node]
        let made: JetStreamSource
        do {
            made = try JetStreamSource(nats, node: address)
        } catch {
            node = (node + 1) % nats.nodes.count
            throw error
        }
        counters.connections += 1
        notice("connected to \(made.description) as \(nats.name), node \(node + 1) of \(nats.nodes.count); consumer \(nats.durable) on "
               + "\(NATSSubjects.mqttStream) for \(nats.filter): \(made.waiting) messages waiting")
        broker = made
    }

    /// The connection is given up: nothing of the batch is acknowledged, so the broker sends it
    /// again on the next connection (what was committed meets its rows).
    private func drop(_ reason: String) {
        // A batch with the writer is let finish: its messages go again anyway (the connection
        // they came on is gone), and the next batch must not share the database connection.
        _ = writer?.take(waitMs: nil)
        let pending = batch.count + (writing?.count ?? 0)
        writing = nil
        notice(reason + (pending > 0 ? "; the \(pending) messages not yet stored were not acknowledged: the broker sends them again" : ""))
        broker = nil
        batch = IngestBatch()
        if let nodes = settings.nats?.nodes { node = (node + 1) % nodes.count }
    }

    /// Reads what the broker sends into the batch while the writer writes the one before; hands
    /// the batch over when the writer is free and the batch full or the socket empty. A full
    /// batch waits for the writer instead of growing.
    private func step() throws(FleetError) {
        guard let broker else { return }
        let writerBusy = writing != nil
        if writerBusy && batch.count >= settings.batchMessages {
            try finishWriting(waitMs: 100)
        } else {
            // Nothing to do but read: wait on the socket. A batch with the writer: look at the
            // writer every 2 ms, so its messages are acknowledged soon after their COMMIT.
            let timeoutMs: Int32 = writerBusy ? 2 : batch.isEmpty ? 1_000 : 0
            for incoming in try broker.read(timeoutMs: timeoutMs) { take(incoming) }
            try finishWriting(waitMs: 0)
        }
        if writing == nil && (batch.count >= settings.batchMessages || (!batch.isEmpty && !broker.hasInput)) { startWriting() }
        try broker.keepAlive()
    }

    private func take(_ incoming: FleetBroker.Incoming) {
        guard case .publish(let message) = incoming else { return }
        counters.messages += 1
        let topic = settings.topics.classify(message.topic)
        if topic == .foreign && settings.nats != nil {
            counters.passed += 1
            return batch.pass(message)
        }
        batch.add(message, as: topic)
    }

    /// A batch written: what was stored, and the batch as written (a record PostgreSQL refused
    /// moved to its quarantine).
    struct Written {
        var batch: IngestBatch
        var outcome: BatchOutcome
    }

    /// Hands the batch to the writer: one transaction, on the writer's thread.
    private func startWriting() {
        guard let writer else { return }
        var handed = batch
        batch = IngestBatch()
        writing = handed
        let database = database
        let notice = notice
        let slot = slot
        slot.written = nil
        writer.start {
            do throws(FleetError) {
                let outcome = try Self.store(&handed, database, notice)
                slot.written = .success(Written(batch: handed, outcome: outcome))
            } catch {
                slot.written = .failure(error)
            }
        }
    }

    /// The batch with the writer, once written (waiting at most `waitMs`; nil: until it is):
    /// its messages acknowledged, the counters counted. A failure to write it is thrown.
    private func finishWriting(waitMs: Int64?) throws(FleetError) {
        guard writing != nil, writer?.take(waitMs: waitMs) == true, let done = slot.written else { return }
        writing = nil
        slot.written = nil
        let written = try done.get()
        try broker?.acknowledge(written.batch.packetIDs)
        counters.batches += 1
        counters.inserted += written.outcome.inserted
        counters.alreadyStored += written.batch.records.count - written.outcome.inserted
        counters.quarantined += written.batch.quarantine.count
        counters.statuses += written.batch.statuses.count
        let nowMs = FleetClock.wallMs()
        lastLagMs = written.batch.records.compactMap { FleetJSON.timestampMs($0.time) }.max().map { nowMs - $0 }
    }

    /// Writes `batch` in one transaction (on the writer's thread).
    private static func store(_ batch: inout IngestBatch, _ database: FleetDatabase,
                              _ notice: (String) -> Void) throws(FleetError) -> BatchOutcome {
        // A batch of messages let pass only has nothing to write.
        guard !batch.records.isEmpty || !batch.quarantine.isEmpty || !batch.statuses.isEmpty else { return BatchOutcome() }
        do {
            return try database.write(batch.records, batch.quarantine, statuses: batch.statuses,
                                      what: "storing a batch of \(batch.count) messages")
        } catch where error.isRefused {
            notice("\(error.message); storing the batch's records one by one to find the one refused")
            return try storeOneByOne(&batch, database)
        }
    }

    /// A record PostgreSQL refuses (a check the mapping missed) goes to the quarantine with the
    /// server's reason; the others are stored. Only a refusal of the quarantine itself throws.
    private static func storeOneByOne(_ batch: inout IngestBatch, _ database: FleetDatabase) throws(FleetError) -> BatchOutcome {
        var outcome = BatchOutcome()
        var stored: [FleetRecord] = []
        for (record, origin) in zip(batch.records, batch.origins) {
            do {
                outcome.inserted += try database.write([record], [], what: "storing \(record.gateway) seq \(record.seq)").inserted
                stored.append(record)
            } catch where error.isRefused {
                batch.quarantine.append(QuarantineEntry(source: .mqtt, origin: origin.topic, payload: origin.payload,
                                                        reason: "PostgreSQL refused it: \(error.message)"))
            }
        }
        batch.records = stored
        outcome.quarantined = try database.write([], batch.quarantine, statuses: batch.statuses, what: "storing the quarantine").quarantined
        return outcome
    }

    /// A line every `progressIntervalMs` when something happened, and one at the end.
    private func progress(force: Bool) {
        let now = FleetClock.monotonicMs()
        guard force || (now - lastProgressMs >= settings.progressIntervalMs && counters != reported) else { return }
        lastProgressMs = now
        reported = counters
        var line = "\(counters.messages) messages: \(counters.inserted) records stored, \(counters.alreadyStored) already stored, "
        line += "\(counters.quarantined) quarantined, \(counters.statuses) statuses"
        if settings.nats != nil { line += ", \(counters.passed) passed" }
        line += "; \(counters.batches) batches"
        if counters.batches > 0 { line += " (\(counters.messages / counters.batches) messages a batch)" }
        if let lag = lastLagMs { line += "; the last batch's newest record was \(lag) ms old when stored" }
        notice(line)
    }

    private func pause(_ milliseconds: Int, unless stop: () -> Bool) {
        var left = milliseconds
        while left > 0 && !stop() {
            MonotonicClock.sleep(milliseconds: min(left, 100))
            left -= 100
        }
    }
}

/// The messages read since the last commit, sorted into what each becomes.
struct IngestBatch {
    var records: [FleetRecord] = []
    /// Each record's topic and payload, for the quarantine should PostgreSQL refuse it.
    var origins: [(topic: String, payload: [UInt8])] = []
    var quarantine: [QuarantineEntry] = []
    var statuses: [GatewayStatus] = []
    /// The QoS 1 messages' packet ids, in the order they came (PUBACKs go out in that order).
    var packetIDs: [UInt16] = []
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// A message not stored, acknowledged with the batch.
    mutating func pass(_ message: FleetBroker.Message) {
        count += 1
        if message.packetID != 0 { packetIDs.append(message.packetID) }
    }

    mutating func add(_ message: FleetBroker.Message, as topic: IngestTopics.Topic) {
        count += 1
        if message.packetID != 0 { packetIDs.append(message.packetID) }
        if message.payloadBytes > message.payload.count {
            return keep(message, "a payload of \(message.payloadBytes) bytes, over the ingest's limit of \(FleetBroker.maximumPacketBytes) "
                        + "bytes a packet (its first \(message.payload.count) bytes are kept)")
        }
        switch topic {
        case .foreign:
            keep(message, "a topic the ingest does not store")
        case .status(let gateway):
            if let problem = FleetRecord.gatewayProblem(gateway) { return keep(message, "a status topic: \(problem)") }
            let online: Bool
            switch message.payload {
            case Array("online".utf8): online = true
            case Array("offline".utf8): online = false
            default: return keep(message, "a status that is neither online nor offline")
            }
            // The broker's time when it has one: workers sharing a stream store statuses out of
            // order, and the newest stored must win.
            statuses.append(GatewayStatus(gateway: gateway, online: online, receivedUs: message.storedUs ?? FleetClock.wallUs()))
        case .record(let kind, let topicGateway):
            let value: JSONValue
            do {
                value = try JSONParser.parse(message.payload)
            } catch {
                return keep(message, "not JSON: \(error)")
            }
            do {
                let record = try FleetRecord.published(value, kind: kind)
                // The topic is the gateway's own (the broker's ACL ties it to the login); a
                // payload naming another would write that gateway's records.
                if let topicGateway, record.gateway != topicGateway {
                    return keep(message, "the payload names gateway '\(record.gateway)' but came under gateway '\(topicGateway)''s topic: "
                                + "a gateway writes only its own records")
                }
                records.append(record)
                origins.append((message.topic, message.payload))
            } catch {
                let seq = value["seq"]?.integer(in: 1...FleetRecord.maximumSeq).map { " \($0)" } ?? ""
                keep(message, "\(kind.rawValue) payload\(seq): \(error.reason)")
            }
        }
    }

    private mutating func keep(_ message: FleetBroker.Message, _ reason: String) {
        quarantine.append(QuarantineEntry(source: .mqtt, origin: message.topic, payload: message.payload, reason: reason))
    }
}
