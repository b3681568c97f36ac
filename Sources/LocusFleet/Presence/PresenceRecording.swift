import Foundation
import LocusCore

/// What `locus-fleet presence calibrate` listened to: the gateways' presence messages with their
/// arrival times. From them, the calibration (`PresenceCalibration`): each gateway's own iBeacon
/// (the floor plan's `[[gateway]] beacon`) heard by the others gives the receive offsets; a tag
/// laid at a known spot (`TAG=X,Y`) gives its power. And what the calibration
/// changes: the same messages decided with it and without it.
public struct PresenceRecording {
    public let plan: PresenceFloorPlan
    public private(set) var messages: [(timeMs: Int64, payload: [UInt8])] = []

    public init(plan: PresenceFloorPlan) { self.plan = plan }

    public mutating func take(_ payload: [UInt8], timeMs: Int64) { messages.append((timeMs, payload)) }

    /// A message's gateway (its index in the plan) and its tags (name, filtered RSSI, count).
    func read(_ payload: [UInt8]) -> (gateway: Int, tags: [(name: String, rssiDBm: Double, count: Int)])? {
        guard let message = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any],
              let id = message["gateway"] as? String, let gateway = plan.gateways.firstIndex(where: { $0.id == id }),
              let tags = message["tags"] as? [[String: Any]] else { return nil }
        return (gateway, tags.compactMap { tag in
            guard let name = PresenceService.tagName(tag), let rssi = tag["rssi"] as? Double, let count = tag["count"] as? Int, count > 0 else { return nil }
            return (name, rssi, count)
        })
    }

    /// The calibration from the gateways' beacons and the tags at their spots (by tag name).
    public func calibrate(spots: [String: PresenceFloorPlan.Point]) -> (result: PresenceCalibration.Result, tagPowersDBm: [String: Double]) {
        let beacons = Dictionary(plan.gateways.enumerated().compactMap { index, gateway in gateway.beacon.map { ($0, index) } },
                                 uniquingKeysWith: { first, _ in first })
        let names = Array(spots.keys).sorted()
        var hearings: [PresenceCalibration.Hearing] = []
        var observations: [String: [PresenceObservation]] = [:]
        for (_, payload) in messages {
            guard let (gateway, tags) = read(payload) else { continue }
            for tag in tags {
                if let sender = beacons[tag.name], sender != gateway {
                    hearings.append(.init(listener: gateway, sender: sender, rssiDBm: tag.rssiDBm))
                } else if spots[tag.name] != nil {
                    observations[tag.name, default: []].append(PresenceObservation(gateway: gateway, rssiDBm: tag.rssiDBm, count: tag.count))
                }
            }
        }
        let atSpots = names.enumerated().map { number, name in
            PresenceCalibration.TagAtSpot(tag: UInt64(number), spot: spots[name]!, observations: observations[name] ?? [])
        }
        let result = PresenceCalibration.solve(plan: plan, hearings: hearings, tags: atSpots.filter { !$0.observations.isEmpty })
        var powers: [String: Double] = [:]
        for (number, name) in names.enumerated() { powers[name] = result.tagPowersDBm[UInt64(number)] }
        return (result, powers)
    }

    /// The recording decided once a second with the calibration and without it: the tag-rounds
    /// decided, and those whose area differs.
    public func decisionsChanged(offsetsDB: [Double], tagPowersDBm: [String: Double]) -> (decided: Int, differing: Int) {
        guard let first = messages.first?.timeMs else { return (0, 0) }
        var calibrated = PresenceService(plan: plan, gatewayOffsetsDB: offsetsDB)
        calibrated.calibratedPowersDBm = tagPowersDBm
        var plain = PresenceService(plan: plan)
        var decided = 0, differing = 0
        var roundEnd = first + 1_000
        var index = 0
        while index < messages.count {
            while index < messages.count && messages[index].timeMs < roundEnd {
                calibrated.take(messages[index].payload)
                plain.take(messages[index].payload)
                index += 1
            }
            _ = calibrated.decide(nowMs: roundEnd)
            _ = plain.decide(nowMs: roundEnd)
            for tag in calibrated.tagNames {
                decided += 1
                if calibrated.area(of: tag) != plain.area(of: tag) { differing += 1 }
            }
            roundEnd += 1_000
        }
        return (decided, differing)
    }
}

/// The calibration file `presence calibrate --out` writes and `presence run --calibration` reads.
public enum PresenceCalibrationFile {
    public static func text(plan: PresenceFloorPlan, offsetsDB: [Double], solved: [Bool], tagPowersDBm: [String: Double], note: String) -> String {
        var text = "# \(note)\n[gateway_offsets_db]\n"
        for (index, gateway) in plan.gateways.enumerated() where solved[index] {
            text += "\"\(gateway.id)\" = \(String(format: "%.2f", offsetsDB[index]))\n"
        }
        text += "\n[tag_powers_dbm]\n"
        for (name, power) in tagPowersDBm.sorted(by: { $0.key < $1.key }) { text += "\"\(name)\" = \(String(format: "%.2f", power))\n" }
        return text
    }

    /// The offsets in the plan's gateway order (0 for a gateway the file does not name) and the
    /// tag powers; the problem, at its line, when the file cannot be used.
    public static func read(_ text: String, plan: PresenceFloorPlan, file: String) throws(ConfigError) -> (offsetsDB: [Double], tagPowersDBm: [String: Double]) {
        let report = try ConfigReport.parse(Array(text.utf8), file: file)
        var root = TableReader(report.document.root, report: report, path: "")
        var offsets = Array(repeating: 0.0, count: plan.gateways.count)
        var powers: [String: Double] = [:]
        if var table = root.table("gateway_offsets_db") {
            for entry in table.table.entries {
                guard let index = plan.gateways.firstIndex(where: { $0.id == entry.key }) else {
                    report.fail(at: entry.keyOffset, "gateway '\(entry.key)' is not in the floor plan")
                    table.skip(entry.key)
                    continue
                }
                offsets[index] = table.number(entry.key, in: -40...40) ?? 0
            }
            table.finish()
        }
        if var table = root.table("tag_powers_dbm") {
            for entry in table.table.entries { powers[entry.key] = table.number(entry.key, in: -127...20) }
            table.finish()
        }
        root.finish()
        if report.hasErrors { throw ConfigError(report.diagnostics) }
        return (offsets, powers)
    }
}
