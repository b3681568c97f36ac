/// Why a place index was refused. Every reason names what was found, so a technician can tell a
/// truncated copy from a file of another kind.
public enum PlaceIndexError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not a place index at all (the first bytes are not "LOCUSPLC").
    case foreign
    /// Shorter than its header says (a copy cut short).
    case truncated(size: Int, expected: Int)
    /// Longer than its header says.
    case trailingBytes(size: Int, expected: Int)
    case unsupportedVersion(UInt32)
    /// The checksum over the body does not match: the file changed after it was written.
    case checksum
    /// A field points outside its section or holds an impossible value.
    case malformed(String)

    public var description: String {
        switch self {
        case .foreign: "not a Locus place index (build one with `locus geo index`)"
        case .truncated(let size, let expected): "truncated: \(size) of \(expected) bytes"
        case .trailingBytes(let size, let expected): "\(size - expected) bytes after the end the header states (\(expected))"
        case .unsupportedVersion(let version): "format version \(version); this locus reads version \(PlaceIndexLayout.version) (rebuild it with this locus's `geo index`)"
        case .checksum: "checksum mismatch: the file is corrupt (rebuild or copy it again)"
        case .malformed(let what): "malformed: \(what)"
        }
    }
}

/// A place index over bytes that stay valid as long as the index is used (a read-only mapping of
/// the file, or a buffer in the tests). Opening checks everything a lookup relies on: the header,
/// the checksum, every section within the file, every string offset within the strings and every
/// record's strings valid UTF-8, so no later read can leave the bytes. Nothing is copied.
public struct PlaceIndex: @unchecked Sendable {
    public let bytes: UnsafeRawBufferPointer
    public let placeCount: Int
    /// Places [0, siteStart) are the gazetteer's, [siteStart, placeCount) the site's own.
    public let siteStart: Int
    public let nameCount: Int
    let places: UnsafeRawPointer
    let names: UnsafeRawPointer
    let strings: UnsafeRawBufferPointer
    let descriptionOffset: UInt32

