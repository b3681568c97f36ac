import AllocCounter
import Foundation
import Glibc
@testable import LocusCore
import Testing
import TestSupport

/// Bit-at-a-time CRC-32C straight from the definition (reflected 0x82F63B78): the reference the
/// slicing-by-8 implementation is checked against.
private func referenceCRC32C(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for byte in bytes {
        crc ^= UInt32(byte)
        for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
    }
    return ~crc
}

private func crc(_ bytes: [UInt8]) -> UInt32 {
    bytes.withUnsafeBytes { CRC32C.checksum($0) }
}

/// Encodes one record into a fresh array.
private func encoded(_ header: LogRecordHeader, _ payload: [UInt8]) throws -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: LogRecord.headerSize + payload.count)
    let size = try bytes.withUnsafeMutableBytes { buffer in
        try payload.withUnsafeBytes { try LogRecord.encode(header, payload: $0, into: buffer) }
    }
    #expect(size == bytes.count)
    return bytes
}

private func decode(_ bytes: [UInt8], at offset: Int = 0) -> LogRecordDecoding {
    bytes.withUnsafeBytes { LogRecord.decode($0, at: offset) }
}

/// A header written by hand (fields the encoder refuses to produce), with a valid header CRC.
private func handmadeHeader(type: UInt8, flags: UInt16, length: UInt32, sequence: UInt64 = 1, time: Int64 = 0) -> [UInt8] {
    var bytes: [UInt8] = [LogRecord.magic, type, UInt8(flags & 0xFF), UInt8(flags >> 8)]
    for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: length >> UInt32(shift))) }
    for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: sequence >> UInt64(shift))) }
    for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: UInt64(bitPattern: time) >> UInt64(shift))) }
    let headerCRC = crc(bytes)
    for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: headerCRC >> UInt32(shift))) }
    bytes += [0, 0, 0, 0]
    return bytes
}

@Suite struct CRC32CTests {
    @Test func checkValue() {
        #expect(crc(Array("123456789".utf8)) == 0xE306_9283)
    }

    /// RFC 3720 (iSCSI) Appendix B.4.
    @Test func rfc3720Vectors() {
        #expect(crc([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(crc([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(crc((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(crc((0..<32).reversed().map { UInt8($0) }) == 0x113F_DB5C)
        #expect(crc([]) == 0)
    }

    @Test func matchesTheBitwiseDefinitionAtEveryLengthAndAlignment() {
        var random = SplitMix64(state: 7)
        let bytes = (0..<300).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        for start in 0..<9 {
            for length in 0...(bytes.count - start) where length < 80 || length % 17 == 0 {
                let slice = Array(bytes[start..<(start + length)])
                #expect(crc(slice) == referenceCRC32C(slice), "start \(start) length \(length)")
            }
        }
    }

    @Test func updatingInPiecesEqualsOneChecksum() {
        let bytes = (0..<100).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        let whole = crc(bytes)
        for split in 0...bytes.count {
            let state = bytes.withUnsafeBytes { raw in
                CRC32C.update(CRC32C.update(CRC32C.initialState, UnsafeRawBufferPointer(rebasing: raw[0..<split])),
                              UnsafeRawBufferPointer(rebasing: raw[split...]))
            }
            #expect(CRC32C.finish(state) == whole)
        }
    }
}

@Suite struct LogRecordTests {
    let header = LogRecordHeader(type: .event, flags: [], payloadLength: 40, sequence: 0x0102_0304_0506_0708, time: 1_711_195_200_123_456_789)
    let payload: [UInt8] = (0..<40).map { UInt8($0 * 3 + 1) }

    @Test func layoutIsLittleEndianAsDocumented() throws {
        let bytes = try encoded(header, payload)
        #expect(bytes.count == 72)
        #expect(bytes[0] == 0xB1)
        #expect(bytes[1] == LogRecordType.event.rawValue)
        #expect(bytes[2...3] == [0, 0])
        #expect(bytes[4...7] == [40, 0, 0, 0])
        #expect(bytes[8...15] == [8, 7, 6, 5, 4, 3, 2, 1])
        #expect(Array(bytes[32...]) == payload)
        let headerCRC = crc(Array(bytes[0..<24]))
        #expect(bytes[24...27] == [UInt8(headerCRC & 0xFF), UInt8(headerCRC >> 8 & 0xFF), UInt8(headerCRC >> 16 & 0xFF), UInt8(headerCRC >> 24)])
        let recordCRC = crc(Array(bytes[0..<24]) + payload)
        #expect(bytes[28...31] == [UInt8(recordCRC & 0xFF), UInt8(recordCRC >> 8 & 0xFF), UInt8(recordCRC >> 16 & 0xFF), UInt8(recordCRC >> 24)])
    }

