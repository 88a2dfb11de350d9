import Foundation
import LibPQ
import Logging
import Synchronization
import WorkQueue

/// What the console shows, read from the public views as one JSON document, again every `refresh`, on a thread of
/// its own (libpq blocks). Pages and event streams take the latest.
public final class ConsoleSnapshots: Sendable {
    public struct Snapshot: Sendable {
        /// Counts up with every new document (the event streams send each once).
        public var version: Int
        /// On one line, as an event's data must be.
        public var json: String
    }

    private let conninfo: String
    private let refresh: Duration
    private let logger: Logger
    private let latest = Mutex(Snapshot(version: 0, json: #"{"error": "not read yet"}"#))
    private let stopped = StopSignal()

    public init(conninfo: String, refresh: Duration, logger: Logger) {
        self.conninfo = conninfo
        self.refresh = refresh
        self.logger = logger
    }

    public var current: Snapshot { latest.withLock { $0 } }

    /// Reads on a thread of its own until the calling task is cancelled: reconnecting after a failure, which the
    /// document then reports (without the server's address or any credential).
    public func run() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                Thread.detachNewThread { [self] in
                    readUntilStopped()
                    continuation.resume()
                }
            }
        } onCancel: {
            stopped.stop()
        }
    }

    private func readUntilStopped() {
        var connection: PostgresConnection?
        var failing = false
        while !stopped.isStopped {
            do throws(PostgresError) {
                let open: PostgresConnection
                if let connection { open = connection } else { open = try Self.open(conninfo) }
                connection = open
                let json = try Self.document(on: open)
                latest.withLock { $0 = Snapshot(version: $0.version + 1, json: json) }
                if failing { logger.info("Console reads the database again") }
                failing = false
            } catch {
                connection = nil
                let state = error.sqlState.map { " (SQLSTATE \($0))" } ?? ""
                latest.withLock { $0 = Snapshot(version: $0.version + 1, json: #"{"error": "database unavailable\#(state)"}"#) }
                if !failing { logger.warning("Console cannot read the database", metadata: ["error": "\(error)"]) }
                failing = true
            }
            let deadline = ContinuousClock.now + refresh
            stopped.wait(until: deadline)
        }
    }

    /// A session for reading the document: without just-in-time compilation, which PostgreSQL turns on for a
    /// query of this cost on a large deployment and which took longer than the query itself (BENCHMARKS.md,
    /// "The console's document on 50 sites").
    public static func open(_ conninfo: String) throws(PostgresError) -> PostgresConnection {
        let connection = try PostgresConnection(conninfo)
        try connection.execute("SET jit = off")
        return connection
    }

    /// The document as the console serves it: on one line, read once rather than per event sent (JSON strings
    /// escape their own breaks).
    public static func document(on connection: PostgresConnection) throws(PostgresError) -> String {
        (try connection.query(query).first?[0] ?? "{}").replacingOccurrences(of: "\n", with: " ")
    }

    /// Beacons listed at most (present ones first, then the registry's, then the rest by id); `beacon_count` has
    /// them all.
    public static let beaconLimit = 500

    /// One document from the public views (on one line, as jsonb prints it: an event's data is a line): zones (with live occupants: beacons present by `beacon_locations`),
    /// beacons with their battery and when to replace it, the positions of those present (`beacon_positions`), agents, which instance
    /// serves each site, and the sightings of the last minute.
    static let query = """
        WITH loc AS MATERIALIZED (SELECT * FROM beaconflow.beacon_locations)
        SELECT json_build_object(
            'generated_at', now(),
            'zones', coalesce((
                SELECT json_agg(json_build_object(
                    'site_id', z.site_id, 'zone_id', z.zone_id, 'capacity', z.capacity,
                    'rect', CASE WHEN z.x0 IS NULL THEN NULL ELSE json_build_array(z.x0, z.y0, z.x1, z.y1) END,
                    'occupants', coalesce(o.occupants, 0)))
                FROM beaconflow.zones z LEFT JOIN (
                    SELECT site_id, zone_id, count(*) AS occupants FROM loc WHERE present GROUP BY site_id, zone_id
                ) o ON o.site_id = z.site_id AND o.zone_id = z.zone_id), '[]'),
            'beacon_count', (SELECT count(*) FROM loc),
            'beacons', coalesce((
                SELECT json_agg(b) FROM (
                    SELECT loc.beacon_id, loc.label, loc.site_id, loc.zone_id, loc.present, loc.since, loc.last_heard,
                           h.battery_mv, h.battery_pct, h.temperature_c, h.status, r.replace_by, h.est_days_left,
                           h.days_left_low, h.days_left_high, h.coldest_carried_c, r.cold_night, r.cold_night_low_c
                    FROM loc LEFT JOIN beaconflow.beacon_health h USING (beacon_id)
                    LEFT JOIN beaconflow.battery_replacements r ON r.beacon_id = loc.beacon_id
                    ORDER BY loc.present DESC, loc.label IS NULL, loc.label, loc.beacon_id
                    LIMIT \(beaconLimit)) b), '[]'),
            'positions', coalesce((
                SELECT json_agg(p) FROM (
                    SELECT p.site_id, p.beacon_id, loc.label, round(p.x::numeric, 2) AS x, round(p.y::numeric, 2) AS y,
                           round(p.error_m::numeric, 2) AS error_m
                    FROM beaconflow.beacon_positions p JOIN loc ON loc.beacon_id = p.beacon_id AND loc.site_id = p.site_id
                    WHERE loc.present ORDER BY p.site_id, p.beacon_id
                    LIMIT \(beaconLimit)) p), '[]'),
            'agents', coalesce((
                SELECT json_agg(a) FROM (
                    SELECT site_id, agent_id, online, last_batch_at,
                           round(extract(epoch FROM now() - last_batch_at)::numeric, 1) AS silent_s,
                           clock_offset_ms, zone_state, last_error
                    FROM beaconflow.agent_health ORDER BY site_id, agent_id) a), '[]'),
            'owners', coalesce((SELECT json_agg(o) FROM (SELECT * FROM beaconflow.site_owners ORDER BY site_id) o), '[]'),
            'ingests', coalesce((SELECT json_agg(i) FROM (SELECT * FROM beaconflow.ingest_status ORDER BY instance) i), '[]'),
            'sightings_last_minute', (
                SELECT coalesce(sum(sightings), 0) FROM beaconflow.sightings_minute
                WHERE minute >= date_trunc('minute', now()) - interval '1 minute' AND minute < date_trunc('minute', now()))
        )::jsonb::text
        """
}
