import CLocus
import LocusCore

/// One input line watched for edges (a motion sensor, an ignition line): requested once at start
/// with its bias, read through its event descriptor in the poll loop.
///
/// On the simulated board the line is a FIFO at `simulationPath` taking "0" / "1" lines (a
/// test or a technician writes `echo 1 > STATE/sim/input-motion`); it is opened read-write so it
/// never reads end-of-file when its writers close.
public final class GPIOInput {
    enum Backend {
        case chip(OpaquePointer, OpaquePointer)
        case simulated(path: String)
    }

    public let input: BoardConfig.Input
    public let chipDescription: String
    private let backend: Backend
    private let fd: Int32
    /// The line's event descriptor (edges make it readable).
    public var descriptor: Descriptor { Descriptor(fd)! }
    /// The line's last known logical value (1 = active).
    public private(set) var value = false
    public private(set) var edges = 0
    private var pending = InlineArray<8, UInt8>(repeating: 0)

    public init(chip: BoardConfig.GPIOChip, input: BoardConfig.Input, simulationPath: String) throws(GPIOError) {
        self.input = input
        switch chip {
        case .simulated:
            chipDescription = "simulated"
            let made = locus_mkfifo(simulationPath, 0o660)
            if made < 0 && SystemError(code: -made) != .exists {
                throw GPIOError(chip: simulationPath, step: .line(name: input.name, offset: input.line), cause: SystemError(code: -made))
            }
            let fd = locus_open(simulationPath, Int32(LOCUS_O_READ | LOCUS_O_WRITE | LOCUS_O_NONBLOCK), 0)
            guard fd >= 0 else { throw GPIOError(chip: simulationPath, step: .line(name: input.name, offset: input.line), cause: SystemError(code: -fd)) }
            backend = .simulated(path: simulationPath)
            self.fd = fd
        case .name(let text), .label(let text):
            chipDescription = text
            var error: Int32 = 0
            guard let handle = locus_gpio_chip_open(text, chip.isLabel ? 1 : 0, &error) else {
                throw GPIOError(chip: text, step: .chip, cause: SystemError(code: error))
            }
            var flags: Int32 = input.activeLow ? Int32(LOCUS_GPIO_ACTIVE_LOW) : 0
            switch input.bias {
            case .asIs: break
            case .pullUp: flags |= Int32(LOCUS_GPIO_BIAS_PULL_UP)
            case .pullDown: flags |= Int32(LOCUS_GPIO_BIAS_PULL_DOWN)
            case .disabled: flags |= Int32(LOCUS_GPIO_BIAS_DISABLE)
            }
            guard let line = locus_gpio_request_input(handle, UInt32(input.line), flags, &error) else {
                locus_gpio_chip_close(handle)
                throw GPIOError(chip: text, step: .line(name: input.name, offset: input.line), cause: SystemError(code: error))
            }
            let fd = locus_gpio_event_fd(line)
            guard fd >= 0 else {
                locus_gpio_release(line)
                locus_gpio_chip_close(handle)
                throw GPIOError(chip: text, step: .line(name: input.name, offset: input.line), cause: SystemError(code: -fd))
            }
            backend = .chip(handle, line)
            self.fd = fd
            let current = locus_gpio_get(line)
            value = current > 0
        }
    }

    deinit {
        switch backend {
        case .chip(let handle, let line):
            locus_gpio_release(line)
            locus_gpio_chip_close(handle)
        case .simulated:
            _ = locus_close(fd)
        }
    }

    /// Reads the edges waiting; returns how many rising (to active) edges there were.
    public func readEdges() -> Int {
        var rising = 0
        switch backend {
        case .chip(_, let line):
            // One event per call; the descriptor stays readable while more wait.
            for _ in 0..<16 {
                var fd = self.fd
                var events = Int16(LOCUS_POLLIN)
                var returned: Int16 = 0
                guard locus_poll(&fd, &events, &returned, 1, 0) > 0 else { break }
                let edge = locus_gpio_read_event(line)
                guard edge >= 0 else { break }
                edges += 1
                value = edge == 1
                if value { rising += 1 }
            }
        case .simulated:
            var byte: UInt8 = 0
            while locus_read(fd, &byte, 1) == 1 {
                guard byte == UInt8(ascii: "0") || byte == UInt8(ascii: "1") else { continue }
                let active = byte == UInt8(ascii: "1")
                if active != value {
                    edges += 1
                    if active { rising += 1 }
                }
                value = active
            }
        }
        return rising
    }
}

extension BoardConfig.GPIOChip {
    var isLabel: Bool {
        if case .label = self { return true }
        return false
    }
}
