/// A place found by name, ranked: the site's own places first, then by population (largest
/// first), then by distance from the point given (the last fix), then by index order.
public struct PlaceCandidate: Equatable, Sendable {
    public var place: Int
    /// Geodesic distance from the point the search was given, metres; NaN without one.
    public var distanceM: Double

    public init(place: Int, distanceM: Double) {
        self.place = place
        self.distanceM = distanceM
    }
}

/// What a name search found: how many places match (`total`) and how many of them, the best
/// ranked, were written to the caller's buffer.
public struct PlaceNameResult: Equatable, Sendable {
    public var total: Int
    public var written: Int
    public var problem: PlaceNameProblem?
}

public enum PlaceNameProblem: Equatable, Sendable, CustomStringConvertible {
    case empty
    case notUTF8
    /// Longer than `PlaceNameSearch.maximumQueryBytes` once folded.
    case tooLong
    /// More than `PlaceNameSearch.maximumQualifiers` qualifiers after the name.
    case tooManyQualifiers

    public var description: String {
        switch self {
        case .empty: "an empty name"
        case .notUTF8: "a name that is not UTF-8"
        case .tooLong: "a name longer than \(PlaceNameSearch.maximumQueryBytes) bytes"
        case .tooManyQualifiers: "more than \(PlaceNameSearch.maximumQualifiers) qualifiers after the name (NAME, REGION, CC)"
        }
    }
}

/// Forward geocoding over a `PlaceIndex`: "Bremerhaven", "Paris, US", "Springfield, Illinois",
/// "Dock 3". The name and each qualifier are folded (`NameFolding`: case, diacritics and
/// compatibility forms) and the name is found by binary search in the index's sorted names,
/// alternate names included. A qualifier after a comma keeps the places whose country code or
/// administrative area (admin1) folds to it. A name that itself holds a comma is tried whole first.
///
/// Owns its folding buffers (allocated once); a search allocates nothing.
public struct PlaceNameSearch: ~Copyable {
    public static let maximumQueryBytes = 256
    public static let maximumQualifiers = 4
    /// Folded query parts, one slot of `maximumQueryBytes` each: the name, the qualifiers, and a
    /// last one for folding a candidate's admin1 name.
    let scratch: UnsafeMutableRawBufferPointer
    static var slots: Int { 2 + maximumQualifiers }
    /// The folded length of each qualifier (as many as `maximumQualifiers`).
    typealias QualifierLengths = (Int, Int, Int, Int)

