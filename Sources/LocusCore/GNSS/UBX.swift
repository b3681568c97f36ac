// u-blox UBX binary protocol: the few configuration messages Locus sends, and the ACK-ACK /
// ACK-NAK replies the live-update code waits for.
//
// References (cited by section title, because section numbers move between revisions):
//   [U6]  u-blox 6 Receiver Description including Protocol Specification, GPS.G6-SW-10018
//   [M8]  u-blox 8 / u-blox M8 Receiver Description including Protocol Specification,
//         UBX-13003221
// Both describe the same frame ("UBX Protocol > UBX Packet Structure", "UBX Checksum") and the
// same message layouts for everything here except CFG-PM2, whose M8 form is used (see below).

/// A UBX message's class and ID, e.g. CFG-RATE is class 0x06, ID 0x08.
public struct UBXMessageID: Equatable, Hashable, Sendable {
    public var messageClass: UInt8
    public var id: UInt8

    public init(messageClass: UInt8, id: UInt8) {
        self.messageClass = messageClass
        self.id = id
    }

    public static let ackNak = UBXMessageID(messageClass: 0x05, id: 0x00)
    public static let ackAck = UBXMessageID(messageClass: 0x05, id: 0x01)
    public static let cfgMsg = UBXMessageID(messageClass: 0x06, id: 0x01)
    public static let cfgRate = UBXMessageID(messageClass: 0x06, id: 0x08)
    public static let cfgRxm = UBXMessageID(messageClass: 0x06, id: 0x11)
    public static let cfgRst = UBXMessageID(messageClass: 0x06, id: 0x04)
    public static let cfgNav5 = UBXMessageID(messageClass: 0x06, id: 0x24)
    public static let cfgPm2 = UBXMessageID(messageClass: 0x06, id: 0x3B)
    public static let rxmPmreq = UBXMessageID(messageClass: 0x02, id: 0x41)
}

/// One complete UBX frame in fixed storage: sync 0xB5 0x62, class, ID, little-endian payload
/// length, payload, CK_A, CK_B. Built only by the `UBX` encoders, so it is always complete and
/// its checksum always right. Read it as a byte collection or through `withUnsafeBytes`.
public struct UBXFrame: RandomAccessCollection, Sendable {
    /// CFG-PM2 (44 bytes) is the largest payload encoded here.
    public static let maximumPayloadLength = 44
    /// Header (sync, class, ID, length) is 6 bytes, the checksum 2.
    public static let capacity = 8 + maximumPayloadLength

    private var storage = InlineArray<52, UInt8>(repeating: 0)
    /// Bytes in the frame, sync to checksum.
    public private(set) var count = 0

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    public subscript(position: Int) -> UInt8 {
        precondition(position >= 0 && position < count, "UBXFrame index out of range")
        return storage[position]
    }

    public var message: UBXMessageID { UBXMessageID(messageClass: storage[2], id: storage[3]) }
    public var payloadLength: Int { count - 8 }

    /// The frame's bytes, valid only inside `body` (for a write(2) to the UART).
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let count = self.count
        return try storage.span.withUnsafeBytes { (raw) throws(Failure) -> Result in
            try body(UnsafeRawBufferPointer(rebasing: raw[0..<count]))
        }
    }

    // MARK: building (encoders only)

    /// Starts a frame; the length is patched and the checksum appended by `finish()`.
    init(_ message: UBXMessageID) {
        append(0xB5)
        append(0x62)
        append(message.messageClass)
        append(message.id)
        append(0)
        append(0)
    }

    mutating func append(_ byte: UInt8) {
        precondition(count < UBXFrame.capacity, "UBX payload longer than UBXFrame.maximumPayloadLength")
        storage[count] = byte
        count += 1
    }

    mutating func appendZeros(_ n: Int) {
        for _ in 0..<n { append(0) }
    }

    /// UBX multi-byte fields are little-endian ("UBX Protocol > Data Types" in [U6] and [M8]).
    mutating func appendLittleEndian(_ value: UInt16) {
        append(UInt8(truncatingIfNeeded: value))
        append(UInt8(truncatingIfNeeded: value >> 8))
    }

    mutating func appendLittleEndian(_ value: UInt32) {
        append(UInt8(truncatingIfNeeded: value))
        append(UInt8(truncatingIfNeeded: value >> 8))
        append(UInt8(truncatingIfNeeded: value >> 16))
        append(UInt8(truncatingIfNeeded: value >> 24))
    }

    /// Writes the payload length into the header and appends CK_A, CK_B: the 8-bit Fletcher
    /// checksum (RFC 1145) over class, ID, length and payload, i.e. everything but the sync
    /// bytes ("UBX Checksum" in [U6] and [M8]).
    mutating func finish() {
        let length = UInt16(count - 6)
        storage[4] = UInt8(truncatingIfNeeded: length)
        storage[5] = UInt8(truncatingIfNeeded: length >> 8)
        var a: UInt8 = 0
        var b: UInt8 = 0
        for index in 2..<count {
            a &+= storage[index]
            b &+= a
        }
        append(a)
        append(b)
    }
}

