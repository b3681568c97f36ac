/// Finding one place by name, for what must name exactly one: a circle centred on a place
/// (`circle = { place = "Dock 3", radius = 50 }` in the site file, or in a control `add`). A
/// name that matches no place gets the nearest spellings the index knows; one that matches
/// several gets the candidates and a way to qualify it. Off the loop: these allocate.
public enum PlaceResolution: Equatable {
    /// Exactly one place has the name.
    case found(place: Int)
    /// No place has it; the display names of places whose names are spelt nearest.
    case notFound(suggestions: [String])
    /// `total` places have it; the best ranked of them (at most `PlaceResolution.listed`).
    case ambiguous(total: Int, candidates: [Int])
    /// Not a name at all (empty, not UTF-8, too long).
    case invalid(PlaceNameProblem)

    /// Candidates an ambiguity lists.
    public static let listed = 5
}

extension PlaceIndex {
    /// The one place `name` names (with qualifiers: "Paris, FR", "Springfield, Illinois").
    public func resolve(_ name: String, search: borrowing PlaceNameSearch) -> PlaceResolution {
        let result = withQuery(name) { query, buffer in search.search(query, in: self, into: buffer) }
        if let problem = result.result.problem { return .invalid(problem) }
        switch result.result.total {
        case 0: return .notFound(suggestions: similarNames(to: name, limit: 3))
        case 1: return .found(place: result.places[0])
        default: return .ambiguous(total: result.result.total, candidates: result.places)
        }
    }

    /// Runs a name search for `name` with room for `PlaceResolution.listed` results.
    func withQuery(_ name: String, _ body: (UnsafeRawBufferPointer, UnsafeMutableBufferPointer<PlaceCandidate>) -> PlaceNameResult)
        -> (result: PlaceNameResult, places: [Int]) {
        var candidates = [PlaceCandidate](repeating: PlaceCandidate(place: 0, distanceM: .nan), count: PlaceResolution.listed)
        var text = name
        let result = text.withUTF8 { bytes in
            candidates.withUnsafeMutableBufferPointer { buffer in body(UnsafeRawBufferPointer(bytes), buffer) }
        }
        return (result, candidates.prefix(result.written).map { $0.place })
    }

    /// "Bremerhaven, Bremen, DE", "Dock 3": the name, the administrative area unless it repeats
    /// the name, the country code (as `PlaceText.writeName`).
    public func displayName(_ place: Int) -> String {
        JSONWriter.rendering(capacity: 3 * PlaceIndexLayout.maximumStringBytes + 16) { line in
            PlaceText.writeName(place, in: self, into: &line, quoted: false)
        }
    }

    /// "Paris, Ile-de-France, FR (population 2138551)" or "Dock 3 (a site place)".
    public func describe(_ place: Int) -> String {
        let record = self.record(place)
        if record.isSite { return displayName(place) + " (a site place)" }
        return displayName(place) + " (population \(record.population))"
    }

    /// Display names of the places whose names are spelt nearest `name` (folded, by edit
    /// distance over the index's distinct names, alternate names included), nearest first, then
    /// the site's places, then the more populous, every place of a name in its rank: a "did you
    /// mean". Only what is within about a
    /// third of the name's length counts (one edit for short names). A qualified name ("Pariss,
    /// FR") is compared by its part before the comma.
    public func similarNames(to name: String, limit: Int) -> [String] {
        let head = name.utf8.split(separator: UInt8(ascii: ","), maxSplits: 1, omittingEmptySubsequences: false).first.map { Array($0) } ?? []
        guard limit > 0, let query = NameFolding.key(head) else { return [] }
        guard !query.isEmpty else { return [] }
        let bound = max(1, query.count / 3)
        var distance = BoundedEditDistance(query: query)
        // (distance, the key's run of name entries: its places best ranked first)
        var found: [(distance: Int, entries: Range<Int>)] = []
        var entry = 0
        while entry < nameCount {
            let key = nameKey(entry)
            var next = entry + 1
            while next < nameCount && (nameKeyOffset(next) == nameKeyOffset(entry) || PlaceIndex.compare(nameKey(next), key) == 0) { next += 1 }
            if abs(key.count - query.count) <= bound, let edits = distance.within(bound, key) {
                found.append((edits, entry..<next))
            }
            entry = next
        }
        found.sort { a, b in
            if a.distance != b.distance { return a.distance < b.distance }
            let pa = namePlace(a.entries.lowerBound), pb = namePlace(b.entries.lowerBound)
            let ra = record(pa), rb = record(pb)
            if ra.isSite != rb.isSite { return ra.isSite }
            if ra.population != rb.population { return ra.population > rb.population }
            return pa < pb
        }
        var names: [String] = []
        for candidate in found {
            for entry in candidate.entries where names.count < limit {
                let shown = displayName(namePlace(entry))
                if !names.contains(shown) { names.append(shown) }
            }
        }
        return names
    }

