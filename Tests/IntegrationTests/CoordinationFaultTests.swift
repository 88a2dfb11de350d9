import BeaconWire
import Foundation
import LibPQ
import LocalServers
import Logging
import Mosquitto
import TestServers
import Testing
import WorkQueue

/// Site ownership against the logins and the failures that used to stop a site: through the real processes.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"),
    .timeLimit(.minutes(3)))
struct CoordinationFaultTests {
    static let sites = """
        sites:
          - id: hq
            zones: [{id: lobby}]
            agents: [{id: hq-a1, zone: lobby}]
          - id: east
            zones: [{id: hall}]
            agents: [{id: east-a1, zone: hall}]
        """

    /// Two ingests share two sites while reader-role sessions hold every advisory lock key an ingest ever used
    /// and try the lease functions (refused); then one ingest is frozen (SIGSTOP): the other serves its site
    /// within 15 s and commits its batches; resumed, the frozen one finds the site taken, says so, and the two
    /// share the sites again with every batch stored once.
    @Test func aFrozenInstanceLosesItsSiteWithinTheBoundAndNoOtherLoginCanHoldOne() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "coordination")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try Self.sites.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        let broker = try await onThread { try MosquittoServer(persistence: false) }
        let database = try await PostgresServer.start()
        func ingest(_ instance: String) throws -> ChildProcess {
            try ChildProcess(
                executable,
                [
                    "ingest", "--sites", work + "/sites.yaml", "--broker", broker.url, "--database", database.conninfo,
                    "--client-id", instance, "--metrics-listen", "none",
                ], standardErrorPath: "\(work)/\(instance).log")
        }
        let first = try ingest("ingest-1")
        var second: ChildProcess?
        defer {
            first.send(SIGCONT)
            first.terminate()
            second?.terminate()
        }
        let conninfo = database.conninfo
        func query(_ sql: String) async throws -> [[String?]] {
            try await onThread { try PostgresConnection(conninfo).query(sql).map(\.values) }
        }
        func owners() async throws -> [String: String] {
            var owners: [String: String] = [:]
            for row in (try? await query("SELECT site_id, instance FROM beaconflow.site_owners")) ?? [] { owners[row[0] ?? ""] = row[1] }
            return owners
        }
        func waitForOwners(_ description: String, _ condition: ([String: String]) -> Bool) async throws -> Duration {
            let started = ContinuousClock.now
            var seen: [String: String] = [:]
            while ContinuousClock.now - started < .seconds(30) {
                seen = try await owners()
                if condition(seen) { return ContinuousClock.now - started }
                try await Task.sleep(for: .milliseconds(100))
            }
            Issue.record("\(description): owners \(seen)")
            return .seconds(30)
        }
        _ = try await waitForOwners("the first serves both sites") { $0 == ["hq": "ingest-1", "east": "ingest-1"] }

        // Grafana's login: it may read the views, and holds the old lock keys from three sessions.
        _ = try await query("CREATE ROLE grafana LOGIN IN ROLE beaconflow_reader")
        let readerConninfo = database.conninfo.replacingOccurrences(of: "user=postgres", with: "user=grafana")
        var readers: [PostgresConnection] = []
        for _ in 0..<3 {
            let reader = try PostgresConnection(readerConninfo)
            _ = try reader.query(
                """
                SELECT pg_advisory_lock_shared(1650878830, 0), pg_try_advisory_lock(1650881396, hashtext('hq')),
                       pg_try_advisory_lock(1650881396, hashtext('east'))
                """)
            readers.append(reader)
        }
        for statement in ["SELECT * FROM beaconflow.claim_site('east', 'grafana', 300)", "SELECT beaconflow.join_instances('grafana', 300)"] {
            #expect(throws: PostgresError.self) { try readers[0].query(statement) }
        }

        second = try ingest("ingest-2")
        _ = try await waitForOwners("the two share the sites") { Set($0.values) == ["ingest-1", "ingest-2"] && $0.count == 2 }
        let frozenSite = try #require(try await owners().first { $0.value == "ingest-1" }?.key)

        var mqtt = MQTTClient.Configuration(host: "127.0.0.1", port: broker.port, clientID: "test-agent")
        mqtt.reconnectDelayMinimum = .milliseconds(50)
        let client = try MQTTClient(mqtt, logger: Logger(label: "test-agent"))
        client.start()
        defer { client.stop() }
        func batches(_ site: String) async throws -> Int {
            Int(try await query("SELECT count(*) FROM beaconflow.batches WHERE site_id = '\(site)'")[0][0] ?? "") ?? -1
        }
        /// Publishes a batch every second until `count` of the site's batches are stored.
        func deliver(_ site: String, sequence: UInt64, until count: Int) async throws {
            let payload = try batchPayload(
                site: site, agent: "\(site)-a1", sequence: sequence, count: 10,
                start: 1_767_225_600_000_000 + Int64(sequence) * 60_000_000)
            let deadline = ContinuousClock.now + .seconds(30)
            while try await batches(site) < count, ContinuousClock.now < deadline {
                try? client.publish(topic: "beaconflow/v1/\(site)/\(site)-a1/batch", payload: payload, qos: 1)
                try await Task.sleep(for: .seconds(1))
            }
            #expect(try await batches(site) == count, "\(site) batch \(sequence)")
        }
        try await deliver(frozenSite, sequence: 1, until: 1)

        first.send(SIGSTOP)
        let takeOver = try await waitForOwners("the second takes the frozen one's site") { $0 == ["hq": "ingest-2", "east": "ingest-2"] }
        #expect(takeOver < .seconds(15), "\(takeOver)")
        try await deliver(frozenSite, sequence: 2, until: 2)

        first.send(SIGCONT)
        try await eventuallyTrue("the resumed instance says its site was taken") {
            ((try? String(contentsOfFile: work + "/ingest-1.log", encoding: .utf8)) ?? "").contains("Sites taken over by another instance")
        }
        _ = try await waitForOwners("the two share the sites again") { Set($0.values) == ["ingest-1", "ingest-2"] && $0.count == 2 }
        for site in ["hq", "east"] {
            let stored = try await batches(site)
            try await deliver(site, sequence: 3, until: stored + 1)
        }
        #expect(try await query("SELECT count(*), count(DISTINCT (site_id, agent_id, sequence)) FROM beaconflow.batches") == [["4", "4"]])
        // The readers' sessions lived throughout, holding their locks.
        #expect(try await query("SELECT count(*) FROM pg_stat_activity WHERE usename = 'grafana'") == [["3"]])
        withExtendedLifetime(readers) {}
    }
}
