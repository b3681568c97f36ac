import AllocCounter
import Foundation
import LocusCore
import Testing
import TestSupport

@Suite struct JSONWriterTests {
    @Test func separatorsComeFromTheNesting() {
        var line = JSONWriter(capacity: 256)
        line.beginObject()
        line.string("class", "TPV")
        line.beginArray("list")
        line.integer(1)
        line.beginObject()
        line.null("a")
        line.boolean("b", false)
        line.endObject()
        line.string("x")
        line.endArray()
        line.beginObject("empty")
        line.endObject()
        line.endObject()
        let text = line.string
        #expect(text == #"{"class":"TPV","list":[1,{"a":null,"b":false},"x"],"empty":{}}"#)
        let overflowed = line.overflowed
        #expect(!overflowed)
    }

    @Test func stringsAreEscapedByByteAndParseBackWithFoundation() throws {
        let samples = ["plain", "quote \" and \\ backslash", "tab\tnew\nline\rcr", "\u{01}\u{1F}", "Zürich ⛵ 𝄞", ""]
        for sample in samples {
            var line = JSONWriter(capacity: 256)
            line.beginObject()
            line.string("s", sample)
            line.endObject()
            let decoded = try JSONSerialization.jsonObject(with: Data(line.string.utf8)) as? [String: String]
            let text = line.string
            #expect(decoded?["s"] == sample, "\(text)")
        }
        var line = JSONWriter(capacity: 64)
        line.string("\u{1F}")
        let text = line.string
        #expect(text == #""\u001F""#)
    }

    @Test func numbersAreFormattedFromIntegers() {
        func render(_ value: Double, _ decimals: Int) -> String {
            var line = JSONWriter(capacity: 64)
            line.number(value, decimals: decimals)
            return line.string
        }
        #expect(render(44.0687833, 9) == "44.068783300")
        #expect(render(-121.31406905, 9) == "-121.314069050")
        #expect(render(-0.0000000001, 9) == "0.000000000")
        #expect(render(-0.5, 0) == "-1")
        #expect(render(0.25, 1) == "0.3")
        #expect(render(1133.3, 4) == "1133.3000")
        #expect(render(.nan, 2) == "null")
        #expect(render(.infinity, 2) == "null")
        #expect(render(1e30, 2) == "null")
        var line = JSONWriter(capacity: 64)
        line.fixed(units: -441234, scale: 4)
        line.text(" ")
        line.fixed(units: 7, scale: 3)
        line.text(" ")
        line.integer(Int64.min)
        line.text(" ")
        line.integer(UInt64.max)
        let text = line.string
        #expect(text == "-44.1234 0.007 -9223372036854775808 18446744073709551615")
    }

    /// Digit counting by comparison, digit pairs and the point: every power of ten and its
    /// neighbours, both signs, every scale, against Swift's own integer printing.
    @Test func integersAndFixedPointMatchIntegerPrinting() {
        var values: [UInt64] = [0, UInt64.max, UInt64.max - 1]
        var power: UInt64 = 1
        for _ in 0..<20 {
            values += [power - 1, power, power + 1]
            if power > UInt64.max / 10 { break }
            power *= 10
        }
        var line = JSONWriter(capacity: 64)
        for value in values {
            line.reset()
            line.integer(value)
            var text = line.string
            #expect(text == "\(value)")
            guard value <= UInt64(Int64.max) else { continue }
            for sign in [Int64(1), -1] {
                let units = sign * Int64(value)
                line.reset()
                line.integer(units)
                text = line.string
                #expect(text == "\(units)")
                for scale in 0...18 {
                    line.reset()
                    line.fixed(units: units, scale: scale)
                    text = line.string
                    let digits = String(value)
                    let padded = String(repeating: "0", count: max(0, scale + 1 - digits.count)) + digits
                    let whole = padded.dropLast(scale)
                    let expected = (units < 0 ? "-" : "") + whole + (scale > 0 ? "." + padded.suffix(scale) : "")
                    #expect(text == expected, "\(units) scale \(scale)")
                }
            }
        }
        line.reset()
        line.text(7, zeroPaddedTo: 3)
        line.text(" ")
        line.text(12345, zeroPaddedTo: 3)
        let padded = line.string
        #expect(padded == "007 12345")
    }

