import Foundation
import LocusCore
import Testing

/// `locus-fleet`'s command line, without a database: help, version, usage errors (exit 2).
@Suite struct FleetCommandLineTests {
    static let usage = """
        usage: locus-fleet migrate [--database URL]
               locus-fleet import [--database URL] [--gateway ID] [--batch N] DIR...
               locus-fleet status [--database URL] [--json]
               locus-fleet retain [--database URL] --days N [--dry-run]
               locus-fleet ingest [--database URL] --broker URL [--client-id ID] [--share GROUP] [options]
               locus-fleet broker-acl (--gateways FILE | --from-database [--database URL]) [--prefix FILTER]
                                      [--fleet-user NAME] --out DIR
               locus-fleet config keygen --out FILE
               locus-fleet config set (--gateway ID | --group NAME | --all) [--note TEXT] --key FILE [broker options] FRAGMENT.toml
               locus-fleet config publish --key FILE [broker options]
               locus-fleet config rollback --to VERSION (--gateway ID | --group NAME | --all) --key FILE [broker options]
               locus-fleet config show [--version N | --gateway ID]
               locus-fleet config diff VERSION VERSION
               locus-fleet config status [--json]
               locus-fleet group set NAME GATEWAY...
               locus-fleet group show [NAME]
               locus-fleet command send --gateway ID [--expires DURATION] --key FILE [broker options] ACTION ARGUMENTS
               locus-fleet command status [--gateway ID] [--json]
               locus-fleet presence bench [--seed N] [--hours H] [--json]
               locus-fleet presence run --plan FILE [broker options] [--publish PREFIX [--home-assistant]] [--database URL]
                                        [--calibration FILE] [--key FILE] [--seconds N]
               locus-fleet presence calibrate --plan FILE [broker options] --seconds N [--out FILE] [TAG=X,Y...]

        """

    @Test func helpAndVersion() throws {
        let help = try Fleet.fleet(["help"])
        #expect(help.status == 0 && help.output.hasPrefix(Self.usage) && help.output.contains("LOCUS_FLEET_DATABASE")
                && help.output.contains("--share GROUP"))
        let version = try Fleet.fleet(["--version"])
        #expect(version.status == 0 && version.output == "locus-fleet \(LocusVersion.string) (schema version 5)\n")
    }

    @Test(arguments: [
        (["frobnicate"], "unknown command 'frobnicate'"),
        ([], "a command is needed"),
        (["status", "--gateway", "x", "--database", "fleet"], "status: unknown option '--gateway'"),
        (["migrate", "--database"], "migrate: --database needs a value"),
        (["status", "--database", "fleet", "extra"], "status: unexpected argument 'extra'"),
        (["import", "--database", "fleet", "--batch", "0", "dir"], "import: --batch takes a number of rows from 1 to 100000, not '0'"),
        (["import", "--database", "fleet", "--json", "dir"], "import: unknown option '--json'"),
    ])
    func usageErrorsExitTwoWithTheUsage(_ arguments: [String], _ message: String) throws {
        let run = try Fleet.fleet(arguments)
        #expect(run.status == 2)
        #expect(run.error == "locus-fleet: \(message)\n" + Self.usage, "\(run.error)")
        #expect(run.output.isEmpty)
    }
}
