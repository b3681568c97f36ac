/// Diagnostics on an update, after iOS 18's CLLocationUpdate.
public struct UpdateDiagnostics: OptionSet, Equatable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The device has stopped; updates pause until it moves.
    public static let stationary = UpdateDiagnostics(rawValue: 1 << 0)
    /// No fix: said in an update rather than by going quiet.
    public static let locationUnavailable = UpdateDiagnostics(rawValue: 1 << 1)
    /// The fix is less accurate than the tier asks for.
    public static let accuracyLimited = UpdateDiagnostics(rawValue: 1 << 2)

    /// The names of the flags set, in a fixed order (for writers that must not allocate).
    @inline(__always)
    public func forEachName(_ body: (StaticString) -> Void) {
        if contains(.stationary) { body("stationary") }
        if contains(.locationUnavailable) { body("locationUnavailable") }
        if contains(.accuracyLimited) { body("accuracyLimited") }
    }
}

/// One delivered update (CLLocationUpdate): the fix, or the time a fix was missed.
public struct LocationUpdate: Equatable, Sendable {
    public var fix: Fix
    public var time: UTCTime
    public var isStationary: Bool
    public var diagnostics: UpdateDiagnostics
}

/// What `LiveUpdater` hands its caller, in order.
public enum LiveOutput: Equatable, Sendable {
    case update(LocationUpdate)
    /// The updates since the previous `batchEnd` were one batch, delivered for this reason.
    case batchEnd(FlushReason)
    case visit(Visit)
}

public enum FlushReason: Equatable, Sendable, CustomStringConvertible {
    case count, age, event, end
    public var description: String { name.description }
    /// The name in JSON (a static string, for writers that must not allocate).
    public var name: StaticString {
        switch self {
        case .count: return "count"
        case .age: return "age"
        case .event: return "event"
        case .end: return "end"
        }
    }
}

/// The `[updates]` section as the updater uses it.
public struct LiveUpdateSettings: Equatable, Sendable {
    public var configuration: LiveConfiguration
    public var tier: TierPolicy
    public var batchCount: Int
    public var batchAgeMs: Int64
    public var distanceFilterM: Double
    /// Deliver an update only after moving at least `significantChangeM` (no stationary updates).
    public var significantChange: Bool
    public var visitMinimumMs: Int64
    /// The distance for `significantChange`: the site's is `siteSignificantChangeM`; a client's
    /// stream chooses its own (`updates` with `significant_change_m`).
    public var significantChangeM = LiveUpdateSettings.siteSignificantChangeM
    /// false: standing still does not pause the updates (a client's stream that asked
    /// `pauses = false`): every fix that passes the filters is delivered, saying whether the
    /// device is stationary, and a silence while stationary is reported as any other.
    public var pausesAutomatically = true

    public static let siteSignificantChangeM = 500.0

    public init(preset: LivePreset = .default, tier: AccuracyTier = .hundredMeters, batchCount: Int = 1, batchAgeMs: Int64 = 0,
                distanceFilterM: Double = 0, significantChange: Bool = false, visitMinimumMs: Int64 = 300_000,
                stationaryWindowMs: Int64? = nil) {
        configuration = LiveConfiguration(preset: preset)
        if let stationaryWindowMs { configuration.stationaryWindowMs = stationaryWindowMs }
        self.tier = TierPolicy(tier: tier)
        self.batchCount = batchCount
        self.batchAgeMs = batchAgeMs
        self.distanceFilterM = distanceFilterM
        self.significantChange = significantChange
        self.visitMinimumMs = visitMinimumMs
    }
}

extension LiveUpdateSettings {
    /// The site's `[updates]`; a client's stream may choose another preset and tier, keeping the
    /// site's batching, filters and windows.
    public init(_ updates: SiteConfig.Updates, preset: LivePreset? = nil, tier: AccuracyTier? = nil) {
        self.init(preset: preset ?? updates.preset, tier: tier ?? updates.accuracy, batchCount: updates.batchCount,
                  batchAgeMs: updates.batchAgeMs, distanceFilterM: updates.distanceFilterM,
                  significantChange: updates.significantChange, visitMinimumMs: updates.visitMinimumMs,
                  stationaryWindowMs: updates.stationaryWindowMs)
    }
}

