// MediaTek PMTK command packets: NMEA-style text sentences
//   $PMTK<3-digit packet type>[,<field>...]*<XOR checksum, 2 upper-case hex digits><CR><LF>
// where the checksum is the XOR of every byte between '$' and '*'.
//
// References (cited by packet type and name, which every revision keeps):
//   [PMTK]  GlobalTop "PMTK command packet" manual (PMTK_A11), the MediaTek MT3339 / MT3329
//           command set it documents; the Quectel L70/L76/L80 "GNSS Protocol Specification"
//           lists the same packets with the same examples.

/// One PMTK command sentence, '$' to CR LF, in fixed storage. Built only by the `PMTK`
/// encoders, so it is always complete. Read it as a byte collection or via `withUnsafeBytes`.
public struct PMTKSentence: RandomAccessCollection, Sendable {
    /// NMEA 0183's limit for a whole sentence, '$' and CR LF included; the longest sentence
    /// built here (PMTK225 with four 9-digit times) is 55 bytes.
    public static let capacity = 82

    private var storage = InlineArray<82, UInt8>(repeating: 0)
    public private(set) var count = 0

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    public subscript(position: Int) -> UInt8 {
        precondition(position >= 0 && position < count, "PMTKSentence index out of range")
        return storage[position]
    }

    /// The sentence as text, CR LF included (for logs and tests; allocates).
    public var text: String { String(decoding: self, as: UTF8.self) }

    /// The sentence's bytes, valid only inside `body` (for a write(2) to the UART).
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let count = self.count
        return try storage.span.withUnsafeBytes { (raw) throws(Failure) -> Result in
            try body(UnsafeRawBufferPointer(rebasing: raw[0..<count]))
        }
    }

    // MARK: building (encoders only)

    /// Starts `$PMTKnnn`; the packet type is always written with three digits ("001").
    init(packetType: UInt16) {
        precondition(packetType < 1000)
        for byte in "$PMTK".utf8 { append(byte) }
        append(0x30 + UInt8(packetType / 100))
        append(0x30 + UInt8(packetType / 10 % 10))
        append(0x30 + UInt8(packetType % 10))
    }

    mutating func append(_ byte: UInt8) {
        precondition(count < PMTKSentence.capacity, "PMTK sentence longer than PMTKSentence.capacity")
        storage[count] = byte
        count += 1
    }

    /// Appends `,` and the value in decimal, without leading zeros.
    mutating func appendField(_ value: UInt32) {
        append(ASCII.comma)
        var divisor: UInt32 = 1
        while value / divisor >= 10 { divisor *= 10 }
        var remaining = value
        while divisor > 0 {
            append(0x30 + UInt8(remaining / divisor))
            remaining %= divisor
            divisor /= 10
        }
    }

    /// Appends `*`, the XOR checksum of everything between '$' and '*', and CR LF.
    mutating func finish() {
        var checksum: UInt8 = 0
        for index in 1..<count { checksum ^= storage[index] }
        append(UInt8(ascii: "*"))
        append(PMTKSentence.upperHexDigit(checksum >> 4))
        append(PMTKSentence.upperHexDigit(checksum & 0x0F))
        append(ASCII.carriageReturn)
        append(ASCII.newline)
    }

    static func upperHexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? 0x30 + nibble : 0x41 + nibble - 10
    }
}

/// PMTK225 operating modes ([PMTK] "Packet Type: 225 PMTK_CMD_PERIODIC_MODE").
///
/// Type 4 (perpetual backup) is deliberately absent: only a hardware signal can end it, which a
/// gateway in the field may not be wired to give.
public enum PMTKPeriodicMode: Equatable, Sendable {
    /// Type 0: back to normal (continuous) operation.
    case normal
    /// Type 1: cycles between full-on and backup. PMTK225,0 leaves it only during run time.
    case periodicBackup(PMTKPeriodicTimes)
    /// Type 2: cycles between full-on and standby; can be left at any time.
    case periodicStandby(PMTKPeriodicTimes)
    /// Type 8: the receiver chooses its own on/standby pattern (AlwaysLocate standby).
    case alwaysLocateStandby
    /// Type 9: AlwaysLocate with backup instead of standby.
    case alwaysLocateBackup
}

