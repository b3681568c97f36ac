import LocusCore
import LocusDevices

/// `locus run [--config SITE.toml] [--state DIR]`: the agent. Reads its arguments, has the agent
/// built in one call (`Agent.open`, each step failing with one clear line), then hands over to
/// `Agent.run()`.
enum RunCommand {
    static let usage = "usage: locus run [--config SITE.toml] [--state DIR]"
    static let defaultConfig = "/etc/locus/site.toml"

    static func run(_ arguments: [String]) -> Int32 {
        switch setUp(arguments) {
        case .success(let agent): return agent.run()
        case .failure(let status): return status.code
        }
    }

    static func setUp(_ arguments: [String]) -> Result<Agent, ExitStatus> {
        var configPath = defaultConfig
        var stateOverride: String? = nil
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument == "--config" || argument == "--state" else {
                return .failure(ExitStatus(code: CommandLineInterface.usageError("run: unexpected argument '\(argument)'", hint: usage)))
            }
            guard index + 1 < arguments.count else { return .failure(ExitStatus(code: CommandLineInterface.usageError("run: \(argument) needs a value", hint: usage))) }
            if argument == "--config" { configPath = arguments[index + 1] } else { stateOverride = arguments[index + 1] }
            index += 2
        }
        switch Agent.open(configPath: configPath, stateDirectory: stateOverride) {
        case .success(let agent): return .success(agent)
        case .failure(let error): return .failure(ExitStatus(code: exitCode(error, command: "run")))
        }
    }

    /// Why an agent could not be set up, said in one line (config and lock problems have been
    /// printed already); the exit status.
    static func exitCode(_ error: Agent.OpenError, command: String) -> Int32 {
        switch error {
        case .config, .locked: return 1
        case .loop(.timer(let error)): return CommandLineInterface.failure(command, "cannot create the loop's timer: \(error)")
        case .loop(.signals(let error)): return CommandLineInterface.failure(command, "cannot receive signals: \(error)")
        case .gpio(let error): return CommandLineInterface.failure(command, error.description)
        case .uplink(let reason): return CommandLineInterface.failure(command, "uplink: \(reason)")
        }
    }
}
