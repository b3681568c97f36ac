import LocusCore
import LocusDevices

/// `locus replay --power-report`: the power model on a recording. Each accuracy tier's sampling
/// (boundary-aware fixes, the stationary pause's sleeps and probes) is played against the
/// recording's every fix, which the engine alone decides as the reference; it is a model of five
/// receivers, not a run of the agent (`--updates` and the event replay are the agent's, ReplayRun).
enum ReplayUpdates {
    static func freshEngine(_ loaded: LoadedConfig, start: Int64) -> MonitorEngine {
        let engine = EngineSetup.engine(for: loaded.site, board: loaded.board)
        for (name, result) in EngineSetup.addConfigured(loaded.site, to: engine, now: UTCTime(nanoseconds: start)) {
            Console.error("locus: replay: condition \(name) not added: \(result == .limitExceeded ? "capacity.conditions is full" : "too many monitors")\n")
        }
        return engine
    }

    // MARK: power report

    struct Detection {
        var key: String
        var timeNs: Int64
    }

    /// What every tier's POWER line shares: the recording and the reference run.
    struct PowerContext {
        var receiver: StaticString
        var preset: String
        var configuredTier: AccuracyTier
        var durationS: Double
        var fixes: Int
        var transitions: Int
        var resumes: [Int64]
        /// The site names a motion input: the report models it (`motionAboveMps`).
        var motionInput: Bool
    }

    /// The power report's motion input: a sensor that sees the whole recording, firing when the
    /// recorded speed over ground rises through this (a vehicle pulling away; a parked
    /// receiver's Doppler noise stays well below it).
    static let motionAboveMps = 2.0

    /// Why the receiver was on: the POWER line's `onS` members.
    enum OnCause: Int {
        /// Moving (or not yet known to stand still), at the tier's plan.
        case tracking
        /// Fixes due sooner than the tier's longest interval because a fence edge is near, or a
        /// stationary receiver too near an edge to sleep.
        case nearEdge
        /// The pause's probes, from the wake to the probe's last fix.
        case probe
        /// Held awake by the motion input.
        case motion
        /// Awake for location requests.
        case locate

        static let count = 5
        static let names: [StaticString] = ["tracking", "nearEdge", "probe", "motion", "locate"]
    }

    /// For every tier: which fixes boundary-aware sampling would take, what the receiver would
    /// spend on them, and how late each geofence transition is seen compared with every fix
    /// (the recording's own rate, 1 Hz for the scenarios).
    // MARK: single location request

    /// `--locate-every S [--locate-accuracy TIER] [--locate-max-age S]`: a program's location
    /// request every S seconds of the recording (the default timeout), at TIER (default the
    /// site's), with a max age (default 30 s).
    struct LocateSchedule {
        var everyS: Double
        var tier: AccuracyTier?
        var maxAgeMs = LocateRequests.defaultMaxAgeMs
    }

    /// What the requests did in one tier's run.
    struct LocateTally {
        var requests = 0
        var atOnce = 0
        var located = 0
        var limited = 0
        var unavailable = 0
        var answerMaxS = 0.0
    }

