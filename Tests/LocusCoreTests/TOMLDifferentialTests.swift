import Testing
import LocusCore
import CTOML
#if canImport(Glibc)
import Glibc
#endif

private enum DiffOutcome: Equatable, CustomStringConvertible {
    case accepted(String)
    case rejected(String)
    var description: String {
        switch self {
        case .accepted(let c): return "accepted \(c)"
        case .rejected(let m): return "rejected: \(m)"
        }
    }
}

private func diffEscape<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
    var text = "\""
    for byte in bytes {
        if byte >= 0x20 && byte < 0x7F && byte != 0x22 && byte != 0x5C {
            text.unicodeScalars.append(Unicode.Scalar(byte))
        } else {
            let digits = Array("0123456789abcdef".unicodeScalars)
            text += "\\x"
            text.unicodeScalars.append(digits[Int(byte >> 4)])
            text.unicodeScalars.append(digits[Int(byte & 0xF)])
        }
    }
    return text + "\""
}

private func diffFloat(_ value: Double) -> String {
    value.isNaN ? "f:nan" : "f:\(value)/\(String(value.bitPattern, radix: 16))"
}

private func diffJoinTable(_ parts: [([UInt8], String)]) -> String {
    let sorted = parts.sorted { $0.0.lexicographicallyPrecedes($1.0) }
    return "{" + sorted.map { diffEscape($0.0) + "=" + $0.1 }.joined(separator: ",") + "}"
}

private func oursCanonical(_ value: LocusCore.TOMLValue) -> String {
    switch value {
    case .string(let s): return "s:" + diffEscape(s.utf8)
    case .integer(let i): return "i:\(i)"
    case .float(let f): return diffFloat(f)
    case .boolean(let b): return b ? "b:true" : "b:false"
    case .array(let a): return "[" + a.elements.map(oursCanonical).joined(separator: ",") + "]"
    case .table(let t): return oursCanonical(t)
    }
}

private func oursCanonical(_ table: LocusCore.TOMLTable) -> String {
    diffJoinTable(table.entries.map { (Array($0.key.utf8), oursCanonical($0.value)) })
}

private func oursOutcome(_ bytes: [UInt8]) -> DiffOutcome {
    do {
        let document = try TOMLParser.parse(bytes)
        return .accepted(oursCanonical(document.root))
    } catch {
        return .rejected(error.description)
    }
}

private func cBytes(_ pointer: UnsafePointer<CChar>) -> [UInt8] {
    Array(UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer)))
}

/// toml++ through TOMLKit's C shim, fed the raw bytes (TOMLKit's `TOMLTable(string:)` would
/// repair invalid UTF-8 before toml++ saw it).
private struct TomlppReader {
    var sawDateOrTime = false

    mutating func outcome(_ bytes: [UInt8]) -> DiffOutcome {
        let error = UnsafeMutablePointer<CTOMLParseError>.allocate(capacity: 1)
        defer { error.deallocate() }
        let terminated = bytes + [0]
        let table = terminated.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { tableCreateFromString($0, error) }
        }
        guard let table else {
            let message = String(decoding: cBytes(error.pointee.description), as: UTF8.self)
            return .rejected("\(error.pointee.source.begin.line):\(error.pointee.source.begin.column): \(message)")
        }
        return .accepted(canonical(table: table))
    }

    mutating func canonical(table: OpaquePointer) -> String {
        let count = tableSize(table)
        if count == 0 { return "{}" }
        let keys = tableGetKeys(table)
        let values = tableGetValues(table)
        var parts: [([UInt8], String)] = []
        for index in 0..<count {
            parts.append((cBytes(keys[index]), canonical(node: values[index])))
        }
        return diffJoinTable(parts)
    }

    mutating func canonical(node: OpaquePointer) -> String {
        switch nodeType(node) {
        case .table: return canonical(table: nodeAsTable(node)!)
        case .array:
            let array = nodeAsArray(node)!
            var parts: [String] = []
            for index in 0..<arraySize(array) { parts.append(canonical(node: arrayGetNode(array, Int64(index)))) }
            return "[" + parts.joined(separator: ",") + "]"
        case .string: return "s:" + diffEscape(cBytes(nodeAsString(node)!))
        case .integer: return "i:\(nodeAsInt(node)!.pointee)"
        case .floatingPoint: return diffFloat(nodeAsDouble(node)!.pointee)
        case .boolean: return nodeAsBool(node)!.pointee ? "b:true" : "b:false"
        default:
            sawDateOrTime = true
            return "date"
        }
    }
}

@Test func tomlDifferentialProbe() {
    var probes: [(String, [UInt8])] = [
        ("crlf ml", Array("a = \"\"\"x\r\ny\"\"\"\r\n".utf8)),
        ("crlf mll", Array("a = '''x\r\ny'''\r\n".utf8)),
        ("neg zero", Array("a = -0.0\nb = +0.0\nc = -0\nd=-nan\ne=nan\n".utf8)),
        ("tiny", Array("a = 1e-400\n".utf8)),
        ("subnormal", Array("a = 5e-324\n".utf8)),
        ("huge", Array("a = 1e400\n".utf8)),
        ("c1", Array("a = \"\u{85}\u{9F}\"\n".utf8)),
        ("implicit via dotted", Array("[a.b.c]\n[a]\nb.d = 1\n".utf8)),
        ("header through dotted", Array("[a]\nb.c = 1\n[a.b.d]\n".utf8)),
        ("hex max", Array("a = 0x7FFFFFFFFFFFFFFF\n".utf8)),
        ("hex over", Array("a = 0x8000000000000000\n".utf8)),
        ("bom", [0xEF, 0xBB, 0xBF] + Array("a = 1\n".utf8)),
        ("nfc keys", Array("\"\u{E9}\" = 1\n\"e\u{301}\" = 2\n".utf8)),
        ("ml in inline", Array("a = { b = \"\"\"x\ny\"\"\" }\n".utf8)),
        ("arr nl in inline", Array("a = { b = [1,\n2] }\n".utf8)),
        ("nul escape", Array("a = \"x\\u0000y\"\n".utf8)),
        ("overlong", Array("a = \"".utf8) + [0xC0, 0xAF] + Array("\"\n".utf8)),
        ("surrogate", Array("a = \"".utf8) + [0xED, 0xA0, 0x80] + Array("\"\n".utf8)),
        ("ff in comment", Array("# ".utf8) + [0xFF] + Array("\na=1\n".utf8)),
        ("date", Array("a = 1979-05-27\n".utf8)),
    ]
    for n in [254, 255, 256, 257] {
        probes.append(("arr\(n) scalar", Array(("a = " + String(repeating: "[", count: n) + "1" + String(repeating: "]", count: n) + "\n").utf8)))
        probes.append(("arr\(n) empty", Array(("a = " + String(repeating: "[", count: n) + String(repeating: "]", count: n) + "\n").utf8)))
        probes.append(("tbl\(n) scalar", Array(("a = " + String(repeating: "{b = ", count: n) + "1" + String(repeating: "}", count: n) + "\n").utf8)))
        probes.append(("tbl\(n) empty", Array(("a = " + String(repeating: "{b = ", count: n - 1) + "{}" + String(repeating: "}", count: n - 1) + "\n").utf8)))
    }
    var reader = TomlppReader()
    for (name, bytes) in probes {
        let o = oursOutcome(bytes)
        let t = reader.outcome(bytes)
        print("PROBE \(name)\n  ours: \(String(describing: o).prefix(200))\n  t++ : \(String(describing: t).prefix(200))")
    }
}
