import Foundation
import LocusCore
import LocusFleet
import Testing
import TestSupport

/// `locus-fleet import` and `status` against a real PostgreSQL, on logs made by `locus`.
@Suite struct ImportTests {
    /// (seq, prev) of a gateway's stored records, in seq order.
    static func stored(_ url: String, _ gateway: String) throws -> [(seq: Int64, prev: Int64?)] {
        try Fleet.connect(url).execute("select seq, prev from records where gateway = $1 order by seq", [gateway]).rows.map {
            (Int64($0[0]!)!, $0[1].flatMap { Int64($0) })
        }
    }

    /// Everything the tables hold, as one digest (received_at included: a row written again would show).
    static func digest(_ url: String) throws -> String {
        try Fleet.connect(url).execute("""
            select md5(coalesce((select string_agg(r::text, '|' order by gateway, seq) from records r), '')
                    || coalesce((select string_agg(g::text, '|' order by gateway) from gateways g), '')
                    || coalesce((select string_agg(q::text, '|' order by id) from quarantine q), ''))
            """).scalar ?? ""
    }

    /// Writes `lines` (joined with newlines, one at the end) as DIR/log.jsonl of a new host directory.
    static func hostDirectory(_ name: String, _ lines: [String]) throws -> String {
        let directory = try Fleet.temporaryDirectory("hosts") + "/" + name
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try (lines.joined(separator: "\n") + "\n").write(toFile: directory + "/log.jsonl", atomically: true, encoding: .utf8)
        return directory
    }

    static func textLines(_ log: GatewayLog) -> [String] { log.text.split(separator: "\n").map(String.init) }