    static func powerReport(_ observations: [ReplayCommand.Observation], loaded: LoadedConfig, locate: LocateSchedule? = nil) -> Int32 {
        let fixes: [Fix] = observations.compactMap { if case .fix(let fix) = $0 { return fix } else { return nil } }
        guard let first = fixes.first, let last = fixes.last else {
            Console.error("locus: replay: --power-report needs an NMEA recording with timed fixes\n")
            return 1
        }
        let (edges, shapes) = fenceIndex(loaded.site)
        defer { withExtendedLifetime(shapes) {} }
        let reference = detections(fixes, loaded: loaded)
        let settings = LiveUpdateSettings(loaded.site.updates)
        let currents = ReceiverCurrents.family(loaded.board.gnss?.receiver ?? .genericNMEA)
        // Movement after each stop, and the stops themselves, as continuous sampling without a
        // pause reports them.
        let (resumed, still) = stillStretches(fixes, settings)
        let context = PowerContext(receiver: currents.name, preset: "\(settings.configuration.preset)",
                                   configuredTier: loaded.site.updates.accuracy,
                                   durationS: Double(last.time!.totalNanoseconds - first.time!.totalNanoseconds) / 1e9,
                                   fixes: fixes.count, transitions: reference.count, resumes: resumed,
                                   motionInput: loaded.site.updates.motionInput != nil)
        var line = JSONWriter(capacity: 4096)
        for tier in [AccuracyTier.best, .nearestTenMeters, .hundredMeters, .kilometer, .threeKilometers] {
            let policy = TierPolicy(tier: tier)
            var run = simulate(fixes, policy, settings, edges, currents, still: still, motionInput: context.motionInput)
            // With requests: the same run plus them; what they cost is the difference.
            var requestsOnTimeS: Double? = nil
            if let locate {
                let without = run.account.onTimeS
                run = simulate(fixes, policy, settings, edges, currents, still: still, motionInput: context.motionInput,
                               locate: locate, requestTier: locate.tier ?? loaded.site.updates.accuracy)
                requestsOnTimeS = run.account.onTimeS - without
            }
            let sampledNs = matchTransitions(reference, detections(run.sampled, loaded: loaded))
            var lateness: [Double] = []
            for (detection, seenNs) in zip(reference, sampledNs) {
                if let seenNs { lateness.append(Double(seenNs - detection.timeNs) / 1e9) }
            }
            line.reset()
            writePower(tier, policy, run, lateness, context, requestsOnTimeS: requestsOnTimeS, into: &line)
            line.newline()
            Console.out(line.bytes)
            for (detection, seenNs) in zip(reference, sampledNs) {
                line.reset()
                writeTransition(tier, detection, seenNs, into: &line)
                line.newline()
                Console.out(line.bytes)
            }
        }
        return 0
    }

    /// For each reference transition, when the sampled run saw the same transition (the first
    /// not yet matched), or nil when it missed it.
    static func matchTransitions(_ reference: [Detection], _ seen: [Detection]) -> [Int64?] {
        var used = [Bool](repeating: false, count: seen.count)
        return reference.map { detection in
            guard let index = seen.indices.first(where: { !used[$0] && seen[$0].key == detection.key }) else { return nil }
            used[index] = true
            return seen[index].timeNs
        }
    }

    static func writePower(_ tier: AccuracyTier, _ policy: TierPolicy, _ run: TierRun, _ lateness: [Double], _ context: PowerContext,
                           requestsOnTimeS: Double? = nil, into line: inout JSONWriter) {
        let account = run.account
        line.beginObject()
        line.string("class", "POWER")
        line.string("receiver", context.receiver)
        line.string("preset", context.preset)
        line.string("tier", "\(tier)")
        line.boolean("configured", tier == context.configuredTier)
        line.string("dutyCycle", describe(policy.dutyCycle))
        line.number("hours", context.durationS / 3_600, decimals: 3)
        line.integer("fixes", context.fixes)
        line.integer("fixesUsed", run.sampled.count)
        line.number("gnssOnTimeS", account.onTimeS, decimals: 1)
        line.number("gnssOnPercent", account.durationS > 0 ? 100 * account.onTimeS / account.durationS : 0, decimals: 1)
        line.number("mAhPerDay", account.mAhPerDay, decimals: 1)
        line.number("bleScanDuty", policy.bleScanDuty, decimals: 3)
        line.number("wakeUpsPerHour", account.wakeUpsPerHour, decimals: 1)
        line.integer("transitions", context.transitions)
        line.integer("missed", context.transitions - lateness.count)
        line.number("lateMaxS", lateness.max() ?? 0, decimals: 1)
        line.number("lateMeanS", lateness.isEmpty ? 0 : lateness.reduce(0, +) / Double(lateness.count), decimals: 1)
        // The stationary pause: time asleep, and movement after each stop.
        line.number("pausedPercent", account.durationS > 0 ? 100 * run.pausedS / account.durationS : 0, decimals: 1)
        line.integer("resumes", context.resumes.count)
        line.integer("falseResumes", max(0, run.resumes.count - context.resumes.count))
        let resumeLateness = zip(context.resumes, run.resumes).map { Double($1 - $0) / 1e9 }
        line.integer("missedResumes", max(0, context.resumes.count - run.resumes.count))
        line.number("resumeLateMaxS", resumeLateness.max() ?? 0, decimals: 1)
        // Sampling that knows what it waits for: the on-time per cause, the on-time while the
        // device stood still (as continuous sampling sees it), the probes and motion wakes, and
        // the hot start the pause measured (wake to first fix).
        line.beginObject("onS")
        for cause in 0..<OnCause.count { line.number(OnCause.names[cause], run.onByCause[cause], decimals: 1) }
        line.endObject()
        let stillS = run.stillS
        line.number("stationaryS", stillS, decimals: 0)
        line.number("stationaryOnPercent", stillS > 0 ? 100 * run.stillOnS / stillS : 0, decimals: 1)
        line.boolean("motionInput", context.motionInput)
        line.integer("probes", run.probes)
        line.integer("motionWakes", run.motionWakes)
        line.number("hotStartS", Double(run.hotStartMs) / 1_000, decimals: 1)
        if let requestsOnTimeS { writeLocate(run.locate, onTimeS: requestsOnTimeS, into: &line) }
        line.endObject()
    }

