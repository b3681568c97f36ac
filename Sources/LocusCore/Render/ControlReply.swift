/// The control protocol's replies and stream items as JSON lines, written into the caller's
/// `JSONWriter` (see README, "The control protocol"). Every function writes whole lines, newline
/// included, except `ok(_:into:)`, which opens a reply the caller completes with its members and
/// closes with `end(into:)`:
///
///     ControlReply.ok(7, into: &line)           // {"id":7,"ok":true
///     line.integer("last_seq", 42)              // ,"last_seq":42
///     ControlReply.end(into: &line)             // }\n
///
/// The agent sends `line.bytes` as they are: no String is made for a reply or an event.
public enum ControlReply {
    /// Opens a success reply: `{"id":7,"ok":true` (no id when the request had none).
    @_noAllocation
    public static func ok(_ id: Int64?, into line: inout JSONWriter) {
        line.beginObject()
        if let id { line.integer("id", id) }
        line.boolean("ok", true)
    }

    /// Closes a reply `ok(_:into:)` opened, and ends the line.
    @_noAllocation
    public static func end(into line: inout JSONWriter) {
        line.endObject()
        line.newline()
    }

    /// A whole success reply with one `result` member: `{"id":7,"ok":true,"result":"removed"}`.
    @_noAllocation
    public static func ok(_ id: Int64?, result: StaticString, into line: inout JSONWriter) {
        ok(id, into: &line)
        line.string("result", result)
        end(into: &line)
    }

    /// `{"id":7,"ok":false,"error":{"code":"not_found","message":"..."}}` (`"id":null` when the
    /// request's id could not be read).
    public static func error(_ id: Int64?, _ error: ControlError, into line: inout JSONWriter) {
        line.beginObject()
        if let id { line.integer("id", id) } else { line.null("id") }
        line.boolean("ok", false)
        line.beginObject("error")
        line.string("code", error.code.rawValue)
        line.string("message", error.message)
        line.endObject()
        end(into: &line)
    }

    /// A subscriber's event: `{"event":{...}}` (the event as `EventJSON` writes it, annotated
    /// with `places`).
    public static func event(_ event: MonitorEvent, sequence: UInt64, places: PlaceLabels? = nil, into line: inout JSONWriter) {
        line.beginObject()
        line.key("event")
        EventJSON.write(event, sequence: Int64(sequence), places: places, into: &line)
        end(into: &line)
    }

    /// A stream's update: `{"update":{TPV members,"isStationary":..,"diagnostics":[..],"batch":3,
    /// "flush":"count"}}`. The batch's number and flush reason are members of the update object
    /// itself (the wire format since protocol version 1): `UpdateJSON` renders the object into
    /// `scratch`, and its members go into an object this writer opens, so the separators stay
    /// the writer's business.
    /// With `simulated` (a simulated receiver's fix: `BoardConfig.GNSS.isSimulated`), the update
    /// says `"simulated":true`.
    public static func update(_ update: LocationUpdate, batch: Int, flush: FlushReason, places: PlaceLabels? = nil, simulated: Bool = false,
                              scratch: inout JSONWriter, into line: inout JSONWriter) {
        scratch.reset()
        UpdateJSON.write(update, places: places, into: &scratch)
        let object = scratch.bytes
        // A TPV object always has members ("class" first): `{` + members + `}`.
        precondition(!scratch.overflowed && object.count > 2 && object[0] == UInt8(ascii: "{")
                     && object[object.count - 1] == UInt8(ascii: "}"), "an update renders as a non-empty object")
        line.beginObject()
        line.beginObject("update")
        line.raw(UnsafeRawBufferPointer(rebasing: object[1..<(object.count - 1)]))
        line.integer("batch", batch)
        line.string("flush", name(flush))
        if simulated && update.fix.hasPosition { line.boolean("simulated", true) }
        line.endObject()
        end(into: &line)
    }

    /// A stream's visit: `{"visit":{...}}`.
    public static func visit(_ visit: Visit, places: PlaceLabels? = nil, into line: inout JSONWriter) {
        line.beginObject()
        line.key("visit")
        UpdateJSON.write(visit, places: places, into: &line)
        end(into: &line)
    }

    // MARK: single location request and visits

    /// A located reply: `{"id":7,"ok":true,"result":{"fix":{TPV},"age_s":1.5,"accuracy_limited":false}}`,
    /// with `places` and a place within reach `"place":{..}` in the result too.
    @_noAllocation
    public static func located(_ id: Int64?, _ fix: Fix, ageMs: Int64, accuracyLimited: Bool, places: PlaceLabels? = nil,
                               simulated: Bool = false, into line: inout JSONWriter) {
        ok(id, into: &line)
        line.key("result")
        location(fix, ageMs: ageMs, accuracyLimited: accuracyLimited, places: places, simulated: simulated, into: &line)
        end(into: &line)
    }

