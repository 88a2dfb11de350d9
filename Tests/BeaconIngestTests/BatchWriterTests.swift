import BeaconIngest
import BeaconWire
import Foundation
import LocalServers
import LibPQ
import Logging
import TestServers
import Testing

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
    return try BatchReader.decode(try wire.serializedBytes())
}

@Suite(.enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"), .timeLimit(.minutes(2)))
struct BatchWriterTests {
    @Test func aRedeliveredBatchGivesOneSetOfRows() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        try Migrator.migrate(connection, logger: Logger(label: "test"))
        let writer = BatchWriter(connection: connection, pipeline: IngestPipeline(sites: try SitesConfiguration.parse(testSites)))
        let batch = try decodedBatch(sequence: 7)
        #expect(try writer.commit(batch) == .committed(rows: 100))
        #expect(try writer.commit(batch) == .duplicate)
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings") == [["100"]])
        #expect(try connection.query("SELECT count(*), min(boot_id) FROM beaconflow.batches") == [["1", String(Int64(bitPattern: 0xFEED_0000_0000_0001))]])
        // Both days got their partition; values survive the binary COPY to the microsecond.
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings_raw_20251231") == [["50"]])
        let first = try connection.query(
            """
            SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), beacon_id, rssi, tx_power, round(distance_m::numeric, 3)
            FROM beaconflow.sightings ORDER BY ts LIMIT 1
            """)
        // -59 dBm at 1 m, -40 dBm heard: 10^((-59 + 40) / 25) = 0.174 m.
        #expect(first == [["2025-12-31T23:59:10.000000", "eddystone:0102030405060708090a:0000000000a1", "-40", "-59", "0.174"]])
    }

    @Test func aBatchThatFailsLeavesNothingBehindAndCanBeSentAgain() async throws {
        let server = try await PostgresServer.start()
        let connection = try PostgresConnection(server.conninfo)
        try Migrator.migrate(connection, logger: Logger(label: "test"))
        let writer = BatchWriter(connection: connection, pipeline: IngestPipeline(sites: try SitesConfiguration.parse(testSites)))
        // PostgreSQL text cannot hold NUL: the COPY fails after the batches row was inserted.
        do {
            _ = try writer.commit(try decodedBatch(sequence: 3, beaconID: "mac:\u{0}"))
            Issue.record("a NUL in text was accepted")
        } catch let error as PostgresError {
            #expect(error.sqlState != nil)
        }
        #expect(try connection.query("SELECT count(*) FROM beaconflow.batches") == [["0"]])
        #expect(try writer.commit(try decodedBatch(sequence: 3)) == .committed(rows: 100))
    }
}
