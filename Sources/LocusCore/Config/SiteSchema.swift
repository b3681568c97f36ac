/// Reads the site file's tables into `SiteConfig`, reporting every problem it finds.
enum SiteSchema {
    /// The site file's keys at the top, in the order they are read.
    static let topLevelKeys = ["board", "state_dir", "capacity", "log", "updates", "privacy", "access", "uplink", "remote", "geocoding",
                               "health", "bluetooth", "phones", "monitor", "action"]

    /// `fleet`: a configuration from the fleet (docs/remote.md), whose keys replace the site
    /// file's whole; each must be one `settable` lists.
    static func read(_ report: ConfigReport, fleet: SiteConfig.FleetFragment? = nil) -> SiteConfig? {
        var root = TableReader(report.document.root, report: report, path: "")
        var overlay = fleet.map { TableReader($0.report.document.root, report: $0.report, path: "") }
        if let fleet { checkSettable(fleet, &overlay!) }
        /// Whether the fleet's configuration has `key` (the site file's is then not read).
        func fromFleet(_ key: String) -> Bool {
            guard overlay?.has(key) == true else { return false }
            root.skip(key)
            return true
        }
        var site = SiteConfig(board: root.string("board", required: true) ?? "")
        if let directory = root.string("state_dir") {
            if directory.isEmpty { report.fail(at: root.offset(of: "state_dir"), "'state_dir' must not be empty") }
            site.stateDirectory = directory
        }
        if var section = root.table("capacity") {
            readCapacity(&section, into: &site.capacity)
            section.finish()
        }
        if var section = root.table("log") {
            readLog(&section, into: &site.log)
            section.finish()
        }
        if var section = fromFleet("updates") ? overlay!.table("updates") : root.table("updates") {
            readUpdates(&section, into: &site.updates)
            section.finish()
        }
        if var section = fromFleet("privacy") ? overlay!.table("privacy") : root.table("privacy") {
            site.fixPrivacy = section.choice("fixes", [("full", SiteConfig.FixPrivacy.full), ("coarse", .coarse), ("none", .none)]) ?? .full
            section.finish()
        }
        if var section = root.table("access") {
            site.access = readAccess(&section)
            section.finish()
        }
        if var section = root.table("uplink") {
            site.uplink = readUplink(&section)
            section.finish()
        }
        if var section = root.table("remote") {
            site.remote = readRemote(&section)
            if site.uplink == nil && root.has("uplink") == false {
                report.fail(at: section.offset, "[remote] needs [uplink]: the fleet's configurations and commands come through its broker")
            }
            section.finish()
        }
        if var section = fromFleet("geocoding") ? overlay!.table("geocoding") : root.table("geocoding") {
            site.geocoding = readGeocoding(&section)
            section.finish()
        }
        readRadios(&root, into: &site)
        if var section = fromFleet("monitor") ? overlay!.table("monitor") : root.table("monitor") {
            site.monitors = readMonitors(&section)
            section.finish()
        }
        for var reader in fromFleet("action") ? overlay!.tables("action") : root.tables("action") {
            if let action = readAction(&reader, monitors: site.monitors) { site.actions.append(action) }
            reader.finish()
        }
        root.finish()
        overlay?.finish()
        checkCapacities(site, at: root.offset(of: "monitor"), report)
        return site
    }

    /// The radios' tables: `[health]` (self-healing), `[bluetooth]` (the gateway's own beacon)
    /// and `[phones]`.
    static func readRadios(_ root: inout TableReader, into site: inout SiteConfig) {
        if var section = root.table("health") {
            readHealth(&section, into: &site.health)
            section.finish()
        }
        if var section = root.table("bluetooth") {
            site.advertising = readBluetooth(&section)
            section.finish()
        }
        readPhones(&root, into: &site)
    }

    /// `[phones] keys = "FILE"`: the phones file (`PhoneKeys`), read when the site is loaded.
    private static func readPhones(_ root: inout TableReader, into site: inout SiteConfig) {
        guard var section = root.table("phones") else { return }
        defer { section.finish() }
        guard let keys = section.string("keys", required: true) else { return }
        if keys.isEmpty { section.report.fail(at: section.offset(of: "keys"), "'phones.keys' must name a file") }
        site.phones = SiteConfig.Phones(keysFile: keys, location: section.report.document.location(of: section.offset(of: "keys")))
    }

