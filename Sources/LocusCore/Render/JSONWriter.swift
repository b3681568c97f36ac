/// The one writer of every line Locus prints for machines (JSON lines) and people (aligned text):
/// bytes appended into a buffer allocated once, reused line after line. Nothing is allocated per
/// line or per value: integers and fixed-point decimals are formatted from integers, strings are
/// escaped byte by byte, and keys are static strings.
///
///     var line = JSONWriter(capacity: 1024)
///     line.beginObject()
///     line.string("class", "TPV")      // a literal is a StaticString: nothing allocated
///     line.integer("mode", 3)
///     line.number("lat", 44.0687833, decimals: 9)
///     line.endObject()
///     line.newline()
///     console.write(line.bytes)          // {"class":"TPV","mode":3,"lat":44.068783300}\n
///     line.reset()
///
/// Invariant: `0 <= count <= capacity`. A value that does not fit is not written at all (the
/// line is cut at a value boundary) and `overflowed` says so; callers size the buffer so that this
/// does not happen in practice (a line is at most a few KiB) and treat it as a reported error.
///
/// Separators are the writer's business: a member or element gets its comma from the nesting
/// state (one bit a level, 32 levels), so a renderer never splices or drops characters.
public struct JSONWriter: ~Copyable {
    private let storage: UnsafeMutableBufferPointer<UInt8>
    public private(set) var count = 0
    /// A value did not fit since the last `reset()`; the bytes written are a cut-off line.
    public private(set) var overflowed = false
    /// Nesting depth (objects and arrays) and, one bit a level, whether that level has a member.
    private var depth = 0
    private var hasMember: UInt32 = 0
    /// A key was just written: the value that follows takes no separator.
    private var afterKey = false
    /// Where the string `beginString` opened starts (its quote), or -1.
    private var pieceStart = -1

    public static let maximumDepth = 32

    public init(capacity: Int) {
        precondition(capacity > 0)
        storage = .allocate(capacity: capacity)
    }

    deinit { storage.deallocate() }

    public var capacity: Int { storage.count }

    /// The bytes written since the last `reset()`.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(storage)[0..<count]) }

    /// The line as a String (allocates): for tests and the few callers that need one.
    public var string: String { String(decoding: bytes, as: UTF8.self) }

    /// Starts a new line in the same buffer.
    @_noAllocation
    public mutating func reset() {
        count = 0
        overflowed = false
        depth = 0
        hasMember = 0
        afterKey = false
        pieceStart = -1
    }

    // MARK: structure

    @_noAllocation
    public mutating func beginObject() {
        separate()
        open(UInt8(ascii: "{"))
    }

    @_noAllocation
    public mutating func beginObject(_ key: StaticString) {
        self.key(key)
        beginObject()
    }

    @_noAllocation
    public mutating func endObject() { close(UInt8(ascii: "}")) }

    @_noAllocation
    public mutating func beginArray() {
        separate()
        open(UInt8(ascii: "["))
    }

    @_noAllocation
    public mutating func beginArray(_ key: StaticString) {
        self.key(key)
        beginArray()
    }

    @_noAllocation
    public mutating func endArray() { close(UInt8(ascii: "]")) }

    /// A member's key; the next value written is its value.
    @_noAllocation
    public mutating func key(_ name: StaticString) {
        separate()
        afterKey = true
        let length = name.utf8CodeUnitCount
        guard reserve(length + 3) else { return }
        let base = storage.baseAddress! + count
        let text = name.utf8Start
        base[0] = UInt8(ascii: "\"")
        // memcpy: overlapping word moves for short keys, fewer instructions than a byte loop.
        UnsafeMutableRawPointer(base + 1).copyMemory(from: text, byteCount: length)
        base[length + 1] = UInt8(ascii: "\"")
        base[length + 2] = UInt8(ascii: ":")
        count += length + 3
    }

    // MARK: members (key and value)

