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

    /// A command: a duplicate (ignored), refused, or run once its record is logged.
    private func command(_ decision: RemoteSteering.CommandDecision, _ remote: RemoteSteering, _ now: AgentTime) -> Bool {
        switch decision {
        case .duplicate:
            return true
        case .refuse(let record):
            AgentLog.warning("locus: remote: command \(String(decoding: record.id, as: UTF8.self)) refused: \(String(decoding: record.reason, as: UTF8.self))")
            return logRemote(record, remote, now)
        case .run(let command, let record):
            switch command.action {
            case .pulse:
                guard let name = FixedName(command.output), let output = outputs.index(of: name), !outputs.isRadioLine(output) else {
                    let names = outputs.plan.names.map { $0.description }.joined(separator: ", ")
                    let failed = remote.failed(record, "no output '\(command.output)' the fleet may pulse (the board's outputs: \(names.isEmpty ? "none" : names))")
                    return logRemote(failed, remote, now)
                }
                guard logRemote(record, remote, now) else { return false }
                AgentLog.info("locus: remote: command \(String(decoding: record.id, as: UTF8.self)): pulse \(command.output) for \(Quantity.formatMs(command.durationMs))")
                outputs.pulse(output, forMs: command.durationMs, now)
                outputs.update(now, cause: .pulseStart) { log.appendGPIO($0, now) }
                return true
            }
        }
    }
}
