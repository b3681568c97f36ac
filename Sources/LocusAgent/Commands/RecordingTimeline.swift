import LocusCore
import LocusDevices

/// Recordings as one time line of bytes, for `locus feed` (played into pseudo-terminals) and
/// `locus replay` (played into the simulated kernel's ports): NMEA lines at the UTC times their
/// sentences carry, HCI events at their capture times.
enum RecordingTimeline {
    /// Bytes for one port at a moment (nil: the sentence carries no time; it goes out with the
    /// line before it): `range` of the port's bytes (`Recordings.bytes[port]`). An item holds no
    /// reference, so a day of lines is moved, filtered and sorted as plain values.
    struct Item {
        var timeNs: Int64?
        var range: Range<Int>
        var port: Int
    }

    /// The recordings' bytes, one array a port (a port's file, or its events one after the
    /// other), and their items.
    struct Recordings {
        var bytes: [[UInt8]] = []
        var items: [Item] = []

        init() {}

        /// One item's bytes.
        func bytes(of item: Item) -> ArraySlice<UInt8> { bytes[item.port][item.range] }

        /// A port's bytes and items (the port's items after any already there).
        mutating func add(port: Int, bytes portBytes: [UInt8], items portItems: [Item]) {
            while bytes.count <= port { bytes.append([]) }
            bytes[port] = portBytes
            items += portItems
        }

        /// HCI events, each as an H4 packet (0x04 and the event) at its time.
        mutating func addEvents(_ events: [(timeNs: Int64, event: [UInt8])], port: Int) {
            var portBytes: [UInt8] = []
            portBytes.reserveCapacity(events.reduce(0) { $0 + 1 + $1.event.count })
            var portItems: [Item] = []
            portItems.reserveCapacity(events.count)
            for (timeNs, event) in events {
                let start = portBytes.count
                portBytes.append(0x04)
                portBytes += event
                portItems.append(Item(timeNs: timeNs, range: start..<portBytes.count, port: port))
            }
            add(port: port, bytes: portBytes, items: portItems)
        }

        /// An NMEA file's lines (`nmeaItems`); false when it cannot be read.
        mutating func addNMEA(_ path: String, port: Int) -> Bool {
            guard let (portBytes, portItems) = RecordingTimeline.nmeaItems(path, port: port) else { return false }
            add(port: port, bytes: portBytes, items: portItems)
            return true
        }
    }

    /// Every line of an NMEA file with the UTC time its sentence carries: the file's bytes (a
    /// last line without a line feed gets one) and each line as a range of them. Each line is
    /// looked at once, as bytes in place.
    static func nmeaItems(_ path: String, port: Int) -> (bytes: [UInt8], items: [Item])? {
        var contents: [UInt8]
        do { contents = try Files.read(path) } catch {
            Console.error("locus: cannot read \(path): \(error)\n")
            return nil
        }
        if let last = contents.last, last != 0x0A { contents += [0x0D, 0x0A] }
        let lines = lineRanges(contents)
        let items = contents.withUnsafeBufferPointer { buffer in
            var times: [SentenceTime] = []
            times.reserveCapacity(lines.count)
            for range in lines { times.append(SentenceTime(UnsafeBufferPointer(rebasing: buffer[range]))) }
            // The date comes from RMC or ZDA; lines before the first one use the first date seen.
            var date: CivilDate? = times.first { $0.date != nil }?.date
            var previousTimeOfDay: Int64? = nil
            // The date's first nanosecond, worked out once a date.
            var dayStart: (date: CivilDate, ns: Int64)? = nil
            var items: [Item] = []
            items.reserveCapacity(lines.count)
            for (range, found) in zip(lines, times) {
                if let foundDate = found.date { date = foundDate }
                var time: Int64? = nil
                if let timeOfDay = found.timeOfDayNs, let day = date {
                    if let previous = previousTimeOfDay, timeOfDay + 43_200_000_000_000 < previous, found.date == nil {
                        date = day.addingDays(1)
                    }
                    previousTimeOfDay = timeOfDay
                    let lineDate = date ?? day
                    if lineDate != dayStart?.date { dayStart = (lineDate, lineDate.daysSinceEpoch * 86_400_000_000_000) }
                    time = dayStart!.ns + timeOfDay
                }
                items.append(Item(timeNs: time, range: range, port: port))
            }
            return items
        }
        return (contents, items)
    }

    /// Each line of `contents` (which ends with a line feed), its line feed included.
    static func lineRanges(_ contents: [UInt8]) -> [Range<Int>] {
        var lines: [Range<Int>] = []
        contents.withUnsafeBytes { buffer in
            var start = 0
            while let feed = lineFeed(buffer, from: start) {
                lines.append(start..<(feed + 1))
                start = feed + 1
            }
        }
        return lines
    }

