// Benchmark driver, host only. Scripts/bench runs it under callgrind twice per workload (input
// loading only, then loading plus the work) so that the instruction difference divided by the
// item count is the cost per item, independent of the machine's clock.
import AllocCounter
import Foundation
import LocusAgent
import LocusCore
import TestSupport

func load(_ paths: [String]) -> [[UInt8]] {
    paths.map { [UInt8](FileManager.default.contents(atPath: $0) ?? Data()) }
}

func nmea(_ inputs: [[UInt8]], decode: Bool, repeats: Int) {
    var sentences = 0
    var fixes = 0
    var allocationsCounted = 0
    let start = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<repeats {
        for bytes in inputs {
            guard decode else { sentences += bytes.count > 0 ? 1 : 0; continue }
            var decoder = NMEADecoder()
            allocationsCounted += bytes.withUnsafeBytes { raw in
                allocations {
                    decoder.consume(raw) { _ in fixes += 1 }
                    decoder.finish { _ in }
                }
            }
            sentences += decoder.statistics.read
        }
    }
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    if decode {
        print("sentences \(sentences) epochs \(fixes) allocations \(allocationsCounted) seconds \(elapsed) sentences_per_second \(Int(Double(sentences) / max(elapsed, 1e-9)))")
    }
}

/// JSON per TPV object: every fix of the NMEA corpus (decoded once while loading) rendered
/// `repeats` times into one JSONWriter, each line written to a sink (/dev/null). `--load-only`
/// decodes the same fixes without rendering, so the difference is the rendering and the write.
func tpvJSON(_ inputs: [[UInt8]], render: Bool, repeats: Int) {
    var fixes: [Fix] = []
    for bytes in inputs {
        // The decoder's callback must not allocate: a buffer first (a sentence is at least 6 bytes).
        let found = UnsafeMutableBufferPointer<Fix>.allocate(capacity: bytes.count / 6 + 2)
        defer { found.deallocate() }
        var count = 0
        var decoder = NMEADecoder()
        bytes.withUnsafeBytes { raw in
            decoder.consume(raw) { found[count] = $0; count += 1 }
            decoder.finish { found[count] = $0; count += 1 }
        }
        fixes += found[0..<count]
    }
    guard render else { return }
    renderLines(count: fixes.count, repeats: repeats, what: "objects") { index, line in FixJSON.write(fixes[index], into: &line) }
}

/// JSON per event object: events of every explanation kind (a fix inside the edge, a transit
/// without a kept position, a wildcard beacon's sighting with its refinement, a timeout, an
/// assumption), rendered as in the replay and the log export.
func eventJSON(render: Bool, repeats: Int) {
    let monitor = FixedName("harbour")!, cargo = FixedName("cargo")!
    let date = UTCTime(nanoseconds: 1_534_758_466_250_000_000)
    var fix = Explanation(source: .fix)
    (fix.latitude, fix.longitude, fix.accuracyM, fix.edgeDistanceM, fix.dwellMs) = (52.850123456, 5.313551234, 3, -12.345, 3_000)
    var transit = Explanation(source: .transit)
    (transit.latitude, transit.longitude, transit.accuracyM, transit.edgeDistanceM) = (.nan, .nan, 4, 7.5)
    var sighting = Explanation(source: .sighting)
    (sighting.rssiSamples, sighting.rssiFiltered, sighting.rssiMinimum, sighting.rssiMaximum, sighting.distanceM) = (12, -63.4, -71, -58, 2.75)
    var timeout = Explanation(source: .timeout)
    timeout.dwellMs = 15_000
    let identity = BeaconIdentity(uuid: BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!, major: 100, minor: 0)
    let events = [
        MonitorEvent(monitor: monitor, identifier: FixedName("berth")!, state: .satisfied, date: date, refinement: nil, diagnostics: [], explanation: fix),
        MonitorEvent(monitor: monitor, identifier: FixedName("fairway")!, state: .unsatisfied, date: date, refinement: nil,
                     diagnostics: [.accuracyLimited], explanation: transit),
        MonitorEvent(monitor: cargo, identifier: FixedName("anyCrate")!, state: .satisfied, date: date, refinement: identity, diagnostics: [], explanation: sighting),
        MonitorEvent(monitor: cargo, identifier: FixedName("anyCrate")!, state: .unsatisfied, date: date, refinement: nil, diagnostics: [], explanation: timeout),
        MonitorEvent(monitor: cargo, identifier: FixedName("crate7")!, state: .unknown, date: date, refinement: nil, diagnostics: [],
                     explanation: Explanation(source: .assumption)),
    ]
    guard render else { return }
    renderLines(count: events.count, repeats: repeats, what: "objects") { index, line in
        EventJSON.write(events[index], sequence: Int64(1_000 + index), into: &line)
    }
}

/// `repeats` rounds of `count` lines, each rendered by `body` into one writer (reset per line)
/// and written to /dev/null; prints the count, the allocations and the rate.
func renderLines(count: Int, repeats: Int, what: String, _ body: (Int, inout JSONWriter) -> Void) {
    let sink = open("/dev/null", O_WRONLY)
    defer { close(sink) }
    var line = JSONWriter(capacity: 4096)
    var bytes = 0
    let start = DispatchTime.now().uptimeNanoseconds
    let counted = allocations {
        for _ in 0..<repeats {
            for index in 0..<count {
                line.reset()
                body(index, &line)
                line.newline()
                bytes += write(sink, line.bytes.baseAddress, line.count)
            }
        }
    }
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    print("\(what) \(count * repeats) bytes \(bytes) allocations \(counted) seconds \(elapsed) per_second \(Int(Double(count * repeats) / max(elapsed, 1e-9)))")
}

