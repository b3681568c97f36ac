import LocusCore

/// The byte stream to a broker once it is connected: plain TCP (`mqtt://`) or TLS over it
/// (`mqtts://`). One surface for the uplink's reads and writes.
public enum BrokerStream {
    case plain(TCPConnection)
    case tls(TLSSession)

    public var descriptor: Descriptor {
        switch self {
        case .plain(let connection): return connection.descriptor
        case .tls(let session): return session.connection.descriptor
        }
    }

    public func send(_ bytes: UnsafeRawBufferPointer) -> StreamTransfer {
        switch self {
        case .plain(let connection): return connection.send(bytes)
        case .tls(let session): return session.write(bytes)
        }
    }

    /// Reads what has arrived; each read re-arms quick ACKs (`TCPConnection.acknowledgeQuickly`).
    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> StreamTransfer {
        switch self {
        case .plain(let connection):
            let transfer = connection.receive(into: buffer)
            if case .bytes = transfer { connection.acknowledgeQuickly() }
            return transfer
        case .tls(let session):
            let transfer = session.read(into: buffer)
            if case .bytes = transfer { session.connection.acknowledgeQuickly() }
            return transfer
        }
    }

    /// Bytes TLS has decrypted and not yet handed over: read them before waiting on the socket.
    public var pending: Int {
        switch self {
        case .plain: return 0
        case .tls(let session): return session.pending
        }
    }

    /// TLS's close_notify (best effort); the socket closes when the objects go.
    public func close() {
        if case .tls(let session) = self { session.close() }
    }
}
