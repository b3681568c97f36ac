import LocusCore
import LocusDevices

/// The engine's records in the log: rebuilt at start, appended as they change, and checkpointed
/// at the head of every segment so old segments can be deleted without losing state.
///
/// Rebuild: the newest complete checkpoint restores every record (condition + last handled
/// event); records after it are applied in order (condition added, removed, event). Every event in
/// the log was appended before any other sink saw it, and the GPIO state is restored from the
/// same events at start, so an event in the log counts as handled.
final class Persistence {
    private var store: LogStore
    private let engine: MonitorEngine
    private let buffer: UnsafeMutableRawBufferPointer
    private let directory: String
    private let settings: SiteConfig.Log
    /// Outputs latched by `latch` actions and not cleared: every checkpoint states them, so
    /// deleting old segments never loses a latch.
    var latched: [FixedName] = []
    /// Consumers' cursors (monitor, last event taken), stated by every checkpoint like latches.
    var consumers: [(FixedName, UInt64)] = []
    /// The uplink's cursor (nil: no uplink has delivered anything), stated by every checkpoint, so
    /// retention deleting its `uplink` records never loses it. Retention counts what it deletes
    /// past the delivered record.
    var uplinkCursor: UplinkCursor? = nil {
        didSet { protectUndelivered() }
    }
    /// The last record the uplink delivered (nil: none).
    var uplinkDelivered: UInt64? { uplinkCursor?.delivered }
    /// The fleet's configuration version applied (0: none), stated by every checkpoint, so a
    /// start knows whether `remote.toml`'s version has its record.
    var remoteApplied: UInt64 = 0

    struct Summary {
        var records = 0
        var conditions = 0
        var events = 0
        var fromCheckpoint: UInt64? = nil
        var recovery: [LogCorruption] = []
        var skipped: [LogCorruption] = []
        var undecodable = 0
        /// Latched outputs, as the log last stated them.
        var latched: [FixedName] = []
        var consumers: [(FixedName, UInt64)] = []
        var uplinkCursor: UplinkCursor? = nil
        var uplinkDelivered: UInt64? { uplinkCursor?.delivered }
        var remoteApplied: UInt64 = 0
        /// The fleet's commands the log holds (run or refused): never run again.
        var commandIDs: Set<String> = []
        /// The SHA-256 of every configuration the log says was refused: the broker's retained
        /// copy of one, at every connection, is not refused (and logged) again.
        var refusedDigests: Set<[UInt8]> = []
        /// The newest record's time (UTC ns): the clock at start should not be behind it.
        var newestTimeNs: Int64? = nil
    }

    init(directory: String, log: SiteConfig.Log, engine: MonitorEngine) throws(LogStoreError) {
        precondition(LogRecord.maximumPayloadSize >= LogPayload.maximumConditionSize + 16 * GeoPolygon.maximumVertices + LogPayload.maximumEventSize + 2,
                     "a checkpoint record holds at least one condition, the largest shape included, with its last event")
        store = try Persistence.openStore(directory, log)
        self.engine = engine
        self.directory = directory
        settings = log
        buffer = .allocate(byteCount: LogRecord.maximumPayloadSize, alignment: 8)
    }

    private static func openStore(_ directory: String, _ log: SiteConfig.Log) throws(LogStoreError) -> LogStore {
        let sync: LogSyncPolicy
        switch log.sync {
        case .everyEvent: sync = .everyRecord
        case .interval(let milliseconds): sync = .interval(milliseconds: milliseconds)
        }
        return try LogStore.open(directory: directory, segmentSizeBytes: log.segmentSizeBytes, retainBytes: log.retainBytes, sync: sync)
    }

    /// After a failed sync the store refuses to go on (the kernel may have dropped the data):
    /// reopening rescans the segments and cuts what did not make it.
    /// A failed sync or roll-back left the log unusable until `reopen`.
    var needsReopen: Bool { store.isFailed }

