import LibPQ

/// Closed minutes of the served sites rewritten as one pack per source, beacon, frame power and minute
/// (`beaconflow.compact_sighting_packs`): the minutes older than `compaction_lag_minutes` (a setting of the
/// database), looking `windowMinutes` back from there.
struct PackCompaction {
    let connection: PostgresConnection
    /// How far back from the lag each run looks: three runs cover each minute. A run reads every pack of its window
    /// (on a busy site a few hundred thousand rows, a second or two of the writer's time), so the window stays
    /// short; a batch that arrives later than that stays as written.
    static let windowMinutes = 15

    /// Compacts each site's closed minutes; returns the packs written.
    func compact(sites: Set<String>) throws(PostgresError) -> Int {
        var written = 0
        for site in sites.sorted() {
            let rows = try connection.query(
                """
                SELECT beaconflow.compact_sighting_packs($1, until_ts - $2 * interval '1 minute', until_ts)
                FROM (SELECT date_bin('1 minute', now() - value::integer * interval '1 minute',
                                      timestamptz '1970-01-01 00:00:00+00') AS until_ts
                      FROM beaconflow.settings WHERE key = 'compaction_lag_minutes') lag
                """, [site, Self.windowMinutes])
            if let row = rows.first { written += try row.decode(0) as Int }
        }
        return written
    }
}
