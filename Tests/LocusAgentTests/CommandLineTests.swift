import Foundation
import Testing

/// Runs the `locus` binary built next to this test bundle (host build) as a technician would.
struct LocusRun {
    var status: Int32
    var output: String
    var error: String
}

let repositoryRoot: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    return parts.joined(separator: "/")
}()

/// `LOCUS_BINARY` selects another binary (Scripts/test points it at the Embedded builds).
func locusBinary() throws -> String {
    if let path = ProcessInfo.processInfo.environment["LOCUS_BINARY"] { return path }
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("locus").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        directory.deleteLastPathComponent()
    }
    let fallback = repositoryRoot + "/.build/debug/locus"
    guard FileManager.default.isExecutableFile(atPath: fallback) else {
        throw LocusBinaryMissing()
    }
    return fallback
}

struct LocusBinaryMissing: Error, CustomStringConvertible {
    var description: String { "the locus binary was not built next to the tests (run `swift build` first)" }
}

/// `environment` adds to (or replaces in) this process's environment.
func locus(_ arguments: [String], input: String? = nil, environment: [String: String] = [:]) throws -> LocusRun {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try locusBinary())
    process.arguments = arguments
    if !environment.isEmpty {
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    }
    process.currentDirectoryURL = URL(fileURLWithPath: repositoryRoot)
    let output = Pipe()
    let error = Pipe()
    process.standardOutput = output
    process.standardError = error
    if let input {
        let pipe = Pipe()
        process.standardInput = pipe
        try process.run()
        pipe.fileHandleForWriting.write(Data(input.utf8))
        try pipe.fileHandleForWriting.close()
    } else {
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }
    let outData = output.fileHandleForReading.readDataToEndOfFile()
    let errData = error.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return LocusRun(status: process.terminationStatus, output: String(decoding: outData, as: UTF8.self),
                    error: String(decoding: errData, as: UTF8.self))
}

