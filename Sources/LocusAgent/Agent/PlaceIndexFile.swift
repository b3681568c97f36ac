import LocusCore
import LocusDevices

/// The site's place index (`[geocoding] index`): the file mapped read-only and checked
/// (`PlaceIndex`), for as long as this object lives. The agent keeps the one it opened at start
/// until it exits (in `LoadedConfig`), so every `PlaceLabels` over it stays valid; a SIGHUP
/// opens the file again only to find the circles' places.
final class PlaceIndexFile {
    let path: String
    let index: PlaceIndex
    private let file: MappedFile

    private init(path: String, file: MappedFile, index: PlaceIndex) {
        self.path = path
        self.file = file
        self.index = index
    }

    /// Why an index cannot be used, in a sentence.
    struct Refusal: Error {
        let reason: String
    }

    /// The index at `path`, or why it cannot be used: the system's reason for a file that
    /// cannot be mapped, `PlaceIndexError`'s for one that is not a usable index.
    static func open(_ path: String) -> Result<PlaceIndexFile, Refusal> {
        let file: MappedFile
        do { file = try MappedFile(path: path) } catch {
            let hint = path == SiteConfig.Geocoding.installedIndex
                ? " (the locus package installs it; or build one with 'locus geo index' and name it in [geocoding] index)"
                : " (build one with 'locus geo index')"
            return .failure(Refusal(reason: "cannot open it: \(error)\(hint)"))
        }
        do throws(PlaceIndexError) {
            return .success(PlaceIndexFile(path: path, file: file, index: try PlaceIndex(bytes: file.bytes)))
        } catch {
            return .failure(Refusal(reason: error.description))
        }
    }

    /// "34,006 places (2 the site's)" for check-config.
    var summary: String {
        "\(index.placeCount) places (\(index.placeCount - index.siteStart) the site's)"
    }
}
