import BeaconIngest
import BeaconWire
import LibPQ
import LocalServers
import Logging
import TestServers
import Testing

/// The frames a beacon sends before any receiver of its site has heard its identity, against PostgreSQL: they wait
/// in `waiting_frames`, across a restart, and are stored as the beacon's once its identity comes.
@Suite(.enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"), .timeLimit(.minutes(5)))
struct WaitingFramesTests {
    static let start: Int64 = 1_767_225_600_000_000
    static let ibeacon = "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2"
    static let address: UInt64 = 0xC0FF_EE00_0001
    /// Eddystone-URL https://example.com/ and Eddystone-TLM (3000 mV, 24.5 °C, count 256, uptime 51.2 s).
    static let url = DataFrameContent.eddystone([0x10, 0xEB, 0x03, 0x65, 0x78, 0x61, 0x6D, 0x70, 0x6C, 0x65, 0x00])
    static let tlm = DataFrameContent.eddystone([0x20, 0x00, 0x0B, 0xB8, 0x18, 0x80, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00])

    static func at(_ seconds: Int64) -> Int64 { start + seconds * 1_000_000 }

    /// A batch of `agent` as it comes off the wire.
    static func batch(_ agent: String, _ sequence: UInt64, _ sightings: [Sighting]) throws -> DecodedBatch {
        var builder = BatchBuilder(siteID: "hq", agentID: agent, bootID: 1)
        for sighting in sightings { _ = builder.add(sighting, nowNanoseconds: 0) }
        let sealed = builder.seal(sequence: sequence, firstUnacknowledgedSequence: sequence, agentClockMicros: sightings[0].timeMicros)
        return try BatchReader.decode(try #require(sealed).wireBytes())
    }

    static func address(_ value: UInt64) -> BeaconKey {
        BeaconKey(beaconID: "mac:" + DeviceAddress(value: value, kind: .random).description, address: value, addressIsRandom: true)
    }

    /// hq-a1 hears the beacon's URL and TLM; the ingest restarts; hq-a2 hears its iBeacon frame four seconds after
    /// the URL. Every row is the beacon's, the telemetry once, nothing waits; the same after both batches come
    /// again, to the running ingest and to another restarted one.
    @Test func framesHeardBeforeTheIdentityAreTheBeaconsAcrossARestart() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let sites = try SitesConfiguration.parse(testSites)
        let first = try Self.batch("hq-a1", 1, [
            Sighting(timeMicros: Self.at(0), beacon: Self.address(Self.address), rssi: -70, data: Self.url),
            Sighting(timeMicros: Self.at(1), beacon: Self.address(Self.address), rssi: -71, data: Self.tlm),
        ])
        let identified = BeaconKey(beaconID: Self.ibeacon, address: Self.address, addressIsRandom: true, powerAt1mDbm: -59)
        let second = try Self.batch("hq-a2", 1, [Sighting(timeMicros: Self.at(4), beacon: identified, rssi: -60)])

        var writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: sites))
        let held = try writer.commit([first], state: &state, nowMicros: Self.at(2))
        #expect(held.acknowledgements[AgentKey(site: "hq", agent: "hq-a1")] == 1 && held.framesWaiting == 2)
        #expect(try connection.query("SELECT agent_id, count(*) FROM beaconflow.waiting_frames GROUP BY 1") == [["hq-a1", "2"]])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sightings") == [["0"]])

        // A restart: the frames wait again, taken back from the database.
        writer = BatchWriter(connection: connection)
        state = WriterState(pipeline: IngestPipeline(sites: sites))
        _ = try writer.resumeZones(sites: ["hq"], state: &state, nowMicros: Self.at(3))
        #expect(state.pipeline.framesWaiting == 2)
        let claimed = try writer.commit([second], state: &state, nowMicros: Self.at(5))
        #expect(claimed.framesWaiting == 0 && claimed.telemetryRows == 1)

        let rows = "SELECT beacon_id, agent_id, count(*) FROM beaconflow.sightings GROUP BY 1, 2 ORDER BY 2"
        let telemetry = "SELECT beacon_id, agent_id, adv_count FROM beaconflow.telemetry"
        let expected: [[String?]] = [[Self.ibeacon, "hq-a1", "2"], [Self.ibeacon, "hq-a2", "1"]]
        #expect(try connection.query(rows).map(\.values) == expected)
        #expect(try connection.query(telemetry) == [[Self.ibeacon, "hq-a1", "256"]])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.waiting_frames") == [["0"]])

        // Both batches again, to this ingest and to a restarted one: duplicates, nothing changes.
        _ = try writer.commit([first, second], state: &state, nowMicros: Self.at(6))
        writer = BatchWriter(connection: connection)
        state = WriterState(pipeline: IngestPipeline(sites: sites))
        _ = try writer.resumeZones(sites: ["hq"], state: &state, nowMicros: Self.at(7))
        let replayed = try writer.commit([first, second], state: &state, nowMicros: Self.at(8))
        #expect(replayed.outcomes == [.duplicate, .duplicate])
        #expect(try connection.query(rows).map(\.values) == expected)
        #expect(try connection.query(telemetry) == [[Self.ibeacon, "hq-a1", "256"]])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.beacons WHERE beacon_id LIKE 'mac:%'") == [["0"]])
    }

    /// A frame whose address shows no identity waits its time, then is stored under the address even when no
    /// batch comes: by the writer's tick.
    @Test func aFrameNoIdentityClaimsIsStoredUnderItsAddressAfterTheWait() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: try SitesConfiguration.parse(testSites)))
        _ = try writer.commit([try Self.batch("hq-a1", 1, [Sighting(timeMicros: Self.at(0), beacon: Self.address(0xC0FF_EE00_0002), rssi: -70, data: Self.tlm)])], state: &state, nowMicros: Self.at(1))
        #expect(try writer.expireWaitingFrames(state: &state, nowMicros: Self.at(10)) == (0, 1))
        #expect(try writer.expireWaitingFrames(state: &state, nowMicros: Self.at(17)) == (1, 0))
        #expect(try connection.query("SELECT beacon_id, agent_id FROM beaconflow.sightings") == [["mac:C0:FF:EE:00:00:02", "hq-a1"]])
        #expect(try connection.query("SELECT beacon_id, adv_count FROM beaconflow.telemetry") == [["mac:C0:FF:EE:00:00:02", "256"]])
        #expect(try connection.query("SELECT count(*) FROM beaconflow.waiting_frames") == [["0"]])
    }

    /// hq-a1 hears only the beacon's URL and TLM frames for two minutes: after the wait they are stored under the
    /// address, which gets its own place in the lobby and a visit. The ingest restarts; then hq-a2 hears the
    /// beacon's iBeacon frame from the same address. Everything stored under the address is the beacon's, in that
    /// transaction: sightings and their minutes, the telemetry once, the visit, the live zone, fleet health; no
    /// address beacon is left. Both agents' batches again, to a restarted ingest: nothing changes.
    @Test func anAddressBeaconTiedLaterIsMergedIntoTheBeaconAcrossARestart() async throws {
        let server = try await SharedDatabase.create()
        let connection = try PostgresConnection(server.conninfo)
        try await Migrator.migrateOffThePool(connection, logger: Logger(label: "test"))
        let sites = try SitesConfiguration.parse(testSites)
        let other = Self.address(0xC0FF_EE00_0009)
        var batches: [[DecodedBatch]] = []
        for second in Int64(0)..<120 {
            let frame = second % 10 == 1 ? Self.tlm : Self.url
            batches.append([
                try Self.batch("hq-a1", UInt64(second + 1), [Sighting(timeMicros: Self.at(second), beacon: Self.address(Self.address), rssi: -60, data: frame)]),
                try Self.batch("hq-a2", UInt64(second + 1), [Sighting(timeMicros: Self.at(second), beacon: other, rssi: -85)]),
            ])
        }
        let identified = BeaconKey(beaconID: Self.ibeacon, address: Self.address, addressIsRandom: true, powerAt1mDbm: -59)
        let identity = try Self.batch("hq-a2", 121, [Sighting(timeMicros: Self.at(120), beacon: identified, rssi: -75)])

        var writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: sites))
        for (second, group) in batches.enumerated() {
            _ = try writer.commit(group, state: &state, nowMicros: Self.at(Int64(second) + 1))
        }
        let mac = "mac:C0:FF:EE:00:00:01"
        let perBeacon = """
            SELECT beacon_id, (SELECT count(*) FROM beaconflow.sightings s WHERE s.beacon_id = b.beacon_id),
                   (SELECT sum(sightings) FROM beaconflow.sightings_minute m WHERE m.beacon_id = b.beacon_id),
                   (SELECT count(*) FROM beaconflow.telemetry t WHERE t.beacon_id = b.beacon_id),
                   (SELECT count(*) FROM beaconflow.visits v WHERE v.beacon_id = b.beacon_id),
                   (SELECT zone_id FROM beaconflow.beacon_locations l WHERE l.beacon_id = b.beacon_id),
                   (SELECT battery_mv FROM beaconflow.beacon_health h WHERE h.beacon_id = b.beacon_id)
            FROM beaconflow.beacons b WHERE b.beacon_id <> '\(other.beaconID)' ORDER BY 1
            """
        let before = try connection.query(perBeacon).map(\.values)
        // The frames of the first 15 s waited, and were stored after them (the ingest's clock runs a second ahead).
        #expect(before.count == 1 && before.first?[0] == mac, "\(before)")
        let macSightings = Int(before.first?[1] ?? "") ?? 0
        #expect(macSightings >= 100, "\(before)")
        #expect(before.first.map { Array($0[2...]) } == ["\(macSightings)", "1", "1", "lobby", "3000"], "\(before)")
        let batteryStates = "SELECT beacon_id FROM beaconflow.fleet_health_state ORDER BY 1"
        #expect(try connection.query(batteryStates).map(\.values) == [[mac]])

        // A restart: the address beacon is taken back from the database, to be merged still.
        writer = BatchWriter(connection: connection)
        state = WriterState(pipeline: IngestPipeline(sites: sites))
        _ = try writer.resumeZones(sites: ["hq"], state: &state, nowMicros: Self.at(121))
        let merged = try writer.commit([identity], state: &state, nowMicros: Self.at(122))
        #expect(merged.addressBeaconsMerged == 1)
        let after = try connection.query(perBeacon).map(\.values)
        #expect(after == [[Self.ibeacon, "\(macSightings + 1)", "\(macSightings + 1)", "1", "1", "lobby", "3000"]], "\(after)")
        // The address's battery state went with its row; the beacon's is saved from what it took over.
        let savedAfter = try connection.query(batteryStates).map(\.values)
        #expect(savedAfter == [[Self.ibeacon]], "\(savedAfter)")
        #expect(try connection.query("SELECT count(*) FROM beaconflow.sighting_packs p JOIN beaconflow.beacon_keys k USING (beacon_key) WHERE k.beacon_id = '\(mac)'") == [["0"]])
        let visit = try connection.query("SELECT zone_id, enter_ts = to_timestamp(\(Self.at(0)) / 1e6) FROM beaconflow.visits WHERE beacon_id = '\(Self.ibeacon)'")
        #expect(visit.map(\.values) == [["lobby", "t"]], "\(visit.map(\.values))")

        // Every batch again, to a restarted ingest: duplicates, and nothing moves.
        writer = BatchWriter(connection: connection)
        state = WriterState(pipeline: IngestPipeline(sites: sites))
        _ = try writer.resumeZones(sites: ["hq"], state: &state, nowMicros: Self.at(123))
        let replayed = try writer.commit(batches.flatMap { $0 } + [identity], state: &state, nowMicros: Self.at(124))
        #expect(replayed.outcomes.allSatisfy { $0 == .duplicate } && replayed.addressBeaconsMerged == 0)
        #expect(try connection.query(perBeacon).map(\.values) == after)
    }
}
