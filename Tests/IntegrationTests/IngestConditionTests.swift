import BeaconIngest
import BeaconMessaging
import Foundation
import LibPQ
import LocalServers
import Logging
import Mosquitto
import TestServers
import Testing

/// Conditions of the ingest's own side (its clock, a lock a reader holds, the partition limit) never refuse a
/// batch: it waits, unacknowledged, and commits once the condition clears; meanwhile the ingest says so.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .timeLimit(.minutes(3)))
struct IngestConditionTests {
    /// Ten days ago: within the retention (30 days), and a day no partition is made for ahead of time.
    static var dayWithoutPartition: Int64 { (Int64(Date().timeIntervalSince1970) - 10 * 86_400) * 1_000_000 }

    /// A login in beaconflow_reader holds one transaction open over every public view (as a dashboard's session
    /// left idle in a transaction does) while batches arrive for a day without a partition and for today: both
    /// commit within seconds, and the reader's transaction is still open.
    @Test func aReaderHoldingATransactionOnEveryViewStallsNoBatch() async throws {
        let harness = try await IngestHarness.start()
        _ = try harness.query("CREATE ROLE dashboard LOGIN IN ROLE beaconflow_reader")
        let reader = try PostgresConnection(harness.database.conninfo.replacingOccurrences(of: "user=postgres", with: "user=dashboard"))
        let views = try harness.query(
            "SELECT table_name FROM information_schema.views WHERE table_schema = 'beaconflow' ORDER BY 1"
        ).compactMap { $0[0] }
        #expect(views.contains("sightings") && views.contains("telemetry") && views.count >= 15, "\(views)")
        try reader.execute("BEGIN")
        for view in views { _ = try reader.query("SELECT * FROM beaconflow.\(view) LIMIT 1") }
        let held = try harness.count(
            "pg_locks l JOIN pg_stat_activity a USING (pid) WHERE a.usename = 'dashboard' AND l.mode = 'AccessShareLock'")
        #expect(held > views.count, "the reader holds \(held) locks")

        let (client, _) = try await harness.client()
        defer { client.stop() }
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        let started = ContinuousClock.now
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 1, start: Self.dayWithoutPartition))
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 2, count: 30, start: now - 60_000_000))
        try await harness.eventually("both batches commit while the reader's transaction is open", timeout: .seconds(20)) {
            harness.ingest.statistics.batchesCommitted == 2
        }
        let took = ContinuousClock.now - started
        #expect(took < .seconds(10), "\(took)")
        #expect(harness.ingest.statistics.batchesHeld == 0 && harness.ingest.statistics.batchesRejected == 0)
        // The reader's transaction was never ended for it.
        #expect(try reader.query("SELECT count(*) FROM beaconflow.zones")[0][0] != nil)
        try reader.execute("COMMIT")
        #expect(try harness.count("beaconflow.sightings") == 130)
        try await harness.stop()
    }

    /// With `partition_days_max` reached, a batch for a new day is held (not refused, not acknowledged) and the
    /// ingest is unhealthy; the hourly maintenance drops the expired days first, which clears the limit, and the
    /// agent's next send commits.
    @Test func thePartitionLimitHoldsBatchesUntilExpiredDaysAreDropped() async throws {
        let harness = try await IngestHarness.start()
        // Expired days left by a replay, and the limit at what exists now.
        _ = try harness.query("SELECT beaconflow.ensure_partitions('2020-01-01', 3)")
        let existing = try harness.count("pg_inherits WHERE inhparent = 'beaconflow.sighting_packs'::regclass")
        _ = try harness.query("UPDATE beaconflow.settings SET value = '\(existing)' WHERE key = 'partition_days_max'")

        let (client, events) = try await harness.client()
        defer { client.stop() }
        try client.subscribe(topic: "beaconflow/v1/hq/hq-a1/+")
        let payload = try batchPayload(sequence: 1, start: Self.dayWithoutPartition)
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: payload)
        try await harness.eventually("the batch is held") { harness.ingest.statistics.batchesHeld == 1 }
        #expect(harness.ingest.statistics.agentsHeld == 1)
        #expect(!harness.ingest.health.healthy)
        #expect(harness.ingest.health.json.contains("\"agents_held\": 1"), "\(harness.ingest.health.json)")
        #expect(try harness.count("beaconflow.rejected_batches") == 0)
        #expect(try harness.count("beaconflow.sightings") == 0)
        // Neither acknowledged nor refused: the agent keeps it.
        try await Task.sleep(for: .milliseconds(500))
        #expect(!events.all.contains { if case .message(let topic, _, _) = $0 { !topic.hasSuffix("/batch") } else { false } })

        // Maintenance (as the hourly one runs it) drops the 2020 days before it makes any: the limit clears.
        let second = harness.anotherIngest(clientID: "test-ingest-maintenance") { $0.partitionMaintenanceInterval = .milliseconds(200) }
        defer { second.ingest.requestStop() }
        try await harness.eventually("the expired days are dropped") {
            try harness.count("pg_class WHERE relname LIKE 'sighting_packs_2020%'") == 0
        }
        try await harness.publish(payload, on: "beaconflow/v1/hq/hq-a1/batch", with: client, until: "the agent's resend commits") {
            harness.ingest.statistics.batchesCommitted + second.ingest.statistics.batchesCommitted == 1
        }
        #expect(try harness.count("beaconflow.sightings") == 100)
        #expect(try harness.count("beaconflow.rejected_batches") == 0)
        second.ingest.requestStop()
        _ = try await second.task.value
        try await harness.stop()
    }

    /// An ingest whose clock is ten minutes behind (libfaketime, from Debian) judges times by the database's clock:
    /// batches dated by the agents' correct clocks commit, nothing is refused, and it says its clock is wrong.
    @Test(.enabled(if: faketimeExecutable != nil, "faketime is not installed (Debian's faketime)"))
    func anIngestWithAClockTenMinutesBehindLosesNothingAndSaysSo() async throws {
        let executable = try #require(beaconflowExecutable)
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        let work = try makeTemporaryDirectory(prefix: "skewed-clock")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try testSites.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        let port = try freeLoopbackPort()
        // Only the wall clock is behind: monotonic time runs as it does on a host whose NTP failed.
        let ingest = try startWithWallClockOffset(
            "-600s", executable,
            [
                "ingest", "--sites", work + "/sites.yaml", "--broker", broker.url, "--database", database.conninfo,
                "--metrics-listen", "127.0.0.1:\(port)",
            ], standardErrorPath: work + "/ingest.log")
        defer { ingest.terminate(SIGTERM) }
        let log = { (try? String(contentsOfFile: work + "/ingest.log", encoding: .utf8)) ?? "" }
        try await eventuallyTrue("the ingest says its clock differs from the database's", timeout: .seconds(60)) {
            log().contains("This instance's clock differs from the database's")
        }
        let health = try httpGet(port: port, path: "/healthz")
        #expect(health.status == "HTTP/1.1 503 Service Unavailable")
        #expect(health.body.contains("\"clock_skewed\": true"), "\(health.body)")
        let metrics = try httpGet(port: port, path: "/metrics").body
        let line = metrics.split(separator: "\n").first { $0.hasPrefix("beaconflow_ingest_clock_offset_seconds ") }
        let offset = Double(line?.split(separator: " ").last ?? "") ?? 0
        #expect(abs(offset - 600) < 5, "\(line ?? "no offset")")

        try await eventuallyTrue("the ingest serves the site", timeout: .seconds(30)) {
            (try? httpGet(port: port, path: "/healthz").body.contains("\"sites_served\": 1")) == true
        }
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: broker.port, clientID: "test-agent")
        configuration.reconnectDelayMinimum = .milliseconds(50)
        let client = try MQTTClient(configuration, logger: Logger(label: "test-agent"))
        client.start()
        defer { client.stop() }
        let connection = try PostgresConnection(database.conninfo)
        func count(_ relation: String) throws -> Int { Int(try connection.query("SELECT count(*) FROM " + relation)[0][0] ?? "") ?? -1 }
        // Dated by a correct clock, the last sighting now: 600 s ahead of the ingest's own clock. Sent again each
        // second until stored, as an agent resends what is not acknowledged. Whole milliseconds, as agents stamp.
        let now = Int64(Date().timeIntervalSince1970 * 1_000) * 1_000
        let payloads = try (UInt64(1)...9).map { sequence in
            try batchPayload(sequence: sequence, count: 20, start: now - 20_000_000 * Int64(10 - sequence))
        }
        var lastSent = ContinuousClock.now - .seconds(2)
        try await eventuallyTrue("the nine batches commit", timeout: .seconds(60)) {
            if ContinuousClock.now - lastSent >= .seconds(1) {
                lastSent = .now
                for payload in payloads { try? client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: payload) }
            }
            return (try? count("beaconflow.batches WHERE agent_id = 'hq-a1'")) == 9
        }
        #expect(try count("beaconflow.sightings") == 180)
        #expect(try count("beaconflow.rejected_batches") == 0)
        // Stored at the times the agent gave (no agent clock offset is measured: it sent no status).
        let newest = try connection.query("SELECT (extract(epoch FROM max(ts)) * 1000000)::bigint FROM beaconflow.sightings")[0][0]
        #expect(newest.flatMap { Int64($0) } == now - 20_000_000 + 19_000_000)
    }

    /// One agent's credential sends a batch for each of 30 days that have no partition, again and again: at most
    /// four days' partitions are made at once and four more a minute, nothing is refused, and the batches beyond
    /// the budget wait with the agent (deferred) while the other agent's batches commit at once.
    @Test func oneCredentialCannotMakePartitionsByTheThousand() async throws {
        let harness = try await IngestHarness.start()
        let partitions = "pg_inherits WHERE inhparent = 'beaconflow.sighting_packs'::regclass"
        let before = try harness.count(partitions)
        let (client, _) = try await harness.client()
        defer { client.stop() }
        // Days in 2015, each with its own batch.
        let payloads = try (0..<30).map { day in
            try batchPayload(sequence: UInt64(day + 1), count: 10, start: 1_420_070_400_000_000 + Int64(day) * 86_400_000_000)
        }
        let now = Int64(Date().timeIntervalSince1970 * 1_000) * 1_000
        let started = ContinuousClock.now
        var sent = 0
        while ContinuousClock.now - started < .seconds(6) {
            for payload in payloads { try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: payload) }
            sent += 1
            try client.publish(
                topic: "beaconflow/v1/hq/hq-a2/batch",
                payload: try batchPayload(agent: "hq-a2", sequence: UInt64(sent), count: 10, start: now - 60_000_000 + Int64(sent) * 10_000_000))
            try await Task.sleep(for: .seconds(1))
        }
        try await harness.eventually("the other agent's batches commit") {
            try harness.count("beaconflow.batches WHERE agent_id = 'hq-a2'") == sent
        }
        let made = try harness.count(partitions) - before
        // Four at once, and four a minute after: however slowly a loaded machine went through the resends.
        let minutes = Double((ContinuousClock.now - started).components.seconds) / 60
        #expect(made >= 4 && Double(made) <= 4 + (minutes * 4).rounded(.up), "\(made) days made in \(minutes) minutes")
        #expect(try harness.count("beaconflow.batches WHERE agent_id = 'hq-a1'") == made)
        #expect(harness.ingest.statistics.batchesRejected == 0)
        #expect(harness.ingest.statistics.batchesDeferred >= 30 - made, "\(harness.ingest.statistics)")
        try await harness.stop()
    }

    /// One credential floods its site with twenty batches of 10,000 sightings, then another site's agent sends one:
    /// the writer takes one message of each agent in turn, so that batch commits after a few of the flood's (those
    /// taken before it arrived), not after all twenty.
    @Test func aFloodFromOneCredentialHoldsAnotherSiteBackByOneOfItsBatches() async throws {
        let harness = try await IngestHarness.start {
            $0.sites = try! SitesConfiguration.parse(testSites + "\n  - {id: flood, zones: [{id: hall}], agents: [{id: flood-a1, zone: hall}]}\n")
        }
        try await harness.eventually("both sites are served") { harness.ingest.statistics.sitesServed == 2 }
        let (client, _) = try await harness.client()
        defer { client.stop() }
        // Built first, then sent together: the flood is queued when the other site's batch arrives.
        let flood = try (UInt64(1)...20).map { sequence in
            try batchPayload(
                site: "flood", agent: "flood-a1", sequence: sequence, count: 10_000,
                start: 1_767_225_600_000_000 + Int64(sequence) * 10_000_000_000)
        }
        let other = try batchPayload(sequence: 1, count: 10)
        for payload in flood { try client.publish(topic: "beaconflow/v1/flood/flood-a1/batch", payload: payload) }
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: other)
        var floodCommittedBefore = -1
        try await harness.eventually("the other site's batch commits", timeout: .seconds(120)) {
            let flood = try harness.count("beaconflow.batches WHERE agent_id = 'flood-a1'")
            guard try harness.count("beaconflow.batches WHERE agent_id = 'hq-a1'") == 1 else { return false }
            floodCommittedBefore = flood
            return true
        }
        let order = (try? harness.query("SELECT agent_id, sequence FROM beaconflow.batches ORDER BY committed_at, agent_id")) ?? []
        // Known to fail now and then on a two-core machine: the other site's batch then commits after the whole flood,
        // even with the writer held at its first commit until everything was sent, so it reaches the writer only
        // after the flood (the delay is before the writer's turns, not in them).
        withKnownIssue("the other site's batch sometimes reaches the writer after the whole flood", isIntermittent: true) {
            #expect(floodCommittedBefore < 10, "\(floodCommittedBefore) of the flood's 20 batches went first: \(order)")
        }
        try await harness.eventually("the flood commits too", timeout: .seconds(120)) {
            try harness.count("beaconflow.batches WHERE agent_id = 'flood-a1'") == 20
        }
        try await harness.stop()
    }
}
