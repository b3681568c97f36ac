import LocusCore
import LocusDevices

/// Live updates in the agent (CLLocationUpdate): the site's own updater, whose deliveries become
/// the log's fix and visit records and whose stationary state pauses the receiver; one updater
/// per control connection that asked for `updates`, with its preset and tier; the pause; the
/// motion input that wakes a paused receiver; boundary-aware sampling's wake-up.
///
/// It writes nothing itself: what it produces waits for the loop, which takes it after every call
/// (`nextItem`: fixes and visits for the log, stream lines for a control connection;
/// `nextReceiverOrder`: sleep, wake and plan orders for the GNSS source; `takeScanSettings`:
/// the BLE scan's duty cycle).
///
/// Its parts, each in a type of its own: the streams (`UpdateStreams`), the orders the loop takes
/// (`RadioOrders`), the motion input (`MotionInput`), the location requests
/// (`LocationRequests`). What stays here is what ties them together: the site updater, the pause,
/// the radios' tier, and the rendering of what the loop takes.
///
/// The radios run at the finest tier anyone asks for: the site's `[updates] accuracy`, or a
/// client's finer one while its stream is open (as a finer CLLocationManager desiredAccuracy
/// raises the system's). The receiver's platform model is the site's preset: one receiver, one
/// model; a stream's preset sets its own filters and stationary thresholds.
final class LiveUpdates: LoopComponent {
    /// u-blox M8 hot start is about 1 s ([M8] data sheet, "Acquisition"): woken this early.
    static let hotStartLeadMs: Int64 = 2_000
    /// A sleep shorter than this would cost more (backup, hot start) than it saves.
    static let minimumSampleSleepMs: Int64 = 5_000
    /// A stream's lines from one call: at most what a control connection's output buffer holds
    /// (asserted against it at start); more is a client that cannot keep up.
    static let streamBytes = 64 << 10

    /// What the loop takes after every call, in order.
    enum Item {
        /// A delivered fix of the site updater: a fix record, as `[log]` and `[privacy]` allow.
        case fix(Fix)
        case visit(Visit)
        /// A stream's lines for control slot `slot`; nil when they did not fit `streamBytes`.
        case stream(slot: Int, line: UnsafeRawBufferPointer?)
        /// The reply to a location request that waited, for control slot `slot`.
        case reply(slot: Int, line: UnsafeRawBufferPointer)
        /// The answer to the fleet's `locate` that waited: `fleetLocated`'s object, or nil when
        /// no fix came within its timeout.
        case fleetLocated(UnsafeRawBufferPointer?)
    }

    /// How a location request started (`locate`).
    enum LocateStart {
        /// The last fix answers it: this fix, this old.
        case answered(Fix, ageMs: Int64)
        /// It waits; its reply comes as an `Item.reply`.
        case waiting
        /// The connection has a request waiting already.
        case busy
    }

    private let site: SiteConfig.Updates
    let siteUpdater: LiveUpdater
    /// Sees every output of the site updater as the loop takes it (`locus replay --updates`
    /// prints them); nil in `locus run`.
    var siteOutputTap: ((LiveOutput) -> Void)? = nil
    /// Each control slot's stream, if it asked for one.
    private var streams: UpdateStreams
    private var pause: PauseController
    /// The tier the receiver and the BLE scan run at.
    private(set) var radioTier: AccuracyTier
    /// The receiver's platform model (`UpdateStreams.receiverModel`).
    private(set) var receiverModel: LivePreset
    /// The board's receiver is simulated: updates and located replies say so.
    let isSimulated: Bool
    /// `[updates] motion_input`.
    private var motion: MotionInput
    /// Boundary-aware sampling: when the receiver, off between fixes, is to be woken.
    private var sampleWakeAt: UTCTime? = nil
    private var privacy: SiteConfig.FixPrivacy
    /// `[geocoding] annotate`: updates, visits and located replies carry the place nearest them.
    private let places: PlaceLabels?
    /// Receiver orders and the scan's timing, until the loop takes them.
    private var radios = RadioOrders()
    /// What `nextItem` hands the loop: a stream's lines, a located reply.
    private var line = JSONWriter(capacity: LiveUpdates.streamBytes)
    /// Location requests waiting, the last fix that answers one at once, what they came to.
    private var requests: LocationRequests
    /// The fleet's `locate`'s request slot: the one past the control connections'.
    let fleetSlot: Int

