import LocusCore
import LocusDevices

/// Live updates in the agent (CLLocationUpdate): the site's own updater, whose batches become the
/// log's fix and visit records and whose stationary state pauses the receiver, and one updater
/// per control connection that asked for `updates`, each with its preset and tier.
///
/// The radios run at the finest tier anyone asks for: the site's `[updates] accuracy`, or a
/// client's finer one while its stream is open (as a finer CLLocationManager desiredAccuracy
/// raises the system's). The receiver's platform model is the site's preset: one receiver, one
/// model; a stream's preset sets its own filters and stationary thresholds.
extension Agent {
    /// One control connection's stream.
    struct UpdateStream {
        let updater: LiveUpdater
        let preset: LivePreset
        let tier: AccuracyTier
        var batch = 0
    }

    // MARK: fixes in

    /// A fix goes to every updater after the engine has seen it. The updaters run on the fix's
    /// own time (the agent's clock can lag a receiver replayed faster than real time).
    func updateWithFix(_ fix: Fix, _ now: Int64) {
        let time = fix.time ?? utcNow(now)
        let wasStationary = siteUpdater.isStationary
        let filtered = siteUpdater.filteredCount
        siteUpdater.observe(fix, now: time)
        drainSiteUpdater(now)
        let accepted = fix.hasPosition && siteUpdater.filteredCount == filtered
        let isStationary = siteUpdater.isStationary
        let why = isStationary == wasStationary ? "probe" : isStationary ? "stationary" : "moving again"
        carryOut(pause.observed(wasStationary: wasStationary, isStationary: isStationary, accepted: accepted,
                                nowNs: time.totalNanoseconds), now, why: why)
        for slot in streams.indices where streams[slot] != nil {
            streams[slot]!.updater.observe(fix, now: time)
            drainStream(slot)
        }
        if accepted { scheduleNextFix(fix, time, now) }
    }

    /// Boundary-aware sampling for the on/off tiers: after a fix, a receiver that can sleep
    /// (u-blox) goes into backup until the next fix is due (`SamplingPlanner`, from the nearest
    /// fence edge and the preset's top speed), and is woken `hotStartLeadMs` early. A sleep
    /// shorter than `minimumSampleSleepMs` would cost more (backup, hot start) than it saves.
    func scheduleNextFix(_ fix: Fix, _ time: UTCTime, _ now: Int64) {
        let tier = TierPolicy(tier: radioTier)
        guard case .onOff = tier.dutyCycle, !pause.isPaused, sampleWakeAtNs == nil,
              let latitude = fix.latitude, let longitude = fix.longitude else { return }
        let configuration = siteUpdater.settings.configuration
        let accuracyM = fix.horizontalAccuracyM
        // Edges beyond what the device can reach within the longest interval do not matter.
        let reachM = configuration.maximumSpeedMps * Double(tier.maximumIntervalMs) / 1_000 + (accuracyM ?? 0)
        let edgeM = engine.nearestFenceEdgeM(latitude: latitude, longitude: longitude, limitM: reachM)
        let due = SamplingPlanner(configuration, tier).nextFixTime(now: time, distanceToEdgeM: edgeM, accuracyM: accuracyM)
        let sleepMs = (due.totalNanoseconds - time.totalNanoseconds) / 1_000_000 - Agent.hotStartLeadMs
        guard sleepMs >= Agent.minimumSampleSleepMs, sleepReceiver(durationMs: sleepMs, now) else { return }
        sampleWakeAtNs = time.totalNanoseconds + sleepMs * 1_000_000
        AgentLog.debug("locus: updates: receiver off for \(sleepMs) ms (nearest fence edge \(edgeM.map { "\(Int($0)) m" } ?? "none"))")
    }