    @Test func roundTrip() throws {
        for (type, length) in [(LogRecordType.start, 0), (.checkpoint, 1), (.gpio, 7), (.fix, 4096), (.diagnostic, LogRecord.maximumPayloadSize)] {
            let body = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }
            let header = LogRecordHeader(type: type, flags: [.moreFollow], payloadLength: length, sequence: 42, time: -5)
            let bytes = try encoded(header, body)
            guard case .record(let decoded, let range) = decode(bytes) else {
                Issue.record("\(type) did not decode")
                continue
            }
            #expect(decoded == header)
            #expect(decoded.type == type)
            #expect(range == 32..<(32 + length))
            #expect(Array(bytes[range]) == body)
        }
    }

    @Test func decodesRecordsBackToBackAtOffsets() throws {
        var stream: [UInt8] = []
        for sequence in 1...5 {
            let body = [UInt8](repeating: UInt8(sequence), count: sequence * 3)
            stream += try encoded(LogRecordHeader(type: .event, payloadLength: body.count, sequence: UInt64(sequence), time: 0), body)
        }
        var offset = 0
        var sequences: [UInt64] = []
        while offset < stream.count, case .record(let header, let payload) = decode(stream, at: offset) {
            sequences.append(header.sequence)
            #expect(stream[payload].allSatisfy { $0 == UInt8(header.sequence) })
            offset = payload.upperBound
        }
        #expect(sequences == [1, 2, 3, 4, 5])
        #expect(offset == stream.count)
    }

    @Test func everySingleBitFlipIsRejected() throws {
        let bytes = try encoded(header, payload)
        for bit in 0..<(bytes.count * 8) {
            var damaged = bytes
            damaged[bit / 8] ^= 1 << UInt8(bit % 8)
            guard case .rejected(let reason) = decode(damaged) else {
                Issue.record("flipping bit \(bit) was accepted")
                continue
            }
            let byte = bit / 8
            let expected: LogRecordRejection = byte == 0 ? .badMagic : byte < 28 ? .headerChecksum : .recordChecksum
            #expect(reason == expected, "bit \(bit)")
        }
    }

    @Test func everyTruncationIsRejected() throws {
        let bytes = try encoded(header, payload)
        for length in 0..<bytes.count {
            let reason: LogRecordRejection = length < LogRecord.headerSize ? .truncatedHeader : .truncatedPayload
            #expect(decode(Array(bytes[0..<length])) == .rejected(reason), "length \(length)")
        }
    }

    /// A header that passes its checksum but claims 4 GiB: rejected from the 32 header bytes alone.
    /// The record sits at the very end of a mapped page followed by an inaccessible page, so a read
    /// past the buffer would crash the test.
    @Test func hugeLengthIsRejectedWithoutReadingPastTheBuffer() throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let mapping = mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let mapping, mapping != MAP_FAILED else { throw POSIXError(.ENOMEM) }
        defer { munmap(mapping, 2 * page) }
        #expect(mprotect(mapping + page, page, PROT_NONE) == 0)
        func decodeAtPageEnd(_ bytes: [UInt8]) -> LogRecordDecoding {
            let start = mapping + page - bytes.count
            bytes.withUnsafeBytes { start.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
            return LogRecord.decode(UnsafeRawBufferPointer(start: start, count: bytes.count), at: 0)
        }
        #expect(decodeAtPageEnd(handmadeHeader(type: 5, flags: 0, length: .max)) == .rejected(.oversizedLength))
        #expect(decodeAtPageEnd(handmadeHeader(type: 5, flags: 0, length: UInt32(LogRecord.maximumPayloadSize + 1))) == .rejected(.oversizedLength))
        #expect(decodeAtPageEnd(handmadeHeader(type: 5, flags: 0, length: 1000) + [1, 2, 3]) == .rejected(.truncatedPayload))
        // A damaged length never gets as far as being believed.
        var damaged = try encoded(header, payload)
        damaged[7] ^= 0x80
        #expect(decodeAtPageEnd(damaged) == .rejected(.headerChecksum))
        #expect(decodeAtPageEnd(Array(damaged[0..<20])) == .rejected(.truncatedHeader))
    }

    @Test func fieldsNoWriterProducesAreRejected() {
        #expect(decode(handmadeHeader(type: 0, flags: 0, length: 0)) == .rejected(.invalidType))
        #expect(decode(handmadeHeader(type: 5, flags: 4, length: 0)) == .rejected(.unsupportedFlags))
        #expect(decode([UInt8](repeating: 0, count: 64)) == .rejected(.zeroFill))
        #expect(decode([0x42] + [UInt8](repeating: 0, count: 63)) == .rejected(.badMagic))
    }

    @Test func unknownTypeCodesDecodeForForwardCompatibility() throws {
        var bytes = handmadeHeader(type: 200, flags: 0, length: 0)
        let recordCRC = crc(Array(bytes[0..<24]))
        for index in 0..<4 { bytes[28 + index] = UInt8(truncatingIfNeeded: recordCRC >> UInt32(8 * index)) }
        guard case .record(let header, _) = decode(bytes) else {
            Issue.record("type 200 rejected")
            return
        }
        #expect(header.typeCode == 200)
        #expect(header.type == nil)
    }

    @Test func encodeRefusesWhatDoesNotFit() {
        var small = [UInt8](repeating: 0, count: 40)
        #expect(throws: LogRecordEncodingError.bufferTooSmall(needed: 72)) {
            try small.withUnsafeMutableBytes { buffer in
                try payload.withUnsafeBytes { _ = try LogRecord.encode(header, payload: $0, into: buffer) }
            }
        }
        let huge = [UInt8](repeating: 1, count: LogRecord.maximumPayloadSize + 1)
        var big = [UInt8](repeating: 0, count: huge.count + 64)
        let hugeHeader = LogRecordHeader(type: .event, payloadLength: huge.count, sequence: 1, time: 0)
        #expect(throws: LogRecordEncodingError.payloadTooLarge(huge.count)) {
            try big.withUnsafeMutableBytes { buffer in
                try huge.withUnsafeBytes { _ = try LogRecord.encode(hugeHeader, payload: $0, into: buffer) }
            }
        }
    }

    /// Random multi-bit damage anywhere in a stream of records: a record is either rejected or
    /// byte-for-byte the one that was written.
    @Test func randomDamageNeverYieldsAForeignRecord() throws {
        var random = SplitMix64(state: 99)
        var originals: [UInt64: [UInt8]] = [:]
        var stream: [UInt8] = []
        for sequence in 1...20 {
            let body = (0..<random.below(200)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let record = try encoded(LogRecordHeader(type: .event, payloadLength: body.count, sequence: UInt64(sequence), time: 1), body)
            originals[UInt64(sequence)] = record
            stream += record
        }
        for _ in 0..<2000 {
            var damaged = stream
            for _ in 0..<(1 + random.below(4)) { damaged[random.below(damaged.count)] ^= UInt8(1 + random.below(255)) }
            var offset = 0
            while offset < damaged.count, case .record(let header, let payload) = decode(damaged, at: offset) {
                #expect(Array(damaged[(payload.lowerBound - 32)..<payload.upperBound]) == originals[header.sequence])
                offset = payload.upperBound
            }
        }
    }

    @Test func encodeAndDecodeDoNotAllocateAfterWarmUp() throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: LogRecord.maximumRecordSize, alignment: 16)
        defer { buffer.deallocate() }
        let body = UnsafeMutableRawBufferPointer.allocate(byteCount: 200, alignment: 16)
        defer { body.deallocate() }
        body.initializeMemory(as: UInt8.self, repeating: 0x5A)
        var accepted = 0
        func pass() {
            for sequence in 0..<100 {
                let header = LogRecordHeader(type: .event, payloadLength: 200, sequence: UInt64(sequence), time: 0)
                let size = (try? LogRecord.encode(header, payload: UnsafeRawBufferPointer(body), into: buffer)) ?? 0
                if case .record = LogRecord.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<size]), at: 0) { accepted += 1 }
            }
        }
        pass() // warm-up: builds the CRC tables once
        let counted = allocations { pass() }
        #expect(counted == 0)
        #expect(accepted == 200)
    }
}

