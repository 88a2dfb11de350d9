import BeaconIngest
import BeaconWire
import Foundation
import LocalServers
import LibPQ
import Logging
import TestServers
import Testing
import WorkQueue

func decodedBatch(sequence: UInt64, beaconID: String = "eddystone:0102030405060708090a:0000000000a1") throws -> DecodedBatch {
    var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 0xFEED_0000_0000_0001)
    builder.configuration.maximumSightings = 10_000
    let key = BeaconKey(beaconID: beaconID, address: 0xC000_0000_0001, addressIsRandom: true, powerAt1mDbm: -59)
    // Around midnight UTC, so that the batch needs two daily partitions.
    let midnight: Int64 = 1_767_225_600_000_000  // 2026-01-01T00:00:00Z
    for index in 0..<100 {
        let sighting = Sighting(timeMicros: midnight - 50_000_000 + Int64(index) * 1_000_001, beacon: key, rssi: Int8(-40 - index % 50))
        _ = builder.add(sighting, nowNanoseconds: 0)
    }
    let sealed = builder.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: midnight)
    let wire = try #require(sealed)
    return try BatchReader.decode(try wire.wireBytes())
}

/// A batch of TLM sightings from one agent: per entry, the capture time and the frame's advertising counter (its
/// uptime follows from the counter, one advert every 100 ms since boot, as a real beacon's would).
func telemetryBatch(agent: String, sequence: UInt64, transmissions: [(timeMicros: Int64, counter: UInt32)]) throws -> DecodedBatch {
    var builder = BatchBuilder(siteID: "hq", agentID: agent, bootID: 1)
    let key = BeaconKey(beaconID: "eddystone:0102030405060708090a:0000000000a1", address: 0xC000_0000_0001, addressIsRandom: true, powerAt1mDbm: -59)
    for transmission in transmissions {
        let tlm = EddystoneTLM(
            batteryMillivolts: 3000, temperatureRaw: 22 * 256, advertisingCount: transmission.counter,
            uptimeTenths: transmission.counter)
        let sighting = Sighting(
            timeMicros: transmission.timeMicros, beacon: key, rssi: -60, data: .eddystone(FrameBytes([0x20, 0x00] + tlm.fieldBytes)))
        _ = builder.add(sighting, nowNanoseconds: 0)
    }
    let sealed = builder.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: 0)
    let wire = try #require(sealed)
    return try BatchReader.decode(try wire.wireBytes())
}

