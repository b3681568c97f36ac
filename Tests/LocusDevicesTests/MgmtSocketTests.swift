import CLocus
import LocusCore
import Testing
@testable import LocusDevices

// The mgmt and monitor sockets: the real ones against this kernel (which may lack Bluetooth), and
// a recording driver that plays the kernel's mgmt interface for KernelScannerTests: each command
// written is answered with a Command Complete (layouts from include/net/bluetooth/mgmt.h) unless
// the test scripts a status; events the test queues arrive on the next read.

let mgmtEAGAIN = -Int(LOCUS_EAGAIN)

func le16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }

func mgmtEvent(_ code: Int, index: Int = 0, _ parameters: [UInt8]) -> [UInt8] {
    le16(code) + le16(index) + le16(parameters.count) + parameters
}

/// The kernel as the fake driver sees it. A class so the driver can record; tests only.
final class FakeKernel {
    var version: [UInt8] = [1, 22, 0]
    var commands: [Int] = [0x0001, 0x0002, 0x0003, 0x0004, 0x0005, 0x0051, 0x0052, 0x0053]
    var indexes: [Int] = [0]
    var settings: UInt32 = 0x0201
    var nextHandle = 1
    /// Statuses to answer per opcode, in order, before succeeding.
    var statuses: [Int: [UInt8]] = [:]
    var queue: [[UInt8]] = []
    var sent: [[UInt8]] = []
    var state: [String: String] = [:]
    var closed: [Int32] = []
    var monitorRecords: [[UInt8]] = []
    /// Read Advertising Features' Max_Instances.
    var maxInstances: UInt8 = 5

    var sentOpcodes: [Int] { sent.map { Int($0[0]) | Int($0[1]) << 8 } }

    func answer(_ packet: [UInt8]) {
        let opcode = Int(packet[0]) | Int(packet[1]) << 8, index = Int(packet[2]) | Int(packet[3]) << 8
        if var list = statuses[opcode], !list.isEmpty {
            let status = list.removeFirst()
            statuses[opcode] = list
            queue.append(mgmtEvent(0x0001, index: index, le16(opcode) + [status]))
            return
        }
        var reply: [UInt8] = []
        switch opcode {
        case 0x0001: reply = version
        case 0x0002: reply = le16(commands.count) + le16(0) + commands.flatMap(le16)
        case 0x0003: reply = le16(indexes.count) + indexes.flatMap(le16)
        case 0x0004:
            reply = [0x43, 0x3E, 0xA2, 0xC9, 0x6B, 0x6A, 9, 2, 0, 0xFF, 0xFF, 0, 0]
                + [UInt8(settings & 0xFF), UInt8(settings >> 8 & 0xFF), 0, 0] + [UInt8](repeating: 0, count: 263)
        case 0x0005:
            settings |= 1
            reply = [UInt8(settings & 0xFF), UInt8(settings >> 8), 0, 0]
        case 0x0052:
            reply = le16(nextHandle)
            nextHandle += 1
        case 0x0053: reply = Array(packet[6...])
        case 0x003D: reply = [0xFF, 0x03, 0, 0, 31, 31, maxInstances, 0]
        case 0x003E, 0x003F: reply = [packet[6]]
        default: break
        }
        queue.append(mgmtEvent(0x0001, index: index, le16(opcode) + [0] + reply))
    }
}

struct FakeMgmt: MgmtDriver {
    let kernel: FakeKernel
    func openControl() -> Int32 { 9 }
    func openMonitor() -> Int32 { 10 }
    func close(_ descriptor: Int32) { kernel.closed.append(descriptor) }
    func write(_ descriptor: Int32, _ command: MgmtCommand) -> Int {
        let packet = command.withUnsafeBytes { Array($0) }
        kernel.sent.append(packet)
        kernel.answer(packet)
        return packet.count
    }
    func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        if descriptor == 10 {
            guard !kernel.monitorRecords.isEmpty else { return mgmtEAGAIN }
            let record = kernel.monitorRecords.removeFirst()
            buffer.copyBytes(from: record)
            return record.count
        }
        guard !kernel.queue.isEmpty else { return mgmtEAGAIN }
        let packet = kernel.queue.removeFirst()
        buffer.copyBytes(from: packet)
        return packet.count
    }
    func waitReadable(_ descriptor: Int32, timeoutMs: Int32) -> Bool { !kernel.queue.isEmpty }
    func load(_ path: String) -> [UInt8]? { kernel.state[path].map { Array($0.utf8) } }
    func store(_ path: String, _ text: String?) { kernel.state[path] = text }
}

@Suite struct MgmtSocketTests {
    /// Without CAP_NET_ADMIN, or without Bluetooth in this kernel, the open fails with an errno;
    /// with both it succeeds. Either way no descriptor leaks and the answer is exact.
    @Test func realSocketsOpenOrSayWhy() {
        for descriptor in [MgmtSocket().openControl(), MgmtSocket().openMonitor()] {
            if descriptor >= 0 {
                MgmtSocket().close(descriptor)
            } else {
                #expect([-Int32(LOCUS_EAFNOSUPPORT), -Int32(LOCUS_EPERM), -Int32(LOCUS_EACCES)].contains(descriptor))
            }
        }
    }

    @Test func monitorReplayNamesTheOtherUsers() {
        let kernel = FakeKernel()
        let comm = Array("bluetoothd".utf8) + [UInt8](repeating: 0, count: 6)
        kernel.monitorRecords = [
            le16(0) + le16(0) + le16(2) + [0, 1],
            le16(14) + le16(0xFFFF) + le16(30) + [1, 0, 0, 0, 2, 0, 1, 22, 0, 1, 0, 0, 0, 16] + comm,
            le16(14) + le16(0) + le16(18) + [2, 0, 0, 0, 1, 0, 1, 22, 0, 0, 0, 0, 0, 4] + Array("btpx".utf8),
        ]
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
        defer { buffer.deallocate() }
        let users = try? HCIUsers.read(FakeMgmt(kernel: kernel), buffer: buffer).get()
        #expect(users?.map(\.description) == ["'bluetoothd' (mgmt)", "'btpx' (user channel hci0)"])
        #expect(kernel.closed == [10])
    }
}
