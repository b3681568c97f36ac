import Foundation

/// A position and how it was measured (CLLocation's fields that a GNSS receiver gives).
public struct Location: Sendable, Equatable {
    public var coordinate: Coordinate
    /// Metres above mean sea level, when the receiver gave it.
    public var altitude: Double?
    /// About one sigma, metres (CLLocation.horizontalAccuracy); nil when unknown.
    public var horizontalAccuracy: Double?
    /// Metres per second over ground; nil when unknown.
    public var speed: Double?
    /// Degrees clockwise from true north; nil when unknown.
    public var course: Double?
    public var timestamp: Date
    /// Metres above the WGS84 ellipsoid (the MSL altitude plus the receiver's geoid
    /// separation), when the receiver gave both.
    public var ellipsoidalAltitude: Double? = nil
    /// About one sigma, metres, for the altitudes (the receiver's altitude sigma, or its VDOP);
    /// nil when unknown.
    public var verticalAccuracy: Double? = nil
    /// The agent's receiver is simulated (a feed plays NMEA into it: the simulated board).
    public var isSimulated = false
}

/// CLLocationUpdate for Swift programs on a Locus gateway: live updates from the running agent.
///
///     for try await update in LocationUpdate.liveUpdates(.fitness) {
///         if let location = update.location { print(location.coordinate) }
///         if update.isStationary { break }          // breaking out ends the agent's stream
///     }
///
/// The agent pauses updates while the device stands still: one update says `isStationary`, the
/// next comes when it moves again. No fix says so (`locationUnavailable`) rather than going
/// quiet. If the agent restarts, the stream says `locationUnavailable` once (an update without a
/// location), waits for the agent and goes on with the new agent's updates; with
/// `resumes: false` it ends by throwing `MonitorError` `disconnected` instead.
public struct LocationUpdate: Sendable {
    /// CLLocationUpdate.LiveConfiguration: the platform model and filters the updates use.
    public struct LiveConfiguration: Sendable, Equatable {
        public let name: String
        public static let `default` = LiveConfiguration(name: "default")
        public static let automotiveNavigation = LiveConfiguration(name: "automotiveNavigation")
        public static let otherNavigation = LiveConfiguration(name: "otherNavigation")
        public static let fitness = LiveConfiguration(name: "fitness")
        public static let airborne = LiveConfiguration(name: "airborne")
    }

    /// CLLocationAccuracy's tiers: how hard the radios work for these updates.
    public enum Accuracy: String, Sendable {
        case best, nearestTenMeters, hundredMeters, kilometer, threeKilometers
    }

