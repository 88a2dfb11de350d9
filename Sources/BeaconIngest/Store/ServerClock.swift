import LibPQ

/// Reads the database server's clock (`clock_timestamp()`, not the transaction's start) between two readings of
/// this instance's, for `ClockComparison`.
struct ServerClock {
    let connection: PostgresConnection

    func read() throws(PostgresError) -> (localBeforeMicros: Int64, databaseMicros: Int64, localAfterMicros: Int64) {
        let before = wallClockMicros()
        let rows = try connection.query("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint")
        let after = wallClockMicros()
        guard let row = rows.first else { throw PostgresError("read the server's clock", "no row") }
        return (before, try row.decode(0, as: Int64.self), after)
    }
}
