import AccuracyHarness
import LocalServers
import Logging
import Testing

/// A simulated fleet's months of TLM through an agent, mosquitto, the ingest and PostgreSQL, its days' partitions
/// made first as for an import (docs/architecture.md).
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(5)))
struct BatteryFleetPipelineTests {
    /// Ten beacons over 60 days, and one first heard with its counters restarted on a used cell: every beacon's `beacon_health` at the end is the harness's forecast after its last
    /// transmission, each TLM frame filed under its beacon's identity. Without the writer finding the days made
    /// ahead, the agent's budget of new days would pace it at 4 days a minute (15 minutes), past the bound. It runs
    /// beside the other recordings (scripts/test), away from the first run's load.
    @Test func aFleetsMonthsThroughThePipelineEndAsTheHarnessForecasts() async throws {
        var fleet = BatteryFleet()
        fleet.seed = 3
        fleet.beacons = 10
        fleet.days = 60
        let database = try await PostgresServer.start()
        defer { database.stop() }
        let comparison = try await fleet.throughPipeline(database: database, logger: Logger(label: "battery-fleet"))
        #expect(comparison.beacons == 11 && comparison.transmissions > 10_000, "\(comparison)")
        #expect(comparison.matching == 11, "\(comparison.differing)")
        #expect(comparison.chargeCounting == 11 && comparison.addressRows == 0)
        #expect(comparison.notStoredCount == 0 && comparison.telemetryRows == comparison.transmissions, "\(comparison.notStored)")
        #expect(comparison.seconds < 240, "\(comparison.seconds) s")
    }
}