    /// Opens the motion input, if the site names one (the board's input of that name).
    init(loaded: LoadedConfig, slots: Int, stateDirectory: String) throws(GPIOError) {
        site = loaded.site.updates
        siteUpdater = LiveUpdater(settings: LiveUpdateSettings(site))
        radioTier = site.accuracy
        receiverModel = site.preset
        isSimulated = loaded.board.gnss?.isSimulated ?? false
        privacy = loaded.site.fixPrivacy
        places = loaded.placeLabels
        streams = UpdateStreams(slots: slots, batchCount: site.batchCount)
        requests = LocationRequests(slots: slots + 1)
        fleetSlot = slots
        motion = try MotionInput(loaded: loaded, stateDirectory: stateDirectory)
        // With a motion input the stationary receiver sleeps much longer: motion wakes it.
        pause = PauseController(siteUpdater.settings.configuration, siteUpdater.settings.tier, motionInput: motion.isConfigured)
    }

    // MARK: the loop's surface

    var maximumDescriptors: Int { 1 }

    func register(in poll: inout PollSet) { motion.register(in: &poll) }

    /// Batch ages, silences, the pause's probes, the sample wake-up: all on the UTC clock.
    func deadlines(_ next: inout NextDeadline) {
        next.consider(siteUpdater.nextDeadlineNs.map { UTCTime(nanoseconds: $0) })
        next.consider(pause.nextDeadlineNs.map { UTCTime(nanoseconds: $0) })
        next.consider(sampleWakeAt)
        next.consider(requests.pending.earliestDeadlineNs.map { MonotonicInstant(nanoseconds: $0) })
        if streams.count > 0 { streams.deadlines(&next) }
    }

    func status(into line: inout JSONWriter) {
        line.beginObject("updates")
        line.string("preset", site.preset.description)
        line.string("accuracy", site.accuracy.description)
        line.string("radios", radioTier.description)
        line.string("model", receiverModel.description)
        line.integer("kept_awake", streams.keepingAwake)
        line.boolean("stationary", siteUpdater.isStationary)
        line.string("pause", PauseText.phase(pause.phase))
        line.integer("probes", pause.probes)
        line.integer("motion_wakes", pause.motionWakes)
        line.integer("hot_start_ms", pause.hotStartMs)
        line.integer("next_sleep_s", pause.nextSleepMs / 1_000)
        line.integer("filtered", siteUpdater.filteredCount)
        line.integer("streams", streams.count)
        line.beginObject("locate")
        line.integer("waiting", requests.pending.waitingCount)
        line.integer("at_once", requests.atOnce)
        line.integer("located", requests.located)
        line.integer("accuracy_limited", requests.accuracyLimited)
        line.integer("unavailable", requests.unavailable)
        line.integer("wakes", pause.requestWakes)
        line.number("waiting_s", Double(requests.waitingNs) / 1e9, decimals: 1)
        line.endObject()
        line.endObject()
    }

    /// `[updates]` changes take effect at the next start (the agent says so); privacy at once.
    func reload(_ config: LoadedConfig, now: AgentTime) { privacy = config.site.fixPrivacy }

    // MARK: fixes and time

