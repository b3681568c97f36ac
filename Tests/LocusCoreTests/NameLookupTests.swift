import Foundation
import Testing
@testable import LocusCore

/// The lookup's rules, with answers written by dnspython (the test venv): hosts first, A then
/// AAAA, servers in order with their timeout and rounds, answers only from the server asked with
/// the query's id, NXDOMAIN at once.
@Suite struct NameLookupTests {
    /// dnspython's answer to a query for `name` (`type`) with `id`: `rcode` and the addresses.
    static func answer(_ name: String, _ type: String, id: UInt16, rcode: String = "NOERROR", _ addresses: [String] = []) throws -> [UInt8] {
        let script = """
        import sys, dns.message, dns.rcode, dns.rrset
        name, rdtype, qid, rcode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
        query = dns.message.make_query(name, rdtype); query.id = qid
        response = dns.message.make_response(query); response.set_rcode(dns.rcode.from_text(rcode))
        if sys.argv[5:]: response.answer.append(dns.rrset.from_text_list(name + ".", 300, "IN", rdtype, sys.argv[5:]))
        sys.stdout.write(response.to_wire().hex())
        """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: repositoryRoot + "/.build/pyvenv/bin/python")
        process.arguments = ["-c", script, name, type, String(id), rcode] + addresses
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "dnspython is needed in .build/pyvenv (Scripts/install-deps --test)")
        return ResolverTests.bytes(hex: String(decoding: data, as: UTF8.self))
    }

    static let servers: ResolverConfiguration = {
        var configuration = ResolverConfiguration()
        configuration.nameServers = [IPAddress("192.0.2.53")!, IPAddress("192.0.2.54")!]
        configuration.timeoutS = 2
        configuration.attempts = 2
        return configuration
    }()

    final class IDs {
        var next: UInt16 = 0x1000
        func take() -> UInt16 { next &+= 1; return next }
    }

    @Test func hostsAnswerWithoutAQuery() {
        let lookup = NameLookup(name: "broker", configuration: Self.servers, hosts: [IPAddress("192.0.2.10")!], randomID: { 7 }, nowNs: 0)
        #expect(lookup.outcome == .addresses([IPAddress("192.0.2.10")!]))
        #expect(lookup.nextQuery() == nil && lookup.deadlineNs == nil)
    }

    @Test func aSilentServerGivesWayToTheNextAndAnAnswerCountsOnlyFromIt() throws {
        let ids = IDs()
        let lookup = NameLookup(name: "broker.example", configuration: Self.servers, hosts: [], randomID: ids.take, nowNs: 0)
        let first = try #require(lookup.nextQuery())
        #expect(first.server == IPAddress("192.0.2.53") && first.port == 53)
        #expect(lookup.nextQuery() == nil, "a query is handed out once")
        #expect(lookup.tick(nowNs: 1_999_999_999) == nil && lookup.nextQuery() == nil)
        #expect(lookup.tick(nowNs: 2_000_000_000) == nil)
        let second = try #require(lookup.nextQuery())
        #expect(second.server == IPAddress("192.0.2.54"))
        let answer = try Self.answer("broker.example", "A", id: ids.next, ["192.0.2.80", "192.0.2.81"])
        // The first server answering late, or anyone else, is not heard; nor an old id.
        #expect(answer.withUnsafeBytes { lookup.received($0, from: IPAddress("192.0.2.53")!, sourcePort: 53, nowNs: 2_100_000_000) } == nil)
        let stale = try Self.answer("broker.example", "A", id: ids.next &- 1, ["192.0.2.99"])
        #expect(stale.withUnsafeBytes { lookup.received($0, from: IPAddress("192.0.2.54")!, sourcePort: 53, nowNs: 2_100_000_000) } == nil)
        // Nor an answer with the right id about another name (RFC 5452).
        let spoofed = try Self.answer("elsewhere.example", "A", id: ids.next, ["192.0.2.66"])
        #expect(spoofed.withUnsafeBytes { lookup.received($0, from: IPAddress("192.0.2.54")!, sourcePort: 53, nowNs: 2_100_000_000) } == nil)
        #expect(lookup.ignored == 3)
        let outcome = answer.withUnsafeBytes { lookup.received($0, from: IPAddress("192.0.2.54")!, sourcePort: 53, nowNs: 2_200_000_000) }
        #expect(outcome == .addresses([IPAddress("192.0.2.80")!, IPAddress("192.0.2.81")!]) || outcome == .addresses([IPAddress("192.0.2.81")!, IPAddress("192.0.2.80")!]))
    }

    @Test func noARecordAsksForAAAA() throws {
        let ids = IDs()
        let lookup = NameLookup(name: "v6.example", configuration: Self.servers, hosts: [], randomID: ids.take, nowNs: 0)
        _ = lookup.nextQuery()
        let empty = try Self.answer("v6.example", "A", id: ids.next)
        #expect(empty.withUnsafeBytes { lookup.received($0, from: IPAddress("192.0.2.53")!, sourcePort: 53, nowNs: 1) } == nil)
        let query = try #require(lookup.nextQuery())
        #expect(Array(query.bytes.suffix(4)) == [0x00, 0x1C, 0x00, 0x01], "an AAAA question")
        let answer = try Self.answer("v6.example", "AAAA", id: ids.next, ["2001:db8::7"])
        #expect(answer.withUnsafeBytes { lookup.received($0, from: IPAddress("192.0.2.53")!, sourcePort: 53, nowNs: 2) } == .addresses([IPAddress("2001:db8::7")!]))
    }

    @Test func aNameThatDoesNotExistEndsAtOnceAndSilenceEndsAfterTheRounds() throws {
        let ids = IDs()
        let missing = NameLookup(name: "nowhere.example", configuration: Self.servers, hosts: [], randomID: ids.take, nowNs: 0)
        _ = missing.nextQuery()
        let nxdomain = try Self.answer("nowhere.example", "A", id: ids.next, rcode: "NXDOMAIN")
        guard case .failed(let why)? = nxdomain.withUnsafeBytes({ missing.received($0, from: IPAddress("192.0.2.53")!, sourcePort: 53, nowNs: 1) }) else {
            Issue.record("NXDOMAIN did not end the lookup"); return
        }
        #expect(why.contains("does not exist"))
        let silent = NameLookup(name: "broker.example", configuration: Self.servers, hosts: [], randomID: ids.take, nowNs: 0)
        var queries = 0
        var now: Int64 = 0
        var end: NameLookup.Outcome? = nil
        while end == nil && queries < 10 {
            if silent.nextQuery() != nil { queries += 1 }
            now = silent.deadlineNs ?? now
            end = silent.tick(nowNs: now)
        }
        #expect(queries == 4, "2 servers x 2 rounds")
        #expect(now == 8_000_000_000)
        guard case .failed(let message)? = end else { Issue.record("no end"); return }
        #expect(message == "cannot resolve broker.example: no answer from 192.0.2.54 within 2 s (2 rounds over 2 name servers)")
    }
}