/// The iBeacon report of the repository's corpus (Tests/Corpus) (v065: an LE Advertising Report event, H4 byte
/// dropped), parsed `repeats` times: HCI event walk, AD walk, iBeacon decode.
func ble(decode: Bool, repeats: Int) {
    let event: [UInt8] = [0x3E, 0x2A, 0x02, 0x01, 0x00, 0x01, 0x43, 0x3E, 0xA2, 0xC9, 0x6B, 0x6A, 0x1E, 0x02, 0x01, 0x1A,
                          0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15, 0xE2, 0xC5, 0x6D, 0xB5, 0xDF, 0xFB, 0x48, 0xD2, 0xB0, 0x60,
                          0xD0, 0xF5, 0xA7, 0x10, 0x96, 0xE0, 0x00, 0x64, 0x00, 0x00, 0xC5, 0xB3]
    var majors = 0
    var reports = 0
    let counted = event.withUnsafeBytes { raw in
        allocations {
            for _ in 0..<repeats {
                guard decode else { majors &+= Int(raw[5]); continue }
                _ = HCIEvents.forEachReport(in: raw) { report in
                    reports += 1
                    if case .iBeacon(_, let major, _, _)? = BeaconDecoder.decode(report.data) { majors &+= Int(major) }
                }
            }
        }
    }
    if decode { print("reports \(reports) majors \(majors) allocations \(counted)") }
}

/// Phones: 500 keys in the resolver. `hit`: an iPhone-like report (random address, Apple's
/// nearby data, no beacon frame) from an address of key 250 already resolved, `repeats` times:
/// HCI event walk, the beacon decoder finding nothing, the cache. `miss`: `repeats` addresses no
/// key resolves, each heard for the first time (every key tried).
func phones(kind: String, resolve: Bool, repeats: Int) {
    var random = SplitMix64(state: 0x1EC0)
    var text = ""
    for number in 0..<500 {
        text += "[p\(number)]\nirk = \""
        for _ in 0..<16 {
            let byte = String(UInt8(truncatingIfNeeded: random.next()), radix: 16)
            text += byte.count == 1 ? "0" + byte : byte
        }
        text += "\"\n"
    }
    guard let keys = try? PhoneKeys.parse(Array(text.utf8), file: "bench") else { fatalError("the bench's phones file") }
    let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: 1, events: 2, phones: 500))
    let phones = PhoneResolution(keys: keys, engine: engine)
    let aes = AES128()
    var words = [UInt32](repeating: 0, count: AES128.roundKeyWords)
    words.withUnsafeMutableBufferPointer { aes.expand(keys.phones[250].key, into: $0) }
    let prand: UInt32 = 0x45_6789
    let address = UInt64(prand) << 24 | UInt64(words.withUnsafeBufferPointer { aes.addressHash(prand: prand, $0) })
    var event: [UInt8] = [0x3E, 0x17, 0x02, 0x01, 0x00, 0x01]
    for index in 0..<6 { event.append(UInt8(truncatingIfNeeded: address >> (8 * UInt64(index)))) }
    event += [0x0B, 0x02, 0x01, 0x1A, 0x07, 0xFF, 0x4C, 0x00, 0x10, 0x02, 0x0B, 0x00, 0xC4]
    let strangers = (0..<(kind == "miss" ? repeats : 0)).map { _ in BLEAddress(value: (0x40_0001 | random.next() & 0x3F_FFFE) << 24 | random.next() & 0xFF_FFFF) }
    var found = 0
    let time = UTCTime(seconds: 1_710_496_800)
    let counted = event.withUnsafeBytes { raw in
        allocations {
            guard resolve else { return }
            if kind == "miss" {
                for stranger in strangers where phones.resolver.resolve(stranger) != nil { found += 1 }
                return
            }
            for _ in 0..<repeats {
                _ = HCIEvents.forEachReport(in: raw) { report in
                    // As the agent's gather: the beacon decoder first, then the phones.
                    if case .none = Sighting.from(report, time: time), case .some = phones.sighting(report, time: time) { found += 1 }
                }
            }
        }
    }
    if resolve { print("reports \(repeats) found \(found) allocations \(counted) keys_tried \(phones.resolver.keysTried)") }
}

/// 10,000 circular geofences (radius 50–500 m, exit margin 15 m) over a 60 km square around San
/// Jose, indexed, and 1,000 fixes: a third within metres of some circle's edge (where the exact
/// ellipsoidal distance is needed), a third inside a circle, a third anywhere. The same on every run.
func sanJoseGeofences() -> (index: CircleIndex, centers: [GeoPoint], radii: [Double], fixes: [(Double, Double)]) {
    var random = SplitMix64(state: 0x5EED) // the same circles and fixes on every run
    let circleCount = 10_000, fixCount = 1_000, margin = 15.0
    let metresPerDegreeLat = 111_000.0, metresPerDegreeLon = 111_000.0 * 0.7944 // cos 37.3°
    var centers: [GeoPoint] = []
    var radii: [Double] = []
    let index = CircleIndex(capacity: circleCount, cellSizeM: CircleIndex.suggestedCellSizeM(typicalReachM: 290))
    for id in 0..<circleCount {
        let center = GeoPoint(latitude: 37.3 + (random.unit() - 0.5) * 60_000 / metresPerDegreeLat,
                              longitude: -121.9 + (random.unit() - 0.5) * 60_000 / metresPerDegreeLon)
        let radius = 50 + 450 * random.unit()
        centers.append(center)
        radii.append(radius)
        try! index.insert(id: Int32(id), latitude: center.latitude, longitude: center.longitude, radiusM: radius, maxMarginM: margin)
    }
    var fixes: [(Double, Double)] = []
    for number in 0..<fixCount {
        let circle = Int(random.unit() * Double(circleCount))
        let bearing = random.unit() * 2 * Double.pi
        let distance: Double
        switch number % 3 {
        case 0: distance = radii[circle] + (random.unit() - 0.5) * 40
        case 1: distance = radii[circle] * random.unit()
        default: distance = -1
        }
        if distance < 0 {
            fixes.append((37.3 + (random.unit() - 0.5) * 60_000 / metresPerDegreeLat, -121.9 + (random.unit() - 0.5) * 60_000 / metresPerDegreeLon))
        } else {
            fixes.append((centers[circle].latitude + distance * cos(bearing) / metresPerDegreeLat,
                          centers[circle].longitude + distance * sin(bearing) / metresPerDegreeLon))
        }
    }
    return (index, centers, radii, fixes)
}