    /// The requests' members of a POWER object: what they did and the receiver on-time they
    /// cost (this tier's on-time with them less without them).
    static func writeLocate(_ tally: LocateTally, onTimeS: Double, into line: inout JSONWriter) {
        line.integer("locates", tally.requests)
        line.integer("locatesAtOnce", tally.atOnce)
        line.integer("locatesLocated", tally.located)
        line.integer("locatesAccuracyLimited", tally.limited)
        line.integer("locatesUnavailable", tally.unavailable)
        line.number("locateAnswerMaxS", tally.answerMaxS, decimals: 1)
        line.number("locateOnTimeS", onTimeS, decimals: 1)
    }

    /// {"class":"TRANSITION","tier":..,"condition":"monitor/id/state","continuous":..,"sampled":..|null[,"lateS":..]}
    static func writeTransition(_ tier: AccuracyTier, _ detection: Detection, _ seenNs: Int64?, into line: inout JSONWriter) {
        line.beginObject()
        line.string("class", "TRANSITION")
        line.string("tier", "\(tier)")
        line.string("condition", detection.key)
        line.time("continuous", UTCTime(nanoseconds: detection.timeNs))
        if let seenNs {
            line.time("sampled", UTCTime(nanoseconds: seenNs))
            line.number("lateS", Double(seenNs - detection.timeNs) / 1e9, decimals: 1)
        } else {
            line.null("sampled")
        }
        line.endObject()
    }

    /// One tier's receiver on a recording, as the agent runs it: the fixes it takes (boundary-aware
    /// sampling, and the stationary pause's sleeps and probes, `PauseController`), what that
    /// costs, how long it was paused, and when it reported movement after each stop.
    struct TierRun {
        var sampled: [Fix] = []
        var account: PowerAccount
        var pausedS = 0.0
        var resumes: [Int64] = []
        var locate = LocateTally()
        /// On-time per `OnCause`.
        var onByCause = [Double](repeating: 0, count: OnCause.count)
        /// The reference's stationary time, and the receiver's on-time within it.
        var stillS = 0.0
        var stillOnS = 0.0
        var probes = 0
        var motionWakes = 0
        var hotStartMs: Int64 = 0
    }

    /// The receiver's time on a recording: awake (the gaps between fixes taken, a hot start after
    /// a wake) or asleep (the pause, a sample's sleep), into the run's power account, each charge
    /// to the cause that kept it awake.
    struct ReceiverTimeline {
        var run: TierRun
        /// When the receiver went to sleep; nil while awake.
        var asleepSinceNs: Int64? = nil
        /// The last fix taken while awake (or the wake).
        var lastNs: Int64? = nil
        /// Woken and not fixed yet: its first fix comes a hot start after the wake.
        var acquiring = false
        var firstFixNs = Int64.min
        /// What keeps it awake now.
        var cause = OnCause.tracking
        /// The reference's stationary stretches, in order.
        let still: [(startNs: Int64, endNs: Int64)]

