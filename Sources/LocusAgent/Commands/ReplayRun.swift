import LocusCore
import LocusDevices

/// `locus replay` (events): the agent `locus run` starts, turning on a simulated kernel instead
/// of Linux's devices and clocks. The site's board keeps its outputs and inputs (simulated, as on
/// Boards/sim.toml) and gets a generic NMEA receiver and an HCI feed that receive the recordings'
/// bytes at their recorded moments; the loop, the decision order, the log, privacy, latches and
/// outputs are `locus run`'s. Time jumps to the next recorded byte or deadline (`--speed max`),
/// or follows the wall clock scaled by `--speed N`.
///
/// What a replay changes, and why:
/// - the receiver is generic NMEA: a recording answers no UBX or PMTK command;
/// - `[uplink]` is left out: a replay publishes nothing;
/// - without `--state` the state directory is a new temporary one, removed at the end;
/// - the agent's own log keeps warnings and errors (its notices would bury the events).
///
/// Events are printed as the log takes them, read from it the way a subscriber reads them. The
/// replay ends when every recorded byte has been read and the engine has nothing pending and no
/// timeout left, or `tailNs` after the last recorded byte.
enum ReplayRun {
    /// The board's devices for the recordings, under the state directory; only the simulation
    /// answers these paths.
    static let gnssDevice = "replay/gnss"
    static let bluetoothFeed = "replay/ble"
    /// The simulated monotonic clock at the first recorded moment.
    static let startNs: Int64 = 1_000_000_000_000
    /// How long after the last recorded byte timeouts (beacons leaving, dwells) may play out.
    static let tailNs: Int64 = 3_600_000_000_000
    /// A temporary log's sync interval: in simulated time, longer than any recording (11 days).
    static let temporaryLogSyncMs: Int64 = 1_000_000_000

    static func play(_ loaded: LoadedConfig, _ options: ReplayCommand.Options) -> Int32 {
        guard let recordings = timeline(options) else { return 1 }
        let items = recordings.items
        guard let firstNs = items.reduce(nil as Int64?, { first, item in
            guard let time = item.timeNs, time > 0 else { return first }
            return min(first ?? time, time)
        }) else {
            Console.error("locus: replay: the recordings hold no timed fix or beacon sighting\n")
            return 1
        }
        let directory: String
        if let state = options.state {
            directory = state
        } else {
            switch Files.makeTemporaryDirectory(prefix: "locus-replay") {
            case .success(let path): directory = path
            case .failure(let error): return CommandLineInterface.failure("replay", "cannot create a temporary state directory: \(error)")
            }
        }
        defer { if options.state == nil { _ = Files.removeTree(directory) } }
        let kernel = SimulatedKernel(monotonicNs: startNs, realtimeNs: firstNs, speed: options.speed)
        for (port, device) in [(0, gnssDevice), (1, bluetoothFeed)] {
            let (bytes, moments) = self.arrivals(recordings, port: port, firstNs: firstNs)
            if !moments.isEmpty { kernel.addPort(path: Paths.resolve(device, relativeTo: directory), bytes: bytes, moments: moments) }
        }
        let threshold = AgentLog.threshold
        AgentLog.threshold = .warning
        kernel.install()
        defer {
            kernel.uninstall()
            AgentLog.threshold = threshold
        }
        return run(replayConfig(loaded, options), directory: directory, kernel: kernel, options)
    }

    /// The agent on the simulation until the recordings have played out.
    private static func run(_ config: LoadedConfig, directory: String, kernel: SimulatedKernel, _ options: ReplayCommand.Options) -> Int32 {
        let agent: Agent
        switch Agent.open(config, directory: directory) {
        case .success(let opened): agent = opened
        case .failure(let error): return RunCommand.exitCode(error, command: "replay")
        }
        guard agent.log.isAvailable || options.state == nil else {
            agent.shutdown()
            return CommandLineInterface.failure("replay", "cannot write the log in \(directory)")
        }
        let printer = EventPrinter(agent.log, text: options.text, places: config.placeLabels)
        // --updates: the site updater's updates and visits instead of the events.
        let updates = options.updates ? UpdatePrinter(places: config.placeLabels) : nil
        if let updates { agent.updates.siteOutputTap = { updates.take($0) } }
        let endNs = (kernel.lastArrivalNs ?? startNs) + tailNs
        agent.start()
        while agent.loop.running {
            agent.turn()
            if updates == nil { printer.printNew(agent.log) }
            guard kernel.inputsConsumed else { continue }
            let settled = agent.engine.pendingEventCount == 0 && agent.engine.nextDeadline() == nil
            if settled || kernel.idlePolls > 0 || kernel.monotonicNs > endNs { break }
        }
        let unlogged = agent.engine.pendingEventCount
        if let updates {
            // The last batch, and a stay still going on, as the recording ends.
            agent.updates.siteUpdater.finish(now: updates.lastTime)
            while agent.updates.nextItem() != nil {}
        }
        agent.shutdown()
        if updates == nil { printer.printNew(agent.log) }
        guard unlogged == 0 else {
            return CommandLineInterface.failure("replay", "\(unlogged) event(s) could not be written to the log (above)")
        }
        return 0
    }

