/// One advertisement as a JSON object for `locus decode adv|hci` (allocates; not the hot path).
public enum AdvertisementJSON {
    /// 16- and 32-bit UUIDs are shorthands of the Bluetooth Base UUID
    /// 0000xxxx-0000-1000-8000-00805F9B34FB.
    static func expand(_ short: UInt32) -> BeaconUUID {
        BeaconUUID(high: UInt64(short) << 32 | 0x0000_1000, low: 0x8000_0080_5F9B_34FB)
    }

    public static func describe(_ data: UnsafeRawBufferPointer, report: AdvertisingReport? = nil, timeUs: Int64? = nil) -> String {
        var json = JSONText()
        if let timeUs {
            let time = UTCTime(seconds: floorDivide(timeUs, 1_000_000), nanoseconds: Int32((timeUs - floorDivide(timeUs, 1_000_000) * 1_000_000) * 1000))
            json.string("time", time.iso8601)
        }
        if let report {
            json.string("address", report.address.description)
            json.string("address_type", addressType(report.addressType))
            if let rssi = report.rssi { json.integer("rssi", Int(rssi)) }
            if report.isExtended { json.boolean("extended", true) }
        }
        var services: [String] = []
        var solicited: [String] = []
        var serviceData: [String] = []
        var manufacturers: [String] = []
        var name: String? = nil
        var nameTruncated = false
        var flags: Int? = nil
        var txPower: Int? = nil
        let walk = AdvertisingData.walk(data) { type, payload in
            switch type {
            case ADType.flags: flags = Int(payload[0])
            case ADType.txPower: txPower = Int(Int8(bitPattern: payload[0]))
            case ADType.shortenedName, ADType.completeName:
                let valid = UTF8Validation.validPrefix(payload)
                name = String(decoding: valid.bytes, as: UTF8.self)
                nameTruncated = valid.truncated
            case ADType.incomplete16, ADType.complete16:
                for index in stride(from: 0, to: payload.count, by: 2) {
                    services.append(expand(UInt32(AdvertisingData.uint16LE(payload, index))).description)
                }
            case ADType.incomplete32, ADType.complete32:
                for index in stride(from: 0, to: payload.count, by: 4) {
                    let value = UInt32(AdvertisingData.uint16LE(payload, index)) | UInt32(AdvertisingData.uint16LE(payload, index + 2)) << 16
                    services.append(expand(value).description)
                }
            case ADType.incomplete128, ADType.complete128:
                for index in stride(from: 0, to: payload.count, by: 16) { services.append(BeaconUUID(littleEndian: UnsafeRawBufferPointer(rebasing: payload[index..<(index + 16)])).description) }
            case ADType.solicited16:
                for index in stride(from: 0, to: payload.count, by: 2) {
                    solicited.append(expand(UInt32(AdvertisingData.uint16LE(payload, index))).description)
                }
            case ADType.solicited32:
                for index in stride(from: 0, to: payload.count, by: 4) {
                    let value = UInt32(AdvertisingData.uint16LE(payload, index)) | UInt32(AdvertisingData.uint16LE(payload, index + 2)) << 16
                    solicited.append(expand(value).description)
                }
            case ADType.solicited128:
                for index in stride(from: 0, to: payload.count, by: 16) {
                    solicited.append(BeaconUUID(littleEndian: UnsafeRawBufferPointer(rebasing: payload[index..<(index + 16)])).description)
                }
            case ADType.serviceData16:
                var entry = JSONText()
                entry.string("uuid", expand(UInt32(AdvertisingData.uint16LE(payload, 0))).description)
                entry.string("data", HexText.string(UnsafeRawBufferPointer(rebasing: payload[2...])))
                serviceData.append(entry.closed)
            case ADType.serviceData32:
                var entry = JSONText()
                let value = UInt32(AdvertisingData.uint16LE(payload, 0)) | UInt32(AdvertisingData.uint16LE(payload, 2)) << 16
                entry.string("uuid", expand(value).description)
                entry.string("data", HexText.string(UnsafeRawBufferPointer(rebasing: payload[4...])))
                serviceData.append(entry.closed)
            case ADType.serviceData128:
                var entry = JSONText()
                entry.string("uuid", BeaconUUID(littleEndian: payload).description)
                entry.string("data", HexText.string(UnsafeRawBufferPointer(rebasing: payload[16...])))
                serviceData.append(entry.closed)
            case ADType.manufacturerData:
                var entry = JSONText()
                entry.integer("company", Int(AdvertisingData.uint16LE(payload, 0)))
                entry.string("data", HexText.string(UnsafeRawBufferPointer(rebasing: payload[2...])))
                manufacturers.append(entry.closed)
            default:
                break
            }
        }
        if let flags { json.integer("flags", flags) }
        if let name { json.string("name", name) }
        if nameTruncated { json.boolean("name_truncated", true) }
        if let txPower { json.integer("tx_power", txPower) }
        if !services.isEmpty { json.raw("services", array(services.map { quoted($0) })) }
        if !solicited.isEmpty { json.raw("solicited_services", array(solicited.map { quoted($0) })) }
        if !serviceData.isEmpty { json.raw("service_data", array(serviceData)) }
        if let first = manufacturers.first { json.raw("manufacturer", first) }
        if manufacturers.count > 1 { json.raw("manufacturer_more", array(Array(manufacturers.dropFirst()))) }
        if let beacon = BeaconDecoder.decode(data) { json.raw("beacon", describe(beacon)) }
        if let error = walk.error { json.string("warning", error.description) }
        return json.closed
    }

