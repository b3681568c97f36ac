import AllocCounter
import Foundation
import Testing
@testable import LocusCore
import TestSupport

/// Geodesy's draws from the shared generator (TestSupport), so every run tests the same pairs.
extension SplitMix64 {
    /// Log-uniform in [low, high].
    mutating func logUniform(_ low: Double, _ high: Double) -> Double { exp(uniform(log(low), log(high))) }

    /// A latitude uniform over the sphere's area.
    mutating func latitude() -> Double { asin(uniform(-1, 1)) * 180 / .pi }

    mutating func longitude() -> Double { uniform(-180, 180) }
}

/// The point `distance` metres from (lat, lon) at `bearing` degrees on a sphere of the Earth's
/// mean radius: a way to place points at roughly known distances, not a geodesic.
func sphericalDestination(_ lat: Double, _ lon: Double, bearing: Double, distance: Double) -> (lat: Double, lon: Double) {
    let delta = distance / 6_371_008.8
    let phi1 = lat * .pi / 180, theta = bearing * .pi / 180
    let sinPhi2 = sin(phi1) * cos(delta) + cos(phi1) * sin(delta) * cos(theta)
    let phi2 = asin(max(-1, min(1, sinPhi2)))
    let lambda = atan2(sin(theta) * sin(delta) * cos(phi1), cos(delta) - sin(phi1) * sinPhi2)
    var lon2 = lon + lambda * 180 / .pi
    if lon2 > 180 { lon2 -= 360 }
    if lon2 < -180 { lon2 += 360 }
    return (phi2 * 180 / .pi, lon2)
}

/// One row of Tests/Corpus/geo/inverse-sample.tsv: s12 from GeodSolve -i -p 6.
struct InversePair {
    var id: String
    var category: String
    var lat1: Double, lon1: Double, lat2: Double, lon2: Double
    var s12: Double
}

func inverseCorpus() throws -> [InversePair] {
    let text = try String(contentsOfFile: repositoryRoot + "/Tests/Corpus/geo/inverse-sample.tsv", encoding: .utf8)
    var pairs: [InversePair] = []
    for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.hasPrefix("id\t") {
        let fields = line.split(separator: "\t").map(String.init)
        guard fields.count >= 7, let lat1 = Double(fields[2]), let lon1 = Double(fields[3]),
              let lat2 = Double(fields[4]), let lon2 = Double(fields[5]), let s12 = Double(fields[6]) else { continue }
        pairs.append(InversePair(id: fields[0], category: fields[1], lat1: lat1, lon1: lon1, lat2: lat2, lon2: lon2, s12: s12))
    }
    return pairs
}

func classify(_ distance: Double, radius: Double, margin: Double) -> String {
    distance < radius - margin ? "inside" : distance > radius + margin ? "outside" : "near"
}

func name(_ side: Geodesy.Side) -> String {
    switch side {
    case .inside: "inside"
    case .outside: "outside"
    case .near: "near"
    }
}

@Suite struct GeodesyTests {
    @Test func everyCorpusPairWithinOneMillimetreOfGeodSolve() throws {
        let pairs = try inverseCorpus()
        #expect(pairs.count == 2000)
        var worst: [String: (error: Double, id: String)] = [:]
        for pair in pairs {
            let ours = Geodesy.distanceM(pair.lat1, pair.lon1, pair.lat2, pair.lon2)
            // GeodSolve printed 6 decimals: its own rounding is 0.5 µm.
            let error = abs(ours - pair.s12)
            #expect(error <= 0.001, "pair \(pair.id) (\(pair.category)): ours \(ours), GeodSolve \(pair.s12)")
            if error > (worst[pair.category]?.error ?? -1) { worst[pair.category] = (error, pair.id) }
            // Distance does not depend on the direction of travel.
            let reversed = Geodesy.distanceM(pair.lat2, pair.lon2, pair.lat1, pair.lon1)
            #expect(abs(reversed - ours) <= 1e-8 * max(1, ours))
        }
        let report = worst.keys.sorted().map { "\($0) \(worst[$0]!.error) m (pair \(worst[$0]!.id))" }.joined(separator: ", ")
        print("geodesy vs GeodSolve corpus, max |error| by category: \(report)")
    }