/// The geofences and fixes of `sanJoseGeofences`, fixes with 10 m accuracy. Both modes build the
/// index (start-up); --decode adds, per fix, the ECEF conversion, the index query and the
/// inside/outside/near decision for every candidate.
func geo(decide: Bool, repeats: Int) {
    let (index, centers, radii, fixes) = sanJoseGeofences()
    let fixCount = fixes.count, margin = 15.0, accuracy = 10.0
    var candidates = 0, inside = 0, near = 0, outside = 0
    var counted = 0
    let start = DispatchTime.now().uptimeNanoseconds
    if decide {
        centers.withUnsafeBufferPointer { centers in
            radii.withUnsafeBufferPointer { radii in
                fixes.withUnsafeBufferPointer { fixes in
                    counted = allocations {
                        for _ in 0..<repeats {
                            for number in 0..<fixes.count {
                                let point = GeoPoint(latitude: fixes[number].0, longitude: fixes[number].1)
                                index.forEachCandidate(near: point, accuracyM: accuracy) { id in
                                    candidates += 1
                                    switch Geodesy.compare(point, center: centers[Int(id)], radiusM: radii[Int(id)], marginM: margin) {
                                    case .inside: inside += 1
                                    case .outside: outside += 1
                                    case .near: near += 1
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    if decide {
        print("fixes \(fixCount * repeats) candidates \(candidates) allocations \(counted) seconds \(elapsed) fixes_per_second \(Int(Double(fixCount * repeats) / max(elapsed, 1e-9))) inside \(inside) near \(near) outside \(outside) overflow \(index.overflowCount) entries \(index.entriesInUse) bytes \(index.allocatedBytes)")
    }
}

/// 1,000 point pairs within 50 km of each other (the first anywhere, uniform over the sphere's
/// area; the second at a uniform bearing and distance on a sphere of the Earth's mean radius),
/// the same on every run. `geodesic` solves the inverse problem with both azimuths
/// (Geodesy.inverseSolution), `geodesic-distance` for the distance only (Geodesy.distanceM);
/// --load-only draws the pairs and stops.
func geodesic(azimuths: Bool, solve: Bool, repeats: Int) {
    var random = SplitMix64(state: 0x6E0D_E51C)
    var pairs: [(Double, Double, Double, Double)] = []
    for _ in 0..<1_000 {
        let lat = asin(random.uniform(-1, 1)) * 180 / .pi, lon = random.uniform(-180, 180)
        let delta = random.uniform(0, 50_000) / 6_371_008.8, theta = random.uniform(0, 2 * .pi)
        let phi1 = lat * .pi / 180
        let sinPhi2 = sin(phi1) * cos(delta) + cos(phi1) * sin(delta) * cos(theta)
        let lambda = atan2(sin(theta) * sin(delta) * cos(phi1), cos(delta) - sin(phi1) * sinPhi2)
        var lon2 = lon + lambda * 180 / .pi
        if lon2 > 180 { lon2 -= 360 } else if lon2 < -180 { lon2 += 360 }
        pairs.append((lat, lon, asin(max(-1, min(1, sinPhi2))) * 180 / .pi, lon2))
    }
    guard solve else { return }
    var sum = 0.0
    let start = DispatchTime.now().uptimeNanoseconds
    let counted = pairs.withUnsafeBufferPointer { pairs in
        allocations {
            for _ in 0..<repeats {
                for number in 0..<pairs.count {
                    let (lat1, lon1, lat2, lon2) = pairs[number]
                    if azimuths {
                        let solution = Geodesy.inverseSolution(lat1, lon1, lat2, lon2)
                        sum += solution.distanceM + solution.azimuth1Deg + solution.azimuth2Deg
                    } else {
                        sum += Geodesy.distanceM(lat1, lon1, lat2, lon2)
                    }
                }
            }
        }
    }
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    print("inverses \(pairs.count * repeats) sum \(sum) allocations \(counted) seconds \(elapsed) per_second \(Int(Double(pairs.count * repeats) / max(elapsed, 1e-9)))")
}

/// Nearest geofence edge (boundary-aware sampling) on the `sanJoseGeofences` data, per fix:
/// `index` (CircleIndex.nearestEdgeM with a 1,500 m limit: 50 m/s for 30 s), `unlimited` (the
/// same without a limit) or `linear` (FenceEdges, the exact distance to every circle; only the
/// first 20 fixes, as it is 10,000 exact distances each). Every mode builds both the index and
/// FenceEdges; --load-only stops there. Prints checksums of the answers (first20: the first 20
/// fixes' answers per round, comparable across the modes).
func nearest(mode: String, decide: Bool, repeats: Int) {
    let (index, centers, radii, fixes) = sanJoseGeofences()
    var edges = FenceEdges()
    for position in 0..<centers.count {
        edges.add(latitude: centers[position].latitude, longitude: centers[position].longitude, radiusM: radii[position])
    }
    guard decide else { return }
    let limitM = mode == "index" ? 1_500.0 : Double.infinity
    let count = mode == "linear" ? 20 : fixes.count
    var sum = 0.0, sumFirst20 = 0.0, beyond = 0
    let start = DispatchTime.now().uptimeNanoseconds
    let counted = fixes.withUnsafeBufferPointer { fixes in
        allocations {
            for _ in 0..<repeats {
                for number in 0..<count {
                    let distance = mode == "linear"
                        ? edges.nearestEdgeM(latitude: fixes[number].0, longitude: fixes[number].1)!
                        : index.nearestEdgeM(latitude: fixes[number].0, longitude: fixes[number].1, limitM: limitM)!
                    if distance < limitM { sum += distance } else { beyond += 1 }
                    if number < 20 { sumFirst20 += distance }
                }
            }
        }
    }
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    print("queries \(count * repeats) sum \(sum) allocations \(counted) beyond \(beyond) first20 \(sumFirst20 / Double(repeats)) seconds \(elapsed) queries_per_second \(Int(Double(count * repeats) / max(elapsed, 1e-9)))")
}

/// Writes a log of `megabytes` MiB into `directory` in LogStore's format: 8 MiB segments named by
/// their first sequence number, each opening with a 4 KiB checkpoint record, then 128-byte event
/// records (96-byte payloads). `locus log verify` then scans it as LogStore.open does (the store is
/// in LocusDevices, which this benchmark does not link). With `export`, the records after each
/// checkpoint are what an agent's log holds instead, in turn (every eight records): three events
/// (a geofence's, a wildcard beacon's with its refinement, a timeout), four fixes and a GPIO
/// change, all decodable, for `locus log export`. Prints "records N bytes B".
func logBuild(_ arguments: [String]) {
    guard arguments.count == 2 || (arguments.count == 3 && arguments[2] == "export"), let megabytes = Int(arguments[1]) else {
        print("usage: locus-bench log-build DIR MIB [export]")
        exit(2)
    }
    let directory = arguments[0]
    let export = arguments.count == 3
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let segmentSize = 8 << 20
    let total = megabytes << 20
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: LogRecord.maximumRecordSize, alignment: 16)
    defer { buffer.deallocate() }
    var sequence: UInt64 = 1
    var records = 0
    var written = 0
    var event = [UInt8](repeating: 0x5A, count: 96)
    let checkpoint = [UInt8](repeating: 0xC4, count: 4096)
    let agentRecords = export ? exportMix() : []
    while written < total {
        let first = sequence
        var segment = Data(capacity: segmentSize)
        func add(_ type: LogRecordType, _ payload: [UInt8]) {
            let header = LogRecordHeader(type: type, payloadLength: payload.count, sequence: sequence,
                                         time: 1_711_195_200_000_000_000 + Int64(sequence) * 1_000_000)
            let size = payload.withUnsafeBytes { try! LogRecord.encode(header, payload: $0, into: buffer) }
            segment.append(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count: size)
            sequence += 1
            records += 1
        }
        add(.checkpoint, checkpoint)
        while true {
            let (type, payload) = export ? agentRecords[records % agentRecords.count] : (.event, event)
            let size = LogRecord.headerSize + payload.count
            guard segment.count + size <= segmentSize && written + segment.count + size <= total else { break }
            if !export { for index in 0..<8 { event[index] = UInt8(truncatingIfNeeded: sequence >> UInt64(8 * index)) } }
            add(type, export ? payload : event)
        }
        let digits = "\(first)"
        let name = String(repeating: "0", count: 20 - digits.count) + digits + ".log"
        _ = FileManager.default.createFile(atPath: directory + "/" + name, contents: segment, attributes: [.posixPermissions: 0o640])
        written += segment.count
    }
    print("records \(records) bytes \(written)")
}

/// Eight records as an agent on the demo site writes them (see `logBuild`).
func exportMix() -> [(LogRecordType, [UInt8])] {
    func payload(_ body: (inout ByteWriter) -> Void) -> [UInt8] {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 8)
        defer { buffer.deallocate() }
        var writer = ByteWriter(buffer)
        body(&writer)
        return Array(writer.written)
    }
    let harbour = FixedName("harbour")!, cargo = FixedName("cargo")!
    let date = UTCTime(nanoseconds: 1_534_758_466_250_000_000)
    var fix = Explanation(source: .fix)
    (fix.latitude, fix.longitude, fix.accuracyM, fix.edgeDistanceM, fix.dwellMs) = (52.850123456, 5.313551234, 3, -12.345, 3_000)
    var sighting = Explanation(source: .sighting)
    (sighting.rssiSamples, sighting.rssiFiltered, sighting.rssiMinimum, sighting.rssiMaximum, sighting.distanceM) = (12, -63.4, -71, -58, 2.75)
    var timeout = Explanation(source: .timeout)
    timeout.dwellMs = 15_000
    let identity = BeaconIdentity(uuid: BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!, major: 100, minor: 0)
    let events = [
        MonitorEvent(monitor: harbour, identifier: FixedName("berth")!, state: .satisfied, date: date, refinement: nil, diagnostics: [], explanation: fix),
        MonitorEvent(monitor: cargo, identifier: FixedName("anyCrate")!, state: .satisfied, date: date, refinement: identity, diagnostics: [], explanation: sighting),
        MonitorEvent(monitor: cargo, identifier: FixedName("anyCrate")!, state: .unsatisfied, date: date, refinement: nil, diagnostics: [], explanation: timeout),
    ]
    func loggedFix(_ index: Int) -> [UInt8] {
        payload { LogPayload.write(LogPayload.LoggedFix(timeNs: date.totalNanoseconds + Int64(index) * 1_000_000_000,
                                                        latitude: 52.8501 + Double(index) * 1e-5, longitude: 5.3135 - Double(index) * 1e-5,
                                                        accuracyM: 3.2, speedMps: 1.8, trackDeg: 242.5, mode: 3), &$0) }
    }
    let gpio = payload { LogPayload.write(LogPayload.GPIOChange(output: FixedName("relay1")!, value: true, cause: .level,
                                                                monitor: harbour, identifier: FixedName("berth")!), &$0) }
    return [(.fix, loggedFix(0)), (.event, payload { LogPayload.write(events[0], &$0) }), (.gpio, gpio), (.fix, loggedFix(1)),
            (.event, payload { LogPayload.write(events[1], &$0) }), (.fix, loggedFix(2)),
            (.event, payload { LogPayload.write(events[2], &$0) }), (.fix, loggedFix(3))]
}

/// The monitor engine in steady state: 10,000 conditions already decided (unsatisfied, or
/// satisfied where the observations are), then `repeats` observations. `--load-only` builds the
/// same engine and observations without observing, so the difference is the observation cost.
func engineWorkload(kind: String, observe: Bool, repeats: Int) {
    let count = 10_000
    let engine = MonitorEngine(capacity: MonitorEngine.Capacity(conditions: count, events: 256,
                                                                circleCellSizeM: CircleIndex.suggestedCellSizeM(typicalReachM: 300),
                                                                vertices: kind == "polygon" ? 20 * count : 0))
    let monitor = FixedName("bench")!
    let start = UTCTime(seconds: 1_700_000_000)
    var random = SplitMix64(state: 7)
    // Every third condition shares a UUID with the two before it: a sighting concerns a few
    // conditions among 10,000, as on a site with thousands of different tags.
    let uuids = (0..<(count / 3 + 1)).map { BeaconUUID(high: 0xE2C5_6DB5_DFFB_48D2 &+ UInt64($0), low: 0xB060_D0F5_A710_96E0) }
    for index in 0..<count {
        let identifier = FixedName("c\(index)")!
        if kind == "fix" {
            let latitude = 37.2 + random.unit() * 0.54   // a 60 km square around San Jose
            let longitude = -122.2 + random.unit() * 0.68
            engine.add(monitor: monitor, identifier: identifier,
                       condition: .circle(CircularGeographicCondition(latitude: latitude, longitude: longitude, radiusM: 50 + random.unit() * 450)),
                       assuming: .unsatisfied, now: start)
        } else if kind == "polygon" {
            // The same square, a polygon of 20 vertices where each circle was: a star about its
            // centre, each vertex 0.5 to 1 of a radius of 50 to 500 m out.
            let latitude = 37.2 + random.unit() * 0.54
            let longitude = -122.2 + random.unit() * 0.68
            let radius = 50 + random.unit() * 450
            let bearings = (0..<20).map { Double($0) * 18 + random.unit() * 12 }
            let vertices = bearings.map { Geodesy.direct(latitude, longitude, azimuthDeg: $0, distanceM: radius * (0.5 + 0.5 * random.unit())) }
            let polygon = try! GeoPolygon(latitudes: vertices.map { $0.latitude }, longitudes: vertices.map { $0.longitude })
            engine.add(monitor: monitor, identifier: identifier, condition: .polygon(polygon), assuming: .unsatisfied, now: start)
        } else {
            // Mixed wildcards: a third exact, a third UUID+major, a third UUID only.
            let uuid = uuids[index / 3]
            let major = UInt16(index % 500)
            let condition: BeaconIdentityCondition
            switch index % 3 {
            case 0: condition = BeaconIdentityCondition(uuid: uuid, major: major, minor: UInt16(index))
            case 1: condition = BeaconIdentityCondition(uuid: uuid, major: major)
            default: condition = BeaconIdentityCondition(uuid: uuid)
            }
            engine.add(monitor: monitor, identifier: identifier, condition: .beacon(condition), assuming: .unsatisfied, now: start)
        }
    }
    var fixes: [Fix] = []
    var sightings: [Sighting] = []
    for index in 0..<1_000 {
        var fix = Fix(timeOfDayNs: 0)
        fix.time = UTCTime(seconds: start.seconds + Int64(index))
        fix.mode = .threeDimensional
        // A vehicle crossing the area at 15 m/s: consecutive fixes 15 m apart, as on the road.
        fix.latitude = 37.25 + Double(index) * 15 * 0.7071 / 111_000
        fix.longitude = -122.15 + Double(index) * 15 * 0.7071 / 88_000
        fix.latitudeSigmaM = 7
        fix.longitudeSigmaM = 7
        fixes.append(fix)
        let tag = Int(random.next() % UInt64(count))
        sightings.append(Sighting(identity: BeaconIdentity(uuid: uuids[tag / 3], major: UInt16(tag % 500), minor: UInt16(tag)),
                                  rssi: -60, measuredPower: -59, address: BLEAddress(value: UInt64(index)),
                                  time: UTCTime(seconds: start.seconds + Int64(index))))
    }
    // Settle: decide every condition once, handle the events.
    for index in 0..<fixes.count {
        if kind != "sighting" { engine.observe(fixes[index]) } else { engine.observe(sightings[index]) }
        while engine.oldestPendingEvent() != nil { engine.acknowledgeOldest() }
    }
    guard observe else { return }
    var events = 0
    let isFix = kind != "sighting"
    let counted = allocations {
        for _ in 0..<repeats {
            for index in 0..<fixes.count {
                if isFix { engine.observe(fixes[index]) } else { engine.observe(sightings[index]) }
                if engine.pendingEventCount > 0 {
                    while engine.oldestPendingEvent() != nil {
                        events += 1
                        engine.acknowledgeOldest()
                    }
                }
            }
        }
    }
    print("observations \(repeats * fixes.count) events \(events) allocations \(counted)")
}

/// One turn of the agent's loop (`AgentBenchmark`: the real loop on a pseudo-terminal GNSS port,
/// a log in a temporary directory). `idle`: the systemd watchdog is due every turn and nothing
/// else happens. `fix`: an NMEA epoch (RMC, GGA) is written before each turn, alternately 80 m and
/// 120 m north of a 100 m fence's centre (40 m/s, within the default preset's speed filter, so the
/// updater accepts every fix and never pauses), so every turn decodes a fix, decides an event,
/// logs both and hands the event on. `uplink`: the `fix` turn on a site with `[uplink]` to the
/// MQTT broker on 127.0.0.1 at port $LOCUS_BENCH_BROKER_PORT (Scripts/bench starts mosquitto):
/// the turns first run until the uplink has its CONNACK (at most 100 turns, 10 s), so the
/// measured turns are the steady state: each publishes its event and the record's state at QoS 1
/// and reads the PUBACKs that have come back for earlier turns. Both modes set up the agent (and
/// connect) and run 20 warm-up turns; --decode adds `repeats` measured turns, whose allocations
/// are counted. `places`: the `fix` turn on a site that annotates (`[geocoding] annotate = true`
/// over the index at $LOCUS_BENCH_PLACES): the event's log line names the place nearest it.
func agentTurns(kind: String, measure: Bool, repeats: Int, places: Bool = false) {
    let directory = NSTemporaryDirectory() + "locus-bench-agent-\(getpid())"
    try? FileManager.default.removeItem(atPath: directory)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    if kind == "idle" { setenv("WATCHDOG_USEC", "2", 1) } else { unsetenv("WATCHDOG_USEC") }
    var brokerPort: Int? = nil
    if kind == "uplink" {
        guard let port = ProcessInfo.processInfo.environment["LOCUS_BENCH_BROKER_PORT"].flatMap({ Int($0) }) else {
            print("agent-uplink: set LOCUS_BENCH_BROKER_PORT to an MQTT broker's port on 127.0.0.1")
            exit(2)
        }
        brokerPort = port
    }
    var placeIndex: String? = nil
    if places {
        guard let path = ProcessInfo.processInfo.environment["LOCUS_BENCH_PLACES"] else {
            print("agent-fix-places: set LOCUS_BENCH_PLACES to a place index (locus geo index)")
            exit(2)
        }
        placeIndex = path
    }
    guard let bench = AgentBenchmark(directory: directory, brokerPort: brokerPort, placeIndex: placeIndex) else { exit(1) }
    if brokerPort != nil {
        let deadline = Date().addingTimeInterval(10)
        var turns = 0
        while !bench.uplinkConnected && turns < 100 && Date() < deadline {
            bench.turn()
            turns += 1
        }
        guard bench.uplinkConnected else {
            print("agent-uplink: the uplink did not connect to 127.0.0.1:\(brokerPort!) (\(turns) turns)")
            exit(1)
        }
    }
    func checksummed(_ body: String) -> String {
        var checksum: UInt8 = 0
        for byte in body.utf8.dropFirst() { checksum ^= byte }
        return body + String(format: "*%02X\r\n", checksum)
    }
    let warmUp = 20
    let epochs: [[UInt8]] = (0..<(warmUp + repeats)).map { second in
        let time = String(format: "%02d%02d%02d.00", 10 + second / 3600, (second / 60) % 60, second % 60)
        let minutes = (second % 2 == 0 ? 80.0 : 120.0) / 111_132.0 * 60   // inside, then outside
        let lat = String(format: "45%010.7f,N", minutes)
        return Array((checksummed("$GPRMC,\(time),A,\(lat),00700.0000000,E,0.0,0.0,150324,,,A")
            + checksummed("$GPGGA,\(time),\(lat),00700.0000000,E,1,09,0.8,20.0,M,-30.0,M,,")).utf8)
    }
    let epochTurns = kind == "fix" || kind == "uplink"
    func turn(_ index: Int) {
        if epochTurns { bench.write(epochs[index]) }
        bench.turn()
    }
    for index in 0..<warmUp { turn(index) }
    guard measure else { return }
    let fixes = bench.fixes, events = bench.events
    let published = bench.uplinkPublished, acknowledged = bench.uplinkAcknowledged
    var counted = 0
    for index in warmUp..<(warmUp + repeats) {
        if epochTurns { bench.write(epochs[index]) }
        counted += allocations { bench.turn() }
    }
    print("turns \(repeats) fixes \(bench.fixes - fixes) events \(bench.events - events) allocations \(counted)"
        + (kind == "uplink" ? " published \(bench.uplinkPublished - published) acknowledged \(bench.uplinkAcknowledged - acknowledged)" : ""))
}

/// Beacon ranging with 500 beacons of the constraint in range, each heard once a second (RSSI
/// -40...-94 dBm), after 20 seconds of warm-up (the filters hold 20 samples). `second`: one
/// ranging second as the agent runs it, the second's 500 sightings plus the line (silent ones
/// dropped, the frame computed and sorted, 100 beacons rendered); `line`: the line alone.
/// `--load-only` builds the same ranger and sightings and runs the warm-up only (for `line`,
/// and observes the measured seconds' sightings, as `line` does outside its measure).
func rangingWorkload(kind: String, measure: Bool, repeats: Int) {
    let beacons = 500, warmUp = 20
    let ranger = BeaconRanger(beaconCapacity: 512, slots: 8)
    let uuid = BeaconUUID(high: 0xE2C5_6DB5_DFFB_48D2, low: 0xB060_D0F5_A710_96E0)
    ranger.start(slot: 0, BeaconIdentityConstraint(uuid: uuid))
    let startNs: Int64 = 1_700_000_000 * 1_000_000_000
    var random = SplitMix64(state: 11)
    var sightings: [Sighting] = []
    sightings.reserveCapacity((warmUp + repeats) * beacons)
    for second in 0..<(warmUp + repeats) {
        for minor in 0..<beacons {
            let offsetNs = Int64(random.next() % 1_000_000_000)
            sightings.append(Sighting(identity: BeaconIdentity(uuid: uuid, major: 1, minor: UInt16(minor)), rssi: Int8(-40 - Int(random.next() % 55)),
                                      measuredPower: -59, address: BLEAddress(value: UInt64(minor)),
                                      time: UTCTime(nanoseconds: startNs + Int64(second) * 1_000_000_000 + offsetNs)))
        }
    }
    // Ranging.lineBytes in the agent.
    var line = JSONWriter(capacity: 24 << 10)
    var bytes = 0
    let observeToo = kind == "second"
    func second(_ index: Int, observe: Bool) {
        if observe { for offset in (index * beacons)..<((index + 1) * beacons) { ranger.observe(sightings[offset]) } }
        let now = UTCTime(nanoseconds: startNs + Int64(index + 1) * 1_000_000_000)
        ranger.expire(now: now)
        let frame = ranger.range(slot: 0, now: now)
        line.reset()
        RangingJSON.frame(ranger.constraint(0), time: now, frame, ranger, beaconsPerLine: 100, into: &line)
        bytes += line.count
    }
    for index in 0..<warmUp { second(index, observe: true) }
    guard measure else {
        // `line` observes the measured seconds' sightings outside the work measured: so does its base.
        if !observeToo { for offset in (warmUp * beacons)..<((warmUp + repeats) * beacons) { ranger.observe(sightings[offset]) } }
        return
    }
    // `line` alone: the second's sightings are observed outside the count.
    var counted = 0
    for index in warmUp..<(warmUp + repeats) {
        if !observeToo { for offset in (index * beacons)..<((index + 1) * beacons) { ranger.observe(sightings[offset]) } }
        counted += allocations { second(index, observe: observeToo) }
    }
    print("seconds \(repeats) beacons \(ranger.count) bytes \(bytes) allocations \(counted)")
}

/// `locate` on a fresh fix: the agent has fixes (20 warm-up turns with an epoch each, HDOP 0.8:
/// 4 m), then a control connection sends `{"id":N,"op":"locate","accuracy":"hundredMeters"}`
/// before each measured turn; the turn reads the request, answers it at once from the last fix
/// (recent and accurate enough) and sends the reply, which the benchmark reads after the turn.
/// Allocations are counted in the turn only (the agent's side).
func agentLocate(measure: Bool, repeats: Int) {
    let directory = NSTemporaryDirectory() + "locus-bench-locate-\(getpid())"
    try? FileManager.default.removeItem(atPath: directory)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    unsetenv("WATCHDOG_USEC")
    guard let bench = AgentBenchmark(directory: directory) else { exit(1) }
    func checksummed(_ body: String) -> String {
        var checksum: UInt8 = 0
        for byte in body.utf8.dropFirst() { checksum ^= byte }
        return body + String(format: "*%02X\r\n", checksum)
    }
    for second in 0..<20 {
        let time = String(format: "10%02d%02d.00", (second / 60) % 60, second % 60)
        bench.write(Array((checksummed("$GPRMC,\(time),A,4500.0000000,N,00700.0000000,E,0.0,0.0,150324,,,A")
            + checksummed("$GPGGA,\(time),4500.0000000,N,00700.0000000,E,1,09,0.8,20.0,M,-30.0,M,,")).utf8))
        bench.turn()
    }
    guard bench.connect() else { exit(1) }
    bench.turn()   // the connection accepted
    let requests = (0..<(repeats + 1)).map { "{\"id\":\($0),\"op\":\"locate\",\"accuracy\":\"hundredMeters\"}" }
    bench.send(requests[repeats])
    bench.turn()
    guard let first = bench.reply(), String(decoding: first, as: UTF8.self).contains("\"accuracy_limited\":false") else {
        print("the warm-up request was not answered from the last fix")
        exit(1)
    }
    guard measure else { return }
    var counted = 0
    var answered = 0
    for index in 0..<repeats {
        bench.send(requests[index])
        counted += allocations { bench.turn() }
        if bench.reply() != nil { answered += 1 }
    }
    print("turns \(repeats) answered \(answered) allocations \(counted)")
}

/// A place index file read into memory (the agent maps it; the lookups read the same bytes) and
/// opened: the header, the checksum and every record's offsets checked, as at the agent's start.
func openPlaceIndex(_ path: String) -> (bytes: UnsafeMutableRawBufferPointer, index: PlaceIndex) {
    guard let data = FileManager.default.contents(atPath: path) else {
        print("cannot read \(path)")
        exit(1)
    }
    let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: data.count, alignment: 16)
    data.copyBytes(to: bytes)
    do throws(PlaceIndexError) {
        return (bytes, try PlaceIndex(bytes: UnsafeRawBufferPointer(bytes)))
    } catch {
        print("\(path): \(error)")
        exit(1)
    }
}

/// Opening a place index: `--load-only` reads the file into memory; `--decode` also opens it
/// `repeats` times (the header, the CRC32C over the body, every record's coordinates, strings
/// and flags, every name entry), printing the time per open and the allocations of all opens
/// but the first.
func placesOpen(_ path: String, open: Bool, repeats: Int) {
    guard let data = FileManager.default.contents(atPath: path) else {
        print("cannot read \(path)")
        exit(1)
    }
    let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: data.count, alignment: 16)
    defer { bytes.deallocate() }
    data.copyBytes(to: bytes)
    guard open else { return }
    var places = 0, counted = 0
    func openOnce() {
        do throws(PlaceIndexError) { places += try PlaceIndex(bytes: UnsafeRawBufferPointer(bytes)).placeCount } catch { exit(1) }
    }
    let start = DispatchTime.now().uptimeNanoseconds
    for round in 0..<repeats {
        // The first open in a process makes the magic bytes' array (a global): counted opens are the later ones.
        if round == 0 { openOnce() } else { counted += allocations { openOnce() } }
    }
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    print("opens \(repeats) places \(places / repeats) allocations \(counted) bytes \(bytes.count) seconds_per_open \(elapsed / Double(repeats))")
}

/// Reverse geocoding: `PlaceIndex.nearest` on 10,000 points, the same on every run: half within
/// 20 km of a gazetteer place (a place drawn at random, then a bearing and a distance of 0-20 km),
/// half anywhere on the sphere (uniform by area: mostly sea, some far from any place). Both modes
/// read and open the index and draw the points; --decode adds the lookups (of every point, or
/// with `near` or `anywhere` of that half only; `all` for every point), within `withinM` metres.
func placesReverse(_ path: String, half: String?, withinM: Double, lookup: Bool, repeats: Int) {
    let (bytes, index) = openPlaceIndex(path)
    defer { bytes.deallocate() }
    var random = SplitMix64(state: 0x9EC0DE)
    var points: [GeoPoint] = []
    let count = 10_000
    points.reserveCapacity(count)
    for number in 0..<count {
        if number % 2 == 0 {
            let record = index.record(random.below(index.siteStart))
            let distanceM = 20_000 * random.unit(), bearing = 2 * Double.pi * random.unit()
            let latitude = min(90, max(-90, record.latitude + distanceM * cos(bearing) / 111_132))
            var longitude = record.longitude + distanceM * sin(bearing) / (111_320 * max(0.01, cos(latitude * Double.pi / 180)))
            if longitude > 180 { longitude -= 360 } else if longitude < -180 { longitude += 360 }
            points.append(GeoPoint(latitude: latitude, longitude: longitude))
        } else {
            points.append(GeoPoint(latitude: asin(2 * random.unit() - 1) * 180 / Double.pi, longitude: 360 * random.unit() - 180))
        }
    }
    guard lookup else { return }
    var found = 0, sum = 0.0, near = 0
    let start = DispatchTime.now().uptimeNanoseconds
    let counted = points.withUnsafeBufferPointer { points in
        allocations {
            for _ in 0..<repeats {
                for number in stride(from: half == "anywhere" ? 1 : 0, to: points.count, by: half == nil ? 1 : 2) {
                    guard let match = index.nearest(to: points[number], within: withinM) else { continue }
                    found += 1
                    sum += match.distanceM
                    if match.distanceM <= 20_000 { near += 1 }
                }
            }
        }
    }
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    let looked = half == nil ? count : count / 2
    print("lookups \(looked * repeats) found \(found) allocations \(counted) seconds \(elapsed) per_second \(Int(Double(looked * repeats) / max(elapsed, 1e-9))) within20km \(near / repeats) mean_m \(Int(sum / Double(max(found, 1))))")
}

/// Forward geocoding: `PlaceNameSearch.search` on 10,000 names drawn from the gazetteer the index
/// was built from (the same on every run): half a place's name as GeoNames spells it, three
/// tenths one of its alternate names (the ASCII name among them), a fifth the name with ", CC"
/// (its country code) after it. Every other query is given a point to rank by (as the agent gives
/// the last fix), so the candidates written get their geodesic distance; at most 10 are written
/// into the caller's buffer and ranked, the rest only counted. Both modes read and open the index
/// and draw the names; --decode adds the searches.
func placesForward(_ path: String, gazetteer: String, search searching: Bool, repeats: Int) {
    let (bytes, index) = openPlaceIndex(path)
    defer { bytes.deallocate() }
    guard let text = FileManager.default.contents(atPath: gazetteer).map({ [UInt8]($0) }) else {
        print("cannot read \(gazetteer)")
        exit(1)
    }
    var lineStarts: [Int] = [0]
    for offset in 0..<text.count where text[offset] == 0x0A && offset + 1 < text.count { lineStarts.append(offset + 1) }
    var random = SplitMix64(state: 0xF0_4D)
    var queries: [[UInt8]] = []
    let count = 10_000
    while queries.count < count {
        let start = lineStarts[random.below(lineStarts.count)]
        var end = start
        while end < text.count && text[end] != 0x0A { end += 1 }
        let fields = text[start..<end].split(separator: 0x09, omittingEmptySubsequences: false)
        guard fields.count == 19, !fields[1].isEmpty else { continue }
        let name = Array(fields[1])
        switch queries.count % 10 {
        case 0..<5: queries.append(name)
        case 5..<8:
            let alternates = ([fields[2]] + fields[3].split(separator: UInt8(ascii: ","))).filter { !$0.isEmpty }
            queries.append(alternates.isEmpty ? name : Array(alternates[random.below(alternates.count)]))
        default:
            queries.append(fields[8].count == 2 ? name + Array(", ".utf8) + Array(fields[8]) : name)
        }
    }
    let near = GeoPoint(latitude: 48.1374, longitude: 11.5755)
    guard searching else { return }
    let searcher = PlaceNameSearch()
    let results = UnsafeMutableBufferPointer<PlaceCandidate>.allocate(capacity: 10)
    defer { results.deallocate() }
    var total = 0, matched = 0, written = 0
    let start = DispatchTime.now().uptimeNanoseconds
    let counted = queries.withUnsafeBufferPointer { queries in
        allocations {
            for _ in 0..<repeats {
                for number in 0..<queries.count {
                    let result = queries[number].withUnsafeBytes { query in
                        searcher.search(query, in: index, near: number % 2 == 0 ? near : nil, into: results)
                    }
                    total += result.total
                    written += result.written
                    if result.total > 0 { matched += 1 }
                }
            }
        }
    }
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    print("searches \(count * repeats) matched \(matched) allocations \(counted) seconds \(elapsed) per_second \(Int(Double(count * repeats) / max(elapsed, 1e-9))) places \(total / repeats) written \(written / repeats)")
}

let arguments = CommandLine.arguments.dropFirst()
guard let workload = arguments.first else {
    print("usage: locus-bench nmea (--decode|--load-only) [--repeat N] FILE...")
    exit(2)
}
var rest = Array(arguments.dropFirst())
if workload == "log-build" {
    logBuild(rest)
    exit(0)
}
let decode = rest.first == "--decode"
rest.removeFirst()
var repeats = 1
if rest.first == "--repeat" { repeats = Int(rest[1]) ?? 1; rest.removeFirst(2) }
switch workload {
case "nmea": nmea(load(rest), decode: decode, repeats: repeats)
case "tpv-json": tpvJSON(load(rest), render: decode, repeats: repeats)
case "event-json": eventJSON(render: decode, repeats: repeats)
case "ble": ble(decode: decode, repeats: repeats)
case "phones-hit": phones(kind: "hit", resolve: decode, repeats: repeats)
case "phones-miss": phones(kind: "miss", resolve: decode, repeats: repeats)
case "geo": geo(decide: decode, repeats: repeats)
case "geodesic", "geodesic-distance": geodesic(azimuths: workload == "geodesic", solve: decode, repeats: repeats)
case "nearest", "nearest-unlimited", "nearest-linear":
    nearest(mode: workload == "nearest" ? "index" : workload == "nearest-unlimited" ? "unlimited" : "linear", decide: decode, repeats: repeats)
case "engine-fix": engineWorkload(kind: "fix", observe: decode, repeats: repeats)
case "engine-sighting": engineWorkload(kind: "sighting", observe: decode, repeats: repeats)
case "engine-polygon": engineWorkload(kind: "polygon", observe: decode, repeats: repeats)
case "agent-idle": agentTurns(kind: "idle", measure: decode, repeats: repeats)
case "agent-fix": agentTurns(kind: "fix", measure: decode, repeats: repeats)
case "agent-fix-places": agentTurns(kind: "fix", measure: decode, repeats: repeats, places: true)
case "agent-uplink": agentTurns(kind: "uplink", measure: decode, repeats: repeats)
case "ranging-second": rangingWorkload(kind: "second", measure: decode, repeats: repeats)
case "ranging-line": rangingWorkload(kind: "line", measure: decode, repeats: repeats)
case "agent-locate": agentLocate(measure: decode, repeats: repeats)
case "places-open": placesOpen(rest[0], open: decode, repeats: repeats)
case "places-reverse":
    // places-reverse INDEX [all|near|anywhere [WITHIN_METRES]]
    placesReverse(rest[0], half: rest.count > 1 && rest[1] != "all" ? rest[1] : nil,
                  withinM: rest.count > 2 ? Double(rest[2]) ?? .infinity : .infinity, lookup: decode, repeats: repeats)
case "places-forward": placesForward(rest[0], gazetteer: rest[1], search: decode, repeats: repeats)
default:
    print("unknown workload \(workload)")
    exit(2)
}
