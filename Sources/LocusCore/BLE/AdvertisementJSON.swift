/// One advertisement as a JSON object for `locus decode adv|hci`, written into a `JSONWriter`
/// (not the hot path: the agent decodes sightings with `BeaconDecoder`, and this is for people
/// and tools reading captures).
///
/// Members, each only when present: time, address, address_type, rssi, extended, flags, name,
/// name_truncated, tx_power, services, solicited_services, service_data, manufacturer,
/// manufacturer_more, beacon, warning. UUIDs are canonical upper-case text; 16- and 32-bit ones
/// are expanded over the Bluetooth Base UUID; 128-bit ones are read as sent, all 16 bytes
/// reversed. The AD structures are walked once per member group, in order, so that the members
/// come out in a fixed order without collecting anything first; the AD members are written
/// without allocating (`@_noAllocation`, checked in optimized builds).
public enum AdvertisementJSON {
    /// Bytes of line that one advertisement of `dataCount` AD bytes can take at most (a 16-bit
    /// UUID, 4 bytes on air, is 39 bytes of text; a control byte in a name 6), with its report,
    /// time, beacon and warning.
    public static func capacity(dataCount: Int) -> Int { 1024 + 20 * dataCount }

    /// 16- and 32-bit UUIDs are shorthands of the Bluetooth Base UUID
    /// 0000xxxx-0000-1000-8000-00805F9B34FB.
    @_noAllocation
    static func expand(_ short: UInt32) -> BeaconUUID {
        BeaconUUID(high: UInt64(short) << 32 | 0x0000_1000, low: 0x8000_0080_5F9B_34FB)
    }

    /// Writes the advertisement as one JSON object (no newline) into `line`.
    public static func write(_ data: UnsafeRawBufferPointer, report: AdvertisingReport? = nil, timeUs: Int64? = nil, into line: inout JSONWriter) {
        line.beginObject()
        if let timeUs {
            let seconds = floorDivide(timeUs, 1_000_000)
            line.time("time", UTCTime(seconds: seconds, nanoseconds: Int32((timeUs - seconds * 1_000_000) * 1000)))
        }
        if let report { writeReport(report, into: &line) }
        let walk = writeSingles(data, into: &line)
        writeUUIDLists(data, solicited: false, into: &line)
        writeUUIDLists(data, solicited: true, into: &line)
        writeServiceData(data, into: &line)
        writeManufacturers(data, into: &line)
        if let beacon = BeaconDecoder.decode(data) {
            line.key("beacon")
            write(beacon, into: &line)
        }
        if let error = walk.error { line.string("warning", error.description) }
        line.endObject()
    }

    /// The object as a String (allocates): for tests and the fuzzer.
    public static func describe(_ data: UnsafeRawBufferPointer, report: AdvertisingReport? = nil, timeUs: Int64? = nil) -> String {
        var line = JSONWriter(capacity: capacity(dataCount: data.count))
        write(data, report: report, timeUs: timeUs, into: &line)
        return line.string
    }

    static func writeReport(_ report: AdvertisingReport, into line: inout JSONWriter) {
        line.string("address", report.address.description)
        line.string("address_type", addressType(report.addressType))
        if let rssi = report.rssi { line.integer("rssi", Int(rssi)) }
        if report.isExtended { line.boolean("extended", true) }
    }

    /// Flags, name and TX power: the last structure of each type counts. A name that is not
    /// valid UTF-8 is cut before its first invalid sequence and flagged, as BlueZ shows it.
    @_noAllocation
    static func writeSingles(_ data: UnsafeRawBufferPointer, into line: inout JSONWriter) -> AdvertisingWalk {
        var flags: UInt8? = nil
        var name: UnsafeRawBufferPointer? = nil
        var txPower: Int8? = nil
        let walk = AdvertisingData.forEachStructure(data) { type, payload in
            switch type {
            case ADType.flags: flags = payload[0]
            case ADType.txPower: txPower = Int8(bitPattern: payload[0])
            case ADType.shortenedName, ADType.completeName: name = payload
            default: break
            }
        }
        if let flags { line.integer("flags", Int(flags)) }
        if let name {
            let valid = UTF8Validation.validPrefix(name)
            line.key("name")
            line.string(bytes: valid.bytes)
            if valid.truncated { line.boolean("name_truncated", true) }
        }
        if let txPower { line.integer("tx_power", Int(txPower)) }
        return walk
    }

    /// The width of the UUIDs in a list structure and whether it is a solicitation; nil for
    /// other types.
    @_noAllocation
    static func uuidList(_ type: UInt8) -> (width: Int, solicited: Bool)? {
        switch type {
        case ADType.incomplete16, ADType.complete16: return (2, false)
        case ADType.incomplete32, ADType.complete32: return (4, false)
        case ADType.incomplete128, ADType.complete128: return (16, false)
        case ADType.solicited16: return (2, true)
        case ADType.solicited32: return (4, true)
        case ADType.solicited128: return (16, true)
        default: return nil
        }
    }

