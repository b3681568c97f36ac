/// Names of monitors, conditions and GPIO lines: short ASCII identifiers, so that the engine can
/// store them inline at a fixed size.
public enum Identifier {
    public static let maximumLength = 32

    public static func isValid(_ text: String) -> Bool {
        let bytes = text.utf8
        guard !bytes.isEmpty, bytes.count <= maximumLength else { return false }
        return bytes.allSatisfy { isDigit($0) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x5F || $0 == 0x2D }
    }
}

/// The state a condition is assumed to be in before it has been determined.
public enum ConditionState: Equatable, Sendable, CustomStringConvertible {
    case unknown, satisfied, unsatisfied
    /// The name in JSON, text and CSV (a static string, for writers that must not allocate).
    public var name: StaticString {
        switch self {
        case .unknown: return "unknown"
        case .satisfied: return "satisfied"
        case .unsatisfied: return "unsatisfied"
        }
    }
    public var description: String { name.description }
}

public enum ProximityRequirement: Equatable, Sendable {
    case immediate, near, far
}

/// One `[[monitor.NAME.condition]]` entry.
public struct ConditionConfig {
    public enum Kind {
        case circle(latitude: Double, longitude: Double, radiusM: Double)
        case beacon(uuid: BeaconUUID, major: UInt16?, minor: UInt16?)
        /// `polygon = [[lat, lon], ...]`, checked (simple, edges at most a quarter meridian).
        case polygon(GeoPolygon)
        /// `corridor = { path = [[lat, lon], ...], width = 30 }`, checked.
        case corridor(GeoCorridor)
        /// `phone = "NAME"`: a phone of the phones file.
        case phone(name: String)

        public var phoneName: String? {
            if case .phone(let name) = self { return name }
            return nil
        }

        /// Vertices it takes in the shape store (0 for circles and beacons).
        public var vertexCount: Int {
            switch self {
            case .polygon(let polygon): return polygon.count
            case .corridor(let corridor): return corridor.latitudes.count
            case .circle, .beacon, .phone: return 0
            }
        }
    }

    public var identifier: String
    public var kind: Kind
    public var assuming: ConditionState
    /// Geofence settings (documented defaults; zero margins and dwell with `accuracyGate` off
    /// give the raw "inside iff distance <= radius" rule).
    public var enterMarginM: Double
    public var exitMarginM: Double
    public var dwellMs: Int64
    public var accuracyGate: Bool
    public var transit: Bool
    /// Beacon settings: nil exit timeout means "derive it from the scan duty cycle".
    public var exitTimeoutMs: Int64?
    public var proximity: ProximityRequirement?
    /// Where the entry starts in the site file, for later diagnostics.
    public var location: SourceLocation
    /// `circle = { place = "Dock 3", radius = 50 }`: the circle's centre is a place of the
    /// place index, found by name when the configuration is loaded (`SiteConfig.resolvePlaces`);
    /// until then the circle's latitude and longitude are NaN.
    public var place: PlaceReference? = nil

    public static let defaultEnterMarginM = 0.0
    public static let defaultExitMarginM = 15.0
    public static let defaultDwellMs: Int64 = 0
}

/// A circle's centre given as a place name, and what it was found to be.
public struct PlaceReference: Equatable {
    /// The name as written ("Dock 3", "Paris, FR").
    public var name: String
    /// Where the name is written (the `place` value), for the errors about it.
    public var location: SourceLocation
    /// The place found: its display name ("Dock 3", "Paris, Ile-de-France, FR"), set by
    /// `SiteConfig.resolvePlaces`.
    public var resolved: String? = nil

    public init(name: String, location: SourceLocation) {
        self.name = name
        self.location = location
    }
}

public struct MonitorConfig {
    public var name: String
    public var conditions: [ConditionConfig]
    /// `start_socket`: the Unix socket of a client to start (systemd socket activation) when an
    /// event arrives for this monitor and no consumer of it is connected.
    public var startSocket: String? = nil

    public init(name: String, conditions: [ConditionConfig], startSocket: String? = nil) {
        self.name = name
        self.conditions = conditions
        self.startSocket = startSocket
    }
}

public struct ActionConfig {
    public enum Mode: Equatable, Sendable { case level, pulse, latch }
    public enum Trigger: Equatable, Sendable { case satisfied, unsatisfied, any }

    public var monitor: String
    /// nil for "monitor/*".
    public var identifier: String?
    public var state: Trigger
    public var gpio: String
    public var mode: Mode
    public var pulseMs: Int64
    public var location: SourceLocation
}

public enum LivePreset: Equatable, Sendable {
    case `default`, automotiveNavigation, otherNavigation, fitness, airborne

    /// The names the site file, the control protocol and the command line use.
    public static let names: [(String, LivePreset)] = [
        ("default", .default), ("automotiveNavigation", .automotiveNavigation),
        ("otherNavigation", .otherNavigation), ("fitness", .fitness), ("airborne", .airborne),
    ]

