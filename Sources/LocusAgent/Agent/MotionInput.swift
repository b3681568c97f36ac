import LocusCore
import LocusDevices

/// The motion input (`[updates] motion_input`), owned by `LiveUpdates`: the board's GPIO input
/// of that name, opened at start, and its place in the loop's poll set. A rising line wakes a
/// paused receiver; what that does is `LiveUpdates`' to decide.
struct MotionInput {
    /// nil when the site names no motion input (or the board has no input of that name).
    private let input: GPIOInput?
    private var index: PollSet.Index? = nil

    /// Opens the motion input, if the site names one (the board's input of that name).
    init(loaded: LoadedConfig, stateDirectory: String) throws(GPIOError) {
        if let name = loaded.site.updates.motionInput, let gpio = loaded.board.gpio, let input = gpio.inputs.first(where: { $0.name == name }) {
            if case .simulated = gpio.chip { _ = Files.makeDirectory(Paths.join(stateDirectory, "sim"), mode: 0o750) }
            self.input = try GPIOInput(chip: gpio.chip, input: input, simulationPath: Paths.join(stateDirectory, "sim/input-\(name)"))
            AgentLog.info("locus: gpio: input \(name) (line \(input.line)) wakes the paused receiver")
        } else {
            self.input = nil
        }
    }

    /// The site names a motion input and the board has it: the pause may sleep much longer.
    var isConfigured: Bool { input != nil }

    mutating func register(in poll: inout PollSet) { index = poll.add(input?.descriptor) }

    /// Whether the line rose since it was last read (its edges read when it is ready).
    func rose(_ poll: borrowing PollSet) -> Bool {
        guard poll.readable(index), let input, input.readEdges() > 0 else { return false }
        return true
    }
}
