import CLibPQ

/// One connection to PostgreSQL through libpq (`PGconn`), used from one thread. Every call is
/// synchronous; results are copied into Swift values and freed before the call returns.
///
/// The connection string is libpq's own: keyword/value (`host=db user=fleet dbname=fleet`) or a
/// URI (`postgres://fleet@db:5432/fleet?sslmode=verify-full`), so TLS (`sslmode`), SCRAM, `PGPASSWORD`,
/// `~/.pgpass` and `PGSERVICE` work as they do for psql.
public final class PostgresConnection {
    private let handle: OpaquePointer
    /// Whom this connection speaks to, for messages: `user fleet at 127.0.0.1:5432, database fleet`.
    public let target: String

    /// Seconds libpq waits for a server that does not answer, unless the connection string says
    /// otherwise (libpq's own default is to wait forever).
    public static let connectTimeoutS = 10

    private init(handle: OpaquePointer) {
        self.handle = handle
        target = PostgresConnection.describe(handle)
    }

    deinit { PQfinish(handle) }

    /// Connects, or throws a `.connect` error naming the user and the server and saying why.
    public static func connect(_ conninfo: String) throws(PostgresError) -> PostgresConnection {
        // libpq expands `dbname` when it is a connection string; keywords after it would override
        // it, keywords before it are overridden by it: the defaults come first.
        let keywords = ["connect_timeout", "fallback_application_name", "dbname"]
        let values = [String(connectTimeoutS), "locus-fleet", conninfo]
        let opened = withCStrings(keywords) { keywordPointers in
            withCStrings(values) { valuePointers in PQconnectdbParams(keywordPointers, valuePointers, 1) }
        }
        guard let handle = opened else { throw PostgresError(.connect, "cannot connect to PostgreSQL: libpq is out of memory") }
        guard PQstatus(handle) == CONNECTION_OK else {
            let target = describe(handle)
            let reason = oneLine(PQerrorMessage(handle))
            PQfinish(handle)
            throw PostgresError(.connect, "cannot connect to PostgreSQL (\(target)): \(reason)")
        }
        // The server's notices ("relation ... already exists, skipping") are not for the
        // technician: libpq would print them on standard error.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        return PostgresConnection(handle: handle)
    }

    /// False once the server has gone (a restart, a network failure): a new connection is needed.
    public var isOpen: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Runs one statement (several without `parameters`), with text parameters `$1...`; nil is NULL.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [String?] = []) throws(PostgresError) -> PostgresResult {
        let result: OpaquePointer?
        if parameters.isEmpty {
            result = PQexec(handle, sql)
        } else {
            result = withOptionalCStrings(parameters) { pointers in
                PQexecParams(handle, sql, Int32(parameters.count), nil, pointers, nil, nil, 0)
            }
        }
        return try take(result, expecting: [PGRES_COMMAND_OK, PGRES_TUPLES_OK])
    }

    /// `COPY ... FROM STDIN` with `data` in the statement's format; returns the rows copied.
    public func copyIn(_ sql: String, _ data: [UInt8]) throws(PostgresError) -> Int {
        _ = try take(PQexec(handle, sql), expecting: [PGRES_COPY_IN])
        // Whatever happens, the connection leaves the COPY state and its results are read, so
        // that the next statement (a ROLLBACK) can be sent.
        defer { while let extra = PQgetResult(handle) { PQclear(extra) } }
        let chunkBytes = 1 << 20
        var offset = 0
        var sent = true
        data.withUnsafeBufferPointer { buffer in
            while sent && offset < buffer.count {
                let count = min(chunkBytes, buffer.count - offset)
                let chunk = UnsafeRawPointer(buffer.baseAddress! + offset).assumingMemoryBound(to: CChar.self)
                sent = PQputCopyData(handle, chunk, Int32(count)) == 1
                offset += count
            }
        }
        guard sent else {
            _ = PQputCopyEnd(handle, "locus-fleet could not send the data")
            throw lost("sending COPY data")
        }
        guard PQputCopyEnd(handle, nil) == 1 else { throw lost("ending COPY") }
        return try take(PQgetResult(handle), expecting: [PGRES_COMMAND_OK]).affectedRows
    }

    /// Runs `body` between BEGIN and COMMIT; rolls back when it throws (if the server is still there).
    public func transaction<T>(_ body: () throws(PostgresError) -> T) throws(PostgresError) -> T {
        try execute("begin")
        do {
            let value = try body()
            try execute("commit")
            return value
        } catch {
            if isOpen { _ = try? execute("rollback") }
            throw error
        }
    }

    // MARK: results and errors

    private func take(_ result: OpaquePointer?, expecting expected: [ExecStatusType]) throws(PostgresError) -> PostgresResult {
        guard let result else { throw lost("waiting for the answer") }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard expected.contains(status) else {
            if status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR { throw error(from: result) }
            throw PostgresError(.query, "PostgreSQL answered \(String(cString: PQresStatus(status))) where this program expected otherwise")
        }
        return PostgresResult(result)
    }

    private func error(from result: OpaquePointer) -> PostgresError {
        let state = field(result, "C")
        let primary = field(result, "M") ?? PostgresConnection.oneLine(PQresultErrorMessage(result))
        var message = primary
        if let detail = field(result, "D") { message += " (\(detail))" }
        let lostStates = ["57P01", "57P02", "57P03"]
        let connectionLost = !isOpen || state.map { $0.hasPrefix("08") || lostStates.contains($0) } == true
        return PostgresError(connectionLost ? .connectionLost : .query, message, sqlState: state)
    }

    private func field(_ result: OpaquePointer, _ code: Character) -> String? {
        guard let value = PQresultErrorField(result, Int32(code.asciiValue!)) else { return nil }
        return String(cString: value)
    }

    private func lost(_ doing: String) -> PostgresError {
        let reason = PostgresConnection.oneLine(PQerrorMessage(handle))
        return PostgresError(.connectionLost, "lost the connection to PostgreSQL (\(target)) while \(doing): \(reason)")
    }

    /// libpq's multi-line messages ("FATAL:  ...\n\tIs the server running...") as one line.
    static func oneLine(_ message: UnsafePointer<CChar>?) -> String {
        guard let message else { return "no reason given" }
        let words = String(cString: message).split(whereSeparator: { $0 == "\n" || $0 == "\t" || $0 == " " })
        let text = words.joined(separator: " ")
        return text.isEmpty ? "no reason given" : text
    }

    /// `user U at HOST:PORT, database D`, from what libpq resolved (never the password).
    static func describe(_ handle: OpaquePointer) -> String {
        func text(_ value: UnsafeMutablePointer<CChar>?) -> String? {
            guard let value else { return nil }
            let string = String(cString: value)
            return string.isEmpty ? nil : string
        }
        let user = text(PQuser(handle)) ?? "?"
        let host = text(PQhost(handle)) ?? "the default socket"
        let port = text(PQport(handle)).map { ":" + $0 } ?? ""
        let database = text(PQdb(handle)) ?? user
        return "user \(user) at \(host)\(port), database \(database)"
    }
}

