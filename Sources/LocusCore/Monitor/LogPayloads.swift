/// The engine's log payloads (what `LogRecordType.conditionAdded`, `.conditionRemoved`,
/// `.event` and `.checkpoint` records carry). Format version 1, little-endian:
///
///   condition   monitor name, identifier, kind (1 circle: lat, lon, radius as Double;
///               2 beacon: uuid high, low, major+1 (0 = any), minor+1 (0 = any) as UInt32;
///               3 polygon: vertex count as UInt16, then lat, lon of each as Double;
///               4 corridor: width as Double, point count as UInt16, then lat, lon of each;
///               5 phone: its name),
///               settings (enter, exit margins, dwell ms, gate, transit, exit timeout ms (-1 none),
///               proximity (0 none, 1 immediate, 2 near, 3 far)), assumed state, from-site-file flag
///   removal     monitor name, identifier
///   event       monitor name, identifier, state, date ns, refinement flag (+ uuid, major, minor),
///               diagnostics, explanation (source, lat, lon, accuracy, edge distance, dwell ms,
///               RSSI filtered, min, max, samples, distance)
///   checkpoint  one entry per record: condition, then event (its lastEvent)
public enum LogPayload {
    /// A condition's payload without a shape's vertices; each vertex adds 16 bytes
    /// (`conditionSize`), and a shape has at most `GeoPolygon.maximumVertices`.
    public static let maximumConditionSize = 160

    /// The payload `write(_:_:)` makes of this condition, in bytes (at most
    /// `maximumConditionSize` + 16 × `GeoPolygon.maximumVertices`).
    public static func conditionSize(_ condition: Condition) -> Int {
        switch condition {
        case .circle, .beacon, .phone: return maximumConditionSize
        case .polygon(let polygon): return maximumConditionSize + 16 * polygon.count
        case .corridor(let corridor): return maximumConditionSize + 16 * corridor.latitudes.count
        }
    }

    static func putVertices(_ latitudes: [Double], _ longitudes: [Double], _ writer: inout ByteWriter) {
        writer.put(UInt16(latitudes.count))
        for index in latitudes.indices {
            writer.put(latitudes[index])
            writer.put(longitudes[index])
        }
    }

    static func vertices(_ reader: inout ByteReader) -> (latitudes: [Double], longitudes: [Double])? {
        let count = Int(reader.uint16())
        guard count <= GeoPolygon.maximumVertices else { return nil }
        var latitudes: [Double] = [], longitudes: [Double] = []
        latitudes.reserveCapacity(count)
        longitudes.reserveCapacity(count)
        for _ in 0..<count {
            latitudes.append(reader.double())
            longitudes.append(reader.double())
        }
        return reader.failed ? nil : (latitudes, longitudes)
    }
    public static let maximumEventSize = 200

    public struct ConditionEntry: Equatable, Sendable {
        public var monitor: FixedName
        public var identifier: FixedName
        public var condition: Condition
        public var settings: ConditionSettings
        public var assuming: ConditionState
        /// Declared in the site file (the file stays authoritative for these) or added at run
        /// time through `locus monitor ... add` (kept until removed).
        public var fromSiteFile: Bool

        public init(monitor: FixedName, identifier: FixedName, condition: Condition, settings: ConditionSettings,
                    assuming: ConditionState, fromSiteFile: Bool) {
            self.monitor = monitor
            self.identifier = identifier
            self.condition = condition
            self.settings = settings
            self.assuming = assuming
            self.fromSiteFile = fromSiteFile
        }
    }

    static func stateCode(_ state: ConditionState) -> UInt8 {
        switch state {
        case .unknown: return 0
        case .satisfied: return 1
        case .unsatisfied: return 2
        }
    }

    static func state(_ code: UInt8) -> ConditionState? {
        switch code {
        case 0: return .unknown
        case 1: return .satisfied
        case 2: return .unsatisfied
        default: return nil
        }
    }

