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
/// quiet. If the agent stops, the sequence ends by throwing `MonitorError` `disconnected`; it
/// does not reconnect (a new `liveUpdates` call starts a new stream).
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

    /// Updates with `configuration`, at `accuracy` (nil: the site's `[updates] accuracy`), from
    /// the agent running with `stateDirectory`. The stream starts at the first iteration and
    /// stops when the iteration does.
    public static func liveUpdates(_ configuration: LiveConfiguration = .default, accuracy: Accuracy? = nil,
                                   stateDirectory: String = Monitor.defaultStateDirectory) -> Updates {
        Updates(configuration: configuration, accuracy: accuracy, stateDirectory: stateDirectory)
    }

    public struct Updates: AsyncSequence, Sendable {
        let configuration: LiveConfiguration
        let accuracy: Accuracy?
        let stateDirectory: String
        /// Significant change: an update only after a move of this many metres.
        var significantChangeM: Double? = nil

        public func makeAsyncIterator() -> Iterator { Iterator(session: Session(self)) }

        public struct Iterator: AsyncIteratorProtocol {
            let session: Session
            public mutating func next() async throws -> LocationUpdate? { try await session.next() }
        }
    }

    /// One stream's connection; releasing it (the iterator going away) hangs up, which ends the
    /// agent's stream and lets the radios go back to the site's tier.
    public final class Session: @unchecked Sendable {
        private let request: Updates
        private let lock = NSLock()
        private var channel: ControlChannel?

        init(_ request: Updates) { self.request = request }

        deinit { channel?.hangUp() }

        func next() async throws -> LocationUpdate? {
            try await LocationUpdate(nextObject("update"))
        }

        /// The next streamed object under `key` ("update" or "visit"), skipping the others.
        func nextObject(_ key: String) async throws -> [String: Any] {
            let channel = try await open()
            while true {
                guard let message = await channel.nextStreamed() else {
                    throw MonitorError(code: "disconnected", message: "the agent closed the connection (stopped?)")
                }
                if let object = message[key] as? [String: Any] { return object }
                if message["ok"] as? Bool == false, let error = message["error"] as? [String: Any] {
                    throw MonitorError(code: error["code"] as? String ?? "error", message: error["message"] as? String ?? "the agent ended the stream")
                }
            }
        }

        private func open() async throws -> ControlChannel {
            if let channel = lock.withLock({ self.channel }) { return channel }
            // Positions are read: read.sock, so an account that may only read gets them too.
            let channel = try ControlChannel.open(stateDirectory: request.stateDirectory, for: .reading)
            var members: [String: Any] = ["op": "updates", "preset": request.configuration.name]
            if let accuracy = request.accuracy { members["accuracy"] = accuracy.rawValue }
            if let significantChangeM = request.significantChangeM { members["significant_change_m"] = significantChangeM }
            _ = try await channel.request(members)
            lock.withLock { self.channel = channel }
            return channel
        }
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
                                verticalAccuracy: tpv["epv"] as? Double)
        return (location, diagnostics, isStationary)
    }

    /// An ISO 8601 time with fractional seconds, as the agent writes them.
    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