    /// iOS 18's diagnostics on an update.
    public struct Diagnostics: OptionSet, Sendable, Equatable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public static let stationary = Diagnostics(rawValue: 1)
        public static let locationUnavailable = Diagnostics(rawValue: 2)
        public static let accuracyLimited = Diagnostics(rawValue: 4)
    }

    /// nil when there was no fix (`locationUnavailable`).
    public var location: Location?
    /// With `[geocoding] annotate = true`: the place nearest the location.
    public var placemark: Placemark?
    public var isStationary: Bool
    public var diagnostics: Diagnostics
    /// iOS 18's names for the diagnostics.
    public var stationary: Bool { diagnostics.contains(.stationary) }
    public var locationUnavailable: Bool { diagnostics.contains(.locationUnavailable) }
    public var accuracyLimited: Bool { diagnostics.contains(.accuracyLimited) }

    /// A stream's own settings (CLLocationManager's per-client ones); what is left nil is the
    /// site's `[updates]`.
    public struct Options: Sendable, Equatable {
        /// CLLocationManager.distanceFilter: an update only once the device is this many metres
        /// from the last one delivered (0: every fix).
        public var distanceFilter: Double? = nil
        /// Deferred updates: delivered together once this many have gathered (at most 120, or
        /// the site's `batch_count` if more)...
        public var deferredCount: Int? = nil
        /// ... or once the oldest is this many seconds old (0: no age bound), or at a monitor event.
        public var deferredAge: TimeInterval? = nil
        /// CLLocationManager.pausesLocationUpdatesAutomatically. false: updates go on while the
        /// device stands still (each says `isStationary`) and the receiver is kept awake while
        /// the stream is open (a heartbeat tracker).
        public var pausesAutomatically = true
        /// CLLocationManager.activityType: the receiver's platform model follows it while the
        /// stream is open (the most dynamic of the site's and the open streams' activities).
        public var activityType: LiveConfiguration? = nil

        public init(distanceFilter: Double? = nil, deferredCount: Int? = nil, deferredAge: TimeInterval? = nil,
                    pausesAutomatically: Bool = true, activityType: LiveConfiguration? = nil) {
            self.distanceFilter = distanceFilter
            self.deferredCount = deferredCount
            self.deferredAge = deferredAge
            self.pausesAutomatically = pausesAutomatically
            self.activityType = activityType
        }

        /// The options as the `updates` request's members.
        func add(to members: inout [String: Any]) {
            if let distanceFilter { members["distance_filter_m"] = distanceFilter }
            if let deferredCount { members["batch_count"] = deferredCount }
            if let deferredAge { members["batch_age_s"] = deferredAge }
            if !pausesAutomatically { members["pauses"] = false }
            if let activityType { members["activity"] = activityType.name }
        }
    }

    /// Updates with `configuration`, at `accuracy` (nil: the site's `[updates] accuracy`), with
    /// the stream's own `options`, from the agent running with `stateDirectory`. The stream
    /// starts at the first iteration and stops when the iteration does.
    public static func liveUpdates(_ configuration: LiveConfiguration = .default, accuracy: Accuracy? = nil, options: Options = Options(),
                                   resumes: Bool = true, stateDirectory: String = Monitor.defaultStateDirectory) -> Updates {
        Updates(configuration: configuration, accuracy: accuracy, stateDirectory: stateDirectory, options: options, resumes: resumes)
    }

    public struct Updates: AsyncSequence, Sendable {
        /// nil: the site's preset.
        let configuration: LiveConfiguration?
        let accuracy: Accuracy?
        let stateDirectory: String
        var options = Options()
        var resumes = true
        /// Significant change: an update only after a move of this many metres.
        var significantChangeM: Double? = nil

        public func makeAsyncIterator() -> Iterator { Iterator(session: Session(self)) }

        public struct Iterator: AsyncIteratorProtocol {
            let session: Session
            public mutating func next() async throws -> LocationUpdate? { try await session.next() }
        }
    }

    /// One stream's connection; releasing it (the iterator going away) hangs up, which ends the
    /// agent's stream and lets the radios go back to the site's tier. When the agent restarts it
    /// starts the stream again on the new agent (`request.resumes`).
    public final class Session: @unchecked Sendable {
        private let request: Updates
        let link: AgentLink

        init(_ request: Updates) {
            self.request = request
            // Positions are read: read.sock, so an account that may only read gets them too.
            link = AgentLink(stateDirectory: request.stateDirectory, purpose: .reading, resumes: request.resumes)
        }

        deinit { link.close() }

        /// The next update; while the agent is away, one update without a location
        /// (`locationUnavailable`), then the new agent's.
        func next() async throws -> LocationUpdate? {
            guard let object = try await nextObject("update") else { return LocationUpdate.agentAway }
            return LocationUpdate(object)
        }

        /// The next streamed object under `key` ("update" or "visit"), skipping the others; nil
        /// once when the agent went away (the next call resumes).
        func nextObject(_ key: String) async throws -> [String: Any]? {
            if !started { try await start() }
            while true {
                guard case .message(let message) = try await link.next() else { return nil }
                if let object = message[key] as? [String: Any] { return object }
                if message["ok"] as? Bool == false, let error = message["error"] as? [String: Any] {
                    throw MonitorError(code: error["code"] as? String ?? "error", message: error["message"] as? String ?? "the agent ended the stream")
                }
            }
        }

        private var started = false

        private func start() async throws {
            var members: [String: Any] = ["op": "updates"]
            if let configuration = request.configuration { members["preset"] = configuration.name }
            if let accuracy = request.accuracy { members["accuracy"] = accuracy.rawValue }
            if let significantChangeM = request.significantChangeM { members["significant_change_m"] = significantChangeM }
            request.options.add(to: &members)
            _ = try await link.setUpRequest(members)
            started = true
        }
    }

    /// What a stream says while its agent is away: no location.
    static let agentAway = LocationUpdate(location: nil, placemark: nil, isStationary: false, diagnostics: .locationUnavailable)

    init(location: Location?, placemark: Placemark?, isStationary: Bool, diagnostics: Diagnostics) {
        self.location = location
        self.placemark = placemark
        self.isStationary = isStationary
        self.diagnostics = diagnostics
    }

    /// From the stream's TPV object.
    init(_ tpv: [String: Any]) {
        let (location, diagnostics, isStationary) = LocationUpdate.parse(tpv)
        self.location = location
        placemark = (tpv["place"] as? [String: Any]).flatMap(Placemark.init)
        self.diagnostics = diagnostics
        self.isStationary = isStationary
    }

    static func parse(_ tpv: [String: Any]) -> (Location?, Diagnostics, Bool) {
        var diagnostics = Diagnostics()
        for name in tpv["diagnostics"] as? [String] ?? [] {
            switch name {
            case "stationary": diagnostics.insert(.stationary)
            case "locationUnavailable": diagnostics.insert(.locationUnavailable)
            case "accuracyLimited": diagnostics.insert(.accuracyLimited)
            default: break
            }
        }
        let isStationary = tpv["isStationary"] as? Bool ?? false
        guard let latitude = tpv["lat"] as? Double, let longitude = tpv["lon"] as? Double else { return (nil, diagnostics, isStationary) }
        let time = (tpv["time"] as? String).flatMap(LocationUpdate.date) ?? Date()
        let location = Location(coordinate: Coordinate(latitude: latitude, longitude: longitude), altitude: tpv["altMSL"] as? Double,
                                horizontalAccuracy: tpv["eph"] as? Double, speed: tpv["speed"] as? Double, course: tpv["track"] as? Double,
                                timestamp: time, ellipsoidalAltitude: tpv["altHAE"] as? Double,
                                verticalAccuracy: tpv["epv"] as? Double, isSimulated: tpv["simulated"] as? Bool ?? false)
        return (location, diagnostics, isStationary)
    }

    /// An ISO 8601 time with fractional seconds, as the agent writes them.
    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}

