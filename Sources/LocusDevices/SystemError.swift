import CLocus

/// An errno value from a failed system call, with the C constant's name where it matters.
public struct SystemError: Error, Equatable, CustomStringConvertible {
    public let code: Int32

    public init(code: Int32) { self.code = code }

    /// From a CLocus return value (`-errno`).
    init(negated result: some BinaryInteger) {
        code = -Int32(truncatingIfNeeded: result)
    }

    public static let notFound = SystemError(code: 2)          // ENOENT
    public static let interrupted = SystemError(code: 4)       // EINTR
    public static let ioError = SystemError(code: 5)           // EIO
    public static let noSuchDeviceOrAddress = SystemError(code: 6) // ENXIO
    public static let wouldBlock = SystemError(code: 11)       // EAGAIN / EWOULDBLOCK
    public static let permissionDenied = SystemError(code: 13) // EACCES
    public static let busy = SystemError(code: 16)             // EBUSY
    public static let exists = SystemError(code: 17)           // EEXIST
    public static let noDevice = SystemError(code: 19)         // ENODEV
    public static let isDirectory = SystemError(code: 21)      // EISDIR
    public static let invalidArgument = SystemError(code: 22)  // EINVAL
    public static let noSpace = SystemError(code: 28)          // ENOSPC
    public static let operationNotPermitted = SystemError(code: 1) // EPERM

    public var description: String { String(cString: locus_strerror(code)) }
}

/// Maps a CLocus result (>= 0 success, < 0 `-errno`) to a typed result.
@inline(__always)
func check<T: BinaryInteger>(_ result: T) throws(SystemError) -> T {
    if result < 0 { throw SystemError(negated: result) }
    return result
}