    /// A fix goes to every updater after the engine has seen it. The updaters run on the fix's
    /// own time (the agent's clock can lag a receiver replayed faster than real time).
    func observe(_ fix: Fix, _ now: AgentTime, receiver: ReceiverState, engine: MonitorEngine) {
        let time = fix.time ?? now.utc
        let wasStationary = siteUpdater.isStationary
        let filtered = siteUpdater.filteredCount
        siteUpdater.observe(fix, now: time)
        let accepted = fix.hasPosition && siteUpdater.filteredCount == filtered
        let isStationary = siteUpdater.isStationary
        let why: StaticString = isStationary == wasStationary ? "probe" : isStationary ? "stationary" : "moving again"
        // Standing still: how far the nearest fence edge is sets the next sleep.
        let clearanceM = isStationary && accepted ? clearance(fix, engine) : nil
        carryOut(pause.observed(wasStationary: wasStationary, isStationary: isStationary, accepted: accepted,
                                insideStop: siteUpdater.lastFixInsideStop, clearanceM: clearanceM,
                                nowNs: time.totalNanoseconds), receiver, why: why)
        streams.observe(fix, now: time)
        if fix.hasPosition {
            requests.lastFix = fix
            if requests.pending.waitingCount > 0 {
                requests.pending.observe(fix, nowNs: time.totalNanoseconds)
                if requests.pending.waitingCount == 0 { locatesReleased(time.totalNanoseconds) }
            }
        }
        if accepted { scheduleNextFix(fix, time, receiver, engine) }
    }

    /// Time passing: batch ages, silences, the pause's probes, the sample wake-up.
    func tick(_ now: AgentTime, receiver: ReceiverState) {
        siteUpdater.tick(now: now.utc)
        if let wakeAt = sampleWakeAt, now.utc >= wakeAt {
            sampleWakeAt = nil
            if !pause.isPaused {
                radios.queue(.wake)
                pause.receiverWoken(nowNs: now.utc.totalNanoseconds)
            }
        }
        if requests.pending.waitingCount > 0 {
            requests.pending.tick(monotonicNs: now.monotonic.nanoseconds, nowNs: now.utc.totalNanoseconds)
            if requests.pending.waitingCount == 0 { locatesReleased(now.utc.totalNanoseconds) }
        }
        if pause.keptAwake && streams.keepingAwake == 0 {
            AgentLog.info("locus: updates: the last stream without the automatic pause closed: the pause is back")
            carryOut(pause.keepAwake(false, isStationary: siteUpdater.isStationary, nowNs: now.utc.totalNanoseconds), receiver, why: "stationary")
        }
        carryOut(pause.tick(isStationary: siteUpdater.isStationary, nowNs: now.utc.totalNanoseconds), receiver, why: "probe")
        streams.tick(now: now.utc)
    }

    /// A monitor event is about to be handled: the batches go out first, so the log reads in the
    /// order things happened and subscribers get the fixes that led to the event.
    func flushForEvent(_ now: AgentTime) {
        siteUpdater.monitorEvent(now: now.utc)
        streams.monitorEvent(now: now.utc)
    }

    /// The receiver announced a restart: it is awake, and the pause starts over.
    func receiverRestarted(_ now: AgentTime) {
        pause.receiverRestarted(nowNs: now.utc.totalNanoseconds)
        sampleWakeAt = nil
    }

    /// The motion input, when its line rose: the receiver wakes at once if it was paused. True
    /// when it rose (the loop takes what that queued).
    func readMotion(_ poll: borrowing PollSet, _ now: AgentTime, receiver: ReceiverState) -> Bool {
        guard motion.rose(poll) else { return false }
        let action = pause.motion(nowNs: now.utc.totalNanoseconds)
        AgentLog.info("locus: updates: motion input\(pause.isPaused ? "; receiver awake for \(pause.motionHoldMs / 1000) s" : "")")
        carryOut(action, receiver, why: "motion input")
        return true
    }

    // MARK: streams

