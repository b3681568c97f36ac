import Foundation
import LocusMonitor

/// What a CLMonitor can watch.
public protocol CLCondition: MonitoringCondition {}

extension CircularGeographicCondition: CLCondition {}
extension BeaconIdentityCondition: CLCondition {}
/// Beyond Core Location: shapes and phones a ported program can add as it adds circles and beacons.
extension PolygonCondition: CLCondition {}
extension CorridorCondition: CLCondition {}
extension PhoneCondition: CLCondition {}

/// CLMonitor over the agent's monitors: Core Location's calls, with its signatures (nothing
/// throws but the events' loop). What Core Location would not throw is kept for the program to
/// read: a monitor that cannot be opened, or a condition the agent refuses, leaves the agent's
/// error in `underlyingError` (`code` and `message`, as `MonitorError` has them); a monitor
/// that could not be opened also throws it from `events` at the first iteration.
///
///     let monitor = await CLMonitor("gate")
///     await monitor.add(CLMonitor.CircularGeographicCondition(center: center, radius: 100), identifier: "yard", assuming: .unsatisfied)
///     for try await event in await monitor.events { print(event.identifier, event.state) }
public actor CLMonitor {
    public typealias CircularGeographicCondition = LocusMonitor.CircularGeographicCondition
    public typealias BeaconIdentityCondition = LocusMonitor.BeaconIdentityCondition
    public typealias PolygonCondition = LocusMonitor.PolygonCondition
    public typealias CorridorCondition = LocusMonitor.CorridorCondition
    public typealias PhoneCondition = LocusMonitor.PhoneCondition

    /// Core Location's authorization diagnostics are false (`CLAuthorizationDiagnostics`): a
    /// program the agent's access rules refuse is refused when it opens the monitor, and
    /// `underlyingError` says `permission_denied` and names the grant.
    public struct Event: Sendable, CLAuthorizationDiagnostics {
        public enum State: String, Sendable {
            case unknown, satisfied, unsatisfied
            /// The identifier names no condition of the monitor (iOS 18).
            case unmonitored
        }

        public let identifier: String
        public let state: State
        public let date: Date
        /// The concrete beacon behind a satisfied wildcard beacon condition, as a condition (uuid,
        /// major and minor all set): `event.refinement as? CLMonitor.BeaconIdentityCondition`.
        public let refinement: (any CLCondition)?
        public let accuracyLimited: Bool
        public let conditionLimitExceeded: Bool
        public let conditionUnsupported: Bool
        public let persistenceUnavailable: Bool
        /// The agent's log sequence number of the event (0 for an assumed state).
        public let sequence: Int

        init(_ event: Monitor.Event) {
            identifier = event.identifier
            state = State(rawValue: event.state.rawValue) ?? .unknown
            date = event.date
            refinement = event.refinement.map { BeaconIdentityCondition(uuid: $0.uuid, major: $0.major, minor: $0.minor) }
            accuracyLimited = event.accuracyLimited
            conditionLimitExceeded = event.conditionLimitExceeded
            conditionUnsupported = event.conditionUnsupported
            persistenceUnavailable = event.persistenceUnavailable
            sequence = event.sequence
        }
    }

    public struct Record: Sendable {
        public let condition: any CLCondition
        public let lastEvent: Event
    }

    public let name: String
    private let monitor: Monitor?
    /// The agent's last refusal, or why the monitor could not be opened; nil when all went well.
    public private(set) var underlyingError: MonitorError?

    /// Opens (or creates) the monitor `name` on the agent (`LOCUS_STATE_DIRECTORY`, or
    /// `/var/lib/locus`).
    public init(_ name: String) async {
        self.name = name
        do {
            monitor = try await Monitor(name, stateDirectory: Agent.stateDirectory)
            underlyingError = nil
        } catch {
            monitor = nil
            underlyingError = CLMonitor.monitorError(error)
        }
    }

    /// Adds the condition under `identifier` (an existing one is replaced and starts over).
    public func add(_ condition: some CLCondition, identifier: String, assuming: Event.State? = nil) async {
        guard let monitor else { return }
        let state = assuming.flatMap { Monitor.State(rawValue: $0.rawValue) }
        do { try await monitor.add(condition, identifier: identifier, assuming: state) } catch { underlyingError = CLMonitor.monitorError(error) }
    }

    public func remove(_ identifier: String) async {
        guard let monitor else { return }
        do { try await monitor.remove(identifier) } catch { underlyingError = CLMonitor.monitorError(error) }
    }

    /// Removes every condition of the monitor (not in Core Location: a program that rebuilds its
    /// conditions starts from none). A refusal goes to `underlyingError`.
    public func removeAll() async {
        guard let monitor else { return }
        do { try await monitor.removeAll() } catch { underlyingError = CLMonitor.monitorError(error) }
    }

    public var identifiers: [String] {
        get async { await monitor?.identifiers ?? [] }
    }

    public func record(for identifier: String) async -> Record? {
        guard let record = await monitor?.record(for: identifier), let condition = record.condition as? any CLCondition else { return nil }
        return Record(condition: condition, lastEvent: Event(record.lastEvent))
    }

    /// Every change of every condition, each once, from this consumer's cursor (a program that
    /// starts again gets what it had not taken; a loop running while the agent restarts goes on
    /// with the new agent, missing nothing).
    public var events: Events { Events(monitor: monitor, failure: underlyingError) }

    public struct Events: AsyncSequence, Sendable {
        let monitor: Monitor?
        let failure: MonitorError?

        public func makeAsyncIterator() -> Iterator { Iterator(inner: monitor?.events.makeAsyncIterator(), failure: failure) }

        public struct Iterator: AsyncIteratorProtocol {
            var inner: Monitor.Events.Iterator?
            let failure: MonitorError?

            public mutating func next() async throws -> Event? {
                guard var inner else {
                    throw failure ?? MonitorError(code: "unavailable", message: "the monitor could not be opened")
                }
                defer { self.inner = inner }
                return try await inner.next().map(Event.init)
            }
        }
    }

    static func monitorError(_ error: any Error) -> MonitorError {
        error as? MonitorError ?? MonitorError(code: "error", message: "\(error)")
    }
}
