import AllocCounter
import Testing
import TestSupport
@testable import LocusCore

/// The place index: built, opened, searched. The outside reference for reverse geocoding
/// (GeographicLib's geodesic over a whole GeoNames extract) is Scripts/test-geocoding; these tests
/// pin the structure: the k-d search against a brute force over the same places, the name search's
/// ranking and qualifiers, and the refusal of every damaged file.
@Suite struct PlaceIndexTests {
    static func place(_ name: String, _ latitude: Double, _ longitude: Double, population: UInt32 = 0, country: String = "DE",
                      admin1: String = "", alternates: [String] = [], site: Bool = false, id: UInt32 = 0) -> GazetteerPlace {
        var place = GazetteerPlace(name: Array(name.utf8), latitude: latitude, longitude: longitude)
        place.population = population
        place.country = site ? [] : Array(country.utf8)
        place.admin1Code = Array(admin1.utf8)
        place.alternateNames = alternates.map { Array($0.utf8) }
        place.isSite = site
        place.featureClass = site ? UInt8(ascii: "S") : UInt8(ascii: "P")
        place.geonameID = id
        place.timeZone = site ? [] : Array("Europe/Berlin".utf8)
        return place
    }

    static let sample: [GazetteerPlace] = [
        place("Bremerhaven", 53.55357, 8.57553, population: 118_610, admin1: "03", alternates: ["Wesermünde", "BRV"], id: 2_944_368),
        place("Bremen", 53.07516, 8.80777, population: 546_501, admin1: "03", id: 2_944_388),
        place("Hamburg", 53.57532, 10.01534, population: 1_845_229, admin1: "04", id: 2_911_298),
        place("Paris", 48.85341, 2.3488, population: 2_138_551, country: "FR", admin1: "11", id: 2_988_507),
        place("Paris", 33.66094, -95.55551, population: 24_782, country: "US", admin1: "TX", id: 4_717_560),
        place("Paris", 38.20980, -84.25299, population: 9_846, country: "US", admin1: "KY", id: 4_303_602),
        place("Dock 3", 53.5400, 8.5800, alternates: ["Container dock"], site: true),
        place("Yard gate", 53.5380, 8.5830, site: true),
    ]

    static func build(_ places: [GazetteerPlace], admin1: [(String, String)] = [("DE.03", "Bremen"), ("DE.04", "Hamburg"),
                                                                                ("FR.11", "Île-de-France"), ("US.TX", "Texas")])
        -> [UInt8] {
        var builder = PlaceIndexBuilder()
        for place in places { builder.add(place) }
        for (code, name) in admin1 { builder.addAdmin1(code: Array(code.utf8), name: Array(name.utf8)) }
        return builder.build(description: Array("test".utf8)).bytes
    }

    static func withIndex<T>(_ bytes: [UInt8], _ body: (PlaceIndex) throws -> T) throws -> T {
        try bytes.withUnsafeBytes { raw in try body(try PlaceIndex(bytes: raw)) }
    }

    @Test func reverseNamesTheNearestPlaceWithDistanceAndBearing() throws {
        try Self.withIndex(Self.build(Self.sample)) { index in
            #expect(index.placeCount == 8 && index.siteStart == 6)
            let point = GeoPoint(latitude: 53.5396, longitude: 8.5809)
            let populated = try #require(index.nearest(to: point, scope: .populated))
            #expect(String(decoding: index.name(of: index.record(populated.place)), as: UTF8.self) == "Bremerhaven")
            let exact = Geodesy.inverseSolution(53.55357, 8.57553, 53.5396, 8.5809)
            #expect(abs(populated.distanceM - exact.distanceM) < 1e-6)
            #expect(abs(populated.bearingDeg - (exact.azimuth1Deg + 360).truncatingRemainder(dividingBy: 360)) < 1e-9)
            var line = JSONWriter(capacity: 256)
            PlaceText.write(populated, in: index, into: &line)
            #expect(line.string == "1.6 km S of Bremerhaven, Bremen, DE")
            // The site's own places are nearer, and searchable alone.
            let any = try #require(index.nearest(to: point))
            #expect(index.record(any.place).isSite)
            line.reset()
            PlaceText.write(any, in: index, into: &line)
            #expect(line.string == "74 m SE of Dock 3")
            #expect(index.nearest(to: point, within: 50) == nil)
            let site = try #require(index.nearest(to: GeoPoint(latitude: 53.07516, longitude: 8.80777), scope: .site))
            #expect(String(decoding: index.name(of: index.record(site.place)), as: UTF8.self) == "Yard gate")
        }
    }

