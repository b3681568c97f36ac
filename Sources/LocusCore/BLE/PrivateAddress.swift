/// Resolvable private addresses: how a phone that hides behind rotating addresses is recognised.
///
/// A phone (or watch) advertises from a random address that changes every few minutes. Its upper
/// 24 bits are `prand`, random but for their top two bits (0b01); its lower 24 bits are
/// `ah(IRK, prand)`: the last three bytes of AES-128 under the phone's identity resolving key
/// (IRK) of the block `0 (13 bytes) ‖ prand` (Bluetooth Core 5.4, Vol 3 Part H 2.2.2 and Vol 6
/// Part B 1.3.2.2). Whoever holds the IRK recomputes the hash from `prand` and compares.
///
/// The IRK is a secret: it is read from a file only its owner can read (`Site.phones`), kept in
/// memory as AES round keys, and never written out: conditions, logs and the uplink name the
/// phone, never its key.

/// A 128-bit identity resolving key, its bytes most significant first: the order of the
/// specification's sample data, of ESPresense's `irk:` and of Home Assistant's hex form.
public struct IdentityResolvingKey: Equatable, Sendable {
    public var bytes: InlineArray<16, UInt8>

    public init(bytes: InlineArray<16, UInt8>) { self.bytes = bytes }

    public static func == (a: IdentityResolvingKey, b: IdentityResolvingKey) -> Bool {
        for index in 0..<16 where a.bytes[index] != b.bytes[index] { return false }
        return true
    }

    /// Reads 32 hex digits (most significant byte first; colons and spaces between bytes are
    /// allowed), or the 24-character base64 of macOS's keychain ("Remote IRK"), which holds the
    /// key least significant byte first and is turned around here. nil for anything else.
    public init?(text: String) {
        let hex = HexText.bytes(text)
        let keychain = hex == nil && text.utf8.count == 24 ? Base64.decode(text) : nil
        guard let bytes = hex ?? keychain.map({ Array($0.reversed()) }), bytes.count == 16 else { return nil }
        self.bytes = InlineArray(repeating: 0)
        for index in 0..<16 { self.bytes[index] = bytes[index] }
    }
}

/// AES-128 encryption (FIPS-197), encryption only, for the address hash. The four round tables
/// (4 KiB) and the S-box are computed at start-up rather than stored in the binary; one block
/// costs about 600 instructions.
public struct AES128: ~Copyable {
    /// Words 0..<1024: the round tables T0...T3 (T_k is T0 rotated right by 8k bits); 1024..<1280:
    /// the S-box, one byte a word.
    private let tables: UnsafeMutableBufferPointer<UInt32>
    public static let roundKeyWords = 44

    public init() {
        tables = .allocate(capacity: 1280)
        AES128.build(tables)
    }

    deinit { tables.deallocate() }

    /// The S-box from the multiplicative inverse in GF(2^8) and the affine map, the round tables
    /// from it (the S-box's byte times the MixColumns column 2, 1, 1, 3).
    private static func build(_ tables: UnsafeMutableBufferPointer<UInt32>) {
        // Powers and logarithms of the generator 3.
        var power = InlineArray<256, UInt8>(repeating: 0)
        var logarithm = InlineArray<256, UInt8>(repeating: 0)
        var value: UInt8 = 1
        for exponent in 0..<255 {
            power[exponent] = value
            logarithm[Int(value)] = UInt8(exponent)
            value ^= times2(value)
        }
        for input in 0..<256 {
            let inverse: UInt8 = input == 0 ? 0 : power[(255 - Int(logarithm[input])) % 255]
            var substituted = inverse
            for shift in 1...4 { substituted ^= inverse << shift | inverse >> (8 - shift) }
            substituted ^= 0x63
            let s = UInt32(substituted)
            let word = UInt32(times2(substituted)) << 24 | s << 16 | s << 8 | UInt32(times2(substituted) ^ substituted)
            tables[input] = word
            tables[256 + input] = word >> 8 | word << 24
            tables[512 + input] = word >> 16 | word << 16
            tables[768 + input] = word >> 24 | word << 8
            tables[1024 + input] = s
        }
    }

