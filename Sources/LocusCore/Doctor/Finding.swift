/// One line of `locus doctor`: how bad, what was found, and what to do about it. The advice is
/// empty for `ok` findings; for the others it names the exact command or file line to change,
/// because a technician at a gateway has no other documentation at hand.
public struct Finding: Equatable, CustomStringConvertible {
    public enum Level: Equatable { case ok, warn, fail }

    public var level: Level
    public var text: String
    public var advice: String

    public init(_ level: Level, _ text: String, _ advice: String = "") {
        self.level = level
        self.text = text
        self.advice = advice
    }

    public static func ok(_ text: String) -> Finding { Finding(.ok, text) }
    public static func warn(_ text: String, _ advice: String) -> Finding { Finding(.warn, text, advice) }
    public static func fail(_ text: String, _ advice: String) -> Finding { Finding(.fail, text, advice) }

    /// `ok    gnss: ...`, `warn  ...`, `FAIL  ... — what to do`: the level in a fixed column so a
    /// technician's eye finds the FAIL lines, upper case because they are the ones that matter.
    public var description: String {
        let label: String
        switch level {
        case .ok: label = "ok  "
        case .warn: label = "warn"
        case .fail: label = "FAIL"
        }
        return advice.isEmpty ? "\(label)  \(text)" : "\(label)  \(text) — \(advice)"
    }

    /// The exit status of a run with these findings: 1 when any failed, else 0.
    public static func exitStatus(_ findings: [Finding]) -> Int32 {
        findings.contains { $0.level == .fail } ? 1 : 0
    }
}

/// Byte-level text helpers for the small system files doctor reads (/proc, /sys, config.txt):
/// plain UTF-8 bytes, no Unicode machinery, so the device binary stays small.
public enum SystemText {
    /// Lines without their terminators; a last line without a newline counts.
    public static func lines(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map { line in
            line.last == 0x0D ? line.dropLast() : line
        }
    }

    /// Space- or tab-separated words of a line.
    public static func words(_ line: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        line.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A })
    }

    public static func trimmed(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = line
        while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 || last == 0x0A || last == 0x0D { slice = slice.dropLast() }
        return slice
    }

    public static func string(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

    /// A device tree property: text up to its NUL terminator.
    public static func deviceTreeString(_ bytes: [UInt8]) -> String {
        string(bytes.split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false).first ?? [])
    }

    /// A device tree string list (`compatible`): NUL-separated.
    public static func deviceTreeStrings(_ bytes: [UInt8]) -> [String] {
        bytes.split(separator: 0).map { string($0) }
    }

    /// A decimal number (leading and trailing blanks allowed); nil when it is not one.
    public static func integer(_ bytes: ArraySlice<UInt8>) -> Int? {
        let digits = trimmed(bytes)
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value = 0
        for byte in digits {
            guard byte >= 0x30 && byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    public static func starts(_ bytes: ArraySlice<UInt8>, with prefix: String) -> Bool { bytes.starts(with: prefix.utf8) }

    /// The last path component ("/dev/ttyS0" → "ttyS0").
    public static func baseName(_ path: String) -> String {
        let bytes = Array(path.utf8)
        guard let slash = bytes.lastIndex(of: 0x2F) else { return path }
        return string(bytes[(slash + 1)...])
    }

    /// "512 MB", "1.5 GB": sizes in the units `df -h` readers expect (decimal, one decimal place).
    public static func formatBytes(_ bytes: Int64) -> String {
        let units: [(Int64, String)] = [(1_000_000_000_000, "TB"), (1_000_000_000, "GB"), (1_000_000, "MB"), (1_000, "kB")]
        for (size, unit) in units where bytes >= size {
            let tenths = bytes * 10 / size
            return tenths % 10 == 0 || tenths >= 1000 ? "\(tenths / 10) \(unit)" : "\(tenths / 10).\(tenths % 10) \(unit)"
        }
        return "\(bytes) bytes"
    }
}