        init(run: TierRun, still: [(startNs: Int64, endNs: Int64)]) {
            self.run = run
            self.still = still
            // The first start is a hot start while tracking.
            self.run.onByCause[OnCause.tracking.rawValue] = run.account.onTimeS
            self.run.stillS = still.reduce(0) { $0 + Self.seconds($1.startNs, $1.endNs) }
        }

        var isAsleep: Bool { asleepSinceNs != nil }

        static func seconds(_ fromNs: Int64, _ toNs: Int64) -> Double { Double(toNs - fromNs) / 1e9 }

        /// The share of `fromNs...toNs` inside the stationary stretches.
        func stillShare(_ fromNs: Int64, _ toNs: Int64) -> Double {
            guard toNs > fromNs else { return 0 }
            var insideNs: Int64 = 0
            for stretch in still where stretch.endNs > fromNs && stretch.startNs < toNs {
                insideNs += min(toNs, stretch.endNs) - max(fromNs, stretch.startNs)
            }
            return Double(insideNs) / Double(toNs - fromNs)
        }

        /// The receiver's time from `fromNs` to `toNs`: asleep in backup, acquiring after a
        /// wake, or between two fixes at the tier's duty cycle; its on-time to the cause.
        mutating func charge(_ fromNs: Int64, _ toNs: Int64, asleep: Bool = false) {
            let gapS = Self.seconds(fromNs, toNs)
            let before = run.account.onTimeS
            if asleep {
                run.account.backup(gapS)
                run.pausedS += gapS
            } else if acquiring {
                run.account.acquire(gapS)
            } else {
                run.account.gap(gapS)
            }
            let onS = run.account.onTimeS - before
            run.onByCause[cause.rawValue] += onS
            if onS > 0 { run.stillOnS += onS * stillShare(fromNs, toNs) }
        }

        /// Woken at `timeNs` for `cause`: the sleep is paid for, and the first fix comes a hot
        /// start later.
        mutating func wake(_ timeNs: Int64, hotStartNs: Int64, for cause: OnCause) {
            guard let since = asleepSinceNs else { return }
            charge(since, timeNs, asleep: true)
            asleepSinceNs = nil
            lastNs = timeNs
            acquiring = true
            firstFixNs = timeNs + hotStartNs
            self.cause = cause
        }

        /// The pause sends it to sleep between fixes: the time since the last fix was awake.
        mutating func fallAsleep(_ timeNs: Int64) {
            guard asleepSinceNs == nil else { return }
            if let lastNs { charge(lastNs, timeNs) }
            acquiring = false
            asleepSinceNs = timeNs
            lastNs = nil
        }

        /// Asleep right after the fix taken at `timeNs` (that fix's gap is paid already).
        mutating func sleepAfterFix(_ timeNs: Int64) {
            asleepSinceNs = timeNs
            lastNs = nil
        }

        /// A fix taken at `timeNs`: the time since the last one (or the wake) was awake.
        mutating func take(_ fix: Fix, _ timeNs: Int64) {
            if let lastNs { charge(lastNs, timeNs) }
            acquiring = false
            lastNs = timeNs
            run.sampled.append(fix)
        }

        /// The recording ends at `endNs`.
        mutating func finish(_ endNs: Int64) -> TierRun {
            if let since = asleepSinceNs {
                charge(since, endNs, asleep: true)
                // Not woken: the last backup is no wake-up.
            } else if let lastNs {
                charge(lastNs, endNs)
            }
            return run
        }
    }

    /// What keeps the receiver awake after a fix or a wake: the pause's phase, or, tracking,
    /// whether the next fix is due sooner than the tier's longest interval (a fence edge near).
    static func cause(_ phase: PauseController.Phase, edgeNear: Bool) -> OnCause {
        switch phase {
        case .probing, .asleep: return .probe
        case .held: return .motion
        case .requested: return .locate
        case .nearEdge: return .nearEdge
        case .active: return edgeNear ? .nearEdge : .tracking
        }
    }

