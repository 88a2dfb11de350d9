import LibPQ

/// The raw tables' daily partitions: made ahead of the data (and for any day a batch needs), dropped past
/// retention with the rejected batches and rollups as old.
struct PartitionMaintenance {
    let connection: PostgresConnection
    /// Days whose partitions are known to exist.
    private var partitionedDays: Set<Int64> = []

    init(connection: PostgresConnection) { self.connection = connection }

    /// Makes the partitions of the days (Unix days, UTC) not known to exist yet.
    mutating func ensure(days: Set<Int64>) throws(PostgresError) {
        for day in days.subtracting(partitionedDays).sorted() {
            try connection.query("SELECT beaconflow.ensure_partitions($1, 1)", [PostgresDate(unixDay: day)])
            partitionedDays.insert(day)
        }
    }

    /// Creates the partitions from today (UTC) through `partitions_ahead_days` ahead and, with `dropExpired`,
    /// drops those older than `retention_days` (both in `beaconflow.settings`) and deletes the rejected batches as
    /// old. Returns the number of partitions made and dropped.
    mutating func maintain(dropExpired: Bool) throws(PostgresError) -> (made: Int, dropped: Int) {
        if dropExpired {
            try connection.query("SELECT beaconflow.prune_rejections()")
        }
        let rows = try connection.query(
            """
            SELECT beaconflow.ensure_partitions((now() AT TIME ZONE 'UTC')::date,
                       (SELECT value::integer FROM beaconflow.settings WHERE key = 'partitions_ahead_days') + 1),
                   CASE WHEN $1 THEN beaconflow.drop_partitions_before((now() AT TIME ZONE 'UTC')::date
                       - (SELECT value::integer FROM beaconflow.settings WHERE key = 'retention_days')) ELSE 0 END
            """, [dropExpired])
        partitionedDays.removeAll()  // a dropped day is made again if a late batch needs it
        guard let row = rows.first else { return (0, 0) }
        return (try row.decode(0), try row.decode(1))
    }
}
