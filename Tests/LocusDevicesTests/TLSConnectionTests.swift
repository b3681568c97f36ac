import Foundation
import Testing
import TestSupport
@testable import LocusCore
@testable import LocusDevices

/// TCP and TLS (mbedTLS through CLocus) against a real broker: Debian's mosquitto on 127.0.0.1
/// with a TLS listener, an expired one, a mutual-TLS one and a plain one, and certificates made
/// by openssl for each run (Tests/Fixtures/make-test-certs.sh). Every failure a technician meets
/// reads as what to fix.
@Suite(.serialized) struct TLSConnectionTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// Certificates and one broker for the whole suite.
    final class Setup: @unchecked Sendable {
        let certificates: String
        let broker: TestBroker
        var tls: UInt16 { broker.ports[0] }
        var expired: UInt16 { broker.ports[1] }
        var mutual: UInt16 { broker.ports[2] }
        var plain: UInt16 { broker.ports[3] }

        init() throws {
            certificates = NSTemporaryDirectory() + "locus-certs-\(getpid())"
            let make = Process()
            make.executableURL = URL(fileURLWithPath: TLSConnectionTests.root + "/Tests/Fixtures/make-test-certs.sh")
            make.arguments = [certificates]
            try make.run()
            make.waitUntilExit()
            guard make.terminationStatus == 0 else { throw TestBroker.BrokerError("make-test-certs.sh failed (is openssl installed?)") }
            let directory = certificates
            let file = { (name: String) in "\(directory)/\(name)" }
            broker = try TestBroker(listeners: [
                ["cafile \(file("ca.crt"))", "certfile \(file("server.crt"))", "keyfile \(file("server.key"))"],
                ["cafile \(file("ca.crt"))", "certfile \(file("expired.crt"))", "keyfile \(file("expired.key"))"],
                ["cafile \(file("ca.crt"))", "certfile \(file("server.crt"))", "keyfile \(file("server.key"))", "require_certificate true"],
                [],
            ])
        }

        func path(_ name: String) -> String { "\(certificates)/\(name)" }
    }

    nonisolated(unsafe) static var shared: Setup? = nil
    static func setup() throws -> Setup {
        if let shared { return shared }
        let made = try Setup()
        shared = made
        return made
    }

    /// Waits for `descriptor` to be ready (for writing when asked); false after 5 s.
    static func wait(_ descriptor: Descriptor, write: Bool) -> Bool {
        var entry = pollfd(fd: descriptor.rawValue, events: Int16(write ? POLLOUT : POLLIN), revents: 0)
        return poll(&entry, 1, 5_000) == 1
    }

    /// Connects to 127.0.0.1:`port` and runs the handshake to its end.
    static func handshake(port: UInt16, configuration: TLSConfiguration, hostName: String = "localhost") throws -> (TLSSession, TLSSession.Handshake) {
        let connection = try TCPConnection(to: IPAddress("127.0.0.1")!, port: port)
        if !connection.isConnected {
            #expect(wait(connection.descriptor, write: true))
            #expect(connection.finishConnecting() == nil)
        }
        let session = try TLSSession(configuration: configuration, connection: connection, hostName: hostName)
        for _ in 0..<100 {
            let step = session.handshake()
            guard case .wouldBlock(let wantsWrite) = step else { return (session, step) }
            guard wait(connection.descriptor, write: wantsWrite) else { return (session, .failed(TLSError("handshake timed out"))) }
        }
        return (session, .failed(TLSError("handshake did not end")))
    }

    /// MQTT CONNECT over the session; the CONNACK's return code.
    static func connack(_ session: TLSSession) throws -> UInt8? {
        var writer = MQTTWriter(capacity: 256)
        _ = writer.connect(MQTTConnectOptions(clientID: Array("locus-tls-test".utf8), cleanSession: true, keepAliveS: 30))
        guard case .bytes(let sent) = session.write(writer.bytes), sent == writer.count else { return nil }
        var framer = MQTTFramer(maximumPacketBytes: 64)
        var code: UInt8? = nil
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
        defer { buffer.deallocate() }
        for _ in 0..<50 where code == nil {
            switch session.read(into: buffer) {
            case .bytes(let count):
                _ = framer.consume(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) { packet in
                    if case .success(.connack(_, let returnCode)) = MQTTPacket.decode(packet) { code = returnCode }
                }
            case .wouldBlock(let wantsWrite):
                guard wait(session.connection.descriptor, write: wantsWrite) else { return nil }
            case .closed, .failed:
                return nil
            }
        }
        return code
    }

    @Test func aVerifiedSessionCarriesMQTT() throws {
        let setup = try Self.setup()
        let (session, result) = try Self.handshake(port: setup.tls, configuration: try TLSConfiguration(caFile: setup.path("ca.crt")))
        #expect(result == .done)
        #expect(session.agreed.hasPrefix("TLSv1.2 "))
        #expect(try Self.connack(session) == 0)
    }

    @Test func anUnknownCAIsRefusedAndNothingGoesOutInClear() throws {
        let setup = try Self.setup()
        let (_, result) = try Self.handshake(port: setup.tls, configuration: try TLSConfiguration(caFile: setup.path("other-ca.crt")))
        guard case .failed(let error) = result else { Issue.record("the handshake succeeded with the wrong CA"); return }
        #expect(error.message.hasPrefix("unknown CA: "), "\(error)")
        // The broker never saw an MQTT CONNECT from this client.
        #expect(!setup.broker.log.contains("locus-tls-test-wrong-ca"))
    }

    @Test func aWrongHostNameIsRefused() throws {
        let setup = try Self.setup()
        let (_, result) = try Self.handshake(port: setup.tls, configuration: try TLSConfiguration(caFile: setup.path("ca.crt")),
                                             hostName: "broker.example")
        guard case .failed(let error) = result else { Issue.record("the handshake succeeded for another host name"); return }
        #expect(error.message.hasPrefix("wrong host name: "), "\(error)")
    }

    @Test func anExpiredCertificateIsRefused() throws {
        let setup = try Self.setup()
        let (_, result) = try Self.handshake(port: setup.expired, configuration: try TLSConfiguration(caFile: setup.path("ca.crt")))
        guard case .failed(let error) = result else { Issue.record("the handshake accepted an expired certificate"); return }
        #expect(error.message.hasPrefix("expired certificate: "), "\(error)")
    }

    @Test func mutualTLSNeedsTheClientCertificateTheBrokerTrusts() throws {
        let setup = try Self.setup()
        let without = try Self.handshake(port: setup.mutual, configuration: try TLSConfiguration(caFile: setup.path("ca.crt")))
        guard case .failed(let error) = without.1 else { Issue.record("no client certificate, yet accepted"); return }
        #expect(error.message.contains("client certificate"), "\(error)")
        let stranger = try Self.handshake(port: setup.mutual, configuration: try TLSConfiguration(
            caFile: setup.path("ca.crt"), certificateFile: setup.path("stranger.crt"), keyFile: setup.path("stranger.key")))
        guard case .failed(let refused) = stranger.1 else { Issue.record("a certificate from another CA was accepted"); return }
        #expect(refused.message.contains("client certificate"), "\(refused)")
        let (session, result) = try Self.handshake(port: setup.mutual, configuration: try TLSConfiguration(
            caFile: setup.path("ca.crt"), certificateFile: setup.path("client.crt"), keyFile: setup.path("client.key")))
        #expect(result == .done)
        #expect(try Self.connack(session) == 0)
    }

    @Test func aPlainListenerIsNotMistakenForTLS() throws {
        let setup = try Self.setup()
        let (_, result) = try Self.handshake(port: setup.plain, configuration: try TLSConfiguration(caFile: setup.path("ca.crt")))
        guard case .failed(let error) = result else { Issue.record("a TLS handshake with a plain MQTT listener succeeded"); return }
        #expect(error.message.contains("not a TLS listener") || error.message.hasPrefix("the connection failed: "), "\(error)")
    }

    @Test func badCertificateFilesAreNamed() throws {
        let setup = try Self.setup()
        #expect(throws: TLSError.self) { try TLSConfiguration(caFile: setup.path("missing.crt")) }
        do {
            _ = try TLSConfiguration(caFile: setup.path("missing.crt"))
        } catch {
            #expect(error.message.contains("missing.crt"), "\(error)")
        }
        do {
            _ = try TLSConfiguration(caFile: setup.path("ca.crt"), certificateFile: setup.path("server.crt"), keyFile: setup.path("client.key"))
            Issue.record("a key that is not the certificate's was accepted")
        } catch {
            #expect(error.message.contains("does not belong"), "\(error)")
        }
        do {
            _ = try TLSConfiguration(caFile: setup.path("ca.crt"), certificateFile: setup.path("client.crt"))
            Issue.record("a certificate without a key was accepted")
        } catch {
            #expect(error.message.contains("both cert_file and key_file"), "\(error)")
        }
    }

    @Test func aRefusedConnectionIsTheSystemsError() throws {
        let port = try TestBroker.freePort()
        let connection = try TCPConnection(to: IPAddress("127.0.0.1")!, port: port)
        if !connection.isConnected {
            #expect(Self.wait(connection.descriptor, write: true))
            #expect(connection.finishConnecting()?.description == "Connection refused")
        }
    }
}