    /// Time passing: batch ages, silences, the pause's probes.
    func tickUpdates(_ now: Int64) {
        let time = utcNow(now)
        siteUpdater.tick(now: time)
        drainSiteUpdater(now)
        if let wakeAt = sampleWakeAtNs, time.totalNanoseconds >= wakeAt {
            sampleWakeAtNs = nil
            if !pause.isPaused { wakeReceiver(now) }
        }
        carryOut(pause.tick(isStationary: siteUpdater.isStationary, nowNs: time.totalNanoseconds), now, why: "probe")
        for slot in streams.indices where streams[slot] != nil {
            streams[slot]!.updater.tick(now: time)
            drainStream(slot)
        }
    }

    /// A monitor event is about to be handled: the batches go out first, so the log reads in the
    /// order things happened and subscribers get the fixes that led to the event.
    func flushUpdatesForEvent(_ now: Int64) {
        let time = utcNow(now)
        siteUpdater.monitorEvent(now: time)
        drainSiteUpdater(now)
        for slot in streams.indices where streams[slot] != nil {
            streams[slot]!.updater.monitorEvent(now: time)
            drainStream(slot)
        }
    }

    /// The earliest agent-clock time (ns) an updater or the pause needs a tick.
    var updatesDeadlineNs: Int64? {
        var deadline = siteUpdater.nextDeadlineNs
        func consider(_ time: Int64?) {
            guard let time else { return }
            deadline = min(deadline ?? time, time)
        }
        consider(pause.nextDeadlineNs)
        consider(sampleWakeAtNs)
        for stream in streams { consider(stream?.updater.nextDeadlineNs) }
        return deadline
    }

    // MARK: outputs

    /// The site updater's outputs: delivered updates with a position become fix records (at most
    /// one per `[log] fix_interval`, per `[privacy]`), visits become visit records.
    func drainSiteUpdater(_ now: Int64) {
        while let output = siteUpdater.nextOutput() {
            switch output {
            case .update(let update):
                if update.isStationary { AgentLog.info("locus: updates: stationary since \(update.time.iso8601)") }
                guard update.fix.hasPosition, let timeNs = update.fix.time?.totalNanoseconds, timeNs >= nextFixLogNs else { continue }
                guard let session, let logged = PrivacyFilter.fix(update.fix, privacy) else { continue }
                nextFixLogNs = timeNs + fixIntervalNs
                // A fix record is informative; events are what must not be lost. A failing log is
                // reported once per failure streak by the event path.
                try? session.persistence.fix(logged)
            case .visit(let visit):
                AgentLog.info("locus: updates: visit from \(visit.arrival.iso8601) to \(visit.departure.iso8601), radius \(Int(visit.radiusM)) m")
                guard let session, let logged = PrivacyFilter.visit(visit, privacy) else { continue }
                do { try session.persistence.visit(logged) } catch { logFailure(error, now) }
            case .batchEnd:
                break
            }
        }
    }

    /// A stream's outputs as protocol lines: `{"update":{...}}` (gpsd TPV fields, isStationary,
    /// diagnostics, batch and flush reason) and `{"visit":{...}}`.
    func drainStream(_ slot: Int) {
        guard let control, var stream = streams[slot] else { return }
        var lines = ""
        var pending: [LocationUpdate] = []
        while let output = stream.updater.nextOutput() {
            switch output {
            case .update(let update):
                pending.append(PrivacyFilter.update(update, privacy))
            case .batchEnd(let reason):
                stream.batch += 1
                for update in pending {
                    let line = UpdateJSON.updateLine(update)
                    lines += "{\"update\":" + line.dropLast() + ",\"batch\":\(stream.batch),\"flush\":\"\(reason)\"}}\n"
                }
                pending.removeAll()
            case .visit(let visit):
                guard let shown = PrivacyFilter.visit(visit, privacy) else { continue }
                lines += "{\"visit\":" + UpdateJSON.visitLine(shown) + "}\n"
            }
        }
        streams[slot] = stream
        guard !lines.isEmpty else { return }
        if control.send(slot, lines) {
            control.flush(slot)
        } else {
            // Updates are not replayable: a client that does not read loses its stream, and is told.
            _ = control.send(slot, ControlReply.error(nil, ControlError(.busy, "updates came faster than this client read them; request updates again")) + "\n")
            control.closeWhenFlushed(slot)
            endStream(slot, now: MonotonicClock.now())
        }
    }

