import CLocus
import LocusCore

/// What `locus doctor` reads from the system. Every path is read under `root` (a hidden
/// `--root DIR` option, "/" otherwise), so the tests run the same probes on fixture trees of
/// /proc, /sys, /dev links and /etc. Each probe only gathers values; LocusCore decides.
public struct SystemProbe {
    public let root: String

    public init(root: String) {
        var bytes = Array(root.utf8)
        while bytes.count > 1, bytes.last == 0x2F { bytes.removeLast() }
        self.root = String(decoding: bytes, as: UTF8.self)
    }

    /// Whether this is the running system (hardware probes with no file to redirect run only then).
    public var isLive: Bool { root == "/" }

    /// `absolute` under the root.
    public func path(_ absolute: String) -> String { isLive ? absolute : root + absolute }

    /// A small file (/proc and /sys report size 0, so this reads to the end, at most `limit`).
    public func read(_ absolute: String, limit: Int = 64 << 10) -> [UInt8]? {
        let fd = locus_open(path(absolute), Int32(LOCUS_O_READ), 0)
        guard fd >= 0 else { return nil }
        defer { _ = locus_close(fd) }
        var bytes = [UInt8](repeating: 0, count: limit)
        var filled = 0
        while filled < limit {
            let count = bytes.withUnsafeMutableBytes { locus_read(fd, $0.baseAddress! + filled, limit - filled) }
            if count <= 0 { break }
            filled += Int(count)
        }
        bytes.removeLast(limit - filled)
        return bytes
    }

    /// A one-line file's text without its newline (/proc/PID/comm, /sys attributes).
    public func readLine(_ absolute: String) -> String? {
        guard let bytes = read(absolute, limit: 256) else { return nil }
        return SystemText.string(SystemText.trimmed(bytes[...]))
    }

    /// stat(2) of `absolute` under the root; on failure nil and the reason. The group is its
    /// number: `namingGroup` looks the name up (only where a finding shows it).
    public func node(_ absolute: String) -> (node: DeviceNode?, error: String) {
        var kind: Int32 = 0
        var major: UInt32 = 0
        var minor: UInt32 = 0
        var mode: UInt32 = 0
        var gid: UInt32 = 0
        let result = locus_stat_node(path(absolute), &kind, &major, &minor, &mode, &gid)
        if result < 0 { return (nil, SystemError(code: -result).description) }
        let kinds: [DeviceNode.Kind] = [.other, .characterDevice, .directory, .regular]
        return (DeviceNode(kind: kinds[Int(kind)], major: Int(major), minor: Int(minor), mode: Int(mode), group: "\(gid)"), "")
    }

    /// The node with its group's name from /etc/group under the root (then, live, the system's
    /// own lookup, which also knows groups from LDAP or systemd-userdb).
    public func namingGroup(_ node: DeviceNode) -> DeviceNode {
        var named = node
        guard let gid = Int(node.group) else { return named }
        if let name = read("/etc/group").flatMap({ EtcGroup.name(of: gid, in: $0) }) {
            named.group = name
        } else if isLive, let name = Accounts.groupName(UInt32(gid)) {
            named.group = name
        }
        return named
    }

    public func exists(_ absolute: String) -> Bool { node(absolute).node != nil }

