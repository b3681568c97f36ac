/// The uplink's MQTT payloads, one JSON object each (no newline), written into the caller's
/// `JSONWriter`. A payload for a log record begins with "gateway" and carries the record's
/// sequence number as "seq": QoS 1 may deliver a message twice, and a store that keys on
/// (gateway, seq) keeps exactly one copy. Names and spellings are those of `locus events` and
/// `locus log export`, so one parser reads all three.
///
/// Events, GPIO changes and visits also carry "prev": the sequence number of the previous record
/// of those kinds that the uplink publishes (0: none before it in the log; null: not known, after
/// a log written before the uplink kept it). A store that finds a record whose "prev" it does not
/// hold knows that the records between were lost (a gap), although the log's sequence numbers
/// also count records that are never published (checkpoints, fixes, cursors).
///
/// Gateway ids, prefixes and versions are bytes (`UplinkTopics.gateway` and `.prefix` hold
/// them), so that the payloads of the loop allocate nothing. The `maximum…Bytes` constants
/// bound each payload for a gateway id the `[uplink]` check accepts (at most 64 bytes, nothing
/// to escape), a prefix `UplinkTopics.prefixProblem` accepts (at most 200 bytes, each at worst
/// escaped to two), a version of at most `maximumVersionBytes` and times in years 0...9999.
public enum UplinkJSON {
    public static let maximumVersionBytes = 32

    // The longest payloads `UplinkPayloadTests` renders take 642 (event), 343 (state), 314
    // (gpio), 268 (visit), 291 (fix), 214 (sighting), 124 (test) and 1,844 bytes (discovery:
    // the escaped prefix twice); each bound leaves a little room above its payload.
    // Events, visits and fixes may carry a place (`[geocoding] annotate`): room for one more.
    public static let maximumEventBytes = 768 + PlaceLabels.maximumMemberBytes
    public static let maximumStateBytes = 384
    public static let maximumGPIOBytes = 384
    public static let maximumVisitBytes = 320 + PlaceLabels.maximumMemberBytes
    public static let maximumFixBytes = 320 + PlaceLabels.maximumMemberBytes
    public static let maximumSightingBytes = 256
    public static let maximumTestBytes = 160
    /// Home Assistant discovery configs (`discoveryCondition`, `discoveryOutput`).
    public static let maximumDiscoveryBytes = 2048
    /// A remote record: its fixed members, an id of safe bytes, a reason every byte of which
    /// may need a six-byte escape, and the detail as it is (JSON already).
    public static let maximumRemoteBytes = 320 + 2 * LogPayload.RemoteResult.maximumIDBytes + 6 * LogPayload.RemoteResult.maximumReasonBytes
        + LogPayload.RemoteResult.maximumDetailBytes

    /// A condition's kind, which picks the Home Assistant device class.
    public enum ConditionKind: Sendable {
        /// A circle, polygon or corridor: "presence" (someone or something is home).
        case geographic
        /// A beacon identity: "occupancy" (a space is taken).
        case beacon

        public init(_ condition: Condition) {
            self = condition.isGeographic ? .geographic : .beacon
        }
    }

    // MARK: log records

    /// `{"gateway":..,"monitor":..,"identifier":..,"state":..,"date":..,"seq":..,"refinement":..,
    /// "diagnostics":[..],"explain":{..},"prev":..}`: `EventJSON`'s object with the gateway first
    /// (and its `"place"` with `places`), "prev" last.
    @_noAllocation
    public static func event(_ event: MonitorEvent, sequence: UInt64, previous: UInt64?, gateway: UnsafeRawBufferPointer, places: PlaceLabels? = nil,
                             into line: inout JSONWriter) {
        line.beginObject()
        line.key("gateway")
        line.string(bytes: gateway)
        EventJSON.writeMembers(event, sequence: Int64(sequence), places: places, into: &line)
        writePrevious(previous, into: &line)
        line.endObject()
    }

    /// The record's state after the event, for its retained state topic (what a subscriber
    /// that arrives later reads first): gateway, seq, monitor, identifier, state, date, refinement.
    @_noAllocation
    public static func state(_ event: MonitorEvent, sequence: UInt64, gateway: UnsafeRawBufferPointer, into line: inout JSONWriter) {
        begin(gateway, sequence, into: &line)
        line.string("monitor", event.monitor)
        line.string("identifier", event.identifier)
        line.string("state", event.state.name)
        line.time("date", event.date)
        EventJSON.writeRefinement(event.refinement, into: &line)
        line.endObject()
    }