/// Fixes in, updates out: accuracy and speed filters, stationary pause and resume, distance
/// filter or significant change, visits, diagnostics, and deferred batching. The batch buffer
/// and the outbox are allocated once, in `init`; observing a fix allocates nothing.
///
/// Outputs go to an outbox the caller empties with `nextOutput()` after every call (as the
/// monitor engine's events are drained): no closure crosses the allocation-free entry points.
public final class LiveUpdater {
    public let settings: LiveUpdateSettings
    private var batch: UnsafeMutableBufferPointer<LocationUpdate>
    private var batchCount = 0
    /// Ring of outputs not yet taken: one call produces at most two batches' updates, their two
    /// batch ends and two visits (a stay's arrival and departure, when no call came between).
    private var outbox: UnsafeMutableBufferPointer<LiveOutput>
    private var outboxStart = 0
    @usableFromInline var outboxCount = 0
    private var batchStartNs: Int64 = 0
    private var stationary: StationaryDetector
    private var visits: VisitDetector
    /// The last fix taken, its position with its ECEF coordinates (worked out once a fix).
    private var lastAccepted: (point: GeoPoint, timeNs: Int64)? = nil
    private var lastDelivered: (latitude: Double, longitude: Double)? = nil
    private var lastFixNs: Int64? = nil
    private var unavailableSinceNs: Int64? = nil
    private var lastUnavailableUpdateNs: Int64 = 0
    /// Fixes dropped by the accuracy and speed filters (operating conditions, counted).
    public private(set) var filteredCount = 0

    public init(settings: LiveUpdateSettings) {
        precondition(settings.batchCount >= 1, "a batch holds at least one update")
        self.settings = settings
        batch = .allocate(capacity: settings.batchCount)
        outbox = .allocate(capacity: 2 * settings.batchCount + 4)
        stationary = StationaryDetector(settings.configuration)
        visits = VisitDetector(minimumMs: settings.visitMinimumMs)
    }

    deinit {
        batch.baseAddress!.deinitialize(count: batchCount)
        batch.deallocate()
        while nextOutput() != nil {}
        outbox.deallocate()
    }

    public var isStationary: Bool { stationary.isStationary }
    /// The last accepted fix was a good one inside the stop: stationary, within the stop's radius
    /// plus its accuracy of the centre, and its accuracy no worse than the stop's radius (a
    /// poorer fix cannot tell). The pause ends a probe on one such fix.
    public private(set) var lastFixInsideStop = false
    /// Standing still with the automatic pause on: no updates are due.
    private var isPaused: Bool {
        // Locals, not `self`, in the autoclosure (see `put`).
        let standing = stationary.isStationary, pauses = settings.pausesAutomatically
        return standing && pauses
    }

    /// The outbox holds an output (`nextOutput` would return one; asking this copies none).
    @inlinable public var hasOutput: Bool { outboxCount > 0 }

    /// The oldest output not yet taken, in order; nil when the outbox is empty.
    @_noAllocation
    public func nextOutput() -> LiveOutput? {
        guard outboxCount > 0 else { return nil }
        let output = (outbox.baseAddress! + outboxStart).move()
        outboxStart = (outboxStart + 1) % outbox.count
        outboxCount -= 1
        return output
    }

    /// The oldest output handed to `body` where it lies in the outbox (not moved out and copied
    /// on), then dropped; false when the outbox is empty. `body` takes no outputs itself.
    @inline(__always)
    public func takeOutput(_ body: (UnsafePointer<LiveOutput>) -> Void) -> Bool {
        guard outboxCount > 0 else { return false }
        let slot = outbox.baseAddress! + outboxStart
        body(slot)
        slot.deinitialize(count: 1)
        outboxStart = (outboxStart + 1) % outbox.count
        outboxCount -= 1
        return true
    }

