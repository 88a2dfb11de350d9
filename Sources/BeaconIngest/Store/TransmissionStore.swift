import LibPQ

/// Rows of transmissions that several agents hear (telemetry, sensor readings), stored once whatever offers them:
/// a group's rows go into a temporary table, the beacons concerned are locked (per beacon, in beacon order, so
/// that instances committing the same transmission at once agree), and only rows of transmissions the database
/// does not hold yet are inserted. One kind per table.
struct TransmissionStore {
    let connection: PostgresConnection

    struct Kind<Offer, Key: Hashable>: Sendable {
        /// Advisory lock class of the per-beacon locks.
        var lockClass: Int
        /// Creates the temporary table the offers are copied into (emptied at each commit).
        var incomingTable: String
        /// Copies the offers into the temporary table, and adds what `insert` reads besides them (in statements of
        /// their own, so that the insert's snapshot sees what they waited for).
        var copy: @Sendable (PostgresConnection, [Offer]) throws(PostgresError) -> Void
        /// The beacons to lock: `SELECT DISTINCT beacon_id ... ORDER BY 1` over the temporary table.
        var lockedBeacons: String
        /// Inserts the new transmissions' rows and returns their keys.
        var insert: String
        var key: @Sendable (Offer) -> Key
        var storedKey: @Sendable (PostgresRow) throws(PostgresError) -> Key
        /// Only the first offer of each stored transmission is returned (else every offer with its key: the
        /// several rows of one transmission).
        var firstOfferOnly: Bool
    }

    /// Stores the offers of transmissions the database does not hold yet and returns them.
    func storeNew<Offer, Key>(_ offers: [Offer], _ kind: Kind<Offer, Key>) throws(PostgresError) -> [Offer] {
        guard !offers.isEmpty else { return [] }
        try connection.execute(kind.incomingTable)
        try kind.copy(connection, offers)
        // Locks in a statement of their own: the insert's snapshot then sees what the lock waited for.
        try connection.query("SELECT count(pg_advisory_xact_lock(\(kind.lockClass), hashtext(beacon_id))) FROM (\(kind.lockedBeacons)) s")
        var stored = Set<Key>()
        for row in try connection.query(kind.insert) { stored.insert(try kind.storedKey(row)) }
        return kind.firstOfferOnly
            ? offers.filter { stored.remove(kind.key($0)) != nil } : offers.filter { stored.contains(kind.key($0)) }
    }
}

extension TransmissionStore {
    /// Receptions of one transmission lie within this of each other (agents' capture times, clock offsets under the
    /// applied threshold).
    static let transmissionSpread = "interval '5 minutes'"

