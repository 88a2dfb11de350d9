import BeaconIngest
import BeaconWire
import Benchmark
import Foundation
import LibPQ
import LocalServers
import Logging

/// A busy site's sightings stored by the ingest's own writer (pipeline, packs, rollups, zones) in a throwaway
/// PostgreSQL: `agentCount` agents each hearing `heardPerAgent` of `beaconCount` beacons 4-7 times a second, in
/// one batch per agent per second, ending a minute before now. Then: the bytes each sighting takes on disk, and
/// the typical queries.
let agentCount = 10
let beaconCount = 150
let heardPerAgent = 90
let storedSightings = Int(ProcessInfo.processInfo.environment["STORAGE_SIGHTINGS"] ?? "") ?? 10_000_000
let siteID = "busy"

let sitesText = """
    sites:
      - id: \(siteID)
        zones: [\((0..<5).map { "{id: zone-\($0)}" }.joined(separator: ", "))]
        agents:
    \((0..<agentCount).map { "      - {id: agent-\($0), zone: zone-\($0 % 5), rssi_offset_db: \(Double($0 % 3) - 1)}" }.joined(separator: "\n"))
    """

func beaconID(_ index: Int) -> String { "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:\(index)" }

/// A small deterministic generator (SplitMix64).
struct SplitMix {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

final class Store: @unchecked Sendable {
    let database: PostgresServer
    let connection: PostgresConnection
    var sightings = 0
    var fillSeconds = 0.0

    init() async throws {
        database = try await PostgresServer.start()
        connection = try PostgresConnection(database.conninfo)
        try Migrator.migrate(connection, logger: Logger(label: "bench"))
        let writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: try SitesConfiguration.parse(sitesText)))
        var random = SplitMix(state: 1)
        let perSecond = agentCount * heardPerAgent * 11 / 2
        let seconds = (storedSightings + perSecond - 1) / perSecond
        let end = wallClockMicros() - 60_000_000
        let start = end - Int64(seconds) * 1_000_000
        let keys = (0..<beaconCount).map {
            BeaconKey(beaconID: beaconID($0), address: 0xC000_0000_0000 + UInt64($0), addressIsRandom: true, powerAt1mDbm: -59)
        }
        let began = ContinuousClock.now
        for second in 0..<seconds {
            let base = start + Int64(second) * 1_000_000
            var group: [DecodedBatch] = []
            for agent in 0..<agentCount {
                var list: [Sighting] = []
                for heard in 0..<heardPerAgent {
                    let beacon = (agent * 15 + heard) % beaconCount
                    let count = 4 + Int(random.next() % 4)
                    for advert in 0..<count {
                        let time = base + Int64(advert) * 1_000_000 / Int64(count) + Int64(random.next() % 20_000)
                        let rssi = Int8(-50 - Int((random.next() % 45)))
                        list.append(Sighting(timeMicros: time, beacon: keys[beacon], rssi: rssi))
                    }
                }
                list.sort { $0.timeMicros < $1.timeMicros }
                sightings += list.count
                group.append(
                    DecodedBatch(
                        siteID: siteID, agentID: "agent-\(agent)", bootID: 1, sequence: UInt64(second + 1),
                        firstUnacknowledgedSequence: UInt64(second + 1), agentClockMicros: base + 1_000_000, sightings: list))
            }
            _ = try writer.commit(group, state: &state, nowMicros: base + 1_000_000)
        }
        let elapsed = ContinuousClock.now - began
        fillSeconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        try connection.execute("VACUUM ANALYZE")
    }

    /// Heap, TOAST and indexes of a table and its partitions.
    func bytes(_ table: String) throws -> Int64 {
        try connection.query(
            """
            SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
            WHERE c.oid = $1::regclass OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = $1::regclass)
            """, ["beaconflow." + table])[0].decode(0, as: Int64.self)
    }

    func query(_ sql: String, _ binds: [any PostgresBindable] = []) throws {
        _ = try connection.query(sql, binds)
    }
}

nonisolated(unsafe) var store: Store!