/// The four PMTK225 times for the periodic modes, in ms ([PMTK] 225: Run_time and Sleep_time
/// 1000...518400000; the second pair, used when acquisition failed during Run_time, is 0 or
/// 1000...518400000).
public struct PMTKPeriodicTimes: Equatable, Sendable {
    public var runMilliseconds: UInt32
    public var sleepMilliseconds: UInt32
    public var secondRunMilliseconds: UInt32
    public var secondSleepMilliseconds: UInt32

    public init(runMilliseconds: UInt32, sleepMilliseconds: UInt32,
                secondRunMilliseconds: UInt32 = 0, secondSleepMilliseconds: UInt32 = 0) {
        self.runMilliseconds = runMilliseconds
        self.sleepMilliseconds = sleepMilliseconds
        self.secondRunMilliseconds = secondRunMilliseconds
        self.secondSleepMilliseconds = secondSleepMilliseconds
    }

    static let range: ClosedRange<UInt32> = 1_000...518_400_000

    var isValid: Bool {
        PMTKPeriodicTimes.range.contains(runMilliseconds)
            && PMTKPeriodicTimes.range.contains(sleepMilliseconds)
            && (secondRunMilliseconds == 0 || PMTKPeriodicTimes.range.contains(secondRunMilliseconds))
            && (secondSleepMilliseconds == 0 || PMTKPeriodicTimes.range.contains(secondSleepMilliseconds))
    }
}

/// Output rates for PMTK314 ([PMTK] "Packet Type: 314 PMTK_API_SET_NMEA_OUTPUT"): 0 = off,
/// N in 1...5 = once every N position fixes. The 19 fields are, by index: 0 GLL, 1 RMC, 2 VTG,
/// 3 GGA, 4 GSA, 5 GSV, 6 GRS, 7 GST (both reserved on older firmware), 8...12 reserved,
/// 13...16 MediaTek's MALM/MEPH/MDGP/MDBG debug sentences (always sent as 0 here), 17 ZDA,
/// 18 MCHN (PMTKCHN channel status).
public struct PMTKSentenceRates: Equatable, Sendable {
    public var gll: UInt8
    public var rmc: UInt8
    public var vtg: UInt8
    public var gga: UInt8
    public var gsa: UInt8
    public var gsv: UInt8
    public var grs: UInt8
    public var gst: UInt8
    public var zda: UInt8
    public var mchn: UInt8

    public init(gll: UInt8 = 0, rmc: UInt8 = 0, vtg: UInt8 = 0, gga: UInt8 = 0, gsa: UInt8 = 0,
                gsv: UInt8 = 0, grs: UInt8 = 0, gst: UInt8 = 0, zda: UInt8 = 0, mchn: UInt8 = 0) {
        self.gll = gll
        self.rmc = rmc
        self.vtg = vtg
        self.gga = gga
        self.gsa = gsa
        self.gsv = gsv
        self.grs = grs
        self.gst = gst
        self.zda = zda
        self.mchn = mchn
    }

    /// The 19 fields in PMTK314 order; index 18 is MCHN.
    func field(_ index: Int) -> UInt8 {
        switch index {
        case 0: return gll
        case 1: return rmc
        case 2: return vtg
        case 3: return gga
        case 4: return gsa
        case 5: return gsv
        case 6: return grs
        case 7: return gst
        case 17: return zda
        case 18: return mchn
        default: return 0
        }
    }
}

