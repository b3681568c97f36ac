import LocusCore
import LocusDevices

/// The GNSS receiver's serial port (`[gnss] device`), owned by `GNSSSource`: its reader (opened,
/// and reopened with backoff when it goes away), its path as resolved, how many opens in a row
/// have failed (one log line per doubling, and one when it opens again), and a loss the last
/// read noticed, until the source reports it.
///
/// The source reads through `reader` itself: its closure feeds the receiver control and the
/// decoder, which are the source's.
struct GNSSPort: ~Copyable {
    /// The device's path, resolved against the state directory.
    let path: String
    var reader: SerialReader
    private var openFailures = 0
    /// A port lost in the last read (nil error: end of file), until `takeLoss`.
    private var loss: SystemError?? = nil

    init(path: String, baud: Int) {
        self.path = path
        reader = SerialReader(path: path, baud: baud)
    }

    var descriptor: Descriptor? { reader.descriptor }
    var isOpen: Bool { reader.isOpen }

    /// Opens the port when its retry time has come; true when it has just opened.
    mutating func openIfDue(_ now: AgentTime) -> Bool {
        switch reader.openIfDue(now: now.monotonic.nanoseconds) {
        case .opened?:
            AgentLog.info("locus: gnss: reading \(path) at \(reader.baud) baud\(OpenFailureReport.afterFailures(openFailures))")
            openFailures = 0
            return true
        case .openFailed(let error, let retry)?:
            openFailures += 1
            if let text = OpenFailureReport.text(openFailures, error, retryMs: retry) { AgentLog.warning("locus: gnss: cannot open \(path): \(text)") }
            return false
        case .lost?, nil:
            return false
        }
    }

    /// The port went away in a read (nil: end of file); reported once the read's fixes are taken.
    mutating func lost(_ error: SystemError?) { loss = .some(error) }

    /// A loss not yet reported, once.
    mutating func takeLoss() -> SystemError?? {
        defer { loss = nil }
        return loss
    }
}