    @Test func specialCases() {
        #expect(Geodesy.distanceM(10, 20, 10, 20) == 0)
        #expect(Geodesy.distanceM(90, 0, 90, 123) == 0)
        #expect(Geodesy.distanceM(-90, 10, -90, -170) == 0)
        #expect(Geodesy.distanceM(0, -180, 0, 180) == 0)
        // Pole to pole along a meridian, and the quarter meridian: GeographicLib's values.
        #expect(abs(Geodesy.distanceM(-90, 0, 90, 0) - 20_003_931.458_625) < 1e-3)
        #expect(abs(Geodesy.distanceM(0, 0, 90, 0) - 10_001_965.729_313) < 1e-3)
        // Equatorial antipodes: the shortest path runs over a pole, not along the equator.
        #expect(abs(Geodesy.distanceM(0, 0, 0, 180) - 20_003_931.458_625) < 1e-3)
        // Along the equator, short of the antipode: a · Δλ.
        #expect(abs(Geodesy.distanceM(0, 0, 0, 90) - 6_378_137 * Double.pi / 2) < 1e-6)
        #expect(Geodesy.distanceM(91, 0, 0, 0).isNaN)
        #expect(Geodesy.distanceM(.nan, 0, 0, 0).isNaN)
        #expect(Geodesy.distanceM(0, .infinity, 0, 0).isNaN)
        // Longitudes outside ±180 are the same meridians.
        #expect(abs(Geodesy.distanceM(10, 370, 11, -345) - Geodesy.distanceM(10, 10, 11, 15)) < 1e-8)
        #expect(Geodesy.tiny == Double(sign: .plus, exponent: -511, significand: 1))
        #expect(Geodesy.tol2 == Double.ulpOfOne.squareRoot())
    }

