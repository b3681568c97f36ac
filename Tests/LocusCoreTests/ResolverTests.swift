import AllocCounter
import Foundation
import Testing
@testable import LocusCore

/// The stub resolver's pure parts against outside references: Python's ipaddress reads the same
/// address texts, dnspython (pinned in the test venv) writes the queries Locus must write byte
/// for byte and the answers it must read (CNAME chains, name compression, NXDOMAIN, SERVFAIL,
/// truncation, records of the other type). Tests/Fixtures/dns_oracle.py makes them.
@Suite struct ResolverTests {
    nonisolated(unsafe) static let oracleLines: [[String: Any]] = {
        let python = repositoryRoot + "/.build/pyvenv/bin/python"
        precondition(FileManager.default.isExecutableFile(atPath: python), "\(python) is missing: run Scripts/install-deps --test")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [repositoryRoot + "/Tests/Fixtures/dns_oracle.py"]
        let output = Pipe()
        process.standardOutput = output
        try! process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        precondition(process.terminationStatus == 0, "dns_oracle.py failed (is dnspython in the venv? run Scripts/install-deps --test)")
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map {
            try! JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
        }
    }()

    static func lines(_ kind: String) -> [[String: Any]] { oracleLines.filter { $0["kind"] as? String == kind } }

    static func bytes(hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            result.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return result
    }

    @Test func addressesReadAsPythonsIpaddressReadsThem() {
        let cases = Self.lines("address")
        #expect(cases.count > 400)
        var valid = 0
        for line in cases {
            let text = line["text"] as! String
            let parsed = IPAddress(text)
            guard let packed = line["packed"] as? String else {
                #expect(parsed == nil, "\(text) is not an address, Locus read \(parsed.map(\.description) ?? "")")
                continue
            }
            valid += 1
            guard let parsed else { Issue.record("\(text) is an address (\(packed))"); continue }
            let expected = Self.bytes(hex: packed)
            #expect((0..<parsed.byteCount).map { parsed[$0] } == expected, "\(text)")
            #expect(parsed.description == line["compressed"] as? String, "\(text)")
        }
        #expect(valid > 250)
    }

    @Test func queriesAreDnspythonsBytes() {
        let cases = Self.lines("query")
        #expect(cases.count > 50)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: DNSMessage.maximumQueryBytes, alignment: 8)
        defer { buffer.deallocate() }
        for line in cases {
            let name = line["name"] as! String
            let type: DNSMessage.RecordType = line["type"] as! String == "A" ? .a : .aaaa
            var text = name
            let result = text.withUTF8 { DNSMessage.query(id: UInt16(line["id"] as! Int), name: UnsafeRawBufferPointer($0), type: type, into: buffer) }
            guard case .success(let length) = result else { Issue.record("\(name): \(result)"); continue }
            #expect(Array(buffer[0..<length]) == Self.bytes(hex: line["wire"] as! String), "\(name)")
        }
    }

