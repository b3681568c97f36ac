/// A condition and its settings as JSON: records, the log export, `locus monitor`.
public enum ConditionJSON {
    public static func condition(_ condition: Condition) -> String {
        var json = JSONText()
        switch condition {
        case .circle(let circle):
            json.number("lat", circle.latitude, decimals: 7)
            json.number("lon", circle.longitude, decimals: 7)
            json.number("radius", circle.radiusM, decimals: 2)
        case .beacon(let beacon):
            json.string("uuid", beacon.uuid.description)
            if let major = beacon.major { json.integer("major", Int(major)) }
            if let minor = beacon.minor { json.integer("minor", Int(minor)) }
        }
        return json.closed
    }

    public static func settings(_ settings: ConditionSettings) -> String {
        var json = JSONText()
        json.number("enter_margin", settings.enterMarginM, decimals: 2)
        json.number("exit_margin", settings.exitMarginM, decimals: 2)
        json.integer("dwell_ms", Int(settings.dwellMs))
        json.boolean("accuracy_gate", settings.accuracyGate)
        json.boolean("transit", settings.transit)
        if let timeout = settings.exitTimeoutMs { json.integer("exit_timeout_ms", Int(timeout)) }
        if let proximity = settings.proximity {
            switch proximity {
            case .immediate: json.string("proximity", "immediate")
            case .near: json.string("proximity", "near")
            case .far: json.string("proximity", "far")
            }
        }
        return json.closed
    }
}

/// `locus events [--state DIR] [--monitor NAME] [--after-seq N] [--follow]`: the events of the
/// log (all monitors, or one), as JSON lines with their log sequence numbers.

/// A record as JSON: identifier, condition, settings and lastEvent.
public enum RecordJSON {
    public static func line(_ identifier: FixedName, _ record: MonitorEngine.Record) -> String {
        var json = JSONText()
        json.string("identifier", identifier.description)
        json.raw("condition", ConditionJSON.condition(record.condition))
        json.raw("settings", ConditionJSON.settings(record.settings))
        json.raw("lastEvent", EventJSON.line(record.lastEvent, sequence: 0))
        if record.accuracyLimited { json.boolean("accuracyLimited", true) }
        json.boolean("site_file", record.fromSiteFile)
        return json.closed
    }

    public static func write(_ identifier: FixedName, _ record: MonitorEngine.Record, into line: inout JSONWriter) {
        var text = self.line(identifier, record)
        text.withUTF8 { line.raw(UnsafeRawBufferPointer($0)) }
    }
}