    /// Against every place's exact geodesic, on a random gazetteer dense enough for near-ties.
    @Test func reverseAgreesWithBruteForce() throws {
        var random = SplitMix64(seed: 22)
        var places: [GazetteerPlace] = []
        for number in 0..<3_000 {
            // Clusters around a few cities, and the rest anywhere (poles and the antimeridian included).
            let cluster = random.below(4)
            let latitude = cluster == 3 ? random.uniform(-90, 90) : [53.5, -33.9, 64.1][cluster] + random.uniform(-0.3, 0.3)
            let longitude = cluster == 3 ? random.uniform(-180, 180) : [8.6, 151.2, -179.9][cluster] + random.uniform(-0.3, 0.3)
            places.append(Self.place("p\(number)", latitude, longitude > 180 ? longitude - 360 : (longitude < -180 ? longitude + 360 : longitude),
                                     population: UInt32(random.below(100_000))))
        }
        let bytes = Self.build(places)
        try Self.withIndex(bytes) { index in
            for _ in 0..<500 {
                let near = random.chance(70)
                let base = places[random.below(places.count)]
                let point = near
                    ? GeoPoint(latitude: min(90, max(-90, base.latitude + random.uniform(-0.05, 0.05))), longitude: base.longitude + random.uniform(-0.05, 0.05))
                    : GeoPoint(latitude: random.uniform(-90, 90), longitude: random.uniform(-180, 180))
                let found = try #require(index.nearest(to: point))
                var best = Double.infinity
                for place in 0..<index.placeCount {
                    let record = index.record(place)
                    best = min(best, Geodesy.distanceM(record.latitude, record.longitude, point.latitude, point.longitude))
                }
                #expect(abs(found.distanceM - best) <= 1e-9 * max(1, best), "point \(point.latitude),\(point.longitude)")
            }
        }
    }

    @Test func forwardFindsNamesAndAlternatesRankedByPopulation() throws {
        try Self.withIndex(Self.build(Self.sample)) { index in
            let search = PlaceNameSearch()
            func names(_ query: String, near: GeoPoint? = nil) -> [String] {
                var results = [PlaceCandidate](repeating: PlaceCandidate(place: 0, distanceM: 0), count: 10)
                var text = query
                let found = text.withUTF8 { bytes in
                    results.withUnsafeMutableBufferPointer { search.search(UnsafeRawBufferPointer(bytes), in: index, near: near, into: $0) }
                }
                return results.prefix(found.written).map { candidate in
                    let record = index.record(candidate.place)
                    return String(decoding: index.name(of: record), as: UTF8.self) + "/" + String(decoding: [record.countryBytes.0, record.countryBytes.1], as: UTF8.self)
                }
            }
            #expect(names("Bremerhaven") == ["Bremerhaven/DE"])
            #expect(names("  WESERMUNDE ") == ["Bremerhaven/DE"])
            #expect(names("wesermünde") == ["Bremerhaven/DE"])
            #expect(names("Paris") == ["Paris/FR", "Paris/US", "Paris/US"])
            #expect(names("Paris, US") == ["Paris/US", "Paris/US"])
            #expect(names("paris, texas") == ["Paris/US"])
            #expect(names("Paris, ile-de-france, fr") == ["Paris/FR"])
            #expect(names("Paris, DE").isEmpty)
            #expect(names("container DOCK") == ["Dock 3/  "])
            #expect(names("Atlantis").isEmpty)
            var overQualified = "Paris, Texas, US, Texas, US, US"
            let refused = overQualified.withUTF8 { bytes in
                search.search(UnsafeRawBufferPointer(bytes), in: index, into: UnsafeMutableBufferPointer(start: nil, count: 0))
            }
            #expect(refused.problem == .tooManyQualifiers && refused.total == 0)
        }
    }

