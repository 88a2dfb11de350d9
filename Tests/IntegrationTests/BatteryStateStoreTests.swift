import BeaconIngest
import BeaconWire
import LibPQ
import LocalServers
import Logging
import TestServers
import Testing
import WorkQueue

/// Battery forecasts kept across restarts (`fleet_health_state`): an ingest that restarts and claims its site again
/// forecasts as one that ran throughout.
@Suite(.enabled(if: PostgresServer.binaries != nil, "PostgreSQL is not installed"), .timeLimit(.minutes(5)))
struct BatteryStateStoreTests {
    static let start: Int64 = 1_767_225_600_000_000
    static let hour: Int64 = 3_600_000_000
    static let beaconID = "eddystone:0102030405060708090a:0000000000a1"

    /// A TLM transmission every three hours for `days`, a batch each: a coin cell advertising every 100 ms whose
    /// voltage falls 3 mV a day, read 60 mV lower in the cold of each night.
    static func batches(days: Int) throws -> [DecodedBatch] {
        let key = BeaconKey(beaconID: beaconID, address: 0xC000_0000_0001, addressIsRandom: true, powerAt1mDbm: -59)
        return try (0..<(days * 8)).map { index in
            let hours = Int64(index) * 3
            let night = hours % 24 >= 12
            let tenths = UInt32(hours * 36_000 + 3_600_000)
            let tlm = EddystoneTLM(
                batteryMillivolts: UInt16(2980 - Int(hours) / 8 - (night ? 60 : 0)), temperatureRaw: Int16(night ? -5 : 20) * 256,
                advertisingCount: tenths, uptimeTenths: tenths)
            var builder = BatchBuilder(siteID: "hq", agentID: "hq-a1", bootID: 1)
            let time = start + hours * hour
            _ = builder.add(Sighting(timeMicros: time, beacon: key, rssi: -60, data: .eddystone(FrameBytes([0x20, 0x00] + tlm.fieldBytes))), nowNanoseconds: 0)
            let sealed = builder.seal(sequence: UInt64(index + 1), firstUnacknowledgedSequence: UInt64(index + 1), agentClockMicros: time)
            return try BatchReader.decode(try #require(sealed).wireBytes())
        }
    }

    static let forecast = """
        SELECT est_days_left, days_left_low, days_left_high, replace_by, charge_left_pct, cell_since, forecast, status,
               battery_trend_mv_per_day, coldest_carried_c
        FROM beaconflow.beacon_health WHERE beacon_id = '\(beaconID)'
        """

    /// Commits the batches one by one; with `restartAfter`, a new writer and pipeline after that many, which resume
    /// the site from the database first (as a claim does). Returns `forecast`'s row at the end.
    static func run(_ conninfo: String, _ batches: [DecodedBatch], restartAfter: Int? = nil) throws -> [String?] {
        let connection = try PostgresConnection(conninfo)
        let sites = try SitesConfiguration.parse(testSites)
        var writer = BatchWriter(connection: connection)
        var state = WriterState(pipeline: IngestPipeline(sites: sites))
        for (index, batch) in batches.enumerated() {
            let now = batch.sightings[0].timeMicros + 1_000_000
            if index == restartAfter {
                writer = BatchWriter(connection: connection)
                state = WriterState(pipeline: IngestPipeline(sites: sites))
                let resumed = try writer.resumeZones(sites: ["hq"], state: &state, nowMicros: now)
                #expect(resumed.unreadableBatteryStates == 0)
            }
            _ = try writer.commit([batch], state: &state, nowMicros: now)
        }
        return try connection.query(forecast).first?.values ?? []
    }

    /// Twelve days of transmissions, the ingest restarted on day 8 in one database and not in the other: the same
    /// forecast, to the last column, and the cell dated from its first transmission rather than from the restart.
    @Test func aBatteryForecastGoesOnAcrossARestart() async throws {
        let throughout = try await SharedDatabase.create()
        let restarted = try await SharedDatabase.create()
        for server in [throughout, restarted] {
            try await Migrator.migrateOffThePool(try PostgresConnection(server.conninfo), logger: Logger(label: "test"))
        }
        let (conninfoThroughout, conninfoRestarted) = (throughout.conninfo, restarted.conninfo)
        // Seconds of synchronous commits: on a thread of their own.
        try await onThread {
            let batches = try Self.batches(days: 12)
            let once = try Self.run(conninfoThroughout, batches)
            let twice = try Self.run(conninfoRestarted, batches, restartAfter: 8 * 8)
            #expect(once.count == 10 && once[6] == "charge_counting", "\(once)")
            // A cell at most a few weeks into its life, half of them at -5 °C: it carries nights far colder.
            let coldest = try #require(once[9].flatMap(Double.init))
            #expect(coldest < -15 && coldest >= -40, "\(once)")
            #expect(twice == once)
            let connection = try PostgresConnection(conninfoRestarted)
            #expect(try connection.query("SELECT cell_since = to_timestamp(\(Self.start) / 1e6) FROM beaconflow.beacon_health") == [["t"]])
            let saved = try connection.query("SELECT beacon_id, site_id, octet_length(state) < 2000 FROM beaconflow.fleet_health_state")
            #expect(saved.map(\.values) == [[Self.beaconID, "hq", "t"]])
        }
        withExtendedLifetime((throughout, restarted)) {}
    }
}