    @inline(__always)
    private static func times2(_ value: UInt8) -> UInt8 { value << 1 ^ (value & 0x80 != 0 ? 0x1B : 0) }

    @inline(__always)
    private func substitute(_ word: UInt32, _ shift: UInt32) -> UInt32 { tables[1024 + Int(word >> shift & 0xFF)] }

    /// The 44 round-key words of `key` into `roundKeys` (FIPS-197 5.2).
    public func expand(_ key: IdentityResolvingKey, into roundKeys: UnsafeMutableBufferPointer<UInt32>) {
        precondition(roundKeys.count >= AES128.roundKeyWords, "room for the 44 round-key words")
        for word in 0..<4 {
            roundKeys[word] = UInt32(key.bytes[4 * word]) << 24 | UInt32(key.bytes[4 * word + 1]) << 16
                | UInt32(key.bytes[4 * word + 2]) << 8 | UInt32(key.bytes[4 * word + 3])
        }
        var roundConstant: UInt8 = 1
        for word in 4..<AES128.roundKeyWords {
            var temporary = roundKeys[word - 1]
            if word % 4 == 0 {
                temporary = substitute(temporary, 16) << 24 | substitute(temporary, 8) << 16
                    | substitute(temporary, 0) << 8 | substitute(temporary, 24)
                temporary ^= UInt32(roundConstant) << 24
                roundConstant = AES128.times2(roundConstant)
            }
            roundKeys[word] = roundKeys[word - 4] ^ temporary
        }
    }

    /// One block, as four big-endian words, under the expanded key.
    @_noAllocation
    public func encrypt(_ block: (UInt32, UInt32, UInt32, UInt32), _ roundKeys: UnsafeBufferPointer<UInt32>) -> (UInt32, UInt32, UInt32, UInt32) {
        precondition(roundKeys.count >= AES128.roundKeyWords, "an expanded AES-128 key")
        var (s0, s1, s2, s3) = (block.0 ^ roundKeys[0], block.1 ^ roundKeys[1], block.2 ^ roundKeys[2], block.3 ^ roundKeys[3])
        for round in 1..<10 {
            let key = 4 * round
            let t0 = mix(s0, s1, s2, s3) ^ roundKeys[key]
            let t1 = mix(s1, s2, s3, s0) ^ roundKeys[key + 1]
            let t2 = mix(s2, s3, s0, s1) ^ roundKeys[key + 2]
            let t3 = mix(s3, s0, s1, s2) ^ roundKeys[key + 3]
            (s0, s1, s2, s3) = (t0, t1, t2, t3)
        }
        return (last(s0, s1, s2, s3) ^ roundKeys[40], last(s1, s2, s3, s0) ^ roundKeys[41],
                last(s2, s3, s0, s1) ^ roundKeys[42], last(s3, s0, s1, s2) ^ roundKeys[43])
    }

    /// One output column of a middle round: SubBytes, ShiftRows and MixColumns in four lookups.
    @inline(__always)
    private func mix(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32) -> UInt32 {
        tables[Int(a >> 24)] ^ tables[256 + Int(b >> 16 & 0xFF)] ^ tables[512 + Int(c >> 8 & 0xFF)] ^ tables[768 + Int(d & 0xFF)]
    }

    /// One output column of the last round: SubBytes and ShiftRows.
    @inline(__always)
    private func last(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32) -> UInt32 {
        substitute(a, 24) << 24 | substitute(b, 16) << 16 | substitute(c, 8) << 8 | substitute(d, 0)
    }

    /// `ah(k, r)`: the last 24 bits of the encryption of `0 (13 bytes) ‖ prand`.
    @_noAllocation @inline(__always)
    public func addressHash(prand: UInt32, _ roundKeys: UnsafeBufferPointer<UInt32>) -> UInt32 {
        encrypt((0, 0, 0, prand & 0xFF_FFFF), roundKeys).3 & 0xFF_FFFF
    }
}