    public static func write(_ entry: ConditionEntry, _ writer: inout ByteWriter) {
        writer.put(entry.monitor)
        writer.put(entry.identifier)
        switch entry.condition {
        case .circle(let circle):
            writer.put(UInt8(1))
            writer.put(circle.latitude)
            writer.put(circle.longitude)
            writer.put(circle.radiusM)
        case .beacon(let beacon):
            writer.put(UInt8(2))
            writer.put(beacon.uuid.high)
            writer.put(beacon.uuid.low)
            writer.put(beacon.major.map { UInt32($0) + 1 } ?? 0)
            writer.put(beacon.minor.map { UInt32($0) + 1 } ?? 0)
        case .phone(let phone):
            writer.put(UInt8(5))
            writer.put(phone.name)
        case .polygon(let polygon):
            writer.put(UInt8(3))
            putVertices(polygon.latitudes, polygon.longitudes, &writer)
        case .corridor(let corridor):
            writer.put(UInt8(4))
            writer.put(corridor.widthM)
            putVertices(corridor.latitudes, corridor.longitudes, &writer)
        }
        let settings = entry.settings
        writer.put(settings.enterMarginM)
        writer.put(settings.exitMarginM)
        writer.put(settings.dwellMs)
        writer.put(settings.accuracyGate)
        writer.put(settings.transit)
        writer.put(settings.exitTimeoutMs ?? -1)
        switch settings.proximity {
        case nil: writer.put(UInt8(0))
        case .immediate?: writer.put(UInt8(1))
        case .near?: writer.put(UInt8(2))
        case .far?: writer.put(UInt8(3))
        }
        writer.put(stateCode(entry.assuming))
        writer.put(entry.fromSiteFile)
    }

    public static func readCondition(_ reader: inout ByteReader) -> ConditionEntry? {
        guard let monitor = reader.name(), let identifier = reader.name() else { return nil }
        let condition: Condition
        switch reader.uint8() {
        case 1:
            let latitude = reader.double(), longitude = reader.double(), radius = reader.double()
            guard latitude.isFinite, longitude.isFinite, radius.isFinite, radius > 0 else { return nil }
            condition = .circle(CircularGeographicCondition(latitude: latitude, longitude: longitude, radiusM: radius))
        case 2:
            let uuid = BeaconUUID(high: reader.uint64(), low: reader.uint64())
            let major = reader.uint32(), minor = reader.uint32()
            guard major <= 0x1_0000, minor <= 0x1_0000, minor == 0 || major != 0 else { return nil }
            condition = .beacon(BeaconIdentityCondition(uuid: uuid, major: major == 0 ? nil : UInt16(major - 1),
                                                        minor: minor == 0 ? nil : UInt16(minor - 1)))
        case 3:
            // Checked again as when it was added: a damaged record is refused, not trusted.
            guard let ring = vertices(&reader), let polygon = try? GeoPolygon(latitudes: ring.latitudes, longitudes: ring.longitudes) else { return nil }
            condition = .polygon(polygon)
        case 4:
            let width = reader.double()
            guard let path = vertices(&reader),
                  let corridor = try? GeoCorridor(latitudes: path.latitudes, longitudes: path.longitudes, widthM: width) else { return nil }
            condition = .corridor(corridor)
        case 5:
            guard let name = reader.name() else { return nil }
            condition = .phone(PhoneCondition(name: name))
        default:
            return nil
        }
        var settings = ConditionSettings()
        settings.enterMarginM = reader.double()
        settings.exitMarginM = reader.double()
        settings.dwellMs = reader.int64()
        settings.accuracyGate = reader.bool()
        settings.transit = reader.bool()
        let timeout = reader.int64()
        settings.exitTimeoutMs = timeout < 0 ? nil : timeout
        switch reader.uint8() {
        case 0: settings.proximity = nil
        case 1: settings.proximity = .immediate
        case 2: settings.proximity = .near
        case 3: settings.proximity = .far
        default: return nil
        }
        guard let assuming = state(reader.uint8()) else { return nil }
        let fromSiteFile = reader.bool()
        guard !reader.failed else { return nil }
        return ConditionEntry(monitor: monitor, identifier: identifier, condition: condition, settings: settings,
                              assuming: assuming, fromSiteFile: fromSiteFile)
    }

    public static func writeRemoval(monitor: FixedName, identifier: FixedName, _ writer: inout ByteWriter) {
        writer.put(monitor)
        writer.put(identifier)
    }

    public static func readRemoval(_ reader: inout ByteReader) -> (FixedName, FixedName)? {
        guard let monitor = reader.name(), let identifier = reader.name(), !reader.failed else { return nil }
        return (monitor, identifier)
    }

    @_noAllocation
    public static func write(_ event: MonitorEvent, _ writer: inout ByteWriter) {
        writer.put(event.monitor)
        writer.put(event.identifier)
        writer.put(stateCode(event.state))
        writer.put(event.date.totalNanoseconds)
        if let refinement = event.refinement {
            writer.put(UInt8(1))
            writer.put(refinement.uuid.high)
            writer.put(refinement.uuid.low)
            writer.put(refinement.major)
            writer.put(refinement.minor)
        } else {
            writer.put(UInt8(0))
        }
        writer.put(event.diagnostics.rawValue)
        let explanation = event.explanation
        writer.put(explanation.source.rawValue)
        writer.put(explanation.latitude)
        writer.put(explanation.longitude)
        writer.put(explanation.accuracyM)
        writer.put(explanation.edgeDistanceM)
        writer.put(explanation.dwellMs)
        writer.put(explanation.rssiFiltered)
        writer.put(UInt8(bitPattern: explanation.rssiMinimum))
        writer.put(UInt8(bitPattern: explanation.rssiMaximum))
        writer.put(UInt32(clamping: explanation.rssiSamples))
        writer.put(explanation.distanceM)
    }

