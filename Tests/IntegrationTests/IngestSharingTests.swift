import AccuracyHarness
import BeaconAgent
import BeaconIngest
import BeaconMessaging
import BeaconWire
import Foundation
import LibPQ
import LocalServers
import Logging
import Mosquitto
import Reporting
import Synchronization
import TestServers
import Testing
import WorkQueue

/// Several ingest instances sharing the sites: standing by, losing a session, unserved sites, hand-over.
extension IngestIntegrationTests {
    /// A second ingest on the same single site (the same broker and database) stands by while the first serves
    /// it, committing nothing, and takes over once the first has stopped.
    @Test func aSecondIngestOnTheSameSitesStandsByUntilTheFirstStops() async throws {
        let harness = try await IngestHarness.start()
        let (second, task) = harness.anotherIngest(clientID: "test-ingest-second")
        try await harness.eventually("the second ingest is on the broker and the database") {
            second.statistics.mqttConnected && second.statistics.databaseConnected
        }
        try await Task.sleep(for: .seconds(1))
        #expect(second.statistics.sitesServed == 0 && harness.ingest.statistics.sitesServed == 1)
        let (client, _) = try await harness.client()
        defer { client.stop() }
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 1))
        try await harness.eventually("the first ingest commits") { harness.ingest.statistics.batchesCommitted == 1 }
        #expect(second.statistics.batchesCommitted == 0 && second.statistics.batchesDuplicate == 0)
        let sites = try harness.query("SELECT count(DISTINCT site_id) FROM beaconflow.site_claims")[0][0]
        #expect(try harness.query("SELECT DISTINCT instance FROM beaconflow.site_owners") == [["test-ingest"]])
        #expect(try harness.query("SELECT count(*) FROM beaconflow.site_owners") == [[sites]])
        try await harness.stop()
        // The claims stay, but the view shows only those whose lease holds: the first ended its leases at its stop.
        #expect(try harness.count("beaconflow.site_owners WHERE instance = 'test-ingest'") == 0)
        try await harness.eventually("the second ingest takes the sites over") { second.statistics.sitesServed == 1 }
        #expect(try harness.query("SELECT DISTINCT instance FROM beaconflow.site_owners") == [["test-ingest-second"]])
        #expect(try harness.query("SELECT count(*) FROM beaconflow.site_owners WHERE since > now() - interval '1 minute'") == [[sites]])
        #expect(String(second.statistics.sitesTakenOver) == sites)
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 2, start: 1_767_225_700_000_000))
        try await harness.eventually("the second ingest commits the next batch") { second.statistics.batchesCommitted == 1 }
        #expect(try harness.count("beaconflow.batches") == 2)
        second.requestStop()
        try await task.value
    }

    /// The serving instance's session dies (as with a lost network, once PostgreSQL notices) and its login is
    /// refused for a while: the other instance takes the site over, and the first, connected again, finds it
    /// taken and commits nothing more for it.
    @Test func anInstanceWhoseSessionDiesLosesItsSitesAndCommitsNothingMore() async throws {
        let harness = try await IngestHarness.start()
        try await harness.stop()
        let firstLogin = try harness.writerLogin("first_ingest")
        let (first, firstTask) = harness.anotherIngest(clientID: "test-ingest-first") { $0.database = firstLogin }
        try await harness.eventually("the first ingest serves the site") { first.statistics.sitesServed == 1 }
        let (second, task) = harness.anotherIngest(clientID: "test-ingest-second") { $0.rebalanceInterval = .milliseconds(200) }
        try await harness.eventually("the second ingest is connected") { second.statistics.databaseConnected }
        let (client, _) = try await harness.client()
        defer { client.stop() }
        let topic = "beaconflow/v1/hq/hq-a1/batch"
        try await harness.publish(try batchPayload(sequence: 1), on: topic, with: client, until: "the first ingest commits") {
            first.statistics.batchesCommitted == 1
        }
        _ = try harness.query("ALTER ROLE first_ingest NOLOGIN")
        // Its writer's session and its leases' own.
        let killed = try harness.query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'first_ingest'")
        #expect(killed == [["2"]])
        let lost = ContinuousClock.now
        try await harness.eventually("the second ingest takes the site over") {
            try harness.query("SELECT DISTINCT instance FROM beaconflow.site_owners") == [["test-ingest-second"]]
        }
        #expect(ContinuousClock.now - lost < .seconds(15))
        try await harness.publish(
            try batchPayload(sequence: 2, start: 1_767_225_700_000_000), on: topic, with: client,
            until: "the second ingest commits the next batch"
        ) { second.statistics.batchesCommitted == 1 }
        _ = try harness.query("ALTER ROLE first_ingest LOGIN")
        try await harness.eventually("the first ingest is connected again") {
            first.statistics.databaseConnected && first.statistics.databaseReconnects == 1
        }
        // What it had queued for the site is left to the agent's resend; then it unsubscribes from the site.
        try await Task.sleep(for: .seconds(1))
        let notServed = first.statistics.batchesNotServed
        try await harness.publish(
            try batchPayload(sequence: 3, start: 1_767_225_800_000_000), on: topic, with: client,
            until: "the second ingest commits the third batch"
        ) { second.statistics.batchesCommitted == 2 }
        try await Task.sleep(for: .seconds(1))
        // It took the site from the harness's ingest once, at its start, and never again.
        #expect(first.statistics.batchesCommitted == 1 && first.statistics.sitesServed == 0 && first.statistics.sitesTakenOver == 1)
        #expect(first.statistics.batchesNotServed == notServed, "the first still receives the site's batches")
        #expect(try harness.count("beaconflow.batches") == 3)
        second.requestStop()
        try await task.value
        first.requestStop()
        try await firstTask.value
    }

    /// A site held by a session that is not a live ingest instance (a writer login used by hand) is served by
    /// nobody: past the bound `/healthz` turns unhealthy and names the count, until the lease ends.
    @Test func aSiteNoInstanceServesMakesTheIngestUnhealthy() async throws {
        let harness = try await IngestHarness.start {
            $0.sites = try! SitesConfiguration.parse(
                testSites + "\n  - {id: east, zones: [{id: hall}], agents: [{id: east-a1, zone: hall}]}\n")
            $0.rebalanceInterval = .milliseconds(200)
            $0.unservedSiteBound = .seconds(2)
        }
        try await harness.eventually("the ingest serves both sites") { harness.ingest.statistics.sitesServed == 2 }
        #expect(harness.ingest.health.healthy)
        // The ingest hands east over at its stop, and a writer login takes it by hand before it starts again.
        try await harness.stop()
        let squatter = try PostgresConnection(try harness.writerLogin("squatter"))
        #expect(try squatter.query("SELECT epoch > 0 FROM beaconflow.claim_site('east', 'by-hand', 30)") == [["t"]])
        let (ingest, task) = harness.anotherIngest(clientID: "test-ingest")
        try await harness.eventually("the ingest serves hq") { ingest.statistics.sitesServed == 1 }
        try await harness.eventually("east is reported unserved") { ingest.statistics.sitesUnserved == 1 }
        #expect(!ingest.health.healthy && ingest.health.json.contains(#""sites_unserved": 1"#), "\(ingest.health.json)")
        _ = try harness.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'squatter'")
        try await harness.eventually("the ingest claims east once the squatter's session ends") {
            ingest.statistics.sitesServed == 2 && ingest.statistics.sitesUnserved == 0
        }
        #expect(ingest.health.healthy, "\(ingest.health.json)")
        ingest.requestStop()
        try await task.value
    }

    /// Three writer-login sessions join the live instances by hand and take no site: the ingest's share would give
    /// them two of its three sites, which nobody would serve. It leaves them out once a site it handed them has
    /// been free for a third of the unserved bound, and serves every site again.
    @Test func sessionsThatJoinTheInstancesAndTakeNoSiteStarveNone() async throws {
        let harness = try await IngestHarness.start {
            $0.sites = try! SitesConfiguration.parse(
                testSites + "\n  - {id: east, zones: [{id: hall}], agents: [{id: east-a1, zone: hall}]}\n")
            $0.rebalanceInterval = .milliseconds(200)
            $0.unservedSiteBound = .seconds(3)
        }
        try await harness.eventually("the ingest serves both sites") { harness.ingest.statistics.sitesServed == 2 }
        let login = try harness.writerLogin("idler")
        let idlers = try (0..<3).map { index in
            let session = try PostgresConnection(login)
            try session.execute("SELECT beaconflow.join_instances('idle-\(index)', 300)")
            return session
        }
        try await harness.eventually("the ingest hands a site to the share it sees") { harness.ingest.statistics.sitesHandedOver >= 1 }
        let handedOver = ContinuousClock.now
        try await harness.eventually("the ingest serves both sites again", timeout: .seconds(20)) {
            harness.ingest.statistics.sitesServed == 2
        }
        let unserved = ContinuousClock.now - handedOver
        #expect(unserved < .seconds(3), "a site went unserved for \(unserved)")
        // And keeps them while the idle sessions live.
        try await Task.sleep(for: .seconds(2))
        #expect(harness.ingest.statistics.sitesServed == 2)
        #expect(harness.ingest.statistics.sitesHandedOver == 1)
        _ = idlers
        try await harness.stop()
    }

    /// Two instances on four sites serve two each, subscribed to their own sites' topics only (each batch reaches
    /// one of them), and one that stops gracefully hands its sites over at once.
    @Test func instancesShareTheSitesAndOneThatStopsHandsThemOverAtOnce() async throws {
        let sites = try SitesConfiguration.parse(
            testSites + """

                  - {id: east, zones: [{id: hall}], agents: [{id: east-a1, zone: hall}]}
                  - {id: west, zones: [{id: hall}], agents: [{id: west-a1, zone: hall}]}
                  - {id: north, zones: [{id: hall}], agents: [{id: north-a1, zone: hall}]}
                """)
        let harness = try await IngestHarness.start {
            $0.sites = sites
            $0.rebalanceInterval = .milliseconds(200)
        }
        let first = harness.ingest
        try await harness.eventually("the first ingest serves every site") { first.statistics.sitesServed == 4 }
        let joining = ContinuousClock.now
        let (second, task) = harness.anotherIngest(clientID: "test-ingest-second")
        try await harness.eventually("the two share the sites") {
            first.statistics.sitesServed == 2 && second.statistics.sitesServed == 2
        }
        // The sites handed over are free at once, not when their leases would have expired.
        #expect(ContinuousClock.now - joining < .seconds(7), "\(ContinuousClock.now - joining)")
        #expect(try harness.query("SELECT instance, count(*) FROM beaconflow.site_owners GROUP BY 1 ORDER BY 1") == [
            ["test-ingest", "2"], ["test-ingest-second", "2"],
        ])
        #expect(first.statistics.sitesHandedOver == 2 && second.statistics.sitesTakenOver == 2)

        let (client, _) = try await harness.client()
        defer { client.stop() }
        let agents = [("hq", "hq-a1"), ("east", "east-a1"), ("west", "west-a1"), ("north", "north-a1")]
        for (site, agent) in agents {
            try await harness.publish(
                try batchPayload(site: site, agent: agent, sequence: 1), on: "beaconflow/v1/\(site)/\(agent)/batch",
                with: client, until: "\(site)'s batch is committed"
            ) { try harness.count("beaconflow.batches WHERE site_id = '\(site)'") == 1 }
        }
        try await Task.sleep(for: .milliseconds(500))
        // Each batch reached the site's owner only (a resend is a duplicate, never a batch for another's site).
        for ingest in [first, second] {
            let statistics = ingest.statistics
            #expect(statistics.batchesCommitted == 2 && statistics.batchesNotServed == 0)
        }

        let stopping = ContinuousClock.now
        second.requestStop()
        try await task.value
        try await harness.eventually("the first takes the sites back") { first.statistics.sitesServed == 4 }
        let handover = ContinuousClock.now - stopping
        #expect(handover < .seconds(3), "\(handover)")
        #expect(second.statistics.sitesHandedOver == 2 && first.statistics.sitesTakenOver == 2)
        #expect(try harness.query("SELECT DISTINCT instance FROM beaconflow.site_owners") == [["test-ingest"]])
        for (site, agent) in agents {
            try await harness.publish(
                try batchPayload(site: site, agent: agent, sequence: 2, start: 1_767_225_700_000_000),
                on: "beaconflow/v1/\(site)/\(agent)/batch", with: client, until: "\(site)'s next batch is committed"
            ) { try harness.count("beaconflow.batches WHERE site_id = '\(site)'") == 2 }
        }
        #expect(first.statistics.batchesCommitted == 6)
        #expect(try harness.count("beaconflow.batches") == 8)
        try await harness.stop()
    }

    /// Two sessions making the same new partitions at once (two ingests on one database): one waits for the other
    /// and finds them made, never "relation already exists" (42P07).
    @Test func concurrentPartitionCreationDoesNotCollide() async throws {
        let harness = try await IngestHarness.start()
        let conninfo = harness.database.conninfo
        for round in 0..<10 {
            let day = "2021-\(round + 10 < 13 ? "\(round + 10)" : "0\(round - 2)")-05"
            async let first = onThread { try PostgresConnection(conninfo).query("SELECT beaconflow.ensure_partitions('\(day)', 3)") }
            async let second = onThread { try PostgresConnection(conninfo).query("SELECT beaconflow.ensure_partitions('\(day)', 3)") }
            let made = try await [first[0][0], second[0][0]].compactMap { $0.flatMap { Int($0) } }
            #expect(made.sorted() == [0, 9], "\(day): \(made)")
        }
        try await harness.stop()
    }

    /// Two instances with different sites files (a rolling change) show the union of their registries, neither
    /// deleting the other's zones, sites or beacons; once the other has left, the remaining one's file alone is
    /// shown.
    @Test func instancesWithDifferentSitesFilesNeverDeleteEachOthersRegistry() async throws {
        let harness = try await IngestHarness.start {
            $0.rebalanceInterval = .milliseconds(200)
            $0.sites = try! SitesConfiguration.parse(testSites + "\nbeacons:\n  - {id: \"mac:AA:BB:CC:DD:EE:01\", label: old tag}\n")
        }
        func zones() throws -> [String] {
            try harness.query("SELECT site_id || '/' || zone_id FROM beaconflow.zones ORDER BY 1").map { $0[0] ?? "" }
        }
        func labels() throws -> [String] { try harness.query("SELECT label FROM beaconflow.beacons ORDER BY 1").map { $0[0] ?? "" } }
        #expect(try zones() == ["hq/lab", "hq/lobby"])
        let changed = try SitesConfiguration.parse(
            """
            sites:
              - id: hq
                zones: [{id: lobby}, {id: atrium}]
                agents: [{id: hq-a1, zone: lobby}, {id: hq-a2, zone: atrium}]
              - {id: east, zones: [{id: hall}], agents: [{id: east-a1, zone: hall}]}
            beacons:
              - {id: "mac:AA:BB:CC:DD:EE:02", label: new tag}
            """)
        let (second, task) = harness.anotherIngest(clientID: "test-ingest-changed") {
            $0.sites = changed
            $0.rebalanceInterval = .milliseconds(200)
        }
        try await harness.eventually("the second instance serves a site") { second.statistics.sitesServed >= 1 }
        // Several looks by each, none deleting the other's rows.
        try await Task.sleep(for: .seconds(2))
        let (union, unionLabels) = (try zones(), try labels())
        #expect(union == ["east/hall", "hq/atrium", "hq/lab", "hq/lobby"], "\(union)")
        #expect(unionLabels == ["new tag", "old tag"], "\(unionLabels)")
        second.requestStop()
        try await task.value
        try await harness.eventually("the first instance's file alone is shown once the other has left") {
            try zones() == ["hq/lab", "hq/lobby"] && labels() == ["old tag"]
        }
        try await harness.stop()
    }
}
