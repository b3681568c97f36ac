import Foundation
import Testing
@testable import LocusCore

/// The pure parts of `locus doctor`: system file parsers and the decisions on probed values.
@Suite struct DoctorParserTests {
    func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test func kernelCommandLineConsoles() {
        #expect(KernelCommandLine.consoles(bytes("coherent_pool=1M console=serial0,115200 console=tty1 root=PARTUUID=1 rootwait\n")) == ["serial0", "tty1"])
        #expect(KernelCommandLine.consoles(bytes("console=ttyS0,115200n8 quiet")) == ["ttyS0"])
        #expect(KernelCommandLine.consoles(bytes("noconsole=ttyS0 console= quiet")) == [])
    }

    @Test func procConsolesGiveNamesAndDeviceNumbers() {
        let consoles = ProcConsoles.parse(bytes("ttyS0                -W- (EC p a)    4:64\ntty1                 -WU (E  p  )    4:1\ngarbage\n"))
        #expect(consoles == [ProcConsoles.Console(name: "ttyS0", major: 4, minor: 64), ProcConsoles.Console(name: "tty1", major: 4, minor: 1)])
    }

    @Test func gettyUnitsNameTheirTerminal() {
        #expect(SystemdUnits.gettyTerminal("serial-getty@ttyS0.service") == "ttyS0")
        #expect(SystemdUnits.gettyTerminal("getty@ttyAMA0.service") == "ttyAMA0")
        #expect(SystemdUnits.gettyTerminal("serial-getty@.service") == nil)
        #expect(SystemdUnits.gettyTerminal("bluetooth.service") == nil)
        #expect(SystemdUnits.isMasked(linkTarget: "/dev/null"))
    }

    @Test func effectiveCapabilities() {
        let set = Capabilities.effective(bytes("Name:\tbash\nCapPrm:\t0000000000000000\nCapEff:\t0000000000003000\n"))
        #expect(set == 0x3000)
        #expect(Capabilities.has(0x3000, Capabilities.netRaw) && Capabilities.has(0x3000, Capabilities.netAdmin))
        #expect(!Capabilities.has(0x2000, Capabilities.netAdmin))
        #expect(Capabilities.effective(bytes("CapEff:\tzz\n")) == nil)
        #expect(Capabilities.effective(bytes("Name:\tx\n")) == nil)
    }

    @Test func deviceTreeStrings() {
        #expect(SystemText.deviceTreeString(bytes("Raspberry Pi 4 Model B Rev 1.4\0")) == "Raspberry Pi 4 Model B Rev 1.4")
        #expect(SystemText.deviceTreeStrings(bytes("arm,pl011\0arm,primecell\0")) == ["arm,pl011", "arm,primecell"])
    }

    @Test func configTxtHonoursModelSections() {
        let text = "# comment\nenable_uart=0\n[pi4]\ndtoverlay=disable-bt,foo\n[pi3]\ndtoverlay=miniuart-bt\n[all]\ncore_freq=250 # fixed\n[gpio4=1]\nenable_uart=1\n[pi5]\ndtparam=uart0=on\n"
        let pi4 = PiConfigTxt.parse(bytes(text), filters: PiConfigTxt.filters(model: "Raspberry Pi 4 Model B Rev 1.4"))
        #expect(pi4.overlays == ["disable-bt"] && pi4.disablesBluetooth && !pi4.movesBluetoothToMiniUART)
        #expect(pi4.enableUART == 0 && pi4.coreFrequency == 250 && !pi4.uart0)
        #expect(pi4.unknownFilters == ["gpio4=1"])
        let pi3 = PiConfigTxt.parse(bytes(text), filters: PiConfigTxt.filters(model: "Raspberry Pi 3 Model B Plus Rev 1.3"))
        #expect(pi3.movesBluetoothToMiniUART && !pi3.disablesBluetooth)
        let pi5 = PiConfigTxt.parse(bytes(text), filters: PiConfigTxt.filters(model: "Raspberry Pi 5 Model B Rev 1.0"))
        #expect(pi5.enablesPi5HeaderUART && pi5.overlays.isEmpty)
        #expect(PiConfigTxt.filters(model: "Raspberry Pi Compute Module 4 Rev 1.0") == ["pi4", "cm4"])
        #expect(PiConfigTxt.filters(model: "Raspberry Pi Zero 2 W Rev 1.0") == ["pi02"])
        #expect(PiConfigTxt.parse(bytes("dtparam=uart0\n"), filters: ["pi5"]).uart0)
    }

    static func sentence(_ body: String) -> String {
        var checksum: UInt8 = 0
        for byte in body.utf8 { checksum ^= byte }
        let hex = Array("0123456789ABCDEF".utf8)
        return "$" + body + "*" + String(decoding: [hex[Int(checksum >> 4)], hex[Int(checksum & 15)]], as: UTF8.self) + "\r\n"
    }

    @Test func baudScoresTellNMEAFromNoise() {
        let good = Self.sentence("GPRMC,120000.00,A,4807.038,N,01131.000,E,0.0,0.0,230324,,,A") + Self.sentence("GPGGA,120000.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,")
        let score = NMEABaudScore.score(bytes(good + good))
        #expect(score.sentences == 4 && score.rejected == 0 && score.verdict == .nmea)
        var noise: [UInt8] = []
        var state: UInt32 = 7
        for _ in 0..<2000 { state = state &* 1_103_515_245 &+ 12345; noise.append(UInt8(truncatingIfNeeded: state >> 16)) }
        #expect(NMEABaudScore.score(noise).verdict == .noise)
        #expect(NMEABaudScore.score([]).verdict == .silent)
        #expect(NMEABaudScore.score([0xB5, 0x62, 1, 7, 0, 0, 0xB5, 0x62, 1, 2]).verdict == .ubxOnly)
        let corrupted = bytes(good.replacingOccurrences(of: "4807", with: "4808"))
        #expect(NMEABaudScore.score(corrupted).verdict != .nmea)
        let samples: [(baud: Int, score: NMEABaudScore)] = [(9600, NMEABaudScore.score(noise)), (38400, score), (115200, NMEABaudScore.score([]))]
        #expect(NMEABaudScore.likelyRate(samples) == 38400)
        #expect(!NMEABaudScore.score(noise).carriesNMEA && !NMEABaudScore.score(corrupted).carriesNMEA)
    }

    /// A busy link that cuts each epoch after its first sentence: not a pass at the configured
    /// rate, but the rate a scan names.
    @Test func aScanNamesARateWhoseEpochsAreCutShort() {
        let rmc = Self.sentence("GPRMC,120000.00,A,4807.038,N,01131.000,E,0.0,0.0,230324,,,A")
        let cut = String(Self.sentence("GPGGA,120000.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,").prefix(30))
        let score = NMEABaudScore.score(bytes(String(repeating: rmc + cut, count: 3) + rmc))
        #expect(score.sentences == 4 && score.rejected == 3)
        #expect(score.verdict == .noise && score.carriesNMEA)
    }
}
