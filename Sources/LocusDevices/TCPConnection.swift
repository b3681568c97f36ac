import CLocus
import LocusCore

/// What a non-blocking read or write on a stream came to.
public enum StreamTransfer: Equatable {
    /// Bytes moved (> 0).
    case bytes(Int)
    /// Nothing now: poll for reading (or writing, for TLS renegotiation and handshakes) first.
    case wouldBlock(wantsWrite: Bool)
    /// The peer closed the connection (a read of 0, a TLS close_notify).
    case closed
    case failed(String)
}

/// A TCP connection to an address and port, made without blocking: the constructor starts it,
/// the caller polls the descriptor for writing, then `finishConnecting` says whether it worked.
/// Closed when the object goes.
public final class TCPConnection {
    public let descriptor: Descriptor
    public private(set) var isConnected: Bool
    public let address: IPAddress
    public let port: UInt16

    public init(to address: IPAddress, port: UInt16) throws(SystemError) {
        var raw: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var fd: Int32 = -1
        let count = address.byteCount
        let result = withUnsafeMutableBytes(of: &raw) { bytes in
            for index in 0..<count { bytes[index] = address[index] }
            return locus_tcp_connect(bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), count, port, &fd)
        }
        guard result >= 0, let descriptor = Descriptor(fd) else { throw SystemError(negated: result < 0 ? result : -Int32(LOCUS_EINVAL)) }
        self.descriptor = descriptor
        self.address = address
        self.port = port
        isConnected = result == 0
    }

    deinit { _ = locus_close(descriptor.rawValue) }

    /// After the descriptor polled writable while connecting: nil when the connection is made,
    /// else why not (ECONNREFUSED, ETIMEDOUT, ENETUNREACH...).
    public func finishConnecting() -> SystemError? {
        let error = locus_socket_error(descriptor.rawValue)
        if error < 0 { return SystemError(negated: error) }
        isConnected = true
        return nil
    }

    /// Our ACKs go out at once for a while (TCP_QUICKACK; the kernel ends it by itself): called
    /// after each read, so a broker's PUBACKs never wait on our delayed ACK behind its Nagle.
    public func acknowledgeQuickly() { locus_tcp_quickack(descriptor.rawValue) }

    public func send(_ bytes: UnsafeRawBufferPointer) -> StreamTransfer {
        guard bytes.count > 0 else { return .bytes(0) }
        let sent = locus_send(descriptor.rawValue, bytes.baseAddress, bytes.count)
        if sent > 0 { return .bytes(Int(sent)) }
        if sent == 0 || sent == -Int(LOCUS_EAGAIN) { return .wouldBlock(wantsWrite: true) }
        return .failed(SystemError(negated: sent).description)
    }

    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> StreamTransfer {
        let got = locus_recv(descriptor.rawValue, buffer.baseAddress, buffer.count)
        if got > 0 { return .bytes(Int(got)) }
        if got == 0 { return .closed }
        if got == -Int(LOCUS_EAGAIN) { return .wouldBlock(wantsWrite: false) }
        return .failed(SystemError(negated: got).description)
    }
}
