extension BoundedYAML {
    /// The key of `known` a mistyped `key` most likely meant: the closest by edit distance (insertions, deletions,
    /// substitutions, and swapping two neighbours), if it is close enough to be a typo (at most 2 edits, or a
    /// third of the key's length for long keys); else the longest key of 4 letters or more that the typed one
    /// begins with or that begins with it (`broker_url`: `broker`). For "unknown key" errors.
    public static func nearestKey(to key: String, among known: some Sequence<String>) -> String? {
        closest(to: key, among: known) ?? known.filter { candidate in
            let (short, long) = candidate.count < key.count ? (candidate, key) : (key, candidate)
            return short.count >= 4 && long.lowercased().hasPrefix(short.lowercased())
        }.max { $0.count < $1.count }
    }

    private static func closest(to key: String, among known: some Sequence<String>) -> String? {
        let typed = Array(key.lowercased())
        let limit = max(2, typed.count / 3)
        var best: (key: String, distance: Int)?
        for candidate in known {
            let distance = editDistance(typed, Array(candidate.lowercased()))
            if distance <= limit, distance < best?.distance ?? .max { best = (candidate, distance) }
        }
        return best?.key
    }

    /// Optimal string alignment distance.
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var table = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1)
                }
            }
        }
        return table[a.count][b.count]
    }
}
