import CLocus
import LocusCore
import LocusDevices

/// A program on the gateway following events over the control socket (`subscribe`, from after
/// the last event it saw), reading promptly, slowly (a little every so often), or vanishing
/// without a word. It reconnects after the agent went away (a power cut), as a program would.
final class SimulatedClient {
    struct Plan {
        enum Pace {
            case prompt
            case slow(everyS: Int, bytes: Int)
        }

        var connectS: Int
        /// nil: every monitor's events.
        var monitor: String?
        var pace: Pace
        /// Hangs up (and stays away) at this second.
        var vanishS: Int?
    }

    /// An event line as the client got it.
    struct Delivered {
        var sequence: UInt64
        var key: String
        var state: String
        var atNs: Int64
    }

    let plan: Plan
    private(set) var descriptor: Int32 = -1
    private var pending: [UInt8] = []
    private var nextReadNs: Int64 = 0
    private(set) var gone = false
    /// The last event received: the next subscription starts after it.
    private(set) var lastSequence: UInt64 = 0
    /// The first subscription's start (what the client must see every event after).
    private(set) var firstAfter: UInt64? = nil
    private(set) var delivered: [Delivered] = []
    /// Sequence numbers received on the current connection (they must increase).
    private var connectionLast: UInt64 = 0

    init(_ plan: Plan) { self.plan = plan }

    var isConnected: Bool { descriptor >= 0 }

    /// Connects and subscribes when due and not connected (the agent must be running).
    func connectIfDue(socket: String, nowNs: Int64, startNs: Int64) {
        guard !gone, descriptor < 0, nowNs >= startNs + Int64(plan.connectS) * 1_000_000_000 else { return }
        let connected = locus_unix_connect(socket)
        guard connected >= 0 else { return }
        descriptor = connected
        pending.removeAll()
        connectionLast = lastSequence
        if firstAfter == nil { firstAfter = lastSequence }
        var request = "{\"id\":1,\"op\":\"subscribe\",\"after_seq\":\(lastSequence)"
        if let monitor = plan.monitor { request += ",\"monitor\":\"\(monitor)\"" }
        request += "}\n"
        var bytes = Array(request.utf8)
        _ = locus_write(descriptor, &bytes, bytes.count)
    }

    /// Hangs up for good when the plan says so.
    func vanishIfDue(nowNs: Int64, startNs: Int64) {
        guard let vanish = plan.vanishS, !gone, nowNs >= startNs + Int64(vanish) * 1_000_000_000 else { return }
        close()
        gone = true
    }

    func close() {
        if descriptor >= 0 { _ = locus_close(descriptor) }
        descriptor = -1
    }

    /// Reads what has arrived (all of it, or the slow client's little), and checks each event
    /// line with `check` (sequence, key, state); the failure it reports, if any.
    func read(nowNs: Int64, check: (Delivered) -> String?) -> String? {
        guard descriptor >= 0, nowNs >= nextReadNs else { return nil }
        var limit = 1 << 20
        if case .slow(let everyS, let bytes) = plan.pace {
            nextReadNs = nowNs + Int64(everyS) * 1_000_000_000
            limit = bytes
        }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var total = 0
        while total < limit {
            var fd = descriptor
            var events = Int16(LOCUS_POLLIN)
            var revents: Int16 = 0
            guard locus_kernel_poll(&fd, &events, &revents, 1, 0) > 0 else { break }
            let count = locus_read(descriptor, &buffer, min(buffer.count, limit - total))
            if count <= 0 {
                // The agent went away (stopped or died): reconnect when it is back.
                close()
                break
            }
            pending += buffer[0..<count]
            total += count
        }
        while let newline = pending.firstIndex(of: 0x0A) {
            let line = String(decoding: pending[..<newline], as: UTF8.self)
            pending.removeSubrange(...newline)
            guard line.hasPrefix("{\"event\":") else { continue }
            guard let event = SimulatedClient.event(line, atNs: nowNs) else { return "a client got an event line it cannot read: \(line)" }
            if event.sequence <= connectionLast {
                return "a client got event \(event.sequence) after \(connectionLast) on one connection (repeated or out of order)"
            }
            connectionLast = event.sequence
            lastSequence = event.sequence
            delivered.append(event)
            if let problem = check(event) { return problem }
        }
        return nil
    }

    /// The members the simulator checks, found in the line as the agent writes them.
    static func event(_ line: String, atNs: Int64) -> Delivered? {
        func member(_ name: String) -> Substring? {
            guard let start = line.range(of: "\"\(name)\":") else { return nil }
            var value = line[start.upperBound...]
            if value.first == "\"" {
                value = value.dropFirst()
                return value.prefix { $0 != "\"" }
            }
            return value.prefix { $0.isNumber }
        }
        guard let monitor = member("monitor"), let identifier = member("identifier"), let state = member("state"),
              let seqText = member("seq"), let sequence = UInt64(seqText) else { return nil }
        return Delivered(sequence: sequence, key: "\(monitor)/\(identifier)", state: String(state), atNs: atNs)
    }
}