    @Test(arguments: ["", ".", "a..b", String(repeating: "x", count: 64) + ".example", "under score.example", "ünicode.example",
                      String(repeating: "abcdefghi.", count: 26)])
    func badNamesAreRefused(name: String) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: DNSMessage.maximumQueryBytes, alignment: 8)
        defer { buffer.deallocate() }
        var text = name
        let result = text.withUTF8 { DNSMessage.query(id: 1, name: UnsafeRawBufferPointer($0), type: .a, into: buffer) }
        #expect(result == .failure(.badName))
    }

    @Test func answersReadAsDnspythonWroteThem() {
        let cases = Self.lines("answer")
        #expect(cases.count == 200)
        var kinds: [String: Int] = [:]
        for line in cases {
            let wire = Self.bytes(hex: line["wire"] as! String)
            let id = UInt16(line["id"] as! Int)
            let type: DNSMessage.RecordType = line["type"] as! String == "A" ? .a : .aaaa
            var addresses: [String] = []
            var ttls: [Int] = []
            let result = wire.withUnsafeBytes {
                DNSMessage.addresses(in: $0, id: id, type: type) { address, ttl in
                    addresses.append(address.map { String(format: "%02x", $0) }.joined())
                    ttls.append(Int(ttl))
                }
            }
            let error = line["error"] as? String
            kinds[error ?? "addresses", default: 0] += 1
            switch (result, error) {
            case (.success(let count), nil):
                #expect(count == addresses.count)
                #expect(addresses == line["addresses"] as! [String])
                #expect(ttls == line["ttls"] as! [Int])
            case (.failure(.nameNotFound), "nameNotFound"?), (.failure(.serverFailure(2)), "serverFailure"?),
                 (.failure(.noAddress), "noAddress"?), (.failure(.truncated), "truncated"?):
                break
            default:
                Issue.record("\(line["wire"]!): \(result), expected \(error ?? "addresses")")
            }
            // The question must be the name asked for, in any case, with or without the final dot.
            let named = wire.withUnsafeBytes { message in
                (line["name"] as? String ?? "").uppercased().withCString { text in
                    DNSMessage.addresses(in: message, id: id, type: type, name: UnsafeRawBufferPointer(start: text, count: strlen(text))) { _, _ in }
                }
            }
            #expect((try? named.get()) == (try? result.get()), "\(line["name"] ?? "")")
            let other = wire.withUnsafeBytes { message in
                "other.example.".withCString { text in
                    DNSMessage.addresses(in: message, id: id, type: type, name: UnsafeRawBufferPointer(start: text, count: strlen(text))) { _, _ in }
                }
            }
            #expect(other == .failure(.notOurs) || error != nil)
            // The same answer is not an answer to another query id.
            let foreign = wire.withUnsafeBytes { DNSMessage.addresses(in: $0, id: id &+ 1, type: type) { _, _ in } }
            #expect(foreign == .failure(.notOurs))
        }
        #expect(kinds["addresses", default: 0] > 100 && kinds["nameNotFound", default: 0] > 5 && kinds["truncated", default: 0] > 2)
    }

    @Test func cutAnswersAreMalformedNeverReadPast() {
        let line = Self.lines("answer").first { $0["error"] is NSNull || $0["error"] == nil }!
        let wire = Self.bytes(hex: line["wire"] as! String)
        let type: DNSMessage.RecordType = line["type"] as! String == "A" ? .a : .aaaa
        for cut in 0..<wire.count {
            // A buffer of exactly the cut's size: reading past it trips the address sanitizer in fuzzing.
            let prefix = Array(wire[0..<cut])
            var addresses: [String] = []
            let result = prefix.withUnsafeBytes {
                DNSMessage.addresses(in: $0, id: UInt16(line["id"] as! Int), type: type) { address, _ in
                    addresses.append(address.map { String(format: "%02x", $0) }.joined())
                }
            }
            switch result {
            case .failure(let failure):
                #expect(failure == .malformed || failure == .notOurs || failure == .noAddress, "cut at \(cut): \(failure)")
            case .success:
                // Only a cut after the whole answer section (before the additional records) reads.
                #expect(addresses == line["addresses"] as! [String], "cut at \(cut)")
            }
        }
    }

    @Test func readingAnAnswerAllocatesNothing() {
        let line = Self.lines("answer").first { $0["error"] is NSNull || $0["error"] == nil }!
        let wire = Self.bytes(hex: line["wire"] as! String)
        let type: DNSMessage.RecordType = line["type"] as! String == "A" ? .a : .aaaa
        let id = UInt16(line["id"] as! Int)
        var found = 0
        let count = wire.withUnsafeBytes { message in
            allocations {
                for _ in 0..<100 { _ = DNSMessage.addresses(in: message, id: id, type: type) { _, _ in found += 1 } }
            }
        }
        #expect(count == 0 && found >= 100)
    }

    @Test func resolvConfIsReadAsTheStubResolverReadsIt() {
        let text = """
        # written by a DHCP client
        search example.com
        nameserver 192.0.2.53
        nameserver   2001:db8::53
        ; a comment
        nameserver not-an-address
        nameserver 192.0.2.54
        nameserver 192.0.2.55
        options timeout:2 attempts:9 rotate
        """
        let configuration = ResolverConfiguration.parse(text)
        #expect(configuration.nameServers.map(\.description) == ["192.0.2.53", "2001:db8::53", "192.0.2.54"])
        #expect(configuration.timeoutS == 2 && configuration.attempts == 5)
        let empty = ResolverConfiguration.parse("search example.com\n")
        #expect(empty.nameServers == [ResolverConfiguration.fallbackServer] && empty.timeoutS == 5 && empty.attempts == 2)
    }

    @Test func hostsFileNamesAndAliases() {
        let text = """
        127.0.0.1\tlocalhost
        ::1     localhost ip6-localhost
        192.0.2.10 broker.site.example broker # the yard's broker
        # 192.0.2.11 broker
        192.0.2.12 Broker
        """
        #expect(HostsFile.addresses(of: "localhost", in: text).map(\.description) == ["127.0.0.1", "::1"])
        #expect(HostsFile.addresses(of: "BROKER.", in: text).map(\.description) == ["192.0.2.10", "192.0.2.12"])
        #expect(HostsFile.addresses(of: "yard", in: text).isEmpty)
    }
}
