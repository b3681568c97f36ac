import CLocus

/// systemd socket activation of a client: connecting to the socket systemd listens on makes it
/// start the socket's service. The connection is closed at once; it carries no data.
public enum SocketActivation {
    /// Connects to `path` without blocking and hangs up; nil when the connection was made (or is
    /// being made), else why not (ENOENT: no socket there, ECONNREFUSED: nobody listens).
    public static func touch(_ path: String) -> SystemError? {
        let result = locus_unix_touch(path)
        return result < 0 ? SystemError(code: -result) : nil
    }
}
