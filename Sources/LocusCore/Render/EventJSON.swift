/// Events as JSON lines: the replay and `locus events` output, and the log export.
public enum EventJSON {
    public static func line(_ event: MonitorEvent, sequence: Int64) -> String {
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

    public static func explanation(_ explanation: Explanation) -> String {
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

extension EventJSON {
    /// The event object (no newline) into `line`.
    public static func write(_ event: MonitorEvent, sequence: Int64, into line: inout JSONWriter) {
        var text = self.line(event, sequence: sequence)
        text.withUTF8 { line.raw(UnsafeRawBufferPointer($0)) }
    }
}