/// PMTK886 navigation ("FR") modes ([PMTK]/Quectel "Packet Type: 886 PMTK_FR_MODE"). Only on
/// firmware that has the command (MT3339 AXN 2.x and later, Quectel L76/L80/L96); older
/// firmware answers PMTK001 with flag 1 (unsupported).
public enum PMTKNavigationMode: UInt8, Sendable {
    /// "Normal" mode, for vehicles.
    case vehicle = 0
    /// "Fitness" mode, for people on foot.
    case pedestrian = 1
    /// Aviation mode: higher speed and altitude limits.
    case aviation = 2
    /// Balloon mode: altitude up to 80 km.
    case balloon = 3
}

/// Encoders for the PMTK packets Locus sends. Each is answered by PMTK001 (see
/// `PMTKAcknowledgement`), except PMTK161, after which the receiver is asleep.
public enum PMTK {
    /// PMTK220 ([PMTK] "Packet Type: 220 PMTK_SET_POS_FIX"): the position fix interval in ms,
    /// 100...10000 (10 Hz to 0.1 Hz), else nil. Intervals under 1000 ms need a baud rate above
    /// 9600 for more than a couple of sentences per fix.
    public static func setPositionFixInterval(milliseconds: UInt32) -> PMTKSentence? {
        guard (100...10_000).contains(milliseconds) else { return nil }
        var sentence = PMTKSentence(packetType: 220)
        sentence.appendField(milliseconds)
        sentence.finish()
        return sentence
    }

    /// PMTK225 ([PMTK] "Packet Type: 225 PMTK_CMD_PERIODIC_MODE"): the type, then for the
    /// periodic types the run, sleep, second run and second sleep times. Nil if a time is out
    /// of range.
    public static func setPeriodicMode(_ mode: PMTKPeriodicMode) -> PMTKSentence? {
        var sentence = PMTKSentence(packetType: 225)
        switch mode {
        case .normal:
            sentence.appendField(0)
        case .periodicBackup(let times), .periodicStandby(let times):
            guard times.isValid else { return nil }
            if case .periodicBackup = mode { sentence.appendField(1) } else { sentence.appendField(2) }
            sentence.appendField(times.runMilliseconds)
            sentence.appendField(times.sleepMilliseconds)
            sentence.appendField(times.secondRunMilliseconds)
            sentence.appendField(times.secondSleepMilliseconds)
        case .alwaysLocateStandby:
            sentence.appendField(8)
        case .alwaysLocateBackup:
            sentence.appendField(9)
        }
        sentence.finish()
        return sentence
    }

    /// PMTK161 ([PMTK] "Packet Type: 161 PMTK_CMD_STANDBY_MODE"), type 0 (stop mode, the only
    /// one defined): `$PMTK161,0*28`. Any byte sent to the receiver wakes it again.
    public static func standby() -> PMTKSentence {
        var sentence = PMTKSentence(packetType: 161)
        sentence.appendField(0)
        sentence.finish()
        return sentence
    }

    /// PMTK101 ([PMTK] "Packet Type: 101 PMTK_CMD_HOT_START", `$PMTK101*32`): restarts the
    /// receiver keeping its almanac, ephemeris and settings; it answers with `$PMTK010,001`.
    public static func hotStart() -> PMTKSentence {
        var sentence = PMTKSentence(packetType: 101)
        sentence.finish()
        return sentence
    }

    /// PMTK104 ([PMTK] "Packet Type: 104 PMTK_CMD_FULL_COLD_START", `$PMTK104*37`): clears
    /// everything, settings included, back to the factory defaults (so the plan must be sent
    /// again, which the start-up message `$PMTK010,001` triggers).
    public static func fullColdStart() -> PMTKSentence {
        var sentence = PMTKSentence(packetType: 104)
        sentence.finish()
        return sentence
    }

    /// PMTK314 ([PMTK] "Packet Type: 314 PMTK_API_SET_NMEA_OUTPUT") with all 19 fields.
    /// Nil if a rate is above 5.
    public static func setNMEAOutput(_ rates: PMTKSentenceRates) -> PMTKSentence? {
        var sentence = PMTKSentence(packetType: 314)
        for index in 0..<19 {
            let rate = rates.field(index)
            guard rate <= 5 else { return nil }
            sentence.appendField(UInt32(rate))
        }
        sentence.finish()
        return sentence
    }

