import LibPQ

/// The raw tables' daily partitions: made ahead of the data (and for any day a batch needs), dropped past
/// retention with the rejected batches and rollups as old. Each step is a statement of its own, so that one that
/// fails (a reader holding an expired partition, the partition limit) leaves the others done.
///
/// Partitions are attached without a lock that readers or writers conflict with, and the functions give up a lock
/// they cannot have within a second (schema version 25). A day the database would not make is not asked again
/// for `retryInterval`: the batches that need it wait, unacknowledged, without holding up the others.
struct PartitionMaintenance {
    let connection: PostgresConnection
    var retryInterval: Duration = .seconds(10)
    /// Days whose partitions are known to exist.
    private var partitionedDays: Set<Int64> = []
    /// Days the database would not make, with why and when to ask again.
    private var refusedDays: [Int64: (error: PostgresError, retryAt: ContinuousClock.Instant)] = [:]

    init(connection: PostgresConnection) { self.connection = connection }

    /// The days of `days` without partitions: those not known here are looked up in the catalog (made by another
    /// instance, or ahead of an import by the schema's owner with `ensure_partitions`) and remembered. A lookup
    /// the database refuses (a statement timeout) leaves them unknown, as before it; only a lost connection throws.
    mutating func daysWithoutPartition(_ days: Set<Int64>) throws(PostgresError) -> Set<Int64> {
        let unknown = days.subtracting(partitionedDays)
        guard !unknown.isEmpty else { return [] }
        do {
            let made = try connection.query(
                """
                SELECT (d - date '1970-01-01')::bigint FROM unnest($1::date[]) AS d
                WHERE to_regclass(format('beaconflow.sighting_packs_%s', to_char(d, 'YYYYMMDD'))) IS NOT NULL
                """,
                [unknown.sorted().map { PostgresDate(unixDay: $0) }])
            for row in made { partitionedDays.insert(try row.decode(0, as: Int64.self)) }
        } catch where !error.isConnectionFailure {
            return unknown
        }
        return unknown.subtracting(partitionedDays)
    }

    /// Makes the partitions of the days (Unix days, UTC) not known to exist yet.
    mutating func ensure(days: Set<Int64>, now: ContinuousClock.Instant = .now) throws(PostgresError) {
        for day in days.subtracting(partitionedDays).sorted() {
            if let refused = refusedDays[day], now < refused.retryAt { throw refused.error }
            do {
                try connection.query("SELECT beaconflow.ensure_partitions($1, 1)", [PostgresDate(unixDay: day)])
            } catch where !error.isConnectionFailure {
                refusedDays[day] = (error, now + retryInterval)
                throw error
            }
            refusedDays[day] = nil
            partitionedDays.insert(day)
        }
    }

    /// Drops the partitions older than `retention_days` (in `beaconflow.settings`; those a reader holds are left
    /// for the next time) and deletes the rejected batches as old. Returns the number of partitions dropped.
    mutating func dropExpired() throws(PostgresError) -> Int {
        try connection.query("SELECT beaconflow.prune_rejections()")
        try connection.query("SELECT beaconflow.prune_positions()")
        let rows = try connection.query(
            """
            SELECT beaconflow.drop_partitions_before((now() AT TIME ZONE 'UTC')::date
                       - (SELECT value::integer FROM beaconflow.settings WHERE key = 'retention_days'))
            """)
        partitionedDays.removeAll()  // a dropped day is made again if a late batch needs it
        return try rows.first?.decode(0, as: Int.self) ?? 0
    }

    /// Creates the partitions from today (UTC) through `partitions_ahead_days` ahead. Returns the number made.
    mutating func makeAhead() throws(PostgresError) -> Int {
        let rows = try connection.query(
            """
            SELECT beaconflow.ensure_partitions((now() AT TIME ZONE 'UTC')::date,
                       (SELECT value::integer FROM beaconflow.settings WHERE key = 'partitions_ahead_days') + 1)
            """)
        refusedDays.removeAll()
        return try rows.first?.decode(0, as: Int.self) ?? 0
    }
}
