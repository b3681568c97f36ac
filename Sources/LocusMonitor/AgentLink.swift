import Foundation

/// A connection to the agent that outlives the agent: when `locus run` restarts (an upgrade, a
/// SIGTERM, a crash and systemd's restart), a resuming link connects again and puts the new
/// connection where the old one was by sending again the requests that set it up (open the
/// monitor, subscribe as its consumer, start the update stream or the ranging), in order.
///
/// What a stream misses while the agent is away is each caller's to say: a monitor's events
/// come again from its consumer cursor, kept in the agent's log; visits are read back from the
/// log; live updates say `locationUnavailable` once; ranging simply carries on.
///
/// A link that does not resume (`resumes: false`) ends its stream with `MonitorError`
/// `disconnected`, as a program that must notice the agent going away wants.
final class AgentLink: @unchecked Sendable {
    /// What `next()` found on the connection.
    enum Streamed {
        /// A streamed line (an event, an update, a visit, ranging, or the error the agent sent
        /// before closing the stream).
        case message([String: Any])
        /// The agent went away; the next call waits for it and resumes.
        case gap
    }

    /// How long a request (add, remove, ack) waits for a restarting agent before it fails; a
    /// stream waits as long as it takes.
    static let requestPatience: TimeInterval = 30
    /// The pause between attempts to reach a restarting agent: doubling from the first to the
    /// longest.
    static let firstRetry: TimeInterval = 0.1
    static let longestRetry: TimeInterval = 2

    let stateDirectory: String
    let purpose: ControlChannel.Purpose
    let resumes: Bool
    private let lock = NSLock()
    private var channel: ControlChannel? = nil
    private var setUp: [[String: Any]] = []
    private var closed = false
    private var connectedOnce = false
    /// Connections made again after the agent went away.
    private(set) var resumptions = 0

    init(stateDirectory: String, purpose: ControlChannel.Purpose, resumes: Bool) {
        self.stateDirectory = stateDirectory
        self.purpose = purpose
        self.resumes = resumes
    }

    deinit { channel?.hangUp() }

    /// Ends the link for good: the stream ends with `disconnected`, nothing reconnects.
    func close() {
        let open = lock.withLock {
            closed = true
            return channel
        }
        open?.hangUp()
    }

    /// Sends a request that also sets up every later connection, and records it once the agent
    /// accepted it. The first connection's failure is thrown as it is (no agent, no access).
    func setUpRequest(_ members: [String: Any]) async throws -> [String: Any] {
        let reply = try await request(members)
        lock.withLock { setUp.append(members) }
        return reply
    }

    /// Sends a request and waits for its reply; across a restart of the agent, on the new
    /// connection (waiting up to `requestPatience` for it).
    func request(_ members: [String: Any]) async throws -> [String: Any] {
        let current = try await connection(patience: AgentLink.requestPatience)
        do {
            return try await current.request(members)
        } catch let error as MonitorError where error.code == "disconnected" && resumes && !isClosed {
            drop(current)
            return try await connection(patience: AgentLink.requestPatience).request(members)
        }
    }

    /// The next streamed line. When the agent goes away it returns `.gap` once (a resuming link)
    /// or throws `disconnected`; the call after a gap waits for the agent and resumes.
    func next() async throws -> Streamed {
        try Task.checkCancellation()
        let current = try await connection(patience: nil)
        // A cancelled task hangs up: the agent ends the stream, and the wait ends at once.
        let message = await withTaskCancellationHandler { await current.nextStreamed() } onCancel: { current.hangUp() }
        if let message { return .message(message) }
        try Task.checkCancellation()
        guard resumes && !isClosed else {
            throw MonitorError(code: "disconnected", message: "the agent closed the connection (stopped?)")
        }
        drop(current)
        return .gap
    }

    private var isClosed: Bool { lock.withLock { closed } }

    private func drop(_ old: ControlChannel) {
        lock.withLock { if channel === old { channel = nil } }
        old.hangUp()
    }

    /// The open connection, or a new one. The first is made once; after a gap, a resuming link
    /// tries until the agent answers (at most `patience` seconds, nil: as long as it takes),
    /// sending the set-up requests again on the new connection.
    private func connection(patience: TimeInterval?) async throws -> ControlChannel {
        let (open, isFirst, requests) = lock.withLock { (channel, !connectedOnce, setUp) }
        if let open { return open }
        if isClosed { throw MonitorError(code: "disconnected", message: "the connection to the agent was closed") }
        if isFirst {
            let fresh = try ControlChannel.open(stateDirectory: stateDirectory, for: purpose)
            lock.withLock {
                channel = fresh
                connectedOnce = true
            }
            return fresh
        }
        let deadline = patience.map { Date().addingTimeInterval($0) }
        var pause = AgentLink.firstRetry
        while true {
            do {
                let fresh = try ControlChannel.open(stateDirectory: stateDirectory, for: purpose)
                do {
                    for request in requests { _ = try await fresh.request(request) }
                } catch {
                    fresh.hangUp()
                    throw error
                }
                lock.withLock {
                    channel = fresh
                    resumptions += 1
                }
                return fresh
            } catch let error as MonitorError where AgentLink.isTransient(error) && !isClosed {
                // Not up yet, or its predecessor's hold on a monitor not yet released.
                if let deadline, Date() >= deadline { throw error }
                try await Task.sleep(for: .seconds(pause))
                pause = min(pause * 2, AgentLink.longestRetry)
            }
        }
    }

    /// The failures a restarting agent gives before it is ready again.
    static func isTransient(_ error: MonitorError) -> Bool {
        error.code == "disconnected" || error.code == "in_use" || error.code == "unavailable"
    }
}