    func reopen() throws(LogStoreError) {
        precondition(store.isFailed, "only a log that failed is reopened")
        store = try store.reopened()
        // What the rescan kept since the last sync that succeeded is in the page cache only: a
        // sync now, or a power cut before the next record would take acknowledged records with it.
        try store.sync()
        protectUndelivered()
        precondition(!store.isFailed, "a reopened and synced log takes records")
    }

    private func protectUndelivered() {
        store.retentionFloor = uplinkDelivered.map { $0 &+ 1 } ?? 0
    }

    /// The sequence number of the newest record.
    var lastSequence: UInt64 { store.nextSequence &- 1 }
    /// The newest record a sync made durable (`LogStore.durableSequence`).
    var durableSequence: UInt64 { store.durableSequence }

    /// Events after `afterSequence`, in order, until `body` returns false.
    func forEachEvent(afterSequence: UInt64, _ body: (UInt64, MonitorEvent) -> Bool) throws(LogStoreError) {
        var going = true
        try store.forEachRecord(afterSequence: afterSequence) { header, payload in
            guard going, header.typeCode == LogRecordType.event.rawValue else { return }
            var reader = ByteReader(payload)
            guard let event = LogPayload.readEvent(&reader) else { return }
            going = body(header.sequence, event)
        }
    }

    deinit { buffer.deallocate() }

    var nextSequence: UInt64 { store.nextSequence }

    /// Restores the engine from the log. Conditions come back with their last handled events.
    func rebuild() -> Summary {
        var summary = Summary()
        summary.recovery = store.recovery
        let start = store.checkpoints.lastComplete
        summary.fromCheckpoint = start
        let engine = self.engine
        var inCheckpoint = false
        do {
            summary.skipped = try store.forEachRecord(afterSequence: (start ?? 1) - 1) { header, payload in
                summary.records += 1
                summary.newestTimeNs = max(summary.newestTimeNs ?? header.time, header.time)
                guard let type = LogRecordType(rawValue: header.typeCode) else { return }
                var reader = ByteReader(payload)
                switch type {
                case .checkpoint:
                    // Only the checkpoint we started from is applied; later ones repeat what the
                    // records between them already said.
                    if !header.flags.contains(.continuation) { inCheckpoint = header.sequence == start }
                    guard inCheckpoint else { return }
                    let count = Int(reader.uint16())
                    for _ in 0..<count {
                        guard let entry = LogPayload.readCondition(&reader), let event = LogPayload.readEvent(&reader) else {
                            summary.undecodable += 1
                            return
                        }
                        Persistence.add(entry, to: engine, now: event.date)
                        engine.restore(event)
                        summary.conditions += 1
                    }
                    if !header.flags.contains(.moreFollow) { Persistence.readCheckpointEnd(&reader, into: &summary) }
                case .conditionAdded:
                    guard let entry = LogPayload.readCondition(&reader) else { summary.undecodable += 1; return }
                    Persistence.add(entry, to: engine, now: UTCTime(nanoseconds: header.time))
                    summary.conditions += 1
                case .conditionRemoved:
                    guard let (monitor, identifier) = LogPayload.readRemoval(&reader) else { summary.undecodable += 1; return }
                    engine.remove(monitor: monitor, identifier: identifier)
                case .event:
                    guard let event = LogPayload.readEvent(&reader) else { summary.undecodable += 1; return }
                    engine.restore(event)
                    summary.events += 1
                case .gpio:
                    guard let change = LogPayload.readGPIO(&reader) else { summary.undecodable += 1; return }
                    if change.cause == .latchSet, !summary.latched.contains(change.output) { summary.latched.append(change.output) }
                    if change.cause == .latchCleared { summary.latched.removeAll { $0 == change.output } }
                case .consumer:
                    guard let (monitor, sequence) = LogPayload.readConsumer(&reader) else { summary.undecodable += 1; return }
                    Persistence.set(&summary.consumers, monitor, sequence)
                case .uplink:
                    guard let cursor = LogPayload.readUplink(&reader) else { summary.undecodable += 1; return }
                    summary.uplinkCursor = cursor
                case .remote:
                    guard let remote = LogPayload.readRemote(&reader) else { summary.undecodable += 1; return }
                    if remote.kind == .config && remote.result == .applied { summary.remoteApplied = max(summary.remoteApplied, remote.version) }
                    if remote.kind == .command && !remote.id.isEmpty { summary.commandIDs.insert(String(decoding: remote.id, as: UTF8.self)) }
                    if remote.kind == .config && remote.result == .refused && !remote.digest.isEmpty { summary.refusedDigests.insert(remote.digest) }
                default:
                    break
                }
            }
        } catch {
            summary.undecodable += 1
        }
        return summary
    }