    /// An output change as the log export writes it, with the record's time: gateway, seq,
    /// output, value, cause, time, and the event's monitor and identifier when one caused it.
    @_noAllocation
    public static func gpio(_ change: LogPayload.GPIOChange, time: UTCTime, sequence: UInt64, previous: UInt64?, gateway: UnsafeRawBufferPointer,
                            into line: inout JSONWriter) {
        begin(gateway, sequence, into: &line)
        line.string("output", change.output)
        line.boolean("value", change.value)
        line.string("cause", change.cause.name)
        line.time("time", time)
        if let monitor = change.monitor, let identifier = change.identifier {
            line.string("monitor", monitor)
            line.string("identifier", identifier)
        }
        writePrevious(previous, into: &line)
        line.endObject()
    }

    /// What the gateway did with a configuration or a command from the fleet (docs/remote.md):
    /// gateway, seq, time, then version, result and digest, or id, action and result; the reason
    /// of a refusal or failure; prev.
    public static func remote(_ remote: LogPayload.RemoteResult, time: UTCTime, sequence: UInt64, previous: UInt64?,
                              gateway: UnsafeRawBufferPointer, into line: inout JSONWriter) {
        begin(gateway, sequence, into: &line)
        line.time("time", time)
        switch remote.kind {
        case .config:
            line.integer("version", remote.version)
        case .command:
            line.key("id")
            remote.id.withUnsafeBytes { line.string(bytes: $0) }
            line.key("action")
            remote.action.withUnsafeBytes { line.string(bytes: $0) }
        }
        line.string("result", remote.result.name)
        if !remote.digest.isEmpty { line.string("digest", remote.digest.withUnsafeBytes { HexText.string($0) }) }
        if !remote.reason.isEmpty {
            line.key("reason")
            remote.reason.withUnsafeBytes { line.string(bytes: $0) }
        }
        if !remote.detail.isEmpty { remote.detail.withUnsafeBytes { line.raw("detail", $0) } }
        writePrevious(previous, into: &line)
        line.endObject()
    }

    /// gateway, seq, then the visit's arrival, departure (null at arrival), lat, lon, radius
    /// (and place, with `places`).
    @_noAllocation
    public static func visit(_ visit: Visit, sequence: UInt64, previous: UInt64?, gateway: UnsafeRawBufferPointer, places: PlaceLabels? = nil,
                             into line: inout JSONWriter) {
        begin(gateway, sequence, into: &line)
        UpdateJSON.writeMembers(visit, places: places, into: &line)
        writePrevious(previous, into: &line)
        line.endObject()
    }

    /// A logged fix with the export's names: gateway, seq, time (the fix's), mode, lat, lon, eph,
    /// speed, track. What was not logged is left out, as the export leaves it out: the position
    /// under `[privacy] fixes = "none"` (NaN in the record) and unknown accuracy, speed or track.
    /// With `places`, the place nearest the fix last.
    @_noAllocation
    public static func fix(_ fix: LogPayload.LoggedFix, sequence: UInt64, gateway: UnsafeRawBufferPointer, places: PlaceLabels? = nil,
                           into line: inout JSONWriter) {
        begin(gateway, sequence, into: &line)
        line.time("time", UTCTime(nanoseconds: fix.timeNs))
        line.integer("mode", Int(fix.mode))
        if fix.latitude.isFinite && fix.longitude.isFinite {
            line.number("lat", fix.latitude, decimals: 9)
            line.number("lon", fix.longitude, decimals: 9)
        }
        if fix.accuracyM >= 0 { line.number("eph", fix.accuracyM, decimals: 1) }
        if fix.speedMps >= 0 { line.number("speed", fix.speedMps, decimals: 3) }
        if fix.trackDeg >= 0 { line.number("track", fix.trackDeg, decimals: 1) }
        places?.writeMember(latitude: fix.latitude, longitude: fix.longitude, into: &line)
        line.endObject()
    }

    // MARK: live messages (not log records: no seq)

    /// A beacon sighting for live publishing at QoS 0: gateway, uuid, major, minor, rssi (null
    /// when the report had none), tx_power (the frame's measured power at 1 m), time. Sightings
    /// are not log records, so there is no seq: a lost or repeated one is of no consequence.
    @_noAllocation
    public static func sighting(_ sighting: Sighting, gateway: UnsafeRawBufferPointer, into line: inout JSONWriter) {
        line.beginObject()
        line.key("gateway")
        line.string(bytes: gateway)
        line.string("uuid", sighting.identity.uuid)
        line.integer("major", Int64(sighting.identity.major))
        line.integer("minor", Int64(sighting.identity.minor))
        if let rssi = sighting.rssi { line.integer("rssi", Int64(rssi)) } else { line.null("rssi") }
        line.integer("tx_power", Int64(sighting.measuredPower))
        line.time("time", sighting.time)
        line.endObject()
    }