extension BLEAddress {
    /// A resolvable private address: top two bits 0b01, and its random part neither all zeros
    /// nor all ones (Vol 6 Part B 1.3.2.2). The caller checks that the report says "random".
    @inline(__always)
    public var isResolvablePrivate: Bool {
        let prand = value >> 24
        let random = prand & 0x3F_FFFF
        return prand >> 22 == 0b01 && random != 0 && random != 0x3F_FFFF
    }
}

/// The configured phones' keys, and which key each recently heard address resolved to.
///
/// A phone keeps an address for about 15 minutes and advertises several times a second, so
/// each address is resolved once, by trying every key (about 600 instructions a key), and then
/// found in the cache: sets of the 4 most recently heard addresses, each with its key or "none"
/// (strangers' phones are cached too, or each of their reports would try every key again).
public struct PrivateAddressResolver: ~Copyable {
    public let capacity: Int
    public private(set) var count = 0
    /// Addresses whose keys were tried (cache misses), and the keys tried for them.
    public private(set) var addressesTried = 0
    public private(set) var keysTried = 0
    private let aes = AES128()
    private let roundKeys: UnsafeMutableBufferPointer<UInt32>
    /// An entry is its address with bit 63 set; 0 is empty.
    private let cachedAddresses: UnsafeMutableBufferPointer<UInt64>
    /// The key's number, or -1: no configured key resolves the address.
    private let cachedKeys: UnsafeMutableBufferPointer<Int16>
    private let setMask: Int
    public static let ways = 4
    private static let valid: UInt64 = 1 << 63

    /// `capacity` keys (at most 32,767); a cache of `cacheEntries` addresses (rounded up to a
    /// power of two, at least 64).
    public init(capacity: Int, cacheEntries: Int = 1024) {
        precondition(capacity >= 0 && capacity <= Int(Int16.max), "a key's number fits the cache's Int16")
        self.capacity = capacity
        roundKeys = .allocate(capacity: max(1, capacity) * AES128.roundKeyWords)
        var entries = 64
        while entries < cacheEntries { entries <<= 1 }
        cachedAddresses = .allocate(capacity: entries)
        cachedAddresses.initialize(repeating: 0)
        cachedKeys = .allocate(capacity: entries)
        cachedKeys.initialize(repeating: -1)
        setMask = entries / PrivateAddressResolver.ways - 1
    }

    deinit {
        roundKeys.deallocate()
        cachedAddresses.deallocate()
        cachedKeys.deallocate()
    }

    /// Adds a key; its number (0, 1, ...) is what `resolve` returns. Forgets the cached "none"s.
    public mutating func add(_ key: IdentityResolvingKey) -> Int {
        precondition(count < capacity, "a key within the resolver's capacity")
        aes.expand(key, into: UnsafeMutableBufferPointer(rebasing: roundKeys[(count * AES128.roundKeyWords)...]))
        count += 1
        forgetCache()
        return count - 1
    }

    /// Drops every key (a reload adds the new file's).
    public mutating func removeAll() {
        count = 0
        forgetCache()
    }

    private mutating func forgetCache() {
        for index in cachedAddresses.indices { cachedAddresses[index] = 0 }
    }

    /// The number of the key that `address` resolves with, or nil. The caller checks that the
    /// report gives a random address.
    @_noAllocation
    public mutating func resolve(_ address: BLEAddress) -> Int? {
        guard count > 0, address.isResolvablePrivate else { return nil }
        let tagged = address.value | PrivateAddressResolver.valid
        let set = PrivateAddressResolver.setIndex(address.value) & setMask
        let first = set * PrivateAddressResolver.ways
        var entry = first
        while entry < first + PrivateAddressResolver.ways, cachedAddresses[entry] != tagged { entry += 1 }
        let key: Int?
        if entry < first + PrivateAddressResolver.ways {
            key = cachedKeys[entry] >= 0 ? Int(cachedKeys[entry]) : nil
        } else {
            key = search(address)
            entry = first + PrivateAddressResolver.ways - 1
        }
        moveToFront(tagged, key, from: entry, first)
        return key
    }