    /// The monitors' conditions and shapes' vertices within `[capacity]`.
    private static func checkCapacities(_ site: SiteConfig, at offset: SourceOffset, _ report: ConfigReport) {
        if site.conditionCount > site.capacity.conditions {
            report.fail(at: offset, "\(site.conditionCount) conditions exceed capacity.conditions = \(site.capacity.conditions); raise the capacity or remove conditions")
        }
        if site.vertexCount > site.capacity.vertices {
            report.fail(at: offset, "the polygons and corridors have \(site.vertexCount) vertices, more than capacity.vertices = \(site.capacity.vertices); raise it (120 bytes a vertex)")
        }
    }

    private static func readHealth(_ section: inout TableReader, into health: inout SiteConfig.Health) {
        if let silence = section.duration("gnss_silence", in: 0...3_600_000) {
            if silence > 0 && silence < 2_000 {
                section.report.fail(at: section.offset(of: "gnss_silence"), "'health.gnss_silence' must be \"0s\" (off) or at least 2s")
            }
            health.gnssSilenceMs = silence
        }
        if let silence = section.duration("ble_silence", in: 0...86_400_000) {
            if silence > 0 && silence < 10_000 {
                section.report.fail(at: section.offset(of: "ble_silence"), "'health.ble_silence' must be \"0s\" (off) or at least 10s")
            }
            health.bleSilenceMs = silence
        }
        if let settle = section.duration("settle", in: 1_000...600_000) { health.settleMs = settle }
        if let rounds = section.integer("rounds", in: 1...10) { health.rounds = Int(rounds) }
    }

    /// `[bluetooth]`: the gateway's own iBeacon (`advertise = "UUID/MAJOR/MINOR"`, its measured
    /// power and interval). The power and interval alone, without `advertise`, are refused: they
    /// would silently do nothing.
    private static func readBluetooth(_ section: inout TableReader) -> SiteConfig.Advertising? {
        let power = section.integer("advertise_power", in: -127...20) ?? Int64(BeaconAdvertisement.defaultMeasuredPower)
        let intervalMs = section.duration("advertise_interval", in: 100...10_240) ?? 1_000
        guard let text = section.string("advertise") else {
            if section.has("advertise_power") || section.has("advertise_interval") {
                section.report.fail(at: section.offset, "[bluetooth] advertise_power and advertise_interval need 'advertise' (\"UUID/MAJOR/MINOR\")")
            }
            return nil
        }
        // The interval is in range here (100 ms to 10.24 s), so only the text can be refused.
        guard let beacon = BeaconAdvertisement(text, measuredPower: Int8(power), intervalUnits: ScanSettings.units(ms: Int(intervalMs))) else {
            section.report.fail(at: section.offset(of: "advertise"), "'bluetooth.advertise' must be \"UUID/MAJOR/MINOR\" (major and minor 0 to 65535), got \"" + text + "\"")
            return nil
        }
        return SiteConfig.Advertising(beacon: beacon, location: section.report.document.location(of: section.offset(of: "advertise")))
    }

    /// The fleet's `[fleet]` is its own; every other key must be settable here, or it is refused
    /// (and not read). A key no site file has is left to `finish`, which names it.
    private static func checkSettable(_ fleet: SiteConfig.FleetFragment, _ overlay: inout TableReader) {
        overlay.skip("fleet")
        // Known before any is read, so that a misspelt key is told the settable one it resembles.
        for key in fleet.settable { overlay.skip(key) }
        for entry in overlay.table.entries where entry.key != "fleet" && topLevelKeys.contains(entry.key) && !fleet.settable.contains(entry.key) {
            overlay.skip(entry.key)
            let allowed = fleet.settable.isEmpty ? "nothing: [remote] settable is empty" : "only \(fleet.settable.joined(separator: ", ")) ([remote] settable)"
            fleet.report.fail(at: entry.keyOffset, "'\(entry.key)' cannot be set by the fleet on this gateway: it may set \(allowed)")
        }
    }

    private static func readCapacity(_ section: inout TableReader, into capacity: inout SiteConfig.Capacity) {
        if let value = section.integer("conditions", in: 1...1_000_000) { capacity.conditions = Int(value) }
        if let value = section.integer("events", in: 1...1_000_000) { capacity.events = Int(value) }
        if let value = section.integer("vertices", in: 0...Int64(MonitorEngine.Capacity.maximumVertices)) { capacity.vertices = Int(value) }
        if let value = section.integer("phones", in: 0...Int64(MonitorEngine.Capacity.maximumPhones)) { capacity.phones = Int(value) }
        // The poll set holds 64 descriptors: the devices, timers and listener take a few.
        if let value = section.integer("subscribers", in: 0...48) { capacity.subscribers = Int(value) }
    }