    private func put(_ output: LiveOutput) {
        // Locals, not `self`, in the autoclosure: capturing self would retain it.
        let capacity = outbox.count, used = outboxCount
        precondition(used < capacity, "LiveUpdater outbox full: drain it with nextOutput() after every call")
        (outbox.baseAddress! + (outboxStart + outboxCount) % outbox.count).initialize(to: output)
        outboxCount += 1
    }

    /// A fix from the receiver (with or without a position).
    @_noAllocation
    public func observe(_ fix: Fix, now: UTCTime) {
        let nowNs = now.totalNanoseconds
        flushIfOld(nowNs)
        guard fix.hasPosition, let latitude = fix.latitude, let longitude = fix.longitude else {
            reportUnavailable(fix, nowNs: nowNs)
            return
        }
        lastFixNs = nowNs
        unavailableSinceNs = nil
        let accuracyM = fix.horizontalAccuracyM ?? 0
        guard accuracyM <= settings.configuration.maximumAccuracyM else {
            filteredCount += 1
            return
        }
        // The fix's ECEF coordinates, once for the plausibility check, the stationary detector
        // and the next fix's check.
        let point = GeoPoint(latitude: latitude, longitude: longitude)
        guard isPlausible(point, accuracyM, nowNs) else {
            filteredCount += 1
            return
        }
        lastAccepted = (point, nowNs)
        var diagnostics = UpdateDiagnostics(rawValue: 0)
        if accuracyM > settings.tier.desiredAccuracyM { diagnostics.insert(.accuracyLimited) }
        let transition = stationary.observe(point, accuracyM: accuracyM, timeNs: nowNs)
        // Locals, not `self`, in the autoclosure (see `put`).
        let insideStay = stationary.lastFixInsideStay, stopRadiusM = stationary.radiusM
        lastFixInsideStop = insideStay && accuracyM <= stopRadiusM
        if case .resumedMoving(let stay) = transition, let arrival = visits.arrival(stay, nowNs: stay.lastNearNs) { put(.visit(arrival)) }
        if let visit = visits.visit(for: transition) { put(.visit(visit)) }
        if let arrival = visits.arrival(stationary.currentStay, nowNs: nowNs) { put(.visit(arrival)) }
        if settings.significantChange {
            if let last = lastDelivered,
               Geodesy.chordM(GeoPoint(latitude: last.latitude, longitude: last.longitude), point) < settings.significantChangeM { return }
            enqueue(LocationUpdate(fix: fix, time: now, isStationary: false, diagnostics: diagnostics), nowNs)
            return
        }
        switch transition {
        case .becameStationary:
            diagnostics.insert(.stationary)
            enqueue(LocationUpdate(fix: fix, time: now, isStationary: true, diagnostics: diagnostics), nowNs)
            return
        case .resumedMoving:
            enqueue(LocationUpdate(fix: fix, time: now, isStationary: false, diagnostics: diagnostics), nowNs)
            return
        case .none:
            break
        }
        if isPaused { return }
        if let last = lastDelivered, settings.distanceFilterM > 0,
           Geodesy.chordM(GeoPoint(latitude: last.latitude, longitude: last.longitude), point) < settings.distanceFilterM { return }
        if stationary.isStationary { diagnostics.insert(.stationary) }
        enqueue(LocationUpdate(fix: fix, time: now, isStationary: stationary.isStationary, diagnostics: diagnostics), nowNs)
    }

