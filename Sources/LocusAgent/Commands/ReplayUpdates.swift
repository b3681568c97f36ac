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
        // Movement after each stop, as continuous sampling without a pause reports it.
        let context = PowerContext(receiver: currents.name, preset: "\(settings.configuration.preset)",
                                   configuredTier: loaded.site.updates.accuracy,
                                   durationS: Double(last.time!.totalNanoseconds - first.time!.totalNanoseconds) / 1e9,
                                   fixes: fixes.count, transitions: reference.count, resumes: resumes(fixes, settings))
        var line = JSONWriter(capacity: 4096)
        for tier in [AccuracyTier.best, .nearestTenMeters, .hundredMeters, .kilometer, .threeKilometers] {
            let policy = TierPolicy(tier: tier)
            var run = simulate(fixes, policy, settings, edges, currents)
            // With requests: the same run plus them; what they cost is the difference.
            var requestsOnTimeS: Double? = nil
            if let locate {
                let without = run.account.onTimeS
                run = simulate(fixes, policy, settings, edges, currents, locate: locate, requestTier: locate.tier ?? loaded.site.updates.accuracy)
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
    }

    /// The receiver's time on a recording: awake (the gaps between fixes taken) or asleep (the
    /// pause, a sample's sleep), into the run's power account.
    struct ReceiverTimeline {
        var run: TierRun
        /// When the receiver went to sleep; nil while awake.
        var asleepSinceNs: Int64? = nil
        /// The last fix taken while awake.
        var lastNs: Int64? = nil

        var isAsleep: Bool { asleepSinceNs != nil }

        static func seconds(_ fromNs: Int64, _ toNs: Int64) -> Double { Double(toNs - fromNs) / 1e9 }

        /// Woken at `timeNs`: the sleep is paid for, and the receiver counts as awake from then.
        mutating func wake(_ timeNs: Int64) {
            guard let since = asleepSinceNs else { return }
            run.account.sleep(Self.seconds(since, timeNs))
            run.pausedS += Self.seconds(since, timeNs)
            asleepSinceNs = nil
            lastNs = timeNs
        }

        /// The pause sends it to sleep between fixes: the time since the last fix was awake.
        mutating func fallAsleep(_ timeNs: Int64) {
            guard asleepSinceNs == nil else { return }
            if let lastNs { run.account.gap(Self.seconds(lastNs, timeNs)) }
            asleepSinceNs = timeNs
            lastNs = nil
        }

        /// Asleep right after the fix taken at `timeNs` (that fix's gap is paid already).
        mutating func sleepAfterFix(_ timeNs: Int64) { asleepSinceNs = timeNs }

        /// A fix taken at `timeNs`: the time since the last one was awake.
        mutating func take(_ fix: Fix, _ timeNs: Int64) {
            if let lastNs { run.account.gap(Self.seconds(lastNs, timeNs)) }
            lastNs = timeNs
            run.sampled.append(fix)
        }

        /// The recording ends at `endNs`.
        mutating func finish(_ endNs: Int64) -> TierRun {
            if let since = asleepSinceNs {
                run.account.sleep(Self.seconds(since, endNs))
                run.pausedS += Self.seconds(since, endNs)
            } else if let lastNs {
                run.account.gap(Self.seconds(lastNs, endNs))
            }
            return run
        }
    }

    /// With `locate`, a request every `everyS` of the recording at `requestTier`: answered from
    /// the last fix taken when recent and accurate enough, else the receiver is woken (the pause
    /// held, every fix taken) until a fix meets the tier or the timeout passes, as the agent does.
    static func simulate(_ fixes: [Fix], _ tier: TierPolicy, _ siteSettings: LiveUpdateSettings, _ edges: CircleIndex,
                         _ currents: ReceiverCurrents, locate: LocateSchedule? = nil, requestTier: AccuracyTier = .best) -> TierRun {
        var timeline = ReceiverTimeline(run: TierRun(account: PowerAccount(currents: currents, dutyCycle: tier.dutyCycle)))
        var settings = siteSettings
        settings.tier = tier
        let updater = LiveUpdater(settings: settings)
        var pause = PauseController(settings.configuration, tier)
        let planner = SamplingPlanner(settings.configuration, tier)
        var dueNs = Int64.min
        let requests = LocateRequests(capacity: 1)
        var nextRequestNs = (fixes.first?.time?.totalNanoseconds ?? 0) + Int64((locate?.everyS ?? 0) * 1e9)
        var requestStartNs: Int64 = 0
        var lastTaken: Fix? = nil
        for fix in fixes {
            let timeNs = fix.time!.totalNanoseconds
            if let locate, timeNs >= nextRequestNs {
                nextRequestNs += Int64(locate.everyS * 1e9)
                if request(locate, requestTier, lastTaken, requests, &pause, &timeline, timeNs) {
                    requestStartNs = timeNs
                    dueNs = Int64.min
                }
            }
            if requests.waitingCount > 0 {
                requests.tick(monotonicNs: timeNs, nowNs: timeNs)
                tally(requests, &timeline.run, requestStartNs, timeNs, &pause)
            }
            switch pause.tick(isStationary: updater.isStationary, nowNs: timeNs) {
            case .wake: timeline.wake(timeNs)
            case .sleep: timeline.fallAsleep(timeNs)
            case .none: break
            }
            guard !timeline.isAsleep, pause.keepsReceiverAwake || timeNs >= dueNs else { continue }
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
            let action = pause.observed(wasStationary: wasStationary, isStationary: updater.isStationary,
                                        accepted: fix.hasPosition && updater.filteredCount == filtered, nowNs: timeNs)
            if case .sleep = action {
                timeline.sleepAfterFix(timeNs)
                continue
            }
            var distance: Double? = nil
            if fix.hasPosition, let latitude = fix.latitude, let longitude = fix.longitude {
                distance = edges.nearestEdgeM(latitude: latitude, longitude: longitude)
            } else if edges.count > 0 {
                distance = 0   // no position: fix again as soon as the receiver can
            }
            dueNs = planner.nextFixTime(now: fix.time!, distanceToEdgeM: distance, accuracyM: fix.horizontalAccuracyM).totalNanoseconds
        }
        return timeline.finish(fixes.last!.time!.totalNanoseconds)
    }

    /// A location request at `timeNs`: answered at once from the last fix taken, or started (the
    /// pause wakes the receiver for it) unless one waits already. True when one was started.
    static func request(_ locate: LocateSchedule, _ tier: AccuracyTier, _ lastTaken: Fix?, _ requests: LocateRequests,
                        _ pause: inout PauseController, _ timeline: inout ReceiverTimeline, _ timeNs: Int64) -> Bool {
        timeline.run.locate.requests += 1
        if LocateRequests.answersAtOnce(lastTaken, tier: tier, maxAgeMs: locate.maxAgeMs, nowNs: timeNs) {
            timeline.run.locate.atOnce += 1
            return false
        }
        guard requests.waitingCount == 0 else { return false }
        requests.start(slot: 0, id: nil, tier: tier, timeoutMs: LocateRequests.defaultTimeoutMs, monotonicNs: timeNs)
        if pause.requested(untilNs: timeNs + LocateRequests.defaultTimeoutMs * 1_000_000, nowNs: timeNs) == .wake {
            timeline.wake(timeNs)
        }
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

    /// When continuous sampling (every fix, no pause) reports movement after a stop.
    static func resumes(_ fixes: [Fix], _ settings: LiveUpdateSettings) -> [Int64] {
        let updater = LiveUpdater(settings: settings)
        var found: [Int64] = []
        for fix in fixes {
            let wasStationary = updater.isStationary
            updater.observe(fix, now: fix.time!)
            while updater.nextOutput() != nil {}
            if wasStationary && !updater.isStationary { found.append(fix.time!.totalNanoseconds) }
        }
        return found
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
