import Foundation
@testable import LocusAgent
import LocusCore
import LocusDevices
@testable import LocusFleet
import Testing

/// `FleetRecord`, the one mapping from a gateway's record to a row: from `locus log export`
/// lines (import) and from the uplink's MQTT payloads (the coming ingest), on the demo's real log.
@Suite struct RecordMappingTests {
    static let envelope: Set<String> = ["gateway", "seq", "prev", "time", "type"]

    /// The members of a JSON object without the envelope, as a parsed value (for comparison).
    static func members(_ value: JSONValue?, dropping: Set<String> = envelope) -> String {
        guard case .object(let members)? = value else { return "not an object" }
        return FleetJSON.text(members: members.filter { !dropping.contains($0.key) })
    }

    /// Strings written whole between the bytes that need an escape: JSON text that Foundation
    /// reads back to the same strings, and COPY fields escaped byte by byte as COPY's text
    /// format says (backslash, tab, newline, carriage return).
    @Test func stringsAreEscapedForJSONAndCOPY() throws {
        let controls = String(decoding: (1...0x1F).map { UInt8($0) }, as: UTF8.self)
        let samples = ["", "plain", controls, "a\"b\\c", "\\\\\"\"", "é–🚚\tend", "tab\tat the end\t", "\r\n\r\n", String(repeating: "x", count: 300) + "\n"]
        for sample in samples {
            let parsed = try JSONParser.parse(Array("{\"s\":\(FleetJSON.text(.string(sample)))}".utf8))
            #expect(parsed["s"]?.string == sample, "\(sample.debugDescription)")
            let foundation = try JSONSerialization.jsonObject(with: Data(FleetJSON.text(.string(sample)).utf8), options: .fragmentsAllowed)
            #expect(foundation as? String == sample, "\(sample.debugDescription)")
            var field: [UInt8] = []
            PostgresText.copyField(sample, into: &field)
            var expected: [UInt8] = []
            for byte in sample.utf8 {
                switch byte {
                case 0x5C: expected += Array("\\\\".utf8)
                case 0x09: expected += Array("\\t".utf8)
                case 0x0A: expected += Array("\\n".utf8)
                case 0x0D: expected += Array("\\r".utf8)
                default: expected.append(byte)
                }
            }
            #expect(field == expected, "\(sample.debugDescription)")
        }
        // A string with an escape in the input is read through the escape, one without as it stands.
        let mixed = try JSONParser.parse(Array(#"{"a":"a\u00e9b\n","b":"a\\u00e9b"}"#.utf8))
        #expect(mixed["a"]?.string == "aéb\n" && mixed["b"]?.string == "a\\u00e9b")
        #expect(throws: JSONError.self) { try JSONParser.parse(Array("{\"a\":\"a\u{01}\"}".utf8)) }
    }

    @Test func everyKindOfTheDemoLogMapsToItsColumnsAndPayload() throws {
        let log = try Fleet.demoLog.get()
        #expect(log.count("event") >= 5 && log.count("gpio") >= 2 && log.count("visit") >= 2,
                "the demo logs events, GPIO changes and visits: \(log.count("event")), \(log.count("gpio")), \(log.count("visit"))")
        #expect(log.count("fix") >= 1 && log.count("condition-added") == 4, "and records that are not published")
        var mapped = 0
        for line in log.lines {
            guard let type = line["type"]?.string, let kind = FleetRecord.Kind(rawValue: type) else { continue }
            let record = try FleetRecord.exported(line, gateway: "gw-demo", prev: 7)
            #expect(record.seq == line["seq"]?.integer(in: 1...Int64.max) && record.prev == 7 && record.gateway == "gw-demo")
            #expect(record.kind == kind && record.source == .logImport)
            // The time each kind derives is the record's time as the log holds it.
            #expect(record.time == line["time"]?.string, "\(type) \(record.seq): \(record.time)")
            switch kind {
            case .event:
                let event = try #require(line["event"])
                #expect(record.monitor == event["monitor"]?.string && record.identifier == event["identifier"]?.string)
                #expect(record.state == event["state"]?.string && record.output == nil && record.value == nil)
                #expect(record.payload == Self.members(event), "an event's payload is the event without its seq")
            case .gpio:
                #expect(record.output == line["output"]?.string && record.value == line["value"]?.bool && record.state == nil)
                #expect(record.monitor == line["monitor"]?.string && record.identifier == line["identifier"]?.string)
                #expect(record.payload == Self.members(line))
            case .visit:
                #expect(record.monitor == nil && record.output == nil && record.value == nil)
                #expect(record.payload == Self.members(line))
                let departure = line["departure"]?.string
                #expect(record.time == departure ?? line["arrival"]?.string)
            case .config, .command:
                #expect(record.monitor == nil && record.output == nil && record.state == nil)
                #expect(record.payload == Self.members(line))
            }
            mapped += 1
        }
        #expect(mapped == log.publishedSeqs.count)
    }

    /// The payloads the uplink publishes for the same log records (`UplinkJSON`, as the agent
    /// writes them) give the same rows as the export's lines: the ingest can reuse the mapping.
    /// The uplink's payloads of a log's records (with the uplink's "prev") and the import of the
    /// same log's export (with `PrevChain`'s) give the same rows, prev included.
    @Test func theUplinksPayloadsOfTheSameRecordsGiveTheSameRows() throws {
        let log = try Fleet.demoLog.get()
        var chain = PrevChain()
        var exported: [Int64: FleetRecord] = [:]
        for line in log.lines {
            guard let seq = line["seq"]?.integer(in: 1...Int64.max) else { continue }
            let published = line["type"]?.string.flatMap { FleetRecord.Kind(rawValue: $0) } != nil
            if published {
                let record = try FleetRecord.exported(line, gateway: "gw-demo", prev: chain.prev(of: seq))
                exported[record.seq] = record
            }
            chain.read(seq, published: published)
        }
        var payloads: [(FleetRecord.Kind, [UInt8])] = []
        let gateway = Array("gw-demo".utf8)
        var writer = JSONWriter(capacity: 4096)
        var previous: UInt64 = 0
        _ = try LogStore.scan(directory: log.state) { header, payload in
            var reader = ByteReader(payload)
            writer.reset()
            gateway.withUnsafeBytes { gatewayBytes in
                switch header.type {
                case .event?:
                    guard let event = LogPayload.readEvent(&reader) else { return }
                    UplinkJSON.event(event, sequence: header.sequence, previous: previous, gateway: gatewayBytes, into: &writer)
                    payloads.append((.event, Array(writer.bytes)))
                case .gpio?:
                    guard let change = LogPayload.readGPIO(&reader) else { return }
                    UplinkJSON.gpio(change, time: UTCTime(nanoseconds: header.time), sequence: header.sequence, previous: previous,
                                    gateway: gatewayBytes, into: &writer)
                    payloads.append((.gpio, Array(writer.bytes)))
                case .visit?:
                    guard let visit = LogPayload.readVisit(&reader) else { return }
                    UplinkJSON.visit(visit, sequence: header.sequence, previous: previous, gateway: gatewayBytes, into: &writer)
                    payloads.append((.visit, Array(writer.bytes)))
                default:
                    return
                }
                previous = header.sequence
            }
        }
        #expect(payloads.count == exported.count && !payloads.isEmpty)
        for (kind, bytes) in payloads {
            var record = try FleetRecord.published(try JSONParser.parse(bytes), kind: kind)
            #expect(record.source == .mqtt && record.prev != nil)
            record.source = .logImport
            #expect(record == exported[record.seq], "\(String(decoding: bytes, as: UTF8.self))")
        }
        // A payload whose gateway could not know its chain says "prev":null.
        let first = try #require(payloads.first)
        let unknown = String(decoding: first.1, as: UTF8.self).replacingOccurrences(of: #""prev":0}"#, with: #""prev":null}"#)
        #expect(unknown.hasSuffix(#""prev":null}"#))
        #expect(try FleetRecord.published(try JSONParser.parse(Array(unknown.utf8)), kind: first.0).prev == nil)
    }

    /// Lines that are not records of their kind, and why.
    static let refused: [(line: String, reason: String)] = [
        (#"{"seq":9,"time":"2024-03-14T00:05:30.000Z","type":"event"}"#, "an event record without 'event'"),
        (#"{"seq":9,"time":"2024-03-14T00:05:30.000Z","type":"event","error":"undecodable event payload"}"#,
         "an event record without 'event' (the export says: undecodable event payload)"),
        (#"{"seq":9,"type":"event","event":{"monitor":"m","identifier":"i","state":"satisfied","date":"2024-03-14T00:05:30Z","seq":8}}"#,
         "the event's seq 8 is not the record's 9"),
        (#"{"seq":9,"type":"event","event":{"monitor":"","identifier":"i","state":"satisfied","date":"2024-03-14T00:05:30Z"}}"#,
         "monitor is not a non-empty string"),
        (#"{"seq":9,"type":"event","event":{"monitor":"m","identifier":"i","state":"on","date":"2024-03-14T00:05:30Z"}}"#,
         "state is not satisfied, unsatisfied or unknown"),
        (#"{"seq":9,"type":"event","event":{"monitor":"m","identifier":"i","state":"satisfied","date":"2024-02-30T00:05:30Z"}}"#,
         "date \"2024-02-30T00:05:30Z\" is not a UTC time like 2024-03-14T00:05:30.000Z"),
        (#"{"seq":9,"type":"event","event":{"monitor":"m","identifier":"i","state":"satisfied","date":1710374730}}"#,
         "date 1710374730 is not a UTC time like 2024-03-14T00:05:30.000Z"),
        (#"{"seq":9,"type":"event","event":{"monitor":"m\u0000","identifier":"i","state":"satisfied","date":"2024-03-14T00:05:30Z"}}"#,
         "the string 'm\\u0000' holds U+0000, which PostgreSQL cannot store"),
        (#"{"seq":9,"time":"2024-03-14T00:05:30.000Z","type":"gpio","output":"relay1","value":"on","cause":"level"}"#,
         "value is not true or false"),
        (#"{"seq":9,"type":"gpio","output":"relay1","value":true,"cause":"level"}"#, "no time"),
        (#"{"seq":9,"time":"2024-03-14T00:05:30.000Z","type":"gpio","output":"relay1","value":true,"monitor":"m"}"#,
         "identifier is not a non-empty string"),
        (#"{"seq":9,"time":"2024-03-14T00:05:30.000Z","type":"visit","arrival":"2024-03-14T00:05:30.000Z","lat":1,"lon":2,"radius":3}"#,
         "no departure (null for an arrival)"),
        (#"{"seq":9,"time":"2024-03-14T00:05:30.000Z","type":"visit","arrival":"2024-03-14T00:05:30.000Z","departure":null,"lat":91,"lon":2,"radius":3}"#,
         "lat is not a number in -90.0...90.0"),
        (#"{"seq":0,"time":"2024-03-14T00:05:30.000Z","type":"visit"}"#, "seq 0 is not a sequence number (1 to 2^53)"),
        (#"{"seq":"9","time":"2024-03-14T00:05:30.000Z","type":"visit"}"#, "seq \"9\" is not a sequence number (1 to 2^53)"),
        (#"{"seq":1.5,"time":"2024-03-14T00:05:30.000Z","type":"visit"}"#, "seq 1.5 is not a sequence number (1 to 2^53)"),
    ]

    @Test func malformedRecordsAreRefusedWithTheirReason() throws {
        for (line, reason) in Self.refused {
            let value = try JSONParser.parse(Array(line.utf8))
            #expect(throws: FleetRecordError(reason), "\(line)") { try FleetRecord.exported(value, gateway: "gw", prev: nil) }
        }
        let payload = try JSONParser.parse(Array(#"{"seq":5,"prev":5,"output":"relay1","value":true,"time":"2024-03-14T00:05:30Z"}"#.utf8))
        #expect(throws: FleetRecordError("no gateway (a string)")) { try FleetRecord.published(payload, kind: .gpio) }
        let badPrev = try JSONParser.parse(Array(#"{"gateway":"gw","seq":5,"prev":5,"output":"relay1","value":true,"time":"2024-03-14T00:05:30Z"}"#.utf8))
        #expect(throws: FleetRecordError("prev 5 is not a sequence number below seq 5")) { try FleetRecord.published(badPrev, kind: .gpio) }
        let spaced = try JSONParser.parse(Array(#"{"gateway":"gw 7","seq":5,"output":"relay1","value":true,"time":"2024-03-14T00:05:30Z"}"#.utf8))
        #expect(throws: FleetRecordError("the gateway id 'gw 7' holds a space or a control character")) { try FleetRecord.published(spaced, kind: .gpio) }
    }

    @Test func timesArePostgresReadableUTCTimesOnly() {
        for good in ["2024-03-14T00:05:30Z", "2024-03-14T00:05:30.000Z", "2024-02-29T23:59:59.123456789Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.9Z"] {
            #expect(FleetJSON.isTimestamp(good), "\(good)")
        }
        for bad in ["2023-02-29T00:00:00Z", "0000-01-01T00:00:00Z", "2024-03-14 00:05:30Z", "2024-03-14T00:05:30", "2024-03-14T24:00:00Z",
                    "2024-03-14T00:05:60Z", "2024-03-14T00:05:30.Z", "2024-03-14T00:05:30.1234567890Z", "2024-13-01T00:00:00Z",
                    "2024-03-14T00:05:30+01:00", "２024-03-14T00:05:30Z", ""] {
            #expect(!FleetJSON.isTimestamp(bad), "\(bad)")
        }
    }

    @Test func prevFollowsThePublishedRecordsAndMarksHoles() {
        // From the log's start: 1 condition, 2 event (prev 0), 3 fix, 4 gpio (prev 2), 5 missing, 6 fix, 7 event (prev 5).
        var chain = PrevChain()
        chain.read(1, published: false)
        #expect(chain.prev(of: 2) == 0)
        chain.read(2, published: true)
        chain.read(3, published: false)
        #expect(chain.prev(of: 4) == 2)
        chain.read(4, published: true)
        chain.read(6, published: false)
        #expect(chain.prev(of: 7) == 5, "the record before 6 is missing: it may have been published")
        chain.read(7, published: true)
        #expect(chain.prev(of: 8) == 7)
        #expect(chain.orderProblem(7) == "seq 7 after seq 7: out of order or repeated")
        #expect(chain.orderProblem(8) == nil)

        // A file that starts later: unknown until a published record has been read.
        var late = PrevChain()
        #expect(late.prev(of: 40) == nil)
        late.read(40, published: false)
        #expect(late.prev(of: 41) == nil)
        late.read(41, published: true)
        #expect(late.prev(of: 42) == 41)
        #expect(PrevChain().prev(of: 1) == 0, "the log's very first record")
        // A hole right after the start: the next published record points into it.
        var holed = PrevChain()
        holed.read(1, published: false)
        #expect(holed.prev(of: 4) == 3)
    }

    @Test func theLongestImportLineIsTheLongestExportLine() {
        #expect(LogImport.maximumLineBytes == LogExport.lineCapacity)
        #expect(LogImport.keptBytes < LogImport.maximumLineBytes)
    }
}