@Suite struct LogCheckpointTrackerTests {
    private func record(_ sequence: UInt64, _ type: LogRecordType = .checkpoint, _ flags: LogRecordFlags = []) -> LogRecordHeader {
        LogRecordHeader(type: type, flags: flags, payloadLength: 0, sequence: sequence, time: 0)
    }

    @Test func singleRecordCheckpoint() {
        var tracker = LogCheckpointTracker()
        tracker.note(record(1, .event))
        #expect(tracker.lastComplete == nil)
        tracker.note(record(2))
        #expect(tracker.lastComplete == 2)
    }

    @Test func groupCompletesOnlyWhenClosed() {
        var tracker = LogCheckpointTracker()
        tracker.note(record(5))
        tracker.note(record(10, .checkpoint, .moreFollow))
        tracker.note(record(11, .checkpoint, [.continuation, .moreFollow]))
        tracker.note(record(12, .event))
        #expect(tracker.lastComplete == 5)
        tracker.note(record(13, .checkpoint, .continuation))
        #expect(tracker.lastComplete == 10)
        #expect(tracker.open == nil)
    }

    @Test func interruptedOrHeadlessGroupsNeverComplete() {
        var tracker = LogCheckpointTracker()
        tracker.note(record(3, .checkpoint, .moreFollow))
        tracker.interrupt()
        tracker.note(record(9, .checkpoint, .continuation))
        #expect(tracker.lastComplete == nil)
        tracker.note(record(20, .checkpoint, .moreFollow))
        tracker.note(record(21, .checkpoint, .moreFollow)) // a new group restarts the open one
        tracker.note(record(22, .checkpoint, .continuation))
        #expect(tracker.lastComplete == 21)
    }
}