    public static func describe(_ beacon: Beacon) -> String {
        var json = JSONText()
        json.string("kind", beacon.kind)
        switch beacon {
        case .iBeacon(let uuid, let major, let minor, let power):
            json.string("uuid", uuid.description)
            json.integer("major", Int(major))
            json.integer("minor", Int(minor))
            json.integer("tx_power", Int(power))
        case .altBeacon(let company, let id1, let id2, let id3, let reference, let reserved):
            json.string("uuid", id1.description)
            json.integer("major", Int(id2))
            json.integer("minor", Int(id3))
            json.integer("tx_power", Int(reference))
            json.integer("company", Int(company))
            if let reserved { json.integer("reserved", Int(reserved)) }
        case .eddystoneUID(let namespace, let instance, let power):
            json.string("namespace", namespace.description.lowercasedASCII)
            json.string("instance", hex48(instance))
            json.integer("tx_power", Int(power))
        case .eddystoneURL(let power, let url), .uriBeacon(let power, let url):
            if let text = url.expanded { json.string("url", text) } else { json.string("error", "URL contains reserved codes") }
            json.integer("tx_power", Int(power))
        case .eddystoneTLM(let voltage, let temperature, let count, let uptime):
            json.integer("voltage_mv", Int(voltage))
            if let temperature { json.number("temperature_c", temperature, decimals: 2) }
            json.integer("adv_count", Int(count))
            json.number("uptime_s", Double(uptime) / 10, decimals: 1)
        case .eddystoneEncryptedTLM(let data, let salt, let mic):
            json.string("data", data.description.lowercasedASCII)
            json.integer("salt", Int(salt))
            json.integer("mic", Int(mic))
        case .eddystoneEID(let power, let identifier):
            var text = ""
            for index in 0..<8 { text += hex(UInt8(truncatingIfNeeded: identifier >> UInt64(56 - 8 * index))) }
            json.string("eid", text.lowercasedASCII)
            json.integer("tx_power", Int(power))
        }
        return json.closed
    }

    static func addressType(_ type: UInt8) -> String {
        switch type {
        case 0: return "public"
        case 1: return "random"
        case 2: return "public-identity"
        case 3: return "random-identity"
        case 0xFF: return "anonymous"
        default: return "unknown"
        }
    }

    static func hex48(_ value: UInt64) -> String {
        var text = ""
        for index in 0..<6 { text += hex(UInt8(truncatingIfNeeded: value >> UInt64(40 - 8 * index))) }
        return text.lowercasedASCII
    }

    static func quoted(_ text: String) -> String {
        var result = ""
        JSONText.appendQuoted(text, to: &result)
        return result
    }

    static func array(_ items: [String]) -> String {
        var text = "["
        for (index, item) in items.enumerated() { text += (index == 0 ? "" : ",") + item }
        return text + "]"
    }
}