/// CFG-RATE timeRef: which time base the measurement grid is aligned to. u-blox 6 knows UTC
/// and GPS only; the others need an M8 with protocol version 18 or later ([M8] CFG-RATE).
public enum UBXTimeReference: UInt16, Sendable {
    case utc = 0, gps = 1, glonass = 2, beiDou = 3, galileo = 4
}

/// CFG-NAV5 dynModel: the platform model the navigation filter assumes ([M8] "Navigation
/// Configuration Settings > Platform settings"). Wrist (9) needs an M8 with protocol version 18.
public enum UBXDynamicModel: UInt8, Sendable {
    case portable = 0
    case stationary = 2
    case pedestrian = 3
    case automotive = 4
    case sea = 5
    case airborne1g = 6
    case airborne2g = 7
    case airborne4g = 8
    case wrist = 9
}

/// CFG-RXM lpMode.
public enum UBXLowPowerMode: UInt8, Sendable {
    /// Continuous (maximum performance) mode.
    case continuous = 0
    /// Power save mode, as configured by CFG-PM2.
    case powerSave = 1
}

/// Standard NMEA sentences as UBX messages of class 0xF0 ([M8] "NMEA Protocol > NMEA Messages
/// Overview"), for switching them on and off with CFG-MSG.
public enum UBXNMEAMessage: UInt8, Sendable {
    case gga = 0x00, gll = 0x01, gsa = 0x02, gsv = 0x03, rmc = 0x04, vtg = 0x05
    case grs = 0x06, gst = 0x07, zda = 0x08, gbs = 0x09, dtm = 0x0A, gns = 0x0D, vlw = 0x0F

    public static let messageClass: UInt8 = 0xF0
    public var message: UBXMessageID { UBXMessageID(messageClass: UBXNMEAMessage.messageClass, id: rawValue) }
}

/// Per-port output rates for the 8-byte form of CFG-MSG, in the receiver's port-number order
/// (0 DDC/I2C, 1 UART1, 2 UART2, 3 USB, 4 SPI, 5 reserved; [M8] CFG-PRT and CFG-MSG).
/// A rate of N sends the message once every N navigation solutions; 0 switches it off.
public struct UBXPortRates: Equatable, Sendable {
    public var ddc: UInt8
    public var uart1: UInt8
    public var uart2: UInt8
    public var usb: UInt8
    public var spi: UInt8

    public init(ddc: UInt8 = 0, uart1: UInt8 = 0, uart2: UInt8 = 0, usb: UInt8 = 0, spi: UInt8 = 0) {
        self.ddc = ddc
        self.uart1 = uart1
        self.uart2 = uart2
        self.usb = usb
        self.spi = spi
    }

    /// The same rate on every port.
    public init(all rate: UInt8) {
        self.init(ddc: rate, uart1: rate, uart2: rate, usb: rate, spi: rate)
    }
}

/// Encoders for the UBX messages Locus sends. Every CFG message is answered by ACK-ACK or
/// ACK-NAK (see `UBXAckParser`); RXM-PMREQ is not acknowledged (the receiver just goes down).
public enum UBX {
    /// A poll request: the message's class and ID with an empty payload; the receiver answers
    /// with the current setting ([U6]/[M8] "UBX Protocol > Polling Mechanism").
    public static func poll(_ message: UBXMessageID) -> UBXFrame {
        var frame = UBXFrame(message)
        frame.finish()
        return frame
    }

