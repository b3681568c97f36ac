import LocusCore
import LocusDevices

/// Recordings as one time line of bytes, for `locus feed` (played into pseudo-terminals) and
/// `locus replay` (played into the simulated kernel's ports): NMEA lines at the UTC times their
/// sentences carry, HCI events at their capture times.
enum RecordingTimeline {
    /// Bytes for one port at a moment (nil: the sentence carries no time; it goes out with the
    /// line before it).
    struct Item {
        var timeNs: Int64?
        var bytes: ArraySlice<UInt8>
        var port: Int
    }

    /// Every line of an NMEA file with the UTC time its sentence carries. The lines are slices of
    /// the file's bytes (a day of 1 Hz NMEA is read without a copy per line).
    static func nmeaItems(_ path: String, port: Int) -> [Item]? {
        var contents: [UInt8]
        do { contents = try Files.read(path) } catch {
            Console.error("locus: cannot read \(path): \(error)\n")
            return nil
        }
        if let last = contents.last, last != 0x0A { contents += [0x0D, 0x0A] }
        var lines: [ArraySlice<UInt8>] = []
        var start = 0
        for (index, byte) in contents.enumerated() where byte == 0x0A {
            lines.append(contents[start...index])
            start = index + 1
        }
        // The date comes from RMC or ZDA; lines before the first one use the first date seen.
        var date: CivilDate? = lines.lazy.compactMap { sentenceDate($0) }.first
        var previousTimeOfDay: Int64? = nil
        var items: [Item] = []
        items.reserveCapacity(lines.count)
        for line in lines {
            let found = sentenceDate(line)
            if let found { date = found }
            var time: Int64? = nil
            if let timeOfDay = sentenceTimeOfDay(line), let day = date {
                if let previous = previousTimeOfDay, timeOfDay + 43_200_000_000_000 < previous, found == nil {
                    date = day.addingDays(1)
                }
                previousTimeOfDay = timeOfDay
                time = UTCTime(date: date ?? day, timeOfDayNs: timeOfDay).totalNanoseconds
            }
            items.append(Item(timeNs: time, bytes: line, port: port))
        }
        return items
    }

    /// The `index`th comma-separated field of a sentence (before its `*` or line end), or nil.
    static func field(_ line: ArraySlice<UInt8>, _ index: Int) -> ArraySlice<UInt8>? {
        var start = line.startIndex
        var number = 0
        var position = line.startIndex
        while position < line.endIndex {
            let byte = line[position]
            if byte == UInt8(ascii: "*") || byte == 0x0D || byte == 0x0A { break }
            if byte == UInt8(ascii: ",") {
                if number == index { return line[start..<position] }
                number += 1
                start = position + 1
            }
            position += 1
        }
        return number == index ? line[start..<position] : nil
    }

    /// A sentence type's three letters as one number ("RMC" for "$GPRMC", any talker).
    static func typeCode(_ letters: some Collection<UInt8>) -> UInt32 {
        letters.suffix(3).reduce(0) { $0 << 8 | UInt32($1) }
    }

    static let rmc = typeCode("RMC".utf8), zda = typeCode("ZDA".utf8), gll = typeCode("GLL".utf8)
    static let timeFirst = ["RMC", "GGA", "GNS", "GST", "ZDA", "GBS"].map { typeCode($0.utf8) }

    /// The line's sentence type (`typeCode`), or 0 for a line that is not a sentence.
    static func sentenceType(_ line: ArraySlice<UInt8>) -> UInt32 {
        guard let first = field(line, 0), first.count >= 6, first.first == UInt8(ascii: "$") else { return 0 }
        return typeCode(first)
    }

    static func number(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return bytes.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }

