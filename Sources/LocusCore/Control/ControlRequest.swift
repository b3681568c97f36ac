/// The control protocol (version 1): JSON lines over the agent's Unix socket. See README.md,
/// "Control protocol", for the wire format; this is its request side.
///
/// A request is one JSON object on one line: `{"id": 7, "op": "add", ...}`. `id` (an integer)
/// is echoed in the response so a client can pipeline; `v`, when given, must be 1.
public enum ControlRequest: Sendable {
    case hello
    case status
    case add(monitor: FixedName, identifier: FixedName, condition: Condition, settings: ConditionSettings, assuming: ConditionState)
    case remove(monitor: FixedName, identifier: FixedName)
    case identifiers(monitor: FixedName)
    case record(monitor: FixedName, identifier: FixedName)
    case records(monitor: FixedName)
    /// Events from the log after `afterSequence` (nil: only new ones), then live. With
    /// `consumer`, the monitor's events after its consumer's cursor (the connection must have
    /// opened the monitor).
    case subscribe(monitor: FixedName?, afterSequence: UInt64?, consumer: Bool)
    case gpioClear(output: FixedName)
    /// CLMonitor's one open instance per name: claims the monitor for this connection.
    case open(monitor: FixedName)
    /// The consumer took the event with this sequence number: it becomes its record's lastEvent
    /// for the consumer, and is not delivered to it again.
    case ack(monitor: FixedName, sequence: UInt64)
    /// Live location updates (CLLocationUpdate.liveUpdates) on this connection, with the
    /// stream's choices (`UpdateStreamRequest`), until the connection closes or `updates-stop`.
    case updates(UpdateStreamRequest)
    case updatesStop

    // MARK: beacon ranging
    /// Beacon ranging (CLLocationManager.startRangingBeacons(satisfying:)) on this connection:
    /// a line a second with the beacons matching the constraint, nearest first, until the
    /// connection closes or `range-stop`.
    case range(constraint: BeaconIdentityConstraint)
    /// `range` with `{"constraint":{"phone":NAME}}`: one phone of the phones file.
    case rangePhone(name: FixedName)
    case rangeStop
    // MARK: single location request and visits
    /// One location (CLLocationManager.requestLocation): the last fix if recent and accurate
    /// enough, else the first good one after waking the receiver (`LocateRequests`' rules).
    case locate(accuracy: AccuracyTier?, maxAgeMs: Int64, timeoutMs: Int64)
    /// The log's visit records (arrivals and departures) from `sinceNs` on, the newest `limit`.
    case visits(sinceNs: Int64?, limit: Int)
    // MARK: geocoding
    /// The place nearest a point (`reverse_geocode`), within `withinM` (nil: the site's
    /// `[geocoding] max_distance`) among `scope`'s places (nil: the site's).
    case reverseGeocode(latitude: Double, longitude: Double, withinM: Double?, scope: PlaceScope?)
    /// The places a name names (`geocode`), the best `limit` of them.
    case geocode(name: String, limit: Int)
    /// `add` with a circle centred on a place: `circle: {place, radius}`, found by name like the
    /// site file's (exactly one place must have the name).
    case addAtPlace(monitor: FixedName, identifier: FixedName, place: String, radiusM: Double, settings: ConditionSettings,
                    assuming: ConditionState)
}

/// A refused request: a stable code for programs, a sentence for people.
public struct ControlError: Error, Equatable, Sendable {
    public enum Code: String, Sendable {
        case badRequest = "bad_request"
        case tooLarge = "too_large"
        case unsupportedVersion = "unsupported_version"
        case unknownOp = "unknown_op"
        case badArgument = "bad_argument"
        case notFound = "not_found"
        case conditionLimitExceeded = "condition_limit_exceeded"
        case permissionDenied = "permission_denied"
        case unavailable = "unavailable"
        case busy = "busy"
        case inUse = "in_use"
        // MARK: single location request
        case locationUnavailable = "location_unavailable"
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

public enum ControlProtocol {
    public static let version = 1
    /// Longest request line accepted, newline included.
    public static let maximumRequestBytes = 4096
    public static let operations = ["hello", "status", "add", "remove", "identifiers", "record", "records", "subscribe", "gpio-clear",
                                    "open", "ack", "updates", "updates-stop",
                                    "range", "range-stop", "locate", "visits", "reverse_geocode", "geocode"]

