import Foundation
import LibPQ

/// The zone tables: each beacon's live zone, visits, minute and hourly occupancy, each agent's state in its site's
/// zone tracking, and each site's checkpoint; and what a restart reads back of them.
struct ZoneStore {
    let connection: PostgresConnection

    /// Live zones, visits opened, then visits closed (a close may end a visit opened in the same list), then minute
    /// counts.
    func write(_ changes: [ZoneChange]) throws(PostgresError) {
        guard !changes.isEmpty else { return }
        try writeLiveZones(changes)
        try writePositions(changes)
        var opened: [(site: String, zone: String, beacon: String, enter: Int64)] = []
        var closed: [(site: String, beacon: String, enter: Int64, exit: Int64)] = []
        var occupancy: [(site: String, zone: String, minute: Int64, occupants: Int, seconds: Double)] = []
        var agentStates: [(site: String, agent: String, state: AgentZoneState, since: Int64)] = []
        for change in changes {
            switch change {
            case .visitOpened(let site, let zone, let beacon, let enter): opened.append((site, zone, beacon, enter))
            case .visitClosed(let site, let beacon, let enter, let exit): closed.append((site, beacon, enter, exit))
            case .occupancy(let site, let zone, let minute, let occupants, let seconds):
                occupancy.append((site, zone, minute, occupants, seconds))
            case .agentState(let site, let agent, let state, let since): agentStates.append((site, agent, state, since))
            case .placement, .position, .positionMinute, .merged: continue
            }
        }
        if !agentStates.isEmpty {
            // The last state of each agent (one row may change once per statement); a state reported again (after
            // a restart) keeps the time it began.
            var last: [String: Int] = [:]
            for (index, change) in agentStates.enumerated() { last[change.site + "/" + change.agent] = index }
            agentStates = last.values.sorted().map { agentStates[$0] }
            try connection.query(
                """
                INSERT INTO beaconflow.agent_zone_state AS z (site_id, agent_id, zone_state, since)
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[])
                ON CONFLICT (site_id, agent_id) DO UPDATE SET zone_state = excluded.zone_state,
                    since = CASE WHEN z.zone_state = excluded.zone_state THEN z.since ELSE excluded.since END
                """,
                [
                    agentStates.map(\.site), agentStates.map(\.agent), agentStates.map(\.state.rawValue),
                    agentStates.map { PostgresTimestamp(unixMicros: $0.since) },
                ])
        }
        if !opened.isEmpty {
            try connection.query(
                """
                INSERT INTO beaconflow.visits_raw (site_id, zone_id, beacon_id, enter_ts)
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[])
                ON CONFLICT DO NOTHING
                """,
                [
                    opened.map(\.site), opened.map(\.zone), opened.map(\.beacon),
                    opened.map { PostgresTimestamp(unixMicros: $0.enter) },
                ])
        }
        if !closed.isEmpty {
            try connection.query(
                """
                UPDATE beaconflow.visits_raw v SET exit_ts = c.exit_ts
                FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::timestamptz[]) AS c(site_id, beacon_id, enter_ts, exit_ts)
                WHERE v.site_id = c.site_id AND v.beacon_id = c.beacon_id AND v.enter_ts = c.enter_ts
                """,
                [
                    closed.map(\.site), closed.map(\.beacon), closed.map { PostgresTimestamp(unixMicros: $0.enter) },
                    closed.map { PostgresTimestamp(unixMicros: $0.exit) },
                ])
        }
        var hours: [(site: String, zone: String, time: Int64)] = opened.map { ($0.site, $0.zone, $0.enter) }
        hours += occupancy.map { ($0.site, $0.zone, $0.minute) }
        if !occupancy.isEmpty {
            try connection.query(
                """
                INSERT INTO beaconflow.zone_occupancy_minute (site_id, zone_id, bucket, occupants, occupant_seconds)
                SELECT * FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::integer[], $5::double precision[])
                ON CONFLICT (site_id, zone_id, bucket)
                DO UPDATE SET occupants = excluded.occupants, occupant_seconds = excluded.occupant_seconds
                """,
                [
                    occupancy.map(\.site), occupancy.map(\.zone), occupancy.map { PostgresTimestamp(unixMicros: $0.minute) },
                    occupancy.map { Int32(clamping: $0.occupants) }, occupancy.map(\.seconds),
                ])
        }
        // The stored hourly rollup of every hour whose minutes or visits changed.
        if !hours.isEmpty {
            try connection.query(
                "SELECT beaconflow.refresh_zone_hours($1, $2, $3)",
                [hours.map(\.site), hours.map(\.zone), hours.map { PostgresTimestamp(unixMicros: $0.time) }])
        }
    }

