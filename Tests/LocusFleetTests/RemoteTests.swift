import Foundation
import LocusCore
@testable import LocusFleet
import Testing
import TestSupport

/// `locus-fleet config`, `group` and `command` (docs/remote.md) between Debian's mosquitto and
/// PostgreSQL 15, on 127.0.0.1: the signatures checked by openssl (an outside reference), the
/// retained configuration reaching only its targets, and the gateways' records (published as a
/// gateway's uplink would, into a running ingest) turning into status.
@Suite(.serialized) struct RemoteTests {
    // MARK: signatures

    static func openssl(_ arguments: [String]) throws -> Fleet.Run { try Fleet.run("/usr/bin/openssl", arguments) }

    /// openssl's verdict on a signature (DER) of `body` under the public key `publicKey`.
    static func opensslVerifies(_ body: [UInt8], _ signature: [UInt8], publicKey: String) throws -> Bool {
        let directory = try Fleet.temporaryDirectory("verify")
        try Data(body).write(to: URL(fileURLWithPath: directory + "/body"))
        try Data(signature).write(to: URL(fileURLWithPath: directory + "/sig.der"))
        let run = try openssl(["dgst", "-sha256", "-verify", publicKey, "-signature", directory + "/sig.der", directory + "/body"])
        return run.status == 0 && run.output == "Verified OK\n"
    }

    /// A signed message split into its body and its DER signature (nil: no signature line last).
    static func split(_ message: String) -> (body: [UInt8], signature: [UInt8])? {
        guard message.hasSuffix("\n"), let range = message.range(of: "\n" + FleetSigner.signaturePrefix, options: .backwards) else { return nil }
        let body = Array(message[..<message.index(after: range.lowerBound)].utf8)
        let line = message[range.upperBound...].dropLast()
        let fields = line.split(separator: " ")
        guard fields.count == 2, fields[0] == "ecdsa-p256-sha256", let signature = Base64.decode(String(fields[1])) else { return nil }
        return (body, signature)
    }