    // MARK: presence summaries (docs/presence.md)

    /// Tags one presence message may carry (`presence_tags`), and what each and the rest take.
    public static let presenceTagsMaximum = 256
    public static let maximumPresenceTagBytes = 224
    public static let maximumPresenceFrameBytes = 256

    /// `{"gateway":..,"time":..,"period_ms":..,"tags":[`: a presence message's start; the tags
    /// follow (`presenceTag`), then `presenceEnd`.
    @_noAllocation
    public static func presenceStart(gateway: UnsafeRawBufferPointer, time: UTCTime, periodMs: Int64, into line: inout JSONWriter) {
        line.beginObject()
        line.key("gateway")
        line.string(bytes: gateway)
        line.time("time", time)
        line.integer("period_ms", periodMs)
        line.beginArray("tags")
    }

    /// One tag's period: `{"uuid":..,"major":..,"minor":..}` (or `{"phone":..}`), then `rssi`
    /// (the filtered RSSI, dBm), `count`, `min`, `max`, `power` (its RSSI at 1 m) and `distance_m`
    /// (the gateway's own estimate, null without a power).
    @_noAllocation
    public static func presenceTag(_ entry: PresenceSummary.Entry, phone: FixedName?, into line: inout JSONWriter) {
        line.beginObject()
        if let phone {
            line.string("phone", phone)
        } else {
            line.string("uuid", entry.tag.uuid)
            line.integer("major", Int64(entry.tag.major))
            line.integer("minor", Int64(entry.tag.minor))
        }
        line.number("rssi", entry.rssiDBm, decimals: 1)
        line.integer("count", Int64(entry.count))
        line.integer("min", Int64(entry.rssiMinimumDBm))
        line.integer("max", Int64(entry.rssiMaximumDBm))
        line.integer("power", Int64(entry.measuredPowerDBm))
        if let distance = entry.distanceM { line.number("distance_m", distance, decimals: 2) } else { line.null("distance_m") }
        line.endObject()
    }

    /// `],"more":..,"dropped":..}`: the tags left out for `presence_tags`, and the readings the
    /// summary's table had no room for.
    @_noAllocation
    public static func presenceEnd(_ report: PresenceSummary.DrainReport, into line: inout JSONWriter) {
        line.endArray()
        line.integer("more", Int64(report.tagsOverLimit))
        line.integer("dropped", Int64(report.readingsDropped))
        line.endObject()
    }

    /// `locus uplink test`'s message: `{"gateway":..,"test":true,"time":..}`.
    @_noAllocation
    public static func test(gateway: UnsafeRawBufferPointer, time: UTCTime, into line: inout JSONWriter) {
        line.beginObject()
        line.key("gateway")
        line.string(bytes: gateway)
        line.boolean("test", true)
        line.time("time", time)
        line.endObject()
    }

    // MARK: Home Assistant discovery

    /// A condition as a read-only binary sensor on its retained state topic. The state
    /// "unknown" (a record not decided yet) becomes Home Assistant's unknown ('None'), not a
    /// payload it would warn about.
    @_noAllocation
    public static func discoveryCondition(monitor: FixedName, identifier: FixedName, kind: ConditionKind,
                                          gateway: UnsafeRawBufferPointer, prefix: UnsafeRawBufferPointer,
                                          version: UnsafeRawBufferPointer, into line: inout JSONWriter) {
        line.beginObject()
        line.beginString("name")
        line.stringPart(monitor)
        line.stringPart(" ")
        line.stringPart(identifier)
        line.endString()
        objectIDs(gateway, monitor, identifier, into: &line)
        line.beginString("state_topic")
        line.stringPart(prefix)
        line.stringPart("/state/")
        line.stringPart(monitor)
        line.stringPart("/")
        line.stringPart(identifier)
        line.endString()
        line.string("value_template", "{{ value_json.state if value_json.state in ['satisfied', 'unsatisfied'] else 'None' }}")
        line.string("payload_on", "satisfied")
        line.string("payload_off", "unsatisfied")
        line.string("device_class", kind == .geographic ? "presence" : "occupancy")
        availabilityAndDevice(gateway, prefix, version, into: &line)
        line.endObject()
    }

    /// A GPIO output as a read-only binary sensor on `<prefix>/gpio/<output>`: Home Assistant
    /// shows it unknown until a change arrives there, unless the last one was published retained.
    @_noAllocation
    public static func discoveryOutput(output: FixedName, gateway: UnsafeRawBufferPointer, prefix: UnsafeRawBufferPointer,
                                       version: UnsafeRawBufferPointer, into line: inout JSONWriter) {
        line.beginObject()
        line.beginString("name")
        line.stringPart("GPIO ")
        line.stringPart(output)
        line.endString()
        objectIDs(gateway, nil, output, into: &line)
        line.beginString("state_topic")
        line.stringPart(prefix)
        line.stringPart("/gpio/")
        line.stringPart(output)
        line.endString()
        line.string("value_template", "{{ 'ON' if value_json.value else 'OFF' }}")
        line.string("device_class", "power")
        availabilityAndDevice(gateway, prefix, version, into: &line)
        line.endObject()
    }