    /// Decodes one request line (without its newline). The id is returned with errors too, when it
    /// could be read, so the error response can carry it.
    public static func decode(_ line: [UInt8]) -> (id: Int64?, request: Result<ControlRequest, ControlError>) {
        let value: JSONValue
        do { value = try JSONParser.parse(line) } catch {
            return (nil, .failure(ControlError(.badRequest, error.description)))
        }
        guard case .object = value else { return (nil, .failure(ControlError(.badRequest, "a request is a JSON object"))) }
        var id: Int64? = nil
        if let raw = value["id"] {
            guard let number = raw.integer(in: 0...Int64(1) << 53) else {
                return (nil, .failure(ControlError(.badRequest, "'id' must be a non-negative integer")))
            }
            id = number
        }
        if let raw = value["v"], raw.integer(in: 0...1_000_000) != Int64(version) {
            return (id, .failure(ControlError(.unsupportedVersion, "this agent speaks protocol version \(version)")))
        }
        return (id, request(value))
    }

    static func request(_ value: JSONValue) -> Result<ControlRequest, ControlError> {
        guard let op = value["op"]?.string else { return .failure(ControlError(.badRequest, "'op' (a string) is required")) }
        do throws(ControlError) {
            switch op {
            case "hello": return .success(.hello)
            case "status": return .success(.status)
            case "add": return .success(try add(value))
            case "remove": return .success(.remove(monitor: try name(value, "monitor"), identifier: try name(value, "identifier")))
            case "identifiers": return .success(.identifiers(monitor: try name(value, "monitor")))
            case "record": return .success(.record(monitor: try name(value, "monitor"), identifier: try name(value, "identifier")))
            case "records": return .success(.records(monitor: try name(value, "monitor")))
            case "subscribe":
                let monitor = value["monitor"] == nil ? nil : try name(value, "monitor")
                let after = try sequence(value, "after_seq")
                var consumer = false
                if let raw = value["consumer"] {
                    guard let flag = raw.bool else { throw ControlError(.badArgument, "'consumer' is true or false") }
                    consumer = flag
                }
                if consumer && (monitor == nil || after != nil) {
                    throw ControlError(.badArgument, "a consumer subscription names its 'monitor' and starts at the consumer's cursor (no 'after_seq')")
                }
                return .success(.subscribe(monitor: monitor, afterSequence: after, consumer: consumer))
            case "open": return .success(.open(monitor: try name(value, "monitor")))
            case "ack":
                guard let sequence = try sequence(value, "seq") else { throw ControlError(.badArgument, "'seq' (the event's sequence number) is required") }
                return .success(.ack(monitor: try name(value, "monitor"), sequence: sequence))
            case "gpio-clear": return .success(.gpioClear(output: try name(value, "gpio")))
            case "updates": return .success(.updates(try updateStream(value)))
            case "updates-stop": return .success(.updatesStop)
            // MARK: beacon ranging
            case "range":
                if let phone = value["constraint"]?["phone"] {
                    guard let text = phone.string, let name = FixedName(text) else {
                        throw ControlError(.badArgument, "'constraint.phone' is a phone's name in the site's phones file")
                    }
                    return .success(.rangePhone(name: name))
                }
                return .success(.range(constraint: try beaconIdentity(value, "constraint")))
            case "range-stop": return .success(.rangeStop)
            // MARK: single location request and visits
            case "locate": return .success(try locate(value))
            case "visits":
                let since = try number(value, "since", in: 0...1e11).map { Int64($0 * 1e9) }
                let limit = try number(value, "limit", in: 1...Double(visitLimit)).map { Int($0) } ?? visitLimit
                return .success(.visits(sinceNs: since, limit: limit))
            // MARK: geocoding
            case "reverse_geocode": return .success(try reverseGeocode(value))
            case "geocode": return .success(try geocode(value))
            default:
                var message = "unknown op '\(op)'"
                if let suggestion = Spelling.closest(to: op, among: operations) { message += " (did you mean '\(suggestion)'?)" }
                return .failure(ControlError(.unknownOp, message))
            }
        } catch {
            return .failure(error)
        }
    }

