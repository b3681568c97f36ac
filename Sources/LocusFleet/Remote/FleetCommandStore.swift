/// A command as `command status` shows it: the row of `commands` and its result, the newest
/// `command` record of its gateway with its id (docs/remote.md, "The records").
public struct CommandState: Equatable, Sendable {
    public var id: String
    public var gateway: String
    public var action: String
    public var createdAt: String
    public var expiresAt: String
    public var publishedAt: String?
    /// `done`, `refused` or `failed` (the gateway's record); `pending` (published, not expired,
    /// no record yet); `expired-without-answer`; `unpublished` (the broker never acknowledged it).
    public var state: String
    public var reason: String?
    /// When the gateway wrote its record.
    public var answeredAt: String?
    /// What a `locate`, `snapshot` or `republish` found or started (one JSON object, as text).
    public var detail: String? = nil
}

enum FleetCommandStore {
    static func create(id: String, gateway: String, action: String, body: String, expiresS: Int64,
                       on connection: PostgresConnection) throws(PostgresError) {
        try connection.execute("""
            insert into commands (id, gateway, action, body, expires_at) values ($1, $2, $3, $4, to_timestamp($5))
            """, [id, gateway, action, body, String(expiresS)])
    }

    static func published(_ id: String, on connection: PostgresConnection) throws(PostgresError) {
        try connection.execute("update commands set published_at = now() where id = $1", [id])
    }

    static func status(gateway: String?, on connection: PostgresConnection) throws(PostgresError) -> [CommandState] {
        try connection.execute("""
            select c.id, c.gateway, c.action, \(FleetStatus.utc("c.created_at")), \(FleetStatus.utc("c.expires_at")),
                \(FleetStatus.utc("c.published_at")),
                case when r.result in ('done', 'refused', 'failed') then r.result
                     when c.published_at is null then 'unpublished'
                     when c.expires_at < now() then 'expired-without-answer'
                     else 'pending' end,
                r.reason, \(FleetStatus.utc("r.time")), r.detail
            from commands c
            left join lateral (
                select payload ->> 'result' as result, payload ->> 'reason' as reason, payload -> 'detail' as detail, time from records
                where gateway = c.gateway and kind = 'command' and payload ->> 'id' = c.id order by seq desc limit 1
            ) r on true
            where $1::text is null or c.gateway = $1
            order by c.created_at, c.id
            """, [gateway]).rows.map { row in
            CommandState(id: row[0] ?? "", gateway: row[1] ?? "", action: row[2] ?? "", createdAt: row[3] ?? "", expiresAt: row[4] ?? "",
                         publishedAt: row[5], state: row[6] ?? "", reason: row[7], answeredAt: row[8], detail: row[9])
        }
    }
}

/// A line diff of two texts (`config diff`): the longest common subsequence of their lines,
/// shown as unified-diff hunks with three lines of context.
enum LineDiff {
    /// Lines compared at most (each text): the table is their product.
    static let maximumLines = 5_000

    enum Line: Equatable {
        case same(String), removed(String), added(String)
    }

    static func lines(_ old: [String], _ new: [String]) -> [Line] {
        let n = old.count, m = new.count
        // common[i][j]: the longest common subsequence of old[i...] and new[j...].
        var common = [[Int32]](repeating: [Int32](repeating: 0, count: m + 1), count: n + 1)
        for i in stride(from: n - 1, through: 0, by: -1) {
            for j in stride(from: m - 1, through: 0, by: -1) {
                common[i][j] = old[i] == new[j] ? common[i + 1][j + 1] + 1 : max(common[i + 1][j], common[i][j + 1])
            }
        }
        var result: [Line] = []
        var i = 0, j = 0
        while i < n || j < m {
            if i < n && j < m && old[i] == new[j] {
                result.append(.same(old[i])); i += 1; j += 1
            } else if i < n && (j == m || common[i + 1][j] >= common[i][j + 1]) {
                result.append(.removed(old[i])); i += 1
            } else {
                result.append(.added(new[j])); j += 1
            }
        }
        return result
    }

    /// `--- A` / `+++ B` and the hunks; empty when the texts are equal.
    static func unified(_ old: String, _ new: String, oldName: String, newName: String, context: Int = 3) -> String {
        let diff = lines(split(old), split(new))
        guard diff.contains(where: { if case .same = $0 { return false } else { return true } }) else { return "" }
        var output = "--- \(oldName)\n+++ \(newName)\n"
        // Each change with `context` lines around it; hunks whose context touches merge.
        let changed = diff.indices.filter { if case .same = diff[$0] { return false } else { return true } }
        var start = 0
        while start < changed.count {
            var end = start
            while end + 1 < changed.count && changed[end + 1] - changed[end] <= 2 * context { end += 1 }
            let from = max(0, changed[start] - context), to = min(diff.count - 1, changed[end] + context)
            output += hunk(diff, from, to)
            start = end + 1
        }
        return output
    }

    private static func hunk(_ diff: [Line], _ from: Int, _ to: Int) -> String {
        var oldLine = 1, newLine = 1
        for line in diff[..<from] {
            switch line {
            case .same: oldLine += 1; newLine += 1
            case .removed: oldLine += 1
            case .added: newLine += 1
            }
        }
        var oldCount = 0, newCount = 0, body = ""
        for line in diff[from...to] {
            switch line {
            case .same(let text): oldCount += 1; newCount += 1; body += " \(text)\n"
            case .removed(let text): oldCount += 1; body += "-\(text)\n"
            case .added(let text): newCount += 1; body += "+\(text)\n"
            }
        }
        // A range of no lines starts at the line before it (diff -u).
        let oldStart = oldCount == 0 ? oldLine - 1 : oldLine, newStart = newCount == 0 ? newLine - 1 : newLine
        return "@@ -\(oldStart),\(oldCount) +\(newStart),\(newCount) @@\n" + body
    }

    static func split(_ text: String) -> [String] {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if lines.last == "" { lines.removeLast() }
        return lines
    }
}
