/// Builds a place index (`PlaceIndexLayout`) from gazetteer places, admin1 names and a site's
/// own places: `locus geo index`. Runs once, off the agent's loop, and may allocate freely.
public struct PlaceIndexBuilder {
    var gazetteer: [GazetteerPlace] = []
    var site: [GazetteerPlace] = []
    /// "CC.code" -> the administrative area's name.
    var admin1Names: [[UInt8]: [UInt8]] = [:]

    public init() {}

    public var gazetteerCount: Int { gazetteer.count }
    public var siteCount: Int { site.count }

    public mutating func add(_ place: GazetteerPlace) {
        if place.isSite { site.append(place) } else { gazetteer.append(place) }
    }

    /// An administrative area's name for `CC.code` (as in `admin1CodesASCII.txt`).
    public mutating func addAdmin1(code: [UInt8], name: [UInt8]) {
        admin1Names[code] = name
    }

    public struct Summary: Equatable, Sendable {
        public var places: Int
        public var sitePlaces: Int
        public var names: Int
        public var strings: Int
        public var bytes: Int
        /// Places whose admin1 code had no name among the admin1 rows given.
        public var admin1Unnamed: Int
    }

    /// The index file's bytes, described as `description` (kept in the file for `locus geo info`).
    public func build(description: [UInt8]) -> (bytes: [UInt8], summary: Summary) {
        var strings = StringTable()
        let descriptionOffset = strings.intern(Array(description.prefix(PlaceIndexLayout.maximumStringBytes)))
        let gazetteerOrder = TreeBuilder.order(gazetteer)
        let siteOrder = TreeBuilder.order(site)
        var records: [UInt8] = []
        records.reserveCapacity((gazetteer.count + site.count) * PlaceIndexLayout.recordSize)
        var keys: [NameKey] = []
        var unnamed = 0
        for (tree, places, order) in [(0, gazetteer, gazetteerOrder), (1, site, siteOrder)] {
            for (node, source) in zip(order.nodes, order.axes) {
                let place = places[Int(node.index)]
                let placeNumber = UInt32(records.count / PlaceIndexLayout.recordSize)
                let admin1 = admin1Name(of: place)
                if admin1 == nil && !place.admin1Code.isEmpty && !place.country.isEmpty { unnamed += 1 }
                appendRecord(place, point: node.point, axis: source, admin1: admin1 ?? [], strings: &strings, into: &records)
                for key in Self.foldedKeys(of: place) {
                    keys.append(NameKey(key: strings.intern(key), place: placeNumber, isSite: tree == 1, population: place.population))
                }
            }
        }
        let sortedKeys = strings.sortedOrder(keys)
        var names: [UInt8] = []
        names.reserveCapacity(sortedKeys.count * PlaceIndexLayout.nameEntrySize)
        for entry in sortedKeys {
            names.append(littleEndian: entry.key)
            names.append(littleEndian: entry.place)
        }
        let bytes = assemble(records: records, names: names, strings: strings.bytes, counts: (gazetteer.count + site.count, gazetteer.count, sortedKeys.count),
                             description: descriptionOffset)
        let summary = Summary(places: gazetteer.count + site.count, sitePlaces: site.count, names: sortedKeys.count,
                              strings: strings.count, bytes: bytes.count, admin1Unnamed: unnamed)
        return (bytes, summary)
    }

    func admin1Name(of place: GazetteerPlace) -> [UInt8]? {
        guard !place.country.isEmpty, !place.admin1Code.isEmpty else { return nil }
        return admin1Names[place.country + [UInt8(ascii: ".")] + place.admin1Code]
    }

    /// The place's folded names and aliases, without repeats and without empty ones.
    static func foldedKeys(of place: GazetteerPlace) -> [[UInt8]] {
        var keys: [[UInt8]] = []
        for name in [place.name] + place.alternateNames {
            guard let folded = NameFolding.key(name) else { continue }
            if !folded.isEmpty && folded.count <= PlaceIndexLayout.maximumStringBytes && !keys.contains(folded) { keys.append(folded) }
        }
        return keys
    }

