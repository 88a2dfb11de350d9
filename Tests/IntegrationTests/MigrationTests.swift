import BeaconIngest
import Foundation
import LocalServers
import LibPQ
import Logging
import TestServers
import Testing

@Suite(.enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"), .timeLimit(.minutes(5)))
struct MigrationTests {
    let logger = Logger(label: "migration-test")

    /// The public views of docs/schema.md's first table, column by column, in order ("`x` then the columns of
    /// `v`" spelled out).
    static func documentedViews() throws -> [String: [String]] {
        let document = try String(contentsOfFile: repositoryRoot + "/docs/schema.md", encoding: .utf8)
        let table = document.components(separatedBy: "## Public views")[1].components(separatedBy: "\n## ")[0]
        var views: [String: [String]] = [:]
        var ordered: [(String, String)] = []
        for line in table.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            ordered.append((cells[0].trimmingCharacters(in: ["`"]), cells[1]))
        }
        for (view, cell) in ordered {
            let parts = cell.components(separatedBy: " then the columns of ")
            var columns = parts[0].trimmingCharacters(in: ["`"]).components(separatedBy: ", ")
            if parts.count == 2 { columns += views[parts[1].trimmingCharacters(in: ["`"])] ?? ["?"] }
            views[view] = columns
        }
        return views
    }

    /// `pg_dump --schema-only` of the beaconflow schema, without the lines that name the dump's version or settings.
    static func schemaDump(_ server: PostgresServer) async throws -> String {
        let dump = try await runProgram(
            PostgresServer.binaries! + "/pg_dump",
            ["--schema-only", "--schema=beaconflow", "-h", "127.0.0.1", "-p", String(server.port), "-U", "postgres", "postgres"])
        #expect(dump.status == 0, "\(dump.errors)")
        let kept = dump.output.split(separator: "\n", omittingEmptySubsequences: false).filter { line in
            !(line.hasPrefix("-- Dumped ") || line.hasPrefix("SET ") || line.hasPrefix("SELECT pg_catalog.set_config")
                || line.hasPrefix("\\restrict") || line.hasPrefix("\\unrestrict"))
        }
        return kept.joined(separator: "\n").replacingOccurrences(of: "\n\n\n+", with: "\n\n", options: .regularExpression)
            .trimmingCharacters(in: .whitespacesAndNewlines) + "\n"
    }

    /// One source (hq, a1, no zone, no offset, exponent 2.5) and one beacon (b), keys 1.
    static let keys = """
        INSERT INTO beaconflow.sighting_sources (site_id, agent_id, zone_id, rssi_offset_db, path_loss_exponent)
        VALUES ('hq', 'a1', NULL, 0, 2.5);
        INSERT INTO beaconflow.beacon_keys (beacon_id) VALUES ('b');
        """

    /// A pack's reading at the pack's start, as a SQL literal.
    static func reading(rssi: Int8) -> String {
        "\(SightingPack.Reading.encode(offsetMicros: 0, rssi: rssi, smoothedRSSI: Double(rssi)))"
    }

    /// The migrations make exactly docs/schema.sql (with `SCHEMA_DUMP=write` the test writes it instead), and
    /// the public views are exactly docs/schema.md's.
    @Test func theMigrationsMakeTheCheckedInSchemaAndTheDocumentedViews() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        #expect(try await Migrator.migrateOffThePool(connection, logger: logger) == Array(1...Migrator.latestVersion))
        let dump = try await Self.schemaDump(server)
        let checkedIn = repositoryRoot + "/docs/schema.sql"
        if ProcessInfo.processInfo.environment["SCHEMA_DUMP"] == "write" {
            try dump.write(toFile: checkedIn, atomically: true, encoding: .utf8)
        }
        #expect(dump == (try? String(contentsOfFile: checkedIn, encoding: .utf8)), "docs/schema.sql is not what the migrations make")
        let documented = try Self.documentedViews()
        let granted = try connection.query(
            """
            SELECT table_name FROM information_schema.role_table_grants
            WHERE grantee = 'beaconflow_reader' AND table_schema = 'beaconflow' AND privilege_type = 'SELECT'
            """).map { $0[0] ?? "" }
        #expect(Set(granted) == Set(documented.keys), "the views the reader may query are the documented ones")
        #expect(documented.count >= 15)
        for (view, columns) in documented {
            let found = try connection.query(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'beaconflow' AND table_name = $1 ORDER BY ordinal_position",
                [view]).map { $0[0] ?? "" }
            #expect(found == columns, "view \(view)")
        }
        // Running it again does nothing; a second instance at the same time waits for the lock and finds it done.
        #expect(try await Migrator.migrateOffThePool(connection, logger: logger) == [])
        #expect(try await Migrator.migrateOffThePool(try PostgresConnection(server.conninfo), logger: logger) == [])
    }

    @Test func upgradingKeepsOneTelemetryRowPerTransmissionAndLosesNoOtherRow() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        #expect(try await Migrator.migrateOffThePool(connection, through: 3, logger: logger) == [1, 2, 3])
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
        #expect(try await Migrator.migrateOffThePool(connection, logger: logger) == Array(4...Migrator.latestVersion))
        #expect(try connection.query(
            "SELECT beacon_id, adv_count, agent_id FROM beaconflow.telemetry ORDER BY 1, 2") == [["b1", "7", "a1"], ["b1", "8", "a1"], ["b2", "7", "a1"]])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings") == [["1"]])
        // Sensor readings have a partition for the day that had data, so late readings of it have a place.
        #expect(try connection.query("SELECT to_regclass('beaconflow.sensor_readings_raw_20260101') IS NOT NULL") == [["t"]])
        // Since version 33 a transmission is its counters and its time (the ingest checks them under its locks): the
        // same counters two hours later, after another boot, are a row of their own, in this partition and in one
        // made after the upgrade.
        #expect(try connection.query("SELECT beaconflow.ensure_partitions('2026-01-02', 1)") == [["3"]])
        for day in ["2026-01-01", "2026-01-02"] {
            try connection.execute(
                """
                INSERT INTO beaconflow.beacon_keys (beacon_id) VALUES ('b9') ON CONFLICT DO NOTHING;
                INSERT INTO beaconflow.telemetry_raw (ts, beacon_key, adv_count, uptime_s)
                SELECT '\(day)T10:00:00Z'::timestamptz + hours * interval '1 hour', beacon_key, 7, 0.7
                FROM beaconflow.beacon_keys, (VALUES (0), (2)) AS boots(hours) WHERE beacon_id = 'b9'
                """)
            #expect(try connection.query("SELECT count(*) FROM beaconflow.telemetry WHERE beacon_id = 'b9' AND ts::date = '\(day)'") == [["2"]])
        }
    }

    /// A database of version 8 with sightings, minutes and visits: after the upgrade the views show the same rows,
    /// the old sightings are rolled up per minute, and new sightings are stored packed beside them.
    @Test func upgradingToPackedSightingsLosesNoRowAndRollsUpTheOldOnes() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        #expect(try await Migrator.migrateOffThePool(connection, through: 8, logger: logger) == Array(1...8))
        #expect(try connection.query("SELECT beaconflow.ensure_partitions('2026-01-01', 1)") == [["3"]])
        try connection.execute(
            """
            INSERT INTO beaconflow.sightings_raw (ts, site_id, agent_id, zone_id, beacon_id, rssi, tx_power, distance_m, smoothed_distance_m) VALUES
                ('2026-01-01T10:00:00.000001Z', 'hq', 'a1', 'lobby', 'b1', -60, -59, 1.1, 1.0),
                ('2026-01-01T10:00:30Z', 'hq', 'a1', 'lobby', 'b1', -70, -59, 2.5, 1.5),
                ('2026-01-01T10:01:00Z', 'hq', 'a1', 'lobby', 'b1', -65, NULL, NULL, NULL),
                ('2026-01-01T10:00:10Z', 'hq', 'a2', NULL, 'b1', -80, -59, 6.3, 6.0);
            INSERT INTO beaconflow.zone_occupancy_minute (site_id, zone_id, bucket, occupants, occupant_seconds) VALUES
                ('hq', 'lobby', '2026-01-01T10:00:00Z', 2, 90), ('hq', 'lobby', '2026-01-01T10:01:00Z', 1, NULL),
                ('hq', 'lobby', '2026-01-01T11:00:00Z', 0, 0);
            INSERT INTO beaconflow.visits_raw (site_id, zone_id, beacon_id, enter_ts, exit_ts) VALUES
                ('hq', 'lobby', 'b1', '2026-01-01T10:00:00Z', '2026-01-01T10:05:00Z'),
                ('hq', 'lobby', 'b2', '2026-01-01T10:59:59Z', NULL);
            """)
        let sightings = "SELECT * FROM beaconflow.sightings ORDER BY ts"
        let hourly = "SELECT * FROM beaconflow.zone_occupancy_hourly ORDER BY bucket"
        try connection.execute("SET TIME ZONE 'UTC'")
        let before = (try connection.query(sightings), try connection.query(hourly))
        #expect(before.0.count == 4 && before.1.count == 2)
        // Hours are UTC hours whatever the zone of the session that migrates.
        try connection.execute("SET TIME ZONE 'Asia/Kolkata'")
        #expect(try await Migrator.migrateOffThePool(connection, logger: logger) == Array(9...Migrator.latestVersion))
        try connection.execute("SET TIME ZONE 'UTC'")
        #expect(try connection.query(sightings) == before.0)
        #expect(try connection.query(hourly) == before.1)
        #expect(
            try connection.query(
                "SELECT to_char(minute AT TIME ZONE 'UTC', 'HH24:MI'), agent_id, sightings, rssi_min, rssi_mean, rssi_max FROM beaconflow.sightings_minute ORDER BY 1, 2"
            ) == [["10:00", "a1", "2", "-70", "-65", "-60"], ["10:00", "a2", "1", "-80", "-80", "-80"], ["10:01", "a1", "1", "-65", "-65", "-65"]])
        // The ingest stores packs beside the old rows (2025-12-31 and 2026-01-01), and the day's hour is kept up to date.
        let writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: try SitesConfiguration.parse(testSites)))
        #expect(try writer.commit(try decodedBatch(sequence: 1), state: &state) == .committed(rows: 100))
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings") == [["104"]])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings_between('2026-01-01T10:00:00Z', '2026-01-01T10:00:30Z')") == [["2"]])
    }

    /// Readings stored under the names used before Home Assistant's are renamed, and nothing else changes.
    @Test func upgradingRenamesBTHomeQuantitiesToHomeAssistantsNames() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        #expect(try await Migrator.migrateOffThePool(connection, through: 14, logger: logger) == Array(1...14))
        #expect(try connection.query("SELECT beaconflow.ensure_partitions('2026-01-01', 1)") == [["3"]])
        try connection.execute(
            """
            INSERT INTO beaconflow.sensor_readings_raw (ts, site_id, agent_id, beacon_id, quantity, value, unit, frame_hash)
            SELECT '2026-01-01T10:00:00Z', 'hq', 'a1', 'mac:54:48:E6:8F:80:A5', q, 1, 'u', 0
            FROM unnest(ARRAY['pm2_5', 'co2', 'tvoc', 'dewpoint', 'generic_boolean', 'temperature', 'battery_low']) AS q
            """)
        #expect(try await Migrator.migrateOffThePool(connection, logger: logger) == Array(15...Migrator.latestVersion))
        let names = try connection.query("SELECT quantity FROM beaconflow.sensor_readings ORDER BY 1").compactMap { $0[0] }
        #expect(names == ["battery_low", "carbon_dioxide", "dew_point", "generic", "pm25", "temperature", "volatile_organic_compounds"])
    }

    /// TLM readings stored before as sensor rows are shown from their telemetry rows, once; a reading of the same
    /// quantities from another format, and TLM rows without a telemetry row of the same transmission, stay. The
    /// telemetry keyed by beacon shows the same rows.
    @Test func upgradingShowsTLMReadingsFromTelemetryOnce() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        #expect(try await Migrator.migrateOffThePool(connection, through: 18, logger: logger) == Array(1...18))
        #expect(try connection.query("SELECT beaconflow.ensure_partitions('2026-01-01', 1)") == [["3"]])
        try connection.execute(
            """
            INSERT INTO beaconflow.telemetry_raw (ts, beacon_id, battery_mv, temperature_c, adv_count, uptime_s, site_id, agent_id)
            VALUES ('2026-01-01T10:00:00Z', 'uid:t', 3000, 21.5, 256, 51.2, 'hq', 'a1'),
                   ('2026-01-01T10:00:10Z', 'uid:t', 3000, NULL, 257, 52.2, 'hq', 'a1');
            INSERT INTO beaconflow.sensor_readings_raw (ts, site_id, agent_id, beacon_id, quantity, value, unit, frame_hash)
            VALUES ('2026-01-01T10:00:00Z', 'hq', 'a1', 'uid:t', 'battery_voltage', 3000, 'millivolt', 1),
                   ('2026-01-01T10:00:00Z', 'hq', 'a1', 'uid:t', 'temperature', 21.5, 'celsius', 1),
                   ('2026-01-01T10:00:00Z', 'hq', 'a1', 'uid:t', 'advertising_count', 256, 'count', 1),
                   ('2026-01-01T10:00:00Z', 'hq', 'a1', 'uid:t', 'uptime', 51.2, 'second', 1),
                   ('2026-01-01T10:00:10Z', 'hq', 'a1', 'uid:t', 'battery_voltage', 3000, 'millivolt', 2),
                   ('2026-01-01T10:00:10Z', 'hq', 'a1', 'uid:t', 'advertising_count', 257, 'count', 2),
                   ('2026-01-01T10:00:10Z', 'hq', 'a1', 'uid:t', 'uptime', 52.2, 'second', 2),
                   ('2026-01-01T10:06:00Z', 'hq', 'a2', 'uid:t', 'battery_voltage', 3000, 'millivolt', 2),
                   ('2026-01-01T10:06:00Z', 'hq', 'a2', 'uid:t', 'advertising_count', 257, 'count', 2),
                   ('2026-01-01T10:06:00Z', 'hq', 'a2', 'uid:t', 'uptime', 52.2, 'second', 2),
                   ('2026-01-01T10:00:00Z', 'hq', 'a1', 'mac:r', 'temperature', 21.5, 'celsius', 3),
                   ('2026-01-01T10:00:00Z', 'hq', 'a1', 'mac:r', 'battery_voltage', 2977, 'millivolt', 3)
            """)
        let query = "SELECT to_char(ts AT TIME ZONE 'UTC', 'MI:SS'), agent_id, beacon_id, quantity, value, unit FROM beaconflow.sensor_readings ORDER BY 1, 2, 3, 4"
        let telemetry = "SELECT * FROM beaconflow.telemetry ORDER BY ts"
        let before = try connection.query(query)
        let telemetryBefore = try connection.query(telemetry)
        #expect(before.count == 12 && telemetryBefore.count == 2)
        #expect(try await Migrator.migrateOffThePool(connection, logger: logger) == Array(19...Migrator.latestVersion))
        #expect(try connection.query(query) == before)
        #expect(try connection.query(telemetry) == telemetryBefore)
        // What is left in the table: the other format's readings and the late repeat without a telemetry row.
        #expect(
            try connection.query("SELECT beacon_id, agent_id, count(*) FROM beaconflow.sensor_readings_raw GROUP BY 1, 2 ORDER BY 1, 2")
                == [["mac:r", "a1", "2"], ["uid:t", "a2", "3"]])
    }

    @Test func partitionsAreMadeAheadAndDroppedPastRetention() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: logger)
        #expect(try connection.query("SELECT beaconflow.ensure_partitions('2026-01-01', 3)") == [["9"]])
        #expect(try connection.query("SELECT beaconflow.ensure_partitions('2026-01-02', 3)") == [["3"]])
        try connection.execute(Self.keys)
        try connection.execute(
            """
            INSERT INTO beaconflow.sighting_packs (ts, source_key, beacon_key, readings)
            VALUES ('2026-01-01T23:59:59.999999Z', 1, 1, ARRAY[\(Self.reading(rssi: -60))]),
                   ('2026-01-02T00:00:00Z', 1, 1, ARRAY[\(Self.reading(rssi: -61))])
            """)
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sighting_packs_20260102") == [["1"]])
        #expect(try connection.query("SELECT ts, rssi FROM beaconflow.sightings ORDER BY ts") == [
            ["2026-01-01 23:59:59.999999+00", "-60"], ["2026-01-02 00:00:00+00", "-61"]])
        #expect(try connection.query("SELECT beaconflow.drop_partitions_before('2026-01-03')") == [["6"]])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings") == [["0"]])
        // A day with no partition is an error that names the problem, not a silent loss.
        do {
            try connection.execute(
                "INSERT INTO beaconflow.sighting_packs (ts, source_key, beacon_key, readings) VALUES ('2030-01-01Z', 1, 1, '{}')")
            Issue.record("a row without a partition was accepted")
        } catch {
            #expect(error.sqlState == "23514")  // no partition of relation found for row
        }
    }

    /// A migrated database with a reader login (grafana) and a writer login (ingest); the owner's connection and
    /// the reader's.
    static func migratedWithRoles() async throws -> (PostgresServer, PostgresConnection, PostgresConnection) {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "migration-test"))
        try connection.execute(
            """
            CREATE ROLE grafana LOGIN IN ROLE beaconflow_reader;
            CREATE ROLE ingest LOGIN IN ROLE beaconflow_writer;
            """)
        let reader = try PostgresConnection(server.conninfo.replacingOccurrences(of: "user=postgres", with: "user=grafana"))
        return (server, connection, reader)
    }

    @Test func theReaderSeesTheViewsAndNothingElse() async throws {
        let (server, connection, reader) = try await Self.migratedWithRoles()
        for view in try Self.documentedViews().keys { _ = try reader.query("SELECT * FROM beaconflow.\(view) LIMIT 1") }
        for table in ["sightings_raw", "sighting_packs", "beacon_keys", "sighting_minutes"] {
            do {
                _ = try reader.query("SELECT * FROM beaconflow.\(table) LIMIT 1")
                Issue.record("the reader read the table \(table)")
            } catch {
                #expect(error.sqlState == "42501")  // insufficient privilege
            }
        }
        let writer = try PostgresConnection(server.conninfo.replacingOccurrences(of: "user=postgres", with: "user=ingest"))
        #expect(try writer.query("SELECT beaconflow.ensure_partitions('2026-02-01', 1)") == [["3"]])
        try writer.execute(Self.keys)
        try writer.execute(
            "INSERT INTO beaconflow.sighting_packs (ts, source_key, beacon_key, readings) VALUES ('2026-02-01Z', 1, 1, ARRAY[\(Self.reading(rssi: -60))])")
        #expect(try reader.query("SELECT count(*) FROM beaconflow.sightings") == [["1"]])
        #expect(try reader.query("SELECT rssi FROM beaconflow.sightings_between('2026-02-01Z', '2026-02-02Z')") == [["-60"]])
        // The dictionaries and packs are appended to, never changed.
        for statement in [
            "UPDATE beaconflow.beacon_keys SET beacon_id = 'c'", "DELETE FROM beaconflow.sighting_sources",
            "UPDATE beaconflow.sighting_packs SET tx_power = 0", "DELETE FROM beaconflow.sighting_packs_20260201",
        ] {
            do {
                try writer.execute(statement)
                Issue.record("the writer changed stored sightings: \(statement)")
            } catch {
                #expect(error.sqlState == "42501")
            }
        }
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

    /// Only the writer role holds, renews and counts site leases, through the lease functions; no login may write
    /// the claims directly, and rejected batches go only through the retention function.
    @Test func siteLeasesAreTheWritersAloneAndOnlyThroughTheirFunctions() async throws {
        let (server, connection, reader) = try await Self.migratedWithRoles()
        try connection.execute(
            """
            INSERT INTO beaconflow.rejected_batches (topic, reason, detail, payload, payload_bytes, received_at)
            VALUES ('t', 'malformed', 'old', '', 0, now() - interval '400 days'), ('t', 'malformed', 'new', '', 0, now());
            """)
        let writer = try PostgresConnection(server.conninfo.replacingOccurrences(of: "user=postgres", with: "user=ingest"))
        func refused(_ statement: String, on login: PostgresConnection, _ who: String) {
            do {
                try login.execute(statement)
                Issue.record("\(who) was allowed: \(statement)")
            } catch {
                #expect(error.sqlState == "42501", "\(statement): \(error)")  // insufficient privilege
            }
        }
        for statement in [
            "SELECT beaconflow.join_instances('rogue', 60)", "SELECT * FROM beaconflow.claim_site('hq', 'rogue', 60)",
            "SELECT beaconflow.renew_sites('rogue', ARRAY['hq'], ARRAY[1::bigint], 60)",
            "SELECT beaconflow.hold_sites('rogue', ARRAY['hq'], ARRAY[1::bigint])", "SELECT beaconflow.prune_rejections()",
            "SELECT * FROM beaconflow.site_claims",
        ] {
            refused(statement, on: reader, "the reader")
        }
        #expect(try writer.query("SELECT epoch, previous FROM beaconflow.claim_site('hq', 'ingest-1', 60)") == [["1", nil]])
        #expect(try reader.query("SELECT site_id, instance FROM beaconflow.site_owners") == [["hq", "ingest-1"]])
        // Held: nobody else claims it, the holder renews it.
        #expect(try writer.query("SELECT * FROM beaconflow.claim_site('hq', 'ingest-2', 60)").isEmpty)
        #expect(try writer.query("SELECT beaconflow.renew_sites('ingest-1', ARRAY['hq'], ARRAY[1::bigint], 60)") == [["hq"]])
        #expect(try writer.query("SELECT beaconflow.renew_sites('ingest-2', ARRAY['hq'], ARRAY[1::bigint], 60)").isEmpty)
        for statement in [
            "UPDATE beaconflow.site_claims SET expires_at = now()", "DELETE FROM beaconflow.site_claims",
            "INSERT INTO beaconflow.site_claims (site_id, instance, claimed_at, backend_pid) VALUES ('x', 'y', now(), 1)",
            "UPDATE beaconflow.ingest_instances SET expires_at = now()", "DELETE FROM beaconflow.rejected_batches",
        ] {
            refused(statement, on: writer, "the writer")
        }
        #expect(try writer.query("SELECT beaconflow.prune_rejections()") == [["1"]])
        // Released, a lease is free at once, for anyone; a release of another epoch changes nothing.
        _ = try writer.query("SELECT beaconflow.release_site('ingest-1', 'hq', 2)")
        #expect(try writer.query("SELECT count(*) FROM beaconflow.site_owners") == [["1"]])
        _ = try writer.query("SELECT beaconflow.release_site('ingest-1', 'hq', 1)")
        #expect(try writer.query("SELECT count(*) FROM beaconflow.site_owners") == [["0"]])
        #expect(try writer.query("SELECT epoch, previous FROM beaconflow.claim_site('hq', 'ingest-2', 60)") == [["2", "ingest-1"]])
        #expect(try connection.query("SELECT detail FROM beaconflow.rejected_batches") == [["new"]])
        // Out-of-range leases are refused with their reason.
        do {
            _ = try writer.query("SELECT * FROM beaconflow.claim_site('east', 'ingest-1', 1e9)")
            Issue.record("a lease of 1e9 s was accepted")
        } catch {
            #expect(error.sqlState == "22023")
        }
        // A lease whose holder's session ended is free at once; the new claim has a newer epoch.
        let holder = try PostgresConnection(server.conninfo.replacingOccurrences(of: "user=postgres", with: "user=ingest"))
        #expect(try holder.query("SELECT epoch FROM beaconflow.claim_site('east', 'ingest-3', 60)") == [["1"]])
        #expect(try writer.query("SELECT epoch FROM beaconflow.claim_site('east', 'ingest-1', 60)").isEmpty)
        _ = try connection.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'ingest' AND pid <> \(try writer.query("SELECT pg_backend_pid()")[0][0] ?? "0")")
        try await eventuallyTrue("the holder's session ends") {
            try writer.query("SELECT epoch, previous FROM beaconflow.claim_site('east', 'ingest-1', 60)") == [["2", "ingest-3"]]
        }
        // A holder frozen inside a transaction that holds its site keeps it past the lease, and no claim waits for
        // it longer than the lock timeout; its idle-in-transaction timeout ends its session, and the site is free.
        let frozen = try PostgresConnection(server.conninfo.replacingOccurrences(of: "user=postgres", with: "user=ingest"))
        #expect(try frozen.query("SELECT epoch FROM beaconflow.claim_site('west', 'ingest-4', 1)") == [["1"]])
        try frozen.execute("BEGIN")
        #expect(try frozen.query("SELECT beaconflow.hold_sites('ingest-4', ARRAY['west'], ARRAY[1::bigint])") == [["west"]])
        try await eventuallyTrue("the lease expires") {
            try connection.query("SELECT count(*) FROM beaconflow.site_claims WHERE site_id = 'west' AND expires_at < now()") == [["1"]]
        }
        let started = ContinuousClock.now
        #expect(try writer.query("SELECT * FROM beaconflow.claim_site('west', 'ingest-1', 60)").isEmpty)
        #expect(ContinuousClock.now - started < .seconds(5))
        // The timeout the ingest sets on its writer session, here set late so that nothing above races it.
        try frozen.execute("SET idle_in_transaction_session_timeout = '1s'")
        try await eventuallyTrue("the frozen holder's session ends", timeout: .seconds(20)) {
            try writer.query("SELECT epoch, previous FROM beaconflow.claim_site('west', 'ingest-1', 60)") == [["2", "ingest-4"]]
        }
    }

    /// As the writer login: an agent's progress only grows, and only to a sequence stored or refused for it;
    /// partitions stop at the owner's total.
    @Test func theWritersProgressAndPartitionsStayWithinTheirBounds() async throws {
        let (server, connection, _) = try await Self.migratedWithRoles()
        let writer = try PostgresConnection(server.conninfo.replacingOccurrences(of: "user=postgres", with: "user=ingest"))
        func sqlState(_ statement: String) -> String? {
            do {
                try writer.execute(statement)
                return nil
            } catch { return error.sqlState ?? "?" }
        }
        let progress = """
            INSERT INTO beaconflow.agent_state (site_id, agent_id, committed_through) VALUES ('hq', 'a1', %@)
            ON CONFLICT (site_id, agent_id) DO UPDATE SET committed_through = excluded.committed_through
            """
        func setProgress(_ value: String) -> String? { sqlState(progress.replacingOccurrences(of: "%@", with: value)) }
        #expect(setProgress("5") == "23514", "beyond every stored batch")
        #expect(sqlState("INSERT INTO beaconflow.batches (site_id, agent_id, sequence, boot_id, sightings) VALUES ('hq', 'a1', 4, 1, 1)") == nil)
        #expect(setProgress("4") == nil)
        #expect(setProgress("3") == "23514", "back")
        #expect(setProgress("4611686018427387904") == "23514")
        #expect(setProgress("-1") == "23514")
        #expect(sqlState("UPDATE beaconflow.agent_state SET committed_through = 9") == "23514")
        // A refused batch counts as done for its agent.
        #expect(sqlState("INSERT INTO beaconflow.rejected_batches (topic, reason, payload, site_id, agent_id, sequence) VALUES ('t', 'bad_timestamp', '', 'hq', 'a1', 9)") == nil)
        #expect(setProgress("9") == nil)
        #expect(try writer.query("SELECT committed_through FROM beaconflow.agent_state") == [["9"]])

        try connection.execute("UPDATE beaconflow.settings SET value = '70' WHERE key = 'partition_days_max'")
        #expect(try writer.query("SELECT beaconflow.ensure_partitions('2030-01-01', 62)") == [["186"]])
        #expect(try writer.query("SELECT beaconflow.ensure_partitions('2030-01-01', 62)") == [["0"]], "days made already count once")
        #expect(sqlState("SELECT beaconflow.ensure_partitions('2031-01-01', 10)") == "54000")
        #expect(sqlState("SELECT beaconflow.make_partitions('2031-01-01', 10)") == "42501")
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
            // libpq says it on several lines (the failure, then a hint): a log line stays one line.
            #expect(error.description.contains("; ") && !error.description.contains("\n"), "\(error)")
        }
    }
}