    // MARK: streams

    func startStream(_ slot: Int, preset: LivePreset?, accuracy: AccuracyTier?, _ now: Int64) -> (LivePreset, AccuracyTier) {
        let site = loaded.site.updates
        let chosenPreset = preset ?? site.preset
        let chosenTier = accuracy ?? site.accuracy
        let settings = LiveUpdateSettings(site, preset: chosenPreset, tier: chosenTier)
        streams[slot] = UpdateStream(updater: LiveUpdater(settings: settings), preset: chosenPreset, tier: chosenTier)
        AgentLog.info("locus: updates: stream \(slot) opened (\(chosenPreset), \(chosenTier))")
        applyRadioTier(now)
        return (chosenPreset, chosenTier)
    }

    func endStream(_ slot: Int, now: Int64) {
        guard slot < streams.count, streams[slot] != nil else { return }
        streams[slot] = nil
        AgentLog.info("locus: updates: stream \(slot) closed")
        applyRadioTier(now)
    }

    /// The tier the radios run at: the finest of the site's and the open streams'.
    var wantedRadioTier: AccuracyTier {
        var tier = loaded.site.updates.accuracy
        for stream in streams { if let stream, stream.tier < tier { tier = stream.tier } }
        return tier
    }

    /// Puts the radios at the wanted tier if they are not there: the BLE scan's timing now, the
    /// receiver's plan when it is awake.
    func applyRadioTier(_ now: Int64) {
        let wanted = wantedRadioTier
        guard wanted != radioTier else { return }
        AgentLog.info("locus: updates: radios from \(radioTier) to \(wanted)")
        radioTier = wanted
        let policy = TierPolicy(tier: wanted)
        if case .adapter = bluetoothKind, let problem = scanner.reconfigure(policy.scanSettings) {
            AgentLog.warning("locus: bluetooth: restarting the scan at the new duty cycle: \(problem)")
        }
        applyReceiverPlan(now)
    }

    // MARK: the receiver

    /// Carries out what the pause decided.
    func carryOut(_ action: PauseController.Action, _ now: Int64, why: String) {
        switch action {
        case .none:
            break
        case .sleep(let durationMs):
            sampleWakeAtNs = nil   // the pause owns the receiver now
            if sleepReceiver(durationMs: durationMs, now) {
                AgentLog.info("locus: updates: receiver asleep for \(durationMs / 1000) s (\(why))")
            }
        case .wake:
            AgentLog.info("locus: updates: waking the receiver (\(why))")
            wakeReceiver(now)
        }
    }

    /// The motion input fired: the receiver wakes at once if it was paused.
    func motionInput(_ now: Int64) {
        let action = pause.motion(nowNs: utcNow(now).totalNanoseconds)
        AgentLog.info("locus: updates: motion input\(pause.isPaused ? "; receiver awake for \(pause.motionHoldMs / 1000) s" : "")")
        carryOut(action, now, why: "motion input")
    }
}

extension Agent {
    /// The receiver's plan for the radios' tier and the site's preset (queued while it sleeps).
    func applyReceiverPlan(_ now: Int64) {
        receiver.apply(preset: siteUpdater.settings.configuration, tier: TierPolicy(tier: radioTier), now: MonotonicInstant(nanoseconds: now))
    }

    /// Into its lowest-power mode (u-blox backup, MediaTek standby); false for a receiver that
    /// takes no commands or a closed port.
    func sleepReceiver(durationMs: Int64, _ now: Int64) -> Bool {
        receiver.sleep(durationMs: durationMs, now: MonotonicInstant(nanoseconds: now))
    }

    func wakeReceiver(_ now: Int64) { receiver.wake(now: MonotonicInstant(nanoseconds: now)) }
}
