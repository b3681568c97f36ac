import CLocus
import LocusCore

/// A non-blocking UDP socket for one address family: the resolver's queries to the name servers
/// and their answers. Closed when the object goes.
public final class DatagramSocket {
    public let descriptor: Descriptor
    public let family: IPAddress.Family

    public init(family: IPAddress.Family) throws(SystemError) {
        let fd = locus_udp_open(family == .v4 ? 4 : 16)
        guard let descriptor = Descriptor(fd) else { throw SystemError(negated: fd) }
        self.descriptor = descriptor
        self.family = family
    }

    deinit { _ = locus_close(descriptor.rawValue) }

    /// Sends one datagram to `address`:`port`; nil when it went, else why not.
    public func send(_ bytes: UnsafeRawBufferPointer, to address: IPAddress, port: UInt16) -> SystemError? {
        var raw = [UInt8](repeating: 0, count: 16)
        for index in 0..<address.byteCount { raw[index] = address[index] }
        let sent = raw.withUnsafeBufferPointer {
            locus_udp_send(descriptor.rawValue, $0.baseAddress, address.byteCount, port, bytes.baseAddress, bytes.count)
        }
        return sent < 0 ? SystemError(negated: sent) : nil
    }

    /// One waiting datagram into `buffer`: its size and source, or nil when none is waiting.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> Result<(count: Int, source: IPAddress, port: UInt16), SystemError>? {
        var raw = [UInt8](repeating: 0, count: 16)
        var size = 0
        var port: UInt16 = 0
        let got = raw.withUnsafeMutableBufferPointer {
            locus_udp_receive(descriptor.rawValue, buffer.baseAddress, buffer.count, $0.baseAddress, &size, &port)
        }
        if got == -Int(LOCUS_EAGAIN) { return nil }
        if got < 0 { return .failure(SystemError(negated: got)) }
        guard let source = raw.withUnsafeBytes({ IPAddress(bytes: UnsafeRawBufferPointer(rebasing: $0[0..<size])) }) else {
            return .failure(.invalidArgument)
        }
        return .success((Int(got), source, port))
    }
}
