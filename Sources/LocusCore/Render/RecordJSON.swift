/// A condition and its settings as JSON: records, the log export, `locus monitor`.
public enum ConditionJSON {
    /// {"lat":..,"lon":..,"radius":..}, {"uuid":..[,"major":..[,"minor":..]]}, {"phone":".."},
    /// {"polygon":[[lat,lon],..]} or {"corridor":{"path":[[lat,lon],..],"width":..}} into `line`.
    public static func write(_ condition: Condition, into line: inout JSONWriter) {
        line.beginObject()
        switch condition {
        case .polygon, .corridor:
            shapeMember(condition, widthDecimals: 2, into: &line)
        case .circle(let circle):
            line.number("lat", circle.latitude, decimals: 7)
            line.number("lon", circle.longitude, decimals: 7)
            line.number("radius", circle.radiusM, decimals: 2)
        case .beacon(let beacon):
            line.string("uuid", beacon.uuid)
            if let major = beacon.major { line.integer("major", Int64(major)) }
            if let minor = beacon.minor { line.integer("minor", Int64(minor)) }
        case .phone(let phone):
            line.string("phone", phone.name)
        }
        line.endObject()
    }

    /// A shape's member, `"polygon":[[lat,lon],..]` or `"corridor":{"path":[..],"width":..}`, as
    /// records and `add` requests carry it (nothing for circles and beacons).
    public static func shapeMember(_ condition: Condition, widthDecimals: Int, into line: inout JSONWriter) {
        switch condition {
        case .polygon(let polygon):
            line.beginArray("polygon")
            vertices(polygon.latitudes, polygon.longitudes, into: &line)
            line.endArray()
        case .corridor(let corridor):
            line.beginObject("corridor")
            line.beginArray("path")
            vertices(corridor.latitudes, corridor.longitudes, into: &line)
            line.endArray()
            line.number("width", corridor.widthM, decimals: widthDecimals)
            line.endObject()
        case .circle, .beacon, .phone:
            break
        }
    }

    /// `[lat,lon]` elements, 7 decimals (1 cm).
    @_noAllocation
    static func vertices(_ latitudes: [Double], _ longitudes: [Double], into line: inout JSONWriter) {
        for index in 0..<latitudes.count {
            line.beginArray()
            line.number(latitudes[index], decimals: 7)
            line.number(longitudes[index], decimals: 7)
            line.endArray()
        }
    }

    /// The decision settings object into `line`.
    @_noAllocation
    public static func write(_ settings: ConditionSettings, into line: inout JSONWriter) {
        line.beginObject()
        line.number("enter_margin", settings.enterMarginM, decimals: 2)
        line.number("exit_margin", settings.exitMarginM, decimals: 2)
        line.integer("dwell_ms", settings.dwellMs)
        line.boolean("accuracy_gate", settings.accuracyGate)
        line.boolean("transit", settings.transit)
        if let timeout = settings.exitTimeoutMs { line.integer("exit_timeout_ms", timeout) }
        if let proximity = settings.proximity {
            switch proximity {
            case .immediate: line.string("proximity", "immediate")
            case .near: line.string("proximity", "near")
            case .far: line.string("proximity", "far")
            }
        }
        line.endObject()
    }


}

/// A record as JSON: identifier, condition, settings and lastEvent.
public enum RecordJSON {
    /// The record object (no newline) into `line`; with `places`, its lastEvent is annotated
    /// (`EventJSON`). Records are written on request, not in the hot loop: a shape's vertices are
    /// arrays, which the allocation checks would refuse.
    public static func write(_ identifier: FixedName, _ record: MonitorEngine.Record, places: PlaceLabels? = nil, into line: inout JSONWriter) {
        line.beginObject()
        line.string("identifier", identifier)
        line.key("condition")
        ConditionJSON.write(record.condition, into: &line)
        line.key("settings")
        ConditionJSON.write(record.settings, into: &line)
        line.key("lastEvent")
        EventJSON.write(record.lastEvent, sequence: 0, places: places, into: &line)
        if record.accuracyLimited { line.boolean("accuracyLimited", true) }
        line.boolean("site_file", record.fromSiteFile)
        line.endObject()
    }

}