    /// A control slot asks for updates: its stream, and the radios at the finest tier wanted.
    /// Returns the settings it got and the radios' tier.
    /// With `significantChangeM`, the stream delivers an update only after a move of that many
    /// metres, whatever the site's `significant_change`, and its tier is never finer than the
    /// coarse one the distance implies (`significantChangeTier`): it does not raise the radios.
    /// What the request leaves out is the site's `[updates]`.
    func startStream(_ slot: Int, _ request: UpdateStreamRequest) -> (LiveUpdateSettings, AccuracyTier) {
        let chosenPreset = request.preset ?? site.preset
        var chosenTier = request.accuracy ?? site.accuracy
        if let significantChangeM = request.significantChangeM {
            let coarse = LiveUpdates.significantChangeTier(significantChangeM)
            if request.accuracy == nil || chosenTier < coarse { chosenTier = coarse }
        }
        var settings = LiveUpdateSettings(site, preset: chosenPreset, tier: chosenTier)
        if let significantChangeM = request.significantChangeM {
            settings.significantChange = true
            settings.significantChangeM = significantChangeM
        }
        if let distanceFilterM = request.distanceFilterM { settings.distanceFilterM = distanceFilterM }
        if let batchCount = request.batchCount { settings.batchCount = batchCount }
        if let batchAgeMs = request.batchAgeMs { settings.batchAgeMs = batchAgeMs }
        settings.pausesAutomatically = request.pausesAutomatically
        precondition(settings.batchCount <= UpdateStreams.batchCapacity(site: site.batchCount), "a stream's batch within the render buffer")
        streams.open(slot, UpdateStreams.Stream(updater: LiveUpdater(settings: settings), preset: chosenPreset, tier: chosenTier,
                                                activity: request.activity, quiet: request.quiet))
        AgentLog.info("locus: updates: \(request.quiet ? "service session" : "stream") \(slot) opened (\(chosenPreset), \(chosenTier)\(request.pausesAutomatically ? "" : ", no pause"))")
        applyRadioTier()
        return (settings, radioTier)
    }

    /// Update streams open (service sessions included).
    var streamCount: Int { streams.count }

    /// The most updates a stream's batch may hold here.
    var streamBatchCapacity: Int { UpdateStreams.batchCapacity(site: site.batchCount) }

    /// A stream ends (`updates-stop`, its connection closed, or it could not keep up).
    func endStream(_ slot: Int) {
        guard streams.close(slot) else { return }
        AgentLog.info("locus: updates: stream \(slot) closed")
        applyRadioTier()
    }

    /// A control connection ended: its stream and its waiting location request end with it.
    func connectionEnded(_ slot: Int, _ now: AgentTime) {
        endStream(slot)
        guard slot < requests.pending.capacity, requests.pending.isBusy(slot) else { return }
        let waiting = requests.pending.waitingCount
        requests.pending.cancel(slot: slot)
        if waiting > 0 && requests.pending.waitingCount == 0 { locatesReleased(now.utc.totalNanoseconds) }
    }

    // MARK: significant change

    /// The coarsest tier whose accuracy is within a significant-change distance: 1 km and more is
    /// `kilometer` (3 km and more `threeKilometers`), less is `hundredMeters`; never finer.
    static func significantChangeTier(_ distanceM: Double) -> AccuracyTier {
        var tier = AccuracyTier.hundredMeters
        for candidate in [AccuracyTier.kilometer, .threeKilometers] where TierPolicy(tier: candidate).desiredAccuracyM <= distanceM {
            tier = candidate
        }
        return tier
    }

    // MARK: single location request