    /// A location request's answer as one object: `{"fix":{TPV},"age_s":1.5,"accuracy_limited":false}`
    /// (and `place`): a located reply's `result`, and the fleet's `locate` record's `detail`.
    @_noAllocation
    public static func location(_ fix: Fix, ageMs: Int64, accuracyLimited: Bool, places: PlaceLabels?, simulated: Bool = false,
                                into line: inout JSONWriter) {
        line.beginObject()
        line.key("fix")
        FixJSON.write(fix, into: &line)
        line.number("age_s", Double(max(0, ageMs)) / 1_000, decimals: 3)
        line.boolean("accuracy_limited", accuracyLimited)
        if simulated { line.boolean("simulated", true) }
        if let places, fix.hasPosition, let latitude = fix.latitude, let longitude = fix.longitude {
            places.writeMember(latitude: latitude, longitude: longitude, into: &line)
        }
        line.endObject()
    }

    /// A visit record in a `visits` reply (an array element): the VISIT members and `seq`.
    @_noAllocation
    public static func visitRecord(_ visit: Visit, sequence: UInt64, places: PlaceLabels? = nil, into line: inout JSONWriter) {
        line.beginObject()
        line.integer("seq", sequence)
        UpdateJSON.writeMembers(visit, places: places, into: &line)
        line.endObject()
    }

    /// A located reply's error: no fix with a position before the timeout.
    public static func locationUnavailable(_ id: Int64?, timeoutMs: Int64, into line: inout JSONWriter) {
        error(id, ControlError(.locationUnavailable, "no fix with a position within the timeout (\(timeoutMs / 1000) s): the receiver has no sky view, or is not connected"), into: &line)
    }

    // MARK: geocoding

    /// A `reverse_geocode` reply: `{"id":7,"ok":true,"place":{PlaceJSON}}`, `"place":null` when
    /// no place is within reach.
    @_noAllocation
    public static func place(_ id: Int64?, _ match: PlaceMatch?, in index: PlaceIndex, into line: inout JSONWriter) {
        ok(id, into: &line)
        if let match {
            line.key("place")
            PlaceJSON.write(match, in: index, into: &line)
        } else {
            line.null("place")
        }
        end(into: &line)
    }

    /// A `geocode` reply: `{"id":7,"ok":true,"total":N,"places":[PlaceJSON...]}`, the places
    /// ranked, each with `distance_m` from the point they were ranked by when there was one.
    @_noAllocation
    public static func places(_ id: Int64?, total: Int, _ candidates: UnsafeMutableBufferPointer<PlaceCandidate>, in index: PlaceIndex,
                              into line: inout JSONWriter) {
        ok(id, into: &line)
        line.integer("total", total)
        line.beginArray("places")
        for position in 0..<candidates.count {
            PlaceJSON.write(candidates[position].place, in: index, distanceM: candidates[position].distanceM, bearingDeg: .nan, into: &line)
        }
        line.endArray()
        end(into: &line)
    }

    /// `"key":["a","b"]`.
    @_noAllocation
    public static func names(_ key: StaticString, _ names: [FixedName], into line: inout JSONWriter) {
        line.beginArray(key)
        for index in names.indices { line.string(names[index]) }
        line.endArray()
    }

    /// A record as `locus monitor` shows it, its last event filtered per `[privacy]` (an array
    /// element or, after a key, a member's value).
    public static func record(_ identifier: FixedName, _ record: MonitorEngine.Record, _ privacy: SiteConfig.FixPrivacy,
                              places: PlaceLabels? = nil, into line: inout JSONWriter) {
        var filtered = record
        filtered.lastEvent = PrivacyFilter.event(record.lastEvent, privacy)
        RecordJSON.write(identifier, filtered, places: places, into: &line)
    }

    /// "relay1, relay2" for a message ("none" for an empty list).
    public static func list(_ names: [FixedName]) -> String {
        var text = ""
        for (index, name) in names.enumerated() { text += (index == 0 ? "" : ", ") + name.description }
        return text.isEmpty ? "none" : text
    }

    @_noAllocation
    public static func name(_ reason: FlushReason) -> StaticString {
        switch reason {
        case .count: return "count"
        case .age: return "age"
        case .event: return "event"
        case .end: return "end"
        }
    }
}

/// The pause's phase as `locus status` names it.
public enum PauseText {
    @_noAllocation
    public static func phase(_ phase: PauseController.Phase) -> StaticString {
        switch phase {
        case .active: return "active"
        case .asleep: return "paused"
        case .probing: return "probing"
        case .held: return "held awake (motion input)"
        case .requested: return "awake for a location request"
        case .nearEdge: return "awake near a fence edge"
        }
    }
}
