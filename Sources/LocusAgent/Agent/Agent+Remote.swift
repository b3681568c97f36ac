import LocusCore
import LocusDevices

/// The fleet's configurations and commands (docs/remote.md), between the uplink's turn and the
/// next: each message from the broker checked (`RemoteSteering`), its record logged and synced,
/// and only then applied or run; the broker's message acknowledged after that.
extension Agent {
    /// `[remote]` at start: the key read, and the record of a configuration `remote.toml` holds
    /// that the log does not have yet (a power cut between the file's rename and its record).
    static func openRemote(_ settings: SiteConfig.Remote, _ loaded: LoadedConfig, gateway: String, directory: String, log: EventLog,
                           now: AgentTime) throws(UplinkSetupError) -> RemoteSteering {
        let remote: RemoteSteering
        do {
            remote = try RemoteSteering(settings, sitePath: loaded.sitePath, gateway: gateway, directory: directory,
                                        applied: loaded.remoteVersion, commandIDs: log.restoredCommandIDs,
                                        refusedDigests: log.restoredRefusals)
        } catch {
            throw UplinkSetupError(error.description)
        }
        if loaded.remoteVersion > log.remoteApplied {
            var record = LogPayload.RemoteResult(kind: .config, result: .applied)
            record.version = loaded.remoteVersion
            record.digest = loaded.remoteDigest
            if !log.appendRemote(record, now) {
                AgentLog.warning("locus: remote: configuration version \(loaded.remoteVersion) is applied but its record cannot be logged yet")
            }
        }
        if loaded.remoteVersion > 0 { AgentLog.notice("locus: remote: running the fleet's configuration version \(loaded.remoteVersion) over \(loaded.sitePath)") }
        return remote
    }

    /// Every message the uplink read this turn, in order.
    func serveRemote(_ uplink: Uplink, _ remote: RemoteSteering, _ now: AgentTime) {
        serveRunning(remote, now)
        var handled = 0
        while let (message, bytes) = uplink.nextRemote() {
            let logged: Bool
            switch message.kind {
            case .config: logged = configure(remote.configuration(bytes, sitePath: loaded.sitePath), message: bytes, remote, now)
            case .command: logged = command(remote.command(bytes, now: now.utc), remote, now)
            case .other: logged = true
            }
            uplink.release(acknowledge: logged, now)
            handled += 1
            precondition(handled <= BrokerConnection.incomingCapacity, "a turn's remote messages are bounded by one read's packets")
        }
    }

    /// A configuration: refused (its record says why), the same again (nothing), or applied:
    /// `remote.toml` replaced, its record logged and synced, then the site applied as a SIGHUP
    /// applies it. False when the log could not take the record (nothing changed).
    private func configure(_ decision: RemoteSteering.ConfigDecision, message: UnsafeRawBufferPointer, _ remote: RemoteSteering,
                           _ now: AgentTime) -> Bool {
        switch decision {
        case .same:
            return true
        case .refuse(let record):
            AgentLog.warning("locus: remote: configuration version \(record.version) refused: \(String(decoding: record.reason, as: UTF8.self))")
            return logRemote(record, remote, now)
        case .apply(let fresh, let record):
            if let error = Files.replace(remote.path, bytes: Array(message), mode: 0o640) {
                AgentLog.error("locus: remote: cannot write \(remote.path): \(error); configuration version \(record.version) not applied")
                return false
            }
            guard logRemote(record, remote, now) else { return false }
            remote.applied(record.version)
            guard apply(fresh, now, as: "remote") else {
                // The log took the version's record, then refused the conditions' changes: the
                // next start applies remote.toml whole.
                AgentLog.error("locus: remote: configuration version \(record.version) is recorded, but its conditions could not be logged; they take effect at the next start")
                return true
            }
            AgentLog.notice("locus: remote: applied configuration version \(record.version): \(engine.conditionCount) conditions, \(outputs.plan.actions.count) actions")
            let restart = loaded.restartKeysChanged(fresh)
            if !restart.isEmpty {
                loop.restart("the fleet's configuration version \(record.version) changes [\(restart.joined(separator: "], ["))], which a restart applies")
            }
            return true
        }
    }

