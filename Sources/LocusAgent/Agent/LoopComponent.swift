import LocusCore
import LocusDevices

/// What every component of the agent's loop offers the loop. `Agent.forEachComponent` is the one
/// list of the components, and every pass over this surface goes through it. What a component
/// does when one of its descriptors is ready or one of its deadlines is due takes and returns
/// values of its own (fixes, sightings, events), so each has its own `service` (or `read`,
/// `handle`) entry.
///
/// Only `status` has no default: every component reports. The others default to "nothing to
/// do" (no descriptors, no deadlines, nothing to reload, nothing to release), and a component
/// states only those it has. Class-bound, so the list can hand it over as `any LoopComponent`
/// (allowed in Embedded Swift); inlined, the calls are direct.
///
/// Every handler takes the turn's `now` (`AgentTime`); none reads a clock itself.
protocol LoopComponent: AnyObject {
    /// The most descriptors `register` adds in one turn: the poll set's capacity is the sum over
    /// the loop's components, checked at start.
    var maximumDescriptors: Int { get }
    /// Adds this turn's descriptors to the poll set (for reading, and for writing where output
    /// waits), keeping their indices for the turn's service.
    func register(in poll: inout PollSet)
    /// Its deadlines, each stated in its own clock (`NextDeadline` converts UTC ones).
    func deadlines(_ next: inout NextDeadline)
    /// Its part of `locus status`: members of the status object (`"gnss":{...}`).
    func status(into line: inout JSONWriter)
    /// SIGHUP: what of the new site file takes effect at once.
    func reload(_ config: LoadedConfig, now: AgentTime)
    /// The loop has stopped: release what it holds.
    func shutdown(now: AgentTime)
}

extension LoopComponent {
    /// No descriptors: it does its work when the loop calls it (the log, the outputs, ranging).
    var maximumDescriptors: Int { 0 }
    func register(in poll: inout PollSet) {}
    /// Nothing of its own falls due: it is only called.
    func deadlines(_ next: inout NextDeadline) {}
    /// Nothing in the site file that it takes at once (a change waits for a restart, or there is none).
    func reload(_ config: LoadedConfig, now: AgentTime) {}
    /// Nothing held that needs letting go.
    func shutdown(now: AgentTime) {}
}

/// How a device that cannot be opened is reported: on the first failure, and once more when
/// the retries reach their slowest pace, not every ten seconds for as long as it is missing.
enum OpenFailureReport {
    static func text(_ failures: Int, _ error: SystemError, retryMs: Int64) -> String? {
        if failures == 1 { return "\(error); retrying" }
        if retryMs >= SerialReader.maximumBackoffNs / 1_000_000 && failures == 7 {
            return "\(error) (still); retrying every \(retryMs / 1000) s, reported again when it opens"
        }
        return nil
    }

    static func afterFailures(_ failures: Int) -> String {
        failures > 1 ? " (after \(failures) failed attempts)" : ""
    }
}