    public static func named(_ text: String) -> LivePreset? { names.first { $0.0 == text }?.1 }
}

/// Ordered finest first: `<` means "asks more of the radios".
public enum AccuracyTier: Int, Comparable, Sendable {
    case best, nearestTenMeters, hundredMeters, kilometer, threeKilometers

    public static let names: [(String, AccuracyTier)] = [
        ("best", .best), ("nearestTenMeters", .nearestTenMeters), ("hundredMeters", .hundredMeters),
        ("kilometer", .kilometer), ("threeKilometers", .threeKilometers),
    ]

    public static func named(_ text: String) -> AccuracyTier? { names.first { $0.0 == text }?.1 }

    public static func < (a: AccuracyTier, b: AccuracyTier) -> Bool { a.rawValue < b.rawValue }
}

public struct SiteConfig {
    public struct Capacity {
        public var conditions: Int = 1024
        public var events: Int = 256
        /// Vertices of all polygons and corridors together.
        public var vertices: Int = MonitorEngine.Capacity.defaultVertices
        /// Phones the phones file may hold (each is 176 bytes of AES round keys).
        public var phones: Int = MonitorEngine.Capacity.defaultPhones
        public var subscribers: Int = 8
    }

    public enum SyncPolicy: Equatable {
        case everyEvent
        case interval(milliseconds: Int64)
    }

    public struct Log {
        public var segmentSizeBytes: Int64 = 8 << 20
        public var retainBytes: Int64 = 512 << 20
        public var sync: SyncPolicy = .everyEvent
        /// `locus run` logs at most one fix per interval (as `[privacy] fixes` allows); 0 logs all.
        public var fixIntervalMs: Int64 = 10_000
        public init() {}
    }

    public struct Updates {
        public var preset: LivePreset = .default
        public var accuracy: AccuracyTier = .hundredMeters
        public var batchCount: Int = 1
        public var batchAgeMs: Int64 = 0
        public var distanceFilterM: Double = 0
        /// `significant_change = true`: an update only after moving 500 m.
        public var significantChange = false
        /// `visit_minimum`: a stay at least this long is a visit.
        public var visitMinimumMs: Int64 = 300_000
        /// `stationary_window`: overrides the preset's (how long standing still before the pause).
        public var stationaryWindowMs: Int64? = nil
        /// `motion_input`: the board input (a motion sensor, ignition) that wakes the paused
        /// receiver at once; where it was written, for the cross-check with the board.
        public var motionInput: String? = nil
        public var motionInputLocation = SourceLocation(line: 0, column: 0)
        /// `start_socket`: the Unix socket of a client to start (systemd socket activation) on a
        /// visit or when the device moves again, while no program has an update stream open.
        public var startSocket: String? = nil
    }

    public enum FixPrivacy: Equatable, Sendable { case full, coarse, none }

    /// `[access]`: groups granted each access level (see `AccessPolicy`), as written, with where
    /// each name is so that one that does not exist on this system can be pointed at.
    public struct Access {
        public struct Group {
            public var name: String
            public var location: SourceLocation
        }
        public var read: [Group] = []
        public var positions: [Group] = []
        public var change: [Group] = []
        /// `read_socket`: what any client of read.sock has (default: read and positions).
        public var readSocket: AccessGrants = [.read, .positions]
        public init() {}
    }

    /// `[uplink]`: the MQTT broker the log's events are published to (docs/uplink.md).
    public struct Uplink: Equatable {
        /// What is published (`what`).
        public struct Content: OptionSet, Sendable, Equatable {
            public let rawValue: Int
            public init(rawValue: Int) { self.rawValue = rawValue }
            public static let events = Content(rawValue: 1)
            public static let gpio = Content(rawValue: 2)
            public static let visits = Content(rawValue: 4)
            public static let fixes = Content(rawValue: 8)
            public static let sightings = Content(rawValue: 16)
            /// Per tag, a summary a `presence_interval` for the fleet's presence (docs/presence.md).
            public static let presence = Content(rawValue: 32)
            public static let names: [(String, Content)] = [("events", .events), ("gpio", .gpio), ("visits", .visits),
                                                            ("fixes", .fixes), ("sightings", .sightings), ("presence", .presence)]
        }

        /// Debian's bundle of the public CAs (package ca-certificates): the default `ca_file` for mqtts.
        public static let systemCAFile = "/etc/ssl/certs/ca-certificates.crt"

