/// gpsd's TPV report, with gpsd's field names and precision.
public enum FixJSON {
    public static func tpv(_ fix: Fix) -> String {
        var json = JSONText()
        json.string("class", "TPV")
        json.integer("mode", fix.mode.rawValue)
        if let time = fix.time { json.string("time", time.iso8601) }
        if fix.hasPosition, let latitude = fix.latitude, let longitude = fix.longitude {
            json.number("lat", latitude, decimals: 9)
            json.number("lon", longitude, decimals: 9)
            if fix.mode == .threeDimensional, let altitude = fix.altitudeMSLM {
                json.number("altMSL", altitude, decimals: 4)
                if let separation = fix.geoidSeparationM {
                    json.number("altHAE", altitude + separation, decimals: 4)
                    json.number("geoidSep", separation, decimals: 3)
                }
            }
            if let speed = fix.speedMps { json.number("speed", speed, decimals: 3) }
            if let track = fix.trackDeg { json.number("track", track, decimals: 4) }
            if let accuracy = fix.horizontalAccuracyM { json.number("eph", accuracy, decimals: 3) }
            if let quality = fix.quality { json.integer("status", quality.rawValue) }
            if let satellites = fix.satellitesUsed { json.integer("satellites_used", satellites) }
        }
        return json.closed
    }
}

extension FixJSON {
    /// The TPV object (no newline) into `line`.
    public static func write(_ fix: Fix, into line: inout JSONWriter) {
        var text = tpv(fix)
        text.withUTF8 { line.raw(UnsafeRawBufferPointer($0)) }
    }
}

/// Live updates and visits as JSON: a TPV with `isStationary` and `diagnostics`, and VISIT.
public enum UpdateJSON {
    public static func updateLine(_ update: LocationUpdate) -> String {
        var fix = update.fix
        if fix.time == nil { fix.time = update.time }
        if !fix.hasPosition && fix.mode == .unknown { fix.mode = .noFix }
        var names: [String] = []
        if update.diagnostics.contains(.stationary) { names.append("\"stationary\"") }
        if update.diagnostics.contains(.locationUnavailable) { names.append("\"locationUnavailable\"") }
        if update.diagnostics.contains(.accuracyLimited) { names.append("\"accuracyLimited\"") }
        let tpv = FixJSON.tpv(fix)
        return String(tpv.dropLast()) + ",\"isStationary\":\(update.isStationary ? "true" : "false"),\"diagnostics\":[\(names.joined(separator: ","))]}"
    }

    public static func visitLine(_ visit: Visit) -> String {
        var json = JSONText()
        json.string("class", "VISIT")
        json.string("arrival", visit.arrival.iso8601)
        json.string("departure", visit.departure.iso8601)
        json.number("lat", visit.latitude, decimals: 9)
        json.number("lon", visit.longitude, decimals: 9)
        json.number("radius", visit.radiusM, decimals: 1)
        return json.closed
    }

    public static func write(_ update: LocationUpdate, into line: inout JSONWriter) {
        var text = updateLine(update)
        text.withUTF8 { line.raw(UnsafeRawBufferPointer($0)) }
    }

    public static func write(_ visit: Visit, into line: inout JSONWriter) {
        var text = visitLine(visit)
        text.withUTF8 { line.raw(UnsafeRawBufferPointer($0)) }
    }
}