    public init(bytes: UnsafeRawBufferPointer) throws(PlaceIndexError) {
        let layout = PlaceIndexLayout.self
        guard bytes.count >= 8, let base = bytes.baseAddress,
              (0..<8).allSatisfy({ bytes[$0] == layout.magic[$0] }) else { throw .foreign }
        guard bytes.count >= layout.headerSize else { throw .truncated(size: bytes.count, expected: layout.headerSize) }
        func u32(_ offset: Int) -> UInt32 { UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
        func u64(_ offset: Int) -> UInt64 { UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
        let version = u32(layout.versionOffset)
        guard version == layout.version else { throw .unsupportedVersion(version) }
        guard u32(layout.headerSizeOffset) == UInt32(layout.headerSize) else { throw .malformed("header size \(u32(layout.headerSizeOffset))") }
        let fileSize = u64(layout.fileSizeOffset)
        guard fileSize <= UInt64(Int.max) else { throw .malformed("file size \(fileSize)") }
        if UInt64(bytes.count) < fileSize { throw .truncated(size: bytes.count, expected: Int(fileSize)) }
        if UInt64(bytes.count) > fileSize { throw .trailingBytes(size: bytes.count, expected: Int(fileSize)) }
        let body = UnsafeRawBufferPointer(rebasing: bytes[layout.headerSize...])
        guard CRC32C.checksum(body) == u32(layout.checksumOffset) else { throw .checksum }

        placeCount = Int(u32(layout.placeCountOffset))
        siteStart = Int(u32(layout.siteStartOffset))
        nameCount = Int(u32(layout.nameCountOffset))
        guard siteStart <= placeCount else { throw .malformed("first site place \(siteStart) beyond \(placeCount) places") }
        let placesAt = try Self.section(u64(layout.placesOffsetOffset), count: placeCount, size: layout.recordSize, in: bytes.count, "places")
        let namesAt = try Self.section(u64(layout.namesOffsetOffset), count: nameCount, size: layout.nameEntrySize, in: bytes.count, "names")
        let stringsAt = try Self.section(u64(layout.stringsOffsetOffset), count: Int(clamping: u64(layout.stringsSizeOffset)), size: 1,
                                         in: bytes.count, "strings")
        self.bytes = bytes
        places = base + placesAt
        names = base + namesAt
        strings = UnsafeRawBufferPointer(start: base + stringsAt, count: Int(u64(layout.stringsSizeOffset)))
        descriptionOffset = u32(layout.descriptionOffset)
        try validateContents()
    }

    /// Where a section of `count` items of `size` bytes starts, after checking it lies inside the file.
    static func section(_ offset: UInt64, count: Int, size: Int, in fileSize: Int, _ name: String) throws(PlaceIndexError) -> Int {
        let (length, overflow) = count.multipliedReportingOverflow(by: size)
        guard !overflow, offset >= UInt64(PlaceIndexLayout.headerSize), offset <= UInt64(fileSize),
              UInt64(length) <= UInt64(fileSize) - offset else {
            throw .malformed("the \(name) section (\(count) at offset \(offset)) lies outside the file's \(fileSize) bytes")
        }
        return Int(offset)
    }

    func validateContents() throws(PlaceIndexError) {
        guard stringIsValid(descriptionOffset, utf8: true) else { throw .malformed("the description string") }
        let scale = Int32(PlaceIndexLayout.degreeScale)
        for place in 0..<placeCount {
            let record = self.record(place)
            let latitude = record.int32(PlaceIndexLayout.latitudeField), longitude = record.int32(PlaceIndexLayout.longitudeField)
            guard latitude >= -90 * scale, latitude <= 90 * scale, longitude >= -180 * scale, longitude <= 180 * scale else {
                throw .malformed("place \(place): coordinates out of range")
            }
            guard stringIsValid(record.nameOffset, utf8: true), stringIsValid(record.admin1Offset, utf8: true),
                  stringIsValid(record.timeZoneOffset, utf8: true), stringIsValid(record.featureCodeOffset, utf8: true) else {
                throw .malformed("place \(place): a string outside the strings section or not UTF-8")
            }
            guard record.flags & PlaceIndexLayout.axisMask <= 2,
                  (record.flags & PlaceIndexLayout.siteFlag != 0) == (place >= siteStart) else {
                throw .malformed("place \(place): flags \(record.flags)")
            }
        }
        for entry in 0..<nameCount {
            let key = nameKeyOffset(entry), place = namePlace(entry)
            guard place < placeCount, stringIsValid(key, utf8: false) else { throw .malformed("name entry \(entry)") }
        }
    }

    @_noAllocation
    func stringIsValid(_ offset: UInt32, utf8: Bool) -> Bool {
        let start = Int(offset)
        guard start <= strings.count - 2 else { return false }
        let length = Int(UInt16(littleEndian: strings.loadUnaligned(fromByteOffset: start, as: UInt16.self)))
        guard length <= strings.count - 2 - start else { return false }
        return !utf8 || UTF8Validation.firstInvalidByte(in: UnsafeRawBufferPointer(rebasing: strings[(start + 2)..<(start + 2 + length)])) == nil
    }

    // MARK: reading (every offset was checked when the index was opened)

    /// The bytes of the string at `offset`.
    @_noAllocation
    public func string(_ offset: UInt32) -> UnsafeRawBufferPointer {
        let start = Int(offset)
        let length = Int(UInt16(littleEndian: strings.loadUnaligned(fromByteOffset: start, as: UInt16.self)))
        return UnsafeRawBufferPointer(rebasing: strings[(start + 2)..<(start + 2 + length)])
    }

    /// What `locus geo index` wrote as the index's origin ("cities15000.txt: 34,006 places; ...").
    public var sourceDescription: UnsafeRawBufferPointer { string(descriptionOffset) }

    @_noAllocation
    public func record(_ place: Int) -> PlaceRecord {
        PlaceRecord(base: places + place * PlaceIndexLayout.recordSize)
    }

    @_noAllocation
    func nameKeyOffset(_ entry: Int) -> UInt32 {
        UInt32(littleEndian: names.loadUnaligned(fromByteOffset: entry * PlaceIndexLayout.nameEntrySize, as: UInt32.self))
    }

    @_noAllocation
    func namePlace(_ entry: Int) -> Int {
        Int(UInt32(littleEndian: names.loadUnaligned(fromByteOffset: entry * PlaceIndexLayout.nameEntrySize + 4, as: UInt32.self)))
    }

    @_noAllocation
    func nameKey(_ entry: Int) -> UnsafeRawBufferPointer { string(nameKeyOffset(entry)) }
}

/// One place's record in a mapped index.
public struct PlaceRecord {
    let base: UnsafeRawPointer

    @inline(__always)
    func int32(_ offset: Int) -> Int32 { Int32(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: Int32.self)) }
    @inline(__always)
    func uint32(_ offset: Int) -> UInt32 { UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }

    var flags: UInt8 { base.load(fromByteOffset: PlaceIndexLayout.flagsField, as: UInt8.self) }
    var axis: Int { Int(flags & PlaceIndexLayout.axisMask) }

    /// ECEF coordinate `axis` (0 x, 1 y, 2 z), centimetres.
    @inline(__always)
    func ecef(_ axis: Int) -> Int32 { int32(axis * 4) }

    public var latitude: Double { Double(int32(PlaceIndexLayout.latitudeField)) / PlaceIndexLayout.degreeScale }
    public var longitude: Double { Double(int32(PlaceIndexLayout.longitudeField)) / PlaceIndexLayout.degreeScale }
    public var population: UInt32 { uint32(PlaceIndexLayout.populationField) }
    public var geonameID: UInt32 { uint32(PlaceIndexLayout.geonameIDField) }
    public var isSite: Bool { flags & PlaceIndexLayout.siteFlag != 0 }
    public var featureClass: UInt8 { base.load(fromByteOffset: PlaceIndexLayout.featureClassField, as: UInt8.self) }
    var nameOffset: UInt32 { uint32(PlaceIndexLayout.nameField) }
    var admin1Offset: UInt32 { uint32(PlaceIndexLayout.admin1Field) }
    var timeZoneOffset: UInt32 { uint32(PlaceIndexLayout.timeZoneField) }
    var featureCodeOffset: UInt32 { uint32(PlaceIndexLayout.featureCodeField) }
    /// The ISO country code's two bytes, or (0x20, 0x20) when the place has none.
    public var countryBytes: (UInt8, UInt8) {
        (base.load(fromByteOffset: PlaceIndexLayout.countryField, as: UInt8.self),
         base.load(fromByteOffset: PlaceIndexLayout.countryField + 1, as: UInt8.self))
    }
    public var hasCountry: Bool { countryBytes.0 != 0x20 }
}

extension PlaceIndex {
    public func name(of record: PlaceRecord) -> UnsafeRawBufferPointer { string(record.nameOffset) }
    public func admin1(of record: PlaceRecord) -> UnsafeRawBufferPointer { string(record.admin1Offset) }
    public func timeZone(of record: PlaceRecord) -> UnsafeRawBufferPointer { string(record.timeZoneOffset) }
    public func featureCode(of record: PlaceRecord) -> UnsafeRawBufferPointer { string(record.featureCodeOffset) }
}
