import LocusCore
import LocusDevices

/// An HCI feed (`[bluetooth] feed`), owned by `BluetoothSource`: H4-framed HCI events from a
/// file, a pseudo-terminal or a UART. It holds the feed's reader (opened, and reopened with
/// backoff when it goes away), the H4 framer that cuts the bytes into event packets, and how
/// many opens in a row have failed (one log line per doubling, and one when it opens again).
struct HCIFeed: ~Copyable {
    /// The feed's path, resolved against the state directory.
    let path: String
    private var reader: SerialReader
    private var framer = H4Framer()
    private var openFailures = 0

    init(path: String) {
        self.path = path
        reader = SerialReader(path: path, baud: 115200)
    }

    var descriptor: Descriptor? { reader.descriptor }
    var isOpen: Bool { reader.isOpen }
    var nextAttemptAtNs: Int64? { reader.nextAttemptAtNs }

    /// Opens the feed when its retry time has come.
    mutating func openIfDue(_ now: AgentTime) {
        switch reader.openIfDue(now: now.monotonic.nanoseconds) {
        case .opened?:
            AgentLog.info("locus: bluetooth: reading the HCI feed \(path)\(OpenFailureReport.afterFailures(openFailures))")
            openFailures = 0
        case .openFailed(let error, let retry)?:
            openFailures += 1
            if let text = OpenFailureReport.text(openFailures, error, retryMs: retry) {
                AgentLog.warning("locus: bluetooth: cannot open the HCI feed \(path): \(text)")
            }
        case .lost?, nil:
            break
        }
    }

    /// Reads what the feed has: its bytes through the framer, each event packet gathered into
    /// `buffer` (see `SightingGather.gather`), stamped with `time`. A feed that closed is
    /// reopened later.
    mutating func read(_ now: AgentTime, _ time: UTCTime, _ buffer: UnsafeMutableBufferPointer<Sighting>, _ phones: Unmanaged<PhoneResolution>?,
                       _ count: inout Int, _ rejected: inout Int, _ dropped: inout Int, _ reports: inout Int) {
        let event = reader.read(now: now.monotonic.nanoseconds) { bytes in
            framer.consume(bytes) { packet in SightingGather.gather(packet, time, buffer, phones, &count, &rejected, &dropped, &reports) }
        }
        if case .lost? = event { AgentLog.warning("locus: bluetooth: the HCI feed \(path) closed; reopening") }
    }

    mutating func close() { reader.close() }
}