    /// The UUID of `width` bytes (2, 4 or 16) at `offset`, as sent: little-endian.
    @_noAllocation
    static func uuid(_ payload: UnsafeRawBufferPointer, at offset: Int, width: Int) -> BeaconUUID {
        switch width {
        case 2: return expand(UInt32(AdvertisingData.uint16LE(payload, offset)))
        case 4: return expand(UInt32(AdvertisingData.uint16LE(payload, offset)) | UInt32(AdvertisingData.uint16LE(payload, offset + 2)) << 16)
        default: return BeaconUUID(littleEndian: UnsafeRawBufferPointer(rebasing: payload[offset..<(offset + 16)]))
        }
    }

    /// "services" (AD types 0x02...0x07) or "solicited_services" (0x14, 0x15, 0x1F): every UUID of
    /// every list, in the order sent.
    @_noAllocation
    static func writeUUIDLists(_ data: UnsafeRawBufferPointer, solicited: Bool, into line: inout JSONWriter) {
        let key: StaticString = solicited ? "solicited_services" : "services"
        var open = false
        _ = AdvertisingData.forEachStructure(data) { type, payload in
            guard let list = uuidList(type), list.solicited == solicited else { return }
            for offset in stride(from: 0, to: payload.count, by: list.width) {
                if !open {
                    line.beginArray(key)
                    open = true
                }
                line.string(uuid(payload, at: offset, width: list.width))
            }
        }
        if open { line.endArray() }
    }

    /// "service_data": {uuid, data} for each service data structure (0x16, 0x20, 0x21).
    @_noAllocation
    static func writeServiceData(_ data: UnsafeRawBufferPointer, into line: inout JSONWriter) {
        var open = false
        _ = AdvertisingData.forEachStructure(data) { type, payload in
            let width: Int
            switch type {
            case ADType.serviceData16: width = 2
            case ADType.serviceData32: width = 4
            case ADType.serviceData128: width = 16
            default: return
            }
            if !open {
                line.beginArray("service_data")
                open = true
            }
            line.beginObject()
            line.string("uuid", uuid(payload, at: 0, width: width))
            line.hexString("data", UnsafeRawBufferPointer(rebasing: payload[width...]))
            line.endObject()
        }
        if open { line.endArray() }
    }

    /// "manufacturer": the first manufacturer data structure; "manufacturer_more": the others.
    @_noAllocation
    static func writeManufacturers(_ data: UnsafeRawBufferPointer, into line: inout JSONWriter) {
        var count = 0
        _ = AdvertisingData.forEachStructure(data) { type, payload in
            guard type == ADType.manufacturerData else { return }
            if count == 0 {
                line.key("manufacturer")
            } else if count == 1 {
                line.beginArray("manufacturer_more")
            }
            line.beginObject()
            line.integer("company", Int(AdvertisingData.uint16LE(payload, 0)))
            line.hexString("data", UnsafeRawBufferPointer(rebasing: payload[2...]))
            line.endObject()
            count += 1
        }
        if count > 1 { line.endArray() }
    }

    /// A beacon frame as one JSON object.
    public static func write(_ beacon: Beacon, into line: inout JSONWriter) {
        line.beginObject()
        line.string("kind", beacon.kind)
        switch beacon {
        case .iBeacon(let uuid, let major, let minor, let power):
            line.string("uuid", uuid)
            line.integer("major", Int(major))
            line.integer("minor", Int(minor))
            line.integer("tx_power", Int(power))
        case .altBeacon(let company, let id1, let id2, let id3, let reference, let reserved):
            line.string("uuid", id1)
            line.integer("major", Int(id2))
            line.integer("minor", Int(id3))
            line.integer("tx_power", Int(reference))
            line.integer("company", Int(company))
            if let reserved { line.integer("reserved", Int(reserved)) }
        case .eddystoneUID(let namespace, let instance, let power):
            // The namespace's 10 bytes: its two words big-endian, side by side in the tuple.
            withUnsafeBytes(of: (namespace.high.bigEndian, namespace.low.bigEndian)) { line.hexString("namespace", UnsafeRawBufferPointer(rebasing: $0[0..<10])) }
            withUnsafeBytes(of: instance.bigEndian) { line.hexString("instance", UnsafeRawBufferPointer(rebasing: $0[2..<8])) }
            line.integer("tx_power", Int(power))
        case .eddystoneURL(let power, let url), .uriBeacon(let power, let url):
            if let text = url.expanded { line.string("url", text) } else { line.string("error", "URL contains reserved codes") }
            line.integer("tx_power", Int(power))
        case .eddystoneTLM(let voltage, let temperature, let count, let uptime):
            line.integer("voltage_mv", Int(voltage))
            if let temperature { line.number("temperature_c", temperature, decimals: 2) }
            line.integer("adv_count", Int(count))
            line.fixed("uptime_s", units: Int64(uptime), scale: 1)
        case .eddystoneEncryptedTLM(let data, let salt, let mic):
            withUnsafeBytes(of: data.bytes) { line.hexString("data", $0) }
            line.integer("salt", Int(salt))
            line.integer("mic", Int(mic))
        case .eddystoneEID(let power, let identifier):
            withUnsafeBytes(of: identifier.bigEndian) { line.hexString("eid", $0) }
            line.integer("tx_power", Int(power))
        }
        line.endObject()
    }

    static func addressType(_ type: UInt8) -> StaticString {
        switch type {
        case 0: return "public"
        case 1: return "random"
        case 2: return "public-identity"
        case 3: return "random-identity"
        case 0xFF: return "anonymous"
        default: return "unknown"
        }
    }
}
