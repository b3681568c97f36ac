import CLocus
import LocusCore

/// Why TLS could not be set up or went wrong, in a sentence a technician can act on ("unknown
/// CA: ...", "wrong host name: ...", "expired certificate: ...").
public struct TLSError: Error, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The uplink's trust anchors and, for mutual TLS, its own certificate and key: read once (at
/// start and on reload), shared by its connections.
public final class TLSConfiguration {
    let pointer: OpaquePointer

    public init(caFile: String, certificateFile: String? = nil, keyFile: String? = nil) throws(TLSError) {
        var message = [CChar](repeating: 0, count: 512)
        let made: OpaquePointer? = message.withUnsafeMutableBufferPointer { text in
            caFile.withCString { ca in
                withOptionalCString(certificateFile) { certificate in
                    withOptionalCString(keyFile) { key in locus_tls_config_new(ca, certificate, key, text.baseAddress, text.count) }
                }
            }
        }
        guard let made else { throw TLSError(terminated(message)) }
        pointer = made
    }

    deinit { locus_tls_config_free(pointer) }
}

/// A TLS client session over a connected `TCPConnection` (which it keeps alive): the handshake
/// and then reads and writes, none of which blocks. The server's certificate is verified against
/// the configuration's CA and `hostName` always; nothing turns that off.
public final class TLSSession {
    public enum Handshake: Equatable {
        case done
        case wouldBlock(wantsWrite: Bool)
        case failed(TLSError)
    }

    private let session: OpaquePointer
    public let connection: TCPConnection
    /// Keeps the configuration alive as long as the session uses it.
    private let configuration: TLSConfiguration

    public init(configuration: TLSConfiguration, connection: TCPConnection, hostName: String) throws(TLSError) {
        var message = [CChar](repeating: 0, count: 512)
        let made: OpaquePointer? = message.withUnsafeMutableBufferPointer { text in
            hostName.withCString { locus_tls_new(configuration.pointer, connection.descriptor.rawValue, $0, text.baseAddress, text.count) }
        }
        guard let made else { throw TLSError(terminated(message)) }
        session = made
        self.connection = connection
        self.configuration = configuration
    }

    deinit { locus_tls_free(session) }

    /// One step of the handshake; repeat when the socket is ready as asked.
    public func handshake() -> Handshake {
        let result = locus_tls_handshake(session)
        switch result {
        case 0: return .done
        case Int32(LOCUS_TLS_WANT_READ): return .wouldBlock(wantsWrite: false)
        case Int32(LOCUS_TLS_WANT_WRITE): return .wouldBlock(wantsWrite: true)
        default: return .failed(explain(result))
        }
    }

    /// "TLSv1.2 TLS-ECDHE-RSA-WITH-AES-256-GCM-SHA384", after the handshake.
    public var agreed: String {
        var text = [CChar](repeating: 0, count: 128)
        text.withUnsafeMutableBufferPointer { locus_tls_describe_session(session, $0.baseAddress, $0.count) }
        return terminated(text)
    }

    /// The length of a write mbedTLS could not finish: it must be called again with the same
    /// bytes and length (its record is already encrypted; a longer length would be counted as
    /// sent without being sent).
    private var interruptedWrite: Int? = nil

    /// Writes the front of `bytes` (at most one TLS record); after `.wouldBlock`, call again with
    /// the same bytes at the front (more may follow them).
    public func write(_ bytes: UnsafeRawBufferPointer) -> StreamTransfer {
        guard bytes.count > 0 else { return .bytes(0) }
        let count = min(interruptedWrite ?? bytes.count, bytes.count, TLSSession.maximumRecordBytes)
        let result = transfer(locus_tls_write(session, bytes.baseAddress, count))
        if case .wouldBlock = result { interruptedWrite = count } else { interruptedWrite = nil }
        return result
    }

    /// TLS's largest record payload: one write takes at most this.
    public static let maximumRecordBytes = 16_384

    public func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamTransfer {
        let result = locus_tls_read(session, buffer.baseAddress, buffer.count)
        return result == 0 ? .closed : transfer(result)
    }

    /// Decrypted bytes waiting: read them before polling the socket again.
    public var pending: Int { locus_tls_pending(session) }

    /// close_notify, best effort; the connection closes with the objects.
    public func close() { locus_tls_close_notify(session) }

    private func transfer(_ result: Int) -> StreamTransfer {
        if result > 0 { return .bytes(result) }
        if result == Int(LOCUS_TLS_WANT_READ) { return .wouldBlock(wantsWrite: false) }
        if result == Int(LOCUS_TLS_WANT_WRITE) { return .wouldBlock(wantsWrite: true) }
        return .failed(explain(Int32(truncatingIfNeeded: result)).message)
    }

    private func explain(_ error: Int32) -> TLSError {
        var text = [CChar](repeating: 0, count: 512)
        text.withUnsafeMutableBufferPointer { locus_tls_explain(session, error, $0.baseAddress, $0.count) }
        return TLSError(terminated(text))
    }
}

/// The text of a NUL-terminated C buffer.
private func terminated(_ buffer: [CChar]) -> String {
    buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

/// `body` with a C string for `text`, or NULL for nil.
private func withOptionalCString<Result>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> Result) -> Result {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
}
