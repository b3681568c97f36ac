import LocusCore

/// The control connections' live-update streams (`updates`), owned by `LiveUpdates`: one slot
/// per control connection, each with its own updater, preset and tier; how many are open; the
/// slot `next(privacy:places:into:)` renders next; and what a stream's lines are rendered with
/// (one batch's updates waiting for its end to be numbered, the scratch an update's text goes
/// through).
///
/// It decides nothing about the radios: `LiveUpdates` opens and closes streams and asks for the
/// finest tier they want.
struct UpdateStreams: ~Copyable {
    /// One control connection's stream.
    struct Stream {
        let updater: LiveUpdater
        let preset: LivePreset
        let tier: AccuracyTier
        /// The platform model the stream asks of the receiver (`activity`), if any.
        var activity: LivePreset? = nil
        /// A service session's: it holds the radios and sends nothing.
        var quiet = false
        var batch = 0
    }

    /// Each control slot's stream, if it asked for one.
    private var streams: [Stream?]
    /// Streams open (an agent without any looks at no slot).
    private(set) var count = 0
    /// `next`'s place: the slot it renders next.
    private var nextSlot = 0
    /// One batch's updates, waiting for its end to be numbered.
    private let batch: UnsafeMutableBufferPointer<LocationUpdate>
    private var scratch = JSONWriter(capacity: 2048)

    /// `slots` control connections; a batch of at most `batchCount` updates (`[updates]
    /// batch_count`, or a stream's own, at most `batchCapacity(site:)`).
    init(slots: Int, batchCount: Int) {
        precondition(slots >= 0, "a number of control connections")
        precondition(batchCount >= 0, "a batch count is not negative")
        streams = Array(repeating: nil, count: slots)
        batch = .allocate(capacity: UpdateStreams.batchCapacity(site: batchCount))
    }

    /// The most updates a stream's batch may hold: the site's `batch_count`, or
    /// `UpdateStreamRequest.batchCountLimit` if that is more.
    static func batchCapacity(site batchCount: Int) -> Int { max(batchCount, UpdateStreamRequest.batchCountLimit) }

    /// The open streams that keep the receiver awake (their pause is off).
    var keepingAwake: Int {
        var count = 0
        for stream in streams where stream?.updater.settings.pausesAutomatically == false { count += 1 }
        return count
    }

    /// The platform model for the receiver: the most dynamic (highest top speed) of `site` and
    /// the open streams' activities: a model too tight would clip real movement, one too loose
    /// only filters less.
    func receiverModel(_ site: LivePreset) -> LivePreset {
        var model = site
        var top = LiveConfiguration(preset: site).maximumSpeedMps
        for stream in streams {
            guard let activity = stream?.activity else { continue }
            let speed = LiveConfiguration(preset: activity).maximumSpeedMps
            if speed > top { (model, top) = (activity, speed) }
        }
        return model
    }

    deinit { batch.deallocate() }

    // MARK: opening and closing

    /// Opens (or replaces) control slot `slot`'s stream.
    mutating func open(_ slot: Int, _ stream: Stream) {
        precondition(streams.indices.contains(slot), "a control connection's slot")
        if streams[slot] == nil { count += 1 }
        streams[slot] = stream
        precondition(count <= streams.count, "open streams within the control slots")
    }

    /// Closes control slot `slot`'s stream; false when it had none.
    mutating func close(_ slot: Int) -> Bool {
        guard slot < streams.count, streams[slot] != nil else { return false }
        streams[slot] = nil
        count -= 1
        precondition(count >= 0, "open streams are never negative")
        // With none open `next` is not called (`LiveUpdates.nextItem` checks `count` first, so an
        // idle turn passes nothing): it starts again at slot 0, as a call with none open would.
        if count == 0 { nextSlot = 0 }
        return true
    }

    /// The finest of `tier` and the open streams' tiers.
    func finestTier(_ tier: AccuracyTier) -> AccuracyTier {
        var wanted = tier
        for stream in streams { if let stream, stream.tier < wanted { wanted = stream.tier } }
        return wanted
    }

    // MARK: every stream's updater

    /// Each stream's batch ages and silences.
    func deadlines(_ next: inout NextDeadline) {
        guard count > 0 else { return }
        for slot in streams.indices { next.consider(streams[slot]?.updater.nextDeadlineNs.map { UTCTime(nanoseconds: $0) }) }
    }

    func observe(_ fix: Fix, now: UTCTime) {
        guard count > 0 else { return }
        for slot in streams.indices { streams[slot]?.updater.observe(fix, now: now) }
    }

    func tick(now: UTCTime) {
        guard count > 0 else { return }
        for slot in streams.indices { streams[slot]?.updater.tick(now: now) }
    }

    func monitorEvent(now: UTCTime) {
        guard count > 0 else { return }
        for slot in streams.indices { streams[slot]?.updater.monitorEvent(now: now) }
    }

    // MARK: rendering

    /// The next stream with lines to send, from where the last call stopped: its slot, its lines
    /// in `line`. nil when every slot has been looked at (the next call starts again at slot 0).
    mutating func next(privacy: SiteConfig.FixPrivacy, places: PlaceLabels?, simulated: Bool, into line: inout JSONWriter) -> Int? {
        while count > 0 && nextSlot < streams.count {
            let slot = nextSlot
            nextSlot += 1
            guard render(slot, privacy, places, simulated, into: &line) else { continue }
            return slot
        }
        nextSlot = 0
        return nil
    }

    /// One stream's outputs as protocol lines into `line` (updates numbered by batch, with the
    /// flush reason; visits), each as `[privacy]` shows it; false when it has none.
    private mutating func render(_ slot: Int, _ privacy: SiteConfig.FixPrivacy, _ places: PlaceLabels?, _ simulated: Bool,
                                 into line: inout JSONWriter) -> Bool {
        guard var stream = streams[slot] else { return false }
        if stream.quiet {
            while stream.updater.nextOutput() != nil {}
            return false
        }
        line.reset()
        var waiting = 0
        while let output = stream.updater.nextOutput() {
            switch output {
            case .update(let update):
                precondition(waiting < batch.count, "a batch holds at most [updates] batch_count updates")
                batch[waiting] = PrivacyFilter.update(update, privacy)
                waiting += 1
            case .batchEnd(let reason):
                stream.batch += 1
                for index in 0..<waiting {
                    ControlReply.update(batch[index], batch: stream.batch, flush: reason, places: places, simulated: simulated,
                                        scratch: &scratch, into: &line)
                }
                waiting = 0
            case .visit(let visit):
                guard let shown = PrivacyFilter.visit(visit, privacy) else { continue }
                ControlReply.visit(shown, places: places, into: &line)
            }
        }
        streams[slot] = stream
        return line.count > 0 || line.overflowed
    }
}