    /// Disfavoured, here and below: a literal value is a `StaticString` (no allocation), a
    /// String variable still comes here.
    @_disfavoredOverload
    public mutating func string(_ key: StaticString, _ value: String) {
        self.key(key)
        string(value)
    }

    @_noAllocation
    public mutating func string(_ key: StaticString, _ value: StaticString) {
        self.key(key)
        string(value)
    }

    @_noAllocation
    public mutating func string(_ key: StaticString, _ value: FixedName) {
        self.key(key)
        string(value)
    }

    @_noAllocation
    public mutating func integer(_ key: StaticString, _ value: Int) {
        self.key(key)
        integer(value)
    }

    @_noAllocation
    public mutating func integer(_ key: StaticString, _ value: Int64) {
        self.key(key)
        integer(value)
    }

    @_noAllocation
    public mutating func integer(_ key: StaticString, _ value: UInt64) {
        self.key(key)
        integer(value)
    }

    @_noAllocation
    public mutating func boolean(_ key: StaticString, _ value: Bool) {
        self.key(key)
        boolean(value)
    }

    @_noAllocation
    public mutating func null(_ key: StaticString) {
        self.key(key)
        null()
    }

    /// `value` with exactly `decimals` digits after the point, rounded half away from zero;
    /// `null` when it is not finite or too large for 18 digits.
    @_noAllocation
    public mutating func number(_ key: StaticString, _ value: Double, decimals: Int) {
        self.key(key)
        number(value, decimals: decimals)
    }

    /// A fixed-point value `units / 10^scale`, e.g. (441234, 4) -> 44.1234.
    @_noAllocation
    public mutating func fixed(_ key: StaticString, units: Int64, scale: Int) {
        self.key(key)
        fixed(units: units, scale: scale)
    }

    /// An ISO 8601 time with milliseconds, as gpsd prints TPV times: "2020-02-02T00:01:46.000Z".
    @_noAllocation
    public mutating func time(_ key: StaticString, _ value: UTCTime) {
        self.key(key)
        time(value)
    }

    /// A JSON value rendered elsewhere (stored as JSON), written as it is.
    @_noAllocation
    public mutating func raw(_ key: StaticString, _ json: UnsafeRawBufferPointer) {
        self.key(key)
        raw(json)
    }

    // MARK: values (array elements, or after `key`)