    /// CFG-RATE (0x06 0x08, 6 bytes): measRate U2 (ms between measurements), navRate U2
    /// (measurement cycles per navigation solution; u-blox 6 only accepts 1), timeRef U2.
    /// ([U6]/[M8] "UBX-CFG-RATE".) Nil for a zero period or rate.
    public static func cfgRate(
        measurementPeriodMilliseconds: UInt16,
        navigationRate: UInt16 = 1,
        timeReference: UBXTimeReference = .gps
    ) -> UBXFrame? {
        guard measurementPeriodMilliseconds > 0, navigationRate > 0 else { return nil }
        var frame = UBXFrame(.cfgRate)
        frame.appendLittleEndian(measurementPeriodMilliseconds)
        frame.appendLittleEndian(navigationRate)
        frame.appendLittleEndian(timeReference.rawValue)
        frame.finish()
        return frame
    }

    /// CFG-NAV5 (0x06 0x24, 36 bytes) changing the dynamic platform model only: mask X2 =
    /// 0x0001 ("apply dynamic model settings") and dynModel U1 at offset 2. The receiver applies
    /// only masked parameters, so the other 33 bytes are sent as zero and leave the current
    /// fix mode, elevation mask, DOP masks etc. untouched ([U6]/[M8] "UBX-CFG-NAV5").
    public static func cfgNav5(dynamicModel: UBXDynamicModel) -> UBXFrame {
        var frame = UBXFrame(.cfgNav5)
        frame.appendLittleEndian(UInt16(0x0001))
        frame.append(dynamicModel.rawValue)
        frame.appendZeros(33)
        frame.finish()
        return frame
    }

    /// CFG-RXM (0x06 0x11, 2 bytes): reserved1 U1 which the specification says to always set
    /// to 8, then lpMode U1 ([U6]/[M8] "UBX-CFG-RXM").
    public static func cfgRxm(_ mode: UBXLowPowerMode) -> UBXFrame {
        var frame = UBXFrame(.cfgRxm)
        frame.append(8)
        frame.append(mode.rawValue)
        frame.finish()
        return frame
    }

    /// CFG-PM2 flags bits used here ([M8] "UBX-CFG-PM2", version 0x01).
    static let pm2UpdateEphemeris: UInt32 = 1 << 12
    /// mode, bits 17...18: 00 ON/OFF operation, 01 cyclic tracking operation.
    static let pm2CyclicTracking: UInt32 = 0b01 << 17

    /// CFG-PM2 (0x06 0x3B), the 44-byte version 0x01 layout of u-blox M8 ([M8] "UBX-CFG-PM2"),
    /// set up for cyclic tracking; takes effect once CFG-RXM selects power save mode.
    ///
    /// Cyclic tracking keeps the satellites tracked between fixes at reduced duty, which is what
    /// u-blox recommends for update periods of 1 to 10 s (ON/OFF operation is for longer ones;
    /// [M8] "Power Management > Power Save Mode"), so `updatePeriodMilliseconds` must be in
    /// 1000...10000, else nil. Values sent:
    /// - version 0x01; maxStartupStateDur 0 (no bound on the acquisition phase);
    /// - flags 0x00021000: mode = cyclic tracking (bits 17-18 = 01) and updateEPH (bit 12), so the
    ///   receiver wakes to keep its ephemeris current and re-acquires quickly; updateRTC,
    ///   waitTimeFix, doNotEnterOff, EXTINT control and peak-current limiting stay off (defaults);
    /// - updatePeriod = the requested period; searchPeriod (retry period after a failed
    ///   acquisition) = `searchPeriodMilliseconds`, 10 s by default as in the receiver's default;
    /// - gridOffset 0; onTime 0 s, so the receiver enters power-optimized tracking as soon as it
    ///   can (u-blox's advice for maximum savings); minAcqTime 0 s (receiver default);
    /// - the 20 reserved bytes as zero.
    /// u-blox 6 uses the same offsets for every field here (its bytes 2 and 24...43 are all
    /// reserved), so the frame is also accepted there.
    public static func cfgPm2CyclicTracking(
        updatePeriodMilliseconds: UInt32,
        searchPeriodMilliseconds: UInt32 = 10_000
    ) -> UBXFrame? {
        guard (1_000...10_000).contains(updatePeriodMilliseconds) else { return nil }
        var frame = UBXFrame(.cfgPm2)
        frame.append(0x01)                                  // version
        frame.append(0)                                     // reserved1
        frame.append(0)                                     // maxStartupStateDur, s
        frame.append(0)                                     // reserved2
        frame.appendLittleEndian(pm2CyclicTracking | pm2UpdateEphemeris)   // flags
        frame.appendLittleEndian(updatePeriodMilliseconds)  // updatePeriod, ms
        frame.appendLittleEndian(searchPeriodMilliseconds)  // searchPeriod, ms
        frame.appendLittleEndian(UInt32(0))                 // gridOffset, ms
        frame.appendLittleEndian(UInt16(0))                 // onTime, s
        frame.appendLittleEndian(UInt16(0))                 // minAcqTime, s
        frame.appendZeros(20)                               // reserved
        frame.finish()
        return frame
    }

