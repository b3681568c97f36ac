import LocusCore

/// Telling site files from board files, and one-line summaries of each.
enum ConfigFiles {
    enum Kind { case site, board, unknown }

    /// A board file has a [board] table; a site file a top-level `board = "path"`. A file that
    /// does not parse is treated as a site file so the parser reports its error.
    static func kind(of source: [UInt8]) -> Kind {
        guard let document = try? TOMLParser.parse(source) else { return .unknown }
        switch document.root["board"] {
        case .table?: return .board
        case .string?: return .site
        default: return .unknown
        }
    }

    static func summary(of board: BoardConfig) -> String {
        var parts: [String] = ["board '\(board.name)'"]
        if let gnss = board.gnss { parts.append("gnss \(gnss.device) at \(gnss.baud) baud (\(gnss.receiver))") }
        switch board.bluetooth {
        case .hci(let index)?: parts.append("bluetooth hci\(index)")
        case .feed(let path)?: parts.append("bluetooth feed \(path)")
        case nil: parts.append("no bluetooth")
        }
        if let gpio = board.gpio {
            let chip: String
            switch gpio.chip {
            case .name(let name): chip = "chip \(name)"
            case .label(let label): chip = "chip labelled \(label)"
            case .simulated: chip = "simulated lines"
            }
            parts.append("gpio \(chip), \(count(gpio.outputs.count, "output")), \(count(gpio.inputs.count, "input"))")
        } else {
            parts.append("no gpio")
        }
        return join(parts)
    }

    static func summary(of site: SiteConfig) -> String {
        join([count(site.monitors.count, "monitor"), count(site.conditionCount, "condition"), count(site.actions.count, "action"),
              "state in \(site.stateDirectory)"])
    }

    /// "1 output", "2 outputs".
    static func count(_ value: Int, _ noun: String) -> String {
        value == 1 ? "1 \(noun)" : "\(value) \(noun)s"
    }

    private static func join(_ parts: [String]) -> String {
        var text = ""
        for (index, part) in parts.enumerated() { text += (index == 0 ? "" : ", ") + part }
        return text
    }
}

