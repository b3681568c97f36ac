import CLocus

/// Whole-file helpers for start-up work (config files), where allocation is allowed.
public enum Files {
    /// Reads a whole file; files larger than `limit` bytes are refused rather than read.
    public static func read(_ path: String, limit: Int = 64 << 20) throws(SystemError) -> [UInt8] {
        let fd = try check(locus_open(path, Int32(LOCUS_O_READ), 0))
        defer { _ = locus_close(fd) }
        let size = try check(locus_file_size(fd))
        if locus_is_directory(path) == 1 { throw SystemError.isDirectory }
        if size > Int64(limit) { throw SystemError(code: 27) } // EFBIG
        var bytes = [UInt8](repeating: 0, count: Int(size))
        var filled = 0
        // Bounded: a file that grows while read stops at its size when opened.
        while filled < bytes.count {
            let result = bytes.withUnsafeMutableBytes { buffer in
                locus_read(fd, buffer.baseAddress! + filled, buffer.count - filled)
            }
            let count = Int(try check(result))
            if count == 0 { bytes.removeLast(bytes.count - filled); break }
            filled += count
        }
        return bytes
    }

    public static func isDirectory(_ path: String) -> Bool { locus_is_directory(path) == 1 }
}
