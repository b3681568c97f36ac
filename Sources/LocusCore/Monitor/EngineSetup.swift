/// Site configuration -> engine: capacities and every configured condition.
public enum EngineSetup {
    public static func engine(for site: SiteConfig, board: BoardConfig) -> MonitorEngine {
        MonitorEngine(capacity: MonitorEngine.Capacity(conditions: site.capacity.conditions, events: max(2, site.capacity.events),
                                                       vertices: site.capacity.vertices, phones: site.capacity.phones),
                      beaconsSupported: board.bluetooth != nil)
    }

    public static func settings(_ condition: ConditionConfig) -> ConditionSettings {
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

    public static func condition(_ condition: ConditionConfig) -> Condition {
        switch condition.kind {
        case .circle(let latitude, let longitude, let radius):
            return .circle(CircularGeographicCondition(latitude: latitude, longitude: longitude, radiusM: radius))
        case .beacon(let uuid, let major, let minor):
            return .beacon(BeaconIdentityCondition(uuid: uuid, major: major, minor: minor))
        case .polygon(let polygon):
            return .polygon(polygon)
        case .corridor(let corridor):
            return .corridor(corridor)
        case .phone(let name):
            // The site's checks refused a name that is not one (`SiteSchema.readCondition`).
            return .phone(PhoneCondition(name: FixedName(name)!))
        }
    }

    /// Adds every configured condition; returns the ones that could not be added.
    public static func addConfigured(_ site: SiteConfig, to engine: MonitorEngine, now: UTCTime) -> [(String, MonitorEngine.AddResult)] {
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