    // MARK: geocoding

    /// Most places one `geocode` reply carries, and how many without `limit`.
    public static let geocodeLimit = 50
    public static let defaultGeocodeLimit = 10

    static func geocode(_ value: JSONValue) throws(ControlError) -> ControlRequest {
        guard let name = value["name"]?.string, !name.isEmpty, name.utf8.count <= PlaceNameSearch.maximumQueryBytes else {
            throw ControlError(.badArgument, "'name' (a place name of 1...\(PlaceNameSearch.maximumQueryBytes) bytes, such as \"Springfield, US\") is required")
        }
        let limit = try number(value, "limit", in: 1...Double(geocodeLimit)).map { Int($0) } ?? defaultGeocodeLimit
        return .geocode(name: name, limit: limit)
    }

    static func reverseGeocode(_ value: JSONValue) throws(ControlError) -> ControlRequest {
        guard let latitude = try number(value, "latitude", in: -90...90), let longitude = try number(value, "longitude", in: -180...180) else {
            throw ControlError(.badArgument, "'latitude' (-90...90) and 'longitude' (-180...180) are required")
        }
        let within = try number(value, "within", in: 0...20_004_000)
        var scope: PlaceScope? = nil
        if let raw = value["scope"] {
            switch raw.string {
            case "any": scope = .any
            case "populated": scope = .populated
            case "site": scope = .site
            default: throw ControlError(.badArgument, "'scope' is any, populated or site")
            }
        }
        return .reverseGeocode(latitude: latitude, longitude: longitude, withinM: within, scope: scope)
    }

    // MARK: single location request, visits, significant change

    /// Most visits one `visits` reply carries (each about 170 bytes: 200 fit a connection's buffer).
    public static let visitLimit = 200
    /// A stream's significant-change distance when `significant_change` is just `true`.
    public static let defaultSignificantChangeM = 1_000.0

    /// `significant_change: true` (the default distance) or `significant_change_m: M`.
    static func updateStream(_ value: JSONValue) throws(ControlError) -> UpdateStreamRequest {
        var stream = UpdateStreamRequest()
        stream.preset = try preset(value, "preset")
        stream.activity = try preset(value, "activity")
        stream.accuracy = try accuracy(value)
        stream.significantChangeM = try significantChange(value)
        stream.distanceFilterM = try number(value, "distance_filter_m", in: 0...100_000)
        // The site file's own bound; the agent refuses more than its buffer holds (`batchCountLimit`,
        // or the site's `batch_count` if more).
        if let count = try number(value, "batch_count", in: 1...4_096) {
            guard count == count.rounded() else { throw ControlError(.badArgument, "'batch_count' is a whole number of updates") }
            stream.batchCount = Int(count)
        }
        stream.batchAgeMs = try number(value, "batch_age_s", in: 0...3_600).map { Int64(($0 * 1_000).rounded()) }
        if let raw = value["pauses"] {
            guard let flag = raw.bool else { throw ControlError(.badArgument, "'pauses' is true or false") }
            stream.pausesAutomatically = flag
        }
        if let raw = value["quiet"] {
            guard let flag = raw.bool else { throw ControlError(.badArgument, "'quiet' is true or false") }
            stream.quiet = flag
        }
        return stream
    }

    static func preset(_ value: JSONValue, _ key: String) throws(ControlError) -> LivePreset? {
        guard let raw = value[key] else { return nil }
        guard let text = raw.string, let named = LivePreset.named(text) else {
            throw ControlError(.badArgument, "'\(key)' is one of \(LivePreset.names.map { $0.0 }.joined(separator: ", "))")
        }
        return named
    }

    /// An `accuracy` member: a tier's name.
    static func accuracy(_ value: JSONValue) throws(ControlError) -> AccuracyTier? {
        guard let raw = value["accuracy"] else { return nil }
        guard let text = raw.string, let named = AccuracyTier.named(text) else {
            throw ControlError(.badArgument, "'accuracy' is one of \(AccuracyTier.names.map { $0.0 }.joined(separator: ", "))")
        }
        return named
    }

