import BeaconIngest
import BeaconWire
import Foundation
import LibPQ
import LocalServers
import Logging
import TestServers
import Testing
import WorkQueue

/// Closed minutes compacted to one pack per agent, beacon and minute, against a real PostgreSQL: the views show
/// the same sightings before and after, doing it again changes nothing, a late batch is merged in later, and a
/// compaction that dies before it commits leaves everything as it was.
@Suite(.enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"), .timeLimit(.minutes(5)))
struct PackCompactionTests {
    static let beacons = (1...3).map { "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:7:\($0)" }

    /// One agent's batch of one second: each beacon heard three times, at times and levels that differ.
    static func secondBatch(agent: String, sequence: UInt64, startMicros: Int64) throws -> DecodedBatch {
        var builder = BatchBuilder(siteID: "hq", agentID: agent, bootID: 1)
        for (index, beaconID) in beacons.enumerated() {
            let key = BeaconKey(beaconID: beaconID, address: 0xC000_0000_0010 + UInt64(index), addressIsRandom: true, powerAt1mDbm: -59)
            for reading in 0..<3 {
                let time = startMicros + Int64(reading) * 330_000 + Int64(index) * 7_000
                _ = builder.add(Sighting(timeMicros: time, beacon: key, rssi: Int8(-50 - (Int(sequence) + reading + index) % 30)), nowNanoseconds: 0)
            }
        }
        let sealed = builder.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: 0)
        return try BatchReader.decode(try #require(sealed).wireBytes())
    }

    static let sightingsQuery = """
        SELECT ts, site_id, agent_id, agent_zone_id, beacon_id, rssi, tx_power, distance_m, smoothed_distance_m
        FROM beaconflow.sightings ORDER BY ts, agent_id, beacon_id, rssi, smoothed_distance_m
        """

    @Test func theViewsShowTheSameSightingsFromFewerPacks() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: try SitesConfiguration.parse(testSites)))
        // Two and a half minutes of one-second batches from two agents, ten minutes ago.
        let minute: Int64 = 60_000_000
        let start = (wallClockMicros() - 10 * minute) / minute * minute + 20_000_000
        var sequences: [String: UInt64] = ["hq-a1": 0, "hq-a2": 0]
        func send(_ agent: String, at time: Int64) throws {
            sequences[agent]! += 1
            _ = try writer.commit(try Self.secondBatch(agent: agent, sequence: sequences[agent]!, startMicros: time), state: &state)
        }
        for second in 0..<150 {
            for agent in ["hq-a1", "hq-a2"] { try send(agent, at: start + Int64(second) * 1_000_000) }
        }
        func packs() throws -> Int { Int(try connection.query("SELECT count(*) FROM beaconflow.sighting_packs")[0][0] ?? "") ?? -1 }
        let before = try connection.query(Self.sightingsQuery)
        let window = "sightings_between(to_timestamp(\(Double(start) / 1e6 + 30)), to_timestamp(\(Double(start) / 1e6 + 100)))"
        let windowBefore = try connection.query("SELECT * FROM beaconflow.\(window) ORDER BY 1, 3, 5, 6, 9")
        #expect(before.count == 150 * 2 * 3 * 3 && windowBefore.count == 70 * 2 * 3 * 3)
        #expect(try packs() == 150 * 2 * 3)

        // The ingest's own call, with the lag at nothing: every minute before the current one is closed.
        try connection.execute("UPDATE beaconflow.settings SET value = '0' WHERE key = 'compaction_lag_minutes'")
        let written = try writer.compactPacks(sites: state.servedSites)
        // The batches cover three UTC minutes (20 s, 60 s and 70 s of them): one pack per agent, beacon and minute.
        #expect(written == 3 * 2 * 3)
        #expect(try packs() == 3 * 2 * 3)
        #expect(try connection.query(Self.sightingsQuery) == before)
        #expect(try connection.query("SELECT * FROM beaconflow.\(window) ORDER BY 1, 3, 5, 6, 9") == windowBefore)
        // Each pack in columns (the agents send milliseconds; the smoothed RSSI in half dB, one byte), within one
        // minute, its readings in time order, its time its first reading's.
        let misplaced = try connection.query(
            """
            SELECT count(*) FROM beaconflow.sighting_packs p
            WHERE p.readings IS NOT NULL OR p.reading_smoothed IS NOT NULL
               OR cardinality(p.reading_ms) <> cardinality(p.reading_rssi)
               OR cardinality(p.reading_ms) <> cardinality(p.reading_smoothed_half)
               OR date_trunc('minute', p.ts AT TIME ZONE 'UTC') <> date_trunc('minute', (p.ts + (p.reading_ms[cardinality(p.reading_ms)] + 32768) * interval '1 millisecond') AT TIME ZONE 'UTC')
               OR p.reading_ms[1] <> -32768
               OR p.reading_ms <> ARRAY(SELECT m FROM unnest(p.reading_ms) m ORDER BY m)
            """)
        #expect(misplaced == [["0"]])
        // Again: nothing to do.
        #expect(try writer.compactPacks(sites: state.servedSites) == 0)
        #expect(try packs() == 18)

        // A late batch for a compacted minute is stored beside its pack and merged in by the next compaction.
        try send("hq-a1", at: start + 45_000_000)
        #expect(try packs() == 21)
        let withLate = try connection.query(Self.sightingsQuery)
        #expect(withLate.count == before.count + 9)

        // A compaction that dies before it commits (the ingest killed, its session ended) changes nothing.
        let doomed = try PostgresConnection(server.conninfo)
        let pid = try doomed.query("SELECT pg_backend_pid()")[0][0] ?? ""
        try doomed.execute("BEGIN")
        #expect(try doomed.query("SELECT beaconflow.compact_sighting_packs('hq', now() - interval '2 hours', now())") == [["3"]])
        #expect(try connection.query("SELECT pg_terminate_backend(\(pid))") == [["t"]])
        #expect(try packs() == 21)
        #expect(try connection.query(Self.sightingsQuery) == withLate)

        #expect(try writer.compactPacks(sites: state.servedSites) == 3)
        #expect(try packs() == 18)
        #expect(try connection.query(Self.sightingsQuery) == withLate)

        // Two instances compacting the site at once (a lease handed over mid-run): one waits for the other and
        // finds nothing left; nothing is lost or doubled.
        try send("hq-a2", at: start + 95_000_000)
        let withSecondLate = try connection.query(Self.sightingsQuery)
        let conninfo = server.conninfo
        @Sendable func compactOnItsOwnConnection() throws -> String {
            try PostgresConnection(conninfo).query("SELECT beaconflow.compact_sighting_packs('hq', now() - interval '2 hours', now())")[0][0] ?? ""
        }
        async let first = onThread(compactOnItsOwnConnection)
        async let second = onThread(compactOnItsOwnConnection)
        #expect(Set([try await first, try await second]) == ["3", "0"])
        #expect(try packs() == 18)
        #expect(try connection.query(Self.sightingsQuery) == withSecondLate)

        // Bad windows are refused, named.
        #expect(throws: PostgresError.self) {
            try connection.query("SELECT beaconflow.compact_sighting_packs('hq', now(), now() - interval '1 minute')")
        }
    }

    /// An agent that sends microseconds: its minutes are merged in the `bigint[]` form, while another's in
    /// milliseconds go to columns; a minute compacted before in that form whose readings fall on whole
    /// milliseconds is rewritten in columns. The views show the same sightings throughout.
    @Test func minutesInMicrosecondsKeepTheirFormAndOldCompactedMinutesMoveToColumns() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: try SitesConfiguration.parse(testSites)))
        let minute: Int64 = 60_000_000
        let start = (wallClockMicros() - 10 * minute) / minute * minute + 5_000_000
        var configuration = BatchBuilder.Configuration()
        configuration.timeUnitMicros = 1
        for second in 0..<20 {
            var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 1, configuration: configuration)
            let key = BeaconKey(beaconID: Self.beacons[0], address: 0xC000_0000_0010, addressIsRandom: true, powerAt1mDbm: -59)
            _ = builder.add(Sighting(timeMicros: start + Int64(second) * 1_000_017, beacon: key, rssi: Int8(-60 - second % 7)), nowNanoseconds: 0)
            let sealed = builder.seal(sequence: UInt64(second + 1), firstUnacknowledgedSequence: 1, agentClockMicros: 0)
            _ = try writer.commit(try BatchReader.decode(try #require(sealed).wireBytes()), state: &state)
        }
        // The other agent in milliseconds, in the same minute.
        _ = try writer.commit(try Self.secondBatch(agent: "hq-a2", sequence: 1, startMicros: start + 1_000_000), state: &state)
        let before = try connection.query(Self.sightingsQuery)
        #expect(before.count == 20 + 9)
        try connection.execute("UPDATE beaconflow.settings SET value = '0' WHERE key = 'compaction_lag_minutes'")
        // The microsecond minute merged as before; the millisecond packs (one per beacon, alone in their minute)
        // rewritten in columns. Again: nothing to do.
        #expect(try writer.compactPacks(sites: state.servedSites) == 4)
        #expect(try writer.compactPacks(sites: state.servedSites) == 0)
        let forms = "SELECT readings IS NULL, count(*) FROM beaconflow.sighting_packs GROUP BY 1 ORDER BY 1"
        #expect(try connection.query(forms) == [["f", "1"], ["t", "3"]])
        #expect(try connection.query(Self.sightingsQuery) == before)

        // A pack merged in the old form from whole milliseconds (as compacted before the columns) moves to them.
        try connection.execute(
            """
            INSERT INTO beaconflow.sighting_packs (ts, source_key, beacon_key, tx_power, readings)
            SELECT ts - interval '1 minute', source_key, beacon_key, tx_power,
                   ARRAY(SELECT ((m + 32768)::bigint * 1000 << 24) | ((r::integer + 128)::bigint << 16)
                                | ((h::integer - 127) * 50 + 32768)::bigint
                         FROM unnest(reading_ms, reading_rssi, reading_smoothed_half) WITH ORDINALITY AS x(m, r, h, n) ORDER BY n)
            FROM beaconflow.sighting_packs WHERE readings IS NULL
            """)
        let withOld = try connection.query(Self.sightingsQuery)
        #expect(withOld.count == before.count + 9)
        #expect(try writer.compactPacks(sites: state.servedSites) == 3)
        #expect(try connection.query(forms) == [["f", "1"], ["t", "6"]])
        #expect(try connection.query(Self.sightingsQuery) == withOld)

        // A minute stored before the half-dB smoothing (hundredths) and compacted in columns, with a late pack
        // beside it: merged, it keeps the two-byte smoothed values, and the views show the same sightings.
        try connection.execute(
            """
            INSERT INTO beaconflow.sighting_packs (ts, source_key, beacon_key, tx_power, reading_ms, reading_rssi, reading_smoothed)
            SELECT ts - interval '2 minutes', source_key, beacon_key, tx_power, reading_ms, reading_rssi,
                   ARRAY(SELECT ((h::integer - 127) * 50 + 7)::smallint FROM unnest(reading_smoothed_half) WITH ORDINALITY AS x(h, n) ORDER BY n)
            FROM beaconflow.sighting_packs
            WHERE reading_smoothed_half IS NOT NULL
              AND ts >= (SELECT max(date_trunc('minute', ts)) FROM beaconflow.sighting_packs WHERE readings IS NULL)
            """)
        try connection.execute(
            """
            INSERT INTO beaconflow.sighting_packs (ts, source_key, beacon_key, tx_power, readings)
            SELECT ts + interval '1 second', source_key, beacon_key, tx_power, ARRAY[((r::integer + 128)::bigint << 16) | 32768 - 6101]
            FROM beaconflow.sighting_packs, unnest(reading_rssi[1:1]) AS r WHERE reading_smoothed IS NOT NULL
            """)
        let withHundredths = try connection.query(Self.sightingsQuery)
        #expect(withHundredths.count == withOld.count + 9 + 3)
        #expect(try writer.compactPacks(sites: state.servedSites) == 3)
        let smoothedForms = """
            SELECT reading_smoothed IS NOT NULL, reading_smoothed_half IS NOT NULL, count(*)
            FROM beaconflow.sighting_packs WHERE readings IS NULL GROUP BY 1, 2 ORDER BY 1, 2
            """
        #expect(try connection.query(smoothedForms) == [["f", "t", "6"], ["t", "f", "3"]])
        #expect(try connection.query(Self.sightingsQuery) == withHundredths)
    }
}
