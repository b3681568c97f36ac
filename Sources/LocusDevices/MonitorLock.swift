import CLocus

/// One open instance per monitor name across processes (CLMonitor's rule): an exclusive flock on
/// `STATE/NAME.lock`, which holds the holder's pid for the error message. The kernel releases the
/// lock when the process ends, however it ends, so a crash never leaves a stale lock.
public final class MonitorLock {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// Another process has the monitor open.
        case held(name: String, pid: Int32?, path: String)
        case system(SystemError, path: String)

        public var description: String {
            switch self {
            case .held(let name, let pid, let path):
                let holder = pid.map { "process \($0)" } ?? "another process"
                return "monitor '\(name)' is already open in \(holder) (lock \(path)); stop it first or use another monitor name"
            case .system(let error, let path):
                return "cannot lock \(path): \(error)"
            }
        }
    }

    public let path: String
    private let descriptor: Int32

    public init(directory: String, name: String) throws(Failure) {
        let path = Paths.join(directory, name + ".lock")
        let fd = locus_open(path, Int32(LOCUS_O_READ | LOCUS_O_WRITE | LOCUS_O_CREATE), 0o640)
        guard fd >= 0 else { throw .system(SystemError(code: -fd), path: path) }
        let locked = locus_lock_exclusive(fd)
        if locked < 0 {
            var bytes = [UInt8](repeating: 0, count: 32)
            let count = bytes.withUnsafeMutableBytes { locus_pread(fd, $0.baseAddress, $0.count, 0) }
            _ = locus_close(fd)
            var pid: Int32? = nil
            if count > 0 {
                var value: Int32 = 0
                var digits = 0
                for byte in bytes[0..<Int(count)] where byte >= 0x30 && byte <= 0x39 && digits < 9 {
                    value = value * 10 + Int32(byte - 0x30)
                    digits += 1
                }
                if digits > 0 { pid = value }
            }
            if locked == -11 { throw .held(name: name, pid: pid, path: path) }
            throw .system(SystemError(code: -locked), path: path)
        }
        _ = locus_ftruncate(fd, 0)
        var text = "\(locus_getpid())\n"
        text.withUTF8 { _ = locus_write(fd, $0.baseAddress, $0.count) }
        self.path = path
        descriptor = fd
    }

    deinit { _ = locus_close(descriptor) }
}
