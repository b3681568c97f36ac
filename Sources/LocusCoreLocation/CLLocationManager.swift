import Foundation
import LocusMonitor

/// CLAuthorizationStatus. The agent's access rules (docs/access.md) decide: a program that may
/// read positions is `authorizedAlways`, one that may not is `denied`; `notDetermined` until
/// asked (`requestWhenInUseAuthorization`, `requestAlwaysAuthorization`).
public enum CLAuthorizationStatus: Int32, Sendable {
    case notDetermined = 0, restricted, denied, authorizedAlways, authorizedWhenInUse
}

/// CLLocationManagerDelegate: each call comes on the main actor, as Core Location's come on the
/// thread that made the manager. Every method has an empty default.
@MainActor public protocol CLLocationManagerDelegate: AnyObject {
    func locationManager(_ manager: CLLocationManager, didUpdateLocations locations: [CLLocation])
    func locationManager(_ manager: CLLocationManager, didFailWithError error: any Error)
    func locationManager(_ manager: CLLocationManager, didVisit visit: CLVisit)
    func locationManager(_ manager: CLLocationManager, didRange beacons: [CLBeacon], satisfying beaconConstraint: CLBeaconIdentityConstraint)
    func locationManager(_ manager: CLLocationManager, didFailRangingFor beaconConstraint: CLBeaconIdentityConstraint, error: any Error)
    func locationManagerDidPauseLocationUpdates(_ manager: CLLocationManager)
    func locationManagerDidResumeLocationUpdates(_ manager: CLLocationManager)
    func locationManagerDidChangeAuthorization(_ manager: CLLocationManager)
}

extension CLLocationManagerDelegate {
    public func locationManager(_ manager: CLLocationManager, didUpdateLocations locations: [CLLocation]) {}
    public func locationManager(_ manager: CLLocationManager, didFailWithError error: any Error) {}
    public func locationManager(_ manager: CLLocationManager, didVisit visit: CLVisit) {}
    public func locationManager(_ manager: CLLocationManager, didRange beacons: [CLBeacon],
                                satisfying beaconConstraint: CLBeaconIdentityConstraint) {}
    public func locationManager(_ manager: CLLocationManager, didFailRangingFor beaconConstraint: CLBeaconIdentityConstraint,
                                error: any Error) {}
    public func locationManagerDidPauseLocationUpdates(_ manager: CLLocationManager) {}
    public func locationManagerDidResumeLocationUpdates(_ manager: CLLocationManager) {}
    public func locationManagerDidChangeAuthorization(_ manager: CLLocationManager) {}
}

/// CLLocationManager's services over the agent, with its delegate calls: a single location
/// (`requestLocation`), standard updates with their settings (`desiredAccuracy`,
/// `distanceFilter`, `activityType`, `pausesLocationUpdatesAutomatically`), significant
/// changes, visits and beacon ranging. Each service is one stream to the agent, started by its
/// `start...` call and ended by its `stop...` call, and each carries on across an agent restart.
/// A service the agent refuses ends with `didFailWithError` (or `didFailRangingFor`) carrying
/// its `MonitorError`.
@MainActor public final class CLLocationManager {
    public weak var delegate: (any CLLocationManagerDelegate)?
    /// The tier the radios run at for this manager's updates and location requests (the finest
    /// wanted by any program wins).
    public var desiredAccuracy: CLLocationAccuracy = kCLLocationAccuracyBest
    /// An update only once the device is this far from the last one; `kCLDistanceFilterNone`:
    /// every fix.
    public var distanceFilter: CLLocationDistance = kCLDistanceFilterNone
    public var activityType: CLActivityType = .other
    /// false: updates go on while the device stands still and the receiver stays awake.
    public var pausesLocationUpdatesAutomatically = true
    /// A gateway program runs in the background always: recorded, changes nothing.
    public var allowsBackgroundLocationUpdates = true
    /// The most recent location a service of this manager delivered.
    public private(set) var location: CLLocation?
    public private(set) var authorizationStatus: CLAuthorizationStatus = .notDetermined
    /// The constraints being ranged.
    public var rangedBeaconConstraints: [CLBeaconIdentityConstraint] { ranging.map(\.constraint) }

    private var updating: Task<Void, Never>?
    private var significant: Task<Void, Never>?
    private var visiting: Task<Void, Never>?
    private var authorizing: Task<Void, Never>?
    private var ranging: [(constraint: CLBeaconIdentityConstraint, task: Task<Void, Never>)] = []

    public init() {}

    isolated deinit {
        for task in [updating, significant, visiting, authorizing] { task?.cancel() }
        for entry in ranging { entry.task.cancel() }
    }

    /// Whether an agent answers at `LOCUS_STATE_DIRECTORY` (its read socket exists).
    public nonisolated static func locationServicesEnabled() -> Bool {
        FileManager.default.fileExists(atPath: Agent.stateDirectory + "/read.sock")
    }

    public nonisolated static func significantLocationChangeMonitoringAvailable() -> Bool { true }
    public nonisolated static func isRangingAvailable() -> Bool { true }

    // MARK: authorization

