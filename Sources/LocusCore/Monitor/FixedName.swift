/// A monitor name or condition identifier stored inline (at most 32 ASCII bytes), so conditions
/// live in fixed-size slots and compare without touching the heap.
public struct FixedName: Hashable, Sendable, CustomStringConvertible, Comparable {
    public static let capacity = Identifier.maximumLength
    private var storage: InlineArray<32, UInt8>
    /// One byte: 33 bytes a name, which 10,000 conditions carry several times each.
    private var length: UInt8

    public var count: Int { Int(length) }

    /// nil unless `text` is a valid identifier (see `Identifier.isValid`).
    public init?(_ text: String) {
        precondition(FixedName.capacity <= 32, "a name's longest identifier fits its inline storage")
        guard Identifier.isValid(text) else { return nil }
        storage = InlineArray(repeating: 0)
        length = 0
        for byte in text.utf8 {
            storage[Int(length)] = byte
            length += 1
        }
        precondition(length >= 1, "a valid identifier is not empty")
    }

    /// `length` bytes that `fill` writes (already checked).
    init(unchecked length: UInt8, _ fill: (inout InlineArray<32, UInt8>) -> Void) {
        storage = InlineArray(repeating: 0)
        self.length = length
        fill(&storage)
    }

    public init?(bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= 1, bytes.count <= FixedName.capacity else { return nil }
        storage = InlineArray(repeating: 0)
        length = 0
        for byte in bytes {
            guard isDigit(byte) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte == 0x5F || byte == 0x2D else { return nil }
            storage[Int(length)] = byte
            length += 1
        }
    }

    public subscript(index: Int) -> UInt8 {
        precondition(index < count, "a byte of the name, not of its unused storage")
        return storage[index]
    }

    public static func == (a: FixedName, b: FixedName) -> Bool {
        guard a.length == b.length else { return false }
        for index in 0..<a.count where a.storage[index] != b.storage[index] { return false }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        for index in 0..<count { hasher.combine(storage[index]) }
    }

    public static func < (a: FixedName, b: FixedName) -> Bool {
        for index in 0..<min(a.count, b.count) where a.storage[index] != b.storage[index] {
            return a.storage[index] < b.storage[index]
        }
        return a.count < b.count
    }

    public var description: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        for index in 0..<count { bytes.append(storage[index]) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Writes the name's bytes (for log records).
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        var copy = storage
        let length = count
        return withUnsafeBytes(of: &copy) { raw in body(UnsafeRawBufferPointer(rebasing: raw[0..<length])) }
    }
}

/// A name's first `ShortName.capacity` bytes and its length, 16 bytes: the whole name when it is
/// that short (most identifiers are), else its owner keeps the whole `FixedName` elsewhere as well
/// (the engine's records: `MonitorEngine.Slot`, whose 10,000 copies save 17 bytes each).
struct ShortName {
    static let capacity = 15
    private var storage: InlineArray<15, UInt8>
    let length: UInt8

    init(_ name: FixedName) {
        storage = InlineArray(repeating: 0)
        length = UInt8(name.count)
        for index in 0..<min(name.count, ShortName.capacity) { storage[index] = name[index] }
    }

    /// The bytes are the whole name.
    var isWhole: Bool { Int(length) <= ShortName.capacity }

    /// The name, when it `isWhole`.
    var name: FixedName {
        precondition(isWhole, "a short name holds all of the name")
        return FixedName(prefix: storage, length: length)
    }

    /// Whether `name` may be this one: equal when this `isWhole`, else it has the same length and
    /// first bytes (the whole name decides).
    func matches(_ name: FixedName) -> Bool {
        guard Int(length) == name.count else { return false }
        for index in 0..<min(name.count, ShortName.capacity) where storage[index] != name[index] { return false }
        return true
    }
}

extension FixedName {
    /// The name a `ShortName` holds whole.
    init(prefix: InlineArray<15, UInt8>, length: UInt8) {
        self.init(unchecked: length) { storage in
            for index in 0..<Int(length) { storage[index] = prefix[index] }
        }
    }
}
