import LibPQ

/// What a site's agents heard in a window of time, from the public `sightings` (through `sightings_between`, so
/// only the stored rows of the window are read): every agent's reading of every advert, in time order, a slice of
/// the window at a time so that a long window never sits in memory whole. What `beaconflow recording` writes as a
/// recording of the site (docs/recordings.md).
public enum SiteRecording {
    public struct Reading: Sendable, Equatable {
        /// When it was heard, Unix microseconds (event time, as stored).
        public var micros: Int64
        public var agentID: String
        public var beaconID: String
        public var rssi: Int
    }

    /// How much of the window each query reads, µs: a minute, a few hundred thousand rows at most on a busy site.
    public static let sliceMicros: Int64 = 60_000_000

    /// Reads the readings of `site` with `fromMicros <= time < untilMicros` (of `beacons` only, unless empty),
    /// ordered by time, then agent and beacon, and hands them to `take` a slice at a time.
    public static func read(
        _ connection: PostgresConnection, site: String, fromMicros: Int64, untilMicros: Int64, beacons: [String] = [],
        take: ([Reading]) throws -> Void
    ) throws {
        var start = fromMicros
        while start < untilMicros {
            let end = untilMicros - start > sliceMicros ? start + sliceMicros : untilMicros
            let rows = try connection.query(
                """
                SELECT (extract(epoch FROM ts) * 1000000)::int8, agent_id, beacon_id, rssi
                FROM beaconflow.sightings_between(
                    timestamptz 'epoch' + $1 * interval '1 microsecond', timestamptz 'epoch' + $2 * interval '1 microsecond')
                WHERE site_id = $3 AND (cardinality($4::text[]) = 0 OR beacon_id = ANY($4))
                ORDER BY ts, agent_id, beacon_id
                """, [start, end, site, beacons])
            let readings = try rows.map { row throws(PostgresError) in
                Reading(
                    micros: try row.decode(0), agentID: try row.decode(1), beaconID: try row.decode(2),
                    rssi: Int(try row.decode(3, as: Int16.self)))
            }
            if !readings.isEmpty { try take(readings) }
            start = end
        }
    }
}