    /// Asks the agent what this program may do (no one is prompted): `authorizedAlways` with
    /// the `positions` grant, else `denied`; the delegate hears of a change.
    public func requestWhenInUseAuthorization() { requestAuthorization() }
    public func requestAlwaysAuthorization() { requestAuthorization() }

    /// The first request starts following the program's grants: a reload of the site that gives
    /// or takes `positions` is an authorization change, as a user's answer is on a phone.
    private func requestAuthorization() {
        guard authorizing == nil else { return }
        let changes = AgentInfo.grantChanges(stateDirectory: Agent.stateDirectory)
        authorizing = Task {
            do {
                for try await grants in changes { authorized(grants.contains("positions") ? .authorizedAlways : .denied) }
            } catch is CancellationError {
            } catch {
                authorized(.denied)
            }
        }
    }

    private func authorized(_ status: CLAuthorizationStatus) {
        guard status != authorizationStatus else { return }
        authorizationStatus = status
        delegate?.locationManagerDidChangeAuthorization(self)
    }

    // MARK: locations

    /// One location: the agent's last fix if recent and within `desiredAccuracy`, else the first
    /// such fix after waking the receiver, or at 30 s the best it saw.
    public func requestLocation() {
        Task {
            do {
                let located = try await LocationUpdate.requestLocation(accuracy: tier(desiredAccuracy), stateDirectory: Agent.stateDirectory)
                deliver(CLLocation(located.location))
            } catch {
                delegate?.locationManager(self, didFailWithError: error)
            }
        }
    }

    public func startUpdatingLocation() {
        updating?.cancel()
        let options = LocationUpdate.Options(distanceFilter: distanceFilter < 0 ? nil : distanceFilter,
                                             pausesAutomatically: pausesLocationUpdatesAutomatically,
                                             activityType: activityType.configuration)
        let updates = LocationUpdate.liveUpdates(activityType.configuration, accuracy: tier(desiredAccuracy), options: options,
                                                 stateDirectory: Agent.stateDirectory)
        let pauses = pausesLocationUpdatesAutomatically
        var paused = false
        updating = serve(updates) { manager, update in
            if let location = update.location {
                if paused && !update.isStationary {
                    paused = false
                    manager.delegate?.locationManagerDidResumeLocationUpdates(manager)
                }
                manager.deliver(CLLocation(location))
            }
            if update.isStationary && pauses && !paused {
                paused = true
                manager.delegate?.locationManagerDidPauseLocationUpdates(manager)
            }
        }
    }

    public func stopUpdatingLocation() {
        updating?.cancel()
        updating = nil
    }

    /// Updates after moves of 500 m (Core Location's figure), with the radios at the coarse tier.
    public func startMonitoringSignificantLocationChanges() {
        significant?.cancel()
        let updates = LocationUpdate.significantChanges(distance: 500, stateDirectory: Agent.stateDirectory)
        significant = serve(updates) { manager, update in
            if let location = update.location { manager.deliver(CLLocation(location)) }
        }
    }

    public func stopMonitoringSignificantLocationChanges() {
        significant?.cancel()
        significant = nil
    }

    /// A service's task: each element of `sequence` to `each`, on the main actor, until the task
    /// is cancelled (its `stop...` call) or the agent refuses (`didFailWithError`).
    private func serve<Elements: AsyncSequence & Sendable>(_ sequence: Elements,
                                                          _ each: @escaping @MainActor (CLLocationManager, Elements.Element) -> Void)
        -> Task<Void, Never> where Elements.Element: Sendable {
        Task { [weak self] in
            do {
                for try await element in sequence {
                    guard let self else { return }
                    each(self, element)
                }
            } catch is CancellationError {
            } catch {
                guard let self else { return }
                self.delegate?.locationManager(self, didFailWithError: error)
            }
        }
    }

    private func deliver(_ location: CLLocation) {
        self.location = location
        delegate?.locationManager(self, didUpdateLocations: [location])
    }

    // MARK: visits

    public func startMonitoringVisits() {
        visiting?.cancel()
        let visits = LocationUpdate.visits(stateDirectory: Agent.stateDirectory)
        visiting = serve(visits) { manager, visit in manager.delegate?.locationManager(manager, didVisit: CLVisit(visit)) }
    }

    public func stopMonitoringVisits() {
        visiting?.cancel()
        visiting = nil
    }

    // MARK: beacon ranging

    /// Ranging once a second: the beacons matching `constraint`, nearest first.
    public func startRangingBeacons(satisfying constraint: CLBeaconIdentityConstraint) {
        stopRangingBeacons(satisfying: constraint)
        let sequence = rangeBeacons(satisfying: constraint, stateDirectory: Agent.stateDirectory)
        let task = Task {
            do {
                for try await beacons in sequence {
                    delegate?.locationManager(self, didRange: beacons.map(CLBeacon.init), satisfying: constraint)
                }
            } catch is CancellationError {
            } catch {
                delegate?.locationManager(self, didFailRangingFor: constraint, error: error)
            }
        }
        ranging.append((constraint, task))
    }

    public func stopRangingBeacons(satisfying constraint: CLBeaconIdentityConstraint) {
        for entry in ranging where entry.constraint == constraint { entry.task.cancel() }
        ranging.removeAll { $0.constraint == constraint }
    }
}
