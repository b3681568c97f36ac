import CLocus
import LocusCore

/// A kernel in memory for the agent's loop: the clocks, the loop's timer, poll(2), and serial
/// ports that receive scripted bytes at scripted moments. Installed, it answers the system calls
/// of the kernel seam (CLocusKernel.h) for the whole process, so the agent that `locus run` starts
/// turns on simulated time unchanged: `locus replay` and the tests run it this way.
///
/// Time only moves inside `poll`: when nothing is ready, the simulation jumps to the next thing
/// that happens (a port's next bytes, the timer, the caller's timeout) at once, or, with a speed,
/// after that much wall time scaled by it. Everything else (the log's files, the control socket,
/// the signals) stays Linux's; poll asks Linux about those without waiting.
///
/// One simulation is installed at a time; it belongs to the thread that runs the loop.
public final class SimulatedKernel {
    /// Bytes a port receives at a moment of the simulation's monotonic clock.
    public struct Arrival {
        public var atNs: Int64
        public var bytes: [UInt8]

        public init(atNs: Int64, bytes: [UInt8]) {
            self.atNs = atNs
            self.bytes = bytes
        }
    }

    /// A serial device at a path: what arrives, what the reader has not taken, what was written.
    final class Port {
        let path: String
        /// Every arrival's bytes, one after the other.
        let bytes: [UInt8]
        /// Each arrival's moment and where its bytes end in `bytes`, in time order.
        let moments: [Moment]
        /// The first arrival not yet delivered.
        var next = 0
        var received: [UInt8] = []
        var readOffset = 0
        var descriptor: Int32? = nil

        init(path: String, bytes: [UInt8], moments: [Moment]) {
            self.path = path
            self.bytes = bytes
            self.moments = moments
        }

        var unread: Int { received.count - readOffset }
    }

    /// The simulation the seam's hooks answer from (nil: Linux answers).
    nonisolated(unsafe) public private(set) static var installed: SimulatedKernel? = nil

    public private(set) var monotonicNs: Int64
    /// CLOCK_REALTIME is the monotonic clock plus this.
    public var realtimeOffsetNs: Int64
    /// Wall-clock pacing: simulated nanoseconds per real one (nil: as fast as the loop turns).
    public let speed: Double?
    private var ports: [Port] = []
    /// Each timer descriptor's expiry (nil: disarmed).
    private var timers: [(descriptor: Int32, deadlineNs: Int64?)] = []
    private var nextDescriptor = Int32(LOCUS_SIM_FD_BASE)
    /// The real descriptors of a poll set, simulated ones blanked (poll(2) skips negatives).
    private let realSet: UnsafeMutableBufferPointer<Int32>
    /// Polls that found nothing ready and nothing left to happen (no input, no timer, no timeout).
    public private(set) var idlePolls = 0
    /// Linux's descriptors asked at every poll, not once a millisecond of wall time: what a
    /// client in the same process writes to the control socket is then seen at the same
    /// simulated moment on every run (the simulator's clients).
    public var asksLinuxEveryPoll = false
    /// The random bits the agent draws (`Randomness`), set before `install`: a simulator's
    /// seeded generator, so a run repeats exactly. nil: the kernel's (getrandom).
    public var random: (() -> UInt64)? = nil
    /// Moments the simulation's owner wants the loop back (a fault starts or ends), ascending.
    private var wakeups: [Int64] = []

    /// The simulated disk: the files under `directory` (nil: Linux's disk, untouched).
    public var disk = Disk()

    public static let pollCapacity = 64
    static let unpacedLinuxPollNs: Int64 = 1_000_000
    private var lastAskedLinuxNs: Int64 = 0

    public init(monotonicNs: Int64, realtimeNs: Int64, speed: Double?) {
        precondition(monotonicNs > 0, "the simulated monotonic clock starts after 0")
        precondition(speed.map { $0 > 0 } ?? true, "a speed is positive")
        self.monotonicNs = monotonicNs
        realtimeOffsetNs = realtimeNs - monotonicNs
        self.speed = speed
        realSet = .allocate(capacity: SimulatedKernel.pollCapacity)
    }

