import BeaconIngest
import Foundation
import LibPQ
import LocalServers
import TestServers
import Testing

/// Leases are renewed on their own session and thread: a writer busy for longer than a lease keeps its sites.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(6)))
struct LeaseKeeperTests {
    /// A site whose read-back at a claim takes several leases (a backlog of stored sightings, a 1 s lease) is kept
    /// by the instance that claimed it while a second instance watches every 100 ms for a lapsed lease: no site is
    /// lost or taken back and forth, and the claimant serves it once the read-back is done.
    @Test func aClaimWhoseReadBackOutlastsTheLeaseKeepsItsSite() async throws {
        let harness = try await IngestHarness.start {
            $0.leaseDuration = .seconds(1)
            $0.rebalanceInterval = .milliseconds(100)
        }
        let (client, _) = try await harness.client()
        defer { client.stop() }
        // 16 batches of 10,000 sightings, a second apart, then the site is handed over with the stop.
        func publishBacklog() throws {
            for sequence in UInt64(1)...16 {
                try client.publish(
                    topic: "beaconflow/v1/hq/hq-a1/batch",
                    payload: try batchPayload(sequence: sequence, count: 10_000, start: 1_767_225_600_000_000 + Int64(sequence) * 10_000_000_000))
            }
        }
        try publishBacklog()
        try await harness.eventually("every batch stored or deferred", timeout: .seconds(120)) {
            harness.ingest.statistics.batchesCommitted + harness.ingest.statistics.batchesDeferred >= 16
        }
        if harness.ingest.statistics.batchesCommitted < 16 {
            // A batch that came while the ingest was reconnecting to PostgreSQL (on a loaded machine) was deferred,
            // not acknowledged: sent again, as an agent sends what is not acknowledged (the others are duplicates).
            try publishBacklog()
        }
        try await harness.eventually("the backlog is stored", timeout: .seconds(120)) { harness.ingest.statistics.batchesCommitted == 16 }
        try await harness.stop()

        let first = harness.anotherIngest(clientID: "test-ingest-b")
        let second = harness.anotherIngest(clientID: "test-ingest-c")
        defer {
            first.ingest.requestStop()
            second.ingest.requestStop()
        }
        let started = ContinuousClock.now
        try await harness.eventually("an instance claims hq", timeout: .seconds(60)) {
            first.ingest.statistics.sitesServed + second.ingest.statistics.sitesServed == 1
        }
        let claimedAfter = ContinuousClock.now - started
        // Several leases more, with the other instance looking all the while.
        try await Task.sleep(for: .seconds(5))
        let statistics = [first.ingest.statistics, second.ingest.statistics]
        #expect(statistics.map(\.sitesLost) == [0, 0], "claimed after \(claimedAfter): \(statistics)")
        #expect(statistics.map(\.sitesTakenOver).reduce(0, +) == 1, "\(statistics)")
        #expect(statistics.map(\.sitesServed).reduce(0, +) == 1, "\(statistics)")
        let owners = try harness.query("SELECT instance FROM beaconflow.site_owners WHERE site_id = 'hq'")
        #expect(owners.count == 1)
        first.ingest.requestStop()
        second.ingest.requestStop()
        _ = try await first.task.value
        _ = try await second.task.value
    }
}
