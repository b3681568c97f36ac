import CLocus

/// The fleet's signatures over its configurations and commands (docs/remote.md): ECDSA P-256
/// with SHA-256, checked by the mbedTLS the uplink's TLS links anyway.
public enum Signatures {
    /// SHA-256 of `bytes`.
    public static func sha256(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        digest.withUnsafeMutableBufferPointer { locus_sha256(bytes.baseAddress, bytes.count, $0.baseAddress) }
        return digest
    }

    /// The base64 of the DER signature of `message` with the PEM private key `key` (EC P-256,
    /// deterministic: the same message and key give the same signature), or why not.
    public static func sign(key: [UInt8], message: UnsafeRawBufferPointer) -> Result<String, SignatureError> {
        var signature = [CChar](repeating: 0, count: 200)
        var why = [CChar](repeating: 0, count: 256)
        let result = key.withUnsafeBytes { pem in
            signature.withUnsafeMutableBufferPointer { out in
                why.withUnsafeMutableBufferPointer { text in
                    locus_signature_sign(pem.baseAddress, pem.count, message.baseAddress, message.count, out.baseAddress, out.count,
                                         text.baseAddress, text.count)
                }
            }
        }
        guard result == 0 else { return .failure(SignatureError(description: text(why))) }
        return .success(text(signature))
    }

    public struct SignatureError: Error, CustomStringConvertible {
        public let description: String
    }

    private static func text(_ buffer: [CChar]) -> String {
        let end = buffer.firstIndex(of: 0) ?? buffer.count
        return String(decoding: buffer[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// nil when `signature` (base64 of a DER ECDSA signature) signs `message` under the PEM
    /// public key `key`; otherwise why not, in a sentence.
    public static func verify(key: [UInt8], message: UnsafeRawBufferPointer, signature: UnsafeRawBufferPointer) -> String? {
        var why = [CChar](repeating: 0, count: 256)
        let result = key.withUnsafeBytes { pem in
            why.withUnsafeMutableBufferPointer { text in
                locus_signature_verify(pem.baseAddress, pem.count, message.baseAddress, message.count, signature.baseAddress, signature.count,
                                       text.baseAddress, text.count)
            }
        }
        guard result != 0 else { return nil }
        return text(why)
    }
}