    static func sentenceTimeOfDay(_ line: ArraySlice<UInt8>) -> Int64? {
        let type = sentenceType(line)
        let index: Int
        if timeFirst.contains(type) { index = 1 } else if type == gll { index = 5 } else { return nil }
        guard let field = field(line, index), field.count >= 6, let hours = number(field.prefix(2)), let minutes = number(field.dropFirst(2).prefix(2)),
              let seconds = number(field.dropFirst(4).prefix(2)), hours < 24, minutes < 60, seconds < 61 else { return nil }
        var nanoseconds: Int64 = 0
        let fraction = field.dropFirst(7)
        if field.count > 7, field[field.startIndex + 6] == UInt8(ascii: "."), let digits = number(fraction.prefix(9)) {
            nanoseconds = Int64(digits)
            for _ in fraction.prefix(9).count..<9 { nanoseconds *= 10 }
        }
        return (Int64(hours) * 3600 + Int64(minutes) * 60 + Int64(seconds)) * 1_000_000_000 + nanoseconds
    }

    static func sentenceDate(_ line: ArraySlice<UInt8>) -> CivilDate? {
        var date: CivilDate? = nil
        switch sentenceType(line) {
        case rmc:
            guard let text = field(line, 9), text.count == 6, let day = number(text.prefix(2)), let month = number(text.dropFirst(2).prefix(2)),
                  let year = number(text.suffix(2)), (1...31).contains(day), (1...12).contains(month) else { return nil }
            date = CivilDate(year: 2000 + year, month: month, day: day)
        case zda:
            guard let dayText = field(line, 2), let monthText = field(line, 3), let yearText = field(line, 4), let day = number(dayText),
                  let month = number(monthText), let year = number(yearText), (1...31).contains(day), (1...12).contains(month), year >= 1980 else { return nil }
            date = CivilDate(year: year, month: month, day: day)
        default:
            return nil
        }
        // GPS week rollover, as the decoder corrects it: a date before 2017 is 1024 weeks late.
        if let found = date, found < CivilDate(year: 2017, month: 1, day: 1) { return found.addingDays(7168) }
        return date
    }

    /// Items in play order: untimed lines keep their place after the timed line before them; the
    /// recordings merge by time when both have dates, else each starts at the beginning.
    static func merge(_ items: [Item]) -> [Item] { inPlayOrder(timed(items)) }

    /// Every item with a time: an untimed line takes the time of the timed line before it (the
    /// port's first time before the first), and recordings more than a day apart are moved to
    /// start together. File order is kept.
    static func timed(_ items: [Item]) -> [Item] {
        var timed: [Item] = []
        timed.reserveCapacity(items.count)
        var lastTime: [Int: Int64] = [:]
        for item in items {
            var copy = item
            if copy.timeNs == nil { copy.timeNs = lastTime[item.port] } else { lastTime[item.port] = copy.timeNs }
            timed.append(copy)
        }
        // Lines before the first timed line of their port play at the port's first time.
        var firstTime: [Int: Int64] = [:]
        for item in timed { if let time = item.timeNs, firstTime[item.port] == nil { firstTime[item.port] = time } }
        for index in timed.indices where timed[index].timeNs == nil { timed[index].timeNs = firstTime[timed[index].port] ?? 0 }
        let starts = firstTime.values
        if let earliest = starts.min(), let latest = starts.max(), latest - earliest > 86_400_000_000_000 {
            // Unrelated recordings: both start together.
            for index in timed.indices { timed[index].timeNs! += earliest - (firstTime[timed[index].port] ?? earliest) }
        }
        return timed
    }

    /// Timed items by time, file order kept on equal times (a stable sort). Each recording is in
    /// time order already, except where its clock steps back; one recording alone in order is
    /// returned as it is.
    static func inPlayOrder(_ timed: [Item]) -> [Item] {
        if zip(timed, timed.dropFirst()).allSatisfy({ $0.timeNs! <= $1.timeNs! }) { return timed }
        return timed.enumerated().sorted { a, b in
            a.element.timeNs! != b.element.timeNs! ? a.element.timeNs! < b.element.timeNs! : a.offset < b.offset
        }.map { $0.element }
    }
}