    @Test func siteFileHeaderMayFollowComments() throws {
        func read(_ text: String) -> (names: [String], problem: GazetteerFile.Problem?) {
            var names: [String] = []
            let problem = GazetteerFile.sitePlaces.read(Array(text.utf8), place: { names.append(String(decoding: $0.name, as: UTF8.self)) },
                                                        admin1: { _, _ in })
            return (names, problem)
        }
        let header = "name\tlatitude\tlongitude\taliases\n"
        let rows = "Dock 3\t53.54\t8.58\tContainer dock\nYard gate\t53.538\t8.583\n"
        #expect(read(header + rows).names == ["Dock 3", "Yard gate"])
        #expect(read("# the port\n\n" + header + rows).names == ["Dock 3", "Yard gate"])
        #expect(read("# the port\n" + header + rows).problem == nil)
        // Only the first row is a header: "name" further down is a place's row, and a bad one.
        #expect(read(rows + header).problem == GazetteerFile.Problem(line: 3, column: 6, message: "latitude 'latitude' is not a number within -90...90"))
        #expect(GazetteerFile.kind(ofRow: Array("name\tlatitude\tlongitude\taliases".utf8)) == .sitePlaces)
    }

    @Test func everyDamagedFileIsRefused() throws {
        let bytes = Self.build(Self.sample)
        func refusal(_ damaged: [UInt8]) -> PlaceIndexError? {
            damaged.withUnsafeBytes { raw -> PlaceIndexError? in
                do throws(PlaceIndexError) { _ = try PlaceIndex(bytes: raw); return nil } catch { return error }
            }
        }
        #expect(refusal(bytes) == nil)
        #expect(refusal(Array("geonameid\tname\n".utf8)) == .foreign)
        #expect(refusal([]) == .foreign)
        #expect(refusal(Array(bytes.prefix(50))) == .truncated(size: 50, expected: PlaceIndexLayout.headerSize))
        #expect(refusal(Array(bytes.dropLast(7))) == .truncated(size: bytes.count - 7, expected: bytes.count))
        #expect(refusal(bytes + [0]) == .trailingBytes(size: bytes.count + 1, expected: bytes.count))
        var newer = bytes
        newer[PlaceIndexLayout.versionOffset] = 2
        #expect(refusal(newer) == .unsupportedVersion(2))
        // Any flipped bit in the body.
        var random = SplitMix64(seed: 5)
        for _ in 0..<200 {
            var flipped = bytes
            let offset = PlaceIndexLayout.headerSize + random.below(bytes.count - PlaceIndexLayout.headerSize)
            flipped[offset] ^= UInt8(1 << random.below(8))
            #expect(refusal(flipped) == .checksum)
        }
        // A header that points outside the file, with a checksum that matches (a crafted file).
        var crafted = bytes
        crafted.store(UInt32(1_000_000), at: PlaceIndexLayout.placeCountOffset)
        guard case .malformed? = refusal(crafted) else { Issue.record("a place count beyond the file was accepted"); return }
    }

    /// Lookups after the index is open allocate nothing: they may run on every fix.
    @Test func lookupsAllocateNothing() throws {
        try Self.withIndex(Self.build(Self.sample)) { index in
            let search = PlaceNameSearch()
            let points = (0..<50).map { GeoPoint(latitude: 53 + Double($0) / 50, longitude: 8 + Double($0) / 25) }
            var results = [PlaceCandidate](repeating: PlaceCandidate(place: 0, distanceM: 0), count: 8)
            var writer = JSONWriter(capacity: 1024)
            let query: StaticString = "Paris, US"
            var total = 0
            var counts: [Int] = []
            for _ in 0..<2 {
                counts.append(allocations {
                    results.withUnsafeMutableBufferPointer { buffer in
                        for position in 0..<points.count {
                            if let match = index.nearest(to: points[position]) {
                                writer.reset()
                                PlaceJSON.write(match, in: index, into: &writer)
                                total += writer.count
                            }
                            total += search.search(UnsafeRawBufferPointer(start: query.utf8Start, count: query.utf8CodeUnitCount),
                                                   in: index, near: points[position], into: buffer).total
                        }
                    }
                })
            }
            #expect(counts[1] == 0, "allocations per round: \(counts)")
            #expect(total > 0)
        }
    }
}