    /// With `locate`, a request every `everyS` of the recording at `requestTier`: answered from
    /// the last fix taken when recent and accurate enough, else the receiver is woken (the pause
    /// held, every fix taken) until a fix meets the tier or the timeout passes, as the agent does.
    static func simulate(_ fixes: [Fix], _ tier: TierPolicy, _ siteSettings: LiveUpdateSettings, _ edges: CircleIndex,
                         _ currents: ReceiverCurrents, still: [(startNs: Int64, endNs: Int64)] = [], motionInput: Bool = false,
                         locate: LocateSchedule? = nil, requestTier: AccuracyTier = .best) -> TierRun {
        var timeline = ReceiverTimeline(run: TierRun(account: PowerAccount(currents: currents, dutyCycle: tier.dutyCycle)), still: still)
        var settings = siteSettings
        settings.tier = tier
        let updater = LiveUpdater(settings: settings)
        var pause = PauseController(settings.configuration, tier, motionInput: motionInput)
        let planner = SamplingPlanner(settings.configuration, tier)
        let hotStartNs = Int64(currents.hotStartS * 1e9)
        let longestIntervalNs = tier.maximumIntervalMs * 1_000_000
        var dueNs = Int64.min
        let requests = LocateRequests(capacity: 1)
        var nextRequestNs = (fixes.first?.time?.totalNanoseconds ?? 0) + Int64((locate?.everyS ?? 0) * 1e9)
        var requestStartNs: Int64 = 0
        var lastTaken: Fix? = nil
        var wasMoving = true
        for fix in fixes {
            let timeNs = fix.time!.totalNanoseconds
            if motionInput { sense(fix, timeNs, wasMoving: &wasMoving, &pause, &timeline, hotStartNs: hotStartNs) }
            if let locate, timeNs >= nextRequestNs {
                nextRequestNs += Int64(locate.everyS * 1e9)
                if request(locate, requestTier, lastTaken, requests, &pause, &timeline, timeNs, hotStartNs: hotStartNs) {
                    requestStartNs = timeNs
                    dueNs = Int64.min
                }
            }
            if requests.waitingCount > 0 {
                requests.tick(monotonicNs: timeNs, nowNs: timeNs)
                tally(requests, &timeline.run, requestStartNs, timeNs, &pause)
            }
            switch pause.tick(isStationary: updater.isStationary, nowNs: timeNs) {
            case .wake: timeline.wake(timeNs, hotStartNs: hotStartNs, for: cause(pause.phase, edgeNear: false))
            case .sleep: timeline.fallAsleep(timeNs)
            case .none: break
            }
            // Awake, past the hot start, and a fix is wanted (the pause's, or the plan's next).
            guard !timeline.isAsleep, timeNs >= timeline.firstFixNs, pause.keepsReceiverAwake || timeNs >= dueNs else { continue }
            timeline.take(fix, timeNs)
            if fix.hasPosition { lastTaken = fix }
            if requests.waitingCount > 0 {
                requests.observe(fix, nowNs: timeNs)
                tally(requests, &timeline.run, requestStartNs, timeNs, &pause)
            }
            let wasStationary = updater.isStationary
            let filtered = updater.filteredCount
            updater.observe(fix, now: fix.time!)
            while updater.nextOutput() != nil {}
            if wasStationary && !updater.isStationary { timeline.run.resumes.append(timeNs) }
            let accepted = fix.hasPosition && updater.filteredCount == filtered
            // Standing still: the nearest edge's clearance sets the next sleep (as the agent).
            let clearanceM = accepted && updater.isStationary ? edgeDistanceM(fix, edges).map { $0 - (fix.horizontalAccuracyM ?? 0) } : nil
            let action = pause.observed(wasStationary: wasStationary, isStationary: updater.isStationary, accepted: accepted,
                                        insideStop: updater.lastFixInsideStop, clearanceM: clearanceM, nowNs: timeNs)
            if case .sleep = action {
                timeline.sleepAfterFix(timeNs)
                continue
            }
            // No position: fix again as soon as the receiver can.
            let distance = fix.hasPosition ? edgeDistanceM(fix, edges) : (edges.count > 0 ? 0 : nil)
            dueNs = planner.nextFixTime(now: fix.time!, distanceToEdgeM: distance, accuracyM: fix.horizontalAccuracyM).totalNanoseconds
            timeline.cause = cause(pause.phase, edgeNear: distance != nil && dueNs - timeNs < longestIntervalNs)
        }
        timeline.run.probes = pause.probes
        timeline.run.motionWakes = pause.motionWakes
        timeline.run.hotStartMs = pause.hotStartSamples > 0 ? pause.hotStartMs : 0
        return timeline.finish(fixes.last!.time!.totalNanoseconds)
    }