    /// Every key tried against the address: its `prand` encrypted under each, compared with its hash.
    @_noAllocation
    private mutating func search(_ address: BLEAddress) -> Int? {
        let prand = UInt32(truncatingIfNeeded: address.value >> 24)
        let hash = UInt32(truncatingIfNeeded: address.value & 0xFF_FFFF)
        addressesTried += 1
        var found: Int? = nil
        var key = 0
        while key < count {
            let words = UnsafeBufferPointer(rebasing: roundKeys[(key * AES128.roundKeyWords)..<((key + 1) * AES128.roundKeyWords)])
            if aes.addressHash(prand: prand, words) == hash {
                found = key
                break
            }
            key += 1
        }
        // Not `??`: its autoclosure would capture self.
        if let found { keysTried += found + 1 } else { keysTried += count }
        return found
    }

    /// The set's ways are kept most recently heard first: the entry at `from` (or the least
    /// recently heard, which a new address replaces) moves to the front.
    @inline(__always)
    private func moveToFront(_ tagged: UInt64, _ key: Int?, from entry: Int, _ first: Int) {
        var way = entry
        while way > first {
            cachedAddresses[way] = cachedAddresses[way - 1]
            cachedKeys[way] = cachedKeys[way - 1]
            way -= 1
        }
        cachedAddresses[first] = tagged
        cachedKeys[first] = Int16(key ?? -1)
    }

    @inline(__always)
    private static func setIndex(_ address: UInt64) -> Int {
        var x = address &* 0x9E37_79B9_7F4A_7C15
        x ^= x >> 29
        return Int(truncatingIfNeeded: x)
    }
}

/// The phones file's keys in a resolver, and what a report from a phone becomes: a sighting of
/// its identity in the engine (`PhoneCondition.identity`), with its configured power at 1 m, so
/// that phone conditions, ranging and the uplink treat it as a beacon.
public final class PhoneResolution {
    public var resolver: PrivateAddressResolver
    /// Per key number: the phone's number in the engine, and its RSSI at 1 m.
    private let engineNumbers: UnsafeMutableBufferPointer<UInt16>
    private let powers: UnsafeMutableBufferPointer<Int8>
    private var names: [FixedName] = []
    public private(set) var phonesHeard = 0
    /// Phones of the file the engine had no number left for (names of earlier files took them:
    /// numbers are kept until restart); they are not resolved.
    public private(set) var unnumbered: [FixedName] = []

    /// Every phone of `keys` gets its engine number (`[capacity] phones` bounds the names an
    /// engine numbers until restart).
    public init(keys: PhoneKeys, engine: MonitorEngine, cacheEntries: Int = 1024) {
        resolver = PrivateAddressResolver(capacity: keys.phones.count, cacheEntries: cacheEntries)
        engineNumbers = .allocate(capacity: max(1, keys.phones.count))
        powers = .allocate(capacity: max(1, keys.phones.count))
        for phone in keys.phones {
            guard let number = engine.phoneNumber(phone.name, create: true) else {
                unnumbered.append(phone.name)
                continue
            }
            let key = resolver.add(phone.key)
            engineNumbers[key] = UInt16(number)
            powers[key] = phone.measuredPowerDBm
            names.append(phone.name)
        }
    }

    deinit {
        engineNumbers.deallocate()
        powers.deallocate()
    }

    /// Whether the phone is one this resolution resolves (in the file, with an engine number).
    public func resolves(_ name: FixedName) -> Bool { names.contains(name) }

    /// The name of the phone whose sightings carry the engine's phone number `number`.
    @_noAllocation
    public func name(engineNumber number: Int) -> FixedName? {
        for key in 0..<resolver.count where Int(engineNumbers[key]) == number { return names[key] }
        return nil
    }

    /// The sighting a report from a configured phone makes, or nil.
    @_noAllocation
    public func sighting(_ report: AdvertisingReport, time: UTCTime) -> Sighting? {
        guard report.addressType == 1, let key = resolver.resolve(report.address) else { return nil }
        phonesHeard += 1
        return Sighting(identity: PhoneCondition.identity(number: Int(engineNumbers[key])), rssi: report.rssi,
                        measuredPower: powers[key], address: report.address, time: time)
    }
}