    /// RXM-PMREQ (0x02 0x41), the 8-byte form of [U6] and [M8] "UBX-RXM-PMREQ": duration U4 in
    /// ms (0 = until woken by EXTINT or activity on a UART RX line), flags X4 with bit 1
    /// (0x02) "backup", which must be set for the request to do anything. Not acknowledged.
    public static func rxmPmreq(durationMilliseconds: UInt32, backup: Bool = true) -> UBXFrame {
        var frame = UBXFrame(.rxmPmreq)
        frame.appendLittleEndian(durationMilliseconds)
        frame.appendLittleEndian(backup ? UInt32(0x02) : 0)
        frame.finish()
        return frame
    }

    /// CFG-RST (0x06 0x04, 4 bytes): navBbrMask X2 (which battery-backed data to clear: 0x0000
    /// hot start, 0xFFFF cold start), resetMode U1 (0x00 = hardware reset by the watchdog, at
    /// once), reserved1 U1 ([U6]/[M8] "UBX-CFG-RST"). Not acknowledged: the receiver restarts
    /// and announces itself with its boot banner, which `ReceiverControl` watches for. A
    /// hardware reset is the one that frees a receiver whose firmware has stopped answering.
    public static func cfgRst(coldStart: Bool) -> UBXFrame {
        var frame = UBXFrame(.cfgRst)
        frame.appendLittleEndian(coldStart ? UInt16(0xFFFF) : 0x0000)
        frame.append(0x00)
        frame.append(0x00)
        frame.finish()
        return frame
    }

    /// CFG-MSG (0x06 0x01), the 3-byte form: msgClass, msgID, rate on the port this command
    /// arrives on ([U6]/[M8] "UBX-CFG-MSG", "Set Message Rate"). Rate 0 switches it off.
    public static func cfgMsg(_ message: UBXMessageID, rate: UInt8) -> UBXFrame {
        var frame = UBXFrame(.cfgMsg)
        frame.append(message.messageClass)
        frame.append(message.id)
        frame.append(rate)
        frame.finish()
        return frame
    }

    /// CFG-MSG for a standard NMEA sentence (class 0xF0) on the current port.
    public static func cfgMsg(_ sentence: UBXNMEAMessage, rate: UInt8) -> UBXFrame {
        cfgMsg(sentence.message, rate: rate)
    }

    /// CFG-MSG (0x06 0x01), the 8-byte form: msgClass, msgID, then one rate per I/O port
    /// ([U6]/[M8] "UBX-CFG-MSG", "Set Message Rate(s)"); the sixth (reserved) port gets 0.
    public static func cfgMsg(_ message: UBXMessageID, rates: UBXPortRates) -> UBXFrame {
        var frame = UBXFrame(.cfgMsg)
        frame.append(message.messageClass)
        frame.append(message.id)
        frame.append(rates.ddc)
        frame.append(rates.uart1)
        frame.append(rates.uart2)
        frame.append(rates.usb)
        frame.append(rates.spi)
        frame.append(0)
        frame.finish()
        return frame
    }

