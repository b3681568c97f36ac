import AllocCounter
import Foundation
import LocusCore
import TestSupport
import Testing

@Suite struct PrivateAddressTests {
    static func key(_ hex: String) throws -> IdentityResolvingKey { try #require(IdentityResolvingKey(text: hex)) }

    static func hex(_ key: IdentityResolvingKey) -> String {
        (0..<16).map { String(format: "%02x", key.bytes[$0]) }.joined()
    }

    static func randomKey(_ random: inout SplitMix64) -> IdentityResolvingKey {
        var key = IdentityResolvingKey(bytes: InlineArray(repeating: 0))
        for index in 0..<16 { key.bytes[index] = UInt8(truncatingIfNeeded: random.next()) }
        return key
    }

    /// A random `prand`: top bits 0b01 (its random part is never all zeros or ones here).
    static func randomPrand(_ random: inout SplitMix64) -> UInt32 {
        0x40_0000 | UInt32(truncatingIfNeeded: random.next() % 0x3F_FFFE + 1)
    }

    static func expanded(_ key: IdentityResolvingKey, _ aes: borrowing AES128) -> [UInt32] {
        var words = [UInt32](repeating: 0, count: AES128.roundKeyWords)
        words.withUnsafeMutableBufferPointer { aes.expand(key, into: $0) }
        return words
    }

    static func python() throws -> String {
        try TestPython.path(repositoryRoot: repositoryRoot, need: "cryptography and bluetooth-data-tools, the references")
    }

    static let oracle = repositoryRoot + "/Tests/Fixtures/irk_oracle.py"

    @Test func aesMatchesFIPS197sExample() {
        // FIPS-197 Appendix C.1: key 00 01 ... 0f, plaintext 00 11 ... ff.
        var key = IdentityResolvingKey(bytes: InlineArray(repeating: 0))
        for index in 0..<16 { key.bytes[index] = UInt8(index) }
        let aes = AES128()
        let words = Self.expanded(key, aes)
        let out = words.withUnsafeBufferPointer { aes.encrypt((0x0011_2233, 0x4455_6677, 0x8899_AABB, 0xCCDD_EEFF), $0) }
        #expect([out.0, out.1, out.2, out.3] == [0x69C4_E0D8, 0x6A7B_0430, 0xD8CD_B780, 0x70B4_C55A])
    }

    @Test func theSpecificationsSampleData() throws {
        // Bluetooth Core, Vol 3 Part H, Appendix D.7 (ah): IRK ec0234a3..., prand 0x708194,
        // AES output 159d5fb72ebe2311a48c1bdcc40dfbaa, so ah = 0x0dfbaa.
        let key = try Self.key("ec0234a357c8ad05341010a60a397d9b")
        let aes = AES128()
        let words = Self.expanded(key, aes)
        let out = words.withUnsafeBufferPointer { aes.encrypt((0, 0, 0, 0x70_8194), $0) }
        #expect([out.0, out.1, out.2, out.3] == [0x159D_5FB7, 0x2EBE_2311, 0xA48C_1BDC, 0xC40D_FBAA])
        #expect(words.withUnsafeBufferPointer { aes.addressHash(prand: 0x70_8194, $0) } == 0x0D_FBAA)
        var resolver = PrivateAddressResolver(capacity: 2)
        _ = resolver.add(try Self.key("000102030405060708090a0b0c0d0e0f"))
        _ = resolver.add(key)
        #expect(resolver.resolve(BLEAddress(value: 0x70_8194_0D_FBAA)) == 1)
        #expect(resolver.resolve(BLEAddress(value: 0x70_8194_0D_FBAB)) == nil)
    }

    @Test func keysAreReadAsHexOrAsTheKeychainsBase64() throws {
        let key = try Self.key("ec0234a357c8ad05341010a60a397d9b")
        #expect(IdentityResolvingKey(text: "EC:02:34:A3:57:C8:AD:05:34:10:10:A6:0A:39:7D:9B") == key)
        // The keychain's "Remote IRK" holds the bytes least significant first.
        let reversed = Data((0..<16).map { key.bytes[15 - $0] }).base64EncodedString()
        #expect(IdentityResolvingKey(text: reversed) == key)
        for bad in ["", "ec0234a357c8ad05341010a60a397d9", "ec0234a357c8ad05341010a60a397d9b00", "zz0234a357c8ad05341010a60a397d9b",
                    "AAAAAAAAAAAAAAAAAAAAAA"] {
            #expect(IdentityResolvingKey(text: bad) == nil, "\(bad)")
        }
    }

    @Test func theAddressHashAgreesWithCryptographysAESOnRandomKeys() throws {
        let count = Int(ProcessInfo.processInfo.environment["LOCUS_IRK_CASES"] ?? "") ?? 100_000
        var random = SplitMix64(seed: 36)
        let aes = AES128()
        var lines: [String] = []
        var ours: [UInt32] = []
        for _ in 0..<count {
            let key = Self.randomKey(&random)
            let prand = Self.randomPrand(&random)
            lines.append(Self.hex(key) + " " + String(format: "%06x", prand))
            ours.append(Self.expanded(key, aes).withUnsafeBufferPointer { aes.addressHash(prand: prand, $0) })
        }
        let theirs = try GeodSolveDifferentialTests.run(try Self.python(), [Self.oracle, "ah"], lines).split(separator: "\n")
        try #require(theirs.count == count, "one hash a line from irk_oracle.py")
        var disagreements = 0
        for index in 0..<count where UInt32(theirs[index], radix: 16) != ours[index] {
            if disagreements < 5 { Issue.record("\(lines[index]): ours \(String(ours[index], radix: 16)), cryptography's \(theirs[index])") }
            disagreements += 1
        }
        #expect(disagreements == 0)
    }

    @Test func fiveHundredKeysResolveAsBluetoothDataToolsDoes() throws {
        var random = SplitMix64(seed: 360)
        let aes = AES128()
        let keys = (0..<500).map { _ in Self.randomKey(&random) }
        // A cache with room to spare (in sets of 4, some sets fill before others).
        var resolver = PrivateAddressResolver(capacity: keys.count, cacheEntries: 1 << 16)
        for (number, key) in keys.enumerated() { #expect(resolver.add(key) == number) }
        // Each key's address, then as many strangers' (random resolvable-looking addresses).
        var addresses: [BLEAddress] = keys.map { key in
            let prand = Self.randomPrand(&random)
            let hash = Self.expanded(key, aes).withUnsafeBufferPointer { aes.addressHash(prand: prand, $0) }
            return BLEAddress(value: UInt64(prand) << 24 | UInt64(hash))
        }
        for _ in 0..<500 { addresses.append(BLEAddress(value: UInt64(Self.randomPrand(&random)) << 24 | random.next() & 0xFF_FFFF)) }
        addresses = addresses.map { ($0, random.next()) }.sorted { $0.1 < $1.1 }.map(\.0)
        let input = [keys.map(Self.hex).joined(separator: " ")] + addresses.map(\.description)
        let expected = try GeodSolveDifferentialTests.run(try Self.python(), [Self.oracle, "resolve"], input).split(separator: "\n").map { Int($0) ?? -2 }
        try #require(expected.count == addresses.count)
        #expect(expected.filter { $0 >= 0 }.count >= 500, "every key's own address resolves")
        for (address, number) in zip(addresses, expected) {
            #expect((resolver.resolve(address) ?? -1) == number, "\(address)")
        }
        #expect(resolver.addressesTried == 1_000)
        // Heard again: from the cache, no key tried.
        let tried = resolver.keysTried
        for (address, number) in zip(addresses, expected) { #expect((resolver.resolve(address) ?? -1) == number) }
        #expect(resolver.keysTried == tried)
    }

    @Test func onlyResolvablePrivateAddressesAreTried() throws {
        var resolver = PrivateAddressResolver(capacity: 1)
        _ = resolver.add(try Self.key("ec0234a357c8ad05341010a60a397d9b"))
        for value: UInt64 in [0xC0_8194_0D_FBAA, 0x00_8194_0D_FBAA, 0x40_0000_123456, 0x7F_FFFF_123456] {
            #expect(resolver.resolve(BLEAddress(value: value)) == nil)
        }
        #expect(resolver.addressesTried == 0)
        resolver.removeAll()
        #expect(resolver.resolve(BLEAddress(value: 0x70_8194_0D_FBAA)) == nil)
    }

    @Test func resolvingAllocatesNothingAndTheCacheKeepsRecentAddresses() throws {
        var random = SplitMix64(seed: 7)
        var resolver = PrivateAddressResolver(capacity: 64, cacheEntries: 256)
        for _ in 0..<64 { _ = resolver.add(Self.randomKey(&random)) }
        let addresses = (0..<1_000).map { _ in BLEAddress(value: UInt64(Self.randomPrand(&random)) << 24 | random.next() & 0xFF_FFFF) }
        var resolved = 0
        // Indexed through a buffer: iterating the array itself inside the counted closure
        // allocates in debug builds, whatever the loop does.
        let count = addresses.withUnsafeBufferPointer { buffer in
            allocations {
                for index in 0..<buffer.count where resolver.resolve(buffer[index]) != nil { resolved += 1 }
            }
        }
        #expect(count == 0)
        #expect(resolver.addressesTried == 1_000)
        // The most recently heard are still cached (64 sets of 4): no key is tried for them.
        let tried = resolver.addressesTried
        for address in addresses.suffix(16) { _ = resolver.resolve(address) }
        #expect(resolver.addressesTried == tried)
    }
}