    public static func readEvent(_ reader: inout ByteReader) -> MonitorEvent? {
        guard let monitor = reader.name(), let identifier = reader.name(), let state = state(reader.uint8()) else { return nil }
        let date = UTCTime(nanoseconds: reader.int64())
        var refinement: BeaconIdentity? = nil
        if reader.uint8() == 1 {
            refinement = BeaconIdentity(uuid: BeaconUUID(high: reader.uint64(), low: reader.uint64()), major: reader.uint16(), minor: reader.uint16())
        }
        let diagnostics = EventDiagnostics(rawValue: reader.uint8())
        guard let source = Explanation.Source(rawValue: reader.uint8()) else { return nil }
        var explanation = Explanation(source: source)
        explanation.latitude = reader.double()
        explanation.longitude = reader.double()
        explanation.accuracyM = reader.double()
        explanation.edgeDistanceM = reader.double()
        explanation.dwellMs = reader.int64()
        explanation.rssiFiltered = reader.double()
        explanation.rssiMinimum = Int8(bitPattern: reader.uint8())
        explanation.rssiMaximum = Int8(bitPattern: reader.uint8())
        explanation.rssiSamples = Int(reader.uint32())
        explanation.distanceM = reader.double()
        guard !reader.failed else { return nil }
        return MonitorEvent(monitor: monitor, identifier: identifier, state: state, date: date, refinement: refinement,
                            diagnostics: diagnostics, explanation: explanation)
    }
}

/// The agent's own records: fixes (as privacy allows) and GPIO output changes.
///
///   fix    time ns, lat, lon (Double; NaN when not logged), horizontal accuracy (-1 unknown),
///          speed m/s (-1 unknown), track degrees (-1 unknown), mode (1 none, 2 2D, 3 3D)
///   gpio   output name, logical value, cause (see `GPIOCause`), and for event causes the
///          monitor and identifier
extension LogPayload {
    public struct LoggedFix: Equatable, Sendable {
        public var timeNs: Int64
        public var latitude: Double
        public var longitude: Double
        public var accuracyM: Double
        public var speedMps: Double
        public var trackDeg: Double
        public var mode: UInt8

        public init(timeNs: Int64, latitude: Double, longitude: Double, accuracyM: Double, speedMps: Double, trackDeg: Double, mode: UInt8) {
            self.timeNs = timeNs
            self.latitude = latitude
            self.longitude = longitude
            self.accuracyM = accuracyM
            self.speedMps = speedMps
            self.trackDeg = trackDeg
            self.mode = mode
        }
    }

    public static func write(_ fix: LoggedFix, _ writer: inout ByteWriter) {
        writer.put(fix.timeNs)
        writer.put(fix.latitude)
        writer.put(fix.longitude)
        writer.put(fix.accuracyM)
        writer.put(fix.speedMps)
        writer.put(fix.trackDeg)
        writer.put(fix.mode)
    }

    public static func readFix(_ reader: inout ByteReader) -> LoggedFix? {
        let fix = LoggedFix(timeNs: reader.int64(), latitude: reader.double(), longitude: reader.double(), accuracyM: reader.double(),
                            speedMps: reader.double(), trackDeg: reader.double(), mode: reader.uint8())
        return reader.failed ? nil : fix
    }

    /// A visit: arrival and departure (ns since 1970), centre, radius (m), then its kind: 0 at
    /// departure, 1 at arrival (the departure field is then 0 and means nothing). Records written
    /// before visits were reported at arrival (40 bytes, no kind byte) are departures and still read.
    public static func write(_ visit: Visit, _ writer: inout ByteWriter) {
        writer.put(visit.arrival.totalNanoseconds)
        writer.put(visit.departure?.totalNanoseconds ?? 0)
        writer.put(visit.latitude)
        writer.put(visit.longitude)
        writer.put(visit.radiusM)
        writer.put(UInt8(visit.isArrival ? 1 : 0))
    }

