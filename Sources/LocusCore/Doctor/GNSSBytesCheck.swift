/// Check 4: the receiver's bytes at the configured baud rate are NMEA. A UART at the wrong rate
/// still delivers bytes (framing garbage), so when they are not NMEA the other common rates are
/// tried and the first that gives NMEA is named; silence is a wiring or power problem instead.
public enum GNSSBytesCheck {
    public static let sampleMs: Int64 = 3000
    public static let scanSampleMs: Int64 = 3000

    /// The agent holds the port: reading it too would steal its bytes.
    public static func agentRunning() -> Finding {
        .ok("gnss bytes: not read while the agent runs ('locus status' shows its bytes, fixes and rejected sentences)")
    }

    public static func unreadable(_ device: String, _ error: String) -> Finding {
        .warn("gnss bytes: cannot read \(device) as a terminal: \(error)", "check that [gnss] device is the receiver's serial port")
    }

    /// The verdict on the configured rate's sample; nil when it was noise and other rates should be tried.
    public static func configured(baud: Int, _ score: NMEABaudScore) -> Finding? {
        switch score.verdict {
        case .nmea:
            return .ok("gnss bytes: NMEA at \(baud) baud (\(score.sentences) sentences in \(sampleMs / 1000) s, \(score.rejected) rejected)")
        case .ubxOnly:
            return .warn("gnss bytes: only UBX binary frames at \(baud) baud, no NMEA", "turn the receiver's NMEA output on for this port (u-center: CFG-PRT protocol out NMEA)")
        case .silent:
            return .fail("gnss bytes: nothing in \(sampleMs / 1000) s at \(baud) baud", "check the wiring (receiver TX to the gateway's RX), the receiver's power and its 3.3 V logic level")
        case .noise:
            return nil
        }
    }

    /// After the configured rate gave noise: `found` is the first other rate that gave NMEA.
    public static func scanned(baud: Int, _ score: NMEABaudScore, found: Int?) -> Finding {
        if let found {
            return .fail("gnss bytes: no NMEA at \(baud) baud (\(score)); the receiver sends NMEA at \(found) baud",
                         "set [gnss] baud = \(found) in the board file (or configure the receiver for \(baud))")
        }
        return .fail("gnss bytes: no NMEA at \(baud) baud (\(score)) nor at the other usual rates",
                     "check the wiring (TX and RX swapped?), RS-232 levels on a 3.3 V UART, and the receiver's protocol")
    }
}