    // MARK: parts

    /// "prev", last: the previous published record's sequence number, or null when unknown.
    @inline(__always)
    private static func writePrevious(_ previous: UInt64?, into line: inout JSONWriter) {
        if let previous { line.integer("prev", previous) } else { line.null("prev") }
    }

    @inline(__always)
    private static func begin(_ gateway: UnsafeRawBufferPointer, _ sequence: UInt64, into line: inout JSONWriter) {
        line.beginObject()
        line.key("gateway")
        line.string(bytes: gateway)
        line.integer("seq", sequence)
    }

    /// "unique_id": `locus_<gateway>_<monitor>_<identifier>` or `locus_<gateway>_gpio_<output>`
    /// (`UplinkTopics`' object id, which names the discovery topic too), and "default_entity_id":
    /// the same words as an entity id. Home Assistant 2025.10 replaced `object_id` with
    /// `default_entity_id` (`object_id` stops working in 2026.4); older versions drop keys they do
    /// not know from discovery, and the entity id they make from the device's and entity's names
    /// comes out the same.
    @_noAllocation
    private static func objectIDs(_ gateway: UnsafeRawBufferPointer, _ monitor: FixedName?, _ name: FixedName, into line: inout JSONWriter) {
        line.beginString("unique_id")
        line.stringPart("locus_")
        for byte in gateway { line.stringPart(byte: UplinkTopics.objectIDByte(byte)) }
        line.stringPart("_")
        if let monitor { line.stringPart(monitor) } else { line.stringPart("gpio") }
        line.stringPart("_")
        line.stringPart(name)
        line.endString()

        line.beginString("default_entity_id")
        line.stringPart("binary_sensor.locus")
        var slug = EntitySlug()
        slug.word(gateway, into: &line)
        if let monitor { slug.word(monitor, into: &line) } else { line.stringPart("_gpio") }
        slug.word(name, into: &line)
        line.endString()
    }

    /// "availability_topic" (`<prefix>/status`, where the will says offline) and the gateway
    /// as the entities' device.
    @_noAllocation
    private static func availabilityAndDevice(_ gateway: UnsafeRawBufferPointer, _ prefix: UnsafeRawBufferPointer,
                                              _ version: UnsafeRawBufferPointer, into line: inout JSONWriter) {
        line.beginString("availability_topic")
        line.stringPart(prefix)
        line.stringPart("/status")
        line.endString()
        line.string("payload_available", "online")
        line.string("payload_not_available", "offline")
        line.beginObject("device")
        line.beginArray("identifiers")
        line.beginString()
        line.stringPart("locus_")
        for byte in gateway { line.stringPart(byte: UplinkTopics.objectIDByte(byte)) }
        line.endString()
        line.endArray()
        line.beginString("name")
        line.stringPart("Locus ")
        line.stringPart(gateway)
        line.endString()
        line.string("manufacturer", "Locus")
        line.string("model", "beacon gateway")
        line.key("sw_version")
        line.string(bytes: version)
        line.endObject()
    }
}

/// The words of an entity id after "binary_sensor.locus": Home Assistant accepts lower-case
/// letters, digits and single underscores that neither start nor end it. Each piece starts a
/// new word; letters are lowered, and any other byte separates words.
private struct EntitySlug {
    /// An underscore is due before the next letter or digit (so none ends the id).
    private var separatorDue = true

    @inline(__always)
    mutating func word(_ bytes: UnsafeRawBufferPointer, into line: inout JSONWriter) {
        separatorDue = true
        for byte in bytes { append(byte, into: &line) }
    }

    @inline(__always)
    mutating func word(_ name: FixedName, into line: inout JSONWriter) {
        separatorDue = true
        for index in 0..<name.count { append(name[index], into: &line) }
    }

    @inline(__always)
    private mutating func append(_ byte: UInt8, into line: inout JSONWriter) {
        let lower = byte | 0x20
        let isLetter = lower >= 0x61 && lower <= 0x7A
        guard isLetter || isDigit(byte) else {
            separatorDue = true
            return
        }
        if separatorDue { line.stringPart(byte: UInt8(ascii: "_")) }
        separatorDue = false
        line.stringPart(byte: isLetter ? lower : byte)
    }
}
