import Foundation
import LocusMonitor

/// CLLocationUpdate over the agent's live updates:
///
///     for try await update in CLLocationUpdate.liveUpdates(.fitness) {
///         if let location = update.location { print(location.coordinate) }
///         if update.isStationary { break }
///     }
///
/// The agent pauses while the device stands still (one update says `isStationary`) and says
/// when it has no fix (`locationUnavailable`, `location` nil). When the agent restarts, the
/// stream says `locationUnavailable` once and goes on with the new agent's updates.
///
/// Core Location's authorization diagnostics are false (`CLAuthorizationDiagnostics`): a
/// program the agent's access rules refuse gets `MonitorError` `permission_denied` from the loop.
public struct CLLocationUpdate: Sendable, CLAuthorizationDiagnostics {
    /// The platform model the updates are filtered with (Core Location's cases).
    public enum LiveConfiguration: String, Sendable, CaseIterable {
        case `default`, automotiveNavigation, otherNavigation, fitness, airborne

        var locus: LocationUpdate.LiveConfiguration {
            switch self {
            case .default: .default
            case .automotiveNavigation: .automotiveNavigation
            case .otherNavigation: .otherNavigation
            case .fitness: .fitness
            case .airborne: .airborne
            }
        }
    }

    public let location: CLLocation?
    public let isStationary: Bool
    /// iOS 18's diagnostics.
    public let stationary: Bool
    public let locationUnavailable: Bool
    public let accuracyLimited: Bool

    init(_ update: LocationUpdate) {
        location = update.location.map(CLLocation.init)
        isStationary = update.isStationary
        stationary = update.stationary
        locationUnavailable = update.locationUnavailable
        accuracyLimited = update.accuracyLimited
    }

    /// Live updates from the agent (`LOCUS_STATE_DIRECTORY`, or `/var/lib/locus`), at the
    /// site's `[updates] accuracy`.
    public static func liveUpdates(_ configuration: LiveConfiguration = .default) -> Updates {
        Updates(inner: LocationUpdate.liveUpdates(configuration.locus, stateDirectory: Agent.stateDirectory))
    }

    public struct Updates: AsyncSequence, Sendable {
        let inner: LocationUpdate.Updates

        public func makeAsyncIterator() -> Iterator { Iterator(inner: inner.makeAsyncIterator()) }

        public struct Iterator: AsyncIteratorProtocol {
            var inner: LocationUpdate.Updates.Iterator
            public mutating func next() async throws -> CLLocationUpdate? {
                try await inner.next().map(CLLocationUpdate.init)
            }
        }
    }
}
