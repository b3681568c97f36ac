import Glibc
import LocusCore
import LocusDevices

extension BrokerACL {
    /// What a run did to the logins of the output directory.
    public struct Outcome: Equatable {
        public var kept: [String] = []
        public var added: [String] = []
        public var removed: [String] = []
        /// The password file was given to the group `mosquitto` (false: the operator must let
        /// the broker's user read it).
        public var brokerGroup = false
        /// The fleet's login got a new password (false: kept).
        public var fleetPasswordNew = false
        public var directory = ""
    }

    /// Writes DIR/acl, DIR/passwords and DIR/credentials/<login>.password: the passwords of logins
    /// already there are kept, new logins get new ones, and the credentials of logins no longer
    /// named are removed (said in the outcome).
    public static func write(out: String, gateways: [String], prefix: Prefix, fleetUser: String) throws(Failure) -> Outcome {
        if let problem = problem(with: fleetUser) { throw Failure("--fleet-user '\(fleetUser)' cannot be a login: \(problem)") }
        if gateways.contains(fleetUser) {
            throw Failure("gateway '\(fleetUser)' has the fleet's own login name: give --fleet-user another name")
        }
        if prefix.gatewayLevel == 0, let id = gateways.first(where: { $0.hasPrefix("$") }) {
            throw Failure("gateway '\(id)' would make topics that start with '$', which the broker keeps from wildcards ($SYS): give the prefix a first level (locus/+)")
        }
        let credentials = out + "/credentials"
        for (path, mode) in [(out, Int32(0o755)), (credentials, Int32(0o700))] {
            if let error = Files.makeDirectory(path, mode: mode) { throw Failure("cannot make the directory \(path): \(error)") }
        }
        _ = chmod(credentials, 0o700)
        var outcome = Outcome()
        outcome.directory = absolute(out)
        let existing = try passwordFiles(credentials)
        var passwords: [(String, String)] = []
        for login in [fleetUser] + gateways {
            let path = "\(credentials)/\(login).password"
            if existing.contains(login) {
                guard let secret = Files.readSecret(path), !secret.isEmpty, let text = String(validating: secret, as: UTF8.self),
                      problem(withPassword: text) == nil else {
                    throw Failure("\(path) is not a password this command wrote (empty, unreadable or with ':' or a line end): remove it to make a new one")
                }
                passwords.append((login, text))
                if login != fleetUser { outcome.kept.append(login) }
            } else {
                let password = try newPassword()
                if let error = Files.replace(path, contents: password + "\n", mode: 0o600) { throw Failure("cannot write \(path): \(error)") }
                passwords.append((login, password))
                if login != fleetUser { outcome.added.append(login) } else { outcome.fleetPasswordNew = true }
            }
        }
        outcome.brokerGroup = try writePasswordFile(out + "/passwords", passwords)
        if let error = Files.replace(out + "/acl", contents: aclText(gateways: gateways, prefix: prefix, fleetUser: fleetUser), mode: 0o644) {
            throw Failure("cannot write \(out)/acl: \(error)")
        }
        let logins = Set([fleetUser] + gateways)
        for login in existing.sorted() where !logins.contains(login) {
            if let error = Files.remove("\(credentials)/\(login).password") { throw Failure("cannot remove \(credentials)/\(login).password: \(error)") }
            outcome.removed.append(login)
        }
        return outcome
    }

    static func problem(withPassword text: String) -> String? {
        text.contains(":") || text.contains("\n") || text.contains("\r") ? "it holds ':' or a line end" : nil
    }

    /// The logins of DIR's `*.password` files.
    static func passwordFiles(_ directory: String) throws(Failure) -> Set<String> {
        guard let stream = opendir(directory) else { throw Failure("cannot read the directory \(directory): \(String(cString: strerror(errno)))") }
        defer { closedir(stream) }
        var logins = Set<String>()
        while let entry = readdir(stream) {
            let name = withUnsafePointer(to: &entry.pointee.d_name) {
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            if name.hasSuffix(".password") && name.count > ".password".count { logins.insert(String(name.dropLast(".password".count))) }
        }
        return logins
    }

    /// 24 URL-safe characters (A-Z a-z 0-9 - _) from 18 bytes of /dev/urandom: 144 bits.
    static func newPassword() throws(Failure) -> String {
        let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure("cannot open /dev/urandom: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 18)
        var filled = 0
        while filled < bytes.count {
            let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw Failure("cannot read /dev/urandom: \(String(cString: strerror(errno)))") }
            filled += count
        }
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var characters: [UInt8] = []
        for group in stride(from: 0, to: bytes.count, by: 3) {
            let value = UInt32(bytes[group]) << 16 | UInt32(bytes[group + 1]) << 8 | UInt32(bytes[group + 2])
            for shift in [18, 12, 6, 0] { characters.append(alphabet[Int((value >> UInt32(shift)) & 63)]) }
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// mosquitto's password file: `login:password` lines hashed in place by `mosquitto_passwd -U`
    /// (PBKDF2-SHA512, `$7$`) in a file beside it, checked, then renamed over `path`. Mode 0640,
    /// group `mosquitto` when that group exists and this process may give it (mosquitto 2.0.11
    /// started as root reads it after becoming its own user). True when the group was given.
    static func writePasswordFile(_ path: String, _ passwords: [(String, String)]) throws(Failure) -> Bool {
        let hashing = path + ".hashing"
        defer { _ = Files.remove(hashing) }  // clear passwords until hashed
        let plain = passwords.map { "\($0.0):\($0.1)\n" }.joined()
        if let error = Files.replace(hashing, contents: plain, mode: 0o600) { throw Failure("cannot write \(hashing): \(error)") }
        try run(["mosquitto_passwd", "-U", hashing])
        let hashed = (try? Files.read(hashing)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let lines = hashed.split(separator: "\n")
        let expected = passwords.map { "\($0.0):$7$" }
        guard lines.count == passwords.count, zip(lines, expected).allSatisfy({ $0.hasPrefix($1) }) else {
            throw Failure("mosquitto_passwd -U did not hash every password of \(hashing) in mosquitto 2's format ($7$); is it mosquitto 2's?")
        }
        _ = chmod(hashing, 0o640)
        var given = false
        if let group = getgrnam("mosquitto") { given = chown(hashing, uid_t.max, group.pointee.gr_gid) == 0 }
        guard rename(hashing, path) == 0 else { throw Failure("cannot rename \(hashing) to \(path): \(String(cString: strerror(errno)))") }
        return given
    }

    /// Runs a program found on PATH with this process's standard error; fails unless it exits 0.
    static func run(_ arguments: [String]) throws(Failure) {
        var pid: pid_t = 0
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let spawned = posix_spawnp(&pid, arguments[0], nil, nil, &argv, environ)
        if spawned == ENOENT { throw Failure("\(arguments[0]) is not installed (Debian package mosquitto): it hashes the passwords") }
        guard spawned == 0 else { throw Failure("cannot run \(arguments[0]): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard status & 0x7F == 0, (status >> 8) & 0xFF == 0 else {
            throw Failure("\(arguments.joined(separator: " ")) failed (wait status \(status))")
        }
    }

    /// `path` made absolute (for the configuration lines printed).
    static func absolute(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