    /// `locate` from control slot `slot`: answered at once by the last fix when it is recent and
    /// accurate enough; otherwise it waits, and the receiver is woken through its plan: the
    /// radios go to the request's tier if it is finer, a paused receiver (stationary, or off
    /// between boundary-aware samples) is woken and kept awake until the request is answered.
    /// Requests waiting together share the wake.
    func locate(_ slot: Int, id: Int64?, accuracy: AccuracyTier?, maxAgeMs: Int64, timeoutMs: Int64, _ now: AgentTime,
                receiver: ReceiverState) -> LocateStart {
        let tier = accuracy ?? site.accuracy
        let nowNs = now.utc.totalNanoseconds
        if LocateRequests.answersAtOnce(requests.lastFix, tier: tier, maxAgeMs: maxAgeMs, nowNs: nowNs), let fix = requests.lastFix, let time = fix.time {
            requests.answeredAtOnce()
            return .answered(fix, ageMs: (nowNs - time.totalNanoseconds) / 1_000_000)
        }
        guard !requests.pending.isBusy(slot) else { return .busy }
        if requests.pending.waitingCount == 0 { requests.startedWaiting(nowNs: nowNs) }
        requests.pending.start(slot: slot, id: id, tier: tier, timeoutMs: timeoutMs, monotonicNs: now.monotonic.nanoseconds)
        applyRadioTier()
        if let deadlineNs = requests.pending.latestDeadlineNs {
            // The pause keeps the UTC clock: the latest deadline as a UTC time from this turn's.
            let untilNs = nowNs + (deadlineNs - now.monotonic.nanoseconds)
            carryOut(pause.requested(untilNs: untilNs, nowNs: nowNs), receiver, why: "location request")
        }
        if sampleWakeAt != nil {
            // Off between boundary-aware samples: woken now rather than at the next sample.
            sampleWakeAt = nil
            AgentLog.info("locus: updates: waking the receiver (location request)")
            radios.queue(.wake)
        }
        AgentLog.info("locus: updates: location request \(slot) waiting (\(tier), up to \(timeoutMs / 1000) s)")
        return .waiting
    }

    /// The last waiting request was answered or went away: the receiver goes back to the plan it
    /// was on (the radios' tier without the requests; asleep again at the next tick if stationary).
    private func locatesReleased(_ nowNs: Int64) {
        requests.stoppedWaiting(nowNs: nowNs)
        pause.requestsAnswered(nowNs: nowNs)
        applyRadioTier()
    }

    /// An answered request's reply into `line`, its fix filtered per `[privacy]`.
    private func renderLocated(_ request: LocateRequests.Request) {
        line.reset()
        guard let best = request.best, request.outcome != .unavailable else {
            requests.answeredUnavailable()
            ControlReply.locationUnavailable(request.id, timeoutMs: request.timeoutMs, into: &line)
            return
        }
        requests.answered(located: request.outcome == .located)
        let fix = PrivacyFilter.shownFix(best, privacy)
        let ageMs = (request.answeredNs - (best.time?.totalNanoseconds ?? request.answeredNs)) / 1_000_000
        ControlReply.located(request.id, fix, ageMs: ageMs, accuracyLimited: request.outcome == .accuracyLimited, places: places,
                             simulated: isSimulated, into: &line)
    }

    /// The fleet's `locate` answered after a wait: its object, nil when no fix came.
    private func renderFleetLocated(_ request: LocateRequests.Request) -> UnsafeRawBufferPointer? {
        guard let best = request.best, request.outcome != .unavailable else {
            requests.answeredUnavailable()
            return nil
        }
        requests.answered(located: request.outcome == .located)
        let ageMs = (request.answeredNs - (best.time?.totalNanoseconds ?? request.answeredNs)) / 1_000_000
        return fleetLocated(best, ageMs: ageMs, accuracyLimited: request.outcome == .accuracyLimited)
    }

    /// A fix as the fleet's `locate` answers with it, filtered per `[privacy]`:
    /// `{"fix":{TPV},"age_s":A,"accuracy_limited":B}` (and `place` with `[geocoding] annotate`).
    func fleetLocated(_ fix: Fix, ageMs: Int64, accuracyLimited: Bool) -> UnsafeRawBufferPointer {
        line.reset()
        ControlReply.location(PrivacyFilter.shownFix(fix, privacy), ageMs: ageMs, accuracyLimited: accuracyLimited, places: places, into: &line)
        return line.bytes
    }

    /// The last fix's position as a client may see it (`[privacy]`), for ranking places by
    /// nearness (`geocode`); nil without a fix or with `fixes = "none"`.
    var lastPosition: GeoPoint? {
        guard let lastFix = requests.lastFix, privacy != .none else { return nil }
        let shown = PrivacyFilter.shownFix(lastFix, privacy)
        guard let latitude = shown.latitude, let longitude = shown.longitude else { return nil }
        return GeoPoint(latitude: latitude, longitude: longitude)
    }