    public func readLink(_ absolute: String) -> String? {
        var target = [CChar](repeating: 0, count: 512)
        let length = target.withUnsafeMutableBufferPointer { locus_readlink(path(absolute), $0.baseAddress, $0.count) }
        guard length >= 0 else { return nil }
        return target.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Names in a directory, at most `limit` of them (/proc can hold many thousand entries).
    public func list(_ absolute: String, limit: Int = 4096) -> [String] {
        var names: [String] = []
        let visit: @convention(c) (UnsafePointer<CChar>?, UnsafeMutableRawPointer?) -> Void = { name, context in
            guard let name, let context else { return }
            context.assumingMemoryBound(to: [String].self).pointee.append(String(cString: name))
        }
        _ = withUnsafeMutablePointer(to: &names) { locus_list_directory(path(absolute), visit, UnsafeMutableRawPointer($0)) }
        if names.count > limit { names.removeLast(names.count - limit) }
        return names
    }

    /// The terminal a device path names, following /dev links under the root (/dev/serial0 →
    /// ttyS0, /dev/serial/by-id/... → ttyUSB0). A link whose target is not under the root ends
    /// the walk at the link's own name. At most 8 links, as the kernel's own limit is near that.
    public func terminalName(_ device: String) -> String {
        var current = device
        for _ in 0..<8 {
            guard let target = readLink(current) else { break }
            let next = target.utf8.first == 0x2F ? target : directory(of: current) + "/" + target
            guard exists(next) || readLink(next) != nil else { break }
            current = next
        }
        return SystemText.baseName(current)
    }

    private func directory(of file: String) -> String {
        let bytes = Array(file.utf8)
        guard let slash = bytes.lastIndex(of: 0x2F), slash > 0 else { return "" }
        return String(decoding: bytes[..<slash], as: UTF8.self)
    }

    /// Process ids in /proc, at most 4096 (bounded: doctor must finish on a busy gateway).
    public func processIDs() -> [Int] {
        list("/proc").compactMap { SystemText.integer(Array($0.utf8)[...]) }
    }

    /// Processes with a descriptor open on one of `paths` (/proc/PID/fd links), and their names.
    /// Others' descriptors are readable only as root; those processes are silently skipped.
    public func holders(of paths: [String]) -> [Holder] {
        var holders: [Holder] = []
        for pid in processIDs() {
            for descriptor in list("/proc/\(pid)/fd", limit: 1024) {
                guard let target = readLink("/proc/\(pid)/fd/\(descriptor)"), paths.contains(target) else { continue }
                var name = "?"
                if let comm = readLine("/proc/\(pid)/comm") { name = comm } // if-let: the aarch64 Embedded build miscompiles ?? between Strings
                holders.append(Holder(pid: pid, name: name))
                break
            }
        }
        return holders
    }

    /// Processes whose command name (/proc/PID/comm) is `name`.
    public func processes(named name: String) -> [Holder] {
        processIDs().compactMap { pid in readLine("/proc/\(pid)/comm") == name ? Holder(pid: pid, name: name) : nil }
    }
}

extension SystemProbe {
    /// Getty units linked into a target's wants (where `systemctl enable` puts them, and where
    /// systemd's getty generator does for consoles), with whether each is masked.
    public func gettyUnits() -> [(unit: String, masked: Bool)] {
        let directories = ["/etc/systemd/system/getty.target.wants", "/etc/systemd/system/multi-user.target.wants",
                           "/run/systemd/generator/getty.target.wants"]
        var units: [(unit: String, masked: Bool)] = []
        for directory in directories {
            for name in list(directory, limit: 256) where SystemdUnits.gettyTerminal(name) != nil {
                var masked = false
                if let target = readLink("\(directory)/\(name)"), SystemdUnits.isMasked(linkTarget: target) { masked = true }
                for place in ["/etc/systemd/system/", "/run/systemd/system/"] {
                    if let target = readLink(place + name), SystemdUnits.isMasked(linkTarget: target) { masked = true }
                }
                units.append((name, masked))
            }
        }
        return units
    }

    /// GPIO chips: each /dev/gpiochipN that opens, with its label and line count.
    public func gpioChips() -> [SystemChecks.GPIOChip] {
        var chips: [SystemChecks.GPIOChip] = []
        for name in list("/dev", limit: 1024).sorted() where name.utf8.starts(with: "gpiochip".utf8) {
            var label = [CChar](repeating: 0, count: 64)
            var lines: Int32 = 0
            let result = label.withUnsafeMutableBufferPointer { locus_gpio_chip_info(path("/dev/" + name), $0.baseAddress, $0.count, &lines) }
            guard result == 0 else { continue }
            chips.append(SystemChecks.GPIOChip(name: name, label: label.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }, lineCount: Int(lines)))
        }
        return chips
    }