    public init() {
        scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.slots * Self.maximumQueryBytes, alignment: 8)
    }

    deinit { scratch.deallocate() }

    func slot(_ number: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(rebasing: scratch[(number * Self.maximumQueryBytes)..<((number + 1) * Self.maximumQueryBytes)])
    }

    /// Places named `query` in `index`, best first, into `results` (as many as fit); `total`
    /// counts them all.
    @_noAllocation
    public func search(_ query: UnsafeRawBufferPointer, in index: PlaceIndex, near: GeoPoint? = nil,
                       into results: UnsafeMutableBufferPointer<PlaceCandidate>) -> PlaceNameResult {
        guard UTF8Validation.firstInvalidByte(in: query) == nil else { return PlaceNameResult(total: 0, written: 0, problem: .notUTF8) }
        let whole = query
        // The whole text as one name first ("Washington, D.C." is a name).
        guard let wholeKey = fold(whole, into: 0) else { return PlaceNameResult(total: 0, written: 0, problem: .tooLong) }
        guard !wholeKey.isEmpty else { return PlaceNameResult(total: 0, written: 0, problem: .empty) }
        let range = index.nameRange(wholeKey)
        if !range.isEmpty || !whole.contains(UInt8(ascii: ",")) {
            return collect(range, qualifiers: 0, lengths: QualifierLengths(0, 0, 0, 0), in: index, near: near, into: results)
        }
        // NAME, QUALIFIER, ...
        var qualifiers = 0
        var lengths = QualifierLengths(0, 0, 0, 0)
        var nameKey = UnsafeRawBufferPointer(start: nil, count: 0)
        var partStart = 0
        var position = 0
        while position <= whole.count {
            if position == whole.count || whole[position] == UInt8(ascii: ",") {
                let part = UnsafeRawBufferPointer(rebasing: whole[partStart..<position])
                if partStart == 0 {
                    guard let key = fold(part, into: 0) else { return PlaceNameResult(total: 0, written: 0, problem: .tooLong) }
                    guard !key.isEmpty else { return PlaceNameResult(total: 0, written: 0, problem: .empty) }
                    nameKey = key
                } else {
                    guard let folded = fold(part, into: 1 + min(qualifiers, Self.maximumQualifiers - 1)) else {
                        return PlaceNameResult(total: 0, written: 0, problem: .tooLong)
                    }
                    if folded.isEmpty { partStart = position + 1; position += 1; continue }
                    guard qualifiers < Self.maximumQualifiers else { return PlaceNameResult(total: 0, written: 0, problem: .tooManyQualifiers) }
                    withUnsafeMutableBytes(of: &lengths) { $0.storeBytes(of: folded.count, toByteOffset: qualifiers * MemoryLayout<Int>.stride, as: Int.self) }
                    qualifiers += 1
                }
                partStart = position + 1
            }
            position += 1
        }
        return collect(index.nameRange(nameKey), qualifiers: qualifiers, lengths: lengths, in: index, near: near, into: results)
    }

    /// The folded form of `text` in slot `number` without spaces at either end, or nil when it
    /// does not fit. Qualifiers' folded forms start at their slot's first byte.
    @_noAllocation
    func fold(_ text: UnsafeRawBufferPointer, into number: Int) -> UnsafeRawBufferPointer? {
        let target = slot(number)
        guard let count = NameFolding.fold(text, into: target) else { return nil }
        // The slot's first bytes hold the folded text (spaces at either end dropped, as the
        // index's keys are); the rest of the slot is unused.
        var start = 0, end = count
        while start < end && target[start] == 0x20 { start += 1 }
        while end > start && target[end - 1] == 0x20 { end -= 1 }
        if start > 0 {
            for offset in start..<end { target[offset - start] = target[offset] }
        }
        return UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(target)[0..<(end - start)])
    }

    @_noAllocation
    func collect(_ range: Range<Int>, qualifiers: Int, lengths: QualifierLengths, in index: PlaceIndex, near: GeoPoint?,
                 into results: UnsafeMutableBufferPointer<PlaceCandidate>) -> PlaceNameResult {
        var total = 0
        var written = 0
        for entry in range {
            let place = index.namePlace(entry)
            guard matches(index.record(place), qualifiers: qualifiers, lengths: lengths, in: index) else { continue }
            total += 1
            guard written < results.count else { continue }
            var distance = Double.nan
            if let near {
                let record = index.record(place)
                distance = Geodesy.distanceM(near.latitude, near.longitude, record.latitude, record.longitude)
            }
            results[written] = PlaceCandidate(place: place, distanceM: distance)
            written += 1
        }
        Self.rank(UnsafeMutableBufferPointer(rebasing: results[0..<written]), in: index)
        return PlaceNameResult(total: total, written: written, problem: nil)
    }

    /// Whether every qualifier names the place's country code or administrative area.
    @_noAllocation
    func matches(_ record: PlaceRecord, qualifiers: Int, lengths: QualifierLengths, in index: PlaceIndex) -> Bool {
        var number = 0
        while number < qualifiers {
            let qualifier = UnsafeRawBufferPointer(slot(1 + number))
            let length = withUnsafeBytes(of: lengths) { $0.load(fromByteOffset: number * MemoryLayout<Int>.stride, as: Int.self) }
            let (first, second) = record.countryBytes
            let isCountry = record.hasCountry && length == 2
                && qualifier[0] == Self.lowercased(first) && qualifier[1] == Self.lowercased(second)
            if !isCountry {
                let admin1 = index.admin1(of: record)
                guard !admin1.isEmpty, let folded = fold(admin1, into: Self.slots - 1),
                      PlaceIndex.sameBytes(folded, UnsafeRawBufferPointer(rebasing: qualifier[0..<length])) else { return false }
            }
            number += 1
        }
        return true
    }

    /// Insertion sort by rank (the lists are short, and mostly in order already).
    @_noAllocation
    static func rank(_ results: UnsafeMutableBufferPointer<PlaceCandidate>, in index: PlaceIndex) {
        guard results.count > 1 else { return }
        for next in 1..<results.count {
            let item = results[next]
            var position = next
            while position > 0 && ranksBefore(item, results[position - 1], in: index) {
                results[position] = results[position - 1]
                position -= 1
            }
            results[position] = item
        }
    }

    @_noAllocation
    static func ranksBefore(_ a: PlaceCandidate, _ b: PlaceCandidate, in index: PlaceIndex) -> Bool {
        let ra = index.record(a.place), rb = index.record(b.place)
        if ra.isSite != rb.isSite { return ra.isSite }
        if ra.population != rb.population { return ra.population > rb.population }
        if a.distanceM < b.distanceM { return true }
        if b.distanceM < a.distanceM { return false }
        return a.place < b.place
    }

    @_noAllocation
    static func lowercased(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte }
}

extension PlaceIndex {
    /// The name entries whose folded key is exactly `key`: binary search for the first, then the run.
    @_noAllocation
    public func nameRange(_ key: UnsafeRawBufferPointer) -> Range<Int> {
        var low = 0, high = nameCount
        while low < high {
            let middle = (low + high) >> 1
            if PlaceIndex.compare(nameKey(middle), key) < 0 { low = middle + 1 } else { high = middle }
        }
        var end = low
        while end < nameCount && PlaceIndex.compare(nameKey(end), key) == 0 { end += 1 }
        return low..<end
    }

    /// Byte-wise order of folded keys (shorter first when one is a prefix of the other).
    @_noAllocation
    public static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let common = min(a.count, b.count)
        var offset = 0
        while offset < common {
            if a[offset] != b[offset] { return a[offset] < b[offset] ? -1 : 1 }
            offset += 1
        }
        return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
    }
}