    /// The offset of the first line feed at or after `start`, or nil. Eight bytes at a time: a
    /// word XORed with eight line feeds has a zero byte where a line feed was (the classic
    /// "has a zero byte" test, (w - 0x01…) & ~w & 0x80…); that word is then looked at byte by byte.
    static func lineFeed(_ buffer: UnsafeRawBufferPointer, from start: Int) -> Int? {
        let ones: UInt64 = 0x0101_0101_0101_0101, feeds: UInt64 = 0x0A0A_0A0A_0A0A_0A0A, highs: UInt64 = 0x8080_8080_8080_8080
        var index = start
        while index + 8 <= buffer.count {
            let word = buffer.loadUnaligned(fromByteOffset: index, as: UInt64.self) ^ feeds
            if (word &- ones) & ~word & highs != 0 { break }
            index += 8
        }
        while index < buffer.count {
            if buffer[index] == 0x0A { return index }
            index += 1
        }
        return nil
    }

    /// A sentence type's three letters as one number ("RMC" for "$GPRMC", any talker).
    static func typeCode(_ letters: some Collection<UInt8>) -> UInt32 {
        letters.suffix(3).reduce(0) { $0 << 8 | UInt32($1) }
    }

    static let rmc = typeCode("RMC".utf8), zda = typeCode("ZDA".utf8), gll = typeCode("GLL".utf8)
    static let timeFirst = ["RMC", "GGA", "GNS", "GST", "ZDA", "GBS"].map { typeCode($0.utf8) }

    /// The time of day and the date one line's sentence carries (RMC and ZDA carry both, GGA, GNS,
    /// GST, GBS and GLL a time of day), read from its bytes in one pass up to the last field used.
    struct SentenceTime {
        var timeOfDayNs: Int64? = nil
        var date: CivilDate? = nil

        init(_ line: UnsafeBufferPointer<UInt8>) {
            var fields = Fields(line)
            guard let first = fields.next(), first.count >= 6, line[first.lowerBound] == UInt8(ascii: "$") else { return }
            let type = line[(first.upperBound - 3)..<first.upperBound].reduce(0) { $0 << 8 | UInt32($1) }
            if type == RecordingTimeline.gll {
                timeOfDayNs = fields.skip(4).flatMap { Self.timeOfDay(line, $0) }
                return
            }
            guard RecordingTimeline.timeFirst.contains(type) else { return }
            timeOfDayNs = fields.next().flatMap { Self.timeOfDay(line, $0) }
            if type == RecordingTimeline.rmc {
                date = fields.skip(7).flatMap { Self.rmcDate(line, $0) }.map(Self.afterRollover)
            } else if type == RecordingTimeline.zda {
                date = Self.zdaDate(line, &fields).map(Self.afterRollover)
            }
        }

        /// hhmmss[.f…]: nanoseconds since midnight.
        static func timeOfDay(_ line: UnsafeBufferPointer<UInt8>, _ field: Range<Int>) -> Int64? {
            let start = field.lowerBound
            guard field.count >= 6, let hours = twoDigits(line, start), let minutes = twoDigits(line, start + 2),
                  let seconds = twoDigits(line, start + 4), hours < 24, minutes < 60, seconds < 61 else { return nil }
            var nanoseconds: Int64 = 0
            if field.count > 7, line[start + 6] == UInt8(ascii: "."), let digits = number(line, (start + 7)..<min(field.upperBound, start + 16)) {
                nanoseconds = Int64(digits)
                for _ in min(field.count - 7, 9)..<9 { nanoseconds *= 10 }
            }
            return (Int64(hours) * 3600 + Int64(minutes) * 60 + Int64(seconds)) * 1_000_000_000 + nanoseconds
        }

        /// RMC's ddmmyy.
        static func rmcDate(_ line: UnsafeBufferPointer<UInt8>, _ field: Range<Int>) -> CivilDate? {
            let start = field.lowerBound
            guard field.count == 6, let day = twoDigits(line, start), let month = twoDigits(line, start + 2),
                  let year = twoDigits(line, start + 4), (1...31).contains(day), (1...12).contains(month) else { return nil }
            return CivilDate(year: 2000 + year, month: month, day: day)
        }

        /// ZDA's day, month and four-digit year, the three fields after the time.
        static func zdaDate(_ line: UnsafeBufferPointer<UInt8>, _ fields: inout Fields) -> CivilDate? {
            guard let dayField = fields.next(), let monthField = fields.next(), let yearField = fields.next(), let day = number(line, dayField),
                  let month = number(line, monthField), let year = number(line, yearField), (1...31).contains(day), (1...12).contains(month),
                  year >= 1980 else { return nil }
            return CivilDate(year: year, month: month, day: day)
        }