    /// For each line offset of chip `name`: its consumer when in use, nil when free.
    public func gpioConsumers(chip name: String, lines: [Int]) -> [String?] {
        lines.map { line -> String? in
            var consumer = [CChar](repeating: 0, count: 64)
            let used = consumer.withUnsafeMutableBufferPointer { locus_gpio_line_consumer(path("/dev/" + name), UInt32(line), $0.baseAddress, $0.count) }
            guard used == 1 else { return nil }
            let text = consumer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            return text.isEmpty ? "(unnamed)" : text
        }
    }

    /// The radio switches in /sys/class/rfkill.
    public func radioSwitches() -> [SystemChecks.RadioSwitch] {
        list("/sys/class/rfkill", limit: 64).sorted().compactMap { entry in
            let base = "/sys/class/rfkill/\(entry)/"
            guard let type = readLine(base + "type") else { return nil }
            var name = entry
            if let written = readLine(base + "name") { name = written }
            return SystemChecks.RadioSwitch(name: name, type: type,
                                            softBlocked: readLine(base + "soft") == "1", hardBlocked: readLine(base + "hard") == "1")
        }
    }

    /// Whether adapter `index` is up; nil when it cannot be asked (not the live system, or no
    /// Bluetooth socket support).
    public func adapterUp(_ index: Int) -> Bool? {
        guard isLive else { return nil }
        let result = locus_hci_probe_up(Int32(index))
        return result < 0 ? nil : result == 1
    }

    /// Processes with a Bluetooth HCI socket open: the socket inodes /proc/net/bluetooth/hci lists
    /// (`sk RefCnt Rmem Wmem User Inode Parent`) matched against /proc/PID/fd's `socket:[inode]`.
    public func hciSocketHolders() -> [Holder] {
        guard let table = read("/proc/net/bluetooth/hci") else { return [] }
        var sockets: [String] = []
        for line in SystemText.lines(table).dropFirst() {
            let words = SystemText.words(line)
            if words.count >= 6, let inode = SystemText.integer(words[5]), inode > 0 { sockets.append("socket:[\(inode)]") }
        }
        return sockets.isEmpty ? [] : holders(of: sockets)
    }

    /// The programs holding adapter `index` through the HCI user channel, from the monitor
    /// channel's replay (CAP_NET_RAW; it names them even where /proc hides other users'
    /// processes). Empty under a fixture root or when the replay cannot be read.
    public func userChannelHolders(_ index: Int) -> [String] {
        guard isLive else { return [] }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
        defer { buffer.deallocate() }
        guard case .success(let users) = HCIUsers.read(MgmtSocket(), buffer: buffer) else { return [] }
        var names: [String] = []
        for user in users where user.channel == .user && Int(user.index) == index && !names.contains(user.name) {
            names.append(user.name)
        }
        return names
    }

    /// The kernel clock's synchronisation flag (adjtimex); nil when it cannot be read.
    public func clockSynchronised() -> Bool? {
        let result = locus_clock_synchronised()
        return result < 0 ? nil : result == 1
    }
}

extension SystemProbe {
    /// Creates, writes, syncs and removes a probe file in the state directory (what the log does
    /// to a segment), then measures the room left and the log's present size.
    public func stateDirectory(_ directory: String) -> SystemChecks.StateProbe {
        let location = path(directory)
        let isDirectory = locus_is_directory(location)
        if isDirectory == -Int32(LOCUS_ENOENT) { return SystemChecks.StateProbe(failure: nil, exists: false, freeBytes: nil, logBytes: 0) }
        if isDirectory != 1 {
            let why = isDirectory < 0 ? SystemProbe.explain(SystemError(code: -isDirectory)) : "not a directory"
            return SystemChecks.StateProbe(failure: why, exists: true, freeBytes: nil, logBytes: 0)
        }
        var free: Int64 = 0
        let measured = locus_free_bytes(location, &free) == 0
        var logBytes: Int64 = 0
        for name in list(directory, limit: 4096) {
            let fd = locus_open(location + "/" + name, Int32(LOCUS_O_READ | LOCUS_O_NONBLOCK), 0)
            guard fd >= 0 else { continue }
            if locus_is_directory(location + "/" + name) == 0 { logBytes += max(0, locus_file_size(fd)) }
            _ = locus_close(fd)
        }
        return SystemChecks.StateProbe(failure: writeProbe(location), exists: true, freeBytes: measured ? free : nil, logBytes: logBytes)
    }

