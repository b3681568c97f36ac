/// Events as aligned text for people at a terminal (`--format text`).
public enum EventText {
    public static func line(_ event: MonitorEvent, sequence: Int64) -> String {
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

    public static func pad(_ text: String, _ width: Int, left: Bool = false) -> String {
        let count = text.utf8.count
        guard count < width else { return text + " " }
        let spaces = String(repeating: " ", count: width - count)
        return left ? spaces + text : text + spaces
    }
}

extension EventText {
    /// The aligned line (no newline) into `line`.
    public static func write(_ event: MonitorEvent, sequence: Int64, into line: inout JSONWriter) {
        line.text(self.line(event, sequence: sequence))
    }
}
