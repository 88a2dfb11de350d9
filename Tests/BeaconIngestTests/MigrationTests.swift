import BeaconIngest
import Foundation
import LocalServers
import LibPQ
import Logging
import TestServers
import Testing

@Suite(.enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"), .timeLimit(.minutes(2)))
struct MigrationTests {
    let logger = Logger(label: "migration-test")

    /// The public views of docs/schema.md, column by column, in order.
    static let contract: [String: [String]] = [
        "sightings": ["ts", "site_id", "agent_id", "zone_id", "beacon_id", "rssi", "tx_power", "distance_m", "smoothed_distance_m"],
        "telemetry": ["ts", "beacon_id", "battery_mv", "temperature_c", "adv_count", "uptime_s"],
        "visits": ["site_id", "zone_id", "beacon_id", "enter_ts", "exit_ts", "dwell_s"],
        "zone_occupancy": ["site_id", "zone_id", "bucket", "occupants", "occupant_seconds"],
        "zone_occupancy_hourly": ["site_id", "zone_id", "bucket", "avg_occupants", "peak_occupants", "visits"],
        "beacon_health": ["beacon_id", "site_id", "last_seen", "battery_mv", "battery_trend_mv_per_day", "est_days_left",
                          "temperature_c", "reboots_7d", "status", "battery_pct", "battery_trend_pct_per_day"],
        "sensor_readings": ["ts", "site_id", "agent_id", "beacon_id", "quantity", "value", "unit"],
        "device_info": ["beacon_id", "site_id", "agent_id", "name", "value", "read_at"],
        "beacons": ["beacon_id", "site_id", "label", "kind", "first_seen", "last_seen", "identity_source"],
        "agent_health": ["site_id", "agent_id", "online", "last_batch_at", "adverts_per_s", "spool_bytes", "clock_offset_ms",
                         "last_error"],
    ]

    @Test func theViewsAreExactlyTheContract() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        #expect(try Migrator.migrate(connection, logger: logger) == Array(1...Migrator.latestVersion))
        for (view, columns) in Self.contract {
            let found = try connection.query(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'beaconflow' AND table_name = $1 ORDER BY ordinal_position",
                [view]).map { $0[0] ?? "" }
            #expect(found == columns, "view \(view)")
        }
        // Running it again does nothing; a second instance at the same time waits for the lock and finds it done.
        #expect(try Migrator.migrate(connection, logger: logger) == [])
        #expect(try Migrator.migrate(try PostgresConnection(server.conninfo), logger: logger) == [])
    }

    @Test func upgradingKeepsOneTelemetryRowPerTransmissionAndLosesNoOtherRow() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        #expect(try Migrator.migrate(connection, through: 3, logger: logger) == [1, 2, 3])
        #expect(try connection.query("SELECT beaconflow.ensure_partitions('2026-01-01', 1)") == [["2"]])
        // Schema 3 stored one transmission three times (three agents, the last two hours late) beside two others.
        try connection.execute(
            """
            INSERT INTO beaconflow.telemetry_raw (ts, beacon_id, battery_mv, adv_count, uptime_s, site_id, agent_id) VALUES
                ('2026-01-01T10:00:00.000100Z', 'b1', 3000, 7, 0.7, 'hq', 'a2'),
                ('2026-01-01T10:00:00.000050Z', 'b1', 3000, 7, 0.7, 'hq', 'a1'),
                ('2026-01-01T10:00:00.000200Z', 'b1', 3000, 7, 0.7, 'hq', 'a3'),
                ('2026-01-01T10:00:01Z', 'b1', 3000, 8, 0.8, 'hq', 'a1'),
                ('2026-01-01T10:00:00Z', 'b2', 2900, 7, 0.7, 'hq', 'a1');
            INSERT INTO beaconflow.sightings_raw (ts, site_id, agent_id, beacon_id, rssi) VALUES ('2026-01-01T10:00:00Z', 'hq', 'a1', 'b1', -60);
            """)
        #expect(try Migrator.migrate(connection, logger: logger) == Array(4...Migrator.latestVersion))
        #expect(try connection.query(
            "SELECT beacon_id, adv_count, agent_id FROM beaconflow.telemetry_raw ORDER BY 1, 2") == [["b1", "7", "a1"], ["b1", "8", "a1"], ["b2", "7", "a1"]])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings") == [["1"]])
        // Sensor readings have a partition for the day that had data, so late readings of it have a place.
        #expect(try connection.query("SELECT to_regclass('beaconflow.sensor_readings_raw_20260101') IS NOT NULL") == [["t"]])
        // The database now refuses a fourth reception, in this partition and in one made after the upgrade.
        #expect(try connection.query("SELECT beaconflow.ensure_partitions('2026-01-02', 1)") == [["3"]])
        for day in ["2026-01-01", "2026-01-02"] {
            let insert = "INSERT INTO beaconflow.telemetry_raw (ts, beacon_id, adv_count, uptime_s) VALUES ('\(day)T10:00:00Z', 'b9', 7, 0.7)"
            try connection.execute(insert)
            do {
                try connection.execute(insert)
                Issue.record("a repeated transmission was stored twice on \(day)")
            } catch {
                #expect(error.sqlState == "23505")
            }
        }
    }

    @Test func partitionsAreMadeAheadAndDroppedPastRetention() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        try Migrator.migrate(connection, logger: logger)
        #expect(try connection.query("SELECT beaconflow.ensure_partitions('2026-01-01', 3)") == [["9"]])
        #expect(try connection.query("SELECT beaconflow.ensure_partitions('2026-01-02', 3)") == [["3"]])
        try connection.execute(
            """
            INSERT INTO beaconflow.sightings_raw (ts, site_id, agent_id, beacon_id, rssi)
            VALUES ('2026-01-01T23:59:59.999999Z', 'hq', 'a1', 'b', -60), ('2026-01-02T00:00:00Z', 'hq', 'a1', 'b', -61)
            """)
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings_raw_20260102") == [["1"]])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings") == [["2"]])
        #expect(try connection.query("SELECT beaconflow.drop_partitions_before('2026-01-03')") == [["6"]])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings") == [["0"]])
        // A day with no partition is an error that names the problem, not a silent loss.
        do {
            try connection.execute(
                "INSERT INTO beaconflow.sightings_raw (ts, site_id, agent_id, beacon_id, rssi) VALUES ('2030-01-01Z', 'hq', 'a1', 'b', -60)")
            Issue.record("a row without a partition was accepted")
        } catch {
            #expect(error.sqlState == "23514")  // no partition of relation found for row
        }
    }

    @Test func theReaderSeesTheViewsAndNothingElse() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        try Migrator.migrate(connection, logger: logger)
        try connection.execute(
            """
            CREATE ROLE grafana LOGIN IN ROLE beaconflow_reader;
            CREATE ROLE ingest LOGIN IN ROLE beaconflow_writer;
            """)
        let reader = try PostgresConnection(server.conninfo.replacingOccurrences(of: "user=postgres", with: "user=grafana"))
        for view in Self.contract.keys { _ = try reader.query("SELECT * FROM beaconflow.\(view) LIMIT 1") }
        do {
            _ = try reader.query("SELECT * FROM beaconflow.sightings_raw LIMIT 1")
            Issue.record("the reader read a raw table")
        } catch {
            #expect(error.sqlState == "42501")  // insufficient privilege
        }
        let writer = try PostgresConnection(server.conninfo.replacingOccurrences(of: "user=postgres", with: "user=ingest"))
        #expect(try writer.query("SELECT beaconflow.ensure_partitions('2026-02-01', 1)") == [["3"]])
        try writer.execute(
            "INSERT INTO beaconflow.sightings_raw (ts, site_id, agent_id, beacon_id, rssi) VALUES ('2026-02-01Z', 'hq', 'a1', 'b', -60)")
        #expect(try reader.query("SELECT count(*) FROM beaconflow.sightings") == [["1"]])
        // Sensor readings are appended like the other raw rows, and never changed.
        try writer.execute(
            """
            INSERT INTO beaconflow.sensor_readings_raw (ts, site_id, agent_id, beacon_id, quantity, value, unit, frame_hash)
            VALUES ('2026-02-01Z', 'hq', 'a1', 'b', 'temperature', 21.5, 'celsius', 1)
            """)
        #expect(try reader.query("SELECT quantity, value, unit FROM beaconflow.sensor_readings") == [["temperature", "21.5", "celsius"]])
        for statement in ["UPDATE beaconflow.sensor_readings_raw SET value = 0", "DELETE FROM beaconflow.sensor_readings_raw_20260201"] {
            do {
                try writer.execute(statement)
                Issue.record("the writer changed a sensor reading: \(statement)")
            } catch {
                #expect(error.sqlState == "42501")
            }
        }
    }

    @Test func connectionFailuresNameTheProblemWithoutTheSecret() async throws {
        let port = try freeLoopbackPort()
        do {
            _ = try PostgresConnection("postgresql://someone:s3cret-word@127.0.0.1:\(port)/db?connect_timeout=2")
            Issue.record("connected to nothing")
        } catch {
            #expect(error.isConnectionFailure)
            #expect(error.description.contains("127.0.0.1"))
            #expect(!error.description.contains("s3cret-word"))
        }
    }
}
