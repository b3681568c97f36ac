/// Events as aligned text for people at a terminal (`--format text`) and the agent's log:
///
///         3  2018-08-20T09:47:41.000Z  harbour/berth           satisfied   fix, 59.8 m inside the edge (accuracy 3.0 m), held 3s
///
/// With `places`, an event with a position ends its explanation with the place nearest it:
/// "fix, 59.8 m inside the edge (accuracy 3.0 m), held 3s, 2.1 km NE of Bremerhaven, Bremen, DE".
public enum EventText {
    /// The aligned line (no newline) into `line`.
    @_noAllocation
    public static func write(_ event: MonitorEvent, sequence: Int64, places: PlaceLabels? = nil, into line: inout JSONWriter) {
        var start = line.count
        line.text(sequence)
        line.pad(from: start, to: 5, left: true)
        line.text("  ")
        line.text(event.date)
        line.text("  ")
        start = line.count
        line.text(event.monitor)
        line.text("/")
        line.text(event.identifier)
        line.pad(from: start, to: 24)
        start = line.count
        line.text(event.state.name)
        line.pad(from: start, to: 12)
        explain(event, into: &line)
        if let places, event.explanation.source == .fix || event.explanation.source == .transit {
            places.writeText(latitude: event.explanation.latitude, longitude: event.explanation.longitude, into: &line)
        }
        var first = true
        event.diagnostics.forEachName { name in
            line.text(first ? " [" : ", ")
            line.text(name)
            first = false
        }
        if !first { line.text("]") }
    }

    @_noAllocation
    static func explain(_ event: MonitorEvent, into line: inout JSONWriter) {
        let explanation = event.explanation
        switch explanation.source {
        case .fix, .transit:
            let edge = explanation.edgeDistanceM
            line.text(explanation.source == .transit ? "transit, " : "fix, ")
            line.text(edge < 0 ? -edge : edge, decimals: 1)
            line.text(edge < 0 ? " m inside the edge" : " m outside the edge")
            if explanation.nearestEdge > 0 {
                line.text(" (edge ")
                line.text(Int64(explanation.nearestEdge))
                line.text(")")
            }
            if explanation.accuracyM >= 0 {
                line.text(" (accuracy ")
                line.text(explanation.accuracyM, decimals: 1)
                line.text(" m)")
            }
            if explanation.dwellMs > 0 {
                line.text(", held ")
                line.text(milliseconds: explanation.dwellMs)
            }
        case .sighting:
            line.text("sighting")
            if let refinement = event.refinement {
                line.text(" of major ")
                line.text(Int64(refinement.major))
                line.text(" minor ")
                line.text(Int64(refinement.minor))
            }
            if explanation.rssiSamples > 0 {
                line.text(", RSSI ")
                line.text(explanation.rssiFiltered, decimals: 0)
                line.text(" dBm")
                if explanation.distanceM >= 0 {
                    line.text(" (~")
                    line.text(explanation.distanceM, decimals: 1)
                    line.text(" m)")
                }
            }
        case .timeout:
            line.text("not seen for ")
            line.text(milliseconds: explanation.dwellMs)
        case .assumption:
            line.text("assumed")
        }
    }

}
