import Foundation

/// The fleet's presence from the gateways' messages (`<prefix>/presence`, docs/presence.md): each
/// message's tags become observations of those tags at the message's gateway (a gateway of the
/// floor plan, by its id); once a round (`decide`, every second in `locus-fleet presence run`)
/// every tag heard in the round gets one tracker update from all the gateways that heard it,
/// and the tags whose area changed (or that went away) are reported. Time is passed in.
public struct PresenceService {
    /// One area change of one tag.
    public struct Change: Equatable, Sendable {
        /// `phone:NAME`, or `UUID/MAJOR/MINOR`.
        public var tag: String
        /// Area names; nil: away, or in no area of the plan.
        public var from: String?
        public var to: String?
        public var away: Bool
        /// The tag's position and its spread (m), when it is not away.
        public var x: Double?
        public var y: Double?
        public var spreadM: Double?
        public var timeMs: Int64
    }

    /// What the service could not use, counted.
    public struct Counts: Equatable, Sendable {
        public var messages = 0
        public var unreadable = 0
        /// Messages from gateways the floor plan does not have.
        public var unknownGateways = 0
        public var tagsHeard = 0
    }

    public let plan: PresenceFloorPlan
    public private(set) var tracker: PresenceTracker
    public private(set) var counts = Counts()
    private var numbers: [String: UInt64] = [:]
    private var names: [UInt64: String] = [:]
    /// This round's observations per tag, and each tag's power at 1 m as its gateways say.
    private var round: [UInt64: [PresenceObservation]] = [:]
    private var powers: [UInt64: Double] = [:]
    /// The last area each tag was decided in, for the change that says it went away.
    private var lastArea: [UInt64: String] = [:]
    /// Calibrated powers (`PresenceCalibration`) win over the advertised ones.
    public var calibratedPowersDBm: [String: Double] = [:]

    public init(plan: PresenceFloorPlan, model: PresenceModel = PresenceModel(), gatewayOffsetsDB: [Double]? = nil) {
        self.plan = plan
        tracker = PresenceTracker(estimator: PresenceEstimator(plan: plan, model: model, gatewayOffsetsDB: gatewayOffsetsDB))
    }

    /// The tag's name in messages and changes.
    static func tagName(_ tag: [String: Any]) -> String? {
        if let phone = tag["phone"] as? String { return "phone:" + phone }
        guard let uuid = tag["uuid"] as? String, let major = tag["major"] as? Int, let minor = tag["minor"] as? Int else { return nil }
        return "\(uuid)/\(major)/\(minor)"
    }

    /// One `<prefix>/presence` message's payload.
    public mutating func take(_ payload: [UInt8]) {
        counts.messages += 1
        guard let message = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
              let gateway = message["gateway"] as? String, let tags = message["tags"] as? [[String: Any]] else {
            counts.unreadable += 1
            return
        }
        guard let index = plan.gateways.firstIndex(where: { $0.id == gateway }) else {
            counts.unknownGateways += 1
            return
        }
        for tag in tags {
            guard let name = Self.tagName(tag), let rssi = tag["rssi"] as? Double, let count = tag["count"] as? Int, count > 0 else { continue }
            let number = self.number(name)
            round[number, default: []].append(PresenceObservation(gateway: index, rssiDBm: rssi, count: count))
            if let power = tag["power"] as? Int, power != 0 { powers[number] = Double(power) }
        }
    }

    private mutating func number(_ name: String) -> UInt64 {
        if let number = numbers[name] { return number }
        let number = UInt64(numbers.count + 1)
        numbers[name] = number
        names[number] = name
        counts.tagsHeard = numbers.count
        return number
    }

    /// The round's decisions: one update per tag heard, then the tags not heard for the away
    /// timeout; what changed, in tag order.
    public mutating func decide(nowMs: Int64) -> [Change] {
        var changes: [Change] = []
        for (number, observations) in round.sorted(by: { $0.key < $1.key }) {
            let name = names[number]!
            let before = tracker.decision(tag: number)
            let power = calibratedPowersDBm[name] ?? powers[number] ?? -59
            guard let (after, fix) = tracker.update(tag: number, observations: observations, tagPowerDBm: power, nowMs: nowMs),
                  after != before else { continue }
            changes.append(Change(tag: name, from: areaName(before), to: areaName(after), away: false,
                                  x: fix.position.x, y: fix.position.y, spreadM: fix.spreadM, timeMs: nowMs))
            lastArea[number] = areaName(after)
        }
        round.removeAll(keepingCapacity: true)
        for number in tracker.expire(nowMs: nowMs).sorted() {
            changes.append(Change(tag: names[number]!, from: lastArea.removeValue(forKey: number), to: nil, away: true,
                                  x: nil, y: nil, spreadM: nil, timeMs: nowMs))
        }
        return changes
    }

    /// Every tag heard so far, by name.
    public var tagNames: [String] { numbers.keys.sorted() }

    /// The decided area of `tag` now (nil: away or in no area).
    public func area(of tag: String) -> String? {
        numbers[tag].flatMap { areaName(tracker.decision(tag: $0)) }
    }

    private func areaName(_ decision: PresenceTracker.Decision) -> String? {
        decision.area.map { plan.areas[$0].name }
    }
}

extension PresenceService.Change {
    /// `alice-iphone: living -> bedroom (3.10, 2.05 ±0.40 m)`, `...: away`.
    public var text: String {
        if away { return "\(tag): \(from ?? "-") -> away" }
        let position = x.map { String(format: " (%.2f, %.2f ±%.2f m)", $0, y ?? 0, spreadM ?? 0) } ?? ""
        return "\(tag): \(from ?? "-") -> \(to ?? "no area")\(position)"
    }
}
