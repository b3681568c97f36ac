/// The place index file, written by `locus geo index` (`PlaceIndexBuilder`) and mapped read-only
/// by the agent (`PlaceIndex`). Little-endian; every section starts on an 8-byte boundary.
///
///     header      96 bytes (below)
///     places      48 bytes each: the gazetteer's places as one implicit k-d tree, then the
///                 site's own places as a second one
///     names        8 bytes each: (folded name's string offset, place), sorted by the folded
///                 name's bytes, then site places first, then population (largest first)
///     strings     length-prefixed UTF-8 (UInt16 length, then the bytes); offset 0 is ""
///
/// Header:
///
///     0   magic "LOCUSPLC"        8   version (1)             12  header size (96)
///     16  file size (UInt64)      24  CRC32C of every byte after the header
///     28  place count             32  first site place (= gazetteer place count)
///     36  name entry count        40  places offset (UInt64)  48  names offset (UInt64)
///     56  strings offset (UInt64) 64  strings size (UInt64)   72  description (string offset)
///     76...95 zero
///
/// A place record:
///
///     0   x, y, z: Int32, ECEF at height 0, centimetres (the chord bound of the nearest search)
///     12  latitude, longitude: Int32, 1e-7 degree (about 1 cm): the place's coordinates
///     20  population (UInt32)     24  GeoNames id (UInt32, 0 for a site place)
///     28  name                    32  administrative area (admin1) name
///     36  time zone               40  feature code          (string offsets)
///     44  country code (2 ASCII bytes, spaces when none)
///     46  feature class (ASCII, `P` populated place; `S` for a site's place)
///     47  flags: bits 0–1 the k-d tree's split axis at this node (0 x, 1 y, 2 z), bit 2 site
///
/// The k-d trees are implicit: the node of the range [lo, hi) is the record at (lo + hi) / 2,
/// its children the ranges either side of it, split on the axis in its flags.
public enum PlaceIndexLayout {
    public static let magic: [UInt8] = [0x4C, 0x4F, 0x43, 0x55, 0x53, 0x50, 0x4C, 0x43] // LOCUSPLC
    public static let version: UInt32 = 1
    public static let headerSize = 96
    public static let recordSize = 48
    public static let nameEntrySize = 8
    /// Fixed-point scale of latitude and longitude: 1e-7 degree.
    public static let degreeScale = 10_000_000.0
    /// Scale of the ECEF coordinates: centimetres.
    public static let ecefScale = 100.0
    /// The largest string a record or name may hold (its length is a UInt16).
    public static let maximumStringBytes = 0xFFFF

    static let siteFlag: UInt8 = 0b100
    static let axisMask: UInt8 = 0b011

    // Header field offsets.
    static let versionOffset = 8, headerSizeOffset = 12, fileSizeOffset = 16, checksumOffset = 24
    static let placeCountOffset = 28, siteStartOffset = 32, nameCountOffset = 36
    static let placesOffsetOffset = 40, namesOffsetOffset = 48, stringsOffsetOffset = 56
    static let stringsSizeOffset = 64, descriptionOffset = 72

    // Record field offsets.
    static let latitudeField = 12, longitudeField = 16, populationField = 20, geonameIDField = 24
    static let nameField = 28, admin1Field = 32, timeZoneField = 36, featureCodeField = 40
    static let countryField = 44, featureClassField = 46, flagsField = 47

    /// The fixed-point form of a coordinate, as the index stores it.
    @_noAllocation
    public static func fixedPoint(_ degrees: Double) -> Int32 {
        Int32(LibM.round(degrees * degreeScale))
    }
}
