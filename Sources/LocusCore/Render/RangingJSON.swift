/// Beacon ranging's stream lines (the control protocol's `range` op, `locus range --json`):
///
///     {"ranging":{"uuid":"E2C5...","major":100},"time":"2024-03-15T10:00:05.000Z",
///      "beacons":[{"uuid":"E2C5...","major":100,"minor":2,"rssi":-63.4,"distance_m":1.47,
///                  "proximity":"near","last_heard":"2024-03-15T10:00:04.500Z"}, ...],
///      "more":0,"refused":0}
///
/// `beacons` is nearest first, at most `beaconsPerLine`; `more` counts the matching beacons
/// beyond them, `refused` the sightings of matching beacons the ranger's full table did not
/// track since the previous line. `rssi` and `distance_m` are null when unknown (CLBeacon's
/// rssi 0 and accuracy -1).
public enum RangingJSON {
    /// The most one beacon takes in a line, comma included (the longest UUID, major, minor,
    /// RSSI, distance, category and time; `RangingTests` renders the worst case).
    public static let maximumBeaconBytes = 200
    /// The most a line takes besides its beacons (constraint, time, counts, newline).
    public static let maximumFrameBytes = 256

    /// The constraint as an object: `{"uuid":..}`, with `major` and `minor` when it names them;
    /// `{"phone":..}` for the identity of one of `phones`.
    @_noAllocation
    public static func constraint(_ constraint: BeaconIdentityConstraint, into line: inout JSONWriter,
                                  phones: Unmanaged<PhoneResolution>? = nil) {
        line.beginObject()
        if constraint.uuid == PhoneCondition.uuid, let minor = constraint.minor, let name = phoneName(Int(minor), phones) {
            line.string("phone", name)
            line.endObject()
            return
        }
        line.string("uuid", constraint.uuid)
        if let major = constraint.major { line.integer("major", Int64(major)) }
        if let minor = constraint.minor { line.integer("minor", Int64(minor)) }
        line.endObject()
    }

    /// One beacon as an array element (one of `phones` as `"phone":..`).
    @_noAllocation
    public static func beacon(_ beacon: RangedBeacon, into line: inout JSONWriter, phones: Unmanaged<PhoneResolution>? = nil) {
        line.beginObject()
        if beacon.identity.uuid == PhoneCondition.uuid, let name = phoneName(Int(beacon.identity.minor), phones) {
            line.string("phone", name)
        } else {
            line.string("uuid", beacon.identity.uuid)
            line.integer("major", Int64(beacon.identity.major))
            line.integer("minor", Int64(beacon.identity.minor))
        }
        if let rssi = beacon.rssi { line.number("rssi", rssi, decimals: 1) } else { line.null("rssi") }
        if let distance = beacon.distanceM { line.number("distance_m", distance, decimals: 2) } else { line.null("distance_m") }
        line.string("proximity", proximityName(beacon.proximity))
        line.time("last_heard", beacon.lastHeard)
        line.endObject()
    }

    /// A whole line for the frame `ranger.range` just returned, newline included.
    @_noAllocation
    public static func frame(_ constraint: BeaconIdentityConstraint, time: UTCTime, _ frame: BeaconRanger.Frame, _ ranger: BeaconRanger,
                             beaconsPerLine: Int, into line: inout JSONWriter, phones: Unmanaged<PhoneResolution>? = nil) {
        let listed = frame.count < beaconsPerLine ? frame.count : beaconsPerLine
        line.beginObject()
        line.key("ranging")
        self.constraint(constraint, into: &line, phones: phones)
        line.time("time", time)
        line.beginArray("beacons")
        for index in 0..<listed { beacon(ranger.beacon(index), into: &line, phones: phones) }
        line.endArray()
        line.integer("more", frame.count - listed)
        line.integer("refused", frame.refused)
        line.endObject()
        line.newline()
    }

    @_noAllocation @inline(__always)
    static func phoneName(_ number: Int, _ phones: Unmanaged<PhoneResolution>?) -> FixedName? {
        guard let phones else { return nil }
        return phones._withUnsafeGuaranteedRef { $0.name(engineNumber: number) }
    }

    @_noAllocation
    public static func proximityName(_ proximity: BeaconProximity) -> StaticString {
        switch proximity {
        case .unknown: return "unknown"
        case .immediate: return "immediate"
        case .near: return "near"
        case .far: return "far"
        }
    }
}