    static func significantChange(_ value: JSONValue) throws(ControlError) -> Double? {
        if let metres = try number(value, "significant_change_m", in: 50...100_000) { return metres }
        guard let raw = value["significant_change"] else { return nil }
        guard let flag = raw.bool else { throw ControlError(.badArgument, "'significant_change' is true or false (or give 'significant_change_m')") }
        return flag ? defaultSignificantChangeM : nil
    }

    static func locate(_ value: JSONValue) throws(ControlError) -> ControlRequest {
        let accuracy = try accuracy(value)
        let maxAge = try number(value, "max_age_s", in: 0...Double(LocateRequests.maximumMaxAgeMs / 1000))
        let timeout = try number(value, "timeout_s", in: 1...Double(LocateRequests.maximumTimeoutMs / 1000))
        return .locate(accuracy: accuracy, maxAgeMs: maxAge.map { Int64($0 * 1000) } ?? LocateRequests.defaultMaxAgeMs,
                       timeoutMs: timeout.map { Int64($0 * 1000) } ?? LocateRequests.defaultTimeoutMs)
    }

    static func name(_ value: JSONValue, _ key: String) throws(ControlError) -> FixedName {
        guard let text = value[key]?.string else { throw ControlError(.badArgument, "'\(key)' (a string) is required") }
        guard let name = FixedName(text) else {
            throw ControlError(.badArgument, "'\(key)' must be 1...\(Identifier.maximumLength) letters, digits, '-' or '_'")
        }
        return name
    }

    static func sequence(_ value: JSONValue, _ key: String) throws(ControlError) -> UInt64? {
        guard let raw = value[key] else { return nil }
        guard let number = raw.integer(in: 0...Int64(1) << 53) else { throw ControlError(.badArgument, "'\(key)' must be a sequence number") }
        return UInt64(number)
    }

    static func number(_ value: JSONValue, _ key: String, in range: ClosedRange<Double>) throws(ControlError) -> Double? {
        guard let raw = value[key] else { return nil }
        guard let number = raw.number, range.contains(number) else {
            throw ControlError(.badArgument, "'\(key)' must be a number in \(range.lowerBound)...\(range.upperBound)")
        }
        return number
    }

