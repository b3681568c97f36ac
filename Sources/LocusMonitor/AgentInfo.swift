import Foundation

/// What the running agent says to this program about itself: its monitors, what this program
/// may do (its grants: docs/access.md), and how many more conditions the site's `[capacity]`
/// leaves room for. Read through `read.sock` (`hello` and `status`).
///
///     let agent = try await AgentInfo.ask()
///     if agent.conditionsLeft < 10 { ... }
///     if !agent.grants.contains("change") { ... }   // cannot add conditions
public struct AgentInfo: Sendable, Equatable {
    /// The monitors' names, from the site file and from programs.
    public var monitors: [String]
    /// This program's grants: `read`, `positions`, `change` (docs/access.md).
    public var grants: [String]
    /// Conditions of all monitors, and the site's `[capacity] conditions`.
    public var conditions: Int
    public var capacity: Int
    /// Whether the agent persists monitors across restarts.
    public var persistence: Bool

    public var conditionsLeft: Int { max(0, capacity - conditions) }

    public static func ask(stateDirectory: String = Monitor.defaultStateDirectory) async throws -> AgentInfo {
        let channel = try ControlChannel.open(stateDirectory: stateDirectory, for: .reading)
        defer { channel.hangUp() }
        let hello = try await channel.request(["op": "hello"])
        let status = try await channel.request(["op": "status"])
        let engine = status["engine"] as? [String: Any] ?? [:]
        return AgentInfo(monitors: hello["monitors"] as? [String] ?? [], grants: hello["access"] as? [String] ?? [],
                         conditions: engine["conditions"] as? Int ?? 0, capacity: engine["capacity"] as? Int ?? 0,
                         persistence: hello["persistence"] as? Bool ?? false)
    }
}

extension AgentInfo {
    /// This program's grants now, then each time a reload of the site changes them (a SIGHUP
    /// with a new `[access]` or `[privacy]`), and after an agent restart if they differ. The
    /// agent also ends, with `permission_denied`, a stream the program may no longer have.
    ///
    ///     for try await grants in AgentInfo.grantChanges() where !grants.contains("positions") { ... }
    public static func grantChanges(stateDirectory: String = Monitor.defaultStateDirectory) -> GrantChanges {
        GrantChanges(stateDirectory: stateDirectory)
    }

    public struct GrantChanges: AsyncSequence, Sendable {
        let stateDirectory: String

        public func makeAsyncIterator() -> Iterator {
            Iterator(link: AgentLink(stateDirectory: stateDirectory, purpose: .reading, resumes: true))
        }

        public struct Iterator: AsyncIteratorProtocol {
            let link: AgentLink
            var current: [String]? = nil

            public mutating func next() async throws -> [String]? {
                guard let current else {
                    let hello = try await link.setUpRequest(["op": "hello"])
                    let grants = hello["access"] as? [String] ?? []
                    self.current = grants
                    return grants
                }
                while true {
                    var grants: [String]? = nil
                    switch try await link.next() {
                    case .message(let message):
                        grants = message["grants"] as? [String]
                    case .gap:
                        // A new agent: its `hello` (the set-up request, sent again) has been
                        // answered on the new connection; ask once more for the answer.
                        grants = try await link.request(["op": "hello"])["access"] as? [String]
                    }
                    if let grants, grants != current {
                        self.current = grants
                        return grants
                    }
                }
            }
        }
    }
}
