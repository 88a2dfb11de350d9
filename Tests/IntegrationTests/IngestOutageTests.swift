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

/// Outages of PostgreSQL and the broker, stale statuses, a read-only server, a promoted standby.
extension IngestIntegrationTests {
    @Test func aPostgreSQLRestartMidStreamLosesNothing() async throws {
        let harness = try await IngestHarness.start()
        let spool = try makeTemporaryDirectory(prefix: "spool")
        defer { try? FileManager.default.removeItem(atPath: spool) }
        let (run, expected) = try await replayUntilSomeAreCommitted(harness, spool: spool)
        await harness.database.stopAndWait()
        try await Task.sleep(for: .seconds(2))
        try await harness.database.restart()
        #expect(try await run.value == .finished)
        #expect(harness.ingest.statistics.databaseReconnects >= 1)
        try expectEachOnce(PostgresConnection(harness.database.conninfo), expectedSightings: expected)
        try await harness.stop()
    }

    /// Two independent brokers: the agent uses the first and fails over to the second when the first is killed
    /// mid-stream; the ingest is subscribed to both. Every sighting and every batch arrives once.
    @Test func aBrokerKilledMidStreamLosesAndDuplicatesNothing() async throws {
        let second = try MosquittoServer()
        let harness = try await IngestHarness.start { $0.mqtt.failover = [MQTTClient.Endpoint(host: "127.0.0.1", port: second.port)] }
        try await harness.eventually("the ingest is connected to both brokers") {
            harness.ingest.statistics.brokersConnected == 2
        }
        let spool = try makeTemporaryDirectory(prefix: "spool")
        defer { try? FileManager.default.removeItem(atPath: spool) }
        let (run, expected) = try await replayUntilSomeAreCommitted(harness, spool: spool) {
            $0.failoverBrokers = [BrokerAddress(host: "127.0.0.1", port: second.port)]
        }
        harness.broker.kill()
        #expect(try await run.value == .finished)
        try expectEachOnce(harness.connection, expectedSightings: expected)
        #expect(harness.ingest.statistics.mqttConnected)
        try await harness.stop()
    }