    @Test func keygenWritesAKeyPairOnceAndItsSignaturesVerifyWithOpenSSL() throws {
        let directory = try Fleet.temporaryDirectory("keygen")
        let key = directory + "/fleet.key"
        let made = try Fleet.fleet(["config", "keygen", "--out", key])
        #expect(made.status == 0, "\(made.error)")
        #expect(made.output.contains("public key \(directory)/fleet.pub"), "\(made.output)")
        let attributes = try FileManager.default.attributesOfItem(atPath: key)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try String(contentsOfFile: key, encoding: .utf8).hasPrefix("-----BEGIN EC PRIVATE KEY-----"))
        #expect(try String(contentsOfFile: directory + "/fleet.pub", encoding: .utf8).hasPrefix("-----BEGIN PUBLIC KEY-----"))
        let again = try Fleet.fleet(["config", "keygen", "--out", key])
        #expect(again.status == 1 && again.error == "locus-fleet: config keygen: \(key) exists already: the key pair is not overwritten (remove it first, or give another --out)\n",
                "\(again.error)")
        let signer = try FleetSigner(keyFile: key)
        #expect(signer.exposure == nil)
        chmod(key, 0o640)
        #expect(signer.exposure == "the signing key \(key) is readable by other users (mode 640): chmod 600 \(key)")
        let body = Array("[fleet]\nkind = \"config\"\ngateway = \"gw-1\"\nversion = 1\n".utf8)
        let signature = try signer.signature(of: body)
        #expect(try Self.opensslVerifies(body, signature, publicKey: directory + "/fleet.pub"))
        #expect(try !Self.opensslVerifies(body + [0x0A], signature, publicKey: directory + "/fleet.pub"), "another body does not verify")
        #expect(try FleetSigner.verify(publicKeyPEM: String(contentsOfFile: directory + "/fleet.pub", encoding: .utf8), body: body, signature: signature))
    }

    @Test func keysMadeByOpenSSLSignAndVerify() throws {
        let directory = try Fleet.temporaryDirectory("openssl-keys")
        #expect(try Self.openssl(["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", directory + "/sec1.key"]).status == 0)
        #expect(try Self.openssl(["ec", "-in", directory + "/sec1.key", "-pubout", "-out", directory + "/fleet.pub"]).status == 0)
        #expect(try Self.openssl(["pkcs8", "-topk8", "-nocrypt", "-in", directory + "/sec1.key", "-out", directory + "/pkcs8.key"]).status == 0)
        let body = Array("a body\n".utf8)
        for key in ["sec1.key", "pkcs8.key"] {
            let signer = try FleetSigner(keyFile: directory + "/" + key)
            #expect(try Self.opensslVerifies(body, try signer.signature(of: body), publicKey: directory + "/fleet.pub"), "\(key)")
            #expect(try signer.publicKeyPEM() == String(contentsOfFile: directory + "/fleet.pub", encoding: .utf8), "\(key)")
        }
        // openssl's signature verifies here.
        try Data(body).write(to: URL(fileURLWithPath: directory + "/body"))
        #expect(try Self.openssl(["dgst", "-sha256", "-sign", directory + "/sec1.key", "-out", directory + "/sig.der", directory + "/body"]).status == 0)
        let signature = Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/sig.der")))
        let publicKey = try String(contentsOfFile: directory + "/fleet.pub", encoding: .utf8)
        #expect(try FleetSigner.verify(publicKeyPEM: publicKey, body: body, signature: signature))
        #expect(try !FleetSigner.verify(publicKeyPEM: publicKey, body: body + [0x0A], signature: signature))
        // Another curve is refused with a sentence.
        #expect(try Self.openssl(["ecparam", "-name", "secp384r1", "-genkey", "-noout", "-out", directory + "/p384.key"]).status == 0)
        #expect(throws: FleetError.self) { try FleetSigner(keyFile: directory + "/p384.key") }
        do {
            _ = try FleetSigner(keyFile: directory + "/p384.key")
        } catch {
            #expect(error.message.hasSuffix("the private key is not an EC key on the P-256 curve (prime256v1)"), "\(error.message)")
        }
    }

    @Test func base64RoundTrips() {
        for count in 0..<8 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 * 77 + 5) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
        }
        #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy" && Base64.encode(Array("fo".utf8)) == "Zm8=")
        #expect(Base64.decode("Zm9=v") == nil && Base64.decode("Zm9") == nil)
    }

    // MARK: messages

    @Test func aFragmentIsCheckedAndPlacedAroundFleet() throws {
        let tables = try RemoteMessage.checkFragment(Array("[[action]]\nwhen = \"yard.fence\"".utf8), name: "f.toml")
        #expect(tables.text == "[[action]]\nwhen = \"yard.fence\"\n" && tables.warnings.isEmpty)
        let body = RemoteMessage.configBody(gateway: "gw-1", version: 7, issued: "2026-11-28T14:00:00.000Z", fragment: tables.text)
        #expect(body == "[fleet]\nkind = \"config\"\ngateway = \"gw-1\"\nversion = 7\nissued = \"2026-11-28T14:00:00.000Z\"\n\n[[action]]\nwhen = \"yard.fence\"\n")
        // Keys at the top level must precede every table: the fragment first, then [fleet].
        let keys = try RemoteMessage.checkFragment(Array("# none\nmonitor = {}\n".utf8), name: "f.toml")
        let keysFirst = RemoteMessage.configBody(gateway: "gw-1", version: 8, issued: "x", fragment: keys.text)
        #expect(keysFirst.hasPrefix("# none\nmonitor = {}\n\n[fleet]\n"))
        let parsed = try TOMLParser.parse(Array(keysFirst.utf8))
        #expect(parsed.root.keys == ["monitor", "fleet"])
        let refusals: [(String, String)] = [
            ("[fleet]\nversion = 3\n", "f.toml:1:2: the fragment has a 'fleet' key: [fleet] is written by locus-fleet config set, not by the fragment"),
            ("monitor = \n", "f.toml:1:"),
            ("[monitor]\n# locus-signature: x\n", "f.toml:2: a line starting '# locus-signature: ' reads as the signature: remove it"),
        ]
        for (text, message) in refusals {
            do {
                _ = try RemoteMessage.checkFragment(Array(text.utf8), name: "f.toml")
                Issue.record("\(text) is refused")
            } catch {
                #expect(error.message.hasPrefix(message), "\(error.message)")
            }
        }
        let other = try RemoteMessage.checkFragment(Array("[uplink]\nbroker = \"x\"\n".utf8), name: "f.toml")
        #expect(other.warnings == ["f.toml: 'uplink' is not a key a gateway lets the fleet set in this version (action, monitor, privacy): gateways will refuse this version"])
    }

    @Test func aLineDiffShowsHunksWithContext() {
        let old = (1...12).map { "line \($0)" }.joined(separator: "\n") + "\n"
        var lines = (1...12).map { "line \($0)" }
        lines[1] = "line two"
        lines.insert("added", at: 10)
        let new = lines.joined(separator: "\n") + "\n"
        #expect(LineDiff.unified(old, new, oldName: "version 1", newName: "version 2") == """
            --- version 1
            +++ version 2
            @@ -1,5 +1,5 @@
             line 1
            -line 2
            +line two
             line 3
             line 4
             line 5
            @@ -8,5 +8,6 @@
             line 8
             line 9
             line 10
            +added
             line 11
             line 12

            """)
        #expect(LineDiff.unified(old, old, oldName: "a", newName: "b") == "")
    }

    @Test func recordsOfConfigurationsAndCommandsAreMapped() throws {
        let applied = try JSONParser.parse(Array(#"{"gateway":"gw-1","seq":9,"prev":8,"time":"2026-11-28T14:00:00.000Z","version":3,"result":"applied","digest":"ab"}"#.utf8))
        let record = try FleetRecord.published(applied, kind: .config)
        #expect(record.kind == .config && record.time == "2026-11-28T14:00:00.000Z" && record.prev == 8 && record.monitor == nil && record.state == nil)
        #expect(record.payload == #"{"version":3,"result":"applied","digest":"ab"}"#)
        let done = try JSONParser.parse(Array(#"{"gateway":"gw-1","seq":10,"prev":9,"time":"2026-11-28T14:00:01.000Z","id":"c-1","action":"pulse","result":"done"}"#.utf8))
        #expect(try FleetRecord.published(done, kind: .command).payload == #"{"id":"c-1","action":"pulse","result":"done"}"#)
        let wrong: [(String, FleetRecord.Kind, String)] = [
            (#"{"gateway":"g","seq":1,"time":"2026-11-28T14:00:00.000Z","version":3,"result":"ok"}"#, .config, "result is not applied or refused"),
            (#"{"gateway":"g","seq":1,"time":"2026-11-28T14:00:00.000Z","result":"applied"}"#, .config, "version is not a version number (0 to 2^53)"),
            (#"{"gateway":"g","seq":1,"time":"2026-11-28T14:00:00.000Z","result":"done"}"#, .command, "id is not a string"),
            (#"{"gateway":"g","seq":1,"id":"c","result":"done"}"#, .command, "no time"),
        ]
        for (text, kind, reason) in wrong {
            #expect(throws: FleetRecordError(reason)) { try FleetRecord.published(try JSONParser.parse(Array(text.utf8)), kind: kind) }
        }
        let topics = try IngestTopics(prefix: "locus/+", share: "fleet")
        #expect(topics.classify("locus/gw-1/config") == .record(.config, gateway: "gw-1"))
        #expect(topics.classify("locus/gw-1/command") == .record(.command, gateway: "gw-1"))
        #expect(topics.classify("locus/gw-1/remote/config") == .foreign)
        #expect(topics.filters.contains("$share/fleet/locus/+/config") && topics.filters.contains("$share/fleet/locus/+/command"))
    }
}
