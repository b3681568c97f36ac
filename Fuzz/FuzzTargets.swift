// libFuzzer targets in one binary (Scripts/fuzz compiles this file with LocusCore's sources under
// -sanitize=fuzzer,address once, and runs it per target with LOCUS_FUZZ_TARGET set to HCI, AD,
// MGMT, HCIMON, NMEA, MQTT, DNS, PLACES or PLACES_CRC). Each target parses the input and
// cross-checks what came out, so a parser that read past its input or returned inconsistent
// values trips ASan or a precondition.

import Glibc

/// The target this run fuzzes, read once; an unknown or missing name stops the run at once.
let fuzzTarget: (UnsafePointer<UInt8>, Int) -> CInt = {
    let name = getenv("LOCUS_FUZZ_TARGET").map { String(cString: $0) } ?? ""
    switch name {
    case "HCI": return fuzzHCIEvent
    case "AD": return fuzzAdvertisingData
    case "MGMT": return fuzzMgmtEvent
    case "HCIMON": return fuzzMonitorRecord
    case "NMEA": return fuzzNMEA
    case "MQTT": return fuzzMQTT
    case "DNS": return fuzzDNS
    case "PLACES": return { fuzzPlaceIndex($0, $1, rewriteChecksum: false) }
    case "PLACES_CRC": return { fuzzPlaceIndex($0, $1, rewriteChecksum: true) }
    default: fatalError("LOCUS_FUZZ_TARGET must name a target (HCI, AD, MGMT, HCIMON, NMEA, MQTT, DNS, PLACES, PLACES_CRC), not '\(name)'")
    }
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt { fuzzTarget(data, size) }

func fuzzHCIEvent(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    var total = 0
    let result = HCIEvents.forEachReport(in: HCIEvents.withoutPacketType(bytes)) { report in
        total += report.data.count
        precondition(report.data.baseAddress! >= bytes.baseAddress! && report.data.baseAddress! + report.data.count <= bytes.baseAddress! + size)
        _ = BeaconDecoder.decode(report.data)
    }
    if case .success(let count) = result { precondition(count >= 1 && total < size) }
    return 0
}

func fuzzAdvertisingData(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    var seen = 0
    let walk = AdvertisingData.forEachStructure(bytes) { _, payload in seen += payload.count + 2 }
    precondition(seen <= size && walk.structures <= size / 2)
    switch BeaconDecoder.decode(bytes) {
    case .eddystoneURL(_, let url)?, .uriBeacon(_, let url)?:
        precondition(url.count <= EddystoneURL.capacity)
        _ = url.expanded
    default:
        break
    }
    // The decode output fits the capacity that `decode adv` gives it: never a cut-off line.
    var line = JSONWriter(capacity: AdvertisementJSON.capacity(dataCount: size))
    AdvertisementJSON.write(bytes, into: &line)
    precondition(!line.overflowed && line.count > 0)
    return 0
}

func fuzzNMEA(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var decoder = NMEADecoder()
    decoder.consume(UnsafeRawBufferPointer(start: data, count: size)) { fix in
        if let latitude = fix.latitude { precondition(latitude >= -90 && latitude <= 90) }
        if let longitude = fix.longitude { precondition(longitude >= -180 && longitude <= 180) }
    }
    precondition(decoder.statistics.parsed + decoder.statistics.rejected + decoder.statistics.ignored + decoder.statistics.empty == decoder.statistics.read)
    return 0
}

/// Bytes from a broker: framed, each packet decoded; a PUBLISH that decodes is written again by
/// the writer and must decode to the same message.
func fuzzMQTT(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var framer = MQTTFramer(maximumPacketBytes: 1024)
    var writer = MQTTWriter(capacity: 2048)
    _ = framer.consume(UnsafeRawBufferPointer(start: data, count: size)) { packet in
        precondition(packet.count >= 2 && packet.count <= 1024)
        guard case .success(.publish(let publish)) = MQTTPacket.decode(packet) else { return }
        precondition(publish.topic.baseAddress! >= packet.baseAddress! && publish.payload.count < packet.count)
        writer.reset()
        precondition(writer.publish(topic: publish.topic, payload: publish.payload, qos: publish.qos, retain: publish.retain,
                                    duplicate: publish.duplicate, packetID: publish.packetID))
        guard case .success(.publish(let again)) = MQTTPacket.decode(writer.bytes) else { preconditionFailure("a written PUBLISH decodes") }
        precondition(again.topic.elementsEqual(publish.topic) && again.payload.elementsEqual(publish.payload))
        precondition(again.qos == publish.qos && again.retain == publish.retain && again.duplicate == publish.duplicate && again.packetID == publish.packetID)
    }
    return 0
}

/// A name server's answer: read for A and AAAA with the id it carries; every address handed out
/// lies inside the message and has its type's size.
func fuzzDNS(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let message = UnsafeRawBufferPointer(start: data, count: size)
    let id: UInt16 = size >= 2 ? UInt16(data[0]) << 8 | UInt16(data[1]) : 0
    for type in [DNSMessage.RecordType.a, .aaaa] {
        var handed = 0
        let result = DNSMessage.addresses(in: message, id: id, type: type) { address, _ in
            precondition(address.count == (type == .a ? 4 : 16))
            precondition(address.baseAddress! >= message.baseAddress! && address.baseAddress! + address.count <= message.baseAddress! + size)
            handed += 1
        }
        if case .success(let count) = result { precondition(count == handed && count > 0) }
    }
    return 0
}

/// A place index file (what the agent maps): opened, and when it opens, looked up in. PLACES
/// takes the bytes as they are, so nearly every mutation stops at the checksum; PLACES_CRC
/// (`rewriteChecksum`) first writes the input's length and the CRC32C of its body into the header, as a crafted file
/// would carry them, so the structural checks behind them are what the input meets. Whatever
/// opens must answer every lookup from inside the file: places below the count, distances and
/// bearings finite and in range, every string inside the bytes, names found only as places.
func fuzzPlaceIndex(_ data: UnsafePointer<UInt8>, _ size: Int, rewriteChecksum: Bool) -> CInt {
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(size, 1), alignment: 16)
    defer { buffer.deallocate() }
    if size > 0 { buffer.copyMemory(from: UnsafeRawBufferPointer(start: data, count: size)) }
    let bytes = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(buffer)[0..<size])
    if rewriteChecksum && size >= PlaceIndexLayout.headerSize {
        buffer.storeBytes(of: UInt64(size).littleEndian, toByteOffset: PlaceIndexLayout.fileSizeOffset, as: UInt64.self)
        let body = UnsafeRawBufferPointer(rebasing: bytes[PlaceIndexLayout.headerSize...])
        buffer.storeBytes(of: CRC32C.checksum(body).littleEndian, toByteOffset: PlaceIndexLayout.checksumOffset, as: UInt32.self)
    }
    let index: PlaceIndex
    do throws(PlaceIndexError) { index = try PlaceIndex(bytes: bytes) } catch { return 0 }
    precondition(index.siteStart <= index.placeCount && index.placeCount * PlaceIndexLayout.recordSize <= size)
    let start = bytes.baseAddress!, end = bytes.baseAddress! + size
    func inside(_ string: UnsafeRawBufferPointer) {
        precondition(string.count == 0 || (string.baseAddress! >= start && string.baseAddress! + string.count <= end))
    }
    inside(index.sourceDescription)
    func checkPlace(_ place: Int) {
        precondition(place >= 0 && place < index.placeCount)
        let record = index.record(place)
        precondition(abs(record.latitude) <= 90 && abs(record.longitude) <= 180)
        inside(index.name(of: record))
        inside(index.admin1(of: record))
        inside(index.timeZone(of: record))
        inside(index.featureCode(of: record))
    }
    var line = JSONWriter(capacity: 1 << 19)
    // Points: two fixed ones and the first places' own coordinates, moved a little.
    var points = [GeoPoint(latitude: 53.5396, longitude: 8.5809), GeoPoint(latitude: -47.3, longitude: -132.1)]
    for place in 0..<min(index.placeCount, 3) {
        let record = index.record(place)
        points.append(GeoPoint(latitude: record.latitude * 0.999, longitude: record.longitude + 0.01))
    }
    for point in points {
        for (scope, within) in [(PlaceScope.any, Double.infinity), (.populated, 50_000.0), (.site, 5_000_000.0)] {
            guard let match = index.nearest(to: point, within: within, scope: scope) else { continue }
            checkPlace(match.place)
            let record = index.record(match.place)
            precondition(match.distanceM >= 0 && match.distanceM <= within && match.distanceM <= 20_004_000)
            precondition(match.bearingDeg >= 0 && match.bearingDeg < 360)
            switch scope {
            case .any: break
            case .populated: precondition(match.place < index.siteStart && record.featureClass == UInt8(ascii: "P"))
            case .site: precondition(match.place >= index.siteStart && record.isSite)
            }
            line.reset()
            PlaceText.write(match, in: index, into: &line)
            line.reset()
            PlaceJSON.write(match, in: index, into: &line)
            precondition(!line.overflowed)
        }
    }
    // Names: the first places' own names (bytes of the file) and a qualified one.
    let search = PlaceNameSearch()
    let results = UnsafeMutableBufferPointer<PlaceCandidate>.allocate(capacity: 4)
    defer { results.deallocate() }
    func lookUp(_ query: UnsafeRawBufferPointer, near: GeoPoint?) {
        let found = search.search(query, in: index, near: near, into: results)
        precondition(found.written <= results.count && found.written <= found.total && found.total <= index.nameCount)
        precondition(found.problem == nil || found.total == 0)
        for candidate in results.prefix(found.written) {
            checkPlace(candidate.place)
            precondition(near == nil ? candidate.distanceM.isNaN : candidate.distanceM >= 0)
        }
    }
    for place in 0..<min(index.placeCount, 3) {
        lookUp(index.name(of: index.record(place)), near: place == 0 ? nil : points[0])
    }
    let qualified: StaticString = "Paris, US"
    lookUp(UnsafeRawBufferPointer(start: qualified.utf8Start, count: qualified.utf8CodeUnitCount), near: nil)
    return 0
}

