import CLocus

/// Whole-file helpers for start-up work (config files), where allocation is allowed.
public enum Files {
    /// Reads a whole file; files larger than `limit` bytes are refused rather than read.
    public static func read(_ path: String, limit: Int = 64 << 20) throws(SystemError) -> [UInt8] {
        let fd = try check(locus_open(path, Int32(LOCUS_O_READ), 0))
        defer { _ = locus_close(fd) }
        let size = try check(locus_file_size(fd))
        if locus_is_directory(path) == 1 { throw SystemError.isDirectory }
        if size > Int64(limit) { throw SystemError.fileTooLarge }
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

    /// The permission bits of `path` and its owner.
    public static func mode(_ path: String) -> Result<(mode: Int32, owner: UInt32), SystemError> {
        var owner: UInt32 = 0
        let mode = locus_file_mode(path, &owner)
        return mode < 0 ? .failure(SystemError(code: -mode)) : .success((Int32(mode), owner))
    }

    /// A secret kept in a file of its own (a broker password): its bytes without the line ends
    /// after them; nil when it cannot be read or holds more than 4 KiB.
    public static func readSecret(_ path: String) -> [UInt8]? {
        guard var bytes = try? read(path, limit: 4096) else { return nil }
        while let last = bytes.last, last == 0x0A || last == 0x0D { bytes.removeLast() }
        return bytes
    }
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

extension Files {
    /// Replaces `path` with `contents` atomically (a temporary file renamed over it), so a reader
    /// sees the old or the new contents, never a mix. nil on success.
    @discardableResult
    public static func replace(_ path: String, contents: String, mode: Int32 = 0o640) -> SystemError? {
        replace(path, bytes: Array(contents.utf8), mode: mode)
    }

    /// `replace` for bytes (a place index): written, synced, renamed over `path`, and the
    /// directory synced.
    @discardableResult
    public static func replace(_ path: String, bytes: [UInt8], mode: Int32 = 0o644) -> SystemError? {
        let temporary = path + ".new"
        let fd = locus_open(temporary, Int32(LOCUS_O_WRITE | LOCUS_O_CREATE | LOCUS_O_TRUNCATE), mode)
        if fd < 0 { return SystemError(code: -fd) }
        var written = Int(bytes.withUnsafeBytes { buffer in locus_write_all(fd, buffer.baseAddress, buffer.count) })
        if written >= 0 { written = Int(locus_fsync(fd)) }
        _ = locus_close(fd)
        if written < 0 {
            _ = locus_unlink(temporary)
            return SystemError(code: Int32(truncatingIfNeeded: -written))
        }
        let renamed = locus_rename(temporary, path)
        if renamed < 0 { return SystemError(code: -renamed) }
        // The rename is durable once the directory is: a power cut leaves the old or the new file.
        let directory = locus_open(Paths.directory(of: path), Int32(LOCUS_O_READ | LOCUS_O_DIRECTORY), 0)
        if directory < 0 { return SystemError(code: -directory) }
        let synced = locus_fsync(directory)
        _ = locus_close(directory)
        return synced < 0 ? SystemError(code: -synced) : nil
    }

    /// Removes a file or link. nil on success.
    @discardableResult
    /// A new directory "PARENT/PREFIX.XXXXXX" (mode 0700), for a run that keeps nothing.
    public static func makeTemporaryDirectory(prefix: String, in parent: String = "/tmp") -> Result<String, SystemError> {
        var template = Array("\(parent)/\(prefix).XXXXXX".utf8CString)
        let result = template.withUnsafeMutableBufferPointer { locus_make_temporary_directory($0.baseAddress) }
        guard result == 0 else { return .failure(SystemError(code: -result)) }
        return .success(template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
    }

    /// Removes `path` and everything under it; nil on success.
    public static func removeTree(_ path: String) -> SystemError? {
        let result = locus_remove_tree(path)
        return result < 0 ? SystemError(code: -result) : nil
    }

    public static func remove(_ path: String) -> SystemError? {
        let result = locus_unlink(path)
        return result < 0 ? SystemError(code: -result) : nil
    }

    /// Makes `path` a symbolic link to `target` (replacing what was there). nil on success.
    public static func symlink(_ target: String, at path: String) -> SystemError? {
        let result = locus_symlink(target, path)
        return result < 0 ? SystemError(code: -result) : nil
    }
}

extension Files {
    /// Opens `path` and closes it again. A pseudo-terminal's master hangs up only once its slave
    /// has been opened and closed, so a feed does this to tell when a reader really has the slave.
    public static func openAndClose(_ path: String) -> SystemError? {
        let fd = locus_open(path, Int32(LOCUS_O_READ | LOCUS_O_WRITE | LOCUS_O_NONBLOCK), 0)
        guard fd >= 0 else { return SystemError(code: -fd) }
        return close(fd)
    }

    public static func close(_ descriptor: Int32) -> SystemError? {
        let result = locus_close(descriptor)
        return result < 0 ? SystemError(code: -result) : nil
    }

    /// A pseudo-terminal pair: the master's descriptor and the slave's path.
    public static func openPseudoTerminal() -> Result<(master: Int32, slave: String), SystemError> {
        var name = [CChar](repeating: 0, count: 128)
        let master = name.withUnsafeMutableBufferPointer { locus_pty_open($0.baseAddress, $0.count) }
        if master < 0 { return .failure(SystemError(code: -master)) }
        let slave = name.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return .success((master, slave))
    }

    /// For a pseudo-terminal master: whether some process has the slave open (the master reports
    /// a hang-up while none does).
    public static func peerIsOpen(_ master: Int32) -> Bool { !hungUp(master) }

    /// Whether the other end of a pipe, socket or terminal has gone away.
    public static func hungUp(_ descriptor: Int32) -> Bool {
        var fd = descriptor
        var events = Int16(LOCUS_POLLOUT)
        var returned: Int16 = 0
        _ = locus_poll(&fd, &events, &returned, 1, 0)
        return returned & Int16(LOCUS_POLLHUP | LOCUS_POLLERR) != 0
    }

    /// Waits at most `timeoutMs` until `descriptor` is readable (or hung up); whether it is.
    public static func waitUntilReadable(_ descriptor: Int32, timeoutMs: Int32) -> Bool {
        var fd = descriptor
        var events = Int16(LOCUS_POLLIN)
        var returned: Int16 = 0
        return locus_poll(&fd, &events, &returned, 1, timeoutMs) > 0
    }

    /// Writes `bytes` to a non-blocking descriptor, waiting at most 100 ms for room. false when
    /// they could not all be written (the reader is not keeping up); a part already written stays.
    public static func writeSome(_ descriptor: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
        var offset = 0
        for _ in 0..<10 where offset < bytes.count {
            let count = bytes.withUnsafeBytes { locus_write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if count > 0 {
                offset += Int(count)
                continue
            }
            var fd = descriptor
            var events = Int16(LOCUS_POLLOUT)
            var returned: Int16 = 0
            _ = locus_poll(&fd, &events, &returned, 1, 10)
        }
        return offset == bytes.count
    }
}