    /// TLM transmissions: a transmission is its beacon, its counters (advertising count, uptime) and a time within
    /// `transmissionSpread` of its other receptions (migration 33): a beacon rebooted twice in a day sends the same
    /// counters again, hours apart. Its beacons locked, an offer is stored unless a row of the same beacon and
    /// counters lies within the spread, in the database or earlier among the offers. Rows are stored under the
    /// beacon's key (migration 21), added to the dictionary when missing. Lock class 'bflt'.
    static let telemetry = Kind<NewTelemetry, TransmissionKey>(
        lockClass: 1_650_879_604,
        incomingTable: """
            CREATE TEMP TABLE IF NOT EXISTS telemetry_incoming (
                ts timestamptz, beacon_id text, battery_mv integer, temperature_c real, adv_count bigint,
                uptime_s double precision, site_id text, agent_id text) ON COMMIT DELETE ROWS
            """,
        copy: { (connection, offers) throws(PostgresError) in
            try connection.copy(offers.map(\.row), into: TelemetryRow.copyTable)
            try connection.execute(
                """
                INSERT INTO beaconflow.beacon_keys (beacon_id) SELECT DISTINCT beacon_id FROM pg_temp.telemetry_incoming
                ON CONFLICT (beacon_id) DO NOTHING
                """)
        },
        lockedBeacons: "SELECT DISTINCT beacon_id FROM pg_temp.telemetry_incoming ORDER BY 1",
        insert: """
            WITH offered AS (
                SELECT n.ctid AS offer, n.*, b.beacon_key
                FROM pg_temp.telemetry_incoming n JOIN beaconflow.beacon_keys b ON b.beacon_id = n.beacon_id
            ), fresh AS (
                SELECT o.* FROM offered o
                WHERE NOT EXISTS (
                    SELECT FROM beaconflow.telemetry_raw t
                    WHERE t.beacon_key = o.beacon_key AND t.adv_count = o.adv_count AND t.uptime_s = o.uptime_s
                      AND t.ts BETWEEN o.ts - \(transmissionSpread) AND o.ts + \(transmissionSpread)
                    OFFSET 0)  -- each offer looked up by (beacon_key, ts), not the whole table hashed
                  AND NOT EXISTS (
                    SELECT FROM offered p
                    WHERE p.beacon_key = o.beacon_key AND p.adv_count = o.adv_count AND p.uptime_s = o.uptime_s
                      AND p.ts BETWEEN o.ts - \(transmissionSpread) AND o.ts AND (p.ts < o.ts OR p.offer < o.offer))
            ), stored AS (
                INSERT INTO beaconflow.telemetry_raw (ts, beacon_key, battery_mv, temperature_c, adv_count, uptime_s, site_id, agent_id)
                SELECT ts, beacon_key, battery_mv, temperature_c, adv_count, uptime_s, site_id, agent_id FROM fresh
                RETURNING beacon_key, adv_count, uptime_s, ts
            )
            SELECT b.beacon_id, s.adv_count, s.uptime_s, (extract(epoch FROM s.ts) * 1000000)::bigint
            FROM stored s JOIN beaconflow.beacon_keys b USING (beacon_key)
            """,
        key: { $0.transmission },
        storedKey: { (row) throws(PostgresError) in
            TransmissionKey(
                beaconID: try row.decode(0), advertisingCount: try row.decode(1), uptimeSeconds: try row.decode(2), timeMicros: try row.decode(3))
        },
        firstOfferOnly: true)
}

/// A sensor transmission: the beacon, its frame's hash, its time.
struct SensorTransmission: Hashable {
    var beacon: String
    var hash: Int64
    var time: Int64
}

extension TransmissionStore {
    /// Sensor readings: a transmission is stored unless a row of the same beacon and frame hash lies within its
    /// tolerance. Lock class 'bfsr'.
    static let sensorReadings = Kind<SensorReadingRow, SensorTransmission>(
        lockClass: 1_650_881_394,
        incomingTable: """
            CREATE TEMP TABLE IF NOT EXISTS sensor_incoming (LIKE beaconflow.sensor_readings_raw, tolerance_us bigint)
            ON COMMIT DELETE ROWS
            """,
        copy: { (connection, offers) throws(PostgresError) in try connection.copy(offers, into: SensorReadingRow.copyTable) },
        lockedBeacons: "SELECT DISTINCT beacon_id FROM pg_temp.sensor_incoming ORDER BY 1",
        insert: """
            WITH fresh AS (
                SELECT DISTINCT n.beacon_id, n.frame_hash, n.ts FROM pg_temp.sensor_incoming n
                WHERE NOT EXISTS (
                    SELECT FROM beaconflow.sensor_readings_raw r
                    WHERE r.beacon_id = n.beacon_id AND r.frame_hash = n.frame_hash
                      AND r.ts BETWEEN n.ts - n.tolerance_us * interval '1 microsecond'
                                   AND n.ts + n.tolerance_us * interval '1 microsecond')
            ), stored AS (
                INSERT INTO beaconflow.sensor_readings_raw (ts, site_id, agent_id, beacon_id, quantity, value, unit, frame_hash)
                SELECT n.ts, n.site_id, n.agent_id, n.beacon_id, n.quantity, n.value, n.unit, n.frame_hash
                FROM pg_temp.sensor_incoming n JOIN fresh USING (beacon_id, frame_hash, ts)
                RETURNING 1
            )
            SELECT beacon_id, frame_hash, (extract(epoch FROM ts) * 1000000)::bigint FROM fresh
            """,
        key: { SensorTransmission(beacon: $0.beaconID, hash: $0.frameHash, time: $0.timeMicros) },
        storedKey: { (row) throws(PostgresError) in
            SensorTransmission(beacon: try row.decode(0), hash: try row.decode(1), time: try row.decode(2))
        },
        firstOfferOnly: false)
}