    deinit {
        precondition(SimulatedKernel.installed !== self, "a simulation is uninstalled before it goes")
        realSet.deallocate()
    }

    public var realtimeNs: Int64 { monotonicNs + realtimeOffsetNs }

    /// A serial port at `path` (as the board names it) receiving `arrivals` in time order.
    public func addPort(path: String, arrivals: [Arrival]) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(arrivals.reduce(0) { $0 + $1.bytes.count })
        var moments: [Moment] = []
        moments.reserveCapacity(arrivals.count)
        for arrival in arrivals {
            bytes += arrival.bytes
            moments.append(Moment(atNs: arrival.atNs, end: bytes.count))
        }
        addPort(path: path, bytes: bytes, moments: moments)
    }

    /// One arrival of a port's bytes: at `atNs`, its bytes up to `end` (from the previous
    /// arrival's end).
    public struct Moment {
        public var atNs: Int64
        public var end: Int

        public init(atNs: Int64, end: Int) {
            self.atNs = atNs
            self.end = end
        }
    }

    /// A serial port at `path` receiving `bytes` in arrivals (`moments`, in time order, the
    /// last one ending at the end of `bytes`): a long recording in one array, not one a moment.
    public func addPort(path: String, bytes: [UInt8], moments: [Moment]) {
        precondition(!ports.contains { $0.path == path }, "one port per path")
        precondition(zip(moments, moments.dropFirst()).allSatisfy { $0.atNs <= $1.atNs && $0.end <= $1.end }, "arrivals in time order")
        precondition((moments.last?.end ?? 0) == bytes.count, "the last arrival ends with the bytes")
        ports.append(Port(path: path, bytes: bytes, moments: moments))
    }

    /// Every port's bytes have arrived and been read.
    public var inputsConsumed: Bool { ports.allSatisfy { $0.next == $0.moments.count && $0.unread == 0 } }

    /// The moment of the last scripted arrival.
    public var lastArrivalNs: Int64? { ports.compactMap { $0.moments.last?.atNs }.max() }

    /// A poll returns at `atNs` even with nothing ready, so the owner acts at that moment.
    public func wake(atNs: Int64) {
        wakeups.insert(atNs, at: wakeups.firstIndex { $0 > atNs } ?? wakeups.count)
    }

    /// Time passes with no process to read (a power cut's downtime): what arrives meanwhile is lost.
    public func advance(toNs: Int64) {
        monotonicNs = max(monotonicNs, toNs)
        deliver()
    }

    // MARK: installing

    /// The seam answers from this simulation until `uninstall`.
    public func install() {
        precondition(SimulatedKernel.installed == nil, "one simulation at a time")
        SimulatedKernel.installed = self
        var hooks = locus_kernel_hooks()
        hooks.monotonic_ns = { SimulatedKernel.installed!.monotonicNs }
        hooks.realtime_ns = { SimulatedKernel.installed!.realtimeNs }
        // No descriptors (a sleep: `Clock.sleep`) comes with null arrays.
        hooks.poll = { fds, events, revents, count, timeout in
            SimulatedKernel.installed!.poll(fds, events, revents, Int(count), timeoutMs: timeout)
        }
        hooks.timerfd_create = { SimulatedKernel.installed!.createTimer() }
        hooks.timerfd_arm = { fd, delay in SimulatedKernel.installed!.arm(fd, delayNs: delay) }
        hooks.uart_open = { path, _ in SimulatedKernel.installed!.open(String(cString: path!)) }
        hooks.read = { fd, buffer, count in SimulatedKernel.installed!.read(fd, buffer!, count) }
        hooks.write = { fd, _, count in SimulatedKernel.installed!.write(fd, count) }
        hooks.close = { fd in SimulatedKernel.installed!.close(fd) }
        hooks.disk_write = { fd, _, count in SimulatedKernel.installed!.diskWrite(fd, count) }
        hooks.disk_sync = { fd in SimulatedKernel.installed!.diskSync(fd) }
        if random != nil { hooks.random64 = { SimulatedKernel.installed!.random!() } }
        locus_kernel_install(&hooks)
    }

    public func uninstall() {
        precondition(SimulatedKernel.installed === self, "uninstalling the simulation that is installed")
        locus_kernel_install(nil)
        SimulatedKernel.installed = nil
    }

    // MARK: the system calls

    private func allocateDescriptor() -> Int32 {
        defer { nextDescriptor += 1 }
        return nextDescriptor
    }

    private func open(_ path: String) -> Int32 {
        guard let port = ports.first(where: { $0.path == path }) else { return Int32(LOCUS_KERNEL_PASS) }
        guard port.descriptor == nil else { return -Int32(LOCUS_EBUSY) }
        port.descriptor = allocateDescriptor()
        port.received.removeAll()
        port.readOffset = 0
        return port.descriptor!
    }

    private func createTimer() -> Int32 {
        let descriptor = allocateDescriptor()
        timers.append((descriptor, nil))
        return descriptor
    }

    private func arm(_ descriptor: Int32, delayNs: Int64) -> Int32 {
        guard let index = timers.firstIndex(where: { $0.descriptor == descriptor }) else { return -Int32(LOCUS_EBADFD) }
        timers[index].deadlineNs = delayNs > 0 ? monotonicNs + delayNs : nil
        return 0
    }

    private func read(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
        if let port = ports.first(where: { $0.descriptor == descriptor }) {
            let taken = min(count, port.unread)
            guard taken > 0 else { return -Int(LOCUS_EAGAIN) }
            port.received.withUnsafeBytes { bytes in
                buffer.copyMemory(from: bytes.baseAddress! + port.readOffset, byteCount: taken)
            }
            port.readOffset += taken
            if port.readOffset == port.received.count {
                port.received.removeAll(keepingCapacity: true)
                port.readOffset = 0
            }
            return taken
        }
        if let index = timers.firstIndex(where: { $0.descriptor == descriptor }) {
            guard count >= 8, let deadline = timers[index].deadlineNs, deadline <= monotonicNs else { return -Int(LOCUS_EAGAIN) }
            timers[index].deadlineNs = nil
            buffer.storeBytes(of: UInt64(1), as: UInt64.self)
            return 8
        }
        return -Int(LOCUS_EBADFD)
    }

    private func write(_ descriptor: Int32, _ count: Int) -> Int {
        // What the reader writes (receiver commands) goes nowhere: a recording answers nothing.
        guard ports.contains(where: { $0.descriptor == descriptor }) else { return -Int(LOCUS_EBADFD) }
        return count
    }

    private func close(_ descriptor: Int32) -> Int32 {
        if let port = ports.first(where: { $0.descriptor == descriptor }) {
            port.descriptor = nil
            port.received.removeAll()
            port.readOffset = 0
            return 0
        }
        if let index = timers.firstIndex(where: { $0.descriptor == descriptor }) {
            timers.remove(at: index)
            return 0
        }
        return -Int32(LOCUS_EBADFD)
    }

    /// Ready descriptors now; with none and a timeout other than 0, time moves to the next thing
    /// that happens and the set is looked at once more.
    private func poll(_ fds: UnsafePointer<Int32>?, _ events: UnsafePointer<Int16>?, _ revents: UnsafeMutablePointer<Int16>?, _ count: Int,
                      timeoutMs: Int32) -> Int32 {
        guard count >= 0, count <= SimulatedKernel.pollCapacity, count == 0 || (fds != nil && events != nil && revents != nil) else {
            return -Int32(LOCUS_EINVAL)
        }
        let startNs = monotonicNs
        // Unpaced, Linux's descriptors (signals, the control socket) are asked at most once a
        // millisecond of wall time: a day of recording turns 86,400 times in well under a second.
        let wallNs = locus_kernel_monotonic_ns()
        let askLinux = asksLinuxEveryPoll || speed != nil || wallNs - lastAskedLinuxNs >= SimulatedKernel.unpacedLinuxPollNs
        if askLinux { lastAskedLinuxNs = wallNs }
        for pass in 0..<2 {
            deliver()
            let ready = readiness(fds, events, revents, count, realWaitMs: 0, askLinux: askLinux && (pass == 0 || speed != nil))
            guard ready == 0, timeoutMs != 0, pass == 0 else { return ready }
            var nextNs = nextHappening()
            if timeoutMs > 0 { nextNs = min(nextNs ?? Int64.max, startNs + Int64(timeoutMs) * 1_000_000) }
            guard let nextNs else {
                idlePolls += 1
                return 0
            }
            if let speed, nextNs > monotonicNs {
                // Paced: wait the scaled time for Linux's descriptors (a signal ends the wait).
                let waitMs = Int32(clamping: Int64(Double(nextNs - monotonicNs) / speed / 1_000_000))
                let before = locus_kernel_monotonic_ns()
                let woken = readiness(fds, events, revents, count, realWaitMs: waitMs, askLinux: true)
                if woken != 0 {
                    monotonicNs = min(nextNs, monotonicNs + Int64(Double(locus_kernel_monotonic_ns() - before) * speed))
                    return woken
                }
            }
            monotonicNs = max(monotonicNs, nextNs)
        }
        return 0
    }

    /// Linux's descriptors asked (waiting up to `realWaitMs`), the simulated ones answered here.
    private func readiness(_ fds: UnsafePointer<Int32>?, _ events: UnsafePointer<Int16>?, _ revents: UnsafeMutablePointer<Int16>?, _ count: Int,
                           realWaitMs: Int32, askLinux: Bool) -> Int32 {
        var real = 0
        for index in 0..<count {
            let simulated = fds![index] >= Int32(LOCUS_SIM_FD_BASE)
            realSet[index] = simulated ? -1 : fds![index]
            if !simulated && fds![index] >= 0 { real += 1 }
            revents![index] = 0
        }
        var ready: Int32 = 0
        if askLinux && (real > 0 || realWaitMs > 0) {
            ready = locus_kernel_poll(realSet.baseAddress, events, revents, Int32(count), real > 0 ? realWaitMs : 0)
            if ready < 0 { return ready }
            if real == 0 && realWaitMs > 0 { ready = 0 }
        }
        for index in 0..<count where fds![index] >= Int32(LOCUS_SIM_FD_BASE) {
            let flags = simulatedReadiness(fds![index], events![index])
            revents![index] = flags
            if flags != 0 { ready += 1 }
        }
        return ready
    }

    private func simulatedReadiness(_ descriptor: Int32, _ wanted: Int16) -> Int16 {
        if let port = ports.first(where: { $0.descriptor == descriptor }) {
            var flags: Int16 = 0
            if port.unread > 0 && wanted & Int16(LOCUS_POLLIN) != 0 { flags |= Int16(LOCUS_POLLIN) }
            if wanted & Int16(LOCUS_POLLOUT) != 0 { flags |= Int16(LOCUS_POLLOUT) }
            return flags
        }
        if let timer = timers.first(where: { $0.descriptor == descriptor }) {
            guard let deadline = timer.deadlineNs, deadline <= monotonicNs, wanted & Int16(LOCUS_POLLIN) != 0 else { return 0 }
            return Int16(LOCUS_POLLIN)
        }
        return Int16(LOCUS_POLLNVAL)
    }

    /// Arrivals whose moment has come go to their ports (lost on a closed one).
    private func deliver() {
        for port in ports {
            while port.next < port.moments.count && port.moments[port.next].atNs <= monotonicNs {
                let start = port.next == 0 ? 0 : port.moments[port.next - 1].end, end = port.moments[port.next].end
                // A closed port keeps nothing, as a UART keeps nothing for nobody.
                if port.descriptor != nil { port.received += port.bytes[start..<end] }
                port.next += 1
            }
        }
    }

    /// The earliest arrival or timer expiry still to come.
    private func nextHappening() -> Int64? {
        while let first = wakeups.first, first <= monotonicNs { wakeups.removeFirst() }
        var next: Int64? = wakeups.first
        for port in ports where port.next < port.moments.count {
            next = min(next ?? Int64.max, port.moments[port.next].atNs)
        }
        for timer in timers {
            if let deadline = timer.deadlineNs { next = min(next ?? Int64.max, max(deadline, monotonicNs)) }
        }
        return next
    }

    // MARK: the disk

    /// The files under a directory as a disk that can fill up, fail its syncs and lose power.
    /// Every sync that succeeds records how long the file was, which a power cut keeps.
    public struct Disk {
        public var directory: String? = nil
        /// Writes fail with ENOSPC.
        public var full = false
        /// fsync and fdatasync fail with EIO.
        public var syncFails = false
        /// Each file's length at its last successful sync, by path.
        public fileprivate(set) var syncedBytes: [String: Int64] = [:]
        public fileprivate(set) var writesRefused = 0
        public fileprivate(set) var syncsFailed = 0

        public init() {}

        /// `path` is the disk's (the directory itself or below it).
        func holds(_ path: String) -> Bool {
            guard let directory else { return false }
            return path == directory || path.hasPrefix(directory + "/")
        }
    }

    /// The file a Linux descriptor is open on, when the simulated disk holds it.
    private func diskPath(_ descriptor: Int32) -> String? {
        guard disk.directory != nil else { return nil }
        var target = [CChar](repeating: 0, count: 4096)
        let length = locus_readlink("/proc/self/fd/\(descriptor)", &target, target.count)
        guard length > 0 else { return nil }
        let path = String(decoding: target[0..<Int(length)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return disk.holds(path) ? path : nil
    }

    private func diskWrite(_ descriptor: Int32, _ count: Int) -> Int {
        guard disk.full, count > 0, diskPath(descriptor) != nil else { return Int(LOCUS_KERNEL_PASS) }
        disk.writesRefused += 1
        return -Int(LOCUS_ENOSPC)
    }

    private func diskSync(_ descriptor: Int32) -> Int32 {
        guard let path = diskPath(descriptor) else { return Int32(LOCUS_KERNEL_PASS) }
        if disk.syncFails {
            disk.syncsFailed += 1
            return -Int32(LOCUS_EIO)
        }
        let result = locus_kernel_fdatasync(descriptor)
        if result == 0 { disk.syncedBytes[path] = locus_file_size(descriptor) }
        return result
    }

    /// The power goes: every simulated descriptor is gone (ports keep nothing, timers stop), and
    /// each file on the disk keeps what `keep` says of it (from its synced length and its length
    /// now; `LogStore` files never synced have synced length 0). The caller drops the process's
    /// state; what it left open on Linux is its to close.
    public func powerCut(keep: (_ path: String, _ syncedBytes: Int64, _ fileBytes: Int64) -> Int64) {
        for port in ports {
            port.descriptor = nil
            port.received.removeAll()
            port.readOffset = 0
        }
        timers.removeAll()
        guard let directory = disk.directory, let segments = try? LogStore.segmentNames(directory) else { return }
        for segment in segments {
            let path = directory + "/" + LogStore.segmentFileName(segment)
            let descriptor = locus_open(path, Int32(LOCUS_O_WRITE), 0)
            guard descriptor >= 0 else { continue }
            let size = locus_file_size(descriptor)
            let synced = min(disk.syncedBytes[path] ?? 0, size)
            let kept = max(synced, min(size, keep(path, synced, size)))
            if kept < size { _ = locus_ftruncate(descriptor, kept) }
            _ = locus_kernel_fdatasync(descriptor)
            _ = locus_close(descriptor)
            disk.syncedBytes[path] = kept
        }
    }
}