    public static func readVisit(_ reader: inout ByteReader) -> Visit? {
        var visit = Visit(arrival: UTCTime(nanoseconds: reader.int64()), departure: UTCTime(nanoseconds: reader.int64()),
                          latitude: reader.double(), longitude: reader.double(), radiusM: reader.double())
        // The kind byte, when the record has one (format of visits reported twice).
        if !reader.isAtEnd {
            switch reader.uint8() {
            case 0: break
            case 1: visit.departure = nil
            default: return nil
            }
        }
        return reader.failed ? nil : visit
    }

    public enum GPIOCause: UInt8, Sendable, CustomStringConvertible {
        case level = 1, pulseStart = 2, pulseEnd = 3, latchSet = 4, latchCleared = 5, restored = 6, safe = 7
        /// A radio's power cut or reset pulse by the self-healing (board `power_line`, `reset_line`).
        case heal = 8
        public var description: String { name.description }
        /// The name in the export (a static string, for writers that must not allocate).
        public var name: StaticString {
            switch self {
            case .level: return "level"
            case .pulseStart: return "pulse-start"
            case .pulseEnd: return "pulse-end"
            case .latchSet: return "latch-set"
            case .latchCleared: return "latch-cleared"
            case .restored: return "restored"
            case .safe: return "safe"
            case .heal: return "heal"
            }
        }
    }

    public struct GPIOChange: Equatable, Sendable {
        public var output: FixedName
        public var value: Bool
        public var cause: GPIOCause
        /// The event's record, for causes that follow from an event.
        public var monitor: FixedName?
        public var identifier: FixedName?

        public init(output: FixedName, value: Bool, cause: GPIOCause, monitor: FixedName? = nil, identifier: FixedName? = nil) {
            self.output = output
            self.value = value
            self.cause = cause
            self.monitor = monitor
            self.identifier = identifier
        }
    }

    public static func write(_ change: GPIOChange, _ writer: inout ByteWriter) {
        writer.put(change.output)
        writer.put(change.value)
        writer.put(change.cause.rawValue)
        if let monitor = change.monitor, let identifier = change.identifier {
            writer.put(UInt8(1))
            writer.put(monitor)
            writer.put(identifier)
        } else {
            writer.put(UInt8(0))
        }
    }

    public static func readGPIO(_ reader: inout ByteReader) -> GPIOChange? {
        guard let output = reader.name() else { return nil }
        let value = reader.bool()
        guard let cause = GPIOCause(rawValue: reader.uint8()) else { return nil }
        var change = GPIOChange(output: output, value: value, cause: cause)
        if reader.uint8() == 1 {
            guard let monitor = reader.name(), let identifier = reader.name() else { return nil }
            change.monitor = monitor
            change.identifier = identifier
        }
        return reader.failed ? nil : change
    }
}

/// `consumer`: monitor name, then the sequence number of the last event its consumer took.
extension LogPayload {
    public static func writeConsumer(monitor: FixedName, sequence: UInt64, _ writer: inout ByteWriter) {
        writer.put(monitor)
        writer.put(sequence)
    }

    public static func readConsumer(_ reader: inout ByteReader) -> (FixedName, UInt64)? {
        guard let monitor = reader.name() else { return nil }
        let sequence = reader.uint64()
        return reader.failed ? nil : (monitor, sequence)
    }
}

/// The uplink's cursor: the last record the broker acknowledged (every record up to it was
/// delivered, so a restart resends from the one after it), and `chained`, the last record up to
/// it of a kind the uplink publishes with "prev" (events, GPIO changes, visits): the first record
/// published after a restart names it as its "prev". nil: not known (a cursor written before the
/// uplink kept it).
public struct UplinkCursor: Equatable, Sendable {
    public var delivered: UInt64
    public var chained: UInt64?

    public init(delivered: UInt64, chained: UInt64?) {
        self.delivered = delivered
        self.chained = chained
    }
}

/// `uplink`: the cursor's delivered sequence number (UInt64), then a presence byte (1: the
/// chained sequence number follows, UInt64). Records written before the chain end after the
/// first UInt64 and read as "chained not known"; an older reader reads the first and ignores
/// the rest. Checkpoints end with the same bytes after their own presence byte.
extension LogPayload {
    public static func writeUplink(_ cursor: UplinkCursor, _ writer: inout ByteWriter) {
        writer.put(cursor.delivered)
        writer.put(UInt8(cursor.chained == nil ? 0 : 1))
        if let chained = cursor.chained { writer.put(chained) }
    }

    public static func readUplink(_ reader: inout ByteReader) -> UplinkCursor? {
        let delivered = reader.uint64()
        guard !reader.failed else { return nil }
        guard !reader.isAtEnd, reader.uint8() == 1 else { return UplinkCursor(delivered: delivered, chained: nil) }
        let chained = reader.uint64()
        return reader.failed ? nil : UplinkCursor(delivered: delivered, chained: chained)
    }
}
