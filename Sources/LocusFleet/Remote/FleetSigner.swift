import CLocus
import LocusCore
import LocusDevices

/// The fleet's signature on what it sends the gateways (docs/remote.md, "The signed message"):
/// ECDSA on P-256 over SHA-256 of the body, the DER signature in base64 on the message's last
/// line. The key is PEM (SEC1 `BEGIN EC PRIVATE KEY` or PKCS#8), as `locus-fleet config keygen`
/// or `openssl ecparam -name prime256v1 -genkey -noout` writes it. mbedTLS does the
/// cryptography (CLocus/Sign.c).
public struct FleetSigner: Sendable {
    public static let signaturePrefix = "# locus-signature: "
    public static let algorithm = "ecdsa-p256-sha256"

    let privateKeyPEM: [UInt8]
    /// Where the key came from, for messages.
    public let path: String

    /// Reads and checks the private key (an EC key on P-256).
    public init(keyFile path: String) throws(FleetError) {
        let bytes: [UInt8]
        do {
            bytes = try Files.read(path, limit: 64 * 1024)
        } catch {
            throw FleetError("cannot read the signing key \(path): \(error)")
        }
        self.path = path
        privateKeyPEM = bytes
        _ = try publicKeyPEM()
    }

    /// A sentence when other users may read the key file (it should be 0600, as keygen writes it).
    public var exposure: String? {
        var kind: Int32 = 0, major: UInt32 = 0, minor: UInt32 = 0, mode: UInt32 = 0, group: UInt32 = 0
        guard locus_stat_node(path, &kind, &major, &minor, &mode, &group) == 0, mode & 0o077 != 0 else { return nil }
        return "the signing key \(path) is readable by other users (mode \(String(mode & 0o777, radix: 8))): chmod 600 \(path)"
    }

    /// The public key of this private key, PEM (`BEGIN PUBLIC KEY`): what the gateways hold.
    public func publicKeyPEM() throws(FleetError) -> String {
        var output = [CChar](repeating: 0, count: Int(LOCUS_SIGN_PEM_BYTES))
        var message = [CChar](repeating: 0, count: 256)
        let result = privateKeyPEM.withUnsafeBytes { key in
            locus_sign_public_key(key.baseAddress?.assumingMemoryBound(to: CChar.self), key.count, &output, output.count,
                                  &message, message.count)
        }
        guard result == 0 else { throw FleetError("the signing key \(path): \(Self.text(message))") }
        return Self.text(output)
    }

    /// The DER signature of `body`.
    public func signature(of body: [UInt8]) throws(FleetError) -> [UInt8] {
        let signed = body.withUnsafeBytes { Signatures.sign(privateKey: privateKeyPEM, $0) }
        switch signed {
        case .success(let signature): return signature
        case .failure(let failure): throw FleetError("signing with \(path): \(failure.description)")
        }
    }

    /// `body` (which ends with a newline) followed by its signature line.
    public func signed(_ body: String) throws(FleetError) -> String {
        precondition(body.hasSuffix("\n"), "a signed body ends with a newline")
        let signature = try signature(of: Array(body.utf8))
        return body + Self.signaturePrefix + Self.algorithm + " " + Base64.encode(signature) + "\n"
    }

    /// Whether `signature` (DER) signs `body` under `publicKeyPEM`; throws when the key cannot be read.
    public static func verify(publicKeyPEM: String, body: [UInt8], signature: [UInt8]) throws(FleetError) -> Bool {
        let checked = body.withUnsafeBytes { Signatures.verify(publicKey: Array(publicKeyPEM.utf8), $0, signature: signature) }
        switch checked {
        case .success(let valid): return valid
        case .failure(let failure): throw FleetError(failure.description)
        }
    }

    /// A new key pair: `path` (the private key, mode 0600) and `path` with the extension `.pub`
    /// (the public key, 0644); neither may exist. Returns the public key's path.
    public static func generate(at path: String) throws(FleetError) -> String {
        let publicPath = publicKeyPath(for: path)
        for existing in [path, publicPath] where locus_is_directory(existing) >= 0 {
            throw FleetError("\(existing) exists already: the key pair is not overwritten (remove it first, or give another --out)")
        }
        var privatePEM = [CChar](repeating: 0, count: Int(LOCUS_SIGN_PEM_BYTES))
        var publicPEM = [CChar](repeating: 0, count: Int(LOCUS_SIGN_PEM_BYTES))
        var message = [CChar](repeating: 0, count: 256)
        guard locus_sign_generate(&privatePEM, privatePEM.count, &publicPEM, publicPEM.count, &message, message.count) == 0 else {
            throw FleetError(text(message))
        }
        try createNew(path, Array(text(privatePEM).utf8), mode: 0o600)
        do {
            try createNew(publicPath, Array(text(publicPEM).utf8), mode: 0o644)
        } catch {
            _ = Files.remove(path)
            throw error
        }
        return publicPath
    }

    /// `fleet.key` → `fleet.pub`; a name without an extension gets `.pub` added.
    public static func publicKeyPath(for path: String) -> String {
        let slash = path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex
        let name = path[slash...]
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            return String(path[..<dot]) + ".pub"
        }
        return path + ".pub"
    }

    /// Writes a file that must not exist yet (O_EXCL), synced.
    static func createNew(_ path: String, _ bytes: [UInt8], mode: Int32) throws(FleetError) {
        let fd = locus_open(path, Int32(LOCUS_O_WRITE | LOCUS_O_CREATE | LOCUS_O_EXCLUSIVE), mode)
        guard fd >= 0 else { throw FleetError("cannot create \(path): \(SystemError(code: -fd))") }
        var result = Int(bytes.withUnsafeBytes { locus_write_all(fd, $0.baseAddress, $0.count) })
        if result >= 0 { result = Int(locus_fsync(fd)) }
        _ = locus_close(fd)
        if result < 0 {
            _ = locus_unlink(path)
            throw FleetError("cannot write \(path): \(SystemError(code: Int32(truncatingIfNeeded: -result)))")
        }
    }

    static func text(_ characters: [CChar]) -> String {
        String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