@Suite(.enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"), .timeLimit(.minutes(5)))
struct BatchWriterTests {
    @Test func aTransmissionIsOneTelemetryRowHoweverLateAndAcrossMidnight() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let sites = try SitesConfiguration.parse(testSites)
        let midnight: Int64 = 1_767_225_600_000_000
        let hour: Int64 = 3_600_000_000
        var writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: sites))
        // hq-a1 hears counters 10 (two hours before midnight), 50 (a millisecond before midnight) and 90 (an hour
        // after); hq-a2, two hours behind, delivers 10 and 50 at the end, beyond the pipeline's window.
        _ = try writer.commit(try telemetryBatch(agent: "hq-a1", sequence: 1, transmissions: [(midnight - 2 * hour, 10), (midnight - 1_000, 50)]), state: &state)
        _ = try writer.commit(try telemetryBatch(agent: "hq-a1", sequence: 2, transmissions: [(midnight + hour, 90)]), state: &state)
        let late = try writer.commit([try telemetryBatch(agent: "hq-a2", sequence: 1, transmissions: [(midnight - 2 * hour + 900, 10)])], state: &state)
        #expect(late.telemetryRows == 0)
        // After a restart the pipeline remembers nothing: hq-a2's reception of counter 50 falls after midnight.
        writer = BatchWriter(connection: connection)
        state = WriterState(pipeline: IngestPipeline(sites: sites))
        let restarted = try writer.commit([try telemetryBatch(agent: "hq-a2", sequence: 2, transmissions: [(midnight + 2_000, 50), (midnight + hour + 1_500, 90)])], state: &state)
        #expect(restarted.telemetryRows == 0)
        #expect(try connection.query("SELECT adv_count, count(*) FROM beaconflow.telemetry GROUP BY 1 ORDER BY 1") == [["10", "1"], ["50", "1"], ["90", "1"]])
        // The same counter after a reboot (uptime restarted) is a new transmission.
        let rebooted = try telemetryBatch(agent: "hq-a1", sequence: 3, transmissions: [(midnight + 2 * hour, 90)])
        var frames = rebooted
        frames.sightings = frames.sightings.map { sighting in
            var copy = sighting
            let tlm = EddystoneTLM(batteryMillivolts: 3000, temperatureRaw: 22 * 256, advertisingCount: 90, uptimeTenths: 7)
            copy.data = .eddystone(FrameBytes([0x20, 0x00] + tlm.fieldBytes))
            return copy
        }
        #expect(try writer.commit([frames], state: &state).telemetryRows == 1)
        #expect(try connection.query("SELECT count(*) FROM beaconflow.telemetry WHERE adv_count = 90") == [["2"]])
    }

    /// A beacon that reboots twice in a day (a cell browning out) sends the same counters after each boot: each
    /// boot's transmission is a row, and a second agent's reception of either, seconds later, is not.
    @Test func theSameCountersAfterAnotherRebootTheSameDayAreAnotherTransmission() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let sites = try SitesConfiguration.parse(testSites)
        let noon: Int64 = 1_767_268_800_000_000  // 2026-01-01T12:00:00Z
        let hour: Int64 = 3_600_000_000
        var writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: sites))
        // Counter 50 (5 s after a boot) at noon, and again 5 s after the next boot, two hours later; both heard by
        // hq-a1, the second also by hq-a2 three seconds later.
        _ = try writer.commit(try telemetryBatch(agent: "hq-a1", sequence: 1, transmissions: [(noon, 50)]), state: &state)
        let second = try writer.commit([try telemetryBatch(agent: "hq-a1", sequence: 2, transmissions: [(noon + 2 * hour, 50)])], state: &state)
        #expect(second.telemetryRows == 1)
        // The second agent after a restart (the pipeline remembers nothing): the database alone decides.
        writer = BatchWriter(connection: connection)
        state = WriterState(pipeline: IngestPipeline(sites: sites))
        let again = try writer.commit(
            [try telemetryBatch(agent: "hq-a2", sequence: 1, transmissions: [(noon + 3_000_000, 50), (noon + 2 * hour + 3_000_000, 50)])], state: &state)
        #expect(again.telemetryRows == 0)
        #expect(
            try connection.query("SELECT agent_id, extract(hour FROM ts AT TIME ZONE 'UTC') FROM beaconflow.telemetry ORDER BY ts")
                == [["hq-a1", "12"], ["hq-a1", "14"]])
        // Both in one group of offers: the earlier reception of each is stored, once.
        let both = try telemetryBatch(agent: "hq-a2", sequence: 2, transmissions: [(noon + 6 * hour + 1_000_000, 50), (noon + 8 * hour, 50)])
        let first = try telemetryBatch(agent: "hq-a1", sequence: 3, transmissions: [(noon + 6 * hour, 50), (noon + 8 * hour + 2_000_000, 50)])
        #expect(try writer.commit([both, first], state: &state).telemetryRows == 2)
        #expect(
            try connection.query("SELECT agent_id, extract(hour FROM ts AT TIME ZONE 'UTC') FROM beaconflow.telemetry WHERE ts > to_timestamp(\(noon + 5 * hour) / 1e6) ORDER BY ts")
                == [["hq-a1", "18"], ["hq-a2", "20"]])
    }

    /// A TLM beacon's battery forecast reaches `beacon_health` and `battery_replacements` whole, and a row without
    /// one (an ingest restarted, hearing the beacon without its TLM) leaves the stored forecast as it was.
    @Test func aBatteryForecastIsStoredAndListedForReplacement() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let sites = try SitesConfiguration.parse(testSites)
        let midnight: Int64 = 1_767_225_600_000_000
        let hour: Int64 = 3_600_000_000
        var writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: sites))
        _ = try writer.commit(try telemetryBatch(agent: "hq-a1", sequence: 1, transmissions: [(midnight - 2 * hour, 10), (midnight + hour, 36_000)]), state: &state)
        let forecast = """
            SELECT forecast, days_left_low <= est_days_left AND est_days_left <= days_left_high, replace_by IS NOT NULL,
                   charge_left_pct > 99, cell_since = to_timestamp(\(midnight - 2 * hour) / 1e6)
            FROM beaconflow.beacon_health WHERE beacon_id = 'eddystone:0102030405060708090a:0000000000a1'
            """
        #expect(try connection.query(forecast) == [["charge_counting", "t", "t", "t", "t"]])
        let listed = "SELECT beacon_id, site_id, replace_by = (SELECT replace_by FROM beaconflow.beacon_health) FROM beaconflow.battery_replacements"
        #expect(try connection.query(listed) == [["eddystone:0102030405060708090a:0000000000a1", "hq", "t"]])
        writer = BatchWriter(connection: connection)
        state = WriterState(pipeline: IngestPipeline(sites: sites))
        _ = try writer.commit(try decodedBatch(sequence: 2), state: &state)
        #expect(try connection.query(forecast) == [["charge_counting", "t", "t", "t", "t"]])
    }

    /// A forecast night colder than an outdoor cell carries brings its `replace_by` forward to the midnight before
    /// it; warmer nights, nights past (a night's low has come by noon of its morning), and a cell the sites file
    /// does not place outdoors leave it as its charge's.
    @Test func aForecastNightColderThanAnOutdoorCellCarriesIsWhenToReplaceIt() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let beaconID = "eddystone:0102030405060708090a:0000000000a1"
        let outdoors = try SitesConfiguration.parse(testSites + "\nbeacons:\n  - {id: \"\(beaconID)\", outdoors: true}\n")
        // Yesterday's midnight: the cell's charge lasts well past the nights forecast.
        let midnight = (Int64(Date().timeIntervalSince1970) / 86_400 - 1) * 86_400 * 1_000_000
        var writer = BatchWriter(connection: connection)
        try writer.writeRegistry(outdoors)
        var state = WriterState(pipeline: IngestPipeline(sites: outdoors))
        _ = try writer.commit(try telemetryBatch(agent: "hq-a1", sequence: 1, transmissions: [(midnight - 7_200_000_000, 10), (midnight + 3_600_000_000, 36_000)]), state: &state)
        let carried = try #require(Double(try connection.query("SELECT coldest_carried_c FROM beaconflow.beacon_health")[0][0] ?? ""))
        // The example of docs/schema.md: nights warmer than a fresh cell carries.
        let document = try String(contentsOfFile: repositoryRoot + "/docs/schema.md", encoding: .utf8)
        let example = try #require(
            document.components(separatedBy: "## Night forecasts").last?.components(separatedBy: "```sql").dropFirst().first?.components(separatedBy: "```").first)
        try connection.execute(example)
        let listed = """
            SELECT cold_night - current_date, cold_night_low_c, replace_by = (SELECT replace_by FROM beaconflow.beacon_health),
                   replace_by = (cold_night::timestamp AT TIME ZONE 'UTC')
            FROM beaconflow.battery_replacements
            """
        #expect(try connection.query(listed) == [[nil, nil, "t", nil]])
        // A night past as cold as the cell carries is not read; the night after next, a degree colder, is.
        try connection.query(
            """
            INSERT INTO beaconflow.night_forecasts VALUES ('hq', current_date - 1, $1), ('hq', current_date + 2, $2), ('hq', current_date + 3, $2)
            ON CONFLICT (site_id, night) DO UPDATE SET low_c = excluded.low_c
            """,
            [carried, carried - 1])
        #expect(try connection.query(listed) == [["2", String(format: "%g", carried - 1), "f", "t"]])
        // Tonight's forecast, at the site's time: read in the morning before noon, not in the afternoon.
        for (hours, readToday) in [(2...8, true), (14...20, false)] {
            let zone = try #require(
                try connection.query(
                    """
                    SELECT name FROM pg_timezone_names WHERE name ~ '^Etc/GMT[+-][0-9]+$'
                      AND extract(hour FROM now() AT TIME ZONE name) BETWEEN $1 AND $2 ORDER BY name LIMIT 1
                    """, [hours.lowerBound, hours.upperBound]
                ).first?[0])
            try connection.query("UPDATE beaconflow.site_registry SET timezone = $1 WHERE site_id = 'hq'", [zone])
            try connection.query(
                """
                INSERT INTO beaconflow.night_forecasts VALUES ('hq', (now() AT TIME ZONE $1)::date, $2)
                ON CONFLICT (site_id, night) DO UPDATE SET low_c = excluded.low_c
                """, [zone, carried - 1])
            let tonight = "SELECT cold_night = (now() AT TIME ZONE $1)::date FROM beaconflow.battery_replacements"
            #expect(try connection.query(tonight, [zone]) == [[readToday ? "t" : "f"]], "\(zone)")
            try connection.query("DELETE FROM beaconflow.night_forecasts WHERE night = (now() AT TIME ZONE $1)::date", [zone])
        }
        // The same cell indoors.
        try writer.writeRegistry(try SitesConfiguration.parse(testSites + "\nbeacons:\n  - {id: \"\(beaconID)\"}\n"))
        #expect(try connection.query(listed) == [[nil, nil, "t", nil]])
    }

    /// A site read back from ten minutes of stored sightings (no minute counted yet) ends in the zones of the
    /// run that stored them, while the tracker holds a few windows of readings at a time, never the whole backlog.
    @Test func aSiteIsReadBackAWindowAtATime() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let sites = try SitesConfiguration.parse(testSites)
        let start: Int64 = 1_767_225_600_000_000
        let writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: sites))
        for minute in 0..<10 {
            for (number, agent) in ["hq-a1", "hq-a2"].enumerated() {
                var builder = BatchBuilder(siteID: "hq", agentID: agent, bootID: 1)
                builder.configuration.maximumSightings = 100_000
                for second in 0..<60 {
                    for beacon in 0..<40 {
                        let key = BeaconKey(beaconID: "mac:C0:00:00:00:00:\(String(format: "%02X", beacon))", address: 0xC000_0000_0000 | UInt64(beacon), addressIsRandom: true)
                        // Beacons below 20 stay near hq-a1 (the lobby), the others near hq-a2.
                        let near = (beacon < 20) == (number == 0)
                        let time = start + Int64(minute * 60 + second) * 1_000_000 + Int64(beacon) * 1000
                        _ = builder.add(Sighting(timeMicros: time, beacon: key, rssi: near ? -58 : -80), nowNanoseconds: 0)
                    }
                }
                let sealed = builder.seal(sequence: UInt64(minute + 1), firstUnacknowledgedSequence: 1, agentClockMicros: start)
                _ = try writer.commit([BatchReader.decode(try #require(sealed).wireBytes())], state: &state, nowMicros: start + Int64(minute * 60 + 61) * 1_000_000)
            }
        }
        let visits = "SELECT zone_id, count(*) FROM beaconflow.visits GROUP BY 1 ORDER BY 1"
        let placed = try connection.query(visits).map(\.values)
        #expect(placed == [["lab", "20"], ["lobby", "20"]])
        // As if no minute had been counted: everything is read back.
        try connection.execute("DELETE FROM beaconflow.zone_checkpoints; DELETE FROM beaconflow.zone_occupancy_minute; DELETE FROM beaconflow.visits_raw")
        let resumed = BatchWriter(connection: connection)
        var resumedState = WriterState(pipeline: IngestPipeline(sites: sites))
        let resumption = try resumed.resumeZones(sites: ["hq"], state: &resumedState, nowMicros: start + 700_000_000)
        #expect(resumption.replayedSightings == 48_000)
        #expect(resumption.peakPendingReadings < 48_000 / 4, "\(resumption.peakPendingReadings) readings held at once")
        #expect(try connection.query(visits).map(\.values) == placed)
        #expect(try connection.query("SELECT count(*) > 0 FROM beaconflow.zone_occupancy_minute").first?[0] == "t")
    }

    @Test func aRedeliveredBatchGivesOneSetOfRows() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: try SitesConfiguration.parse(testSites)))
        let batch = try decodedBatch(sequence: 7)
        #expect(try writer.commit(batch, state: &state) == .committed(rows: 100))
        #expect(try writer.commit(batch, state: &state) == .duplicate)
        // The same sequence with other content is no redelivery: said, and the committed batch stays.
        var other = batch
        other.sightings.removeLast()
        guard case .sequenceReused(let difference) = try writer.commit(other, state: &state) else {
            Issue.record("a reused sequence passed as a duplicate")
            return
        }
        #expect(difference == "sequence 7 is committed with boot id \(Int64(bitPattern: 0xFEED_0000_0000_0001)) and 100 sightings of other content; this batch has boot id \(Int64(bitPattern: 0xFEED_0000_0000_0001)) and 99")
        var resealed = batch
        resealed.agentClockMicros += 1
        guard case .sequenceReused(let later) = try writer.commit(resealed, state: &state) else {
            Issue.record("a batch sealed at another time passed as a duplicate")
            return
        }
        #expect(later.contains("sealed at another time"))
        #expect(try writer.commit(batch, state: &state) == .duplicate)
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings") == [["100"]])
        #expect(try connection.query("SELECT count(*), min(boot_id) FROM beaconflow.batches") == [["1", String(Int64(bitPattern: 0xFEED_0000_0000_0001))]])
        // Both days got their partition; values survive the binary COPY to the microsecond.
        #expect(try connection.query("SELECT sum(cardinality(readings)) FROM beaconflow.sighting_packs_20251231") == [["50"]])
        let first = try connection.query(
            """
            SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), beacon_id, rssi, tx_power, round(distance_m::numeric, 3)
            FROM beaconflow.sightings ORDER BY ts LIMIT 1
            """)
        // -59 dBm at 1 m, -40 dBm heard: 10^((-59 + 40) / 25) = 0.174 m.
        #expect(first == [["2025-12-31T23:59:10.000000", "eddystone:0102030405060708090a:0000000000a1", "-40", "-59", "0.174"]])
    }

    /// Acknowledged batches folded into ranges of consecutive sequences still count once when sent again; a
    /// sequence the agent gave up on is no part of a range (it is still taken when it comes), and a batch with
    /// another boot id is still told from a redelivery.
    @Test func aBatchSentAgainAfterItsFoldStillCountsOnce() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: try SitesConfiguration.parse(testSites)))
        // Each batch says it is the agent's oldest unacknowledged one: 4 never comes, progress passes it.
        for sequence: UInt64 in [1, 2, 3, 5, 6] {
            #expect(try writer.commit(try decodedBatch(sequence: sequence), state: &state) != .duplicate)
        }
        let boot = String(Int64(bitPattern: 0xFEED_0000_0000_0001))
        let ranges = "SELECT boot_id, first_sequence, last_sequence, sightings FROM beaconflow.batch_ranges ORDER BY 2"
        // Within the lag (15 minutes): nothing folded.
        #expect(try writer.foldBatches(sites: state.servedSites) == 0)
        try connection.execute("UPDATE beaconflow.settings SET value = '0' WHERE key = 'compaction_lag_minutes'")
        // Two instances folding the site at once: one waits for the other and finds nothing left.
        let conninfo = server.conninfo
        @Sendable func foldOnItsOwnConnection() throws -> String {
            try PostgresConnection(conninfo).query("SELECT beaconflow.fold_batches('hq', now())")[0][0] ?? ""
        }
        async let first = onThread(foldOnItsOwnConnection)
        async let second = onThread(foldOnItsOwnConnection)
        #expect(Set([try await first, try await second]) == ["5", "0"])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.batches") == [["0"]])
        #expect(try connection.query(ranges) == [[boot, "1", "3", "300"], [boot, "5", "6", "200"]])
        #expect(try writer.foldBatches(sites: state.servedSites) == 0)

        #expect(try writer.commit(try decodedBatch(sequence: 2), state: &state) == .duplicate)
        #expect(try writer.commit(try decodedBatch(sequence: 6), state: &state) == .duplicate)
        var rebooted = try decodedBatch(sequence: 5)
        rebooted.bootID = 9
        #expect(
            try writer.commit(rebooted, state: &state)
                == .sequenceReused("sequence 5 is committed with boot id \(boot) (folded with the batches around it); this batch has boot id 9"))
        let late = try decodedBatch(sequence: 4, beaconID: "eddystone:0102030405060708090a:0000000000a2")
        #expect(try writer.commit(late, state: &state) == .committed(rows: 100))
        // The late batch lengthens the range before it.
        #expect(try writer.foldBatches(sites: state.servedSites) == 1)
        #expect(try connection.query(ranges) == [[boot, "1", "4", "400"], [boot, "5", "6", "200"]])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings WHERE beacon_id LIKE '%a2'") == [["100"]])
        // Progress may not rise past what is committed, folded or not.
        #expect(throws: PostgresError.self) {
            try connection.execute("UPDATE beaconflow.agent_state SET committed_through = 7")
        }
    }

    /// What the pipeline derived is what the views show: every column of every sighting (the smoothed distance
    /// from the RSSI kept to 0.5 dB), the per-minute rollups, and the same rows through `sightings_between`.
    @Test func theViewsShowExactlyWhatThePipelineDerived() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let sites = try SitesConfiguration.parse(
            testSites.replacingOccurrences(of: "{id: hq-a1, zone: lobby}", with: "{id: hq-a1, zone: lobby, rssi_offset_db: 2.5}"))
        let writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: sites))
        var expected = IngestPipeline(sites: sites)
        var batches = [try decodedBatch(sequence: 1), try decodedBatch(sequence: 2, beaconID: "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2")]
        var other = try decodedBatch(sequence: 1)
        other.agentID = "hq-a2"
        batches.append(other)
        // A later group adds to the rollups of the same minutes.
        let again = try decodedBatch(sequence: 3)
        var rows: [SightingRow] = []
        for batch in batches + [again] { rows += expected.apply(batch, nowMicros: 1_767_225_600_000_000).sightings }
        _ = try writer.commit(batches, state: &state, nowMicros: 1_767_225_600_000_000)
        _ = try writer.commit([again], state: &state, nowMicros: 1_767_225_600_000_000)
        let columns = """
            (extract(epoch FROM ts) * 1000000)::bigint, site_id, agent_id, agent_zone_id, beacon_id, rssi, tx_power, distance_m,
            smoothed_distance_m
            """
        func decoded(_ result: [PostgresRow]) throws -> [String] {
            try result.map { row in
                "\(try row.decode(0, as: Int64.self)) \(try row.decode(1, as: String.self)) \(try row.decode(2, as: String.self)) "
                    + "\(try row.decode(3, as: String?.self) ?? "-") \(try row.decode(4, as: String.self)) \(try row.decode(5, as: Int16.self)) "
                    + "\(try row.decode(6, as: Int16?.self).map(String.init) ?? "-") \(try row.decode(7, as: Float?.self).map { "\($0)" } ?? "-") "
                    + "\(try row.decode(8, as: Float?.self).map { "\($0)" } ?? "-")"
            }
        }
        let shown = try decoded(connection.query("SELECT \(columns) FROM beaconflow.sightings ORDER BY 1, 3, 5"))
        let derived = rows.map { row in
            "\(row.timeMicros) \(row.siteID) \(row.agentID) \(row.zoneID ?? "-") \(row.beaconID) \(row.rssi) "
                + "\(row.powerAt1mDbm.map(String.init) ?? "-") \(row.distanceMeters.map { "\($0)" } ?? "-") "
                + "\(row.smoothedDistanceMeters.map { "\($0)" } ?? "-")"
        }
        #expect(shown.count == 400)
        // Sorted as text: the same (time, agent, beacon) repeats, heard again by a later batch.
        let (stored, computed) = (shown.sorted(), derived.sorted())
        #expect(stored == computed, "first difference: \(String(describing: zip(stored, computed).first { $0 != $1 }))")
        // The offset of hq-a1 moved its distances and not hq-a2's.
        #expect(try connection.query("SELECT count(DISTINCT distance_m) FROM beaconflow.sightings WHERE rssi = -40") == [["2"]])
        let window = "'2025-12-31T23:59:30Z', '2026-01-01T00:00:10.5Z'"
        #expect(
            try decoded(connection.query("SELECT \(columns) FROM beaconflow.sightings_between(\(window)) WHERE site_id = 'hq' ORDER BY 1, 3, 5"))
                == decoded(connection.query("SELECT \(columns) FROM beaconflow.sightings WHERE ts >= '2025-12-31T23:59:30Z' AND ts < '2026-01-01T00:00:10.5Z' AND site_id = 'hq' ORDER BY 1, 3, 5")))
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings_between(\(window))") == [["164"]])
        // One rollup row per (minute, agent, beacon), counting each sighting once.
        #expect(
            try connection.query(
                """
                SELECT agent_id, count(*), sum(sightings), min(rssi_min), max(rssi_max), round(sum(rssi_mean * sightings))
                FROM beaconflow.sightings_minute GROUP BY 1 ORDER BY 1
                """) == [["hq-a1", "4", "300", "-89", "-40", "-19350"], ["hq-a2", "2", "100", "-89", "-40", "-6450"]])
        #expect(try connection.query("SELECT sum(sightings) FROM beaconflow.sightings_minute WHERE minute = '2026-01-01T00:00:00Z'") == [["200"]])
    }

    /// `beacons` says how each beacon was last heard (address, address type, advertising event, from its newest
    /// sighting, whichever batch brings it) and the URL of its Eddystone-URL frames.
    @Test func theBeaconsViewSaysHowEachBeaconWasLastHeard() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: try SitesConfiguration.parse(testSites)))
        let uid = BeaconKey(
            beaconID: "eddystone:0102030405060708090a:0000000000a1", address: 0xC0FF_EE00_0001, addressIsRandom: true,
            powerAt1mDbm: -62, advertisingEvent: 0x10)
        var extended = uid
        extended.advertisingEvent = 0x00
        let phone = BeaconKey(beaconID: "mac:00:1A:7D:DA:71:13", address: 0x001A_7DDA_7113, addressIsRandom: false)
        let start: Int64 = 1_767_225_600_000_000
        func batch(_ sequence: UInt64, _ sightings: [Sighting]) throws -> DecodedBatch {
            var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 1)
            for sighting in sightings { _ = builder.add(sighting, nowNanoseconds: 0) }
            let sealed = builder.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: start)
            return try BatchReader.decode(try #require(sealed).wireBytes())
        }
        // "https://example.com/" in Eddystone-URL's encoding.
        let url = DataFrameContent.eddystone(FrameBytes([0x10, 0xEB, 0x03] + Array("example".utf8) + [0x00]))
        _ = try writer.commit(
            [try batch(1, [
                Sighting(timeMicros: start, beacon: uid, rssi: -60),
                Sighting(timeMicros: start + 1_000_000, beacon: extended, rssi: -60, data: url),
                Sighting(timeMicros: start, beacon: phone, rssi: -70),
            ])], state: &state, nowMicros: start)
        // A later batch with an older sighting (another agent's, late) changes nothing.
        var late = try batch(1, [Sighting(timeMicros: start + 500_000, beacon: uid, rssi: -65)])
        late.agentID = "hq-a2"
        _ = try writer.commit([late], state: &state, nowMicros: start)
        let columns = "beacon_id, kind, address::text, address_type, advertising_event, url"
        #expect(
            try connection.query("SELECT \(columns) FROM beaconflow.beacons ORDER BY 1") == [
                ["eddystone:0102030405060708090a:0000000000a1", "eddystone-uid", "c0:ff:ee:00:00:01", "random", "ext",
                 "https://example.com/"],
                ["mac:00:1A:7D:DA:71:13", nil, "00:1a:7d:da:71:13", "public", nil, nil],
            ])
    }

    @Test func aBatchThatFailsLeavesNothingBehindAndCanBeSentAgain() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: try SitesConfiguration.parse(testSites)))
        // PostgreSQL text cannot hold NUL: the COPY fails after the batches row was inserted.
        do {
            _ = try writer.commit(try decodedBatch(sequence: 3, beaconID: "mac:\u{0}"), state: &state)
            Issue.record("a NUL in text was accepted")
        } catch let error as PostgresError {
            #expect(error.sqlState != nil)
        }
        #expect(try connection.query("SELECT count(*) FROM beaconflow.batches") == [["0"]])
        #expect(try writer.commit(try decodedBatch(sequence: 3), state: &state) == .committed(rows: 100))
    }
}