    @Test func timesReadAsGpsdPrintsThem() {
        var line = JSONWriter(capacity: 128)
        line.time(UTCTime(nanoseconds: 1_580_601_706_000_000_000))
        line.text(" ")
        line.text(UTCTime(nanoseconds: -1_000_000))
        line.text(" ")
        line.text(UTCTime(seconds: 253_402_300_800))     // year 10000: past the four-digit path
        line.text(" ")
        line.text(UTCTime(seconds: -62_167_219_200))     // 0000-01-01
        let text = line.string
        #expect(text == #""2020-02-02T00:01:46.000Z" 1969-12-31T23:59:59.999Z 10000-01-01T00:00:00.000Z 0000-01-01T00:00:00.000Z"#)
    }

    @Test func paddingAlignsText() {
        var line = JSONWriter(capacity: 64)
        var start = line.count
        line.text(Int64(42))
        line.pad(from: start, to: 5, left: true)
        line.text("|")
        start = line.count
        line.text("ab")
        line.pad(from: start, to: 4)
        line.text("|")
        start = line.count
        line.text("toolong")
        line.pad(from: start, to: 3)
        line.text("|")
        let text = line.string
        #expect(text == "   42|ab  |toolong |")
    }

    @Test func aLineThatDoesNotFitIsCutAtAValueAndMarked() {
        var line = JSONWriter(capacity: 16)
        line.beginObject()
        line.string("name", "a long value that does not fit")
        let overflowed = line.overflowed
        #expect(overflowed)
        let text = line.string
        #expect(text == #"{"name":"#)
        line.reset()
        line.beginObject()
        line.endObject()
        let again = line.string
        let overflowedAgain = line.overflowed
        #expect(!overflowedAgain && again == "{}")
    }

    @Test func aLineAllocatesNothing() {
        var line = JSONWriter(capacity: 1024)
        let name = FixedName("harbour")!
        let value = "quote \" and ⛵"
        let count = allocations {
            for _ in 0..<100 {
                line.reset()
                line.beginObject()
                line.string("monitor", name)
                line.string("text", value)
                line.number("lat", 53.5396, decimals: 9)
                line.time("date", UTCTime(nanoseconds: 1_534_758_466_250_000_000))
                line.beginArray("diagnostics")
                line.string("accuracyLimited" as StaticString)
                line.endArray()
                line.endObject()
                line.newline()
            }
        }
        #expect(count == 0)
        let text = line.string
        #expect(text.hasPrefix(#"{"monitor":"harbour","text":"quote \" and ⛵","lat":53.539600000,"date":"2018-08-20T09:47:46.250Z""#))
    }