/// What a statement returned: its rows as text (nil for NULL) and the rows it changed.
public struct PostgresResult: Sendable {
    public let columns: [String]
    public let rows: [[String?]]
    /// INSERT, UPDATE, DELETE, COPY: the rows affected (0 for other statements).
    public let affectedRows: Int

    init(_ result: OpaquePointer) {
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        // A COPY's result has columns without names.
        columns = (0..<columnCount).map { PQfname(result, Int32($0)).map { String(cString: $0) } ?? "" }
        rows = (0..<rowCount).map { row in
            (0..<columnCount).map { column -> String? in
                PQgetisnull(result, Int32(row), Int32(column)) == 1 ? nil : String(cString: PQgetvalue(result, Int32(row), Int32(column)))
            }
        }
        affectedRows = Int(String(cString: PQcmdTuples(result))) ?? 0
    }

    /// The first row's first value (a `select count(*)` and the like).
    public var scalar: String? { rows.first?.first ?? nil }
}

public struct PostgresError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Equatable {
        /// The connection could not be made (refused, authentication, unknown host, bad string).
        case connect
        /// The server refused a statement; the connection is still usable.
        case query
        /// The connection broke (a server restart, the network): reconnect to go on.
        case connectionLost
    }

    public let kind: Kind
    public let message: String
    /// The SQLSTATE code when the server sent one (`42P01`: no such table).
    public let sqlState: String?

    public init(_ kind: Kind, _ message: String, sqlState: String? = nil) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
    }

    public var description: String { message }

    /// A deadlock (40P01) or a serialization failure (40001): the transaction was rolled back
    /// because of another one, and the same work can pass when tried again.
    public var isTransient: Bool { sqlState == "40P01" || sqlState == "40001" }
}

// MARK: C strings

/// `body` with a NULL-terminated array of C strings (libpq's keyword/value arrays).
private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { cString($0) }
    defer { copies.forEach { $0.deallocate() } }
    let pointers = copies.map { UnsafePointer($0) } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// `body` with an array of C strings where nil stays NULL (SQL NULL parameters).
private func withOptionalCStrings<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { $0.map { cString($0) } }
    defer { copies.forEach { $0?.deallocate() } }
    let pointers = copies.map { $0.map { UnsafePointer($0) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// A NUL-terminated copy of `string` that outlives the call (strdup without the C library); the
/// caller deallocates it.
private func cString(_ string: String) -> UnsafeMutablePointer<CChar> {
    let bytes = string.utf8CString
    let copy = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
    bytes.withUnsafeBufferPointer { copy.initialize(from: $0.baseAddress!, count: $0.count) }
    return copy
}
