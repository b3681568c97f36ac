import Foundation

/// `CLBeaconIdentityConstraint`: the beacons to range, a UUID optionally narrowed by major, then
/// minor.
public struct BeaconIdentityConstraint: Sendable, Equatable {
    public var uuid: UUID
    public var major: UInt16?
    public var minor: UInt16?
    /// A phone of the site's phones file instead (a Locus constraint beyond Core Location's).
    public var phone: String?

    public init(uuid: UUID) { self.uuid = uuid }

    /// One phone, by its name in the site's phones file: its `Beacon`s carry `phone`.
    public init(phone: String) {
        uuid = Beacon.phoneUUID
        self.phone = phone
    }

    public init(uuid: UUID, major: UInt16) {
        self.uuid = uuid
        self.major = major
    }

    public init(uuid: UUID, major: UInt16, minor: UInt16) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
    }

    /// The constraint as the control protocol's `range` request carries it.
    var requestMember: [String: Any] {
        if let phone { return ["phone": phone] }
        var constraint: [String: Any] = ["uuid": uuid.uuidString]
        if let major { constraint["major"] = Int(major) }
        if let minor { constraint["minor"] = Int(minor) }
        return constraint
    }
}

/// `CLBeacon`: a beacon found by ranging.
public struct Beacon: Sendable, Equatable {
    public var uuid: UUID
    public var major: UInt16
    public var minor: UInt16
    /// The monitor's filtered RSSI (a trimmed mean over 20 s), dBm; nil when the beacon was not
    /// heard in the last 2 s.
    public var filteredRSSI: Double?
    /// Estimated metres (the log-distance model with the beacon's own measured power); nil when
    /// unknown.
    public var distance: Double?
    /// nil: unknown (CLProximity.unknown): not heard recently, or no usable calibration.
    public var proximity: Proximity?
    /// When the agent last heard it.
    public var timestamp: Date
    /// A phone's name (ranged with `BeaconIdentityConstraint(phone:)`); its `uuid` is then the
    /// reserved `phoneUUID`, and `major` and `minor` are 0.
    public var phone: String? = nil

    /// The UUID the agent keeps for phones ("locus_phone" in ASCII).
    public static let phoneUUID = UUID(uuidString: "6C6F6375-735F-7068-6F6E-650000000000")!

    /// CLBeacon's `rssi`: the filtered RSSI rounded, 0 when unknown.
    public var rssi: Int { filteredRSSI.map { Int($0.rounded()) } ?? 0 }
    /// CLBeacon's `accuracy`: metres, -1 when unknown.
    public var accuracy: Double { distance ?? -1 }

    init?(_ object: [String: Any]) {
        if let phone = object["phone"] as? String {
            self.init(uuid: Beacon.phoneUUID, major: 0, minor: 0, object)
            self.phone = phone
            return
        }
        guard let text = object["uuid"] as? String, let uuid = UUID(uuidString: text),
              let major = object["major"] as? Int, let minor = object["minor"] as? Int else { return nil }
        self.init(uuid: uuid, major: UInt16(clamping: major), minor: UInt16(clamping: minor), object)
    }

    private init(uuid: UUID, major: UInt16, minor: UInt16, _ object: [String: Any]) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
        filteredRSSI = object["rssi"] as? Double
        distance = object["distance_m"] as? Double
        proximity = (object["proximity"] as? String).flatMap(Proximity.init(rawValue:))
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        timestamp = (object["last_heard"] as? String).flatMap { formatter.date(from: $0) } ?? Date()
    }
}

/// Beacon ranging from the running agent: once a second, every beacon matching `constraint`,
/// nearest first (Core Location's `startRangingBeacons(satisfying:)` as a sequence).
///
///     for try await beacons in rangeBeacons(satisfying: BeaconIdentityConstraint(uuid: tags)) {
///         if let nearest = beacons.first, nearest.proximity == .immediate { ... }
///     }
///
/// Ranging starts at the first iteration, through the agent's read socket (ranging only
/// reads), and stops when the iteration does. If the agent restarts, ranging starts again on the
/// new agent once it is up (nothing comes meanwhile); with `resumes: false` the sequence throws
/// `MonitorError` `disconnected` instead.
public func rangeBeacons(satisfying constraint: BeaconIdentityConstraint, resumes: Bool = true,
                         stateDirectory: String = Monitor.defaultStateDirectory) -> BeaconRanging {
    BeaconRanging(constraint: constraint, stateDirectory: stateDirectory, resumes: resumes)
}

public struct BeaconRanging: AsyncSequence, Sendable {
    public typealias Element = [Beacon]
    let constraint: BeaconIdentityConstraint
    let stateDirectory: String
    let resumes: Bool

    public func makeAsyncIterator() -> Iterator { Iterator(session: Session(self)) }

    public struct Iterator: AsyncIteratorProtocol {
        let session: Session
        public mutating func next() async throws -> [Beacon]? { try await session.next() }
    }

    /// One ranging connection; releasing it (the iterator going away) hangs up, which ends
    /// the agent's ranging for it.
    public final class Session: @unchecked Sendable {
        private let request: BeaconRanging
        private let link: AgentLink
        private var started = false

        init(_ request: BeaconRanging) {
            self.request = request
            link = AgentLink(stateDirectory: request.stateDirectory, purpose: .reading, resumes: request.resumes)
        }

        deinit { link.close() }

        func next() async throws -> [Beacon]? {
            if !started {
                _ = try await link.setUpRequest(["op": "range", "constraint": request.constraint.requestMember])
                started = true
            }
            while true {
                guard case .message(let message) = try await link.next() else { continue }
                if message["ranging"] != nil {
                    return (message["beacons"] as? [[String: Any]] ?? []).compactMap(Beacon.init)
                }
                if message["ok"] as? Bool == false, let error = message["error"] as? [String: Any] {
                    throw MonitorError(code: error["code"] as? String ?? "error", message: error["message"] as? String ?? "the agent ended ranging")
                }
            }
        }
    }
}