    @Test func importingTwiceChangesNothingAndStoresExactlyThePublishedRecords() throws {
        let url = try Fleet.migratedDatabase("twice")
        let demo = try Fleet.demoLog.get()
        let replay = try Fleet.replayLog(events: 3_000, gateway: "gw-replay")
        #expect(replay.count("checkpoint") >= 2, "checkpoints fall between the events: \(replay.count("checkpoint"))")
        let first = try Fleet.fleet(["import", "--database", url, "--batch", "1000", demo.directory, replay.directory])
        #expect(first.status == 0, "\(first.error)")
        let demoCount = demo.publishedSeqs.count
        #expect(first.output == """
            gw-demo: \(demoCount) records read, \(demoCount) new, 0 already stored, 0 quarantined
            gw-replay: 3000 records read, 3000 new, 0 already stored, 0 quarantined

            """)
        let after = try Self.digest(url)
        let second = try Fleet.fleet(["import", "--database", url, demo.directory, replay.directory])
        #expect(second.status == 0)
        #expect(second.output == """
            gw-demo: \(demoCount) records read, 0 new, \(demoCount) already stored, 0 quarantined
            gw-replay: 3000 records read, 0 new, 3000 already stored, 0 quarantined

            """)
        #expect(try Self.digest(url) == after, "the second import changed nothing")

        // Exactly the published records of `locus log export`, each pointing at the one before it.
        for log in [demo, replay] {
            let gateway = URL(fileURLWithPath: log.directory).lastPathComponent
            let rows = try Self.stored(url, gateway)
            #expect(rows.map(\.seq) == log.publishedSeqs, "\(gateway)")
            #expect(rows.map(\.prev) == [0] + log.publishedSeqs.dropLast().map { Optional($0) }, "\(gateway)")
        }
        let status = try Fleet.fleet(["status", "--database", url])
        #expect(status.status == 0, "\(status.output)")
        for log in [demo, replay] {
            let gateway = URL(fileURLWithPath: log.directory).lastPathComponent
            let published = log.lines.filter { ["event", "gpio", "visit"].contains($0["type"]?.string ?? "") }
            let lastSeen = published.compactMap { $0["time"]?.string }.max()!
            let count = published.count
            #expect(status.output.contains("\(gateway): last seen \(lastSeen), last seq \(log.publishedSeqs.last!), \(count) records, 0 gaps, 0 unverified, lag "),
                    "\(status.output)")
        }
        #expect(!status.output.contains("GAP"))
    }

    @Test func theViewsReadTheRecords() throws {
        let url = try Fleet.migratedDatabase("views")
        let demo = try Fleet.demoLog.get()
        #expect(try Fleet.fleet(["import", "--database", url, demo.directory]).status == 0)
        let connection = try Fleet.connect(url)
        let events = try connection.execute("select count(*) from events").scalar
        #expect(events == String(demo.count("event")))
        #expect(try connection.execute("select count(*) from gpio_changes").scalar == String(demo.count("gpio")))
        #expect(try connection.execute("select count(*) from visits").scalar == String(demo.count("visit")))
        // The crate's refinement, and each condition's newest event.
        let refined = try connection.execute("select refinement ->> 'major' from events where identifier = 'anyCrate' and state = 'satisfied' limit 1")
        #expect(refined.scalar == "100")
        let current = try connection.execute("select monitor || '/' || identifier, state, seq from current_state order by 1").rows
        var newest: [String: (String, Int64)] = [:]
        for line in demo.lines where line["type"]?.string == "event" {
            let event = line["event"]!
            newest[event["monitor"]!.string! + "/" + event["identifier"]!.string!] = (event["state"]!.string!, line["seq"]!.integer(in: 1...Int64.max)!)
        }
        #expect(current.map { "\($0[0]!) \($0[1]!) \($0[2]!)" } == newest.keys.sorted().map { "\($0) \(newest[$0]!.0) \(newest[$0]!.1)" })
        // A visit's arrival, departure and place, read through the view.
        let visit = try connection.execute("select \(FleetStatusSQL.utc("arrival")), lat, radius from visits where departure is not null order by seq limit 1").rows[0]
        let line = demo.lines.first { $0["type"]?.string == "visit" && $0["departure"]?.string != nil }!
        #expect(visit[0] == line["arrival"]?.string && Double(visit[1]!) == line["lat"]?.number && Double(visit[2]!) == line["radius"]?.number)
        let summary = try connection.execute("select records, gaps, unverified from gateway_summary where gateway = 'gw-demo'").rows[0]
        #expect(summary == [String(demo.publishedSeqs.count), "0", "0"])
    }

    @Test func aDeletedLineInTheMiddleIsExactlyOneGap() throws {
        let url = try Fleet.migratedDatabase("gap")
        let log = try Fleet.replayLog(events: 400, gateway: "gw-gap")
        var lines = Self.textLines(log)
        // An event in the middle whose neighbours are events too.
        let published = Set(log.publishedSeqs)
        let index = try #require((lines.count / 2..<lines.count - 1).first { index in
            (index - 1...index + 1).allSatisfy { published.contains(log.lines[$0]["seq"]!.integer(in: 1...Int64.max)!) }
        })
        let deleted = log.lines[index]["seq"]!.integer(in: 1...Int64.max)!
        lines.remove(at: index)
        let directory = try Self.hostDirectory("gw-gap", lines)
        let run = try Fleet.fleet(["import", "--database", url, directory])
        #expect(run.output == "gw-gap: 399 records read, 399 new, 0 already stored, 0 quarantined\n", "\(run.error)")

        let status = try Fleet.fleet(["status", "--database", url])
        #expect(status.status == 1)
        #expect(status.output.contains("399 records, 1 gaps, 0 unverified, lag ")
                && status.output.hasSuffix(" d\nGAP gw-gap: seq \(deleted) missing (between \(deleted - 1) and \(deleted + 1))\n"), "\(status.output)")
        let json = try Fleet.fleet(["status", "--database", url, "--json"])
        #expect(json.status == 1)
        let document = try JSONParser.parse(Array(json.output.utf8))
        #expect(FleetJSON.text(document["gaps"]!) == #"[{"gateway":"gw-gap","after_seq":\#(deleted - 1),"missing_from":\#(deleted),"missing_to":\#(deleted),"next_seq":\#(deleted + 1)}]"#)
        #expect(FleetJSON.text(document["gateways"]!).contains(#""records":399,"gaps":1,"unverified":0"#))

        // The whole log brings the missing record: the gap closes.
        let full = try Fleet.fleet(["import", "--database", url, "--gateway", "gw-gap", log.directory])
        #expect(full.output == "gw-gap: 400 records read, 1 new, 399 already stored, 0 quarantined\n")
        let closed = try Fleet.fleet(["status", "--database", url])
        #expect(closed.status == 0 && closed.output.contains("400 records, 0 gaps, 0 unverified, lag "), "\(closed.output)")
    }

    @Test func aHoleBeforeTheNextPublishedRecordReachesBackToTheStoredOne() throws {
        // Deleting a checkpoint (not a published record): the import cannot know what the line
        // was, so the hole is reported from the last stored record up to it.
        let url = try Fleet.migratedDatabase("checkpoint")
        let log = try Fleet.replayLog(events: 1_500, gateway: "gw-checkpoint")
        var lines = Self.textLines(log)
        let index = try #require(log.lines.lastIndex { $0["type"]?.string == "checkpoint" })
        let checkpoint = log.lines[index]["seq"]!.integer(in: 1...Int64.max)!
        let before = log.publishedSeqs.last { $0 < checkpoint }!
        let after = log.publishedSeqs.first { $0 > checkpoint }!
        lines.remove(at: index)
        _ = try Fleet.fleet(["import", "--database", url, try Self.hostDirectory("gw-checkpoint", lines)])
        let status = try Fleet.fleet(["status", "--database", url])
        let range = before + 1 == checkpoint ? "seq \(checkpoint)" : "seq \(before + 1)..\(checkpoint)"
        #expect(status.output.hasSuffix("GAP gw-checkpoint: \(range) missing (between \(before) and \(after))\n"), "\(status.output)")
    }

    @Test func aFileThatStartsLaterIsUnverifiedNotAGap() throws {
        let url = try Fleet.migratedDatabase("later")
        let log = try Fleet.replayLog(events: 200, gateway: "gw-later")
        // What fetch-logs keeps when retention deleted the start before the first fetch.
        let export = try Fleet.locus(["log", "export", "--state", log.state, "--after-seq", "100"])
        let directory = try Self.hostDirectory("gw-later", export.output.split(separator: "\n").map(String.init))
        #expect(try Fleet.fleet(["import", "--database", url, directory]).status == 0)
        let rows = try Self.stored(url, "gw-later")
        // Each row names the record published before it (fix records between them are not published).
        #expect(rows.first?.seq == 101 && rows.first?.prev == nil && zip(rows, rows.dropFirst()).allSatisfy { $1.prev == $0.seq })
        let status = try Fleet.fleet(["status", "--database", url])
        #expect(status.status == 0 && status.output.contains(", 1 unverified, lag "), "\(status.output)")
    }

    @Test func theGatewayIdComesFromTheOptionTheFileOrTheDirectory() throws {
        let url = try Fleet.migratedDatabase("gateways")
        let log = try Fleet.replayLog(events: 10, gateway: "depot.example.net:2222")
        let lines = Self.textLines(log)
        let named = try Self.hostDirectory("gw-host-a", lines)
        try "depot-gw-07\n".write(toFile: named + "/gateway", atomically: true, encoding: .utf8)
        let run = try Fleet.fleet(["import", "--database", url, log.directory, named, try Self.hostDirectory("gw-host-b", lines)])
        #expect(run.output == """
            depot.example.net:2222: 10 records read, 10 new, 0 already stored, 0 quarantined
            depot-gw-07: 10 records read, 10 new, 0 already stored, 0 quarantined
            gw-host-b: 10 records read, 10 new, 0 already stored, 0 quarantined

            """, "\(run.error)")
        let option = try Fleet.fleet(["import", "--database", url, "--gateway", "gw-option", named])
        #expect(option.output.hasPrefix("gw-option: 10 records read, 10 new"))

        let two = try Fleet.fleet(["import", "--database", url, "--gateway", "x", named, log.directory])
        #expect(two.status == 2 && two.error.hasPrefix("locus-fleet: import: --gateway names the gateway of one directory"))
        let bad = try Self.hostDirectory("gw-bad", lines)
        try "gw one\ngw two\n".write(toFile: bad + "/gateway", atomically: true, encoding: .utf8)
        let missing = try Fleet.temporaryDirectory("empty")
        let mixed = try Fleet.fleet(["import", "--database", url, bad, missing, named])
        #expect(mixed.status == 1)
        #expect(mixed.error == """
            locus-fleet: import: \(bad)/gateway: expected one line, the gateway id; found 2
            locus-fleet: import: \(missing)/log.jsonl: No such file or directory (a Scripts/fetch-logs host directory holds log.jsonl)

            """)
        #expect(mixed.output == "depot-gw-07: 10 records read, 0 new, 10 already stored, 0 quarantined\n", "the others are imported")
        let none = try Fleet.fleet(["import", "--database", url])
        #expect(none.status == 2 && none.error.hasPrefix("locus-fleet: import: give at least one directory"))
    }
}

/// The status command's time format, for the tests' own queries.
enum FleetStatusSQL {
    static func utc(_ column: String) -> String {
        "to_char(\(column) at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
    }
}