    /// PMTK314 with the single field -1: restore the firmware's default sentence set
    /// (`$PMTK314,-1*04`).
    public static func restoreDefaultNMEAOutput() -> PMTKSentence {
        var sentence = PMTKSentence(packetType: 314)
        for byte in ",-1".utf8 { sentence.append(byte) }
        sentence.finish()
        return sentence
    }

    /// PMTK886 ([PMTK]/Quectel "Packet Type: 886 PMTK_FR_MODE").
    public static func setNavigationMode(_ mode: PMTKNavigationMode) -> PMTKSentence {
        var sentence = PMTKSentence(packetType: 886)
        sentence.appendField(UInt32(mode.rawValue))
        sentence.finish()
        return sentence
    }
}

/// PMTK001 ([PMTK] "Packet Type: 001 PMTK_ACK"): `$PMTK001,Cmd,Flag*CS`, the receiver's answer
/// to a PMTK command.
public struct PMTKAcknowledgement: Equatable, Sendable {
    public enum Flag: UInt8, Sendable {
        /// 0: invalid command or packet.
        case invalid = 0
        /// 1: command not supported by this firmware.
        case unsupported = 1
        /// 2: valid command, but the action failed.
        case failed = 2
        /// 3: valid command, action succeeded.
        case succeeded = 3
    }

    /// The packet type being answered, e.g. 220.
    public var command: UInt16
    public var flag: Flag

    public init(command: UInt16, flag: Flag) {
        self.command = command
        self.flag = flag
    }

    /// Parses one sentence: `$PMTK001,Cmd,Flag`, optionally followed by `*hh` (checked when
    /// present) and CR/LF. Taking the sentence with or without its checksum lets this read
    /// both raw lines and `NMEAFramer` output (which has checked and stripped it). Nil for
    /// anything else: another sentence, a bad checksum, a flag outside 0...3.
    ///
    /// Extra fields after Flag are skipped rather than rejected: [PMTK] documents two fields,
    /// but a firmware that appends one should still have its acknowledgement recognised, and
    /// the checksum still covers them.
    @_noAllocation
    public init?(sentence bytes: UnsafeBufferPointer<UInt8>) {
        // Drop line endings.
        var end = bytes.count
        while end > 0, bytes[end - 1] == ASCII.carriageReturn || bytes[end - 1] == ASCII.newline { end -= 1 }
        // Find '*' and check the checksum if there is one.
        var star = 1
        var checksum: UInt8 = 0
        while star < end, bytes[star] != UInt8(ascii: "*") {
            checksum ^= bytes[star]
            star += 1
        }
        if star < end {
            guard end == star + 3,
                  let high = hexDigitValue(bytes[star + 1]), let low = hexDigitValue(bytes[star + 2]),
                  high << 4 | low == checksum else { return nil }
        }
        // "$PMTK001,"
        let prefix: StaticString = "$PMTK001,"
        let prefixLength = prefix.utf8CodeUnitCount
        guard star > prefixLength else { return nil }
        for index in 0..<prefixLength where bytes[index] != prefix.utf8Start[index] { return nil }
        // Cmd: 1...4 digits.
        var index = prefixLength
        var command: UInt16 = 0
        var digits = 0
        while index < star, isDigit(bytes[index]), digits < 4 {
            command = command * 10 + UInt16(bytes[index] - 0x30)
            digits += 1
            index += 1
        }
        guard digits > 0, index < star, bytes[index] == ASCII.comma else { return nil }
        index += 1
        // Flag: one digit, then the end or another field.
        guard index < star, isDigit(bytes[index]), let flag = Flag(rawValue: bytes[index] - 0x30) else { return nil }
        index += 1
        guard index == star || bytes[index] == ASCII.comma else { return nil }
        self.init(command: command, flag: flag)
    }
}