    /// A checkpoint group's end: the latched outputs, then (later formats) the consumers'
    /// positions, then the uplink's; older checkpoints end earlier.
    private static func readCheckpointEnd(_ reader: inout ByteReader, into summary: inout Summary) {
        guard !reader.isAtEnd else { return }
        for _ in 0..<Int(reader.uint8()) {
            if let name = reader.name() { summary.latched.append(name) }
        }
        guard !reader.isAtEnd else { return }
        for _ in 0..<Int(reader.uint8()) {
            if let (monitor, sequence) = LogPayload.readConsumer(&reader) { Persistence.set(&summary.consumers, monitor, sequence) }
        }
        if !reader.isAtEnd && reader.uint8() == 1, let cursor = LogPayload.readUplink(&reader) {
            summary.uplinkCursor = cursor
        }
        if !reader.isAtEnd { summary.remoteApplied = max(summary.remoteApplied, reader.uint64()) }
    }

    static func set<Value>(_ entries: inout [(FixedName, Value)], _ name: FixedName, _ value: Value) {
        if let index = entries.firstIndex(where: { $0.0 == name }) { entries[index].1 = value } else { entries.append((name, value)) }
    }

    static func add(_ entry: LogPayload.ConditionEntry, to engine: MonitorEngine, now: UTCTime) {
        engine.add(monitor: entry.monitor, identifier: entry.identifier, condition: entry.condition, settings: entry.settings,
                   assuming: entry.assuming == .unknown ? nil : entry.assuming, fromSiteFile: entry.fromSiteFile, now: now)
    }

    // MARK: appending

    func append(_ type: LogRecordType, time: Int64, _ write: (inout ByteWriter) -> Void) throws(LogStoreError) -> UInt64 {
        var writer = ByteWriter(buffer)
        write(&writer)
        precondition(!writer.overflow, "log payload larger than a record")
        let engine = self.engine
        let latched = self.latched
        let consumers = self.consumers
        let uplinkCursor = self.uplinkCursor
        let remoteApplied = self.remoteApplied
        let payload = writer.written
        let newestBefore = lastSequence
        let sequence = try store.append(type: type, time: time, payload: payload) { (store: inout LogStore) throws(LogStoreError) in
            try Persistence.writeCheckpoint(engine, latched: latched, consumers: consumers, uplinkCursor: uplinkCursor,
                                            remoteApplied: remoteApplied, into: &store, time: time)
        }
        // Strictly increasing and without gaps: a segment's checkpoints may come first, but the
        // record is the newest.
        precondition(sequence > newestBefore, "a record's sequence number follows the log's newest")
        precondition(sequence == lastSequence, "an appended record is the log's newest")
        return sequence
    }

    func conditionAdded(_ entry: LogPayload.ConditionEntry, time: UTCTime) throws(LogStoreError) {
        _ = try append(.conditionAdded, time: time.totalNanoseconds) { LogPayload.write(entry, &$0) }
    }

    func conditionRemoved(monitor: FixedName, identifier: FixedName, time: UTCTime) throws(LogStoreError) {
        _ = try append(.conditionRemoved, time: time.totalNanoseconds) { LogPayload.writeRemoval(monitor: monitor, identifier: identifier, &$0) }
    }

