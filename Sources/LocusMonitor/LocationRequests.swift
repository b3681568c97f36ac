import Foundation

// MARK: single location request, visits, significant change

extension LocationUpdate {
    /// A located answer (CLLocationManager.requestLocation's one location).
    public struct Located: Sendable, Equatable {
        public var location: Location
        /// How old the fix was when the agent answered, seconds.
        public var age: TimeInterval
        /// The timeout came first: the most accurate fix seen, less accurate than asked.
        public var accuracyLimited: Bool
        /// With `[geocoding] annotate = true`: the place nearest the location.
        public var placemark: Placemark? = nil
    }

    /// One location (CLLocationManager.requestLocation): the agent's last fix if it is at most
    /// `maxAge` seconds old (default 30) and within `accuracy` (default the site's tier; best 5 m,
    /// nearestTenMeters 10 m, hundredMeters 100 m, kilometer 1 km, threeKilometers 3 km);
    /// otherwise the agent wakes the receiver and answers with the first such fix, or at
    /// `timeout` (default 30 s) with the most accurate fix it saw (`accuracyLimited`). With no
    /// fix at all it throws `MonitorError` `location_unavailable`. The recommended call for a
    /// fixed gateway: the receiver runs only as long as the answer needs.
    public static func requestLocation(accuracy: Accuracy? = nil, maxAge: TimeInterval? = nil, timeout: TimeInterval? = nil,
                                       stateDirectory: String = Monitor.defaultStateDirectory) async throws -> Located {
        let channel = try ControlChannel.open(stateDirectory: stateDirectory, for: .reading)
        defer { channel.hangUp() }
        var members: [String: Any] = ["op": "locate"]
        if let accuracy { members["accuracy"] = accuracy.rawValue }
        if let maxAge { members["max_age_s"] = maxAge }
        if let timeout { members["timeout_s"] = timeout }
        let reply = try await channel.request(members)
        guard let result = reply["result"] as? [String: Any], let fix = result["fix"] as? [String: Any],
              var location = LocationUpdate.parse(fix).0 else {
            throw MonitorError(code: "bad_reply", message: "the agent's locate reply has no fix")
        }
        location.isSimulated = result["simulated"] as? Bool ?? false
        return Located(location: location, age: result["age_s"] as? Double ?? 0, accuracyLimited: result["accuracy_limited"] as? Bool ?? false,
                       placemark: (result["place"] as? [String: Any]).flatMap(Placemark.init))
    }

    /// CLVisit: a place the device stayed at, reported twice: at arrival (`departureDate` is
    /// `Date.distantFuture`) and at departure.
    public struct Visit: Sendable, Equatable {
        public var arrivalDate: Date
        /// `Date.distantFuture` until the device leaves (as CLVisit).
        public var departureDate: Date
        public var coordinate: Coordinate
        /// The stay's radius, metres (CLVisit.horizontalAccuracy).
        public var horizontalAccuracy: Double
        /// The visit record's sequence number in the agent's log (nil for a streamed visit).
        public var sequence: Int?
        /// With `[geocoding] annotate = true`: the place nearest the visit's centre.
        public var placemark: Placemark?

        public var isArrival: Bool { departureDate == .distantFuture }

        init?(_ object: [String: Any]) {
            guard let arrival = (object["arrival"] as? String).flatMap(LocationUpdate.date),
                  let latitude = object["lat"] as? Double, let longitude = object["lon"] as? Double else { return nil }
            arrivalDate = arrival
            departureDate = (object["departure"] as? String).flatMap(LocationUpdate.date) ?? .distantFuture
            coordinate = Coordinate(latitude: latitude, longitude: longitude)
            horizontalAccuracy = object["radius"] as? Double ?? 0
            sequence = object["seq"] as? Int
            placemark = (object["place"] as? [String: Any]).flatMap(Placemark.init)
        }
    }