    /// CFG-MSG, 8-byte form, for a standard NMEA sentence (class 0xF0).
    public static func cfgMsg(_ sentence: UBXNMEAMessage, rates: UBXPortRates) -> UBXFrame {
        cfgMsg(sentence.message, rates: rates)
    }
}

/// The receiver's answer to a CFG message ([U6]/[M8] "UBX-ACK-ACK", "UBX-ACK-NAK"): payload
/// clsID, msgID of the message it refers to.
public enum UBXAcknowledgement: Equatable, Sendable {
    /// ACK-ACK (0x05 0x01): the message was processed.
    case ack(UBXMessageID)
    /// ACK-NAK (0x05 0x00): the message was rejected.
    case nak(UBXMessageID)

    public var message: UBXMessageID {
        switch self {
        case .ack(let message), .nak(let message): return message
        }
    }
}

/// Finds ACK-ACK and ACK-NAK frames in the receiver's output, one byte at a time, without
/// allocating. UBX and NMEA share the UART, so everything else (NMEA text, other UBX messages,
/// line noise) is skipped: 0xB5 never occurs in NMEA's ASCII, and a candidate that turns out
/// not to be an ACK frame (class 0x05, ID 0x00/0x01, length 2) is dropped at the byte that shows
/// it, which is itself re-examined as a possible 0xB5. Other UBX messages are not skipped by
/// their length, so a long or bogus length field can never make the parser swallow an ACK.
/// A frame is reported only when its length and Fletcher checksum are right; a checksum
/// failure drops the 10-byte candidate.
public struct UBXAckParser: Sendable {
    private enum State: Sendable {
        case sync1, sync2, messageClass, id, length1, length2, payload, checksumA, checksumB
    }

    private var state = State.sync1
    private var id: UInt8 = 0
    private var payloadCount = 0
    private var acknowledgedClass: UInt8 = 0
    private var acknowledgedID: UInt8 = 0
    private var checksumA: UInt8 = 0
    private var checksumB: UInt8 = 0
    private var receivedA: UInt8 = 0

    /// ACK frames whose checksum did not match, or whose header claimed a length other than 2.
    public private(set) var rejectedFrames = 0

    public init() {}

    /// Feeds one received byte; returns the acknowledgement it completed, if any.
    @_noAllocation
    public mutating func push(_ byte: UInt8) -> UBXAcknowledgement? {
        switch state {
        case .sync1:
            if byte == 0xB5 { state = .sync2 }
        case .sync2:
            if byte == 0x62 { state = .messageClass } else { resync(byte) }
        case .messageClass:
            if byte == 0x05 {
                checksumA = byte
                checksumB = byte
                state = .id
            } else {
                resync(byte)
            }
        case .id:
            if byte == 0x00 || byte == 0x01 {
                id = byte
                add(byte)
                state = .length1
            } else {
                resync(byte)
            }
        case .length1:
            add(byte)
            if byte == 2 {
                state = .length2
            } else {
                rejectedFrames += 1
                resync(byte)
            }
        case .length2:
            add(byte)
            if byte == 0 {
                payloadCount = 0
                state = .payload
            } else {
                rejectedFrames += 1
                resync(byte)
            }
        case .payload:
            add(byte)
            if payloadCount == 0 { acknowledgedClass = byte } else { acknowledgedID = byte }
            payloadCount += 1
            if payloadCount == 2 { state = .checksumA }
        case .checksumA:
            receivedA = byte
            state = .checksumB
        case .checksumB:
            state = .sync1
            guard receivedA == checksumA && byte == checksumB else {
                rejectedFrames += 1
                resync(byte)
                return nil
            }
            let message = UBXMessageID(messageClass: acknowledgedClass, id: acknowledgedID)
            return id == 0x01 ? .ack(message) : .nak(message)
        }
        return nil
    }

    @inline(__always) private mutating func add(_ byte: UInt8) {
        checksumA &+= byte
        checksumB &+= checksumA
    }

    /// Abandons the current frame; the byte that broke it may start the next one.
    @inline(__always) private mutating func resync(_ byte: UInt8) {
        state = byte == 0xB5 ? .sync2 : .sync1
    }
}
