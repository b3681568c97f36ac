/// gpsd's TPV report, with gpsd's field names and precision:
/// {"class":"TPV","mode":3,"time":"2020-02-02T00:01:47.000Z","lat":44.068783300,"lon":-121.314069050,...}
public enum FixJSON {
    /// The TPV object (no newline) into `line`.
    @_noAllocation
    public static func write(_ fix: Fix, into line: inout JSONWriter) {
        line.beginObject()
        writeMembers(fix, into: &line)
        line.endObject()
    }

    /// The TPV's members, for objects that extend it (live updates).
    @_noAllocation
    public static func writeMembers(_ fix: Fix, into line: inout JSONWriter) {
        line.string("class", "TPV")
        line.integer("mode", fix.mode.rawValue)
        if let time = fix.time { line.time("time", time) }
        guard fix.hasPosition, let latitude = fix.latitude, let longitude = fix.longitude else { return }
        line.number("lat", latitude, decimals: 9)
        line.number("lon", longitude, decimals: 9)
        if fix.mode == .threeDimensional, let altitude = fix.altitudeMSLM {
            line.number("altMSL", altitude, decimals: 4)
            if let separation = fix.geoidSeparationM {
                line.number("altHAE", altitude + separation, decimals: 4)
                line.number("geoidSep", separation, decimals: 3)
            }
        }
        if let speed = fix.speedMps { line.number("speed", speed, decimals: 3) }
        if let track = fix.trackDeg { line.number("track", track, decimals: 4) }
        if let accuracy = fix.horizontalAccuracyM { line.number("eph", accuracy, decimals: 3) }
        if let quality = fix.quality { line.integer("status", quality.rawValue) }
        if let satellites = fix.satellitesUsed { line.integer("satellites_used", satellites) }
    }

}

/// Live updates and visits as JSON: a TPV with `isStationary` and `diagnostics`, and VISIT.
public enum UpdateJSON {
    /// The update object (no newline) into `line`: the TPV's members, then isStationary and
    /// diagnostics, and with `places` the place nearest the fix (`"place"`, when within reach).
    @_noAllocation
    public static func write(_ update: LocationUpdate, places: PlaceLabels? = nil, into line: inout JSONWriter) {
        line.beginObject()
        writeMembers(update, places: places, into: &line)
        line.endObject()
    }

    /// The update's members, for objects that extend it (the replay's batch and flush).
    @_noAllocation
    public static func writeMembers(_ update: LocationUpdate, places: PlaceLabels? = nil, into line: inout JSONWriter) {
        var fix = update.fix
        if fix.time == nil { fix.time = update.time }
        if !fix.hasPosition && fix.mode == .unknown { fix.mode = .noFix }
        FixJSON.writeMembers(fix, into: &line)
        // Not in the TPV (whose members are gpsd's, byte for byte): the vertical accuracy as
        // `eph` is the horizontal one, about 1 sigma, for Core Location's `verticalAccuracy`.
        if fix.hasPosition, let vertical = fix.verticalAccuracyM { line.number("epv", vertical, decimals: 3) }
        line.boolean("isStationary", update.isStationary)
        line.beginArray("diagnostics")
        update.diagnostics.forEachName { line.string($0) }
        line.endArray()
        if let places, fix.hasPosition, let latitude = fix.latitude, let longitude = fix.longitude {
            places.writeMember(latitude: latitude, longitude: longitude, into: &line)
        }
    }

    /// The VISIT object (no newline) into `line`.
    @_noAllocation
    public static func write(_ visit: Visit, places: PlaceLabels? = nil, into line: inout JSONWriter) {
        line.beginObject()
        line.string("class", "VISIT")
        writeMembers(visit, places: places, into: &line)
        line.endObject()
    }

    /// A visit's members (arrival, departure, centre, radius, and with `places` the place nearest
    /// the centre), for the VISIT object and the log export.
    @_noAllocation
    public static func writeMembers(_ visit: Visit, places: PlaceLabels? = nil, into line: inout JSONWriter) {
        line.time("arrival", visit.arrival)
        // CLVisit's departureDate is distantFuture until the device leaves: null here.
        if let departure = visit.departure { line.time("departure", departure) } else { line.null("departure") }
        line.number("lat", visit.latitude, decimals: 9)
        line.number("lon", visit.longitude, decimals: 9)
        line.number("radius", visit.radiusM, decimals: 1)
        places?.writeMember(latitude: visit.latitude, longitude: visit.longitude, into: &line)
    }


}