    // MARK: what the loop takes

    /// The site updater's next output, taken where it lies (a fix is not copied on its way): a
    /// fix with a position to `fix`, a visit to `visit`, with `nextItem`'s notices and tap;
    /// false when there is none. The loop takes these before `nextItem`'s other items.
    func takeSiteOutput(fix: (UnsafePointer<Fix>) -> Void, visit: (Visit) -> Void) -> Bool {
        siteUpdater.takeOutput { output in
            siteOutputTap?(output.pointee)
            switch output.pointee {
            case .update(let update):
                if update.isStationary { AgentLog.info("locus: updates: stationary since \(update.time.iso8601)") }
                guard update.fix.hasPosition else { return }
                withUnsafePointer(to: update.fix) { fix($0) }
            case .visit(let found):
                if let departure = found.departure {
                    AgentLog.info("locus: updates: visit from \(found.arrival.iso8601) to \(departure.iso8601), radius \(Int(found.radiusM)) m")
                } else {
                    AgentLog.info("locus: updates: arrived at a visit since \(found.arrival.iso8601), radius \(Int(found.radiusM)) m")
                }
                visit(found)
            case .batchEnd:
                return
            }
        }
    }

    /// The next item for the loop: the site updater's fixes and visits first, then each stream's
    /// lines (updates numbered by batch, with the flush reason; visits).
    func nextItem() -> Item? {
        while siteUpdater.hasOutput, let output = siteUpdater.nextOutput() {
            siteOutputTap?(output)
            switch output {
            case .update(let update):
                if update.isStationary { AgentLog.info("locus: updates: stationary since \(update.time.iso8601)") }
                guard update.fix.hasPosition else { continue }
                return .fix(update.fix)
            case .visit(let visit):
                if let departure = visit.departure {
                    AgentLog.info("locus: updates: visit from \(visit.arrival.iso8601) to \(departure.iso8601), radius \(Int(visit.radiusM)) m")
                } else {
                    AgentLog.info("locus: updates: arrived at a visit since \(visit.arrival.iso8601), radius \(Int(visit.radiusM)) m")
                }
                return .visit(visit)
            case .batchEnd:
                continue
            }
        }
        if requests.pending.answeredCount > 0, let answered = requests.pending.nextAnswered() {
            if answered.slot == fleetSlot { return .fleetLocated(renderFleetLocated(answered.request)) }
            renderLocated(answered.request)
            return .reply(slot: answered.slot, line: line.bytes)
        }
        if streams.count > 0, let slot = streams.next(privacy: privacy, places: places, simulated: isSimulated, into: &line) {
            return .stream(slot: slot, line: line.overflowed ? nil : line.bytes)
        }
        return nil
    }

    /// What the pause, the samples and the radios' tier decided for the receiver, in order.
    func nextReceiverOrder() -> ReceiverOrder? { radios.next() }

    /// The BLE scan's timing for a new radio tier, once.
    func takeScanSettings() -> ScanSettings? { radios.takeScanSettings() }

    // MARK: internals