    /// Qualified names that each pick out one of `candidates` alone ("Paris, FR", "Paris,
    /// Texas"), at most two: the first candidate by its country code, the next by its
    /// administrative area (or country). Candidates whose own name is `name` come first, so an
    /// alternate name's match ("Parys", once called Paris) is not what the hint shows.
    public func qualifiedExamples(_ name: String, candidates: [Int], search: borrowing PlaceNameSearch) -> [String] {
        let base = String(decoding: name.utf8.split(separator: UInt8(ascii: ","), maxSplits: 1, omittingEmptySubsequences: false).first ?? [],
                          as: UTF8.self)
        let folded = NameFolding.fold(Array(base.utf8)) ?? []
        let ordered = candidates.filter { (NameFolding.fold(Array(self.name(of: record($0)))) ?? []) == folded }
            + candidates.filter { (NameFolding.fold(Array(self.name(of: record($0)))) ?? []) != folded }
        var examples: [String] = []
        for place in ordered where examples.count < 2 {
            let record = self.record(place)
            var qualifiers: [String] = []
            let country = record.hasCountry ? String(decoding: [record.countryBytes.0, record.countryBytes.1], as: UTF8.self) : nil
            let admin1 = self.admin1(of: record).isEmpty ? nil : String(decoding: self.admin1(of: record), as: UTF8.self)
            qualifiers = (examples.isEmpty ? [country, admin1] : [admin1, country]).compactMap { $0 }
            for qualifier in qualifiers {
                let qualified = base + ", " + qualifier
                let result = withQuery(qualified) { query, buffer in search.search(query, in: self, into: buffer) }
                if result.result.total == 1 && result.places.first == place && !examples.contains(qualified) {
                    examples.append(qualified)
                    break
                }
            }
        }
        return examples
    }
}

extension PlaceResolution {
    /// What is wrong with `name`, as one sentence after the name (nil when it was found):
    /// "no place of that name in INDEX (did you mean "Dock 3"?)", "names 3 places: ...; qualify
    /// it: "Paris, FR" or "Paris, Texas"".
    public func problem(_ name: String, index: PlaceIndex, indexPath: String, search: borrowing PlaceNameSearch) -> String? {
        switch self {
        case .found:
            return nil
        case .invalid(let problem):
            return "is \(problem), not a place name"
        case .notFound(let suggestions):
            var message = "is no place in \(indexPath)"
            if !suggestions.isEmpty {
                message += " (did you mean " + suggestions.map { "\"\($0)\"" }.joined(separator: ", ") + "?)"
            }
            return message
        case .ambiguous(let total, let candidates):
            var message = "names \(total) places: " + candidates.map { index.describe($0) }.joined(separator: "; ")
            if total > candidates.count { message += "; and \(total - candidates.count) more" }
            let examples = index.qualifiedExamples(name, candidates: candidates, search: search)
            message += "; qualify it with a country code or an administrative area"
            if !examples.isEmpty { message += ": " + examples.map { "\"\($0)\"" }.joined(separator: " or ") }
            return message
        }
    }
}

/// Optimal string alignment distance (as `Spelling.editDistance`, on folded bytes) with a bound:
/// nil as soon as every alignment costs more, so most of an index's names cost a row or two.
/// The rows are allocated once for the query.
struct BoundedEditDistance {
    let query: [UInt8]
    private var previous2: [Int]
    private var previous: [Int]
    private var current: [Int]

    init(query: [UInt8]) {
        self.query = query
        previous2 = [Int](repeating: 0, count: query.count + 1)
        previous = previous2
        current = previous2
    }

    /// The distance from the query to `key` if it is at most `bound`.
    mutating func within(_ bound: Int, _ key: UnsafeRawBufferPointer) -> Int? {
        let width = query.count
        for column in 0...width { previous[column] = column }
        guard !key.isEmpty else { return width <= bound ? width : nil }
        for row in 1...key.count {
            current[0] = row
            var rowMinimum = row
            let byte = key[row - 1]
            for column in 1...width {
                let cost = query[column - 1] == byte ? 0 : 1
                var value = min(previous[column] + 1, current[column - 1] + 1, previous[column - 1] + cost)
                if row > 1, column > 1, query[column - 1] == key[row - 2], query[column - 2] == byte {
                    value = min(value, previous2[column - 2] + 1)
                }
                current[column] = value
                rowMinimum = min(rowMinimum, value)
            }
            if rowMinimum > bound { return nil }
            swap(&previous2, &previous)
            swap(&previous, &current)
        }
        return previous[width] <= bound ? previous[width] : nil
    }
}

extension SiteConfig {
    /// Finds the centre of every circle given as a place (`PlaceReference`) in `index`: a name
    /// that names exactly one place gives the circle that place's coordinates; any other is a
    /// diagnostic at the name, with the nearest spellings or the candidates. `indexPath` names
    /// the index in messages.
    public mutating func resolvePlaces(in index: PlaceIndex, indexPath: String, file: String) -> [ConfigDiagnostic] {
        let search = PlaceNameSearch()
        var diagnostics: [ConfigDiagnostic] = []
        for monitor in monitors.indices {
            for position in monitors[monitor].conditions.indices {
                guard var reference = monitors[monitor].conditions[position].place,
                      case .circle(_, _, let radius) = monitors[monitor].conditions[position].kind else { continue }
                let resolution = index.resolve(reference.name, search: search)
                guard case .found(let place) = resolution else {
                    let problem = resolution.problem(reference.name, index: index, indexPath: indexPath, search: search) ?? ""
                    let label = "monitor.\(monitors[monitor].name).condition[\(position + 1)].circle.place"
                    diagnostics.append(ConfigDiagnostic(file: file, location: reference.location, message: "'\(label)' = \"\(reference.name)\" \(problem)"))
                    continue
                }
                let record = index.record(place)
                reference.resolved = index.displayName(place)
                monitors[monitor].conditions[position].kind = .circle(latitude: record.latitude, longitude: record.longitude, radiusM: radius)
                monitors[monitor].conditions[position].place = reference
            }
        }
        return diagnostics
    }
}