    /// The site as the replay runs it: the board's receiver and Bluetooth replaced by the
    /// simulated ports, its GPIO chip simulated, no uplink.
    static func replayConfig(_ loaded: LoadedConfig, _ options: ReplayCommand.Options) -> LoadedConfig {
        var config = loaded
        if options.nmea != nil {
            let allowMissingChecksum = loaded.board.gnss?.allowMissingChecksum ?? false
            config.board.gnss = BoardConfig.GNSS(device: gnssDevice, baud: 9600, receiver: .genericNMEA, allowMissingChecksum: allowMissingChecksum,
                                                 lines: loaded.board.gnss?.lines ?? BoardConfig.RadioLines())
        } else {
            config.board.gnss = nil
        }
        config.board.bluetooth = options.hci != nil ? .feed(bluetoothFeed) : nil
        config.board.gpio?.chip = .simulated
        config.site.uplink = nil
        // A temporary log is deleted at the end: syncing it record by record would only cost time.
        // Its records are the same; only when they reach the disk differs.
        if options.state == nil { config.site.log.sync = .interval(milliseconds: ReplayRun.temporaryLogSyncMs) }
        return config
    }

    /// The recordings' bytes with their times: port 0 the NMEA lines, port 1 the H4 events. Each
    /// port plays on its own in the simulation, so the two are not merged into one order (`locus
    /// feed`'s one writer needs that); each is put in time order as the merge would.
    static func timeline(_ options: ReplayCommand.Options) -> RecordingTimeline.Recordings? {
        var recordings = RecordingTimeline.Recordings()
        if let path = options.nmea {
            guard recordings.addNMEA(path, port: 0) else { return nil }
        }
        if let path = options.hci {
            guard let events = ReplayCommand.readEvents(path) else { return nil }
            recordings.addEvents(events, port: 1)
        }
        let timed = RecordingTimeline.timed(recordings.items)
        let nmea = timed.filter { $0.port == 0 }, hci = timed.filter { $0.port == 1 }
        recordings.items = RecordingTimeline.inPlayOrder(nmea) + RecordingTimeline.inPlayOrder(hci)
        return recordings
    }

    /// One port's items as the simulation's arrivals, a moment's items in one (an NMEA epoch
    /// arrives whole, as a receiver sends it in one burst): the port's bytes in play order, in one
    /// array, and where each moment's bytes end.
    static func arrivals(_ recordings: RecordingTimeline.Recordings, port: Int, firstNs: Int64)
        -> (bytes: [UInt8], moments: [SimulatedKernel.Moment]) {
        let items = recordings.items
        guard port < recordings.bytes.count else { return ([], []) }
        func atNs(_ item: RecordingTimeline.Item) -> Int64 { startNs + max(0, (item.timeNs ?? 0) - firstNs) }
        let count = items.reduce(0) { $0 + ($1.port == port ? $1.range.count : 0) }
        var moments: [SimulatedKernel.Moment] = []
        let bytes = recordings.bytes[port].withUnsafeBufferPointer { source in
            [UInt8](unsafeUninitializedCapacity: count) { target, initialized in
                guard let target = target.baseAddress, let source = source.baseAddress else { return }
                // The port's next items at the same moment go in the same arrival.
                var current: Int64? = nil
                for item in items where item.port == port {
                    let moment = atNs(item)
                    if let current, current != moment { moments.append(SimulatedKernel.Moment(atNs: current, end: initialized)) }
                    current = moment
                    (target + initialized).initialize(from: source + item.range.lowerBound, count: item.range.count)
                    initialized += item.range.count
                }
                if let current { moments.append(SimulatedKernel.Moment(atNs: current, end: initialized)) }
            }
        }
        return (bytes, moments)
    }

    /// `--updates`: one TPV-style line per update the site updater delivers (gpsd's TPV members,
    /// isStationary, diagnostics, the batch it was delivered in and why), one VISIT line per
    /// visit, as the agent's loop takes them.
    final class UpdatePrinter {
        private let places: PlaceLabels?
        private var pending: [LocationUpdate] = []
        private var batchNumber = 0
        private var line = JSONWriter(capacity: 4096)
        /// The newest update's time (the end of the recording, for the last batch).
        private(set) var lastTime = UTCTime(nanoseconds: 0)

        init(places: PlaceLabels?) { self.places = places }

        func take(_ output: LiveOutput) {
            switch output {
            case .update(let update):
                pending.append(update)
                lastTime = max(lastTime, update.time)
            case .batchEnd(let reason):
                batchNumber += 1
                for update in pending {
                    line.reset()
                    line.beginObject()
                    UpdateJSON.writeMembers(update, places: places, into: &line)
                    line.integer("batch", batchNumber)
                    line.string("flush", reason.name)
                    line.endObject()
                    line.newline()
                    Console.out(line.bytes)
                }
                pending.removeAll(keepingCapacity: true)
            case .visit(let visit):
                line.reset()
                UpdateJSON.write(visit, places: places, into: &line)
                line.newline()
                Console.out(line.bytes)
            }
        }
    }

    /// The log's new events on standard output, as JSON lines or text: read with a tail (which
    /// reads only new bytes) and only when the log has taken events since the last look.
    final class EventPrinter {
        private let tail: LogTail?
        private var eventsSeen = 0
        private let text: Bool
        private let places: PlaceLabels?
        private var line = JSONWriter(capacity: 4096)

        init(_ log: EventLog, text: Bool, places: PlaceLabels?) {
            tail = log.tail(after: log.newest)
            eventsSeen = log.events
            self.text = text
            self.places = places
        }

        func printNew(_ log: EventLog) {
            guard let tail, log.events > eventsSeen else { return }
            eventsSeen = log.events
            _ = log.readTail(tail) { header, payload in
                guard header.typeCode == LogRecordType.event.rawValue else { return true }
                var reader = ByteReader(payload)
                guard let event = LogPayload.readEvent(&reader) else { return true }
                line.reset()
                if text {
                    EventText.write(event, sequence: Int64(header.sequence), places: places, into: &line)
                } else {
                    EventJSON.write(event, sequence: Int64(header.sequence), places: places, into: &line)
                }
                line.newline()
                Console.out(line.bytes)
                return true
            }
        }
    }
}
