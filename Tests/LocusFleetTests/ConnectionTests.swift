import Foundation
import LocusFleet
import Testing
import TestSupport

/// The connection: libpq's connection strings and URIs, and what a technician reads when the
/// password is wrong or nothing listens (a real PostgreSQL with SCRAM-SHA-256 over TCP).
@Suite struct ConnectionTests {
    @Test func uriAndKeywordFormsAreReadByLibpq() throws {
        let uri = try ConnectionString.parse("postgres://fleet:s3cret@db.example.net:6543/locus?sslmode=verify-full&connect_timeout=5").get()
        #expect(uri.options["user"] == "fleet" && uri.options["password"] == "s3cret")
        #expect(uri.options["host"] == "db.example.net" && uri.options["port"] == "6543" && uri.options["dbname"] == "locus")
        #expect(uri.options["sslmode"] == "verify-full" && uri.options["connect_timeout"] == "5")
        #expect(uri.summary == "user fleet at db.example.net:6543, database locus", "never the password: \(uri.summary)")

        let keywords = try ConnectionString.parse("host=/run/postgresql port=5432 dbname=fleet user='ops team'").get()
        #expect(keywords.options["host"] == "/run/postgresql" && keywords.options["user"] == "ops team" && keywords.options["dbname"] == "fleet")

        let postgresql = try ConnectionString.parse("postgresql://[::1]:5433/fleet").get()
        #expect(postgresql.options["host"] == "::1" && postgresql.options["port"] == "5433")

        // A bare word is a database name (libpq's own reading when it expands dbname).
        let bare = try ConnectionString.parse("fleet").get()
        #expect(bare.options == ["dbname": "fleet"])
        #expect(bare.summary == "user libpq's default at libpq's default host, database fleet")
        let service = try ConnectionString.parse("service=fleet").get()
        #expect(service.options["service"] == "fleet")
    }

    @Test func stringsLibpqRefusesAreUsageErrorsWithItsReason() throws {
        #expect(throws: ConnectionStringError.self) { try ConnectionString.parse("host=db bogus").get() }
        if case .failure(let error) = ConnectionString.parse("host=db bogus") {
            #expect(error.reason == "missing \"=\" after \"bogus\" in connection info string")
        }
        if case .failure(let error) = ConnectionString.parse("frobnicate=1") {
            #expect(error.reason == "invalid connection option \"frobnicate\"")
        } else {
            Issue.record("an unknown keyword is refused")
        }
        let run = try Fleet.fleet(["status", "--database", "postgres://fleet@db/fleet?frobnicate=1"])
        #expect(run.status == 2)
        #expect(run.error.hasPrefix("locus-fleet: status: --database is not a connection string libpq reads: invalid URI query parameter: \"frobnicate\"\n"), "\(run.error)")
        // libpq checks a port's value when it connects: refused then, in its words.
        let port = try Fleet.fleet(["status", "--database", "postgres://fleet@127.0.0.1:notaport/fleet"])
        #expect(port.status == 1)
        #expect(port.error == "locus-fleet: status: cannot connect to PostgreSQL (user fleet at 127.0.0.1:notaport, database fleet): "
            + "invalid integer value \"notaport\" for connection option \"port\"\n", "\(port.error)")
        let environment = try Fleet.fleet(["status"], environment: ["LOCUS_FLEET_DATABASE": "host=db bogus"])
        #expect(environment.status == 2)
        #expect(environment.error.hasPrefix("locus-fleet: status: LOCUS_FLEET_DATABASE is not a connection string libpq reads"), "\(environment.error)")
        let none = try Fleet.fleet(["status"], environment: ["LOCUS_FLEET_DATABASE": ""])
        #expect(none.status == 2)
        #expect(none.error.hasPrefix("locus-fleet: status: no database: give --database URL or set LOCUS_FLEET_DATABASE\n"), "\(none.error)")
    }

    @Test func aWrongPasswordNamesTheUserAndTheServer() throws {
        let cluster = try Fleet.cluster.get()
        let url = cluster.url(database: "postgres", password: "not-the-password")
        let run = try Fleet.fleet(["status", "--database", url])
        #expect(run.status == 1)
        let expected = "locus-fleet: status: cannot connect to PostgreSQL (user fleet at 127.0.0.1:\(cluster.port), database postgres): "
            + "connection to server at \"127.0.0.1\", port \(cluster.port) failed: FATAL: password authentication failed for user \"fleet\". "
            + "Check the user name and the password (in the URL, PGPASSWORD or ~/.pgpass)\n"
        #expect(run.error == expected)
        #expect(!run.error.contains("not-the-password"))
        // The same through the environment, and PGPASSWORD supplies a password the URL lacks.
        let fromEnvironment = try Fleet.fleet(["status"], environment: ["LOCUS_FLEET_DATABASE": url])
        #expect(fromEnvironment.status == 1 && fromEnvironment.error == expected)
        let database = try cluster.createDatabase("pgpassword")
        let withPassword = try Fleet.fleet(["migrate", "--database", "postgres://fleet@127.0.0.1:\(cluster.port)/\(database)"],
                                           environment: ["PGPASSWORD": TestPostgres.password])
        #expect(withPassword.status == 0, "\(withPassword.error)")
    }

    @Test func nothingListeningIsAClearErrorAtOnce() throws {
        let port = try TestBroker.freePort()
        let started = Date()
        let run = try Fleet.fleet(["import", "--database", "postgres://fleet:x@127.0.0.1:\(port)/fleet", "/nonexistent"])
        #expect(run.status == 1)
        #expect(run.error == "locus-fleet: import: cannot connect to PostgreSQL (user fleet at 127.0.0.1:\(port), database fleet): "
            + "connection to server at \"127.0.0.1\", port \(port) failed: Connection refused "
            + "Is the server running on that host and accepting TCP/IP connections?\n")
        #expect(Date().timeIntervalSince(started) < 5, "a first connection is not retried")
    }

    @Test func theApplicationNameIsLocusFleetUnlessTheStringSaysOtherwise() throws {
        let cluster = try Fleet.cluster.get()
        let plain = try PostgresConnection.connect(cluster.url(database: "postgres"))
        #expect(try plain.execute("select current_setting('application_name')").scalar == "locus-fleet")
        let named = try PostgresConnection.connect(cluster.url(database: "postgres") + "?application_name=grafana-loader&connect_timeout=3")
        #expect(try named.execute("select current_setting('application_name')").scalar == "grafana-loader")
        #expect(named.target == "user fleet at 127.0.0.1:\(cluster.port), database postgres")
        // A refused statement leaves the connection usable.
        #expect(throws: PostgresError.self) { try named.execute("select * from no_such_table") }
        do {
            try named.execute("select * from no_such_table")
        } catch {
            #expect(error.kind == .query && error.sqlState == "42P01" && error.message == "relation \"no_such_table\" does not exist")
        }
        #expect(named.isOpen)
        #expect(try named.execute("select $1::int + 1", ["41"]).scalar == "42")
    }
}
