import CLocus

/// An errno value from a failed system call, with the C constant's name where it matters (the
/// values come from <errno.h> through CLocus, never from literals).
public struct SystemError: Error, Equatable, CustomStringConvertible {
    public let code: Int32

    public init(code: Int32) { self.code = code }

    /// From a CLocus return value (`-errno`).
    init(negated result: some BinaryInteger) {
        code = -Int32(truncatingIfNeeded: result)
    }

    public static let operationNotPermitted = SystemError(LOCUS_EPERM)
    public static let notFound = SystemError(LOCUS_ENOENT)
    public static let interrupted = SystemError(LOCUS_EINTR)
    public static let ioError = SystemError(LOCUS_EIO)
    public static let noSuchDeviceOrAddress = SystemError(LOCUS_ENXIO)
    /// EAGAIN (= EWOULDBLOCK on Linux).
    public static let wouldBlock = SystemError(LOCUS_EAGAIN)
    public static let permissionDenied = SystemError(LOCUS_EACCES)
    public static let busy = SystemError(LOCUS_EBUSY)
    public static let exists = SystemError(LOCUS_EEXIST)
    public static let noDevice = SystemError(LOCUS_ENODEV)
    public static let isDirectory = SystemError(LOCUS_EISDIR)
    public static let invalidArgument = SystemError(LOCUS_EINVAL)
    public static let fileTooLarge = SystemError(LOCUS_EFBIG)
    public static let noSpace = SystemError(LOCUS_ENOSPC)

    /// A CLocus errno constant (`LOCUS_E*`, from <errno.h>).
    init(_ constant: Int) { code = Int32(constant) }

    public var description: String { String(cString: locus_strerror(code)) }
}

/// Maps a CLocus result (>= 0 success, < 0 `-errno`) to a typed result.
@inline(__always)
func check<T: BinaryInteger>(_ result: T) throws(SystemError) -> T {
    if result < 0 { throw SystemError(negated: result) }
    return result
}