        /// The broker's nodes, in the order tried: the uplink starts on the first and moves to
        /// the next when one is lost (a clustered broker, docs/fleet.md). At least one.
        public var brokers: [BrokerAddress]
        /// The first node.
        public var broker: BrokerAddress { brokers[0] }
        /// Default: the gateway id.
        public var clientID: String? = nil
        /// Default: the machine id (/etc/machine-id), stable across restarts.
        public var gateway: String? = nil
        /// Default: `locus/<gateway>`.
        public var topicPrefix: String? = nil
        public var keepAliveMs: Int64 = 60_000
        /// mqtts only; default `systemCAFile`.
        public var caFile: String? = nil
        public var certFile: String? = nil
        public var keyFile: String? = nil
        public var username: String? = nil
        /// A file holding the password (never the password in the site file).
        public var passwordFile: String? = nil
        public var content: Content = [.events, .gpio, .visits]
        /// QoS 1 messages sent and not yet acknowledged, at most.
        public var maxInflight = 16
        /// At most one fix a `fixIntervalMs`, one sighting of a beacon a `sightingIntervalMs`.
        public var fixIntervalMs: Int64 = 10_000
        public var sightingIntervalMs: Int64 = 10_000
        /// `presence`: one message a `presenceIntervalMs` with at most `presenceTags` tags, the
        /// loudest first.
        public var presenceIntervalMs: Int64 = 2_000
        public var presenceTags = 32
        /// Home Assistant MQTT discovery.
        public var homeAssistant = false

        public init(broker: BrokerAddress) { brokers = [broker] }
        public init(brokers: [BrokerAddress]) {
            precondition(!brokers.isEmpty, "at least one broker")
            self.brokers = brokers
        }
    }

    /// `[geocoding]`: the place index (docs/geocoding.md) and what the agent does with it.
    public struct Geocoding: Equatable {
        /// Where the Debian package installs the index built from the GeoNames extract.
        public static let installedIndex = "/usr/share/locus/places.idx"
        public static let defaultMaximumDistanceM = 25_000.0

        /// The index file as written (relative to the site file's directory when relative).
        public var index = Geocoding.installedIndex
        /// Events, visits and live updates carry the place nearest their position.
        public var annotate = false
        /// How far the nearest place may be for an annotation (and a `reverse_geocode` without `within`).
        public var maximumDistanceM = Geocoding.defaultMaximumDistanceM
        public var scope: PlaceScope = .any
        /// Where `index` is written (the section's header without it), for the index's errors.
        public var location = SourceLocation(line: 1, column: 1)

        public init() {}
    }

    /// `[health]`: when the agent heals a radio that fell silent (docs/health.md). A limit of
    /// "0s" turns that radio's healing off.
    public struct Health: Equatable {
        /// A GNSS port open, its receiver awake, and no NMEA sentence for this long (never less
        /// than twice the period the receiver's plan fixes at).
        public var gnssSilenceMs: Int64 = 15_000
        /// An adapter scanning while beacons are expected, and no advertising report (of any
        /// advertiser) for this long. Five minutes: a quiet site at night still has a phone or a
        /// beacon advertising somewhere within range every few minutes.
        public var bleSilenceMs: Int64 = 300_000
        /// How long each step is given to bring the radio back before the next.
        public var settleMs: Int64 = 20_000
        /// Times the whole ladder is climbed before giving up.
        public var rounds = 2
        public init() {}
    }

    /// Path of the board file as written (relative to the site file's directory when relative).
    public var board: String
    public var stateDirectory: String = "/var/lib/locus"
    public var capacity = Capacity()
    public var log = Log()
    public var updates = Updates()
    public var fixPrivacy: FixPrivacy = .full
    public var access = Access()
    public var uplink: Uplink? = nil
    /// `[remote]`: what the fleet may set and do here (nil: nothing).
    public var remote: Remote? = nil
    public var geocoding: Geocoding? = nil

    /// `[phones]`: where the phones' identity resolving keys are (`PhoneKeys`).
    public struct Phones: Equatable {
        public var keysFile: String
        public var location: SourceLocation
    }

    public var phones: Phones? = nil

    /// `[bluetooth] advertise`: the iBeacon the gateway sends itself (for the fleet's presence
    /// calibration), and where it was written (for the cross-check with the board).
    public struct Advertising: Equatable {
        public var beacon: BeaconAdvertisement
        public var location: SourceLocation
        public init(beacon: BeaconAdvertisement, location: SourceLocation) {
            self.beacon = beacon
            self.location = location
        }
    }

    public var advertising: Advertising? = nil