    /// The record appended and synced, and remembered (`RemoteSteering.logged`); false when the
    /// log cannot take it now (the message is not acknowledged, and comes again).
    private func logRemote(_ record: LogPayload.RemoteResult, _ remote: RemoteSteering, _ now: AgentTime) -> Bool {
        guard log.appendRemote(record, now) else {
            AgentLog.warning("locus: remote: the log cannot take the record now; the broker will send the message again")
            return false
        }
        remote.logged(record)
        return true
    }

    /// A command: a duplicate (ignored), refused, or run. One that acts at once logs its record
    /// first (its id is then never run again); one that takes time (`locate`, `snapshot`) logs
    /// its record when it ends (`serveRunning`).
    private func command(_ decision: RemoteSteering.CommandDecision, _ remote: RemoteSteering, _ now: AgentTime) -> Bool {
        switch decision {
        case .duplicate:
            return true
        case .refuse(let record):
            AgentLog.warning("locus: remote: command \(String(decoding: record.id, as: UTF8.self)) refused: \(String(decoding: record.reason, as: UTF8.self))")
            return logRemote(record, remote, now)
        case .run(let command, let record):
            let id = String(decoding: record.id, as: UTF8.self)
            if command.action.takesTime, let busy = remote.busy { return logRemote(remote.failed(record, busy), remote, now) }
            switch command.action {
            case .pulse, .set:
                return drive(command, record, remote, now)
            case .locate:
                return locate(command, record, remote, now)
            case .snapshot:
                guard let constraint = command.constraint else { preconditionFailure("a snapshot's [command] has its beacons") }
                ranging.startSnapshot(constraint)
                remote.start(record, endsAt: now.monotonic + command.durationMs * 1_000_000)
                AgentLog.info("locus: remote: command \(id): ranging beacons for \(Quantity.formatMs(command.durationMs))")
                return true
            case .republish:
                guard let uplink else { preconditionFailure("commands come through the uplink") }
                switch uplink.republish(from: command.from, to: command.to, log: log) {
                case .failure(let refusal):
                    return logRemote(remote.failed(record, refusal.reason), remote, now)
                case .success(let range):
                    var started = record
                    started.detail = Array("{\"from\":\(range.lowerBound),\"through\":\(range.upperBound)}".utf8)
                    return logRemote(started, remote, now)
                }
            }
        }
    }

    /// `pulse` and `set`: the output named, if the fleet may drive it. A pulse's record goes first;
    /// a set's latch record first (the line moves after it), then its command record: a set that
    /// comes again because its record could not be logged finds the latch set and changes nothing.
    private func drive(_ command: FleetCommand, _ record: LogPayload.RemoteResult, _ remote: RemoteSteering, _ now: AgentTime) -> Bool {
        let id = String(decoding: record.id, as: UTF8.self)
        guard let name = FixedName(command.output), let output = outputs.index(of: name), !outputs.isRadioLine(output) else {
            let names = outputs.plan.names.map { $0.description }.joined(separator: ", ")
            let failed = remote.failed(record, "no output '\(command.output)' the fleet may drive (the board's outputs: \(names.isEmpty ? "none" : names))")
            return logRemote(failed, remote, now)
        }
        if command.action == .pulse {
            guard logRemote(record, remote, now) else { return false }
            AgentLog.info("locus: remote: command \(id): pulse \(command.output) for \(Quantity.formatMs(command.durationMs))")
            outputs.pulse(output, forMs: command.durationMs, now)
            outputs.update(now, cause: .pulseStart) { log.appendGPIO($0, now) }
            return true
        }
        if outputs.isLatched(output) != command.value {
            do { try log.appendLatch(name, set: command.value, level: outputs.level(output, latched: command.value, now), now) } catch {
                AgentLog.warning("locus: remote: command \(id): the latch cannot be logged now (\(error)); the broker will send it again")
                return false
            }
            outputs.setLatch(output, command.value)
            log.setLatched(outputs.latchedNames)
            // The latch is logged: the line follows now, whatever becomes of the command's record.
            outputs.update(now, cause: command.value ? .latchSet : .latchCleared) { log.appendGPIO($0, now) }
        }
        guard logRemote(record, remote, now) else { return false }
        AgentLog.info("locus: remote: command \(id): \(command.output) latched \(command.value ? "on" : "off")")
        return true
    }

