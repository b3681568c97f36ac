/// `[remote]`: what the fleet may change on this gateway (docs/remote.md). Without the section
/// the gateway takes nothing from the fleet: its uplink does not even subscribe.
extension SiteConfig {
    public struct Remote: Equatable {
        /// The top-level keys of a site file a fleet configuration may replace. The others are
        /// the site's own (board, state, log, access, uplink, remote, health, capacity).
        public static let settableKeys = ["monitor", "action", "privacy", "updates", "geocoding"]
        /// Of those, the keys the agent applies by restarting itself (a SIGHUP does not apply
        /// them: the receiver's plan and the place index are set up at start).
        public static let restartKeys = ["updates", "geocoding"]
        public static let defaultMaximumBytes = 64 << 10
        public static let largestMaximumBytes = 256 << 10

        /// The fleet's public key (PEM), as written (relative to the site file's directory).
        public var keyFile: String
        /// The keys a configuration may replace (a subset of `settableKeys`).
        public var settable: [String] = []
        /// The commands the gateway takes.
        public var commands: [FleetCommand.Action] = []
        public var maximumBytes = Remote.defaultMaximumBytes

        public init(keyFile: String) { self.keyFile = keyFile }
    }
}

extension SiteSchema {
    static func readRemote(_ section: inout TableReader) -> SiteConfig.Remote? {
        let key = section.string("key", required: true)
        var remote = SiteConfig.Remote(keyFile: key ?? "")
        if key?.isEmpty == true { section.report.fail(at: section.offset(of: "key"), "'\(section.label("key"))' must name the fleet's public key file") }
        if let words = section.strings("settable") {
            for (index, word) in words.enumerated() {
                guard SiteConfig.Remote.settableKeys.contains(word) else {
                    section.report.fail(at: section.offset(of: "settable", element: index), unlisted(word, "settable", SiteConfig.Remote.settableKeys, section))
                    continue
                }
                if !remote.settable.contains(word) { remote.settable.append(word) }
            }
        }
        if let words = section.strings("commands") {
            let names = FleetCommand.Action.allCases.map { $0.name }
            for (index, word) in words.enumerated() {
                guard let action = FleetCommand.Action.allCases.first(where: { $0.name == word }) else {
                    section.report.fail(at: section.offset(of: "commands", element: index), unlisted(word, "commands", names, section))
                    continue
                }
                if !remote.commands.contains(action) { remote.commands.append(action) }
            }
        }
        if let size = section.size("max_size", in: 1024...Int64(SiteConfig.Remote.largestMaximumBytes)) { remote.maximumBytes = Int(size) }
        return key == nil ? nil : remote
    }

    private static func unlisted(_ word: String, _ key: String, _ names: [String], _ section: TableReader) -> String {
        var message = "'\(section.label(key))' has \"\(word)\", which is not one of: \(names.joined(separator: " | "))"
        if let suggestion = Spelling.closest(to: word, among: names) { message += " (did you mean \"\(suggestion)\"?)" }
        if key == "settable" && ["capacity", "uplink", "log", "access", "remote", "health", "board", "state_dir"].contains(word) {
            message += "; '\(word)' is the site's own"
        }
        return message
    }
}
