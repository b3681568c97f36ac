import CLocus
import LocusCore

// What host programs that block need (locus-fleet: import, ingest, migrate), over the same
// shim as the agent's calls. The agent never blocks: it waits only in its loop's poll(2), and
// none of this is on its path.

extension Descriptor {
    /// What a blocking caller waits for.
    public enum Readiness: Sendable { case readable, writable }

    /// poll(2) on this descriptor alone, at most `timeoutMs` (0: only look): whether it is ready.
    /// A hang-up or an error counts as ready (the next read or write says which). A signal
    /// handler's interruption is `.failure(.interrupted)`: the caller checks why it was woken.
    public func wait(until readiness: Readiness, timeoutMs: Int32) -> Result<Bool, SystemError> {
        var fd = rawValue
        var events = Int16(readiness == .readable ? LOCUS_POLLIN : LOCUS_POLLOUT)
        var returned: Int16 = 0
        let ready = locus_poll(&fd, &events, &returned, 1, timeoutMs)
        if ready < 0 { return .failure(SystemError(code: -ready)) }
        return .success(ready > 0)
    }
}

extension MonotonicClock {
    /// Sleeps `milliseconds` (a retry's delay in a host program); ends early when a stop signal
    /// arrives (`StopSignals`).
    public static func sleep(milliseconds: Int) {
        _ = locus_sleep_ms(Int32(clamping: milliseconds))
    }
}

/// SIGTERM and SIGINT as a request to stop that a long-running host program checks (its waits are
/// at most a second), rather than the end of the process; SIGPIPE ignored (a write to a closed
/// socket is an error there). Installed once, at start.
public enum StopSignals {
    public static func install() { locus_stop_signals_install() }
    public static var requested: Bool { locus_stop_requested() != 0 }
}

extension Files {
    /// The absolute path without symbolic links (realpath(3)); nil if it does not resolve.
    public static func canonicalPath(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let result = buffer.withUnsafeMutableBufferPointer { locus_realpath(path, $0.baseAddress, $0.count) }
        guard result == 0 else { return nil }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// The first `maximumBytes` bytes of a file (all of a shorter one).
    public static func readStart(_ path: String, maximumBytes: Int) throws(SystemError) -> [UInt8] {
        let file = try ReadableFile(path: path)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: maximumBytes, alignment: 1)
        defer { buffer.deallocate() }
        var filled = 0
        // Bounded: each read takes at least a byte or ends the loop.
        while filled < maximumBytes {
            let count = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))
            if count == 0 { break }
            filled += count
        }
        return Array(buffer[0..<filled])
    }
}

/// A file open for reading, read in the caller's chunks (a log to import, too large to hold);
/// closed when the object goes.
public final class ReadableFile {
    public let descriptor: Descriptor

    public init(path: String) throws(SystemError) {
        if locus_is_directory(path) == 1 { throw SystemError.isDirectory }
        guard let descriptor = Descriptor(try check(locus_open(path, Int32(LOCUS_O_READ), 0))) else { throw SystemError.invalidArgument }
        self.descriptor = descriptor
    }

    deinit { _ = locus_close(descriptor.rawValue) }

    /// Bytes read into `buffer`; 0 at the end of the file. EINTR is retried (bounded) in the shim.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        return Int(try check(locus_read(descriptor.rawValue, base, buffer.count)))
    }
}

#if !hasFeature(Embedded)
/// The host's resolver (getaddrinfo(3): /etc/hosts, DNS, nsswitch), for host programs. The agent
/// does not link it: its uplink reads /etc/hosts and asks DNS itself, inside its loop.
public enum HostResolver {
    /// At most this many distinct addresses of one name.
    public static let maximumAddresses = 16

    /// The name's addresses for a stream connection, in the resolver's order, or its reason.
    public static func addresses(of host: String) -> Result<[IPAddress], ResolveError> {
        let slot = Int(LOCUS_RESOLVE_ADDRESS_BYTES)
        var bytes = [UInt8](repeating: 0, count: maximumAddresses * slot)
        var sizes = [UInt8](repeating: 0, count: maximumAddresses)
        let count = bytes.withUnsafeMutableBufferPointer { addresses in
            sizes.withUnsafeMutableBufferPointer { locus_resolve(host, addresses.baseAddress, $0.baseAddress, Int32(maximumAddresses)) }
        }
        guard count >= 0 else { return .failure(ResolveError(reason: String(cString: locus_resolve_error(count)))) }
        var found: [IPAddress] = []
        for index in 0..<Int(count) {
            let address = bytes.withUnsafeBytes { all in
                IPAddress(bytes: UnsafeRawBufferPointer(rebasing: all[index * slot..<index * slot + Int(sizes[index])]))
            }
            if let address { found.append(address) }
        }
        return .success(found)
    }

    public struct ResolveError: Error, CustomStringConvertible, Sendable {
        public let reason: String
        public var description: String { reason }
    }
}
#endif