    /// Time passing without fixes: a batch past its age is delivered, and a receiver silent for
    /// longer than the tier's interval (or five fix intervals) is reported unavailable.
    @_noAllocation
    public func tick(now: UTCTime) {
        let nowNs = now.totalNanoseconds
        flushIfOld(nowNs)
        if let arrival = visits.arrival(stationary.currentStay, nowNs: nowNs) { put(.visit(arrival)) }
        // Paused for standing still, the receiver is meant to be quiet.
        guard let lastFixNs, unavailableSinceNs == nil, !isPaused else { return }
        if nowNs - lastFixNs > silenceNs { reportUnavailable(Fix(timeOfDayNs: 0), nowNs: nowNs) }
    }

    private var silenceNs: Int64 { max(settings.tier.maximumIntervalMs, 5 * settings.configuration.fixIntervalMs) * 1_000_000 }

    /// When `tick` next has something to do (a batch reaching its age, a silence becoming
    /// `locationUnavailable`), in the updater's time; nil when only a fix can change anything.
    public var nextDeadlineNs: Int64? {
        var deadline: Int64? = nil
        if batchCount > 0, settings.batchAgeMs > 0 { deadline = batchStartNs + settings.batchAgeMs * 1_000_000 }
        if let lastFixNs, unavailableSinceNs == nil, !isPaused {
            let silent = lastFixNs + silenceNs + 1
            deadline = min(deadline ?? silent, silent)
        }
        if let arrival = visits.arrivalDueNs(stationary.currentStay) { deadline = min(deadline ?? arrival, arrival) }
        return deadline
    }

    /// A monitor event fired: whatever is batched goes out now.
    @_noAllocation
    public func monitorEvent(now: UTCTime) {
        flush(.event)
    }

    /// The end of the stream: the last batch, and the arrival of a stay still going on that has
    /// lasted the visit minimum, if not reported yet (it has no departure).
    public func finish(now: UTCTime) {
        flush(.end)
        if let visit = visits.arrival(stationary.currentStay, nowNs: now.totalNanoseconds) { put(.visit(visit)) }
    }

    // MARK: pieces

    /// A jump that would need more than the preset's maximum speed (beyond both fixes' accuracy)
    /// is an outlier.
    private func isPlausible(_ point: GeoPoint, _ accuracyM: Double, _ nowNs: Int64) -> Bool {
        guard let last = lastAccepted, nowNs > last.timeNs else { return true }
        let distanceM = Geodesy.chordM(last.point, point)
        let seconds = Double(nowNs - last.timeNs) / 1e9
        return distanceM - 2 * accuracyM <= settings.configuration.maximumSpeedMps * seconds
    }

    /// The first fix without a position says so at once; while it lasts, once per tier interval.
    private func reportUnavailable(_ fix: Fix, nowNs: Int64) {
        if unavailableSinceNs != nil, nowNs - lastUnavailableUpdateNs < settings.tier.maximumIntervalMs * 1_000_000 { return }
        if unavailableSinceNs == nil { unavailableSinceNs = nowNs }
        lastUnavailableUpdateNs = nowNs
        let update = LocationUpdate(fix: fix, time: UTCTime(nanoseconds: nowNs), isStationary: false, diagnostics: .locationUnavailable)
        enqueue(update, nowNs, track: false)
    }

    private func enqueue(_ update: LocationUpdate, _ nowNs: Int64, track: Bool = true) {
        if track, let latitude = update.fix.latitude, let longitude = update.fix.longitude { lastDelivered = (latitude, longitude) }
        if batchCount == 0 { batchStartNs = nowNs }
        (batch.baseAddress! + batchCount).initialize(to: update)
        batchCount += 1
        if batchCount == settings.batchCount { flush(.count) }
    }

    private func flushIfOld(_ nowNs: Int64) {
        // Age 0 means no age bound: batches are then bounded by count (and events) only.
        if batchCount > 0, settings.batchAgeMs > 0, nowNs - batchStartNs >= settings.batchAgeMs * 1_000_000 { flush(.age) }
    }

    private func flush(_ reason: FlushReason) {
        guard batchCount > 0 else { return }
        for index in 0..<batchCount { put(.update((batch.baseAddress! + index).move())) }
        batchCount = 0
        put(.batchEnd(reason))
    }
}