let benchmarks: @Sendable () -> Void = {
    let setup: @Sendable () async throws -> Void = {
        if store == nil {
            store = try await Store()
            let packs = try store.bytes("sighting_packs")
            let dictionaries = try store.bytes("sighting_sources") + store.bytes("beacon_keys")
            let rollups = try store.bytes("sighting_minutes")
            let rows = try store.connection.query("SELECT count(*) FROM beaconflow.sighting_packs")[0].decode(0, as: Int64.self)
            FileHandle.standardError.write(
                Data(
                    """
                    stored \(store.sightings) sightings in \(rows) packs in \(String(format: "%.0f", store.fillSeconds)) s \
                    (\(Int(Double(store.sightings) / store.fillSeconds)) sightings/s through the writer);
                    packs with indexes \(packs) bytes, dictionaries \(dictionaries), per-minute rollups \(rollups);
                    bytes per sighting: \(String(format: "%.1f", Double(packs + dictionaries) / Double(store.sightings))) \
                    (rollups \(String(format: "%.1f", Double(rollups) / Double(store.sightings))) more)

                    """.utf8))
        }
    }
    // Each benchmark runs in its own process, which fills its own database and stops it at the end.
    let teardown: @Sendable () async throws -> Void = { await store?.database.stopAndWait() }
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock], timeUnits: .milliseconds, warmupIterations: 1, maxDuration: .seconds(30), maxIterations: 20,
        setup: setup, teardown: teardown)

    Benchmark("Bytes per sighting on disk", configuration: .init(
        metrics: [.custom("bytes per sighting", polarity: .prefersSmaller, useScalingFactor: false)], warmupIterations: 0,
        maxIterations: 1, setup: setup, teardown: teardown)) { benchmark in
        let bytes = try store.bytes("sighting_packs") + store.bytes("sighting_sources") + store.bytes("beacon_keys")
        benchmark.measurement(.custom("bytes per sighting"), Int(Double(bytes) / Double(store.sightings) * 10))
    }

    var beacon = 0
    Benchmark("One beacon's last hour, sightings_between", configuration: configuration) { _ in
        beacon = (beacon + 7) % beaconCount
        try store.query(
            """
            SELECT agent_id, count(*), avg(rssi), min(smoothed_distance_m) FROM beaconflow.sightings_between(now() - interval '1 hour', now())
            WHERE beacon_id = $1 GROUP BY 1
            """, [beaconID(beacon)])
    }
    Benchmark("One beacon's last hour, sightings view", configuration: configuration) { _ in
        beacon = (beacon + 7) % beaconCount
        try store.query(
            """
            SELECT agent_id, count(*), avg(rssi), min(smoothed_distance_m) FROM beaconflow.sightings
            WHERE beacon_id = $1 AND ts > now() - interval '1 hour' GROUP BY 1
            """, [beaconID(beacon)])
    }
    Benchmark("One site's last 5 minutes, sightings_between", configuration: configuration) { _ in
        try store.query(
            """
            SELECT agent_id, beacon_id, count(*), max(rssi) FROM beaconflow.sightings_between(now() - interval '5 minutes', now())
            WHERE site_id = $1 GROUP BY 1, 2
            """, [siteID])
    }
    Benchmark("One site's last 5 minutes, sightings view", configuration: configuration) { _ in
        try store.query(
            """
            SELECT agent_id, beacon_id, count(*), max(rssi) FROM beaconflow.sightings
            WHERE site_id = $1 AND ts > now() - interval '5 minutes' GROUP BY 1, 2
            """, [siteID])
    }
    Benchmark("Sightings per zone per day, sightings_minute", configuration: configuration) { _ in
        try store.query(
            """
            SELECT zone_id, date_trunc('day', minute), sum(sightings) FROM beaconflow.sightings_minute
            WHERE site_id = $1 GROUP BY 1, 2
            """, [siteID])
    }
    Benchmark("Sightings per zone per day, sightings view", configuration: configuration) { _ in
        try store.query(
            """
            SELECT zone_id, date_trunc('day', ts), count(*) FROM beaconflow.sightings WHERE site_id = $1 GROUP BY 1, 2
            """, [siteID])
    }
}