    /// Numbers round half away from zero exactly as `rounded(.toNearestOrAwayFromZero)` does
    /// (the writer may not call it: its rule type fails the allocation check in optimized host
    /// builds): random values, halves and their neighbours, against a formatting of its own here.
    /// The standard library's rounding, digits by String interpolation.
    static func reference(_ value: Double, decimals: Int) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (abs(value) * scale).rounded(.toNearestOrAwayFromZero)
        guard scaled < 9.0e18 else { return "null" }   // beyond 18 digits, as the writer documents
        let units = Int64(scaled)
        let divisor = Int64(scale)
        var text = value < 0 && units != 0 ? "-" : ""
        text += "\(units / divisor)"
        guard decimals > 0 else { return text }
        let fraction = "\(units % divisor)"
        return text + "." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }

    @Test func numbersRoundAsTheStandardLibraryRoundsHalfAwayFromZero() {
        var random = SplitMix64(state: 0x4A1F)
        var line = JSONWriter(capacity: 64)
        for round in 0..<100_000 {
            let decimals = random.below(10)
            var value = random.uniform(-1, 1) * Double(1 << random.below(40))
            if round % 3 == 0 { value = (Double(random.below(2_000)) - 1_000 + 0.5) / Double([1, 10, 100, 1000][decimals % 4]) }
            if round % 7 == 0 { value = value.nextUp }
            if round % 11 == 0 { value = value.nextDown }
            line.reset()
            line.number(value, decimals: decimals)
            let ours = line.string
            #expect(ours == Self.reference(value, decimals: decimals), "\(value) with \(decimals) decimals")
        }
    }

    @Test func uuidsAndHexStringsAreValuesWithTheirSeparators() {
        var random = SplitMix64(state: 0x0001_D)
        var line = JSONWriter(capacity: 256)
        for _ in 0..<1_000 {
            let uuid = BeaconUUID(high: random.next(), low: random.next())
            line.reset()
            line.string(uuid)
            let text = line.string
            #expect(text == "\"\(uuid.description)\"")
        }
        let bytes: [UInt8] = [0x02, 0x15, 0xAB, 0x0F]
        line.reset()
        line.beginObject()
        bytes.withUnsafeBytes { line.hexString("data", $0) }
        bytes.withUnsafeBytes { line.hexString("upper", $0, upper: true) }
        line.string("uuid", BeaconUUID(high: 0xE2C5_6DB5_DFFB_48D2, low: 0xB060_D0F5_A710_96E0))
        line.beginArray("list")
        [UInt8]().withUnsafeBytes { line.hexString($0) }
        bytes.withUnsafeBytes { line.hexString($0) }
        line.endArray()
        line.endObject()
        let text = line.string
        #expect(text == #"{"data":"0215ab0f","upper":"0215AB0F","uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","list":["","0215ab0f"]}"#)
        let count = allocations {
            for _ in 0..<100 {
                line.reset()
                bytes.withUnsafeBytes { line.hexString("data", $0) }
                line.string("uuid", BeaconUUID(high: 1, low: 2))
            }
        }
        #expect(count == 0)
    }

    /// A string joined from pieces: separated as one value, each piece escaped, and taken out
    /// whole when it does not fit, as any other value would be.
    @Test func aStringWrittenInPiecesIsOneValue() throws {
        var line = JSONWriter(capacity: 256)
        let prefix: [UInt8] = Array(#"site "7"\gw"#.utf8)
        line.beginObject()
        line.integer("n", 1)
        prefix.withUnsafeBytes { prefix in
            line.beginString("topic")
            line.stringPart(prefix)
            line.stringPart("/state/")
            line.stringPart(FixedName("harbour")!)
            line.stringPart(byte: UInt8(ascii: "/"))
            line.stringPart(byte: 0x01)
            line.endString()
        }
        line.beginArray("ids")
        line.beginString()
        line.stringPart("a")
        line.endString()
        line.beginString()
        line.endString()
        line.endArray()
        line.endObject()
        let text = line.string
        #expect(text == #"{"n":1,"topic":"site \"7\"\\gw/state/harbour/\u0001","ids":["a",""]}"#)
        let decoded = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        #expect(decoded?["topic"] as? String == "site \"7\"\\gw/state/harbour/\u{01}")

        var short = JSONWriter(capacity: 16)
        short.beginArray()
        short.string("ab")
        short.beginString()
        short.stringPart("0123456789")
        short.stringPart("0123456789")
        short.endString()
        let cut = short.string
        let overflowed = short.overflowed
        #expect(overflowed)
        #expect(cut == #"["ab","#)

        let count = allocations {
            for _ in 0..<100 {
                line.reset()
                line.beginString()
                prefix.withUnsafeBytes { line.stringPart($0) }
                line.stringPart("/status")
                line.stringPart(byte: UInt8(ascii: "x"))
                line.endString()
            }
        }
        #expect(count == 0)
    }
}
