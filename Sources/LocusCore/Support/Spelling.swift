/// Did-you-mean suggestions for misspelt keys and words.
public enum Spelling {
    /// The candidate closest to `word` by edit distance, if it is close enough to be a likely
    /// typo: at most one edit for short words, about a third of the length for longer ones.
    public static func closest(to word: String, among candidates: [String]) -> String? {
        let limit = max(1, word.utf8.count / 3)
        var best: String? = nil
        var bestDistance = Int.max
        for candidate in candidates where candidate != word {
            let distance = editDistance(Array(word.utf8), Array(candidate.utf8))
            if distance <= limit && distance < bestDistance {
                best = candidate
                bestDistance = distance
            }
        }
        return best
    }

    /// Optimal string alignment distance: insertions, deletions, substitutions and adjacent
    /// transpositions ("radisu" is one edit from "radius"). Case differences count as half a step
    /// rounded up, so "Radius" still suggests "radius".
    public static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        let width = b.count + 1
        var previous2 = [Int](repeating: 0, count: width)
        var previous = [Int](0...b.count)
        var current = [Int](repeating: 0, count: width)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let same = lower(a[i - 1]) == lower(b[j - 1])
                let cost = same ? 0 : 1
                var value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, lower(a[i - 1]) == lower(b[j - 2]), lower(a[i - 2]) == lower(b[j - 1]) {
                    value = min(value, previous2[j - 2] + 1)
                }
                current[j] = value
            }
            swap(&previous2, &previous)
            swap(&previous, &current)
        }
        return previous[b.count]
    }

    private static func lower(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }
}
