import CLocus
import LocusCore

/// A GPIO chip or line that could not be set up: a clear error at start, naming what to check.
public struct GPIOError: Error, Equatable, CustomStringConvertible {
    public enum Step: Equatable, Sendable { case chip, line(name: String, offset: Int), write(name: String) }
    public var chip: String
    public var step: Step
    public var cause: SystemError

    public var description: String {
        switch step {
        case .chip:
            var text = "cannot open GPIO chip \(chip): \(cause)"
            if cause == .notFound || cause == .noDevice { text += " (check the board file's [gpio] chip/label against 'gpiodetect')" }
            if cause == .permissionDenied { text += " (the agent's user needs access to /dev/gpiochip*: group gpio)" }
            return text
        case .line(let name, let offset):
            var text = "cannot request GPIO \(name) (line \(offset) of \(chip)): \(cause)"
            if cause == .busy { text += " (another program holds the line: see 'gpioinfo')" }
            if cause == .invalidArgument { text += " (the chip has no such line, or it cannot be an output)" }
            return text
        case .write(let name):
            return "cannot set GPIO \(name) on \(chip): \(cause)"
        }
    }
}

/// The board's output lines, requested once at start with the values the agent wants (so a
/// restart restores relays without a glitch through the safe state) and released on exit.
///
/// The simulated board keeps the values in memory and mirrors them to a text file ("NAME VALUE"
/// lines, replaced atomically on every change) for the demo and the end-to-end tests to read.
public final class GPIOOutputs {
    enum Backend {
        case chip(OpaquePointer, [OpaquePointer])
        case simulated(path: String)
    }

    public let outputs: [BoardConfig.Output]
    public let chipDescription: String
    private var backend: Backend
    public private(set) var values: [Bool]

    public init(chip: BoardConfig.GPIOChip, outputs: [BoardConfig.Output], initial: [Bool], simulationFile: String) throws(GPIOError) {
        self.outputs = outputs
        values = initial
        switch chip {
        case .simulated:
            chipDescription = "simulated"
            backend = .simulated(path: simulationFile)
            GPIOOutputs.writeSimulation(simulationFile, outputs, initial)
        case .name(let text), .label(let text):
            var byLabel: Int32 = 0
            if case .label = chip { byLabel = 1 }
            chipDescription = text
            var error: Int32 = 0
            guard let handle = locus_gpio_chip_open(text, byLabel, &error) else {
                throw GPIOError(chip: text, step: .chip, cause: SystemError(code: error))
            }
            var lines: [OpaquePointer] = []
            for (index, output) in outputs.enumerated() {
                let flags: Int32 = output.activeLow ? Int32(LOCUS_GPIO_ACTIVE_LOW) : 0
                guard let line = locus_gpio_request_output(handle, UInt32(output.line), flags, initial[index] ? 1 : 0, &error) else {
                    for line in lines { locus_gpio_release(line) }
                    locus_gpio_chip_close(handle)
                    throw GPIOError(chip: text, step: .line(name: output.name, offset: output.line), cause: SystemError(code: error))
                }
                lines.append(line)
            }
            backend = .chip(handle, lines)
        }
    }

    deinit { release() }

    /// Sets output `index` to a logical value (1 = active).
    public func set(_ index: Int, _ value: Bool) -> GPIOError? {
        guard values[index] != value else { return nil }
        switch backend {
        case .chip(_, let lines):
            let result = locus_gpio_set(lines[index], value ? 1 : 0)
            if result < 0 {
                return GPIOError(chip: chipDescription, step: .write(name: outputs[index].name), cause: SystemError(negated: result))
            }
            values[index] = value
        case .simulated(let path):
            values[index] = value
            GPIOOutputs.writeSimulation(path, outputs, values)
        }
        return nil
    }

    /// Every line to its board-file safe value, then released (shutdown).
    public func release() {
        switch backend {
        case .chip(let handle, let lines):
            for (index, line) in lines.enumerated() {
                _ = locus_gpio_set(line, Int32(outputs[index].safe))
                locus_gpio_release(line)
            }
            locus_gpio_chip_close(handle)
            backend = .simulated(path: "")
        case .simulated(let path):
            guard !path.isEmpty else { return }
            for index in outputs.indices { values[index] = outputs[index].safe != 0 }
            GPIOOutputs.writeSimulation(path, outputs, values)
            backend = .simulated(path: "")
        }
    }

    static func writeSimulation(_ path: String, _ outputs: [BoardConfig.Output], _ values: [Bool]) {
        var text = ""
        for (index, output) in outputs.enumerated() { text += "\(output.name) \(values[index] ? 1 : 0)\n" }
        _ = Files.replace(path, contents: text)
    }
}