    private static func readLog(_ section: inout TableReader, into log: inout SiteConfig.Log) {
        if let value = section.size("segment_size", in: (64 << 10)...(1 << 30)) { log.segmentSizeBytes = value }
        if let value = section.size("retain", in: (64 << 10)...(1 << 40)) { log.retainBytes = value }
        if log.retainBytes < log.segmentSizeBytes {
            section.report.fail(at: section.offset(of: "retain"), "'log.retain' must be at least one segment ('log.segment_size')")
        }
        enum Sync { case everyEvent, interval }
        let sync = section.choice("sync", [("every-event", Sync.everyEvent), ("interval", .interval)]) ?? .everyEvent
        let interval = section.duration("sync_interval", in: 1...60_000)
        switch sync {
        case .everyEvent:
            if interval != nil {
                section.report.fail(at: section.offset(of: "sync_interval"), "'log.sync_interval' only applies with sync = \"interval\"")
            }
            log.sync = .everyEvent
        case .interval:
            log.sync = .interval(milliseconds: interval ?? 1_000)
        }
        if let interval = section.duration("fix_interval", in: 0...86_400_000) { log.fixIntervalMs = interval }
    }

    private static func readUpdates(_ section: inout TableReader, into updates: inout SiteConfig.Updates) {
        if let preset = section.choice("preset", LivePreset.names) { updates.preset = preset }
        if let tier = section.choice("accuracy", AccuracyTier.names) { updates.accuracy = tier }
        if var batch = section.table("batch") {
            if let count = batch.integer("count", in: 1...4096) { updates.batchCount = Int(count) }
            if let age = batch.duration("age", in: 0...86_400_000) { updates.batchAgeMs = age }
            batch.finish()
        }
        if let filter = section.number("distance_filter", in: 0...100_000) { updates.distanceFilterM = filter }
        if let significant = section.boolean("significant_change") { updates.significantChange = significant }
        if let minimum = section.duration("visit_minimum", in: 0...86_400_000) { updates.visitMinimumMs = minimum }
        if let window = section.duration("stationary_window", in: 1_000...86_400_000) { updates.stationaryWindowMs = window }
        if let input = section.string("motion_input") {
            updates.motionInput = input
            updates.motionInputLocation = section.report.document.location(of: section.offset(of: "motion_input"))
        }
        updates.startSocket = startSocket(&section)
    }

    /// A `start_socket` key (a monitor's, `[updates]`'s): a Unix socket path, checked for length.
    private static func startSocket(_ reader: inout TableReader) -> String? {
        guard let path = reader.string("start_socket") else { return nil }
        guard !path.isEmpty && path.utf8.count <= 107 else {
            reader.report.fail(at: reader.offset(of: "start_socket"), "'\(reader.label("start_socket"))' must be a Unix socket path of 1...107 bytes")
            return nil
        }
        return path
    }

    private static func readMonitors(_ section: inout TableReader) -> [MonitorConfig] {
        var monitors: [MonitorConfig] = []
        for (name, offset, var reader) in section.namedTables() {
            if !Identifier.isValid(name) {
                reader.report.fail(at: offset, "monitor name '\(name)' must be 1...\(Identifier.maximumLength) letters, digits, '-' or '_'")
            }
            let socket = startSocket(&reader)
            var conditions: [ConditionConfig] = []
            var positions: [String: Int] = [:]
            for var entry in reader.tables("condition") {
                if let condition = readCondition(&entry) {
                    if let first = positions[condition.identifier] {
                        reader.report.fail(at: entry.offset, "condition id '\(condition.identifier)' appears twice in monitor '\(name)' (first at line \(conditions[first].location.line))")
                    } else {
                        positions[condition.identifier] = conditions.count
                        conditions.append(condition)
                    }
                }
                entry.finish()
            }
            reader.finish()
            monitors.append(MonitorConfig(name: name, conditions: conditions, startSocket: socket))
        }
        return monitors
    }

