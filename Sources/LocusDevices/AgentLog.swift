import CLocus
import LocusCore

/// The agent's diagnostic log on standard error. Under systemd (standard error not a terminal)
/// every line starts with its syslog priority, `<3>` to `<7>`, which journald reads as the level;
/// on a terminal the prefix is left out.
public enum AgentLog {
    public enum Priority: Int32 { case error = 3, warning = 4, notice = 5, info = 6, debug = 7 }

    public static let prefixed = locus_isatty(2) != 1

    /// The least severe priority written (`locus replay` keeps warnings and errors only).
    nonisolated(unsafe) public static var threshold = Priority.debug
    /// Nothing is written (the simulator runs thousands of agents; it prints its own findings).
    nonisolated(unsafe) public static var muted = false
    /// Whether the line `begin` started is written.
    nonisolated(unsafe) private static var begunLineShown = true

    public static func write(_ priority: Priority, _ text: String) {
        guard !muted, priority.rawValue <= threshold.rawValue else { return }
        Console.error(prefixed ? "<\(priority.rawValue)>\(text)\n" : "\(text)\n")
    }

    /// Starts a line in `line` (reset first) with its priority prefix when there is one; the
    /// caller writes the text and hands it to `finish`. For lines written on the loop's hot path:
    /// no String is made.
    public static func begin(_ priority: Priority, into line: inout JSONWriter) {
        line.reset()
        begunLineShown = !muted && priority.rawValue <= threshold.rawValue
        guard prefixed else { return }
        line.text("<")
        line.text(Int(priority.rawValue))
        line.text(">")
    }

    /// Ends the line `begin` started and writes it to standard error.
    public static func finish(_ line: inout JSONWriter) {
        guard begunLineShown else { return }
        line.newline()
        let bytes = line.bytes
        _ = locus_write_all(2, bytes.baseAddress, bytes.count)
    }

    public static func error(_ text: String) { write(.error, text) }
    public static func warning(_ text: String) { write(.warning, text) }
    public static func notice(_ text: String) { write(.notice, text) }
    public static func info(_ text: String) { write(.info, text) }
    public static func debug(_ text: String) { write(.debug, text) }
}