        /// GPS week rollover, as the decoder corrects it: a date before 2017 is 1024 weeks late.
        static func afterRollover(_ date: CivilDate) -> CivilDate {
            date < CivilDate(year: 2017, month: 1, day: 1) ? date.addingDays(7168) : date
        }

        /// The two digits at `index` as a number, or nil.
        @inline(__always)
        static func twoDigits(_ line: UnsafeBufferPointer<UInt8>, _ index: Int) -> Int? {
            let tens = line[index] &- 0x30, ones = line[index + 1] &- 0x30
            guard tens <= 9, ones <= 9 else { return nil }
            return Int(tens) * 10 + Int(ones)
        }

        /// The decimal number the bytes in `range` spell, or nil (empty, or not all digits).
        static func number(_ line: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int? {
            guard !range.isEmpty else { return nil }
            var value = 0
            for index in range {
                let digit = line[index] &- 0x30
                guard digit <= 9 else { return nil }
                value = value * 10 + Int(digit)
            }
            return value
        }
    }

    /// A sentence's comma-separated fields left to right, up to its '*' or line end.
    struct Fields {
        private let line: UnsafeBufferPointer<UInt8>
        private var position = 0
        private var ended = false

        init(_ line: UnsafeBufferPointer<UInt8>) { self.line = line }

        /// The next field's byte range; nil past the last field.
        mutating func next() -> Range<Int>? {
            guard !ended else { return nil }
            let start = position
            while position < line.count {
                let byte = line[position]
                // Digits, letters and '.' are above ',', as are most bytes: one comparison each.
                if byte <= UInt8(ascii: ",") {
                    if byte == UInt8(ascii: "*") || byte == 0x0D || byte == 0x0A { break }
                    if byte == UInt8(ascii: ",") {
                        position += 1
                        return start..<(position - 1)
                    }
                }
                position += 1
            }
            ended = true
            return start..<position
        }

        /// The field after skipping `count`. Eight bytes at a time while no '*', carriage return
        /// or line feed is among them: the commas in a word are counted, and the word with the
        /// last comma to skip gives its place; the rest field by field.
        mutating func skip(_ count: Int) -> Range<Int>? {
            var left = count
            if !ended {
                let raw = UnsafeRawBufferPointer(line)
                while left > 0 && position + 8 <= line.count {
                    let word = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: position, as: UInt64.self))
                    let ends = Self.zeroBytes(word ^ 0x2A2A_2A2A_2A2A_2A2A) | Self.zeroBytes(word ^ 0x0D0D_0D0D_0D0D_0D0D)
                        | Self.zeroBytes(word ^ 0x0A0A_0A0A_0A0A_0A0A)
                    if ends != 0 { break }
                    var commas = Self.zeroBytes(word ^ 0x2C2C_2C2C_2C2C_2C2C)
                    let found = commas.nonzeroBitCount
                    if found < left {
                        left -= found
                        position += 8
                        continue
                    }
                    for _ in 1..<left { commas &= commas &- 1 }
                    position += commas.trailingZeroBitCount / 8 + 1
                    left = 0
                }
            }
            for _ in 0..<left where next() == nil { return nil }
            return next()
        }

        /// 0x80 in each byte of `word` that is zero, 0 in the others (exact: no borrow between bytes).
        @inline(__always)
        static func zeroBytes(_ word: UInt64) -> UInt64 {
            let lows: UInt64 = 0x7F7F_7F7F_7F7F_7F7F
            return ~(((word & lows) &+ lows) | word | lows)
        }
    }

    /// Items in play order: untimed lines keep their place after the timed line before them; the
    /// recordings merge by time when both have dates, else each starts at the beginning.
    static func merge(_ items: [Item]) -> [Item] { inPlayOrder(timed(items)) }

    /// Every item with a time: an untimed line takes the time of the timed line before it (the
    /// port's first time before the first), and recordings more than a day apart are moved to
    /// start together. File order is kept.
    static func timed(_ items: [Item]) -> [Item] {
        // Ports are small numbers (0 and 1 here, the pseudo-terminals' indexes in `locus feed`).
        let ports = items.reduce(0) { max($0, $1.port + 1) }
        var timed = items
        var lastTime = [Int64?](repeating: nil, count: ports)
        for index in timed.indices {
            let port = timed[index].port
            if let time = timed[index].timeNs { lastTime[port] = time } else { timed[index].timeNs = lastTime[port] }
        }
        // Lines before the first timed line of their port play at the port's first time.
        var firstTime = [Int64?](repeating: nil, count: ports)
        for item in timed where firstTime[item.port] == nil { firstTime[item.port] = item.timeNs }
        for index in timed.indices where timed[index].timeNs == nil { timed[index].timeNs = firstTime[timed[index].port] ?? 0 }
        let starts = firstTime.compactMap { $0 }
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
