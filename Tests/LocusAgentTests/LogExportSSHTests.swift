import Foundation
import LocusCore
import LocusDevices
import Testing

/// `locus log export --ssh` as sshd runs it for a restricted key: the forced command's own
/// arguments on the command line, the client's in SSH_ORIGINAL_COMMAND.
@Suite struct LogExportSSHTests {
    static let refusal = "only log export arguments are allowed (--after-seq N, --format jsonl|csv, --follow)"

    /// A state directory holding a start record and four events (sequence numbers 1-5).
    static func stateDirectory(_ name: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("locus-export-ssh-\(getpid())-\(name)").path
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var store = try LogStore.open(directory: path, segmentSizeBytes: 1 << 20, retainBytes: 1 << 30)
        try store.append(type: .start, time: 1_711_195_200_000_000_000, payload: Array("locus test".utf8))
        for index in 1...4 {
            try store.append(type: .diagnostic, time: 1_711_195_200_000_000_000 + Int64(index), payload: Array("note \(index)".utf8))
        }
        return path
    }

    static func export(_ directory: String, client command: String) throws -> LocusRun {
        try locus(["log", "export", "--ssh", "--state", directory], environment: ["SSH_ORIGINAL_COMMAND": command])
    }

    @Test func acceptsExportArgumentsWithOrWithoutTheCommandName() throws {
        let directory = try Self.stateDirectory("accepted")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let all = try locus(["log", "export", "--state", directory]).output
        let afterThree = try locus(["log", "export", "--state", directory, "--after-seq", "3"]).output
        let csv = try locus(["log", "export", "--state", directory, "--format", "csv", "--after-seq", "1"]).output
        #expect(all.split(separator: "\n").count == 5)
        let cases: [(String, String)] = [
            ("", all),
            ("locus log export", all),
            ("log export", all),
            ("locus log export --after-seq 3", afterThree),
            ("log export --after-seq 3", afterThree),
            ("--after-seq 3", afterThree),
            ("  locus\tlog  export --after-seq 3 --format jsonl  ", afterThree),
            ("--format csv --after-seq 1", csv),
        ]
        for (command, expected) in cases {
            let run = try Self.export(directory, client: command)
            #expect(run.status == 0, "'\(command)': \(run.error)")
            #expect(run.output == expected, "'\(command)'")
            #expect(run.error.isEmpty, "'\(command)'")
        }
    }

    @Test func refusesEverythingElseWithoutRunningIt() throws {
        let directory = try Self.stateDirectory("refused")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let commands = [
            "rm -rf /",
            "locus monitor gate records",
            "locus log verify",
            "log export --follow; rm -rf /",
            "log export --after-seq 1;id",
            "log export --after-seq $(id)",
            "log export --after-seq `id`",
            "log export --after-seq '1'",
            "log export --after-seq \"1\"",
            "log export --after-seq 1\\ 2",
            "log export | sh",
            "log export > /tmp/x",
            "log export --after-seq 1 && id",
            "log export\n--after-seq 1",
            "log export --ssh",
            "log export --after-seq=1",
            "/usr/bin/locus log export",
            "export",
            "--follow --follow extra",
        ]
        for command in commands {
            let run = try Self.export(directory, client: command)
            #expect(run.status == 2, "'\(command)'")
            #expect(run.output.isEmpty, "'\(command)'")
            #expect(run.error == "locus: log export --ssh: refused '\(command)': \(Self.refusal)\n")
        }
    }

    @Test func theClientCannotChooseTheStateDirectory() throws {
        let directory = try Self.stateDirectory("state")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for command in ["--state /etc", "log export --state /etc", "locus log export --after-seq 1 --state /etc", "--state=/etc", "--after-seq --state /etc"] {
            let run = try Self.export(directory, client: command)
            #expect(run.status == 2, "'\(command)'")
            #expect(run.output.isEmpty, "'\(command)'")
            #expect(run.error == "locus: log export --ssh: refused '\(command)': \(Self.refusal)\n")
        }
        // A state directory in a value's place is a bad value, and still not a directory read.
        let value = try Self.export(directory, client: "--format --state")
        #expect(value.status == 2)
        #expect(value.output.isEmpty)
        #expect(value.error.hasPrefix("locus: log export: --format is jsonl or csv, not '--state'; usage: "))
    }

    @Test func badValuesAreUsageErrors() throws {
        let directory = try Self.stateDirectory("values")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let number = try Self.export(directory, client: "log export --after-seq x")
        #expect(number.status == 2)
        #expect(number.error.hasPrefix("locus: log export: --after-seq takes a sequence number, not 'x'; usage: "))
        let missing = try Self.export(directory, client: "log export --after-seq")
        #expect(missing.status == 2)
        #expect(missing.error.hasPrefix("locus: log export: --after-seq needs a value; usage: "))
    }
}
