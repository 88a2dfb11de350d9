import BeaconWire
import LibPQ

/// What the ingest keeps per beacon as its latest: fleet health and how it was heard (`beacon_state`), and its
/// Device Information strings (`device_info_state`).
struct BeaconStateStore {
    let connection: PostgresConnection

    /// The latest value of each beacon's Device Information strings.
    func upsertDeviceInfo(_ rows: [DeviceInfoRow]) throws(PostgresError) {
        guard !rows.isEmpty else { return }
        // One row per (beacon, name) in a statement: the latest.
        var latest: [String: DeviceInfoRow] = [:]
        for row in rows {
            let key = row.beaconID + "\u{0}" + row.name
            if let known = latest[key], known.timeMicros > row.timeMicros { continue }
            latest[key] = row
        }
        let unique = latest.keys.sorted().compactMap { latest[$0] }
        try connection.query(
            """
            INSERT INTO beaconflow.device_info_state AS d (beacon_id, name, value, site_id, agent_id, read_at)
            SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
            ON CONFLICT (beacon_id, name) DO UPDATE SET
                value = excluded.value, site_id = excluded.site_id, agent_id = excluded.agent_id, read_at = excluded.read_at
            WHERE excluded.read_at >= d.read_at
            """,
            [
                unique.map(\.beaconID), unique.map(\.name), unique.map(\.value), unique.map(\.siteID),
                unique.map(\.agentID), unique.map { PostgresTimestamp(unixMicros: $0.timeMicros) },
            ])
    }

    /// Rows per statement when many rows go at once (a burst of new beacons): bounds the arrays built for
    /// `unnest`, which would otherwise hold every row several times over.
    static let rowsPerStatement = 5_000

    /// Each beacon's fleet health and how it was last heard, into `beacon_state`.
    func upsertHealth(_ all: [BeaconHealth]) throws(PostgresError) {
        var start = 0
        while start < all.count {
            let end = min(start + Self.rowsPerStatement, all.count)
            try upsertHealthRows(all[start..<end])
            start = end
        }
    }

    private func upsertHealthRows(_ rows: ArraySlice<BeaconHealth>) throws(PostgresError) {
        try connection.query(
            """
            INSERT INTO beaconflow.beacon_state AS s (beacon_id, site_id, last_seen, battery_mv, battery_trend_mv_per_day,
                est_days_left, temperature_c, reboots_7d, status, battery_pct, battery_trend_pct_per_day, kind, first_seen,
                address, address_random, advertising_event, url, cloned_since, days_left_low, days_left_high, replace_by,
                charge_left_pct, cell_since, forecast, coldest_carried_c)
            SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::integer[], $5::real[], $6::real[],
                $7::real[], $8::integer[], $9::text[], $10::real[], $11::real[], $12::text[], $13::timestamptz[],
                $14::macaddr[], $15::boolean[], $16::smallint[], $17::text[], $18::timestamptz[], $19::real[], $20::real[],
                $21::timestamptz[], $22::real[], $23::timestamptz[], $24::text[], $25::real[])
            ON CONFLICT (beacon_id) DO UPDATE SET
                site_id = excluded.site_id,
                last_seen = greatest(s.last_seen, excluded.last_seen),
                battery_mv = coalesce(excluded.battery_mv, s.battery_mv),
                battery_trend_mv_per_day = coalesce(excluded.battery_trend_mv_per_day, s.battery_trend_mv_per_day),
                est_days_left = coalesce(excluded.est_days_left, s.est_days_left),
                temperature_c = coalesce(excluded.temperature_c, s.temperature_c),
                reboots_7d = excluded.reboots_7d,
                status = excluded.status,
                battery_pct = coalesce(excluded.battery_pct, s.battery_pct),
                battery_trend_pct_per_day = coalesce(excluded.battery_trend_pct_per_day, s.battery_trend_pct_per_day),
                kind = coalesce(excluded.kind, s.kind),
                first_seen = least(s.first_seen, excluded.first_seen),
                -- How it was heard: from the newest sighting (another instance may have written a newer one).
                address = CASE WHEN \(Self.newerHearing) THEN excluded.address ELSE s.address END,
                address_random = CASE WHEN \(Self.newerHearing) THEN excluded.address_random ELSE s.address_random END,
                advertising_event = CASE WHEN \(Self.newerHearing) THEN excluded.advertising_event ELSE s.advertising_event END,
                url = coalesce(excluded.url, s.url),
                cloned_since = excluded.cloned_since,
                -- The forecast's columns together, from the row that has one.
                days_left_low = CASE WHEN excluded.forecast IS NULL THEN s.days_left_low ELSE excluded.days_left_low END,
                days_left_high = CASE WHEN excluded.forecast IS NULL THEN s.days_left_high ELSE excluded.days_left_high END,
                replace_by = CASE WHEN excluded.forecast IS NULL THEN s.replace_by ELSE excluded.replace_by END,
                charge_left_pct = CASE WHEN excluded.forecast IS NULL THEN s.charge_left_pct ELSE excluded.charge_left_pct END,
                cell_since = CASE WHEN excluded.forecast IS NULL THEN s.cell_since ELSE excluded.cell_since END,
                coldest_carried_c = CASE WHEN excluded.forecast IS NULL THEN s.coldest_carried_c ELSE excluded.coldest_carried_c END,
                forecast = coalesce(excluded.forecast, s.forecast)
            """,
            [
                rows.map(\.beaconID), rows.map(\.siteID), rows.map { PostgresTimestamp(unixMicros: $0.lastSeenMicros) },
                rows.map(\.batteryMillivolts), rows.map(\.batteryTrendMillivoltsPerDay), rows.map(\.estimatedDaysLeft),
                rows.map(\.temperatureCelsius), rows.map(\.rebootsIn7Days), rows.map(\.status.rawValue),
                rows.map(\.batteryPercent), rows.map(\.batteryTrendPercentPerDay), rows.map(\.kind),
                rows.map { PostgresTimestamp(unixMicros: $0.firstSeenMicros) },
                rows.map { $0.heardAs?.address.map { DeviceAddress(value: $0, kind: .public).description } },
                rows.map { $0.heardAs?.addressIsRandom }, rows.map { $0.heardAs?.advertisingEvent.map { Int16($0) } },
                rows.map(\.url), rows.map { $0.clonedSinceMicros.map(PostgresTimestamp.init(unixMicros:)) },
                rows.map { $0.forecast?.daysLeftLow }, rows.map { $0.forecast?.daysLeftHigh },
                rows.map { $0.forecast.map { PostgresTimestamp(unixMicros: $0.replaceByMicros) } },
                rows.map { $0.forecast?.chargeLeft.map { $0 * 100 } },
                rows.map { $0.forecast?.cellSinceMicros.map(PostgresTimestamp.init(unixMicros:)) }, rows.map { $0.forecast?.method.rawValue },
                rows.map { $0.forecast?.coldestCarriedCelsius.map { ($0 * 10).rounded() / 10 } },
            ])
    }

