import CLocus
import LocusCore

/// The fleet's signatures over its configurations and commands (docs/remote.md): ECDSA P-256
/// with SHA-256 through mbedTLS (CLocus's Sign.c), the one wrapper both sides use: the fleet
/// signs, the gateway checks.
public enum Signatures {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// SHA-256 of `bytes`.
    public static func sha256(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        digest.withUnsafeMutableBufferPointer { locus_sha256(bytes.baseAddress, bytes.count, $0.baseAddress) }
        return digest
    }

    /// The DER signature of `body` with the private key `key` (PEM, SEC1 or PKCS#8; the ECDSA
    /// value is RFC 6979's: the same key and body give the same signature).
    public static func sign(privateKey key: [UInt8], _ body: UnsafeRawBufferPointer) -> Result<[UInt8], Failure> {
        var signature = [UInt8](repeating: 0, count: Int(LOCUS_SIGN_SIGNATURE_BYTES))
        var message = [CChar](repeating: 0, count: 256)
        let length = key.withUnsafeBytes { pem in
            locus_sign(pem.baseAddress?.assumingMemoryBound(to: CChar.self), pem.count, body.baseAddress, body.count,
                       &signature, signature.count, &message, message.count)
        }
        guard length > 0 else { return .failure(Failure(description: text(message))) }
        return .success(Array(signature[0..<length]))
    }

    /// Whether `signature` (DER) signs `body` under the public key `key` (PEM); a failure when
    /// the key cannot be read.
    public static func verify(publicKey key: [UInt8], _ body: UnsafeRawBufferPointer, signature: [UInt8]) -> Result<Bool, Failure> {
        var message = [CChar](repeating: 0, count: 256)
        let result = key.withUnsafeBytes { pem in
            locus_sign_verify(pem.baseAddress?.assumingMemoryBound(to: CChar.self), pem.count, body.baseAddress, body.count,
                              signature, signature.count, &message, message.count)
        }
        guard result >= 0 else { return .failure(Failure(description: text(message))) }
        return .success(result == 1)
    }

    /// nil when `signature` (the base64 of a DER signature, as a message's signature line has
    /// it) signs `message` under the fleet's public key `key`; otherwise why not, in a sentence.
    public static func verify(key: [UInt8], message: UnsafeRawBufferPointer, signature: UnsafeRawBufferPointer) -> String? {
        guard let der = Base64.decode(String(decoding: signature, as: UTF8.self)), !der.isEmpty, der.count <= Int(LOCUS_SIGN_SIGNATURE_BYTES) else {
            return "the signature is not the base64 of an ECDSA P-256 signature"
        }
        switch verify(publicKey: key, message, signature: der) {
        case .failure(let failure): return "the fleet's public key: \(failure.description)"
        case .success(true): return nil
        case .success(false): return "the signature does not verify with the fleet's public key (signed by another key, or the message was changed)"
        }
    }

    static func text(_ characters: [CChar]) -> String {
        String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