    static func add(_ value: JSONValue) throws(ControlError) -> ControlRequest {
        let monitor = try name(value, "monitor")
        let identifier = try name(value, "identifier")
        let condition: Condition
        var placeCircle: (name: String, radiusM: Double)? = nil
        let kinds = ["circle", "beacon", "phone", "polygon", "corridor"].filter { value[$0] != nil }
        guard kinds.count <= 1 else { throw ControlError(.badArgument, "a condition is one of 'circle', 'beacon', 'phone', 'polygon' or 'corridor', not several") }
        switch (value["circle"], value["beacon"]) {
        case _ where value["polygon"] != nil || value["corridor"] != nil:
            condition = try shape(value)
        case _ where value["phone"] != nil:
            guard let text = value["phone"]?.string, let name = FixedName(text) else {
                throw ControlError(.badArgument, "'phone' is a phone's name in the site's phones file")
            }
            condition = .phone(PhoneCondition(name: name))
        case (let circle?, nil) where circle["place"] != nil:
            guard circle["lat"] == nil && circle["lon"] == nil else {
                throw ControlError(.badArgument, "'circle' is centred on lat and lon or on a place, not both")
            }
            guard let place = circle["place"]?.string, !place.isEmpty, place.utf8.count <= PlaceNameSearch.maximumQueryBytes,
                  let radius = try number(circle, "radius", in: 0...10_000_000), radius > 0 else {
                throw ControlError(.badArgument, "'circle' with a place needs place (a name) and radius (metres > 0)")
            }
            placeCircle = (place, radius)
            condition = .circle(CircularGeographicCondition(latitude: 0, longitude: 0, radiusM: radius))
        case (let circle?, nil):
            guard let latitude = try number(circle, "lat", in: -90...90), let longitude = try number(circle, "lon", in: -180...180),
                  let radius = try number(circle, "radius", in: 0...10_000_000), radius > 0 else {
                throw ControlError(.badArgument, "'circle' needs lat (-90...90), lon (-180...180) and radius (metres > 0), or place and radius")
            }
            condition = .circle(CircularGeographicCondition(latitude: latitude, longitude: longitude, radiusM: radius))
        case (nil, let beacon?):
            guard let text = beacon["uuid"]?.string, let uuid = BeaconUUID(text) else {
                throw ControlError(.badArgument, "'beacon' needs uuid (8-4-4-4-12 hexadecimal digits)")
            }
            let major = beacon["major"].map { $0.integer(in: 0...65535) }
            let minor = beacon["minor"].map { $0.integer(in: 0...65535) }
            if major == .some(nil) || minor == .some(nil) { throw ControlError(.badArgument, "major and minor are integers 0...65535") }
            if minor != nil && major == nil { throw ControlError(.badArgument, "'minor' needs 'major' too") }
            condition = .beacon(BeaconIdentityCondition(uuid: uuid, major: major.flatMap { $0.map { UInt16($0) } },
                                                        minor: minor.flatMap { $0.map { UInt16($0) } }))
        default:
            throw ControlError(.badArgument, "a condition is 'circle': {lat, lon, radius} (or {place, radius}), 'beacon': {uuid, major, minor}, 'phone': NAME, 'polygon': [[lat, lon], ...] or 'corridor': {path, width}")
        }
        var assuming = ConditionState.unknown
        if let raw = value["assuming"] {
            switch raw.string {
            case "satisfied": assuming = .satisfied
            case "unsatisfied": assuming = .unsatisfied
            case "unknown": assuming = .unknown
            default: throw ControlError(.badArgument, "'assuming' is satisfied, unsatisfied or unknown")
            }
        }
        let settings = try settings(value["settings"])
        if let placeCircle {
            return .addAtPlace(monitor: monitor, identifier: identifier, place: placeCircle.name, radiusM: placeCircle.radiusM,
                               settings: settings, assuming: assuming)
        }
        return .add(monitor: monitor, identifier: identifier, condition: condition, settings: settings, assuming: assuming)
    }

    /// An `add`'s `polygon: [[lat, lon], ...]` or `corridor: {path, width}`, checked (the message
    /// names the vertex at fault).
    static func shape(_ value: JSONValue) throws(ControlError) -> Condition {
        if let corridor = value["corridor"] {
            let path = try positions(corridor["path"], "corridor.path")
            guard let width = try number(corridor, "width", in: 0...1_000_000), width > 0 else {
                throw ControlError(.badArgument, "'corridor' needs path ([[lat, lon], ...]) and width (metres > 0)")
            }
            do throws(CorridorError) {
                return .corridor(try GeoCorridor(latitudes: path.latitudes, longitudes: path.longitudes, widthM: width))
            } catch {
                throw ControlError(.badArgument, "'corridor': " + ShapeMessages.corridor(error).message)
            }
        }
        let ring = try positions(value["polygon"], "polygon")
        do throws(ShapeError) {
            return .polygon(try GeoPolygon(latitudes: ring.latitudes, longitudes: ring.longitudes))
        } catch {
            throw ControlError(.badArgument, "'polygon': " + ShapeMessages.polygon(error).message)
        }
    }

    /// `[[lat, lon], ...]`: positions in degrees.
    static func positions(_ raw: JSONValue?, _ key: String) throws(ControlError) -> (latitudes: [Double], longitudes: [Double]) {
        guard case .array(let elements)? = raw else { throw ControlError(.badArgument, "'\(key)' is an array of [lat, lon] positions") }
        var latitudes: [Double] = [], longitudes: [Double] = []
        for (index, element) in elements.enumerated() {
            guard case .array(let pair) = element, pair.count == 2, let latitude = pair[0].number, let longitude = pair[1].number,
                  abs(latitude) <= 90, abs(longitude) <= 180 else {
                throw ControlError(.badArgument, "'\(key)' element \(index + 1) is not a [lat, lon] position (latitude within ±90, longitude within ±180)")
            }
            latitudes.append(latitude)
            longitudes.append(longitude)
        }
        return (latitudes, longitudes)
    }