    /// Appends (and syncs, per policy) an event; returns its sequence number.
    func event(_ event: MonitorEvent) throws(LogStoreError) -> UInt64 {
        try append(.event, time: event.date.totalNanoseconds) { LogPayload.write(event, &$0) }
    }

    func marker(_ type: LogRecordType, time: UTCTime, text: String) throws(LogStoreError) {
        _ = try append(type, time: time.totalNanoseconds) { writer in
            for byte in text.utf8 { writer.put(byte) }
        }
    }

    func gpio(_ change: LogPayload.GPIOChange, time: UTCTime) throws(LogStoreError) {
        _ = try append(.gpio, time: time.totalNanoseconds) { LogPayload.write(change, &$0) }
    }

    func consumer(monitor: FixedName, sequence: UInt64, time: UTCTime) throws(LogStoreError) {
        _ = try append(.consumer, time: time.totalNanoseconds) { LogPayload.writeConsumer(monitor: monitor, sequence: sequence, &$0) }
        Persistence.set(&consumers, monitor, sequence)
    }

    /// The broker acknowledged every record up to `cursor.delivered`: the uplink's cursor, in the
    /// log first. The records up to it no longer count as undelivered, whether or not this append
    /// makes it (a failed append resends them after a restart, at worst).
    func uplink(_ cursor: UplinkCursor, time: UTCTime) throws(LogStoreError) {
        store.retentionFloor = cursor.delivered &+ 1
        _ = try append(.uplink, time: time.totalNanoseconds) { LogPayload.writeUplink(cursor, &$0) }
        uplinkCursor = cursor
    }

    /// A reader's place after `sequence`, for `read`.
    func tail(after sequence: UInt64) -> LogTail { LogTail(after: sequence) }

    /// The records after the tail's position, in order, until `body` returns false (see
    /// `LogStore.read`: `body` must not append).
    func read(_ tail: LogTail, _ body: (LogRecordHeader, UnsafeRawBufferPointer) -> Bool) throws(LogStoreError) -> LogTailRead {
        try store.read(tail, body)
    }

    /// Records retention deleted before the uplink delivered them, since the log was opened.
    var undeliveredDeleted: UInt64 { store.undeliveredDeleted }

    /// About how many bytes of the log lie after `sequence` (the uplink's backlog).
    func bytes(after sequence: UInt64) -> Int64 { store.bytes(after: sequence) }

    func visit(_ visit: Visit) throws(LogStoreError) {
        _ = try append(.visit, time: (visit.departure ?? visit.arrival).totalNanoseconds) { LogPayload.write(visit, &$0) }
    }

    /// Every visit record (arrivals and departures), in order.
    func forEachVisit(_ body: (UInt64, Visit) -> Void) throws(LogStoreError) {
        try store.forEachRecord(afterSequence: 0) { header, payload in
            guard header.typeCode == LogRecordType.visit.rawValue else { return }
            var reader = ByteReader(payload)
            guard let visit = LogPayload.readVisit(&reader) else { return }
            body(header.sequence, visit)
        }
    }

    /// A configuration or command from the fleet: appended and synced whatever the sync policy,
    /// since the fleet takes it as the gateway's word (and a command's id keeps it from running
    /// twice).
    func remote(_ remote: LogPayload.RemoteResult, time: UTCTime) throws(LogStoreError) {
        var size = 0
        _ = try append(.remote, time: time.totalNanoseconds) { writer in
            LogPayload.write(remote, &writer)
            size = writer.count
        }
        try store.syncNewest(cutting: Int64(LogRecord.headerSize + size))
        if remote.kind == .config && remote.result == .applied { remoteApplied = max(remoteApplied, remote.version) }
    }

    func fix(_ fix: LogPayload.LoggedFix) throws(LogStoreError) {
        _ = try append(.fix, time: fix.timeNs) { LogPayload.write(fix, &$0) }
    }

    /// When an interval sync policy next needs a sync (monotonic ns), for the loop's timer.
    var syncDueNs: Int64? { store.nextSyncDueNs }

    func syncIfDue(now: Int64) throws(LogStoreError) { _ = try store.syncIfDue(now: now) }

