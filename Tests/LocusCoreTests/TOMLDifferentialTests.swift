import Testing
import LocusCore
import TOMLKit
import CTOML

@Test func tomlDifferentialProbe() {
    let bytes: [UInt8] = Array("a = 1\n".utf8) + [0]
    let err = UnsafeMutablePointer<CTOMLParseError>.allocate(capacity: 1)
    let t = bytes.withUnsafeBufferPointer { buf in
        buf.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buf.count) { tableCreateFromString($0, err) }
    }
    #expect(t != nil)
}