    func appendRecord(_ place: GazetteerPlace, point: TreeBuilder.Point, axis: UInt8, admin1: [UInt8],
                      strings: inout StringTable, into records: inout [UInt8]) {
        records.append(littleEndian: UInt32(bitPattern: point.x))
        records.append(littleEndian: UInt32(bitPattern: point.y))
        records.append(littleEndian: UInt32(bitPattern: point.z))
        records.append(littleEndian: UInt32(bitPattern: PlaceIndexLayout.fixedPoint(place.latitude)))
        records.append(littleEndian: UInt32(bitPattern: PlaceIndexLayout.fixedPoint(place.longitude)))
        records.append(littleEndian: place.population)
        records.append(littleEndian: place.geonameID)
        let limit = PlaceIndexLayout.maximumStringBytes
        records.append(littleEndian: strings.intern(Array(place.name.prefix(limit))))
        records.append(littleEndian: strings.intern(Array(admin1.prefix(limit))))
        records.append(littleEndian: strings.intern(Array(place.timeZone.prefix(limit))))
        records.append(littleEndian: strings.intern(Array(place.featureCode.prefix(limit))))
        let country = place.country.count == 2 ? place.country : [0x20, 0x20]
        records.append(contentsOf: country)
        records.append(place.featureClass)
        records.append(axis | (place.isSite ? PlaceIndexLayout.siteFlag : 0))
    }

    func assemble(records: [UInt8], names: [UInt8], strings: [UInt8], counts: (places: Int, siteStart: Int, names: Int),
                  description: UInt32) -> [UInt8] {
        func aligned(_ offset: Int) -> Int { (offset + 7) & ~7 }
        let placesAt = PlaceIndexLayout.headerSize
        let namesAt = aligned(placesAt + records.count)
        let stringsAt = aligned(namesAt + names.count)
        let size = stringsAt + strings.count
        var file = [UInt8](repeating: 0, count: size)
        file.replaceSubrange(0..<8, with: PlaceIndexLayout.magic)
        file.store(PlaceIndexLayout.version, at: PlaceIndexLayout.versionOffset)
        file.store(UInt32(PlaceIndexLayout.headerSize), at: PlaceIndexLayout.headerSizeOffset)
        file.store(UInt64(size), at: PlaceIndexLayout.fileSizeOffset)
        file.store(UInt32(counts.places), at: PlaceIndexLayout.placeCountOffset)
        file.store(UInt32(counts.siteStart), at: PlaceIndexLayout.siteStartOffset)
        file.store(UInt32(counts.names), at: PlaceIndexLayout.nameCountOffset)
        file.store(UInt64(placesAt), at: PlaceIndexLayout.placesOffsetOffset)
        file.store(UInt64(namesAt), at: PlaceIndexLayout.namesOffsetOffset)
        file.store(UInt64(stringsAt), at: PlaceIndexLayout.stringsOffsetOffset)
        file.store(UInt64(strings.count), at: PlaceIndexLayout.stringsSizeOffset)
        file.store(description, at: PlaceIndexLayout.descriptionOffset)
        file.replaceSubrange(placesAt..<(placesAt + records.count), with: records)
        file.replaceSubrange(namesAt..<(namesAt + names.count), with: names)
        file.replaceSubrange(stringsAt..<size, with: strings)
        let checksum = file.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[PlaceIndexLayout.headerSize...])) }
        file.store(checksum, at: PlaceIndexLayout.checksumOffset)
        return file
    }
}

/// A name entry before sorting.
struct NameKey {
    var key: UInt32
    var place: UInt32
    var isSite: Bool
    var population: UInt32
}

/// Strings stored once each, length-prefixed; offset 0 is the empty string.
struct StringTable {
    private(set) var bytes: [UInt8] = [0, 0]
    private var offsets: [[UInt8]: UInt32] = [[]: 0]
    var count: Int { offsets.count }

    mutating func intern(_ string: [UInt8]) -> UInt32 {
        if let offset = offsets[string] { return offset }
        let offset = UInt32(bytes.count)
        bytes.append(littleEndian: UInt16(string.count))
        bytes.append(contentsOf: string)
        offsets[string] = offset
        return offset
    }

    /// Name entries in the index's order: by key bytes, then site places, then population
    /// (largest first), then place number. Keys are ranked once, so the sort compares integers.
    func sortedOrder(_ entries: [NameKey]) -> [NameKey] {
        var distinct = Array(Set(entries.map { $0.key }))
        distinct.sort { a, b in
            bytes.withUnsafeBytes { table in PlaceIndex.compare(Self.string(table, a), Self.string(table, b)) < 0 }
        }
        var rank: [UInt32: Int] = [:]
        for (position, key) in distinct.enumerated() { rank[key] = position }
        return entries.sorted { a, b in
            let ra = rank[a.key]!, rb = rank[b.key]!
            if ra != rb { return ra < rb }
            if a.isSite != b.isSite { return a.isSite }
            if a.population != b.population { return a.population > b.population }
            return a.place < b.place
        }
    }