func temporaryFile(_ name: String, _ contents: String) throws -> String {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("locus-tests-\(getpid())")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let path = directory.appendingPathComponent(name).path
    try contents.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

@Suite struct CommandLineTests {
    @Test func versionPrintsTheVersion() throws {
        let run = try locus(["--version"])
        #expect(run.status == 0)
        #expect(run.output == "locus 0.1.0\n")
    }

    @Test func helpListsCommandsAndExplainsOne() throws {
        let overview = try locus(["help"])
        #expect(overview.status == 0)
        #expect(overview.output.contains("check-config"))
        let one = try locus(["help", "check-config"])
        #expect(one.status == 0)
        #expect(one.output.hasPrefix("usage: locus check-config FILE\n"))
        let unknown = try locus(["help", "frobnicate"])
        #expect(unknown.status == 2)
    }

    @Test func unknownCommandsAndFlagsExitTwoWithOneLine() throws {
        let command = try locus(["chek-config"])
        #expect(command.status == 2)
        #expect(command.error == "locus: unknown command 'chek-config'; did you mean 'locus check-config'?\n")
        let flag = try locus(["--frobnicate"])
        #expect(flag.status == 2)
        #expect(flag.error == "locus: unknown option '--frobnicate'; run 'locus help' for the commands\n")
        let extra = try locus(["check-config", "a", "b"])
        #expect(extra.status == 2)
        #expect(extra.error.split(separator: "\n").count == 1)
        let option = try locus(["check-config", "--strict", "a"])
        #expect(option.status == 2)
        #expect(option.error == "locus: check-config: unknown option '--strict'; usage: locus check-config FILE\n")
    }

    @Test(arguments: ["raspberry-pi-4b", "raspberry-pi-5", "raspberry-pi-zero-2w", "radxa-rock-5b", "sim"])
    func checkConfigAcceptsEveryBoard(_ board: String) throws {
        let run = try locus(["check-config", "Boards/\(board).toml"])
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output.hasPrefix("ok: Boards/\(board).toml: board '"))
        #expect(run.output.split(separator: "\n").count == 1)
    }

    @Test func checkConfigAcceptsTheSampleSiteAndItsBoard() throws {
        let run = try locus(["check-config", "Examples/site.toml"])
        #expect(run.status == 0, "\(run.error)")
        #expect(run.output == "ok: Examples/site.toml: 1 monitor, 3 conditions, 2 actions, state in /var/lib/locus; board 'Raspberry Pi 4 Model B' (Examples/../Boards/raspberry-pi-4b.toml)\n")
    }

    @Test func checkConfigRejectsABrokenSiteWithLocations() throws {
        let path = try temporaryFile("broken.toml", """
        board = "\(repositoryRoot)/Boards/sim.toml"
        [capacity]
        condition = 10
        [[monitor.gate.condition]]
        id = "depot"
        circle = { lat = 37.3, lon = -122.0, radius = 100 }
        [[action]]
        when = "gate/depot"
        gpio = "relay1"
        mode = "pluse"

        """)
        let run = try locus(["check-config", path])
        #expect(run.status == 1)
        #expect(run.output.isEmpty)
        #expect(run.error == """
        \(path):3:1: unknown key 'capacity.condition' (did you mean 'conditions'?)
        \(path):10:8: 'action[1].mode' = "pluse" is not one of: level | pulse | latch (did you mean "pulse"?)

        """)
    }

    @Test func checkConfigChecksTheBoardAgainstTheSite() throws {
        let path = try temporaryFile("wrong-output.toml", """
        board = "\(repositoryRoot)/Boards/raspberry-pi-4b.toml"
        [[monitor.gate.condition]]
        id = "depot"
        circle = { lat = 37.3, lon = -122.0, radius = 100 }
        [[action]]
        when = "gate/depot"
        gpio = "buzzer"

        """)
        let run = try locus(["check-config", path])
        #expect(run.status == 1)
        #expect(run.error == "\(path):5:1: gpio 'buzzer' is not an output of board 'Raspberry Pi 4 Model B' (the board's outputs: relay1, relay2)\n")
    }

    @Test func checkConfigReportsABrokenBoardFileUnderItsOwnName() throws {
        let board = try temporaryFile("board-broken.toml", "[board]\nname = \"x\"\n[gpio]\nchip = 0\n")
        let site = try temporaryFile("site-with-broken-board.toml", "board = \"board-broken.toml\"\n")
        let run = try locus(["check-config", site])
        #expect(run.status == 1)
        #expect(run.error == "\(board):4:8: 'gpio.chip' must be a string, not integer\n\(board):3:1: [gpio] needs exactly one of 'chip' (\"gpiochip0\"), 'label' (\"pinctrl-bcm2711\") or 'simulated = true'\n"
                || run.error.contains("\(board):4:8: 'gpio.chip' must be a string, not integer"))
    }

    @Test func checkConfigExplainsAMissingFile() throws {
        let run = try locus(["check-config", "/nonexistent/site.toml"])
        #expect(run.status == 1)
        #expect(run.error == "locus: check-config: cannot read /nonexistent/site.toml: No such file or directory\n")
        let board = try temporaryFile("site-missing-board.toml", "board = \"nowhere.toml\"\n")
        let missing = try locus(["check-config", board])
        #expect(missing.status == 1)
        #expect(missing.error.hasSuffix(":1:1: cannot read board file \(URL(fileURLWithPath: board).deletingLastPathComponent().path)/nowhere.toml: No such file or directory\n"))
    }

    @Test func checkConfigRejectsBinaryGarbage() throws {
        let path = try temporaryFile("garbage.toml", "board = \"\u{FFFD}\"\n")
        // Overwrite with invalid UTF-8 bytes.
        try Data([0x62, 0x3D, 0x22, 0xC3, 0x28, 0x22, 0x0A]).write(to: URL(fileURLWithPath: path))
        let run = try locus(["check-config", path])
        #expect(run.status == 1)
        #expect(run.error == "\(path):1:4: the file is not valid UTF-8 (byte 0xC3)\n")
    }
}
