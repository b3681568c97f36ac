// libFuzzer entry points, one per binary (Scripts/fuzz compiles this file with LocusCore's sources
// and -D FUZZ_HCI, FUZZ_AD or FUZZ_NMEA, under -sanitize=fuzzer,address). Each target parses the
// input and cross-checks what came out, so a parser that read past its input or returned
// inconsistent values trips ASan or a precondition.

#if FUZZ_HCI
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHCIEvent(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
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
#endif

#if FUZZ_AD
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAdvertisingData(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
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
#endif

#if FUZZ_NMEA
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzNMEA(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var decoder = NMEADecoder()
    decoder.consume(UnsafeRawBufferPointer(start: data, count: size)) { fix in
        if let latitude = fix.latitude { precondition(latitude >= -90 && latitude <= 90) }
        if let longitude = fix.longitude { precondition(longitude >= -180 && longitude <= 180) }
    }
    precondition(decoder.statistics.parsed + decoder.statistics.rejected + decoder.statistics.ignored + decoder.statistics.empty == decoder.statistics.read)
    return 0
}
#endif

#if FUZZ_MQTT
/// Bytes from a broker: framed, each packet decoded; a PUBLISH that decodes is written again by
/// the writer and must decode to the same message.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzMQTT(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
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
#endif

#if FUZZ_DNS
/// A name server's answer: read for A and AAAA with the id it carries; every address handed out
/// lies inside the message and has its type's size.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDNS(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
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
#endif
