import LocusDevices

/// The fleet database as the commands use it: one connection, made again when it breaks. Work
/// goes through `retrying`, which runs it again from the start on a new connection when the
/// old one was lost (a PostgreSQL restart, a network failure): each piece of work is one
/// transaction whose writes are idempotent, so running it twice stores nothing twice.
public final class FleetDatabase {
    public let connectionString: ConnectionString
    private var connection: PostgresConnection?
    /// The waits before each new connection after a loss: 6 attempts over 15.75 s, long enough
    /// for a restart (`pg_ctl restart`, a failover of a managed server).
    public var reconnectDelaysMs: [Int] = [250, 500, 1_000, 2_000, 4_000, 8_000]
    /// Where a lost connection and each attempt are said (standard error in the commands).
    public var notice: (String) -> Void
    /// Called with the batch's number (1, 2, ...) after its rows are written and before COMMIT:
    /// the tests restart the server there.
    public var beforeCommit: ((Int) -> Void)? = nil
    var batchesWritten = 0

    /// Connects (failing at once on a wrong password or a server that is not there) and,
    /// unless `checkSchema` is false (`migrate`), checks the schema version.
    public init(_ connectionString: ConnectionString, checkSchema: Bool = true, notice: @escaping (String) -> Void) throws(FleetError) {
        self.connectionString = connectionString
        self.notice = notice
        do {
            connection = try Self.open(connectionString)
        } catch {
            let hint = Self.connectHint(error)
            throw FleetError(error.message + hint, isUnreachable: hint.isEmpty)
        }
        if checkSchema { try FleetSchema.require(connection!) }
    }

    /// The open connection (for work that is not retried: migrate).
    public var current: PostgresConnection {
        get throws(FleetError) {
            if let connection, connection.isOpen { return connection }
            throw FleetError("the connection to PostgreSQL (\(connectionString.summary)) is closed")
        }
    }

    /// `body` on the connection; when the connection is lost, again on a new one, up to
    /// `reconnectDelaysMs.count` times. A statement the server refuses is not retried.
    public func retrying<T>(_ what: String, _ body: (PostgresConnection) throws(PostgresError) -> T) throws(FleetError) -> T {
        var attempt = 0
        while true {
            do {
                let connection = try connected()
                return try body(connection)
            } catch {
                guard error.kind != .query || error.isTransient else { throw FleetError("\(what): \(error.message)", isRefused: true) }
                // A deadlock or a serialization failure (two writers at once) is tried again on
                // the same connection: the server rolled the transaction back, nothing is stored.
                if error.kind != .query { connection = nil }
                guard attempt < reconnectDelaysMs.count else {
                    let totalS = Double(reconnectDelaysMs.reduce(0, +)) / 1000
                    throw FleetError("\(what): \(error.message); gave up after \(attempt) new connections over \(totalS) s. "
                                     + "Run the command again once PostgreSQL is back: what was stored stays stored, and nothing is stored twice",
                                     isDatabase: true)
                }
                let delayMs = reconnectDelaysMs[attempt]
                attempt += 1
                let again = error.kind == .query ? "trying again" : "connecting again"
                notice("\(what): \(error.message); \(again) in \(Double(delayMs) / 1000) s (attempt \(attempt) of \(reconnectDelaysMs.count))")
                MonotonicClock.sleep(milliseconds: delayMs)
            }
        }
    }

    private func connected() throws(PostgresError) -> PostgresConnection {
        if let connection, connection.isOpen { return connection }
        let made = try Self.open(connectionString)
        connection = made
        return made
    }

    /// A connection with JIT compilation off: a batch's merge, costed high by its per-row index
    /// probes, was JIT-compiled at every batch (80 ms of a 240 ms merge), for a plan that runs once.
    static func open(_ connectionString: ConnectionString) throws(PostgresError) -> PostgresConnection {
        let connection = try PostgresConnection.connect(connectionString.text)
        try connection.execute("set jit = off")
        return connection
    }

    /// What to check for the usual refusals.
    static func connectHint(_ error: PostgresError) -> String {
        let message = error.message
        if message.contains("password authentication failed") || message.contains("no password supplied") {
            return ". Check the user name and the password (in the URL, PGPASSWORD or ~/.pgpass)"
        }
        if message.contains("no pg_hba.conf entry") {
            return ". The server's pg_hba.conf does not let this user in from here"
        }
        if message.contains("does not exist") {
            return ". Check the database and user names (a new database: createdb, then locus-fleet migrate)"
        }
        return ""
    }

    /// Writes a batch in one transaction, retried on a new connection if the connection is lost.
    public func write(_ records: [FleetRecord], _ quarantine: [QuarantineEntry], statuses: [GatewayStatus] = [],
                      what: String) throws(FleetError) -> BatchOutcome {
        batchesWritten += 1
        let number = batchesWritten
        return try retrying(what) { (connection) throws(PostgresError) -> BatchOutcome in
            try RecordBatch.preparePartitions(records, on: connection)
            return try connection.transaction { () throws(PostgresError) -> BatchOutcome in
                let outcome = try RecordBatch.write(records, quarantine, statuses: statuses, on: connection)
                beforeCommit?(number)
                return outcome
            }
        }
    }
}