    /// nil when a file could be created, written, synced and removed; else the step and errno.
    private func writeProbe(_ location: String) -> String? {
        let file = location + "/.locus-doctor-\(locus_getpid())"
        let fd = locus_open(file, Int32(LOCUS_O_WRITE | LOCUS_O_CREATE | LOCUS_O_EXCLUSIVE), 0o600)
        if fd < 0 { return "create: " + SystemProbe.explain(SystemError(code: -fd)) }
        let bytes: [UInt8] = Array("locus doctor\n".utf8)
        var result = Int(bytes.withUnsafeBytes { locus_write_all(fd, $0.baseAddress, $0.count) })
        var step = "write"
        if result >= 0 {
            step = "fsync"
            result = Int(locus_fsync(fd))
        }
        _ = locus_close(fd)
        let removed = locus_unlink(file)
        if result < 0 { return step + ": " + SystemProbe.explain(SystemError(code: Int32(truncatingIfNeeded: -result))) }
        if removed < 0 { return "unlink: " + SystemProbe.explain(SystemError(code: -removed)) }
        return nil
    }

    /// The errno's text, with the C name for the ones a technician will search for.
    static func explain(_ error: SystemError) -> String {
        let names: [(Int, String)] = [(Int(LOCUS_EROFS), "EROFS"), (Int(LOCUS_EACCES), "EACCES"), (Int(LOCUS_ENOSPC), "ENOSPC"), (Int(LOCUS_EPERM), "EPERM")]
        for (code, name) in names where Int(error.code) == code { return "\(error) (\(name))" }
        return error.description
    }

    /// Whether an agent serves the state directory: its control socket accepts a connection.
    public func agentRunning(stateDirectory: String) -> Bool {
        locus_unix_touch(path(stateDirectory + "/control.sock")) == 0
    }

    /// Bytes from the receiver's port at `baud` for `durationMs` (at most 16 KB), or why the
    /// port could not be opened as a terminal. `enough`, when given, ends the sample early once it
    /// holds for the bytes read so far.
    public func sampleSerial(_ device: String, baud: Int, durationMs: Int64, enough: (([UInt8]) -> Bool)? = nil) -> Result<[UInt8], SystemError> {
        let fd = locus_uart_open(path(device), Int32(baud))
        if fd < 0 { return .failure(SystemError(code: -fd)) }
        defer { _ = locus_close(fd) }
        let capacity = 16 << 10
        var bytes = [UInt8](repeating: 0, count: capacity)
        var filled = 0
        let deadline = locus_monotonic_ns() + durationMs * 1_000_000
        while filled < capacity {
            let remainingMs = (deadline - locus_monotonic_ns()) / 1_000_000
            if remainingMs <= 0 { break }
            guard Files.waitUntilReadable(fd, timeoutMs: Int32(min(remainingMs, 1000))) else { continue }
            let count = bytes.withUnsafeMutableBytes { locus_read(fd, $0.baseAddress! + filled, capacity - filled) }
            if count == 0 { break } // hung up
            if count < 0 && count != -Int(LOCUS_EAGAIN) { break }
            if count > 0 {
                filled += Int(count)
                if let enough, enough(Array(bytes[0..<filled])) { break }
            }
        }
        bytes.removeLast(capacity - filled)
        return .success(bytes)
    }
}