/// A hold on the radios without updates (CLServiceSession's gateway meaning): while it lasts, the
/// agent runs the receiver and the BLE scan at least at `accuracy`, and the receiver's platform
/// model at least as loose as `activityType`'s, as an update stream would, but sends nothing.
/// A program that answers `requestLocation` quickly, or that ranges at short notice, holds one.
///
///     let session = ServiceSession(accuracy: .best)
///     ...
///     session.invalidate()          // or let it go: the radios go back to the site's tier
///
/// The hold is taken when the session is made (`isHeld` says when the agent took it) and taken
/// again when the agent restarts; a refusal (no agent, no access) is in `error`.
public final class ServiceSession: Sendable {
    private let link: AgentLink
    private let holder: Task<Void, Never>
    private let state = SessionState()

    public init(accuracy: LocationUpdate.Accuracy? = nil, activityType: LocationUpdate.LiveConfiguration? = nil,
                stateDirectory: String = Monitor.defaultStateDirectory) {
        let link = AgentLink(stateDirectory: stateDirectory, purpose: .reading, resumes: true)
        let state = self.state
        self.link = link
        holder = Task {
            var members: [String: Any] = ["op": "updates", "quiet": true]
            if let accuracy { members["accuracy"] = accuracy.rawValue }
            if let activityType { members["activity"] = activityType.name }
            do {
                _ = try await link.setUpRequest(members)
                state.set(held: true, error: nil)
                while true {
                    // A quiet stream sends nothing: a gap is the agent gone, and the hold is
                    // back once a request on the new connection (which took it again) answers.
                    guard case .gap = try await link.next() else { continue }
                    state.set(held: false, error: nil)
                    while true {
                        try Task.checkCancellation()
                        do {
                            _ = try await link.request(["op": "hello"])
                            break
                        } catch let error as MonitorError where AgentLink.isTransient(error) {
                            continue
                        }
                    }
                    state.set(held: true, error: nil)
                }
            } catch {
                state.set(held: false, error: error as? MonitorError ?? MonitorError(code: "error", message: "\(error)"))
            }
        }
    }

    deinit { invalidate() }

    /// Lets the radios go (as releasing the session does).
    public func invalidate() {
        link.close()
        holder.cancel()
    }

    /// The agent holds the radios for this session now.
    public var isHeld: Bool { state.held }
    /// Why the hold could not be taken (`permission_denied`, `bad_argument`, or `disconnected`
    /// when no agent runs at the state directory); nil while all is well.
    public var error: MonitorError? { state.error }

    /// Waits until the agent holds the radios for this session (or refused it), at most `timeout`
    /// seconds; true when held.
    public func waitUntilHeld(timeout: TimeInterval = 10) async -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !state.held && state.error == nil && Date() < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        return state.held
    }

    final class SessionState: @unchecked Sendable {
        private let lock = NSLock()
        private var heldNow = false
        private var failure: MonitorError? = nil
        var held: Bool { lock.withLock { heldNow } }
        var error: MonitorError? { lock.withLock { failure } }
        func set(held: Bool, error: MonitorError?) { lock.withLock { (heldNow, failure) = (held, error) } }
    }
}