/// A claim's read-back of a flood at one instant, against PostgreSQL: seconds of work alone, minutes beside the
/// rest of the suite on two cores, so under a limit of its own.
@Suite(.enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"), .timeLimit(.minutes(5)))
struct OneInstantReadBackTests {
    /// 300,000 sightings stored at one instant (three batches of the wire's largest, as one credential can send)
    /// beside a neighbour's ordinary minute: a claim reads them back a page at a time, never all at once, and
    /// every stored sighting goes through the zone tracker.
    @Test func sightingsThatShareOneInstantAreReadBackAPageAtATime() async throws {
        let server = try await SharedDatabase.create()
        let conninfo = server.conninfo
        try await Migrator.migrateOffThePool(try PostgresConnection(conninfo), logger: Logger(label: "test"))
        // Seconds of synchronous work: on a thread of its own, not one of the few the other tests wait on.
        try await onThread {
            let connection = try PostgresConnection(conninfo)
            let sites = try SitesConfiguration.parse(testSites)
            let instant: Int64 = 1_767_225_630_000_000
            let writer = BatchWriter(connection: connection)
            var state = WriterState(pipeline: IngestPipeline(sites: sites))
            let key = BeaconKey(beaconID: "mac:C0:00:00:00:00:01", address: 0xC000_0000_0001, addressIsRandom: true)
            for sequence in UInt64(1)...3 {
                var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 1)
                builder.configuration.maximumSightings = BatchReader.maximumSightings
                for _ in 0..<BatchReader.maximumSightings {
                    _ = builder.add(Sighting(timeMicros: instant, beacon: key, rssi: -60), nowNanoseconds: 0)
                }
                let sealed = builder.seal(sequence: sequence, firstUnacknowledgedSequence: 1, agentClockMicros: instant)
                _ = try writer.commit([BatchReader.decode(try #require(sealed).wireBytes())], state: &state, nowMicros: instant + 1_000_000)
            }
            var neighbour = BatchBuilder(siteID: "hq", agentID: "hq-a2", bootID: 1)
            for second in 0..<60 {
                _ = neighbour.add(Sighting(timeMicros: instant - 30_000_000 + Int64(second) * 1_000_000, beacon: key, rssi: -75), nowNanoseconds: 0)
            }
            let sealed = neighbour.seal(sequence: 1, firstUnacknowledgedSequence: 1, agentClockMicros: instant)
            _ = try writer.commit([BatchReader.decode(try #require(sealed).wireBytes())], state: &state, nowMicros: instant + 31_000_000)
            #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings").first?[0] == "300060")
            let visits = "SELECT zone_id, enter_ts, exit_ts FROM beaconflow.visits ORDER BY 2"
            let placed = try connection.query(visits).map(\.values)

            try connection.execute("DELETE FROM beaconflow.zone_checkpoints; DELETE FROM beaconflow.zone_occupancy_minute; DELETE FROM beaconflow.visits_raw")
            let resumed = BatchWriter(connection: connection)
            var resumedState = WriterState(pipeline: IngestPipeline(sites: sites))
            let resumption = try resumed.resumeZones(sites: ["hq"], state: &resumedState, nowMicros: instant + 60_000_000)
            #expect(resumption.replayedSightings == 300_060)
            #expect(resumption.peakReadSightings <= 50_000, "\(resumption.peakReadSightings) sightings read at once")
            #expect(try connection.query(visits).map(\.values) == placed)
        }
        withExtendedLifetime(server) {}
    }
}
