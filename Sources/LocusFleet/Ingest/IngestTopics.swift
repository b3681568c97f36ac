/// The topics `locus-fleet ingest` subscribes to, and what a received topic is. The gateways
/// publish under `<prefix>` ([uplink] topic_prefix, default `locus/<gateway>`); the ingest's
/// prefix is a filter with one `+` where the gateway id stands (default `locus/+`):
///
///     <prefix>/event/#     events              (records)
///     <prefix>/gpio/+      GPIO changes        (records)
///     <prefix>/visit       visits              (records)
///     <prefix>/config      configurations applied or refused (records; docs/remote.md)
///     <prefix>/command     commands' results   (records)
///     <prefix>/status      online / offline    (the gateways table)
///
/// With a share group each record filter is `$share/<group>/<filter>`: the broker hands each
/// message to one of the group's workers. The status filter is never shared: a share group's
/// members have a queue each at the broker, so a gateway's `online` queued behind one worker's
/// backlog could be stored after its `offline` taken by another. Every worker gets every status,
/// in order, and the newest received wins (`RecordBatch.updateStatus`).
struct IngestTopics: Equatable {
    enum Topic: Equatable {
        /// The gateway is the topic's level at the prefix's `+` (nil for a prefix without one).
        case record(FleetRecord.Kind, gateway: String?)
        /// The gateway is the topic's level at the prefix's `+`.
        case status(gateway: String)
        case foreign
    }

    static let defaultPrefix = "locus/+"

    let prefix: [Substring]
    let share: String?

    init(prefix: String, share: String?) throws(FleetError) {
        let levels = prefix.split(separator: "/", omittingEmptySubsequences: false)
        guard !prefix.isEmpty, levels.allSatisfy({ !$0.isEmpty }) else {
            throw FleetError("--prefix '\(prefix)' has an empty level (write it like locus/+)")
        }
        guard !prefix.contains("#"), levels.allSatisfy({ $0 == "+" || !$0.contains("+") }), levels.filter({ $0 == "+" }).count <= 1 else {
            throw FleetError("--prefix '\(prefix)' may hold one '+' as a whole level (the gateway id) and no '#'")
        }
        guard !prefix.hasPrefix("$") else { throw FleetError("--prefix '\(prefix)' starts with '$' (a broker's own topics)") }
        if let share {
            guard !share.isEmpty, !share.contains(where: { $0 == "/" || $0 == "+" || $0 == "#" }) else {
                throw FleetError("--share '\(share)' is a group name: no '/', '+' or '#'")
            }
        }
        self.prefix = levels
        self.share = share
    }

    static let suffixes = ["/event/#", "/gpio/+", "/visit", "/config", "/command", "/status"]

    var filters: [String] {
        let head = share.map { "$share/\($0)/" } ?? ""
        let joined = prefix.joined(separator: "/")
        return Self.suffixes.map { ($0 == "/status" ? "" : head) + joined + $0 }
    }

    /// The topic's levels are compared as bytes (a topic is UTF-8 and the levels are split at
    /// `/`, so no Unicode rule applies): the ingest classifies every message it receives.
    func classify(_ topic: String) -> Topic {
        let levels = topic.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard levels.count > prefix.count else { return .foreign }
        for (level, pattern) in zip(levels, prefix) where pattern != "+" && !level.elementsEqual(pattern.utf8) { return .foreign }
        let rest = levels.count - prefix.count
        let gateway = prefix.firstIndex(of: "+").map { String(decoding: levels[$0], as: UTF8.self) }
        let kind = levels[prefix.count]
        func named(_ name: StaticString) -> Bool {
            kind.elementsEqual(UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        }
        if named("event") { return .record(.event, gateway: gateway) }
        if named("gpio") { return rest == 2 ? .record(.gpio, gateway: gateway) : .foreign }
        guard rest == 1 else { return .foreign }
        if named("visit") { return .record(.visit, gateway: gateway) }
        if named("config") { return .record(.config, gateway: gateway) }
        if named("command") { return .record(.command, gateway: gateway) }
        if named("status") { return .status(gateway: gateway ?? String(decoding: levels[prefix.count - 1], as: UTF8.self)) }
        return .foreign
    }
}