    /// Not `@_noAllocation`: a String's bytes may need a contiguous copy. Hot paths write
    /// `FixedName`s, static strings and byte buffers.
    @_disfavoredOverload
    public mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { string(bytes: UnsafeRawBufferPointer($0)) }
    }

    @_noAllocation
    public mutating func string(_ value: StaticString) {
        string(bytes: UnsafeRawBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount))
    }

    @_noAllocation
    public mutating func string(_ value: FixedName) {
        separate()
        guard reserve(value.count + 2) else { return }
        put(UInt8(ascii: "\""))
        // Identifiers are ASCII letters, digits, '-' and '_': nothing to escape.
        for index in 0..<value.count { put(value[index]) }
        put(UInt8(ascii: "\""))
    }

    /// A string from bytes, escaped (UTF-8 is passed through; control bytes become \u00XX).
    @_noAllocation
    public mutating func string(bytes: UnsafeRawBufferPointer) {
        separate()
        let escapedCount = JSONWriter.escapedCount(bytes)
        guard reserve(escapedCount + 2) else { return }
        put(UInt8(ascii: "\""))
        if escapedCount == bytes.count {
            // Nothing to escape (names, static strings): the bytes as they are.
            for byte in bytes { put(byte) }
        } else {
            escaped(bytes)
        }
        put(UInt8(ascii: "\""))
    }

    // MARK: a string value in pieces

    /// Opens a string value whose text comes in pieces (`stringPart`) until `endString`: a
    /// topic or an id joined from a prefix and names, written without joining them first.
    /// Nothing else may be written before `endString`.
    @_noAllocation
    public mutating func beginString() {
        precondition(pieceStart < 0, "a string opened inside a string")
        separate()
        pieceStart = count
        guard reserve(1) else { return }
        put(UInt8(ascii: "\""))
    }

    @_noAllocation
    public mutating func beginString(_ key: StaticString) {
        self.key(key)
        beginString()
    }

    /// Text of the open string, escaped as `string(bytes:)` escapes.
    @_noAllocation
    public mutating func stringPart(_ bytes: UnsafeRawBufferPointer) {
        precondition(pieceStart >= 0, "a string part outside beginString/endString")
        let escapedCount = JSONWriter.escapedCount(bytes)
        guard reserve(escapedCount) else { return }
        if escapedCount == bytes.count {
            for byte in bytes { put(byte) }
        } else {
            escaped(bytes)
        }
    }

    @_noAllocation
    public mutating func stringPart(_ value: StaticString) {
        stringPart(UnsafeRawBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount))
    }

    @_noAllocation
    public mutating func stringPart(_ value: FixedName) {
        precondition(pieceStart >= 0, "a string part outside beginString/endString")
        guard reserve(value.count) else { return }
        for index in 0..<value.count { put(value[index]) }
    }

    /// One byte of the open string's text (escaped when JSON needs it): for text mapped byte by
    /// byte, such as an id made from a name.
    @_noAllocation
    public mutating func stringPart(byte: UInt8) {
        precondition(pieceStart >= 0, "a string part outside beginString/endString")
        guard reserve(JSONWriter.escapedWidth(byte)) else { return }
        escaped(byte: byte)
    }

    /// Closes the string; one that did not fit is taken out whole, so the line is cut at a
    /// value boundary as with any other value.
    @_noAllocation
    public mutating func endString() {
        precondition(pieceStart >= 0, "endString without beginString")
        if reserve(1) {
            put(UInt8(ascii: "\""))
        } else if count > pieceStart {
            count = pieceStart
        }
        pieceStart = -1
    }

    @_noAllocation
    public mutating func integer(_ value: Int) { integer(Int64(value)) }

    @_noAllocation
    public mutating func integer(_ value: Int64) {
        separate()
        text(value)
    }

    @_noAllocation
    public mutating func integer(_ value: UInt64) {
        separate()
        text(value)
    }

    @_noAllocation
    public mutating func boolean(_ value: Bool) {
        separate()
        if value { ascii("true") } else { ascii("false") }
    }

    @_noAllocation
    public mutating func null() {
        separate()
        ascii("null")
    }

    @_noAllocation
    public mutating func number(_ value: Double, decimals: Int) {
        separate()
        text(value, decimals: decimals)
    }

    @_noAllocation
    public mutating func fixed(units: Int64, scale: Int) {
        separate()
        text(units: units, scale: scale)
    }

    @_noAllocation
    public mutating func time(_ value: UTCTime) {
        separate()
        guard reserve(26) else { return }
        put(UInt8(ascii: "\""))
        text(value)
        put(UInt8(ascii: "\""))
    }

    @_noAllocation
    public mutating func raw(_ json: UnsafeRawBufferPointer) {
        separate()
        append(json)
    }

    // MARK: plain text (aligned lines for people, and the newline that ends a JSON line)

    @_noAllocation
    public mutating func newline() { ascii("\n") }

    /// Text as it is: no quotes, no escaping.
    @_noAllocation
    public mutating func text(_ value: StaticString) {
        append(UnsafeRawBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount))
    }

    /// Not `@_noAllocation` (see `string(_: String)`).
    @_disfavoredOverload
    public mutating func text(_ value: String) {
        var value = value
        value.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    @_noAllocation
    public mutating func text(_ value: FixedName) {
        guard reserve(value.count) else { return }
        for index in 0..<value.count { put(value[index]) }
    }

    @_noAllocation
    public mutating func text(_ value: Int64) {
        guard reserve(JSONWriter.digitCount(value.magnitude) + (value < 0 ? 1 : 0)) else { return }
        if value < 0 { put(UInt8(ascii: "-")) }
        digits(value.magnitude, width: JSONWriter.digitCount(value.magnitude))
    }

    @_noAllocation
    public mutating func text(_ value: Int) { text(Int64(value)) }

    @_noAllocation
    public mutating func text(_ value: UInt64) {
        let width = JSONWriter.digitCount(value)
        guard reserve(width) else { return }
        digits(value, width: width)
    }

    /// `value` padded with zeros to `width` digits (no sign: for times and dates).
    @_noAllocation
    public mutating func text(_ value: Int, zeroPaddedTo width: Int) {
        let magnitude = UInt64(value.magnitude)
        let written = max(width, JSONWriter.digitCount(magnitude))
        guard reserve(written) else { return }
        digits(magnitude, width: written)
    }

    /// A number with exactly `decimals` digits after the point (0...17), rounded half away from
    /// zero, from integers; `null` when it is not finite or does not fit 18 digits.
    @_noAllocation
    public mutating func text(_ value: Double, decimals: Int) {
        precondition(decimals >= 0 && decimals <= 17)
        guard value.isFinite else { return ascii("null") }
        let scaled = abs(value) * JSONWriter.powerOfTen(decimals)
        guard scaled < 9.0e18 else { return ascii("null") }
        // Half away from zero without `rounded(_:)` (its rule type is resilient on the host, which
        // the allocation check rejects): `scaled - truncated` is exact in binary floating point.
        var units = Int64(scaled)
        if scaled - Double(units) >= 0.5 { units += 1 }
        text(units: value < 0 ? -units : units, scale: decimals)
    }

    /// `units / 10^scale` with exactly `scale` digits after the point.
    @_noAllocation
    public mutating func text(units: Int64, scale: Int) {
        precondition(scale >= 0 && scale <= 18)
        let magnitude = units.magnitude
        let divisor = JSONWriter.integerPowerOfTen(scale)
        let whole = magnitude / divisor
        let wholeWidth = JSONWriter.digitCount(whole)
        let width = (units < 0 ? 1 : 0) + wholeWidth + (scale > 0 ? scale + 1 : 0)
        guard reserve(width) else { return }
        let base = storage.baseAddress! + count
        if units < 0 { base[0] = UInt8(ascii: "-") }
        let point = base + (units < 0 ? 1 : 0) + wholeWidth
        JSONWriter.digits(whole, width: wholeWidth, endingAt: point)
        if scale > 0 {
            point[0] = UInt8(ascii: ".")
            JSONWriter.digits(magnitude % divisor, width: scale, endingAt: point + 1 + scale)
        }
        count += width
    }

    /// ISO 8601 with milliseconds, unquoted: 2020-02-02T00:01:46.000Z.
    @_noAllocation
    public mutating func text(_ time: UTCTime) {
        let date = time.date
        let secondOfDay = Int(time.seconds - floorDivide(time.seconds, 86_400) * 86_400)
        let milliseconds = Int(time.nanoseconds / 1_000_000)
        guard reserve(24) else { return }
        if date.year >= 0 && date.year <= 9_999 && milliseconds >= 0 && milliseconds < 1_000 {
            // The usual case, digit pairs without counting.
            fixedDigits(date.year, 4)
            put(UInt8(ascii: "-"))
            fixedDigits(date.month, 2)
            put(UInt8(ascii: "-"))
            fixedDigits(date.day, 2)
            put(UInt8(ascii: "T"))
            fixedDigits(secondOfDay / 3600, 2)
            put(UInt8(ascii: ":"))
            fixedDigits(secondOfDay / 60 % 60, 2)
            put(UInt8(ascii: ":"))
            fixedDigits(secondOfDay % 60, 2)
            put(UInt8(ascii: "."))
            fixedDigits(milliseconds, 3)
            put(UInt8(ascii: "Z"))
            return
        }
        text(date.year, zeroPaddedTo: 4)
        put(UInt8(ascii: "-"))
        text(date.month, zeroPaddedTo: 2)
        put(UInt8(ascii: "-"))
        text(date.day, zeroPaddedTo: 2)
        put(UInt8(ascii: "T"))
        text(secondOfDay / 3600, zeroPaddedTo: 2)
        put(UInt8(ascii: ":"))
        text(secondOfDay / 60 % 60, zeroPaddedTo: 2)
        put(UInt8(ascii: ":"))
        text(secondOfDay % 60, zeroPaddedTo: 2)
        put(UInt8(ascii: "."))
        text(milliseconds, zeroPaddedTo: 3)
        put(UInt8(ascii: "Z"))
    }

    /// Pads the text written since `start` (a `count` taken before it) with spaces to `width`
    /// bytes, on the right or (for `left`) on the left; text already as wide gets one space.
    @_noAllocation
    public mutating func pad(from start: Int, to width: Int, left: Bool = false) {
        precondition(start >= 0 && start <= count)
        let written = count - start
        guard written < width else { return ascii(" ") }
        let spaces = width - written
        guard reserve(spaces) else { return }
        if left {
            var index = count - 1
            while index >= start {
                storage[index + spaces] = storage[index]
                index -= 1
            }
            for index in start..<(start + spaces) { storage[index] = UInt8(ascii: " ") }
            count += spaces
        } else {
            for _ in 0..<spaces { put(UInt8(ascii: " ")) }
        }
    }

    /// Two hex digits a byte, lower case unless `upper`.
    @_noAllocation
    public mutating func hex(_ bytes: UnsafeRawBufferPointer, upper: Bool = false) {
        guard reserve(bytes.count * 2) else { return }
        for byte in bytes {
            put(JSONWriter.hexDigit(byte >> 4, upper: upper))
            put(JSONWriter.hexDigit(byte & 0x0F, upper: upper))
        }
    }

    // MARK: Locus values

    /// A beacon UUID in its canonical upper-case form (as Core Location's `uuidString`), quoted.
    @_noAllocation
    public mutating func string(_ key: StaticString, _ value: BeaconUUID) {
        self.key(key)
        string(value)
    }

    @_noAllocation
    public mutating func string(_ value: BeaconUUID) {
        separate()
        guard reserve(38) else { return }
        put(UInt8(ascii: "\""))
        uuidText(value)
        put(UInt8(ascii: "\""))
    }

    /// A beacon UUID unquoted: E2C56DB5-DFFB-48D2-B060-D0F5A71096E0.
    @_noAllocation
    public mutating func text(_ value: BeaconUUID) {
        guard reserve(36) else { return }
        uuidText(value)
    }

    /// A duration as a config writes it: "unbounded", "5min", "10s", "1500ms".
    @_noAllocation
    public mutating func text(milliseconds: Int64) {
        if milliseconds == Int64.max { return ascii("unbounded") }
        if milliseconds % 60_000 == 0 && milliseconds >= 60_000 {
            text(milliseconds / 60_000)
            ascii("min")
        } else if milliseconds % 1_000 == 0 && milliseconds >= 1_000 {
            text(milliseconds / 1_000)
            ascii("s")
        } else {
            text(milliseconds)
            ascii("ms")
        }
    }

    /// One line rendered into a String, through a writer of its own that grows until the line
    /// fits (allocates: for the callers that need a String, never on a hot path).
    public static func rendering(capacity: Int = 1024, _ body: (inout JSONWriter) -> Void) -> String {
        var size = capacity
        while true {
            var line = JSONWriter(capacity: size)
            body(&line)
            if !line.overflowed { return line.string }
            size *= 4
        }
    }

    /// A string value of two hex digits a byte: "0215e2c5...".
    @_noAllocation
    public mutating func hexString(_ bytes: UnsafeRawBufferPointer, upper: Bool = false) {
        separate()
        guard reserve(bytes.count * 2 + 2) else { return }
        put(UInt8(ascii: "\""))
        hex(bytes, upper: upper)
        put(UInt8(ascii: "\""))
    }

    @_noAllocation
    public mutating func hexString(_ key: StaticString, _ bytes: UnsafeRawBufferPointer, upper: Bool = false) {
        self.key(key)
        hexString(bytes, upper: upper)
    }

    @_noAllocation
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard reserve(bytes.count) else { return }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        UnsafeMutableRawPointer(storage.baseAddress! + count).copyMemory(from: base, byteCount: bytes.count)
        count += bytes.count
    }

    // MARK: internals

    @inline(__always)
    private mutating func ascii(_ value: StaticString) { text(value) }

    /// The nesting state follows the calls even when the line has overflowed, so a renderer's
    /// begin/end pairs stay checked.
    private mutating func open(_ bracket: UInt8) {
        precondition(depth < JSONWriter.maximumDepth, "JSON nested deeper than \(JSONWriter.maximumDepth)")
        hasMember &= ~(1 << UInt32(depth))
        depth += 1
        guard reserve(1) else { return }
        put(bracket)
    }

    private mutating func close(_ bracket: UInt8) {
        precondition(depth > 0 && !afterKey, "a closing bracket without its opening one, or after a key")
        depth -= 1
        guard reserve(1) else { return }
        put(bracket)
    }

    /// The comma before a member or element, unless it is the first of its level or follows a key.
    @inline(__always)
    private mutating func separate() {
        if afterKey {
            afterKey = false
            return
        }
        guard depth > 0 else { return }
        let bit: UInt32 = 1 << UInt32(depth - 1)
        if hasMember & bit != 0 {
            guard reserve(1) else { return }
            put(UInt8(ascii: ","))
        } else {
            hasMember |= bit
        }
    }

    /// Decimal digits of `value` (at least one), by comparison with powers of ten.
    @inline(__always)
    private static func digitCount(_ value: UInt64) -> Int {
        var count = 1
        var bound: UInt64 = 10
        while value >= bound {
            count += 1
            // 10^19 <= value: 20 digits, and 10^20 would not fit a UInt64.
            if count == 20 { break }
            bound &*= 10
        }
        return count
    }

    /// 10^exponent for 0...18.
    @inline(__always)
    private static func integerPowerOfTen(_ exponent: Int) -> UInt64 {
        var power: UInt64 = 1
        for _ in 0..<exponent { power &*= 10 }
        return power
    }

    /// 10^exponent for 0...17, exact (as repeated multiplication by 10 gives it).
    @inline(__always)
    private static func powerOfTen(_ exponent: Int) -> Double {
        switch exponent {
        case 0: return 1
        case 1: return 1e1
        case 2: return 1e2
        case 3: return 1e3
        case 4: return 1e4
        case 5: return 1e5
        case 6: return 1e6
        case 7: return 1e7
        case 8: return 1e8
        case 9: return 1e9
        case 10: return 1e10
        case 11: return 1e11
        case 12: return 1e12
        case 13: return 1e13
        case 14: return 1e14
        case 15: return 1e15
        case 16: return 1e16
        default: return 1e17
        }
    }

    /// `value` (0 <= value < 10^width) as exactly `width` digits; the caller has reserved them.
    @inline(__always)
    private mutating func fixedDigits(_ value: Int, _ width: Int) {
        digits(UInt64(truncatingIfNeeded: value), width: width)
    }

    /// `value` as exactly `width` decimal digits, zeros in front; the caller has reserved them.
    @inline(__always)
    private mutating func digits(_ value: UInt64, width: Int) {
        JSONWriter.digits(value, width: width, endingAt: storage.baseAddress! + count + width)
        count += width
    }

    /// `value` as exactly `width` decimal digits (the lowest ones, zeros in front) in the bytes
    /// just before `end`, two digits a step.
    @inline(__always)
    private static func digits(_ value: UInt64, width: Int, endingAt end: UnsafeMutablePointer<UInt8>) {
        let pairs = digitPairs
        var remaining = value
        var position = end
        var left = width
        while left >= 2 {
            let pair = Int(truncatingIfNeeded: remaining % 100)
            remaining /= 100
            position -= 2
            position[0] = pairs[2 * pair]
            position[1] = pairs[2 * pair + 1]
            left -= 2
        }
        if left == 1 {
            position -= 1
            position[0] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: remaining % 10)
        }
    }

    /// "00" "01" ... "99": the two digits of every number below 100.
    @inline(__always)
    private static var digitPairs: UnsafePointer<UInt8> {
        let table: StaticString = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
        return table.utf8Start
    }

    /// Room for `needed` more bytes; otherwise the line is marked overflowed and nothing is written.
    @inline(__always)
    private mutating func reserve(_ needed: Int) -> Bool {
        if !overflowed && storage.count - count >= needed { return true }
        overflowed = true
        return false
    }

    /// One byte; the caller has reserved room for it.
    @inline(__always)
    private mutating func put(_ byte: UInt8) {
        storage[count] = byte
        count += 1
    }

    /// The bytes `escaped` writes for `bytes` (what `string(bytes:)` writes between its quotes).
    static func escapedCount(_ bytes: UnsafeRawBufferPointer) -> Int {
        var total = 0
        for byte in bytes { total += escapedWidth(byte) }
        return total
    }

    @inline(__always)
    private static func escapedWidth(_ byte: UInt8) -> Int {
        guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { return 1 }
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"): return 2
        default: return 6
        }
    }

    /// Escapes what JSON requires; the caller has reserved `escapedCount` bytes: the quote, the backslash and control bytes (below 0x20, as
    /// \u00XX with upper-case digits).
    private mutating func escaped(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes { escaped(byte: byte) }
    }

    @inline(__always)
    private mutating func escaped(byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"):
            put(UInt8(ascii: "\\"))
            put(byte)
        case UInt8(ascii: "\n"): escape(UInt8(ascii: "n"))
        case UInt8(ascii: "\r"): escape(UInt8(ascii: "r"))
        case UInt8(ascii: "\t"): escape(UInt8(ascii: "t"))
        case 0..<0x20:
            put(UInt8(ascii: "\\"))
            put(UInt8(ascii: "u"))
            put(UInt8(ascii: "0"))
            put(UInt8(ascii: "0"))
            put(JSONWriter.hexDigit(byte >> 4, upper: true))
            put(JSONWriter.hexDigit(byte & 0x0F, upper: true))
        default:
            put(byte)
        }
    }

    /// The caller has reserved 36 bytes.
    @inline(__always)
    private mutating func uuidText(_ value: BeaconUUID) {
        for index in 0..<16 {
            if index == 4 || index == 6 || index == 8 || index == 10 { put(UInt8(ascii: "-")) }
            let byte = value.byte(index)
            put(JSONWriter.hexDigit(byte >> 4, upper: true))
            put(JSONWriter.hexDigit(byte & 0x0F, upper: true))
        }
    }

    private mutating func escape(_ letter: UInt8) {
        put(UInt8(ascii: "\\"))
        put(letter)
    }

    @inline(__always)
    private static func hexDigit(_ value: UInt8, upper: Bool) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") &+ value : (upper ? UInt8(ascii: "A") : UInt8(ascii: "a")) &+ (value &- 10)
    }
}

extension UTCTime {
    /// ISO 8601 with milliseconds, as gpsd prints TPV times: 2020-02-02T00:01:46.000Z (allocates;
    /// writers use `JSONWriter.text(_: UTCTime)`).
    public var iso8601: String { JSONWriter.rendering(capacity: 32) { $0.text(self) } }
}