    /// Each beacon's latest position as the list leaves it, and the positions of the minutes passed
    /// (`beacon_live_position`, `beacon_position_minutes`; v027.sql says how they are packed).
    private func writePositions(_ changes: [ZoneChange]) throws(PostgresError) {
        var latest: [String: (site: String, beacon: String, position: BeaconPosition)] = [:]
        var order: [String] = []
        var minutes: [(site: String, beacon: String, minute: Int64, packed: String)] = []
        for change in changes {
            switch change {
            case .position(let site, let beacon, let position):
                let key = site + "/" + beacon
                if latest[key] == nil { order.append(key) }
                latest[key] = (site, beacon, position)
            case .positionMinute(let site, let beacon, let minute, let positions):
                minutes.append((site, beacon, minute, Self.packed(positions, minute: minute)))
            default: continue
            }
        }
        if !order.isEmpty {
            let rows = order.compactMap { latest[$0] }
            try connection.query(
                """
                INSERT INTO beaconflow.beacon_live_position (site_id, beacon_id, ts, x, y, error_m, zone_probabilities)
                SELECT site_id, beacon_id, ts, x, y, error_m, zone_probabilities::jsonb
                FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::real[], $5::real[], $6::real[], $7::text[])
                    AS p(site_id, beacon_id, ts, x, y, error_m, zone_probabilities)
                ON CONFLICT (site_id, beacon_id) DO UPDATE
                SET ts = excluded.ts, x = excluded.x, y = excluded.y, error_m = excluded.error_m,
                    zone_probabilities = excluded.zone_probabilities
                WHERE excluded.ts >= beacon_live_position.ts
                """,
                [
                    rows.map(\.site), rows.map(\.beacon), rows.map { PostgresTimestamp(unixMicros: $0.position.timeMicros) },
                    rows.map { Float($0.position.x) }, rows.map { Float($0.position.y) }, rows.map { Float($0.position.errorM) },
                    rows.map { Self.json($0.position.zoneShares) },
                ])
        }
        if !minutes.isEmpty {
            // A minute written again (its readings replayed after a restart) keeps the fuller of the two.
            try connection.query(
                """
                INSERT INTO beaconflow.beacon_position_minutes (site_id, beacon_id, minute, positions)
                SELECT site_id, beacon_id, minute, positions::smallint[]
                FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[]) AS m(site_id, beacon_id, minute, positions)
                ON CONFLICT (site_id, beacon_id, minute) DO UPDATE SET positions = excluded.positions
                WHERE array_length(excluded.positions, 1) >= array_length(beacon_position_minutes.positions, 1)
                """,
                [
                    minutes.map(\.site), minutes.map(\.beacon), minutes.map { PostgresTimestamp(unixMicros: $0.minute) },
                    minutes.map(\.packed),
                ])
        }
    }

    /// A minute's positions as a `smallint[]` literal: per position, tenths of a second into the minute, then x, y
    /// and the error in decimetres (clamped to what a smallint holds: ±3.2 km).
    static func packed(_ positions: [BeaconPosition], minute: Int64) -> String {
        func decimetres(_ metres: Double) -> Int16 { Int16(clamping: Int((metres * 10).rounded())) }
        let values = positions.flatMap { position in
            [Int16(clamping: (position.timeMicros - minute) / 100_000), decimetres(position.x), decimetres(position.y), decimetres(position.errorM)]
        }
        return "{" + values.map(String.init).joined(separator: ",") + "}"
    }

