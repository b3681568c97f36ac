import AllocCounter
import LocusCore
import Testing

/// The byte-level reading of flat `locate` requests against the full decoder: where it answers,
/// it answers what the full decoder does; every other line it leaves to the full decoder.
@Suite struct FlatRequestTests {
    static func flat(_ line: String) -> (id: Int64?, request: ControlRequest)? {
        Array(line.utf8).withUnsafeBytes { FlatRequest.decode($0) }
    }

    static func locate(_ request: ControlRequest) -> (AccuracyTier?, Int64, Int64)? {
        guard case .locate(let accuracy, let maxAgeMs, let timeoutMs) = request else { return nil }
        return (accuracy, maxAgeMs, timeoutMs)
    }

    @Test func whereItAnswersTheFullDecoderAgrees() throws {
        let lines = [
            #"{"op":"locate"}"#,
            #"{"id":7,"op":"locate"}"#,
            #" { "id" : 900719925474099 , "v":1, "op" : "locate" ,"accuracy":"best"} "#,
            #"{"accuracy":"threeKilometers","op":"locate","max_age_s":0,"timeout_s":600,"id":0}"#,
            #"{"op":"locate","max_age_s":2.5,"timeout_s":1.25,"accuracy":"nearestTenMeters"}"#,
            #"{"op":"locate","max_age_s":86400,"accuracy":"kilometer","id":12}"#,
            #"{"op":"locate","accuracy":"hundredMeters","timeout_s":30}"#,
        ]
        for line in lines {
            let fast = try #require(Self.flat(line), "\(line)")
            let (id, decoded) = ControlProtocol.decode(Array(line.utf8))
            guard case .success(let request) = decoded else {
                Issue.record("the full decoder refuses \(line)")
                continue
            }
            #expect(fast.id == id, "\(line)")
            let a = try #require(Self.locate(fast.request)), b = try #require(Self.locate(request))
            #expect(a.0 == b.0 && a.1 == b.1 && a.2 == b.2, "\(line): \(a) vs \(b)")
        }
    }

    @Test func everythingElseGoesToTheFullDecoder() {
        let lines = [
            "", "{}", "[]", #"{"op":"status"}"#, #"{"op":"updates","accuracy":"best"}"#,
            #"{"op":"locate","accuracy":"walking"}"#, #"{"op":"locate","timeout_s":0}"#, #"{"op":"locate","timeout_s":601}"#,
            #"{"op":"locate","max_age_s":-1}"#, #"{"op":"locate","id":-1}"#, #"{"op":"locate","id":1.5}"#,
            #"{"op":"locate","id":01}"#, #"{"op":"locate","v":2}"#, #"{"op":"locate","op":"locate"}"#,
            #"{"op":"locate","extra":1}"#, #"{"op":"loc\u0061te"}"#, #"{"op":"locate","timeout_s":1e1}"#,
            #"{"op":"locate","settings":{}}"#, #"{"op":"locate"} x"#, #"{"op":"locate""#, #"{"op":"locate",}"#,
            #"{"op":"locate","accuracy":null}"#, #"{"op":"locate","timeout_s":"30"}"#, #"{"id":7}"#,
            #"{"op":"locate","timeout_s":1.0000000000000001}"#, #"{"op":"locate","id":9007199254740992}"#,
        ]
        for line in lines { #expect(Self.flat(line) == nil, "\(line)") }
    }

    @Test func readingAllocatesNothing() {
        let line = Array(#"{"id":41,"op":"locate","accuracy":"hundredMeters","max_age_s":12.5,"timeout_s":20}"#.utf8)
        var found = 0
        line.withUnsafeBytes { bytes in
            let count = allocations { if FlatRequest.decode(bytes) != nil { found += 1 } }
            #expect(count == 0)
        }
        #expect(found == 1)
    }
}