    /// An `add`'s `settings` object (the defaults without one).
    static func settings(_ raw: JSONValue?) throws(ControlError) -> ConditionSettings {
        var settings = ConditionSettings()
        if let raw {
            guard case .object = raw else { throw ControlError(.badArgument, "'settings' is an object") }
            if let margin = try number(raw, "enter_margin", in: 0...100_000) { settings.enterMarginM = margin }
            if let margin = try number(raw, "exit_margin", in: 0...100_000) { settings.exitMarginM = margin }
            if let dwell = try number(raw, "dwell_ms", in: 0...86_400_000) { settings.dwellMs = Int64(dwell) }
            if let gate = raw["accuracy_gate"] {
                guard let flag = gate.bool else { throw ControlError(.badArgument, "'accuracy_gate' is true or false") }
                settings.accuracyGate = flag
            }
            if let transit = raw["transit"] {
                guard let flag = transit.bool else { throw ControlError(.badArgument, "'transit' is true or false") }
                settings.transit = flag
            }
            if let timeout = try number(raw, "exit_timeout_ms", in: 1...86_400_000) { settings.exitTimeoutMs = Int64(timeout) }
            if let proximity = raw["proximity"] {
                switch proximity.string {
                case "immediate": settings.proximity = .immediate
                case "near": settings.proximity = .near
                case "far": settings.proximity = .far
                default: throw ControlError(.badArgument, "'proximity' is immediate, near or far")
                }
            }
        }
        return settings
    }

    // MARK: beacon ranging

    /// `key: {uuid, major?, minor?}`: a beacon identity with optional major and minor.
    static func beaconIdentity(_ value: JSONValue, _ key: String) throws(ControlError) -> BeaconIdentityConstraint {
        guard let object = value[key], case .object = object else {
            throw ControlError(.badArgument, "'\(key)' is required: {\"uuid\": \"8-4-4-4-12 hex\", \"major\"?: 0...65535, \"minor\"?: 0...65535}")
        }
        guard let text = object["uuid"]?.string, let uuid = BeaconUUID(text) else {
            throw ControlError(.badArgument, "'\(key)' needs uuid (8-4-4-4-12 hexadecimal digits)")
        }
        let major = object["major"].map { $0.integer(in: 0...65535) }
        let minor = object["minor"].map { $0.integer(in: 0...65535) }
        if major == .some(nil) || minor == .some(nil) { throw ControlError(.badArgument, "major and minor are integers 0...65535") }
        if minor != nil && major == nil { throw ControlError(.badArgument, "'minor' needs 'major' too") }
        return BeaconIdentityConstraint(uuid: uuid, major: major.flatMap { $0.map { UInt16($0) } }, minor: minor.flatMap { $0.map { UInt16($0) } })
    }
}

/// An `updates` request's choices (CLLocationManager's per-client settings); each nil takes the
/// site's `[updates]`.
public struct UpdateStreamRequest: Equatable, Sendable {
    /// A batch (deferred updates) holds at most this many updates on any site whose own
    /// `batch_count` is smaller: the render buffer set aside at start.
    public static let batchCountLimit = 120

    /// The stream's filters and stationary thresholds.
    public var preset: LivePreset? = nil
    public var accuracy: AccuracyTier? = nil
    /// An update only after a move of this many metres (the stream's radios at the coarse tier
    /// that distance implies).
    public var significantChangeM: Double? = nil
    /// CLLocationManager.distanceFilter: an update only once the device is this far from the
    /// last one delivered (0: every fix).
    public var distanceFilterM: Double? = nil
    /// Deferred updates: delivered together once this many have gathered, or once the oldest
    /// is `batchAgeMs` old (0: no age bound), or at a monitor event.
    public var batchCount: Int? = nil
    public var batchAgeMs: Int64? = nil
    /// false: no automatic pause. Updates keep coming while the device stands still (each says
    /// whether it is stationary) and the receiver is kept awake while the stream is open.
    public var pausesAutomatically = true
    /// CLLocationManager.activityType: the receiver's platform model follows this preset while
    /// the stream is open (the most dynamic of the site's and the open streams' activities).
    public var activity: LivePreset? = nil
    /// A service session (CLServiceSession): the stream holds the radios at its tier and
    /// model and sends nothing.
    public var quiet = false

    public init() {}
}