    /// Zone shares as a JSON object, keys sorted.
    static func json(_ shares: [String: Double]) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (try? encoder.encode(shares)).flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
    }

    /// Each beacon's live zone as the list leaves it: where it was placed last (and when it left, if it left after),
    /// or, for a beacon only leaving, when it left the zone it was in.
    private func writeLiveZones(_ changes: [ZoneChange]) throws(PostgresError) {
        var final: [String: (site: String, beacon: String, zone: String?, enter: Int64, exit: Int64?)] = [:]
        var order: [String] = []
        for case .placement(let site, let beacon, let zone, let since) in changes {
            let key = site + "/" + beacon
            if final[key] == nil { order.append(key) }
            if let zone {
                final[key] = (site, beacon, zone, since, nil)
            } else {
                final[key] = (site, beacon, final[key]?.zone, final[key]?.enter ?? since, since)
            }
        }
        guard !order.isEmpty else { return }
        let rows = order.compactMap { final[$0] }
        let placed = rows.compactMap { row in row.zone.map { (row.site, row.beacon, zone: $0, row.enter, row.exit) } }
        let left = rows.filter { $0.zone == nil }
        if !placed.isEmpty {
            try connection.query(
                """
                INSERT INTO beaconflow.beacon_live_zone (site_id, beacon_id, zone_id, enter_ts, exit_ts)
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[])
                ON CONFLICT (site_id, beacon_id) DO UPDATE
                SET zone_id = excluded.zone_id, enter_ts = excluded.enter_ts, exit_ts = excluded.exit_ts
                """,
                [
                    placed.map(\.0), placed.map(\.1), placed.map(\.zone), placed.map { PostgresTimestamp(unixMicros: $0.3) },
                    placed.map { $0.4.map(PostgresTimestamp.init(unixMicros:)) },
                ])
        }
        if !left.isEmpty {
            try connection.query(
                """
                UPDATE beaconflow.beacon_live_zone z SET exit_ts = l.exit_ts
                FROM unnest($1::text[], $2::text[], $3::timestamptz[]) AS l(site_id, beacon_id, exit_ts)
                WHERE z.site_id = l.site_id AND z.beacon_id = l.beacon_id
                """,
                [left.map(\.site), left.map(\.beacon), left.map { PostgresTimestamp(unixMicros: $0.exit ?? $0.enter) }])
        }
    }

    /// Saves the sites' checkpoints, in the current transaction.
    func save(_ checkpoints: [IngestPipeline.ZoneCheckpoint]) throws(PostgresError) {
        for checkpoint in checkpoints {
            try connection.query(
                """
                INSERT INTO beaconflow.zone_checkpoints (site_id, watermark, state) VALUES ($1, $2, $3)
                ON CONFLICT (site_id) DO UPDATE SET watermark = excluded.watermark, state = excluded.state, saved_at = now()
                """,
                [checkpoint.site, PostgresTimestamp(unixMicros: checkpoint.watermarkMicros), PostgresBytes(checkpoint.state)])
        }
    }

    /// The sites' checkpoints: a watermark out of range or a state missing is nil (damage).
    func checkpoints(sites: Set<String>) throws(PostgresError) -> [(site: String, watermarkMicros: Int64?, state: [UInt8]?)] {
        var found: [(site: String, watermarkMicros: Int64?, state: [UInt8]?)] = []
        for row in try connection.query(
            """
            SELECT site_id, CASE WHEN watermark BETWEEN '2000-01-01Z' AND '2200-01-01Z'
                                 THEN (extract(epoch FROM watermark) * 1000000)::bigint END, state
            FROM beaconflow.zone_checkpoints WHERE site_id = ANY($1::text[])
            """,
            [sites.sorted()])
        {
            let site = try row.decode(0, as: String.self)
            guard sites.contains(site) else { continue }
            found.append((site, try? row.decode(1, as: Int64.self), (try? row.decode(2, as: PostgresBytes.self))?.bytes))
        }
        return found
    }

    /// The start of each site's last counted minute, for the sites that have counted one.
    func lastCountedMinutes(sites: Set<String>) throws(PostgresError) -> [String: Int64] {
        var lastMinutes: [String: Int64] = [:]
        for row in try connection.query(
            """
            SELECT site_id, (extract(epoch FROM date_trunc('minute', max(bucket))) * 1000000)::bigint
            FROM beaconflow.zone_occupancy_minute
            WHERE site_id = ANY($1::text[]) AND bucket BETWEEN '2000-01-01Z' AND '2200-01-01Z' GROUP BY 1
            """, [sites.sorted()])
        {
            lastMinutes[try row.decode(0)] = try row.decode(1, as: Int64.self)
        }
        return lastMinutes
    }

    /// The sites' open visits, with when each beacon was last heard.
    func openVisits(sites: Set<String>) throws(PostgresError) -> [String: [SiteZoneTracker.OpenVisit]] {
        var openVisits: [String: [SiteZoneTracker.OpenVisit]] = [:]
        for row in try connection.query(
            """
            SELECT v.site_id, v.zone_id, v.beacon_id, (extract(epoch FROM v.enter_ts) * 1000000)::bigint,
                   (extract(epoch FROM CASE WHEN s.last_seen BETWEEN v.enter_ts AND '2200-01-01Z' THEN s.last_seen
                                            ELSE v.enter_ts END) * 1000000)::bigint
            FROM beaconflow.visits_raw v LEFT JOIN beaconflow.beacon_state s USING (beacon_id)
            -- Read like wire input: rows with times no sighting can have (edited, damaged) are left out.
            WHERE v.exit_ts IS NULL AND v.site_id = ANY($1::text[]) AND v.enter_ts BETWEEN '2000-01-01Z' AND '2200-01-01Z'
            """, [sites.sorted()])
        {
            openVisits[try row.decode(0), default: []].append(
                SiteZoneTracker.OpenVisit(
                    beaconID: try row.decode(2), zone: try row.decode(1), enterMicros: try row.decode(3),
                    lastSeenMicros: try row.decode(4)))
        }
        return openVisits
    }

    /// The event times of a site's stored sightings after `watermark` (nil: all), as bounds for reading them
    /// back: packs start at most a minute before their sightings, so the newest bound is a minute later.
    func sightingTimes(site: String, after watermark: Int64?) throws(PostgresError) -> (oldest: Int64, newest: Int64)? {
        let bounds = try connection.query(
            """
            SELECT (extract(epoch FROM min(ts)) * 1000000)::bigint, (extract(epoch FROM max(ts)) * 1000000)::bigint + 60000000
            FROM (SELECT ts FROM beaconflow.sightings_raw WHERE site_id = $1 AND ts > $2
                  UNION ALL
                  SELECT p.ts FROM beaconflow.sighting_packs p
                  JOIN beaconflow.sighting_sources s ON s.source_key = p.source_key
                  WHERE s.site_id = $1 AND p.ts > $2 - interval '1 minute') t
            """, [site, watermark.map(PostgresTimestamp.init(unixMicros:)) ?? .distantPast])
        guard let bound = bounds.first, let oldest = try bound.decode(0, as: Int64?.self),
            let newest = try bound.decode(1, as: Int64?.self)
        else { return nil }
        return (oldest, newest)
    }

    /// A site's stored sightings after `from` through `through` in order of time, by agent, at most `pageSize`
    /// at a time: `body` gets each page as it is read, so that a stretch of any size (millions of sightings that
    /// share one timestamp) holds one page in memory. The page is read from a cursor held across transactions
    /// (`WITH HOLD`), which the server keeps on disk; identical beacon ids within a page share one string. `body`
    /// is told whether more pages follow.
    func forEachSightingPage(
        site: String, after from: Int64, through: Int64, pageSize: Int,
        _ body: (_ readings: [String: [SiteZoneTracker.BeaconReading]], _ more: Bool) throws(PostgresError) -> Void
    ) throws(PostgresError) {
        try connection.query(
            """
            DECLARE zone_replay NO SCROLL CURSOR WITH HOLD FOR
            SELECT agent_id, beacon_id, (extract(epoch FROM ts) * 1000000)::bigint, rssi
            FROM beaconflow.sightings_between($2, $3) WHERE site_id = $1 AND ts > $2 ORDER BY ts
            """, [site, PostgresTimestamp(unixMicros: from), PostgresTimestamp(unixMicros: through + 1)])
        defer { try? connection.execute("CLOSE zone_replay") }
        while true {
            let rows = try connection.query("FETCH \(pageSize) FROM zone_replay")
            var readings: [String: [SiteZoneTracker.BeaconReading]] = [:]
            var beaconIDs: Set<String> = []
            for row in rows {
                let agent = try row.decode(0, as: String.self)
                let beaconID = beaconIDs.insert(try row.decode(1, as: String.self)).memberAfterInsert
                readings[agent, default: []].append(
                    .init(beaconID: beaconID, timeMicros: try row.decode(2), rssi: try row.decode(3, as: Double.self)))
            }
            let more = rows.count == pageSize
            if !readings.isEmpty { try body(readings, more) }
            if !more { return }
        }
    }
}