    /// Azimuths where the answer is known: due north, east, south and west on the equator and at
    /// 60°N (a parallel is no geodesic: the line to a point due east leaves north of east and
    /// arrives south of it, GeographicLib's values), equatorial antipodes (over the pole, like
    /// GeographicLib: north from the start, arriving heading south), coincident points and poles
    /// (GeographicLib's conventions).
    @Test func azimuthSpecialCases() {
        func check(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double,
                   _ azimuth1: Double, _ azimuth2: Double, _ distance: Double? = nil, tolerance: Double = 0,
                   sourceLocation: Testing.SourceLocation = #_sourceLocation) {
            let solution = Geodesy.inverseSolution(lat1, lon1, lat2, lon2)
            let text = "\(lat1) \(lon1) \(lat2) \(lon2): \(solution)"
            #expect(abs(solution.azimuth1Deg - azimuth1) <= tolerance, "\(text)", sourceLocation: sourceLocation)
            #expect(abs(solution.azimuth2Deg - azimuth2) <= tolerance, "\(text)", sourceLocation: sourceLocation)
            #expect(abs(solution.distanceM - Geodesy.distanceM(lat1, lon1, lat2, lon2)) <= 2e-8, "\(text)", sourceLocation: sourceLocation)
            if let distance { #expect(abs(solution.distanceM - distance) < 1e-6, "\(text)", sourceLocation: sourceLocation) }
        }
        // The equator: meridians and the equator itself are geodesics.
        check(0, 0, 1, 0, 0, 0, 110_574.388_557_799)
        check(0, 0, 0, 1, 90, 90, 111_319.490_793_274)
        check(0, 0, -1, 0, 180, 180, 110_574.388_557_799)
        check(0, 0, 0, -1, -90, -90, 111_319.490_793_274)
        // 60°N.
        check(60, 0, 61, 0, 0, 0, 111_420.727_869_738)
        check(60, 0, 59, 0, 180, 180, 111_403.734_322_231)
        check(60, 0, 60, 1, 89.566_984_545_504_85, 90.433_015_454_495_15, 55_799.470_393_260, tolerance: 1e-12)
        check(60, 0, 60, -1, -89.566_984_545_504_85, -90.433_015_454_495_15, 55_799.470_393_260, tolerance: 1e-12)
        // Equatorial antipodes: over the north pole, arriving southbound; westward, -0 and -180.
        check(0, 0, 0, 180, 0, 180, 20_003_931.458_625_447)
        check(0, 0, 0, -180, 0, -180, 20_003_931.458_625_447)
        #expect(Geodesy.inverseSolution(0, 0, 0, -180).azimuth1Deg.sign == .minus)
        // Nearly antipodal on the equator: the line leaves the equator.
        check(0, 0, 0, 179.5, 55.966_495_140_158_64, 124.033_504_859_841_37, 19_980_861.908_890_963, tolerance: 1e-12)
        // A point to itself, and coincident points at the poles: GeographicLib's conventions.
        check(10, 20, 10, 20, 180, 180, 0)
        check(0, 0, 0, 0, 180, 180, 0)
        check(90, 0, 90, 123, 57, 180, 0)
        check(-90, 10, -90, -170, -180, 0, 0)
        // Pole to pole and pole to equator along meridians.
        check(-90, 0, 90, 0, 0, 0, 20_003_931.458_625_447)
        check(90, 0, 0, 0, 180, 180, 10_001_965.729_312_724)
        check(0, 0, 90, 0, 0, 0, 10_001_965.729_312_724)
        // Invalid input: every field NaN, like distanceM.
        for bad in [Geodesy.inverseSolution(91, 0, 0, 0), Geodesy.inverseSolution(0, .nan, 0, 0), Geodesy.inverseSolution(0, 0, 0, .infinity)] {
            #expect(bad.distanceM.isNaN && bad.azimuth1Deg.isNaN && bad.azimuth2Deg.isNaN)
        }
    }

    /// Reversing a line swaps its azimuths, each turned by 180°, on random pairs at every scale;
    /// the distance is distanceM's to nanometres.
    @Test func reversedLineHasReversedAzimuths() {
        var random = SplitMix64(seed: 31)
        for _ in 0..<5_000 {
            let lat = random.latitude(), lon = random.longitude()
            let other = sphericalDestination(lat, lon, bearing: random.uniform(0, 360), distance: random.logUniform(1, 19_000_000))
            let forward = Geodesy.inverseSolution(lat, lon, other.lat, other.lon)
            let backward = Geodesy.inverseSolution(other.lat, other.lon, lat, lon)
            #expect(azimuthDifference(backward.azimuth1Deg, forward.azimuth2Deg + 180) <= 1e-9, "\(lat) \(lon) \(other)")
            #expect(azimuthDifference(backward.azimuth2Deg, forward.azimuth1Deg + 180) <= 1e-9, "\(lat) \(lon) \(other)")
            #expect(abs(forward.azimuth1Deg) <= 180 && abs(forward.azimuth2Deg) <= 180)
            #expect(abs(forward.distanceM - Geodesy.distanceM(lat, lon, other.lat, other.lon)) <= 2e-8)
        }
    }

    /// The fast exact reduction agrees with libm's remainder bit for bit, ties included.
    @Test func reductionMatchesLibmRemainder() {
        var random = SplitMix64(seed: 1)
        var values: [Double] = [0, -0.0, 45, -45, 90, -90, 135, 180, -180, 225, 270, 315, 360, -360, 540, -540, 720,
                                1e-300, -1e-300, 89.999_999_999_999_99, 1e14, -1e14 + 0.5, 3e15, .greatestFiniteMagnitude]
        for _ in 0..<100_000 { values.append(random.uniform(-1_000, 1_000)) }
        for _ in 0..<10_000 { values.append(Double(Int(random.uniform(-40, 40))) * 45 + (random.unit() < 0.5 ? 0 : random.uniform(-1e-12, 1e-12))) }
        for value in values {
            for divisor in [90.0, 360] {
                let (r, n) = Geodesy.reduce(value, by: divisor)
                let expected = remainder(value, divisor)
                #expect(r.bitPattern == expected.bitPattern || (r == 0 && expected == 0), "\(value) rem \(divisor): \(r) vs \(expected)")
                if abs(value) < 1e15 {
                    #expect(Double(n) * divisor + r == value, "\(value) = \(n)·\(divisor) + \(r)")
                }
            }
        }
    }

    /// The inline hypot is libm's bit for bit: on the sines and cosines the solution normalizes,
    /// on random magnitudes across the whole range, and at the edges of the inline range.
    @Test func hypotMatchesLibm() {
        var random = SplitMix64(seed: 3)
        var pairs: [(Double, Double)] = [(0, 0), (0, -1), (-0.0, 1), (1, 1e-17), (3, 4), (0x1p511, 0x1p511), (0x1p511.nextUp, 1),
                                         (0x1p-459, 1), (0x1p-459.nextDown, 0x1p-459), (1e300, 1e300), (1e-300, 2e-300),
                                         (.infinity, 1), (.nan, 1), (1, .nan), (-.infinity, .nan), (Double.leastNonzeroMagnitude, 0)]
        for _ in 0..<300_000 {
            let angle = random.uniform(-4, 4), scale = random.uniform(0.5, 2)
            pairs.append((sin(angle) * scale, cos(angle) * scale))                            // normalizations
            pairs.append((random.uniform(-1, 1), random.uniform(-1, 1) * random.logUniform(1e-20, 1)))
            pairs.append((random.uniform(-1, 1) * random.logUniform(1e-300, 1e300), random.uniform(-1, 1) * random.logUniform(1e-300, 1e300)))
        }
        var mismatches = 0
        for (x, y) in pairs {
            let ours = Geodesy.libmHypot(x, y), libm = hypot(x, y)
            if !(ours.bitPattern == libm.bitPattern || (ours.isNaN && libm.isNaN)) {
                mismatches += 1
                if mismatches <= 10 { Issue.record("hypot(\(x), \(y)): \(ours) vs libm \(libm)") }
            }
        }
        #expect(mismatches == 0)
    }

    /// Nearly antipodal pairs are where Newton's method needs its bracket; every one must come
    /// back finite and no longer than half a meridian.
    @Test func nearlyAntipodalPairsConverge() {
        var random = SplitMix64(seed: 7)
        for _ in 0..<20_000 {
            let lat1 = random.uniform(-90, 90)
            let lat2 = -lat1 + random.uniform(-0.5, 0.5)
            let lon2 = 180 + random.uniform(-1, 1)
            let distance = Geodesy.distanceM(lat1, 0, max(-90, min(90, lat2)), lon2)
            #expect(distance.isFinite && distance > 19_000_000 && distance <= 20_003_931.458_63, "\(lat1) 0 \(lat2) \(lon2): \(distance)")
        }
    }

    /// c <= s <= c + c³/(23ρ²) + 1 µm for chords up to 1000 km, on the corpus and on random pairs
    /// at every scale from centimetres to 2000 km, including polar and antimeridian ones.
    @Test func chordBracketsTheGeodesicDistance() throws {
        var checked = 0
        var worstUse = 0.0 // largest (s - c) / (upper - c): how much of the bound is used
        func check(_ lat1: Double, _ lon1: Double, _ lat2: Double, _ lon2: Double, exact: Double) {
            let chord = Geodesy.approximateDistanceM(lat1, lon1, lat2, lon2)
            let bounds = Geodesy.distanceBounds(chordM: chord)
            #expect(bounds.lower <= exact, "\(lat1) \(lon1) \(lat2) \(lon2): chord \(chord) > \(exact)")
            #expect(exact <= bounds.upper, "\(lat1) \(lon1) \(lat2) \(lon2): \(exact) > bound \(bounds.upper) (chord \(chord))")
            if chord <= Geodesy.chordBoundLimitM && chord > 1 {
                worstUse = max(worstUse, (exact - chord) / (bounds.upper - chord))
            }
            checked += 1
        }
        for pair in try inverseCorpus() {
            check(pair.lat1, pair.lon1, pair.lat2, pair.lon2, exact: pair.s12)
        }
        var random = SplitMix64(seed: 20_260_522)
        for index in 0..<10_000 {
            var lat = random.latitude()
            var lon = random.longitude()
            switch index % 5 {
            case 1: lat = (lat < 0 ? -1 : 1) * random.uniform(89, 90)         // polar
            case 2: lon = (lon < 0 ? -1 : 1) * random.uniform(179.5, 180)     // antimeridian
            case 3: lat = random.uniform(-0.01, 0.01)                          // equatorial
            default: break
            }
            let distance = random.logUniform(0.01, 2_000_000)
            let other = sphericalDestination(lat, lon, bearing: random.uniform(0, 360), distance: distance)
            check(lat, lon, other.lat, other.lon, exact: Geodesy.distanceM(lat, lon, other.lat, other.lon))
        }
        print("chord bound: \(checked) pairs, the bound's cubic term is at most \(worstUse * 100)% used")
        // The bound is not wildly loose either: the cubic term's constant is within 10% of the
        // worst case (1/24 at the equator on meridians).
        #expect(worstUse > 0.5)
    }

    /// `compare` must decide exactly as the geodesic distance does, for points within a hair of
    /// the edge, of the margin band's edges, and everywhere else.
    @Test func compareDecidesLikeTheExactDistance() {
        var random = SplitMix64(seed: 99)
        var counts: [String: Int] = [:]
        for index in 0..<20_000 {
            let center = GeoPoint(latitude: index % 7 == 0 ? random.uniform(-90, 90) : random.latitude(), longitude: random.longitude())
            let nominal = random.logUniform(1, 200_000)
            let spot = sphericalDestination(center.latitude, center.longitude, bearing: random.uniform(0, 360), distance: nominal)
            let point = GeoPoint(latitude: spot.lat, longitude: spot.lon)
            let exact = Geodesy.distanceM(point, center)
            let margin = index % 3 == 0 ? 0 : random.uniform(0, 30)
            // Radii that put the point just inside or outside the edge or a band edge, by
            // micrometres to metres, or anywhere.
            let offset = (random.unit() < 0.5 ? -1.0 : 1.0) * random.logUniform(1e-7, 5)
            let radius: Double
            switch index % 4 {
            case 0: radius = exact + offset
            case 1: radius = exact + margin + offset
            case 2: radius = exact - margin + offset
            default: radius = nominal
            }
            let side = Geodesy.compare(point, center: center, radiusM: radius, marginM: margin)
            let expected = classify(exact, radius: radius, margin: margin)
            #expect(name(side) == expected, "r \(radius) m \(margin) s \(exact)")
            if case .near(let distance) = side { #expect(distance == exact) }
            counts[expected, default: 0] += 1
        }
        print("compare: \(counts)")
    }

    @Test func distanceAndCompareAllocateNothing() {
        let center = GeoPoint(latitude: 37.33467, longitude: -122.00898)
        let points = (0..<100).map { GeoPoint(latitude: 37.33467 + Double($0) * 1e-5, longitude: -122.00898 + Double($0) * 1e-5) }
        var sink = 0.0
        for round in 0..<2 { // the first round warms up (runtime metadata, lazy globals)
            let counted = allocations {
                // An index loop: `for x in array` allocates per element in debug builds.
                for index in 0..<points.count {
                    let point = points[index]
                    sink += Geodesy.distanceM(point, center)
                    if case .near(let d) = Geodesy.compare(point, center: center, radiusM: 100, marginM: 15) { sink += d }
                    sink += GeoPoint(latitude: point.latitude, longitude: 1).x
                }
                sink += Geodesy.distanceM(-30, 0, 29.9, 179.8) // a Newton-iteration case
            }
            if round == 1 { #expect(counted == 0) }
        }
        #expect(sink.isFinite)
    }

    @Test func inverseSolutionAllocatesNothing() {
        var sink = 0.0
        for round in 0..<2 { // the first round warms up (runtime metadata, lazy globals)
            let counted = allocations {
                for index in 0..<100 {
                    let solution = Geodesy.inverseSolution(37.33467, -122.00898, 37.33467 + Double(index) * 1e-3, -122.00898 + Double(index) * 2e-3)
                    sink += solution.distanceM + solution.azimuth1Deg + solution.azimuth2Deg
                }
                sink += Geodesy.inverseSolution(-30, 0, 29.9, 179.8).azimuth1Deg // a Newton-iteration case
                sink += Geodesy.inverseSolution(10, 20, 10, 20).azimuth2Deg      // a meridian case
                sink += Geodesy.inverseSolution(0, 0, 0, 90).azimuth1Deg         // the equator
                sink += Geodesy.inverseSolution(91, 0, 0, 0).azimuth1Deg.isNaN ? 1 : 0
            }
            if round == 1 { #expect(counted == 0) }
        }
        #expect(sink.isFinite)
    }
}

/// Against GeodSolve itself (Debian geographiclib-tools), when it is installed: 500 pairs near
/// circle edges, decided by both.
@Suite struct GeodSolveDifferentialTests {
    static func geodSolvePath() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/GeodSolve"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Runs GeodSolve once with `arguments` on all lines; its output.
    static func run(_ executable: String, _ arguments: [String], _ lines: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let text = lines.joined(separator: "\n") + "\n"
        // Write from another thread: GeodSolve's output pipe could fill while we write.
        let writer = Thread {
            input.fileHandleForWriting.write(text.data(using: .utf8)!)
            try? input.fileHandleForWriting.close()
        }
        writer.start()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// Runs `GeodSolve -i -p PRECISION` once on all lines ("lat1 lon1 lat2 lon2"); returns its
    /// azi1, azi2 and s12 per line (NaN where a line does not parse).
    static func geodSolve(_ executable: String, _ lines: [String], precision: Int = 6) throws -> [(azi1: Double, azi2: Double, s12: Double)] {
        // Each line: azi1 azi2 s12.
        try run(executable, ["-i", "-p", String(precision)], lines).split(separator: "\n").map { line in
            let fields = line.split(separator: " ").map { Double(String($0)) ?? .nan }
            return fields.count == 3 ? (fields[0], fields[1], fields[2]) : (.nan, .nan, .nan)
        }
    }

    /// Skipped, with the reason recorded in the test report, when GeodSolve is missing
    /// (Scripts/install-deps --test installs geographiclib-tools).
    @Test(.enabled(if: geodSolvePath() != nil, "GeodSolve is not on PATH: apt-get install geographiclib-tools"))
    func decisionsNearCircleEdgesMatchGeodSolve() throws {
        let executable = try #require(Self.geodSolvePath())
        var random = SplitMix64(seed: 500)
        struct Case { var center: GeoPoint; var point: GeoPoint; var radius: Double; var ours: Double }
        var cases: [Case] = []
        for index in 0..<500 {
            var lat = random.latitude(), lon = random.longitude()
            switch index % 5 {
            case 1: lat = (lat < 0 ? -1 : 1) * random.uniform(88, 90)
            case 2: lon = (lon < 0 ? -1 : 1) * random.uniform(179.9, 180)
            case 3: lat = random.uniform(-0.001, 0.001)
            default: break
            }
            let nominal = random.logUniform(5, 50_000)
            let spot = sphericalDestination(lat, lon, bearing: random.uniform(0, 360), distance: nominal)
            let center = GeoPoint(latitude: lat, longitude: lon)
            let point = GeoPoint(latitude: spot.lat, longitude: spot.lon)
            let ours = Geodesy.distanceM(point, center)
            // Half the radii are the nominal distance (the point lands centimetres to metres
            // off the edge); half put it 0.1–5 mm inside or outside by our own distance.
            let radius = index % 2 == 0 ? nominal : ours + (random.unit() < 0.5 ? -1 : 1) * random.uniform(1e-4, 5e-3)
            cases.append(Case(center: center, point: point, radius: radius, ours: ours))
        }
        // Fixed notation: GeodSolve reads the "e" of 1e-05 as a hemisphere (east).
        let lines = cases.map { item in
            [item.point.latitude, item.point.longitude, item.center.latitude, item.center.longitude]
                .map { String(format: "%.15f", $0) }.joined(separator: " ")
        }
        let theirs = try Self.geodSolve(executable, lines)
        try #require(theirs.count == cases.count)
        var worst = 0.0
        for (index, item) in cases.enumerated() {
            let reference = theirs[index].s12
            worst = max(worst, abs(item.ours - reference))
            #expect(abs(item.ours - reference) <= 0.001, "\(lines[index]): ours \(item.ours), GeodSolve \(reference)")
            let side = Geodesy.compare(item.point, center: item.center, radiusM: item.radius, marginM: 0)
            let ourDecision = name(side) == "inside" || name(side) == "near" ? "inside" : "outside"
            let theirDecision = reference <= item.radius ? "inside" : "outside"
            #expect(ourDecision == theirDecision, "\(lines[index]) r \(item.radius): ours \(item.ours), GeodSolve \(reference)")
        }
        print("GeodSolve differential: \(cases.count) pairs near circle edges, max |ours - GeodSolve| = \(worst) m")
    }

    /// Lines where GeographicLib's conventions decide the azimuths: coincident points, exact
    /// poles, meridians and the equator, antipodes, ±180° and ±0 longitudes.
    static let conventionLines = [
        "10 20 10 20", "-33.5 -70.25 -33.5 -70.25", "0 0 0 0", "0 -180 0 180", "0 180 0 -180", "90 0 90 123",
        "-90 10 -90 -170", "90 0 -90 0", "-90 0 90 0", "90 45 0 0", "0 0 90 45", "-90 0 -89.5 30", "89.5 30 90 0",
        "0 0 0 180", "0 0 0 -180", "0 0 -0 180", "-0 0 0 -180", "0 10 0 -170", "0 0 0 179.5", "0 0 0 -179.5",
        "0 0 1 0", "0 0 -1 0", "0 0 0 1", "0 0 0 -1", "60 0 61 0", "60 0 59 0", "60 0 60 1", "60 0 60 -1",
        "-60 0 -60 1", "45 0 -45 180", "-45 10 45 -170", "30 0 -30 179.9", "89 0 -89 180", "1 0 -1 180",
        "0 -0 0 0", "-0 0 0 0", "20 0 20 180", "-20 -180 -20 0", "0 179.9 0 -179.9", "0 -179.9 0 179.9",
    ]

    /// Azimuths and distances of every corpus pair, both ways, and of the convention lines above,
    /// against `GeodSolve -i -p 9` (14 decimals of a degree): |Δazi| <= 1e-9° (180 and -180 are
    /// one direction), distance within 1 mm.
    @Test(.enabled(if: geodSolvePath() != nil, "GeodSolve is not on PATH: apt-get install geographiclib-tools"))
    func azimuthsMatchGeodSolve() throws {
        let executable = try #require(Self.geodSolvePath())
        let text = try String(contentsOfFile: repositoryRoot + "/Tests/Corpus/geo/inverse-sample.tsv", encoding: .utf8)
        var lines: [String] = [], categories: [String] = []
        for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.hasPrefix("id\t") {
            // The corpus's own decimal text, so that both read the same numbers.
            let fields = line.split(separator: "\t").map(String.init)
            guard fields.count >= 7 else { continue }
            lines.append([fields[2], fields[3], fields[4], fields[5]].joined(separator: " "))
            lines.append([fields[4], fields[5], fields[2], fields[3]].joined(separator: " "))
            categories += [fields[1], fields[1] + " reversed"]
        }
        #expect(lines.count == 4000)
        lines += Self.conventionLines
        categories += Array(repeating: "conventions", count: Self.conventionLines.count)
        let theirs = try Self.geodSolve(executable, lines, precision: 9)
        try #require(theirs.count == lines.count)
        var worst: [String: (azimuth: Double, distance: Double)] = [:]
        for (index, line) in lines.enumerated() {
            let input = line.split(separator: " ").map { Double(String($0))! }
            let ours = Geodesy.inverseSolution(input[0], input[1], input[2], input[3])
            let reference = theirs[index]
            let azimuthError = max(azimuthDifference(ours.azimuth1Deg, reference.azi1), azimuthDifference(ours.azimuth2Deg, reference.azi2))
            let distanceError = abs(ours.distanceM - reference.s12)
            #expect(azimuthError <= 1e-9, "\(line): ours \(ours), GeodSolve \(reference)")
            #expect(distanceError <= 0.001, "\(line): ours \(ours.distanceM), GeodSolve \(reference.s12)")
            // distanceM rounds its normalizations the fast way: nanometres apart at most.
            #expect(abs(ours.distanceM - Geodesy.distanceM(input[0], input[1], input[2], input[3])) <= 2e-8)
            let category = categories[index]
            worst[category] = (max(worst[category]?.azimuth ?? 0, azimuthError), max(worst[category]?.distance ?? 0, distanceError))
        }
        let report = worst.keys.sorted().map { "\($0) \(worst[$0]!.azimuth)° \(worst[$0]!.distance) m" }.joined(separator: ", ")
        print("inverseSolution vs GeodSolve -p 9, \(lines.count) lines, max |Δazimuth| and |Δdistance| by category: \(report)")
    }
}

/// |a - b| in degrees as directions: 180 and -180 (or 0 and -0) are the same.
func azimuthDifference(_ a: Double, _ b: Double) -> Double {
    abs(remainder(a - b, 360))
}