/// Bytes from the mgmt control socket: a decoded report's data lies inside the input and decodes
/// as a beacon without reading past it.
func fuzzMgmtEvent(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    switch MgmtEvents.decode(bytes) {
    case .success(.report(_, _, let report)):
        precondition(report.data.baseAddress! >= bytes.baseAddress! && report.data.baseAddress! + report.data.count == bytes.baseAddress! + size)
        _ = BeaconDecoder.decode(report.data)
    case .success(.commandComplete(_, _, _, let parameters)):
        precondition(parameters.count == size - 9)
        _ = MgmtReplies.version(parameters)
        _ = MgmtReplies.supports(parameters, .addAdvPatternsMonitor)
        _ = MgmtReplies.indexListContains(parameters, 0)
        _ = MgmtReplies.controllerInfo(parameters)
    default:
        break
    }
    return 0
}

/// Records from the HCI monitor channel's replay: a socket user's name is at most the record's
/// comm field.
func fuzzMonitorRecord(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if case .success(let user?) = HCIMonitorRecords.user(in: UnsafeRawBufferPointer(start: data, count: size)) {
        // One scalar per comm byte at most (invalid UTF-8 becomes U+FFFD, three bytes for one).
        precondition(user.name.unicodeScalars.count <= size - 20)
    }
    return 0
}