    /// The motion sensor sees every moment, whatever the receiver does: a rise through
    /// `motionAboveMps` wakes a sleeping receiver.
    private static func sense(_ fix: Fix, _ timeNs: Int64, wasMoving: inout Bool, _ pause: inout PauseController,
                              _ timeline: inout ReceiverTimeline, hotStartNs: Int64) {
        let moving = (fix.speedMps ?? 0) >= motionAboveMps
        if moving && !wasMoving, pause.motion(nowNs: timeNs) == .wake { timeline.wake(timeNs, hotStartNs: hotStartNs, for: .motion) }
        if case .held = pause.phase { timeline.cause = .motion }
        wasMoving = moving
    }

    /// The distance from the fix to the nearest fence edge; nil without a position or a fence.
    private static func edgeDistanceM(_ fix: Fix, _ edges: CircleIndex) -> Double? {
        guard let latitude = fix.latitude, let longitude = fix.longitude else { return nil }
        return edges.nearestEdgeM(latitude: latitude, longitude: longitude)
    }

    /// A location request at `timeNs`: answered at once from the last fix taken, or started (the
    /// pause wakes the receiver for it) unless one waits already. True when one was started.
    static func request(_ locate: LocateSchedule, _ tier: AccuracyTier, _ lastTaken: Fix?, _ requests: LocateRequests,
                        _ pause: inout PauseController, _ timeline: inout ReceiverTimeline, _ timeNs: Int64, hotStartNs: Int64) -> Bool {
        timeline.run.locate.requests += 1
        if LocateRequests.answersAtOnce(lastTaken, tier: tier, maxAgeMs: locate.maxAgeMs, nowNs: timeNs) {
            timeline.run.locate.atOnce += 1
            return false
        }
        guard requests.waitingCount == 0 else { return false }
        requests.start(slot: 0, id: nil, tier: tier, timeoutMs: LocateRequests.defaultTimeoutMs, monotonicNs: timeNs)
        if pause.requested(untilNs: timeNs + LocateRequests.defaultTimeoutMs * 1_000_000, nowNs: timeNs) == .wake {
            timeline.wake(timeNs, hotStartNs: hotStartNs, for: .locate)
        }
        timeline.cause = .locate
        return true
    }

    /// A request answered: counted, and the pause let go.
    static func tally(_ requests: LocateRequests, _ run: inout TierRun, _ startNs: Int64, _ timeNs: Int64, _ pause: inout PauseController) {
        guard let answered = requests.nextAnswered() else { return }
        switch answered.request.outcome {
        case .located: run.locate.located += 1
        case .accuracyLimited: run.locate.limited += 1
        case .unavailable, .waiting: run.locate.unavailable += 1
        }
        run.locate.answerMaxS = max(run.locate.answerMaxS, Double(timeNs - startNs) / 1e9)
        pause.requestsAnswered(nowNs: timeNs)
    }

