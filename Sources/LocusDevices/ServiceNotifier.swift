import CLocus

/// sd_notify(3) without libsystemd: one datagram to $NOTIFY_SOCKET per state change. Silent
/// (and free) when the agent was not started by systemd with Type=notify.
public struct ServiceNotifier {
    public let socketPath: String?
    /// Half of systemd's WatchdogSec (from $WATCHDOG_USEC), or nil when no watchdog is set.
    public let watchdogIntervalNs: Int64?

    public init() {
        socketPath = Process.environment("NOTIFY_SOCKET").flatMap { $0.isEmpty ? nil : $0 }
        var interval: Int64? = nil
        if let text = Process.environment("WATCHDOG_USEC"), let microseconds = Int64(text), microseconds > 0 {
            // WATCHDOG_PID, when set, names the process the watchdog is meant for.
            let pid = Process.environment("WATCHDOG_PID").flatMap { Int32($0) }
            if pid == nil || pid == Process.id { interval = microseconds * 1_000 / 2 }
        }
        watchdogIntervalNs = interval
    }

    /// Sends "READY=1", "WATCHDOG=1", "STOPPING=1", "RELOADING=1", "STATUS=..." (newline-separated).
    @discardableResult
    public func notify(_ state: String) -> SystemError? {
        guard let socketPath else { return nil }
        var copy = state
        let result = copy.withUTF8 { locus_unix_send_datagram(socketPath, $0.baseAddress, $0.count) }
        return result < 0 ? SystemError(code: -result) : nil
    }
}