    /// Boundary-aware sampling for the on/off tiers: after a fix, a receiver that can sleep
    /// (u-blox) goes into backup until the next fix is due (`SamplingPlanner`, from the nearest
    /// fence edge and the preset's top speed), and is woken `hotStartLeadMs` early.
    private func scheduleNextFix(_ fix: Fix, _ time: UTCTime, _ receiver: ReceiverState, _ engine: MonitorEngine) {
        let tier = TierPolicy(tier: radioTier)
        guard case .onOff = tier.dutyCycle, !pause.isPaused, sampleWakeAt == nil,
              let latitude = fix.latitude, let longitude = fix.longitude else { return }
        let configuration = siteUpdater.settings.configuration
        let accuracyM = fix.horizontalAccuracyM
        // Edges beyond what the device can reach within the longest interval do not matter.
        let reachM = configuration.maximumSpeedMps * Double(tier.maximumIntervalMs) / 1_000 + (accuracyM ?? 0)
        let edgeM = engine.nearestFenceEdgeM(latitude: latitude, longitude: longitude, limitM: reachM)
        let due = SamplingPlanner(configuration, tier).nextFixTime(now: time, distanceToEdgeM: edgeM, accuracyM: accuracyM)
        // Woken a hot start early: the receiver's measured one (plus a fix interval), once known.
        let leadMs = pause.hotStartSamples > 0 ? pause.hotStartMs + configuration.fixIntervalMs : LiveUpdates.hotStartLeadMs
        let sleepMs = (due.totalNanoseconds - time.totalNanoseconds) / 1_000_000 - leadMs
        guard sleepMs >= LiveUpdates.minimumSampleSleepMs, receiver.canSleep(durationMs: sleepMs) else { return }
        radios.queue(.sleep(durationMs: sleepMs))
        sampleWakeAt = UTCTime(nanoseconds: time.totalNanoseconds + sleepMs * 1_000_000)
        AgentLog.debug("locus: updates: receiver off for \(sleepMs) ms (nearest fence edge \(edgeM.map { "\(Int($0)) m" } ?? "none"))")
    }

    /// A stationary fix's distance to the nearest fence edge less its accuracy (nil: no fence
    /// within what the longest sleep could reach), for the pause's schedule.
    private func clearance(_ fix: Fix, _ engine: MonitorEngine) -> Double? {
        guard let latitude = fix.latitude, let longitude = fix.longitude else { return nil }
        let configuration = siteUpdater.settings.configuration
        let accuracyM = fix.horizontalAccuracyM ?? 0
        let limitM = configuration.maximumSpeedMps * Double(ProbeSchedule.motionCeilingMs) / 1_000 + accuracyM
        guard let edgeM = engine.nearestFenceEdgeM(latitude: latitude, longitude: longitude, limitM: limitM) else { return nil }
        return edgeM - accuracyM
    }

    /// Carries out what the pause decided.
    private func carryOut(_ action: PauseController.Action, _ receiver: ReceiverState, why: StaticString) {
        switch action {
        case .none:
            break
        case .sleep(let durationMs):
            sampleWakeAt = nil   // the pause owns the receiver now
            guard receiver.canSleep(durationMs: durationMs) else { return }
            radios.queue(.sleep(durationMs: durationMs))
            AgentLog.info("locus: updates: receiver asleep for \(durationMs / 1000) s (\(why))")
        case .wake:
            AgentLog.info("locus: updates: waking the receiver (\(why))")
            radios.queue(.wake)
        }
    }

    /// The tier the radios run at: the finest of the site's and the open streams'; the
    /// receiver's platform model: the most dynamic of the site's and the streams' activities; the
    /// pause held off while a stream without it is open. A change of tier or model orders the
    /// receiver's plan (and a new tier the scan's timing).
    private func applyRadioTier() {
        var wanted = streams.finestTier(site.accuracy)
        if let requested = requests.pending.finestTier, requested < wanted { wanted = requested }
        let model = streams.receiverModel(site.preset)
        if streams.keepingAwake > 0 && !pause.keptAwake {
            // Letting go waits for the next tick (`releaseKeptAwake`), which knows the time.
            AgentLog.info("locus: updates: a stream without the automatic pause is open: the receiver stays awake")
            if pause.keepAwake(true, isStationary: siteUpdater.isStationary, nowNs: 0) == .wake { radios.queue(.wake) }
        }
        guard wanted != radioTier || model != receiverModel else { return }
        if wanted != radioTier {
            AgentLog.info("locus: updates: radios from \(radioTier) to \(wanted)")
            radios.scan(TierPolicy(tier: wanted).scanSettings)
        }
        if model != receiverModel { AgentLog.info("locus: updates: receiver's platform model from \(receiverModel) to \(model)") }
        radioTier = wanted
        receiverModel = model
        let configuration = model == site.preset ? siteUpdater.settings.configuration : LiveConfiguration(preset: model)
        radios.queue(.plan(configuration, TierPolicy(tier: wanted)))
    }
}
