import CLibPQ

/// A libpq connection string, checked before any connection: keyword/value pairs
/// (`host=127.0.0.1 port=5432 user=fleet dbname=fleet`), a URI
/// (`postgres://fleet:secret@127.0.0.1:5432/fleet?sslmode=require`, or `postgresql://`), or a
/// bare database name (`fleet`). libpq's own parser decides (PQconninfoParse), so what passes
/// here is what libpq will use; what is not given comes from libpq's environment (PGHOST,
/// PGUSER, PGPASSWORD, PGSERVICE, ~/.pgpass) when connecting.
public struct ConnectionString: Sendable, Equatable {
    public let text: String
    /// The options the string sets, by libpq keyword (`host`, `port`, `user`, `dbname`, `password`, ...).
    public let options: [String: String]

    /// nil with libpq's reason (`missing "=" after "x" in connection info string`) for a string it refuses.
    public static func parse(_ text: String) -> Result<ConnectionString, ConnectionStringError> {
        // A bare word is a database name to libpq when it expands `dbname` (connect does that).
        let isString = text.contains("=") || text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
        guard isString else {
            return .success(ConnectionString(text: text, options: text.isEmpty ? [:] : ["dbname": text]))
        }
        var message: UnsafeMutablePointer<CChar>? = nil
        guard let parsed = PQconninfoParse(text, &message) else {
            let reason = message.map { PostgresConnection.oneLine($0) } ?? "libpq is out of memory"
            if let message { PQfreemem(message) }
            return .failure(ConnectionStringError(reason: reason))
        }
        defer { PQconninfoFree(parsed) }
        var options: [String: String] = [:]
        var option = parsed
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { options[String(cString: keyword)] = String(cString: value) }
            option += 1
        }
        return .success(ConnectionString(text: text, options: options))
    }

    /// `user U at HOST:PORT, database D` with what the string says (the password never), and
    /// "libpq's default" for what it leaves to the environment.
    public var summary: String {
        let host = options["host"] ?? options["hostaddr"] ?? "libpq's default host"
        let port = options["port"].map { ":" + $0 } ?? ""
        return "user \(options["user"] ?? "libpq's default") at \(host)\(port), database \(options["dbname"] ?? "libpq's default")"
    }
}

public struct ConnectionStringError: Error, CustomStringConvertible, Sendable, Equatable {
    public let reason: String
    public var description: String { reason }
}
