/// Events as JSON lines: the replay and `locus events` output, the log export, records' lastEvent.
public enum EventJSON {
    /// The event object (no newline) into `line`:
    /// {"monitor":..,"identifier":..,"state":..,"date":..,"seq":..,"refinement":{..}|null,"diagnostics":[..],"explain":{..}}
    /// and, with `places`, `"place":{..}` after `explain` for an event with a position (a fix or
    /// a transit) within reach of a place.
    @_noAllocation
    public static func write(_ event: MonitorEvent, sequence: Int64, places: PlaceLabels? = nil, into line: inout JSONWriter) {
        line.beginObject()
        writeMembers(event, sequence: sequence, places: places, into: &line)
        line.endObject()
    }

    /// The event's members, for objects that extend it (the uplink's payload adds the gateway).
    @_noAllocation
    public static func writeMembers(_ event: MonitorEvent, sequence: Int64, places: PlaceLabels? = nil, into line: inout JSONWriter) {
        line.string("monitor", event.monitor)
        line.string("identifier", event.identifier)
        line.string("state", event.state.name)
        line.time("date", event.date)
        line.integer("seq", sequence)
        writeRefinement(event.refinement, into: &line)
        line.beginArray("diagnostics")
        event.diagnostics.forEachName { line.string($0) }
        line.endArray()
        line.key("explain")
        write(event.explanation, into: &line)
        if let places { writePlace(event.explanation, places, into: &line) }
    }

    /// `"place"` for an explanation with a position (a fix or a transit).
    @_noAllocation
    static func writePlace(_ explanation: Explanation, _ places: PlaceLabels, into line: inout JSONWriter) {
        guard explanation.source == .fix || explanation.source == .transit else { return }
        places.writeMember(latitude: explanation.latitude, longitude: explanation.longitude, into: &line)
    }

    /// "refinement": the beacon that satisfied a wildcard condition, or null.
    @_noAllocation
    static func writeRefinement(_ refinement: BeaconIdentity?, into line: inout JSONWriter) {
        if let refinement {
            line.beginObject("refinement")
            line.string("uuid", refinement.uuid)
            line.integer("major", Int64(refinement.major))
            line.integer("minor", Int64(refinement.minor))
            line.endObject()
        } else {
            line.null("refinement")
        }
    }

    /// Why the event happened: the observation's source and its measurements.
    @_noAllocation
    public static func write(_ explanation: Explanation, into line: inout JSONWriter) {
        line.beginObject()
        switch explanation.source {
        case .fix, .transit:
            line.string("source", explanation.source == .fix ? "fix" : "transit")
            // NaN: the position was not kept (`[privacy] fixes = "none"`).
            if explanation.latitude.isFinite {
                line.number("lat", explanation.latitude, decimals: 9)
                line.number("lon", explanation.longitude, decimals: 9)
            }
            if explanation.accuracyM >= 0 { line.number("accuracy_m", explanation.accuracyM, decimals: 1) }
            line.number("edge_distance_m", explanation.edgeDistanceM, decimals: 2)
            // Polygons and corridors: the nearest edge, numbered from 1 (docs/shapes.md).
            if explanation.nearestEdge > 0 { line.integer("edge", explanation.nearestEdge) }
            line.integer("dwell_ms", explanation.dwellMs)
        case .sighting:
            line.string("source", "sighting")
            line.integer("rssi_samples", explanation.rssiSamples)
            if explanation.rssiSamples > 0 {
                line.number("rssi_filtered", explanation.rssiFiltered, decimals: 1)
                line.integer("rssi_min", Int64(explanation.rssiMinimum))
                line.integer("rssi_max", Int64(explanation.rssiMaximum))
                if explanation.distanceM >= 0 { line.number("distance_m", explanation.distanceM, decimals: 2) }
            }
        case .timeout:
            line.string("source", "timeout")
            line.integer("unseen_ms", explanation.dwellMs)
        case .assumption:
            line.string("source", "assumption")
        }
        line.endObject()
    }


}
