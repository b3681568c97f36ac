import LocusCore

/// An area as the condition of a fleet command (docs/presence.md, "Rules"): when a tag enters or
/// leaves an area, or when an area gets its first tag or loses its last, `presence run` signs and
/// sends a command to a gateway, as `locus-fleet command send` would.
public struct PresenceRule: Sendable {
    public enum When: String, Sendable, CaseIterable {
        /// A (matching) tag's area becomes this one.
        case enters
        /// A (matching) tag's area stops being this one, or it goes away from it.
        case leaves
        /// The area's first (matching) tag arrives: it had none.
        case occupied
        /// The area's last (matching) tag leaves.
        case vacated
    }

    /// Where the rule is in the plan file, for what `presence run` prints ("rule 2 (gate light)").
    public var number: Int
    public var name: String?
    public var when: When
    public var area: String
    /// `phone:NAME` or `UUID/MAJOR/MINOR`; nil for every tag.
    public var tag: String?
    public var gateway: String
    /// The action and its `[command]` keys, as `command send` builds them from its arguments.
    public var action: String
    public var keys: [(String, RemoteMessage.Value)]
    /// The command as written (`pulse gate 2s`), for what is printed.
    public var command: String
    public var expiresMs: Int64

    public var label: String { "rule \(number)" + (name.map { " (\($0))" } ?? "") }

    func matches(_ tag: String) -> Bool { self.tag == nil || self.tag == tag }
}

/// The rules' decisions over `PresenceService`'s changes. It keeps each tag's area as the changes
/// give it, to know whether an area had other (matching) tags: a rule fires once a change, on
/// the change itself, never again while nothing changes. A restarted `presence run` starts with
/// every area empty, so the tags it places again count as arriving.
public struct PresenceRuleBook: Sendable {
    public let rules: [PresenceRule]
    /// Each tag's area as of the last change.
    private var areas: [String: String] = [:]

    public init(_ rules: [PresenceRule]) { self.rules = rules }

    /// The rules a round's changes fire, in change order and then rule order.
    public mutating func fire(_ changes: [PresenceService.Change]) -> [(rule: PresenceRule, change: PresenceService.Change)] {
        var fired: [(rule: PresenceRule, change: PresenceService.Change)] = []
        for change in changes {
            let from = areas[change.tag], to = change.away ? nil : change.to
            areas[change.tag] = to
            guard from != to else { continue }
            for rule in rules where rule.matches(change.tag) {
                let edge: Bool
                switch rule.when {
                case .enters: edge = to == rule.area
                case .leaves: edge = from == rule.area
                case .occupied: edge = to == rule.area && !hasOthers(in: rule, besides: change.tag)
                case .vacated: edge = from == rule.area && !hasOthers(in: rule, besides: change.tag)
                }
                if edge { fired.append((rule, change)) }
            }
        }
        return fired
    }

    /// Whether a tag other than `tag` that the rule names is in its area (only the occupancy
    /// rules ask, so only they scan the tags).
    private func hasOthers(in rule: PresenceRule, besides tag: String) -> Bool {
        areas.contains { $0.key != tag && $0.value == rule.area && rule.matches($0.key) }
    }

    /// The tags in `area` now, as the changes say.
    public func occupants(_ area: String) -> [String] { areas.filter { $0.value == area }.map(\.key).sorted() }
}
