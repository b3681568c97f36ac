import Foundation
import LocusCore
import Testing
@testable import LocusDevices

/// What host programs that block (locus-fleet) take from LocusDevices instead of Glibc.
@Suite struct HostBlockingTests {
    static func temporaryDirectory() -> String {
        let path = NSTemporaryDirectory() + "locus-host-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func aFileIsReadInChunksAndItsStartAlone() throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/data"
        let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0) }
        FileManager.default.createFile(atPath: path, contents: Data(bytes))
        let file = try ReadableFile(path: path)
        var read: [UInt8] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 1)
        defer { buffer.deallocate() }
        while true {
            let count = try file.read(into: buffer)
            if count == 0 { break }
            read += buffer[0..<count]
        }
        #expect(read == bytes)
        #expect(try Files.readStart(path, maximumBytes: 100) == Array(bytes.prefix(100)))
        #expect(try Files.readStart(path, maximumBytes: 20_000) == bytes)
        #expect(throws: SystemError.notFound) { try ReadableFile(path: directory + "/missing") }
        #expect(throws: SystemError.isDirectory) { try ReadableFile(path: directory) }
    }

    @Test func aCanonicalPathHasNoLinks() throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let real = Files.canonicalPath(directory)!
        try FileManager.default.createSymbolicLink(atPath: directory + "/link", withDestinationPath: real)
        #expect(Files.canonicalPath(directory + "/link/.") == real)
        #expect(Files.canonicalPath(directory + "/missing") == nil)
    }

    @Test func waitingOnOneDescriptorSaysWhenItIsReady() {
        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        defer { close(descriptors[0]); close(descriptors[1]) }
        let reading = Descriptor(descriptors[0])!, writing = Descriptor(descriptors[1])!
        #expect(reading.wait(until: .readable, timeoutMs: 0) == .success(false))
        #expect(writing.wait(until: .writable, timeoutMs: 0) == .success(true))
        #expect(write(descriptors[1], "x", 1) == 1)
        #expect(reading.wait(until: .readable, timeoutMs: 1_000) == .success(true))
        let start = MonotonicClock.now()
        MonotonicClock.sleep(milliseconds: 20)
        #expect(MonotonicClock.now() - start >= 20_000_000)
    }

    @Test func theHostResolverKnowsLocalhost() throws {
        let addresses = try HostResolver.addresses(of: "localhost").get()
        #expect(addresses.contains(IPAddress("127.0.0.1")!) || addresses.contains(IPAddress("::1")!))
        #expect(Set(addresses.map { $0.description }).count == addresses.count)
        #expect(throws: HostResolver.ResolveError.self) { try HostResolver.addresses(of: "no-such-host.invalid").get() }
    }
}
