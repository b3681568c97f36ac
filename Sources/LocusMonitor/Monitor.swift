import Foundation

/// CLMonitor for Swift programs on a Locus gateway: a client of the running agent (`locus run`)
/// through its control socket, the way CLMonitor is a client of locationd.
///
///     let monitor = try await Monitor("gate")
///     try await monitor.add(CircularGeographicCondition(center: Coordinate(latitude: 37.33467, longitude: -122.00898), radius: 100),
///                           identifier: "work", assuming: .unsatisfied)
///     for try await event in monitor.events { print(event.identifier, event.state) }
///
/// One open instance per name: a second `Monitor("gate")` (in any process) fails with
/// `in_use` until the first is released. Events are delivered only on change, and an event
/// counts as taken once `events` has returned it: a program that stops iterating and starts again
/// later gets exactly what it had not taken, in order.
///
/// When the agent restarts, the monitor connects again, opens itself again and carries on from
/// its consumer cursor: the loop over `events` goes on with nothing missed and nothing twice
/// (a request made meanwhile waits up to 30 s for the agent). With `resumes: false` the loop
/// throws `MonitorError` `disconnected` instead.
public actor Monitor {
    public enum State: String, Sendable {
        case unknown, satisfied, unsatisfied
    }

    /// iOS 18's `CLMonitor.Event` diagnostics.
    public struct Diagnostics: OptionSet, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        public static let accuracyLimited = Diagnostics(rawValue: 1)
        public static let conditionLimitExceeded = Diagnostics(rawValue: 2)
        public static let conditionUnsupported = Diagnostics(rawValue: 4)
        public static let persistenceUnavailable = Diagnostics(rawValue: 8)
    }

    public struct Event: Sendable {
        public var identifier: String
        public var state: State
        public var date: Date
        /// The concrete beacon behind a satisfied wildcard beacon condition.
        public var refinement: BeaconIdentity?
        public var diagnostics: Diagnostics
        /// The agent's log sequence number.
        public var sequence: Int
        /// With `[geocoding] annotate = true`: the place nearest the fix that decided the event.
        public var placemark: Placemark? = nil

        /// iOS 18's names for the diagnostics, read as `LocationUpdate`'s are.
        public var accuracyLimited: Bool { diagnostics.contains(.accuracyLimited) }
        public var conditionLimitExceeded: Bool { diagnostics.contains(.conditionLimitExceeded) }
        public var conditionUnsupported: Bool { diagnostics.contains(.conditionUnsupported) }
        public var persistenceUnavailable: Bool { diagnostics.contains(.persistenceUnavailable) }
    }

    /// The seeds' nested spellings (`CLMonitor.CircularGeographicCondition`).
    public typealias CircularGeographicCondition = LocusMonitor.CircularGeographicCondition
    public typealias BeaconIdentityCondition = LocusMonitor.BeaconIdentityCondition
    public typealias PolygonCondition = LocusMonitor.PolygonCondition
    public typealias CorridorCondition = LocusMonitor.CorridorCondition
    public typealias PhoneCondition = LocusMonitor.PhoneCondition

    public struct Record: Sendable {
        public var condition: any MonitoringCondition
        public var lastEvent: Event
    }

    public static let defaultStateDirectory = "/var/lib/locus"

    public let name: String
    private let link: AgentLink
    private var subscribed = false
    /// An event whose acknowledgement had to wait for a restarted agent: the new connection's
    /// subscription sends it again before the acknowledgement moves the cursor past it, and that
    /// copy is not returned. (Only that one: an agent whose state was emptied numbers its events
    /// from 1 again, and those are new.)
    private var resent: Int? = nil

    /// Opens (or creates) the monitor `name` on the agent running with `stateDirectory`.
    public init(_ name: String, stateDirectory: String = Monitor.defaultStateDirectory, resumes: Bool = true) async throws {
        self.name = name
        // Opening a monitor makes this program its consumer (a logged cursor): a change.
        link = AgentLink(stateDirectory: stateDirectory, purpose: .changing, resumes: resumes)
        _ = try await link.setUpRequest(["op": "open", "monitor": name])
    }

    /// Releases the monitor now (as dropping the last reference does): a loop over `events`
    /// ends with `disconnected`, and another client may open the name.
    public func close() { link.close() }

    /// Connections made again after the agent restarted.
    public var resumptions: Int { link.resumptions }

    /// `add(_:identifier:assuming:)`: an existing identifier is replaced and its record starts over.
    public func add(_ condition: some MonitoringCondition, identifier: String, assuming: State? = nil) async throws {
        var request: [String: Any] = ["op": "add", "monitor": name, "identifier": identifier]
        let member = condition.requestMember
        request[member.key] = member.value
        if let settings = condition.requestSettings { request["settings"] = settings }
        if let assuming { request["assuming"] = assuming.rawValue }
        _ = try await link.request(request)
    }

    public func remove(_ identifier: String) async throws {
        _ = try await link.request(["op": "remove", "monitor": name, "identifier": identifier])
    }

    /// Removes every condition of the monitor (those of the site file too, until the site is
    /// loaded again), one `remove` each; what was removed before a failure stays removed.
    public func removeAll() async throws {
        let reply = try await link.request(["op": "identifiers", "monitor": name])
        for identifier in reply["identifiers"] as? [String] ?? [] { try await remove(identifier) }
    }

    /// The identifiers of the monitor's conditions (empty if the agent cannot be asked).
    public var identifiers: [String] {
        get async {
            let reply = try? await link.request(["op": "identifiers", "monitor": name])
            return reply?["identifiers"] as? [String] ?? []
        }
    }

    public func record(for identifier: String) async -> Record? {
        guard let reply = try? await link.request(["op": "record", "monitor": name, "identifier": identifier]),
              let record = reply["record"] as? [String: Any] else { return nil }
        return Monitor.record(record)
    }

    /// Every change of every condition of this monitor, each once (see the type's note).
    public nonisolated var events: Events { Events(monitor: self) }

    public struct Events: AsyncSequence, Sendable {
        let monitor: Monitor
        public func makeAsyncIterator() -> Iterator { Iterator(monitor: monitor) }

        public struct Iterator: AsyncIteratorProtocol {
            let monitor: Monitor
            public mutating func next() async throws -> Event? { try await monitor.nextEvent() }
        }
    }

    /// Takes the next event: it is acknowledged to the agent before it is returned, so once the
    /// program has it, it is never delivered again.
    func nextEvent() async throws -> Event? {
        if !subscribed {
            _ = try await link.setUpRequest(["op": "subscribe", "monitor": name, "consumer": true])
            subscribed = true
        }
        while true {
            guard case .message(let message) = try await link.next() else { continue }
            if message["ok"] as? Bool == false, let error = message["error"] as? [String: Any] {
                throw MonitorError(code: error["code"] as? String ?? "error", message: error["message"] as? String ?? "the agent ended the events")
            }
            guard let object = message["event"] as? [String: Any], let event = Monitor.event(object) else { continue }
            if let copy = resent, event.sequence >= copy {
                resent = nil
                if event.sequence == copy { continue }
            }
            let connections = link.resumptions
            _ = try await link.request(["op": "ack", "monitor": name, "seq": event.sequence])
            if link.resumptions != connections { resent = event.sequence }
            return event
        }
    }

    static func event(_ object: [String: Any]) -> Event? {
        guard let identifier = object["identifier"] as? String, let state = (object["state"] as? String).flatMap(State.init(rawValue:)),
              let dateText = object["date"] as? String else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var refinement: BeaconIdentity? = nil
        if let found = object["refinement"] as? [String: Any], let uuid = (found["uuid"] as? String).flatMap(UUID.init(uuidString:)),
           let major = found["major"] as? Int, let minor = found["minor"] as? Int {
            refinement = BeaconIdentity(uuid: uuid, major: UInt16(major), minor: UInt16(minor))
        }
        var diagnostics = Diagnostics()
        for name in object["diagnostics"] as? [String] ?? [] {
            switch name {
            case "accuracyLimited": diagnostics.insert(.accuracyLimited)
            case "conditionLimitExceeded": diagnostics.insert(.conditionLimitExceeded)
            case "conditionUnsupported": diagnostics.insert(.conditionUnsupported)
            case "persistenceUnavailable": diagnostics.insert(.persistenceUnavailable)
            default: break
            }
        }
        return Event(identifier: identifier, state: state, date: formatter.date(from: dateText) ?? Date(timeIntervalSince1970: 0),
                     refinement: refinement, diagnostics: diagnostics, sequence: object["seq"] as? Int ?? 0,
                     placemark: (object["place"] as? [String: Any]).flatMap(Placemark.init))
    }

    static func record(_ object: [String: Any]) -> Record? {
        guard let condition = object["condition"] as? [String: Any], var last = object["lastEvent"] as? [String: Any] else { return nil }
        if last["identifier"] == nil { last["identifier"] = object["identifier"] }
        guard let event = event(last) else { return nil }
        func coordinates(_ value: Any?) -> [Coordinate]? {
            (value as? [[Double]])?.compactMap { $0.count == 2 ? Coordinate(latitude: $0[0], longitude: $0[1]) : nil }
        }
        if let vertices = coordinates(condition["polygon"]) {
            return Record(condition: PolygonCondition(vertices: vertices), lastEvent: event)
        }
        if let corridor = condition["corridor"] as? [String: Any], let path = coordinates(corridor["path"]), let width = corridor["width"] as? Double {
            return Record(condition: CorridorCondition(path: path, width: width), lastEvent: event)
        }
        if let latitude = condition["lat"] as? Double, let longitude = condition["lon"] as? Double, let radius = condition["radius"] as? Double {
            return Record(condition: CircularGeographicCondition(center: Coordinate(latitude: latitude, longitude: longitude), radius: radius),
                          lastEvent: event)
        }
        let proximity = ((object["settings"] as? [String: Any])?["proximity"] as? String).flatMap(Proximity.init(rawValue:))
        if let phone = condition["phone"] as? String {
            return Record(condition: PhoneCondition(name: phone, proximity: proximity), lastEvent: event)
        }
        guard let uuid = (condition["uuid"] as? String).flatMap(UUID.init(uuidString:)) else { return nil }
        var beacon = BeaconIdentityCondition(uuid: uuid)
        beacon.major = (condition["major"] as? Int).map { UInt16($0) }
        beacon.minor = (condition["minor"] as? Int).map { UInt16($0) }
        beacon.proximity = proximity
        return Record(condition: beacon, lastEvent: event)
    }
}
