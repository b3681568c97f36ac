/// Path arithmetic on '/'-separated strings.
public enum Paths {
    public static func join(_ directory: String, _ name: String) -> String {
        directory.utf8.last == UInt8(ascii: "/") ? directory + name : directory + "/" + name
    }

    /// The directory part of `path` ("." when it has none).
    public static func directory(of path: String) -> String {
        let bytes = Array(path.utf8)
        guard let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        if slash == 0 { return "/" }
        return String(decoding: bytes[0..<slash], as: UTF8.self)
    }

    /// `path` if absolute, else `base/path`.
    public static func resolve(_ path: String, relativeTo base: String) -> String {
        if path.utf8.first == UInt8(ascii: "/") || base == "." { return path }
        return join(base, path)
    }
}
