import Foundation
import Testing
import TestSupport
@testable import LocusCore
@testable import LocusDevices

/// The resolver's lookup over a real UDP socket against a real name server: Debian's dnsmasq on
/// 127.0.0.1 answering for the test's names only.
@Suite(.serialized) struct NameLookupDNSTests {
    static let dnsmasq = "/usr/sbin/dnsmasq"

    /// dnsmasq on 127.0.0.1:`port`, knowing broker.test (A and AAAA) and v6only.test (AAAA); `.test`
    /// is local to it (no upstream), so it answers "no such record" as a real server would.
    static func startServer(port: UInt16) throws -> Foundation.Process {
        guard FileManager.default.isExecutableFile(atPath: dnsmasq) else {
            throw TestBroker.BrokerError("\(dnsmasq) is missing: run Scripts/install-deps --test (Debian package dnsmasq-base)")
        }
        let process = Foundation.Process()
        process.executableURL = URL(fileURLWithPath: dnsmasq)
        process.arguments = ["--keep-in-foreground", "--no-resolv", "--no-hosts", "--no-daemon", "--port=\(port)",
                             "--listen-address=127.0.0.1", "--bind-interfaces", "--user=root", "--local=/test/",
                             "--host-record=broker.test,192.0.2.80,2001:db8::80", "--host-record=v6only.test,2001:db8::6"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        usleep(300_000)
        return process
    }

    /// Runs a lookup to its end over `socket`, polling as the agent's loop would.
    static func resolve(_ name: String, port: UInt16, servers: [String] = ["127.0.0.1"], timeoutS: Int = 1) throws -> NameLookup.Outcome? {
        var configuration = ResolverConfiguration()
        configuration.nameServers = servers.map { IPAddress($0)! }
        configuration.timeoutS = timeoutS
        configuration.attempts = 1
        let socket = try DatagramSocket(family: .v4)
        let lookup = NameLookup(name: name, configuration: configuration, hosts: [], port: port,
                                randomID: { UInt16.random(in: 1...UInt16.max) }, nowNs: 0)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: DNSMessage.maximumUDPBytes, alignment: 8)
        defer { buffer.deallocate() }
        let started = DispatchTime.now().uptimeNanoseconds
        while lookup.outcome == nil {
            let now = Int64(DispatchTime.now().uptimeNanoseconds - started)
            if let query = lookup.nextQuery() {
                let sent = query.bytes.withUnsafeBytes { socket.send($0, to: query.server, port: query.port) }
                #expect(sent == nil, "\(sent.map(\.description) ?? "")")
            }
            var entry = pollfd(fd: socket.descriptor.rawValue, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, 50)
            while let received = socket.receive(into: buffer) {
                guard case .success(let datagram) = received else { break }
                _ = lookup.received(UnsafeRawBufferPointer(rebasing: buffer[0..<datagram.count]), from: datagram.source,
                                    sourcePort: datagram.port, nowNs: now)
            }
            _ = lookup.tick(nowNs: Int64(DispatchTime.now().uptimeNanoseconds - started))
            guard DispatchTime.now().uptimeNanoseconds - started < 10_000_000_000 else { return nil }
        }
        return lookup.outcome
    }

    @Test func aRealNameServerAnswersTheLookup() throws {
        let port = try TestBroker.freePort()
        let server = try Self.startServer(port: port)
        defer { server.terminate(); kill(server.processIdentifier, SIGKILL); server.waitUntilExit() }
        #expect(try Self.resolve("broker.test", port: port) == .addresses([IPAddress("192.0.2.80")!]))
        #expect(try Self.resolve("BROKER.test.", port: port) == .addresses([IPAddress("192.0.2.80")!]))
        let v6 = try Self.resolve("v6only.test", port: port)
        #expect(v6 == .addresses([IPAddress("2001:db8::6")!]), "\(String(describing: v6))")
        guard case .failed(let why)? = try Self.resolve("nowhere.test", port: port) else { Issue.record("nowhere.test resolved"); return }
        #expect(why.contains("nowhere.test"), "\(why)")
    }

    @Test func aServerThatIsNotThereTimesOutInWords() throws {
        let port = try TestBroker.freePort()
        guard case .failed(let why)? = try Self.resolve("broker.test", port: port) else { Issue.record("resolved with no server"); return }
        #expect(why == "cannot resolve broker.test: no answer from 127.0.0.1 within 1 s (1 rounds over 1 name servers)", "\(why)")
    }
}