    func sync() throws(LogStoreError) { try store.sync() }

    /// Writes a checkpoint group now (e.g. after start-up, so the next start reads little).
    func checkpoint(time: UTCTime) throws(LogStoreError) {
        try Persistence.writeCheckpoint(engine, latched: latched, consumers: consumers, uplinkCursor: uplinkCursor,
                                        remoteApplied: remoteApplied, into: &store, time: time.totalNanoseconds)
    }

    /// Every record of every monitor as checkpoint records: as many (condition, lastEvent)
    /// entries per record as fit, the group marked with `.moreFollow` / `.continuation`. The
    /// group's last record ends with the latched outputs (count, names), the consumers' cursors
    /// (count, entries), the uplink's (a presence byte, then the sequence number) and the fleet's
    /// configuration version applied (u64), in a record of its own when the entries leave no room.
    static func writeCheckpoint(_ engine: MonitorEngine, latched: [FixedName], consumers: [(FixedName, UInt64)] = [],
                                uplinkCursor: UplinkCursor? = nil, remoteApplied: UInt64 = 0, into store: inout LogStore,
                                time: Int64) throws(LogStoreError) {
        var entries: [(LogPayload.ConditionEntry, MonitorEvent)] = []
        engine.forEachRecord { monitor, identifier, record in
            entries.append((LogPayload.ConditionEntry(monitor: monitor, identifier: identifier, condition: record.condition,
                                                      settings: record.settings, assuming: record.assumed, fromSiteFile: record.fromSiteFile),
                            record.lastEvent))
        }
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: LogRecord.maximumPayloadSize, alignment: 8)
        defer { bytes.deallocate() }
        let latchBytes = 2 + latched.count * (FixedName.capacity + 1) + consumers.count * (FixedName.capacity + 9) + 1 + 17 + 8
        precondition(latchBytes <= bytes.count, "the latches, consumers and uplink cursor fit a record of their own")
        precondition(latched.count <= Int(UInt8.max), "a checkpoint counts its latched outputs in one byte")
        precondition(consumers.count <= Int(UInt8.max), "a checkpoint counts its consumers in one byte")
        var start = 0
        var first = true
        var latchesWritten = false
        repeat {
            // As many entries as fit (a shape's grows with its vertices; at least one always fits).
            var end = start, room = LogRecord.maximumPayloadSize - 2
            while end < entries.count {
                let size = LogPayload.conditionSize(entries[end].0.condition) + LogPayload.maximumEventSize
                guard size <= room else { break }
                room -= size
                end += 1
            }
            precondition(end > start || start == entries.count, "a checkpoint record holds at least one entry")
            precondition(end - start <= Int(UInt16.max), "a checkpoint record counts its entries in two bytes")
            var flags = LogRecordFlags()
            if !first { flags.insert(.continuation) }
            var writer = ByteWriter(bytes)
            writer.put(UInt16(end - start))
            for index in start..<end {
                LogPayload.write(entries[index].0, &writer)
                LogPayload.write(entries[index].1, &writer)
            }
            if end == entries.count && writer.count + latchBytes <= bytes.count {
                writer.put(UInt8(latched.count))
                for name in latched { writer.put(name) }
                writer.put(UInt8(consumers.count))
                for (monitor, sequence) in consumers { LogPayload.writeConsumer(monitor: monitor, sequence: sequence, &writer) }
                writer.put(UInt8(uplinkCursor == nil ? 0 : 1))
                if let uplinkCursor { LogPayload.writeUplink(uplinkCursor, &writer) }
                writer.put(remoteApplied)
                latchesWritten = true
            }
            if !latchesWritten { flags.insert(.moreFollow) }
            precondition(!writer.overflow, "a checkpoint record's entries fit its payload")
            _ = try store.append(type: .checkpoint, time: time, payload: writer.written, flags: flags)
            start = end
            first = false
        } while !latchesWritten
        precondition(start == entries.count, "a checkpoint states every record")
    }
}