    /// When continuous sampling (every fix, no pause) reports movement after a stop, and the
    /// stretches it reports standing still (from the stationary update to the movement, or to
    /// the end of the recording).
    static func stillStretches(_ fixes: [Fix], _ settings: LiveUpdateSettings) -> (resumes: [Int64], still: [(startNs: Int64, endNs: Int64)]) {
        let updater = LiveUpdater(settings: settings)
        var found: [Int64] = []
        var still: [(startNs: Int64, endNs: Int64)] = []
        var sinceNs: Int64? = nil
        for fix in fixes {
            let wasStationary = updater.isStationary
            updater.observe(fix, now: fix.time!)
            while updater.nextOutput() != nil {}
            let timeNs = fix.time!.totalNanoseconds
            if !wasStationary && updater.isStationary { sinceNs = timeNs }
            if wasStationary && !updater.isStationary {
                found.append(timeNs)
                if let sinceNs { still.append((sinceNs, timeNs)) }
                sinceNs = nil
            }
        }
        if let sinceNs, let endNs = fixes.last?.time?.totalNanoseconds { still.append((sinceNs, endNs)) }
        return (found, still)
    }

    /// Every geographic condition of the site, indexed for the nearest-edge query: circles (the
    /// same answers as `FenceEdges`, the linear scan, without visiting every circle) and the
    /// shapes' boundaries (`ShapeStore`, which the index refers to: keep it as long).
    static func fenceIndex(_ site: SiteConfig) -> (CircleIndex, ShapeStore) {
        var circles: [(latitude: Double, longitude: Double, radiusM: Double)] = []
        var shapes: [ConditionConfig.Kind] = []
        for monitor in site.monitors {
            for condition in monitor.conditions {
                switch condition.kind {
                case .circle(let latitude, let longitude, let radiusM): circles.append((latitude, longitude, radiusM))
                case .polygon, .corridor: shapes.append(condition.kind)
                case .beacon, .phone: break
                }
            }
        }
        let radii = circles.map { $0.radiusM }.sorted()
        let index = CircleIndex(capacity: circles.count + shapes.count,
                                cellSizeM: CircleIndex.suggestedCellSizeM(typicalReachM: radii.isEmpty ? 0 : radii[radii.count / 2]))
        for (id, circle) in circles.enumerated() {
            // An invalid circle (rejected by the site check) has no edge, as in FenceEdges.
            try? index.insert(id: Int32(id), latitude: circle.latitude, longitude: circle.longitude, radiusM: circle.radiusM)
        }
        let store = ShapeStore(shapeCapacity: circles.count + shapes.count, vertexCapacity: site.vertexCount)
        index.shapes = Unmanaged.passUnretained(store)
        for (offset, shape) in shapes.enumerated() {
            let id = Int32(circles.count + offset)
            let cap: ShapeStore.Cap?
            switch shape {
            case .polygon(let polygon): cap = try? store.insert(id: id, polygon: polygon)
            case .corridor(let corridor): cap = try? store.insert(id: id, corridor: corridor)
            default: cap = nil
            }
            if let cap { try? index.insert(id: id, latitude: cap.center.latitude, longitude: cap.center.longitude, radiusM: cap.radiusM, shape: true) }
        }
        return (index, store)
    }

    static func describe(_ dutyCycle: ReceiverDutyCycle) -> String {
        switch dutyCycle {
        case .continuous: return "continuous"
        case .cyclicTracking(let periodMs): return "cyclic-tracking \(periodMs / 1_000)s"
        case .onOff(let periodMs): return "on-off \(periodMs / 1_000)s"
        }
    }

    /// The transitions the engine reports on these fixes, each dated by the fix that showed it.
    static func detections(_ fixes: [Fix], loaded: LoadedConfig) -> [Detection] {
        let engine = freshEngine(loaded, start: fixes[0].time!.totalNanoseconds)
        var found: [Detection] = []
        func drain(_ timeNs: Int64) {
            while let event = engine.oldestPendingEvent() {
                found.append(Detection(key: "\(event.monitor)/\(event.identifier)/\(event.state)", timeNs: timeNs))
                engine.acknowledgeOldest()
            }
        }
        for fix in fixes {
            let timeNs = fix.time!.totalNanoseconds
            engine.tick(now: fix.time!)
            drain(timeNs)
            engine.observe(fix)
            drain(timeNs)
        }
        return found
    }
}
