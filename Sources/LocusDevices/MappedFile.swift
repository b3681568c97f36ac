import CLocus

/// A whole file mapped read-only, for as long as this object lives: the place index. Its pages
/// are the page cache's (shared, clean, given back under memory pressure), so the mapping costs
/// no heap however large the file.
///
/// A file mapped must not shrink while mapped (reading a page past its new end raises SIGBUS):
/// `locus geo index -o` replaces its output by rename, a new file, and the README says to
/// install an index with `mv` or `install`, never by writing over it in place.
public final class MappedFile {
    public let bytes: UnsafeRawBufferPointer
    public let path: String

    public init(path: String) throws(SystemError) {
        let fd = try check(locus_open(path, Int32(LOCUS_O_READ), 0))
        defer { _ = locus_close(fd) }
        if locus_is_directory(path) == 1 { throw SystemError.isDirectory }
        let size = try check(locus_file_size(fd))
        self.path = path
        guard size > 0 else {
            bytes = UnsafeRawBufferPointer(start: nil, count: 0)
            return
        }
        guard size <= Int64(Int.max) else { throw SystemError.fileTooLarge }
        var error: Int32 = 0
        guard let address = locus_map_readonly(fd, size, &error) else { throw SystemError(code: -error) }
        bytes = UnsafeRawBufferPointer(start: address, count: Int(size))
    }

    deinit {
        if let base = bytes.baseAddress { _ = locus_unmap(UnsafeMutableRawPointer(mutating: base), Int64(bytes.count)) }
    }
}