    /// `locate`: answered at once by a recent fix accurate enough, else the receiver is woken
    /// until one comes or the timeout passes (`fleetLocated`).
    private func locate(_ command: FleetCommand, _ record: LogPayload.RemoteResult, _ remote: RemoteSteering, _ now: AgentTime) -> Bool {
        guard loaded.site.fixPrivacy != .none else {
            return logRemote(remote.failed(record, "[privacy] fixes = \"none\": this gateway gives no positions"), remote, now)
        }
        switch updates.locate(updates.fleetSlot, id: nil, accuracy: command.accuracy, maxAgeMs: LocateRequests.defaultMaxAgeMs,
                              timeoutMs: command.timeoutMs, now, receiver: gnss.receiverState) {
        case .answered(let fix, let ageMs):
            var answered = record
            answered.detail = Array(updates.fleetLocated(fix, ageMs: ageMs, accuracyLimited: false))
            return logRemote(answered, remote, now)
        case .waiting:
            remote.start(record, endsAt: nil)
            AgentLog.info("locus: remote: command \(String(decoding: record.id, as: UTF8.self)): locating (at most \(Quantity.formatMs(command.timeoutMs)))")
            return true
        case .busy:
            preconditionFailure("the fleet's location request slot is free while no command takes time")
        }
    }

    /// The fleet's `locate` answered after its wait (`LiveUpdates.Item.fleetLocated`).
    func fleetLocated(_ detail: UnsafeRawBufferPointer?, _ now: AgentTime) {
        guard let remote = uplink?.remote else { return }
        if let detail { remote.finish(detail: detail) } else { remote.finish(detail: nil, failure: "no fix with a position within the timeout") }
        logFinished(remote, now)
    }

    /// Each turn: a snapshot whose time is up is rendered, and a finished command's record
    /// logged (tried again at the next turn while the log cannot take it).
    func serveRunning(_ remote: RemoteSteering, _ now: AgentTime) {
        guard let running = remote.running else { return }
        if !running.finished, let endsAt = running.endsAt, now.monotonic >= endsAt {
            remote.finish(detail: ranging.takeSnapshot(beacons: Agent.snapshotBeacons, now))
        }
        logFinished(remote, now)
    }

    /// A snapshot's record holds its nearest beacons that fit the detail beside the frame's own
    /// members.
    static let snapshotBeacons = (LogPayload.RemoteResult.maximumDetailBytes - RangingJSON.maximumFrameBytes) / RangingJSON.maximumBeaconBytes

    private func logFinished(_ remote: RemoteSteering, _ now: AgentTime) {
        guard let record = remote.finishedRecord, log.appendRemote(record, now) else { return }
        remote.logged(record)
        AgentLog.info("locus: remote: command \(String(decoding: record.id, as: UTF8.self)) \(record.result.name)")
    }

    /// At a clean stop, the command under way ends failed, and says so.
    func stopRemote(_ now: AgentTime) {
        guard let remote = uplink?.remote, let running = remote.running else { return }
        // A snapshot still ranging stops (one that ended waits only for its record).
        if !running.finished && running.endsAt != nil { _ = ranging.takeSnapshot(beacons: 0, now) }
        remote.finish(detail: nil, failure: "the agent stopped before it answered")
        logFinished(remote, now)
    }
}