    static func string(_ table: UnsafeRawBufferPointer, _ offset: UInt32) -> UnsafeRawBufferPointer {
        let start = Int(offset)
        let length = Int(UInt16(littleEndian: table.loadUnaligned(fromByteOffset: start, as: UInt16.self)))
        return UnsafeRawBufferPointer(rebasing: table[(start + 2)..<(start + 2 + length)])
    }
}

/// The implicit k-d tree: places reordered so that the node of [lo, hi) is at (lo + hi) / 2,
/// split on the axis (of x, y, z) along which that range spreads most.
enum TreeBuilder {
    struct Point: Equatable {
        var x: Int32, y: Int32, z: Int32
        subscript(axis: Int) -> Int32 { axis == 0 ? x : axis == 1 ? y : z }
    }

    struct Node {
        var index: Int32
        var point: Point
    }

    /// The tree order of `places` and each node's split axis.
    static func order(_ places: [GazetteerPlace]) -> (nodes: [Node], axes: [UInt8]) {
        var nodes = places.enumerated().map { index, place in Node(index: Int32(index), point: point(place)) }
        var axes = [UInt8](repeating: 0, count: nodes.count)
        arrange(&nodes, &axes, 0, nodes.count)
        return (nodes, axes)
    }

    /// ECEF at height 0 of the place's stored (fixed-point) coordinates, in centimetres.
    static func point(_ place: GazetteerPlace) -> Point {
        let scale = PlaceIndexLayout.degreeScale
        let geo = GeoPoint(latitude: Double(PlaceIndexLayout.fixedPoint(place.latitude)) / scale,
                           longitude: Double(PlaceIndexLayout.fixedPoint(place.longitude)) / scale)
        let cm = PlaceIndexLayout.ecefScale
        return Point(x: Int32((geo.x * cm).rounded()), y: Int32((geo.y * cm).rounded()), z: Int32((geo.z * cm).rounded()))
    }

    static func arrange(_ nodes: inout [Node], _ axes: inout [UInt8], _ lo: Int, _ hi: Int) {
        guard hi - lo > 1 else {
            if hi - lo == 1 { axes[lo] = 0 }
            return
        }
        var lower = (Int32.max, Int32.max, Int32.max), upper = (Int32.min, Int32.min, Int32.min)
        for node in nodes[lo..<hi] {
            lower = (min(lower.0, node.point.x), min(lower.1, node.point.y), min(lower.2, node.point.z))
            upper = (max(upper.0, node.point.x), max(upper.1, node.point.y), max(upper.2, node.point.z))
        }
        let spreads = (Int64(upper.0) - Int64(lower.0), Int64(upper.1) - Int64(lower.1), Int64(upper.2) - Int64(lower.2))
        let axis = spreads.0 >= spreads.1 && spreads.0 >= spreads.2 ? 0 : (spreads.1 >= spreads.2 ? 1 : 2)
        let mid = (lo + hi) >> 1
        select(&nodes, lo, hi, mid, axis: axis)
        axes[mid] = UInt8(axis)
        arrange(&nodes, &axes, lo, mid)
        arrange(&nodes, &axes, mid + 1, hi)
    }

    /// Quickselect: nodes[k] becomes the node that sorting [lo, hi) by (coordinate, index) would
    /// put there, with smaller ones before it and larger ones after.
    static func select(_ nodes: inout [Node], _ lo: Int, _ hi: Int, _ k: Int, axis: Int) {
        func less(_ a: Node, _ b: Node) -> Bool {
            let ca = a.point[axis], cb = b.point[axis]
            return ca != cb ? ca < cb : a.index < b.index
        }
        var left = lo, right = hi - 1
        while right > left {
            // Median of three as the pivot, moved to the right end.
            let middle = (left + right) >> 1
            if less(nodes[middle], nodes[left]) { nodes.swapAt(middle, left) }
            if less(nodes[right], nodes[left]) { nodes.swapAt(right, left) }
            if less(nodes[middle], nodes[right]) { nodes.swapAt(middle, right) }
            let pivot = nodes[right]
            var store = left
            for position in left..<right where less(nodes[position], pivot) {
                nodes.swapAt(position, store)
                store += 1
            }
            nodes.swapAt(store, right)
            if store == k { return }
            if store < k { left = store + 1 } else { right = store - 1 }
        }
    }
}

extension [UInt8] {
    mutating func append<T: FixedWidthInteger>(littleEndian value: T) {
        var little = value.littleEndian
        Swift.withUnsafeBytes(of: &little) { append(contentsOf: $0) }
    }

    mutating func store<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        var little = value.littleEndian
        Swift.withUnsafeBytes(of: &little) { bytes in
            for (position, byte) in bytes.enumerated() { self[offset + position] = byte }
        }
    }
}