    /// The battery states due to be saved (`FleetHealth.takeToSave`), into `fleet_health_state`: for beacons with a
    /// `beacon_state` row (written before, in the same transaction); an older state never replaces a newer one
    /// (another instance may have saved a newer one while it held the site).
    func saveBatteryStates(_ all: [SavedBatteryState]) throws(PostgresError) {
        var start = 0
        while start < all.count {
            let rows = all[start..<min(start + Self.rowsPerStatement, all.count)]
            try connection.query(
                """
                INSERT INTO beaconflow.fleet_health_state AS f (beacon_id, site_id, last_seen, state)
                SELECT u.* FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bytea[]) AS u(beacon_id, site_id, last_seen, state)
                WHERE EXISTS (SELECT 1 FROM beaconflow.beacon_state s WHERE s.beacon_id = u.beacon_id)
                ON CONFLICT (beacon_id) DO UPDATE SET site_id = excluded.site_id, last_seen = excluded.last_seen, state = excluded.state
                WHERE excluded.last_seen >= f.last_seen
                """,
                [
                    rows.map(\.beaconID), rows.map(\.siteID), rows.map { PostgresTimestamp(unixMicros: $0.lastSeenMicros) },
                    rows.map { PostgresBytes($0.bytes) },
                ])
            start += rows.count
        }
    }

    /// The battery states saved for the beacons last heard at `sites`.
    func batteryStates(sites: Set<String>) throws(PostgresError) -> [SavedBatteryState] {
        var states: [SavedBatteryState] = []
        for row in try connection.query(
            """
            SELECT beacon_id, site_id, (extract(epoch FROM last_seen) * 1000000)::bigint, state
            FROM beaconflow.fleet_health_state WHERE site_id = ANY($1::text[])
            """,
            [sites.sorted()])
        {
            states.append(
                SavedBatteryState(
                    beaconID: try row.decode(0), siteID: try row.decode(1), lastSeenMicros: try row.decode(2, as: Int64.self),
                    bytes: try row.decode(3, as: PostgresBytes.self).bytes))
        }
        return states
    }

    /// The row being upserted was heard, and later than the stored one (or the stored one never was).
    private static let newerHearing =
        "excluded.address_random IS NOT NULL AND (s.address_random IS NULL OR excluded.last_seen >= s.last_seen)"
}