    /// Visits as they happen (CLLocationManager's visit monitoring), from the agent's update
    /// stream at the site's settings: each stay longer than `[updates] visit_minimum` at arrival
    /// and again at departure. Breaking out ends the stream. When the agent restarts, the
    /// sequence reads the visits it logged meanwhile (`recentVisits`) and goes on with the new
    /// agent's; with `resumes: false` it throws `MonitorError` `disconnected` instead.
    public static func visits(resumes: Bool = true, stateDirectory: String = Monitor.defaultStateDirectory) -> Visits {
        Visits(updates: Updates(configuration: nil, accuracy: nil, stateDirectory: stateDirectory, resumes: resumes))
    }

    public struct Visits: AsyncSequence, Sendable {
        let updates: Updates

        public func makeAsyncIterator() -> Iterator { Iterator(session: Session(updates)) }

        public struct Iterator: AsyncIteratorProtocol {
            let session: Session
            /// Logged visits the stream missed while the agent was away, oldest first.
            var missed: [Visit] = []
            /// The newest visit returned: what is older is not returned again.
            var last: Visit? = nil

            public mutating func next() async throws -> Visit? {
                while true {
                    if !missed.isEmpty { return taken(missed.removeFirst()) }
                    guard let object = try await session.nextObject("visit") else {
                        missed = try await catchUp()
                        continue
                    }
                    if let visit = Visit(object), isNew(visit) { return taken(visit) }
                }
            }

            private mutating func taken(_ visit: Visit) -> Visit {
                last = visit
                return visit
            }

            /// Newer than the last one returned: a later arrival, or the departure of the
            /// stay whose arrival was returned. (The stream's and the log's times of one visit
            /// can differ by the fix that decided it: a second is the same visit.)
            func isNew(_ visit: Visit) -> Bool {
                guard let last else { return true }
                if visit.arrivalDate.timeIntervalSince(last.arrivalDate) > 1 { return true }
                return abs(visit.arrivalDate.timeIntervalSince(last.arrivalDate)) <= 1 && last.isArrival && !visit.isArrival
            }

            /// After a gap: the visits the agent logged since the last one returned (or in the
            /// last hour, when none was), through the new connection.
            private func catchUp() async throws -> [Visit] {
                let since = last.map { $0.arrivalDate.addingTimeInterval(-1) } ?? Date().addingTimeInterval(-3_600)
                let reply = try await session.link.request(["op": "visits", "since": since.timeIntervalSince1970])
                return (reply["visits"] as? [[String: Any]] ?? []).compactMap(Visit.init).filter(isNew)
            }
        }
    }

    /// The visits in the agent's log (arrival and departure reports, oldest first): those at or
    /// after `since`, the newest `limit` (at most 200). What a program reads after a restart.
    public static func recentVisits(since: Date? = nil, limit: Int? = nil,
                                    stateDirectory: String = Monitor.defaultStateDirectory) async throws -> [Visit] {
        let channel = try ControlChannel.open(stateDirectory: stateDirectory, for: .reading)
        defer { channel.hangUp() }
        var members: [String: Any] = ["op": "visits"]
        if let since { members["since"] = since.timeIntervalSince1970 }
        if let limit { members["limit"] = limit }
        let reply = try await channel.request(members)
        return (reply["visits"] as? [[String: Any]] ?? []).compactMap(Visit.init)
    }

    /// Significant-change updates (CLLocationManager's significant-change service): an update only
    /// after a move of `distance` metres (default 1,000; 50...100,000), whatever the site's
    /// `significant_change`; the agent runs the radios no finer than the coarse tier the distance
    /// implies (kilometer from 1 km, threeKilometers from 3 km, else hundredMeters).
    public static func significantChanges(distance: Double = 1_000, _ configuration: LiveConfiguration = .default, resumes: Bool = true,
                                          stateDirectory: String = Monitor.defaultStateDirectory) -> Updates {
        var updates = Updates(configuration: configuration, accuracy: nil, stateDirectory: stateDirectory, resumes: resumes)
        updates.significantChangeM = distance
        return updates
    }
}