    /// A status older than the agent's last one, as a second broker that comes back hands out, changes nothing.
    @Test func anOlderStatusFromAnotherBrokerDoesNotOverwriteANewerOne() async throws {
        let second = try MosquittoServer()
        let harness = try await IngestHarness.start { $0.mqtt.failover = [MQTTClient.Endpoint(host: "127.0.0.1", port: second.port)] }
        try await harness.eventually("the ingest is connected to both brokers") { harness.ingest.statistics.brokersConnected == 2 }
        let (client, _) = try await harness.client()
        defer { client.stop() }
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: second.port, clientID: "old-status")
        configuration.reconnectDelayMinimum = .milliseconds(50)
        let other = try MQTTClient(configuration, logger: logger)
        let otherEvents = Collector(other.events)
        other.start()
        defer { other.stop() }
        try await otherEvents.first { if case .connected = $0 { true } else { false } }
        let now = wallClockMicros()
        let adverts = "SELECT adverts_per_s FROM beaconflow.agent_health WHERE agent_id = 'hq-a1'"
        try client.publish(
            topic: "beaconflow/v1/hq/hq-a1/status", payload: Array(#"{"online": true, "adverts_per_s": 7, "clock_us": \#(now)}"#.utf8))
        try await harness.eventually("the status is recorded") { try harness.query(adverts) == [["7"]] }
        let id = try other.publish(
            topic: "beaconflow/v1/hq/hq-a1/status",
            payload: Array(#"{"online": false, "adverts_per_s": 3, "clock_us": \#(now - 60_000_000)}"#.utf8), retain: true)
        try await otherEvents.first { if case .published(id, _) = $0 { true } else { false } }
        // After it on the same broker, so the ingest has handled the old one once this one is recorded.
        try other.publish(
            topic: "beaconflow/v1/hq/hq-a2/status", payload: Array(#"{"online": true, "adverts_per_s": 5, "clock_us": \#(now)}"#.utf8))
        try await harness.eventually("a later status is recorded") {
            try harness.query("SELECT adverts_per_s FROM beaconflow.agent_health WHERE agent_id = 'hq-a2'") == [["5"]]
        }
        #expect(try harness.query(adverts) == [["7"]])
        #expect(try harness.query("SELECT online FROM beaconflow.agent_health WHERE agent_id = 'hq-a1'") == [["t"]])
        try await harness.stop()
    }

    /// A server that stops taking writes (as a primary turned read-only or demoted does) is a database outage,
    /// not a reason to refuse batches: the writer reconnects until a writable server is there, and nothing is
    /// rejected or lost.
    @Test func aServerThatStopsTakingWritesPausesIntakeAndRefusesNothing() async throws {
        let database = try await PostgresServer.start()
        let harness = try await IngestHarness.start(
            database: database, conninfo: database.conninfo + " target_session_attrs=read-write")
        let (client, _) = try await harness.client()
        defer { client.stop() }
        try client.publish(topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 1))
        try await harness.eventually("the first batch is committed") { harness.ingest.statistics.batchesCommitted == 1 }
        try harness.connection.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        _ = try harness.connection.query("SELECT pg_reload_conf()")
        // Sessions take the reloaded setting when they next wait for a command.
        try await Task.sleep(for: .seconds(1))
        try client.publish(
            topic: "beaconflow/v1/hq/hq-a1/batch", payload: try batchPayload(sequence: 2, start: 1_767_225_600_000_000 + 600_000_000))
        try await harness.eventually("the writer finds the server read-only") { harness.ingest.statistics.databaseReconnects >= 1 }
        #expect(harness.ingest.statistics.batchesCommitted == 1)
        try harness.connection.execute("ALTER SYSTEM RESET default_transaction_read_only")
        _ = try harness.connection.query("SELECT pg_reload_conf()")
        try await harness.eventually("the second batch is committed") { harness.ingest.statistics.batchesCommitted == 2 }
        #expect(harness.ingest.statistics.batchesRejected == 0)
        #expect(try harness.count("beaconflow.rejected_batches") == 0)
        #expect(try harness.count("beaconflow.sightings") == 200)
        try await harness.stop()
    }

    /// A primary with a synchronous streaming standby; the ingest and the report are given both hosts with
    /// `target_session_attrs=read-write`. The primary is lost mid-stream (immediate shutdown: no checkpoint, no
    /// goodbye), the standby promoted: the agent's replay ends acknowledged whole, every sighting and batch once.
    @Test func aStandbyPromotedWhenThePrimaryIsLostHasEveryBatchOnce() async throws {
        let primary = try await PostgresServer.start()
        let standby = try await PostgresServer.standby(of: primary)
        let setup = try PostgresConnection(primary.conninfo)
        // Synchronous from here on: a commit returns once the standby has it.
        try setup.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        _ = try setup.query("SELECT pg_reload_conf()")
        let deadline = ContinuousClock.now + .seconds(30)
        while try setup.query("SELECT sync_state FROM pg_stat_replication") != [["sync"]] {
            guard ContinuousClock.now < deadline else { throw LocalServerError("the standby did not become synchronous") }
            try await Task.sleep(for: .milliseconds(50))
        }
        let conninfo = "host=127.0.0.1,127.0.0.1 port=\(primary.port),\(standby.port) user=postgres dbname=postgres "
            + "target_session_attrs=read-write connect_timeout=2"
        let harness = try await IngestHarness.start(database: primary, conninfo: conninfo)
        let spool = try makeTemporaryDirectory(prefix: "spool")
        defer { try? FileManager.default.removeItem(atPath: spool) }
        let (run, expected) = try await replayUntilSomeAreCommitted(harness, spool: spool)
        await primary.stopImmediately()
        try await Task.sleep(for: .seconds(1))
        try await standby.promote()
        #expect(try await run.value == .finished)
        #expect(harness.ingest.statistics.databaseReconnects >= 1)

        let connection = try PostgresConnection(conninfo)
        #expect(try connection.query("SELECT inet_server_port()") == [[String(standby.port)]])
        try expectEachOnce(connection, expectedSightings: expected)
        try await harness.stop()
        // The report takes the same connection string.
        let report = try Report.load(PostgresConnection(conninfo), limit: 5)
        #expect(!report.beacons.isEmpty && report.beacons.allSatisfy { $0.siteID == "hq" }, "\(report)")
    }
}
