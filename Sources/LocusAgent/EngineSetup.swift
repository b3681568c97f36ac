import LocusCore

/// Site configuration -> engine: capacities and every configured condition.
enum EngineSetup {
    static func engine(for site: SiteConfig, board: BoardConfig) -> MonitorEngine {
        MonitorEngine(capacity: MonitorEngine.Capacity(conditions: site.capacity.conditions, events: max(2, site.capacity.events)),
                      beaconsSupported: board.bluetooth != nil)
    }

    static func settings(_ condition: ConditionConfig) -> ConditionSettings {
        var settings = ConditionSettings()
        settings.enterMarginM = condition.enterMarginM
        settings.exitMarginM = condition.exitMarginM
        settings.dwellMs = condition.dwellMs
        settings.accuracyGate = condition.accuracyGate
        settings.transit = condition.transit
        settings.exitTimeoutMs = condition.exitTimeoutMs
        settings.proximity = condition.proximity
        return settings
    }

    static func condition(_ condition: ConditionConfig) -> Condition {
        switch condition.kind {
        case .circle(let latitude, let longitude, let radius):
            return .circle(CircularGeographicCondition(latitude: latitude, longitude: longitude, radiusM: radius))
        case .beacon(let uuid, let major, let minor):
            return .beacon(BeaconIdentityCondition(uuid: uuid, major: major, minor: minor))
        }
    }

    /// Adds every configured condition; returns the ones that could not be added.
    static func addConfigured(_ site: SiteConfig, to engine: MonitorEngine, now: UTCTime) -> [(String, MonitorEngine.AddResult)] {
        var refused: [(String, MonitorEngine.AddResult)] = []
        for monitor in site.monitors {
            guard let name = FixedName(monitor.name) else { continue }
            for entry in monitor.conditions {
                guard let identifier = FixedName(entry.identifier) else { continue }
                let assuming: ConditionState? = entry.assuming == .unknown ? nil : entry.assuming
                let result = engine.add(monitor: name, identifier: identifier, condition: condition(entry), settings: settings(entry),
                                        assuming: assuming, now: now)
                if result == .limitExceeded || result == .monitorLimitExceeded { refused.append(("\(monitor.name)/\(entry.identifier)", result)) }
            }
        }
        return refused
    }
}

/// Events as JSON lines: the replay and `locus events` output, and the log export.
enum EventJSON {
    static func line(_ event: MonitorEvent, sequence: Int64) -> String {
        var json = JSONText()
        json.string("monitor", event.monitor.description)
        json.string("identifier", event.identifier.description)
        json.string("state", event.state.description)
        json.string("date", event.date.iso8601)
        json.integer("seq", Int(sequence))
        if let refinement = event.refinement {
            var inner = JSONText()
            inner.string("uuid", refinement.uuid.description)
            inner.integer("major", Int(refinement.major))
            inner.integer("minor", Int(refinement.minor))
            json.raw("refinement", inner.closed)
        } else {
            json.raw("refinement", "null")
        }
        var names = "["
        for (index, name) in event.diagnostics.names.enumerated() { names += (index == 0 ? "\"" : ",\"") + name + "\"" }
        json.raw("diagnostics", names + "]")
        json.raw("explain", explanation(event.explanation))
        return json.closed
    }

    static func explanation(_ explanation: Explanation) -> String {
        var json = JSONText()
        switch explanation.source {
        case .fix, .transit:
            json.string("source", explanation.source == .fix ? "fix" : "transit")
            // NaN: the position was not kept (`[privacy] fixes = "none"`).
            if explanation.latitude.isFinite {
                json.number("lat", explanation.latitude, decimals: 9)
                json.number("lon", explanation.longitude, decimals: 9)
            }
            if explanation.accuracyM >= 0 { json.number("accuracy_m", explanation.accuracyM, decimals: 1) }
            json.number("edge_distance_m", explanation.edgeDistanceM, decimals: 2)
            json.integer("dwell_ms", Int(explanation.dwellMs))
        case .sighting:
            json.string("source", "sighting")
            json.integer("rssi_samples", explanation.rssiSamples)
            if explanation.rssiSamples > 0 {
                json.number("rssi_filtered", explanation.rssiFiltered, decimals: 1)
                json.integer("rssi_min", Int(explanation.rssiMinimum))
                json.integer("rssi_max", Int(explanation.rssiMaximum))
                if explanation.distanceM >= 0 { json.number("distance_m", explanation.distanceM, decimals: 2) }
            }
        case .timeout:
            json.string("source", "timeout")
            json.integer("unseen_ms", Int(explanation.dwellMs))
        case .assumption:
            json.string("source", "assumption")
        }
        return json.closed
    }
}

/// Events as aligned text for people at a terminal (`--format text`).
enum EventText {
    static func line(_ event: MonitorEvent, sequence: Int64) -> String {
        var text = pad("\(sequence)", 5, left: true) + "  " + event.date.iso8601 + "  "
        text += pad("\(event.monitor)/\(event.identifier)", 24) + pad(event.state.description, 12)
        let explanation = event.explanation
        switch explanation.source {
        case .fix, .transit:
            let edge = explanation.edgeDistanceM
            text += (explanation.source == .transit ? "transit, " : "fix, ")
            text += edge < 0 ? "\(JSONText.fixed(-edge, decimals: 1)) m inside the edge" : "\(JSONText.fixed(edge, decimals: 1)) m outside the edge"
            if explanation.accuracyM >= 0 { text += " (accuracy \(JSONText.fixed(explanation.accuracyM, decimals: 1)) m)" }
            if explanation.dwellMs > 0 { text += ", held \(Quantity.formatMs(explanation.dwellMs))" }
        case .sighting:
            text += "sighting"
            if let refinement = event.refinement { text += " of major \(refinement.major) minor \(refinement.minor)" }
            if explanation.rssiSamples > 0 {
                text += ", RSSI \(JSONText.fixed(explanation.rssiFiltered, decimals: 0)) dBm"
                if explanation.distanceM >= 0 { text += " (~\(JSONText.fixed(explanation.distanceM, decimals: 1)) m)" }
            }
        case .timeout:
            text += "not seen for \(Quantity.formatMs(explanation.dwellMs))"
        case .assumption:
            text += "assumed"
        }
        let names = event.diagnostics.names
        if !names.isEmpty {
            var list = ""
            for (index, name) in names.enumerated() { list += (index == 0 ? "" : ", ") + name }
            text += " [" + list + "]"
        }
        return text
    }

    static func pad(_ text: String, _ width: Int, left: Bool = false) -> String {
        let count = text.utf8.count
        guard count < width else { return text + " " }
        let spaces = String(repeating: " ", count: width - count)
        return left ? spaces + text : text + spaces
    }
}
