/// What the `[privacy] fixes` setting lets leave the engine: into the log, the export and the
/// control socket. The engine itself always decides on full-precision fixes.
///
/// - `full`: positions as received.
/// - `coarse`: positions rounded to 0.01° (about 1.1 km of latitude), the accuracy raised to at
///   least 1,000 m to say so; fix records at most one per `fix_interval`.
/// - `none`: no fix records; events keep their decision (state, edge distance, accuracy) but not
///   the position that made it.
public enum PrivacyFilter {
    public static let coarseStepDegrees = 0.01
    public static let coarseAccuracyM = 1_000.0

    public static func coarsen(_ degrees: Double) -> Double {
        (degrees / coarseStepDegrees).rounded() * coarseStepDegrees
    }

    public static func event(_ event: MonitorEvent, _ privacy: SiteConfig.FixPrivacy) -> MonitorEvent {
        let source = event.explanation.source
        guard privacy != .full, source == .fix || source == .transit else { return event }
        var filtered = event
        switch privacy {
        case .full: break
        case .coarse:
            filtered.explanation.latitude = coarsen(event.explanation.latitude)
            filtered.explanation.longitude = coarsen(event.explanation.longitude)
        case .none:
            filtered.explanation.latitude = .nan
            filtered.explanation.longitude = .nan
        }
        return filtered
    }

    /// The fix record to log, or nil when fixes are not logged.
    public static func fix(_ fix: Fix, _ privacy: SiteConfig.FixPrivacy) -> LogPayload.LoggedFix? {
        guard privacy != .none, let time = fix.time, let latitude = fix.latitude, let longitude = fix.longitude else { return nil }
        let mode = UInt8(max(1, fix.mode.rawValue))
        var logged = LogPayload.LoggedFix(timeNs: time.totalNanoseconds, latitude: latitude, longitude: longitude,
                                          accuracyM: fix.horizontalAccuracyM ?? -1, speedMps: fix.speedMps ?? -1,
                                          trackDeg: fix.trackDeg ?? -1, mode: mode)
        if privacy == .coarse {
            logged.latitude = coarsen(latitude)
            logged.longitude = coarsen(longitude)
            logged.accuracyM = max(logged.accuracyM, coarseAccuracyM)
            logged.speedMps = -1
            logged.trackDeg = -1
        }
        return logged
    }

    /// A visit as it may be logged or sent: coarsened like a fix, nil with `none`.
    public static func visit(_ visit: Visit, _ privacy: SiteConfig.FixPrivacy) -> Visit? {
        switch privacy {
        case .full: return visit
        case .none: return nil
        case .coarse:
            var coarse = visit
            coarse.latitude = coarsen(visit.latitude)
            coarse.longitude = coarsen(visit.longitude)
            coarse.radiusM = max(visit.radiusM, coarseAccuracyM)
            return coarse
        }
    }

    /// A live update's fix as it may be sent: coarsened (no speed or track) with `coarse`. With
    /// `none` the agent gives no live updates at all (the control request is refused).
    public static func update(_ update: LocationUpdate, _ privacy: SiteConfig.FixPrivacy) -> LocationUpdate {
        var shown = update
        shown.fix = shownFix(update.fix, privacy)
        return shown
    }

    /// A fix as a live update or a location request may send it (see `update`).
    public static func shownFix(_ fix: Fix, _ privacy: SiteConfig.FixPrivacy) -> Fix {
        guard privacy == .coarse, let latitude = fix.latitude, let longitude = fix.longitude else { return fix }
        var coarse = fix
        coarse.latitude = coarsen(latitude)
        coarse.longitude = coarsen(longitude)
        // The accuracy is derived from the sigmas: set them so it reads at least 1,000 m.
        let sigmaM = max(fix.horizontalAccuracyM ?? 0, coarseAccuracyM) / 2.0.squareRoot()
        coarse.latitudeSigmaM = sigmaM
        coarse.longitudeSigmaM = sigmaM
        coarse.speedMps = nil
        coarse.trackDeg = nil
        return coarse
    }
}