    /// `[access]`: `read`, `positions`, `change` (group names) and `read_socket` (grant words).
    private static func readAccess(_ section: inout TableReader) -> SiteConfig.Access {
        var access = SiteConfig.Access()
        access.read = readGroups(&section, "read")
        access.positions = readGroups(&section, "positions")
        access.change = readGroups(&section, "change")
        if let words = section.strings("read_socket") {
            var grants = AccessGrants()
            for (index, word) in words.enumerated() {
                let offset = section.offset(of: "read_socket", element: index)
                if word == "change" {
                    section.report.fail(at: offset, "'\(section.label("read_socket"))' cannot give 'change' to everyone who reaches read.sock; name a group in 'change' instead")
                } else if let grant = AccessGrants.names.first(where: { $0.0 == word })?.1 {
                    grants.insert(grant)
                } else {
                    var message = "'\(section.label("read_socket"))' has \"\(word)\", which is not one of: read | positions"
                    if let suggestion = Spelling.closest(to: word, among: ["read", "positions"]) { message += " (did you mean \"\(suggestion)\"?)" }
                    section.report.fail(at: offset, message)
                }
            }
            access.readSocket = grants
        }
        return access
    }

    /// The most nodes `broker` may name.
    static let maximumBrokers = 16

    /// `[uplink]`: the broker, who the gateway is, TLS files, credentials, what is published and
    /// how fast. nil when `broker` is missing or wrong (reported).
    private static func readUplink(_ section: inout TableReader) -> SiteConfig.Uplink? {
        let report = section.report
        let uplink = readBrokers(&section).map(SiteConfig.Uplink.init(brokers:))
        var read = uplink ?? SiteConfig.Uplink(broker: BrokerAddress(tls: true, host: "localhost", address: nil, port: BrokerAddress.tlsPort))
        if let gateway = section.string("gateway") {
            if !isGatewayName(gateway) {
                report.fail(at: section.offset(of: "gateway"), "'\(section.label("gateway"))' = \"\(gateway)\": a gateway id is 1...64 letters, digits, '-', '_' or '.'")
            }
            read.gateway = gateway
        }
        if let clientID = section.string("client_id") {
            if clientID.isEmpty || clientID.utf8.count > 128 || !clientID.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) {
                report.fail(at: section.offset(of: "client_id"), "'\(section.label("client_id"))' must be 1...128 printable ASCII characters without spaces")
            }
            read.clientID = clientID
        }
        if let prefix = section.string("topic_prefix") {
            if let problem = topicPrefixProblem(prefix) { report.fail(at: section.offset(of: "topic_prefix"), "'\(section.label("topic_prefix"))' = \"\(prefix)\" \(problem)") }
            read.topicPrefix = prefix
        }
        // MQTT's keep-alive is a 16-bit count of seconds.
        if let keepAlive = section.duration("keepalive", in: 5_000...65_535_000) { read.keepAliveMs = keepAlive }
        readUplinkCredentials(&section, into: &read)
        if let words = section.strings("what") {
            var content = SiteConfig.Uplink.Content()
            for (index, word) in words.enumerated() {
                if let kind = SiteConfig.Uplink.Content.names.first(where: { $0.0 == word })?.1 {
                    content.insert(kind)
                } else {
                    var message = "'\(section.label("what"))' has \"\(word)\", which is not one of: events | gpio | visits | fixes | sightings | presence"
                    if let suggestion = Spelling.closest(to: word, among: SiteConfig.Uplink.Content.names.map { $0.0 }) { message += " (did you mean \"\(suggestion)\"?)" }
                    report.fail(at: section.offset(of: "what", element: index), message)
                }
            }
            read.content = content
        }
        // At least 2: an event is two messages (the event and its retained state).
        if let inflight = section.integer("max_inflight", in: 2...1024) { read.maxInflight = Int(inflight) }
        if let interval = section.duration("fix_interval", in: 0...86_400_000) { read.fixIntervalMs = interval }
        if let interval = section.duration("sighting_interval", in: 0...86_400_000) { read.sightingIntervalMs = interval }
        if let interval = section.duration("presence_interval", in: 1_000...60_000) { read.presenceIntervalMs = interval }
        if let tags = section.integer("presence_tags", in: 1...Int64(UplinkJSON.presenceTagsMaximum)) { read.presenceTags = Int(tags) }
        if let homeAssistant = section.boolean("home_assistant") { read.homeAssistant = homeAssistant }
        return uplink == nil ? nil : read
    }

    /// `broker`: one address, or a clustered broker's nodes (all mqtts or all mqtt, none twice).
    /// nil when missing or wrong (reported).
    private static func readBrokers(_ section: inout TableReader) -> [BrokerAddress]? {
        let report = section.report
        guard let texts = section.oneOrMoreStrings("broker", required: true) else { return nil }
        let array = section.table.entry("broker").map { if case .array = $0.value { true } else { false } } ?? false
        if texts.count > maximumBrokers {
            report.fail(at: section.offset(of: "broker"), "'\(section.label("broker"))' names \(texts.count) nodes; at most \(maximumBrokers)")
            return nil
        }
        var brokers: [BrokerAddress] = []
        for (index, text) in texts.enumerated() {
            let offset = array ? section.offset(of: "broker", element: index) : section.offset(of: "broker")
            switch BrokerAddress.parse(text) {
            case .success(let broker):
                if let first = brokers.first, first.tls != broker.tls {
                    report.fail(at: offset, "'\(section.label("broker"))' mixes mqtts:// and mqtt://: a cluster's nodes share one TLS setting (and one set of TLS files)")
                } else if brokers.contains(where: { $0.host == broker.host && $0.port == broker.port }) {
                    report.fail(at: offset, "'\(section.label("broker"))' names \"\(text)\" twice")
                } else {
                    brokers.append(broker)
                }
            case .failure(let error): report.fail(at: offset, "'\(section.label("broker"))' = \"\(text)\" \(error.problem)")
            }
        }
        return brokers.count == texts.count ? brokers : nil
    }

    /// `[uplink]`'s TLS files and credentials: files only with mqtts, a certificate with its key,
    /// a password only in a file and only with a user name.
    private static func readUplinkCredentials(_ section: inout TableReader, into read: inout SiteConfig.Uplink) {
        let report = section.report
        read.caFile = uplinkFile(&section, "ca_file", tls: read.broker.tls)
        read.certFile = uplinkFile(&section, "cert_file", tls: read.broker.tls)
        read.keyFile = uplinkFile(&section, "key_file", tls: read.broker.tls)
        if (read.certFile == nil) != (read.keyFile == nil) {
            let present = read.certFile == nil ? "key_file" : "cert_file"
            report.fail(at: section.offset(of: present), "'\(section.label(present))' needs '\(section.label(present == "cert_file" ? "key_file" : "cert_file"))' too (mutual TLS takes the certificate and its key)")
        }
        if let username = section.string("username") {
            if username.isEmpty { report.fail(at: section.offset(of: "username"), "'\(section.label("username"))' must not be empty") }
            read.username = username
        }
        if let passwordFile = section.string("password_file") {
            if passwordFile.isEmpty { report.fail(at: section.offset(of: "password_file"), "'\(section.label("password_file"))' must name a file") }
            if read.username == nil {
                report.fail(at: section.offset(of: "password_file"), "'\(section.label("password_file"))' needs '\(section.label("username"))' (MQTT 3.1.1 sends no password without a user name)")
            }
            read.passwordFile = passwordFile
        }
        if section.has("password") {
            report.fail(at: section.offset(of: "password"), "'\(section.label("password"))': the password does not go in the site file; put it in a file readable by the locus user only and name it in 'password_file'")
            _ = section.string("password")
        }
    }

    /// A TLS file key: a path, and only with mqtts.
    private static func uplinkFile(_ section: inout TableReader, _ key: String, tls: Bool) -> String? {
        guard let path = section.string(key) else { return nil }
        if path.isEmpty { section.report.fail(at: section.offset(of: key), "'\(section.label(key))' must name a file") }
        if !tls { section.report.fail(at: section.offset(of: key), "'\(section.label(key))' is for TLS: the broker is mqtt:// (plain); write mqtts://") }
        return path
    }

    static func isGatewayName(_ text: String) -> Bool {
        let bytes = text.utf8
        guard !bytes.isEmpty, bytes.count <= 64 else { return false }
        return bytes.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x5F || $0 == 0x2D || $0 == 0x2E }
    }

    /// Why `prefix` cannot start the uplink's topics, or nil (MQTT 3.1.1 §4.7).
    static func topicPrefixProblem(_ prefix: String) -> String? {
        if prefix.isEmpty { return "is empty" }
        if prefix.utf8.count > 200 { return "is longer than 200 bytes" }
        if prefix.hasPrefix("$") { return "starts with '$', which brokers keep for themselves ($SYS)" }
        if prefix.hasSuffix("/") { return "ends with '/' (the uplink adds '/event/...' itself)" }
        if prefix.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") || $0 == 0 }) {
            return "has '+', '#' or NUL, which are not allowed in a topic name"
        }
        return nil
    }

    private static func readGroups(_ section: inout TableReader, _ key: String) -> [SiteConfig.Access.Group] {
        guard let names = section.strings(key) else { return [] }
        var groups: [SiteConfig.Access.Group] = []
        for (index, name) in names.enumerated() {
            let offset = section.offset(of: key, element: index)
            // POSIX portable names, as useradd and groupadd accept them.
            let valid = !name.isEmpty && name.utf8.count <= 32 && name.utf8.first != 0x2D && name.utf8.allSatisfy {
                ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F || $0 == 0x2D || $0 == 0x2E
            }
            if !valid {
                section.report.fail(at: offset, "'\(section.label(key))' has \"\(name)\", which is not a group name (1...32 letters, digits, '_', '-', '.')")
                continue
            }
            groups.append(SiteConfig.Access.Group(name: name, location: section.report.document.location(of: offset)))
        }
        return groups
    }

    private static let geofenceKeys = ["enter_margin", "exit_margin", "dwell", "accuracy_gate", "transit"]
    private static let beaconKeys = ["exit_timeout", "proximity"]

    private static func readCondition(_ entry: inout TableReader) -> ConditionConfig? {
        let report = entry.report
        let identifier = entry.string("id", required: true)
        if let identifier, !Identifier.isValid(identifier) {
            report.fail(at: entry.offset(of: "id"), "'\(entry.label("id"))' = \"\(identifier)\": a condition id must be 1...\(Identifier.maximumLength) letters, digits, '-' or '_'")
        }
        let assuming = entry.choice("assuming", [("satisfied", ConditionState.satisfied), ("unsatisfied", .unsatisfied), ("unknown", .unknown)]) ?? .unknown
        var kind: ConditionConfig.Kind? = nil
        var place: PlaceReference? = nil
        let shapes = ["polygon", "corridor"].filter { entry.has($0) }
        let circle = entry.table("circle")
        let beacon = entry.table("beacon")
        let phone = entry.has("phone") ? entry.string("phone") : nil
        switch (circle, beacon) {
        case _ where entry.has("phone"):
            if !shapes.isEmpty || circle != nil || beacon != nil {
                report.fail(at: entry.offset, "a condition is one of 'circle', 'beacon', 'phone', 'polygon' or 'corridor', not several")
            }
            if let phone, FixedName(phone) == nil {
                report.fail(at: entry.offset(of: "phone"), "'\(entry.label("phone"))' = \"\(phone)\": a phone's name must be 1...\(Identifier.maximumLength) letters, digits, '-' or '_'")
            }
            kind = phone.map { .phone(name: $0) }
            for key in geofenceKeys where entry.has(key) {
                report.fail(at: entry.offset(of: key), "'\(entry.label(key))' applies to circle conditions, but this one is a phone")
            }
        case _ where !shapes.isEmpty:
            if shapes.count > 1 || circle != nil || beacon != nil {
                report.fail(at: entry.offset, "a condition is one of 'circle', 'beacon', 'phone', 'polygon' or 'corridor', not several")
            }
            kind = shapes[0] == "polygon" ? readPolygon(&entry) : readCorridor(&entry)
            for key in beaconKeys where entry.has(key) {
                report.fail(at: entry.offset(of: key), "'\(entry.label(key))' applies to beacon conditions, but this one is a \(shapes[0])")
            }
        case (var circle?, nil):
            if let read = readCircle(&circle) { (kind, place) = read }
            circle.finish()
            for key in beaconKeys where entry.has(key) {
                report.fail(at: entry.offset(of: key), "'\(entry.label(key))' applies to beacon conditions, but this one is a circle")
            }
        case (nil, var beacon?):
            kind = readBeacon(&beacon)
            beacon.finish()
            for key in geofenceKeys where entry.has(key) {
                report.fail(at: entry.offset(of: key), "'\(entry.label(key))' applies to circle conditions, but this one is a beacon")
            }
        case (.some, .some):
            report.fail(at: entry.offset, "a condition is either a 'circle' or a 'beacon', not both")
        case (nil, nil):
            report.fail(at: entry.offset, "a condition needs 'circle = { lat, lon, radius }' (or { place, radius }), 'beacon = { uuid, major, minor }', 'phone = \"NAME\"', 'polygon = [[lat, lon], ...]' or 'corridor = { path = [[lat, lon], ...], width }'")
        }
        let enterMargin = entry.number("enter_margin", in: 0...100_000) ?? ConditionConfig.defaultEnterMarginM
        let exitMargin = entry.number("exit_margin", in: 0...100_000) ?? ConditionConfig.defaultExitMarginM
        let dwell = entry.duration("dwell", in: 0...86_400_000) ?? ConditionConfig.defaultDwellMs
        let accuracyGate = entry.boolean("accuracy_gate") ?? true
        let transit = entry.boolean("transit") ?? false
        let exitTimeout = entry.duration("exit_timeout", in: 1...86_400_000)
        let proximity = entry.choice("proximity", [("immediate", ProximityRequirement.immediate), ("near", .near), ("far", .far)])
        guard let identifier, let kind else { return nil }
        return ConditionConfig(
            identifier: identifier, kind: kind, assuming: assuming, enterMarginM: enterMargin, exitMarginM: exitMargin,
            dwellMs: dwell, accuracyGate: accuracyGate, transit: transit, exitTimeoutMs: exitTimeout, proximity: proximity,
            location: report.document.location(of: entry.offset), place: place)
    }

    /// `polygon = [[lat, lon], ...]`: a simple ring (docs/shapes.md), refused at the vertex or
    /// edge at fault.
    private static func readPolygon(_ entry: inout TableReader) -> ConditionConfig.Kind? {
        guard let ring = entry.positions("polygon") else { return nil }
        do throws(ShapeError) {
            return .polygon(try GeoPolygon(latitudes: ring.latitudes, longitudes: ring.longitudes))
        } catch {
            let (element, message) = ShapeMessages.polygon(error)
            entry.report.fail(at: element.map { entry.offset(of: "polygon", element: $0) } ?? entry.offset(of: "polygon"),
                              "'\(entry.label("polygon"))': \(message)")
            return nil
        }
    }

    /// `corridor = { path = [[lat, lon], ...], width = 30 }` (width in metres, or "30m").
    private static func readCorridor(_ entry: inout TableReader) -> ConditionConfig.Kind? {
        guard var corridor = entry.table("corridor", required: true) else { return nil }
        defer { corridor.finish() }
        let path = corridor.positions("path", required: true)
        let width = corridor.distance("width", in: 0...1_000_000, required: true)
        if let width, width <= 0 {
            corridor.report.fail(at: corridor.offset(of: "width"), "'\(corridor.label("width"))' must be greater than 0 metres")
            return nil
        }
        guard let path, let width else { return nil }
        do throws(CorridorError) {
            return .corridor(try GeoCorridor(latitudes: path.latitudes, longitudes: path.longitudes, widthM: width))
        } catch {
            let (element, message) = ShapeMessages.corridor(error)
            corridor.report.fail(at: element.map { corridor.offset(of: "path", element: $0) } ?? corridor.offset(of: "path"),
                                 "'\(corridor.label("path"))': \(message)")
            return nil
        }
    }

    /// `{ lat, lon, radius }`, or `{ place, radius }`: a place's name, found in the place index
    /// when the configuration is loaded (the centre is NaN until then).
    private static func readCircle(_ circle: inout TableReader) -> (ConditionConfig.Kind, PlaceReference?)? {
        if circle.has("place") {
            let name = circle.string("place")
            for key in ["lat", "lon"] where circle.has(key) {
                circle.report.fail(at: circle.offset(of: key), "'\(circle.label(key))': a circle is centred on 'lat' and 'lon' or on a 'place', not both")
                _ = circle.number(key, in: -180...180)
            }
            let radius = readRadius(&circle)
            if let name, name.utf8.allSatisfy({ $0 == 0x20 }) || name.utf8.count > PlaceNameSearch.maximumQueryBytes {
                circle.report.fail(at: circle.offset(of: "place"), "'\(circle.label("place"))' must name a place (1...\(PlaceNameSearch.maximumQueryBytes) bytes)")
                return nil
            }
            guard let radius, let name else { return nil }
            let reference = PlaceReference(name: name, location: circle.report.document.location(of: circle.offset(of: "place")))
            return (.circle(latitude: .nan, longitude: .nan, radiusM: radius), reference)
        }
        let latitude = circle.number("lat", in: -90...90, required: true)
        let longitude = circle.number("lon", in: -180...180, required: true)
        guard let radius = readRadius(&circle), let latitude, let longitude else { return nil }
        return (.circle(latitude: latitude, longitude: longitude, radiusM: radius), nil)
    }

    private static func readRadius(_ circle: inout TableReader) -> Double? {
        let radius = circle.number("radius", in: 0...10_000_000, required: true)
        if let radius, radius <= 0 {
            circle.report.fail(at: circle.offset(of: "radius"), "'\(circle.label("radius"))' must be greater than 0 metres")
            return nil
        }
        return radius
    }

    /// `[geocoding]`: the place index, whether events are annotated, how far and which places.
    private static func readGeocoding(_ section: inout TableReader) -> SiteConfig.Geocoding {
        var geocoding = SiteConfig.Geocoding()
        geocoding.location = section.report.document.location(of: section.offset)
        if let index = section.string("index") {
            if index.isEmpty { section.report.fail(at: section.offset(of: "index"), "'\(section.label("index"))' must name a file") }
            geocoding.index = index
            geocoding.location = section.report.document.location(of: section.offset(of: "index"))
        }
        if let annotate = section.boolean("annotate") { geocoding.annotate = annotate }
        // Half a meridian (20,004 km) is as far as two points can be.
        if let distance = section.distance("max_distance", in: 0...20_004_000) { geocoding.maximumDistanceM = distance }
        if let scope = section.choice("scope", [("any", PlaceScope.any), ("populated", .populated), ("site", .site)]) {
            geocoding.scope = scope
        }
        return geocoding
    }

    private static func readBeacon(_ beacon: inout TableReader) -> ConditionConfig.Kind? {
        var uuid: BeaconUUID? = nil
        if let text = beacon.string("uuid", required: true) {
            uuid = BeaconUUID(text)
            if uuid == nil {
                beacon.report.fail(at: beacon.offset(of: "uuid"), "'\(beacon.label("uuid"))' = \"\(text)\" is not a UUID (8-4-4-4-12 hexadecimal digits)")
            }
        }
        let major = beacon.integer("major", in: 0...65535)
        let minor = beacon.integer("minor", in: 0...65535)
        if minor != nil && major == nil && !beacon.has("major") {
            beacon.report.fail(at: beacon.offset(of: "minor"), "'\(beacon.label("minor"))' needs 'major' too (CLBeaconIdentityCondition: UUID, UUID+major, or UUID+major+minor)")
            return nil
        }
        guard let uuid else { return nil }
        return .beacon(uuid: uuid, major: major.map { UInt16($0) }, minor: minor.map { UInt16($0) })
    }

    private static func readAction(_ reader: inout TableReader, monitors: [MonitorConfig]) -> ActionConfig? {
        let report = reader.report
        let when = reader.string("when", required: true)
        let state = reader.choice("state", [("satisfied", ActionConfig.Trigger.satisfied), ("unsatisfied", .unsatisfied), ("any", .any)]) ?? .any
        let gpio = reader.string("gpio", required: true)
        let mode = reader.choice("mode", [("level", ActionConfig.Mode.level), ("pulse", .pulse), ("latch", .latch)]) ?? .level
        let pulse = reader.duration("pulse", in: 1...60_000)
        if pulse != nil && mode != .pulse {
            report.fail(at: reader.offset(of: "pulse"), "'\(reader.label("pulse"))' only applies with mode = \"pulse\"")
        }
        guard let when, let gpio else { return nil }
        let parts = when.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            report.fail(at: reader.offset(of: "when"), "'\(reader.label("when"))' = \"\(when)\" must be \"monitor/identifier\" or \"monitor/*\"")
            return nil
        }
        let monitorName = String(parts[0])
        let identifier = parts[1] == "*" ? nil : String(parts[1])
        guard let monitor = monitors.first(where: { $0.name == monitorName }) else {
            var message = "'\(reader.label("when"))' names monitor '\(monitorName)', which has no conditions in this file"
            if let suggestion = Spelling.closest(to: monitorName, among: monitors.map { $0.name }) { message += " (did you mean '\(suggestion)'?)" }
            report.fail(at: reader.offset(of: "when"), message)
            return nil
        }
        if let identifier, !monitor.conditions.contains(where: { $0.identifier == identifier }) {
            var message = "'\(reader.label("when"))' names condition '\(identifier)', which monitor '\(monitorName)' does not have"
            if let suggestion = Spelling.closest(to: identifier, among: monitor.conditions.map { $0.identifier }) { message += " (did you mean '\(suggestion)'?)" }
            report.fail(at: reader.offset(of: "when"), message)
            return nil
        }
        return ActionConfig(monitor: monitorName, identifier: identifier, state: state, gpio: gpio, mode: mode,
                            pulseMs: pulse ?? 500, location: report.document.location(of: reader.offset))
    }
}
