/// The distinct condition settings of an engine's records, each stored once and shared by number:
/// a site's 10,000 conditions usually have a handful of settings between them, so a record
/// carries a 4-byte number instead of 48 bytes of settings.
///
/// Fixed capacity (one entry per record the engine can hold, so interning never fails while a
/// record is free), reference counted (an entry no record uses is free again, so records replaced
/// at run time do not fill it), found by an open-addressing hash of entry numbers (+ 1, 0 empty,
/// at most half full, backward-shift deletion). Nothing is allocated after init, and the pages of
/// entries never used are never touched.
struct SettingsTable: ~Copyable {
    private let entries: UnsafeMutableBufferPointer<ConditionSettings>
    /// Records using each entry; 0 for a free one.
    private let users: UnsafeMutableBufferPointer<Int32>
    /// Free entries below `used` (a stack).
    private let free: UnsafeMutableBufferPointer<Int32>
    private var freeCount = 0
    /// Entries 0..<used have been handed out at least once.
    private var used = 0
    private let table: UnsafeMutableBufferPointer<Int32>
    private let mask: Int
    /// Entries in use.
    private(set) var count = 0

    /// The tables' memory, one block (`TableBlock`).
    private let block: UnsafeMutableRawPointer

    init(capacity: Int) {
        let capacity = max(1, capacity)
        var size = 16
        while size < capacity * 2 { size <<= 1 }
        var layout = TableBlock()
        let at = (entries: layout.reserve(ConditionSettings.self, count: capacity), users: layout.reserve(Int32.self, count: capacity),
                  free: layout.reserve(Int32.self, count: capacity), table: layout.reserve(Int32.self, count: size))
        block = layout.allocate()
        entries = TableBlock.table(block, at.entries, count: capacity)
        users = TableBlock.table(block, at.users, count: capacity)
        free = TableBlock.table(block, at.free, count: capacity)
        table = TableBlock.table(block, at.table, count: size)
        mask = size - 1
    }

    deinit {
        TableBlock.deallocate(block)
    }

    /// The settings of entry `index`.
    @inline(__always)
    subscript(index: Int32) -> ConditionSettings { entries[Int(index)] }

    /// The entry holding `settings` (a new one when none does), with one more user.
    mutating func intern(_ settings: ConditionSettings) -> Int32 {
        var position = SettingsTable.hash(settings) & mask
        while table[position] != 0 {
            let index = Int(table[position]) - 1
            if entries[index] == settings {
                users[index] += 1
                return Int32(index)
            }
            position = (position + 1) & mask
        }
        let index: Int
        if freeCount > 0 {
            freeCount -= 1
            index = Int(free[freeCount])
        } else {
            precondition(used < entries.count, "a settings entry for every record")
            index = used
            used += 1
        }
        (entries.baseAddress! + index).initialize(to: settings)
        (users.baseAddress! + index).initialize(to: 1)
        table[position] = Int32(index + 1)
        count += 1
        precondition(count * 2 <= table.count, "the table is at most half full, so a probe ends")
        return Int32(index)
    }

    /// One user fewer of entry `index`; the entry is free when none is left.
    mutating func release(_ index: Int32) {
        let entry = Int(index)
        precondition(entry >= 0 && entry < used, "a settings entry handed out")
        precondition(users[entry] > 0, "a settings entry in use")
        users[entry] -= 1
        guard users[entry] == 0 else { return }
        var hole = SettingsTable.hash(entries[entry]) & mask
        while table[hole] != Int32(entry + 1) {
            precondition(table[hole] != 0, "an entry in use is in the table")
            hole = (hole + 1) & mask
        }
        var position = (hole + 1) & mask
        while table[position] != 0 {
            let home = SettingsTable.hash(entries[Int(table[position]) - 1]) & mask
            let moves = hole <= position ? (home <= hole || home > position) : (home <= hole && home > position)
            if moves {
                table[hole] = table[position]
                hole = position
            }
            position = (position + 1) & mask
        }
        table[hole] = 0
        free[freeCount] = Int32(entry)
        freeCount += 1
        count -= 1
    }

    /// FNV-1a over the fields (equal settings hash equally: a zero of either sign counts as 0).
    private static func hash(_ settings: ConditionSettings) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        @inline(__always) func mix(_ value: UInt64) { hash = (hash ^ value) &* 0x0100_0000_01b3 }
        mix(settings.enterMarginM == 0 ? 0 : settings.enterMarginM.bitPattern)
        mix(settings.exitMarginM == 0 ? 0 : settings.exitMarginM.bitPattern)
        mix(UInt64(bitPattern: settings.dwellMs))
        mix((settings.accuracyGate ? 1 : 0) | (settings.transit ? 2 : 0))
        mix(settings.exitTimeoutMs.map { UInt64(bitPattern: $0) } ?? 0xFFFF_FFFF_FFFF_FFFF)
        switch settings.proximity {
        case nil: mix(0)
        case .immediate?: mix(1)
        case .near?: mix(2)
        case .far?: mix(3)
        }
        return Int(truncatingIfNeeded: hash ^ (hash >> 29))
    }
}
