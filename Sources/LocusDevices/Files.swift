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

extension Files {
    /// Reads `path` ("-" for standard input) in chunks through one fixed buffer, handing each
    /// chunk to `body`; for inputs too large to hold (NMEA logs, captures).
    public static func stream(_ path: String, chunkSize: Int = 4096, _ body: (UnsafeRawBufferPointer) -> Void) throws(SystemError) {
        let fd: Int32
        if path == "-" {
            fd = 0
        } else {
            if locus_is_directory(path) == 1 { throw SystemError.isDirectory }
            fd = try check(locus_open(path, Int32(LOCUS_O_READ), 0))
        }
        defer { if fd != 0 { _ = locus_close(fd) } }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let count = Int(try check(locus_read(fd, buffer.baseAddress, chunkSize)))
            if count == 0 { return }
            body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        }
    }
}

extension Files {
    /// Creates `path` (one level) with `mode` unless it is already a directory; nil on success.
    public static func makeDirectory(_ path: String, mode: Int32) -> SystemError? {
        let made = locus_mkdir(path, mode)
        if made == 0 { return nil }
        if locus_is_directory(path) == 1 { return nil }
        return SystemError(code: -made)
    }
}