    /// Every phone condition must name a phone of the phones file (nil: the site has none).
    public func phoneProblems(_ keys: PhoneKeys?, keysPath: String, file: String) -> [ConfigDiagnostic] {
        var diagnostics: [ConfigDiagnostic] = []
        for monitor in monitors {
            for condition in monitor.conditions {
                guard let name = condition.kind.phoneName else { continue }
                if let keys {
                    if keys.number(of: name) == nil {
                        var message = "phone '\(name)' is not in the phones file \(keysPath)"
                        if let suggestion = Spelling.closest(to: name, among: keys.phones.map { $0.name.description }) { message += " (did you mean '\(suggestion)'?)" }
                        diagnostics.append(ConfigDiagnostic(file: file, location: condition.location, message: message))
                    }
                } else {
                    diagnostics.append(ConfigDiagnostic(file: file, location: condition.location,
                                                        message: "a 'phone' condition needs [phones] keys = \"FILE\", the file of the phones' identity resolving keys"))
                }
            }
        }
        return diagnostics
    }
    public var health = Health()
    public var monitors: [MonitorConfig] = []
    public var actions: [ActionConfig] = []

    public var conditionCount: Int { monitors.reduce(0) { $0 + $1.conditions.count } }
    public var vertexCount: Int { monitors.reduce(0) { $0 + $1.conditions.reduce(0) { $0 + $1.kind.vertexCount } } }

    /// The place index has to be opened: the site has `[geocoding]` or a circle centred on a place.
    public var needsPlaceIndex: Bool { geocoding != nil || firstPlaceReference != nil }

    /// The first circle centred on a place, in file order.
    public var firstPlaceReference: PlaceReference? {
        for monitor in monitors { for condition in monitor.conditions { if let place = condition.place { return place } } }
        return nil
    }

    /// Where an error about the index is reported: its `index` key, or the first place name.
    public var placeIndexLocation: SourceLocation {
        geocoding?.location ?? firstPlaceReference?.location ?? SourceLocation(line: 1, column: 1)
    }

    /// Reads and checks a site file on its own; `check(against:)` checks what needs the board.
    public static func parse(_ source: [UInt8], file: String) throws(ConfigError) -> SiteConfig {
        try parse(source, file: file, fleet: nil)
    }

    /// A configuration from the fleet over a site file: its keys (each one `settable` lists)
    /// replace the site file's whole. Its diagnostics name it (`FleetMessage.header`'s report).
    public struct FleetFragment {
        public let report: ConfigReport
        public let settable: [String]
        public init(report: ConfigReport, settable: [String]) {
            self.report = report
            self.settable = settable
        }
    }

    /// The site file with the fleet's configuration over it; the diagnostics of both, the fleet's
    /// first.
    public static func parse(_ source: [UInt8], file: String, fleet: FleetFragment?) throws(ConfigError) -> SiteConfig {
        let report = try ConfigReport.parse(source, file: file)
        let site = SiteSchema.read(report, fleet: fleet)
        let fleetDiagnostics = fleet?.report.diagnostics ?? []
        if report.hasErrors || !fleetDiagnostics.isEmpty { throw ConfigError(fleetDiagnostics + report.diagnostics) }
        return site!
    }

    /// Cross-checks with the board: every action must drive an output the board has.
    public func problems(with board: BoardConfig, file: String) -> [ConfigDiagnostic] {
        var diagnostics: [ConfigDiagnostic] = []
        let outputs = board.gpio?.outputs.map { $0.name } ?? []
        let radioLines = board.radioLines
        if let advertising, !board.hasAdapter {
            diagnostics.append(ConfigDiagnostic(file: file, location: advertising.location,
                                                message: "'bluetooth.advertise' needs an adapter ([bluetooth] hci): board '" + board.name + "' has none"))
        }
        for action in actions where radioLines.contains(action.gpio) {
            diagnostics.append(ConfigDiagnostic(file: file, location: action.location,
                                                message: "gpio '\(action.gpio)' powers or resets a radio (the board's [gnss] or [bluetooth] lines): the agent's self-healing drives it, actions cannot"))
        }
        for action in actions where !outputs.contains(action.gpio) {
            var message = "gpio '\(action.gpio)' is not an output of board '\(board.name)'"
            if let suggestion = Spelling.closest(to: action.gpio, among: outputs) {
                message += " (did you mean '\(suggestion)'?)"
            } else if outputs.isEmpty {
                message += " (the board has no [gpio.outputs])"
            } else {
                var names = ""
                for (index, name) in outputs.enumerated() { names += (index == 0 ? "" : ", ") + name }
                message += " (the board's outputs: \(names))"
            }
            diagnostics.append(ConfigDiagnostic(file: file, location: action.location, message: message))
        }
        if let name = updates.motionInput {
            let inputs = board.gpio?.inputs.map { $0.name } ?? []
            if !inputs.contains(name) {
                var message = "updates.motion_input '\(name)' is not an input of board '\(board.name)'"
                if let suggestion = Spelling.closest(to: name, among: inputs) {
                    message += " (did you mean '\(suggestion)'?)"
                } else if inputs.isEmpty {
                    message += " (the board has no [gpio.inputs])"
                }
                diagnostics.append(ConfigDiagnostic(file: file, location: updates.motionInputLocation, message: message))
            }
        }
        return diagnostics
    }
}
