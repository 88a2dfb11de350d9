import BeaconIngest
import BeaconMessaging
import Foundation
import LibPQ
import LocalServers
import Logging
import Mosquitto
import TestServers
import Testing

/// `beaconflow ingest` reads its sites file again on SIGHUP, as `systemctl reload` sends it: a new agent, zone and
/// beacon label are applied without a restart; an instance running with another file is told of; a file that does
/// not load is refused with its reason and the running sites kept.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"), .timeLimit(.minutes(2)))
struct SitesReloadTests {
    static let before = """
        sites:
          - id: hq
            zones: [{id: lobby}]
            agents:
              - {id: hq-a1, zone: lobby}
        """

    static let after = """
        sites:
          - id: hq
            zones: [{id: lobby}, {id: lab}]
            agents:
              - {id: hq-a1, zone: lobby}
              - {id: hq-a2, zone: lab}
        beacons:
          - {id: "ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2", label: forklift 7}
        """

    @Test func sighupAppliesANewSitesFileAndRefusesABadOne() async throws {
        let executable = try #require(beaconflowExecutable)
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        let work = try makeTemporaryDirectory(prefix: "sites-reload")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let sitesPath = work + "/sites.yaml"
        try Self.before.write(toFile: sitesPath, atomically: true, encoding: .utf8)
        let port = try freeLoopbackPort()
        let ingest = try ChildProcess(
            executable,
            [
                "ingest", "--sites", sitesPath, "--broker", broker.url, "--database", database.conninfo,
                "--metrics-listen", "127.0.0.1:\(port)",
            ], standardErrorPath: work + "/ingest.log")
        defer { ingest.terminate(SIGTERM) }
        let log = { (try? String(contentsOfFile: work + "/ingest.log", encoding: .utf8)) ?? "" }
        try await eventuallyTrue("the ingest is healthy", timeout: .seconds(30)) {
            (try? httpGet(port: port, path: "/healthz").status) == "HTTP/1.1 200 OK"
        }
        let connection = try PostgresConnection(database.conninfo)
        func count(_ sql: String) throws -> Int { Int(try connection.query("SELECT count(*) FROM " + sql)[0][0] ?? "") ?? -1 }
        func metric(_ series: String) -> Double? {
            let text = (try? httpGet(port: port, path: "/metrics").body) ?? ""
            return text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last!) }
        }

        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: broker.port, clientID: "test-agent")
        configuration.reconnectDelayMinimum = .milliseconds(50)
        let client = try MQTTClient(configuration, logger: Logger(label: "test-agent"))
        client.start()
        defer { client.stop() }
        let a2 = AgentTopics(site: "hq", agent: "hq-a2")
        // Before: hq-a2 is not in the file, so its batch is refused.
        let first = try batchPayload(agent: "hq-a2", sequence: 1)
        try await eventuallyTrue("hq-a2's batch is refused", timeout: .seconds(30)) {
            try? client.publish(topic: a2.batch, payload: first)
            return (try? count("beaconflow.rejected_batches WHERE topic = '\(a2.batch)'")) ?? 0 > 0
        }

        // A good file: applied on SIGHUP, without a restart.
        try Self.after.write(toFile: sitesPath, atomically: true, encoding: .utf8)
        ingest.send(SIGHUP)
        try await eventuallyTrue("the new sites file is applied", timeout: .seconds(30)) { log().contains("Sites file read again and applied") }
        #expect(log().contains("sites_changed=hq"), "\(log())")
        let second = try batchPayload(agent: "hq-a2", sequence: 2)
        try await eventuallyTrue("hq-a2's batch is committed", timeout: .seconds(30)) {
            try? client.publish(topic: a2.batch, payload: second)
            return (try? count("beaconflow.sightings WHERE agent_id = 'hq-a2'")) ?? 0 > 0
        }
        #expect(try count("beaconflow.zones WHERE site_id = 'hq'") == 2)
        #expect(try connection.query("SELECT label FROM beaconflow.beacons WHERE beacon_id = 'ibeacon:e2c56db5-dffb-48d2-b060-d0f5a71096e0:1:2'").first?[0] == "forklift 7")
        #expect(metric(#"beaconflow_ingest_sites_reloads_total{outcome="applied"}"#) == 1)

        // Another instance with another file: told, and counted, until it is gone (or runs the same file).
        let otherSites = work + "/other-sites.yaml"
        try Self.before.write(toFile: otherSites, atomically: true, encoding: .utf8)
        let other = try ChildProcess(
            executable,
            ["ingest", "--sites", otherSites, "--broker", broker.url, "--database", database.conninfo, "--metrics-listen", "none"],
            standardErrorPath: work + "/other.log")
        defer { other.terminate(SIGTERM) }
        try await eventuallyTrue("the instances' files are seen to differ", timeout: .seconds(30)) {
            metric("beaconflow_ingest_sites_file_differs") == 1
        }
        #expect(log().contains("Other ingest instances run with another sites file"), "\(log())")
        other.terminate(SIGTERM)
        try await eventuallyTrue("the difference is gone with the other instance", timeout: .seconds(30)) {
            metric("beaconflow_ingest_sites_file_differs") == 0
        }
        #expect(log().contains("Every ingest instance runs with the same sites file"), "\(log())")

        // A bad file: refused with its reason; the running sites stay (hq-a2 is still known).
        try "sites:\n  - id: hq\n    zones: [{id: lobby}]\n    agent: []\n".write(toFile: sitesPath, atomically: true, encoding: .utf8)
        ingest.send(SIGHUP)
        try await eventuallyTrue("the bad file is refused", timeout: .seconds(30)) { log().contains("Sites file refused") }
        #expect(metric(#"beaconflow_ingest_sites_reloads_total{outcome="refused"}"#) == 1)
        let refusal = log().split(separator: "\n").first { $0.contains("Sites file refused") }.map(String.init) ?? ""
        #expect(refusal.contains("agent"), "the reason names the problem: \(refusal)")
        let third = try batchPayload(agent: "hq-a2", sequence: 3, start: 1_767_225_900_000_000)
        let before = try count("beaconflow.sightings WHERE agent_id = 'hq-a2'")
        try await eventuallyTrue("hq-a2's next batch is committed", timeout: .seconds(30)) {
            try? client.publish(topic: a2.batch, payload: third)
            return (try? count("beaconflow.sightings WHERE agent_id = 'hq-a2'")) ?? 0 > before
        }
        #expect((try? httpGet(port: port, path: "/healthz").status) == "HTTP/1.1 200 OK")
        #expect(!log().contains("Ingest stopped"), "the ingest ran throughout")
    }

    /// A reload of a file of 1,000 sites and 99,902 agents (a few megabytes) is read off the writer thread: the
    /// batches of the site served keep committing while it is read (seconds in a debug build), then the new sites
    /// are claimed.
    @Test func aLargeSitesFileIsReadWithoutHoldingTheWriter() async throws {
        let work = try makeTemporaryDirectory(prefix: "sites-reload-large")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let path = work + "/sites.yaml"
        try testSites.write(toFile: path, atomically: true, encoding: .utf8)
        let harness = try await IngestHarness.start {
            $0.sitesPath = path
            $0.sites = try! SitesConfiguration.load(path: path)
        }
        var large = testSites
        for site in 1..<1000 {
            large += "\n  - id: s\(site)\n    zones: [{id: z1}, {id: z2}]\n    agents:\n"
            for agent in 0..<100 { large += "      - {id: s\(site)-a\(agent), zone: z\(1 + agent % 2)}\n" }
        }
        try large.write(toFile: path, atomically: true, encoding: .utf8)
        let (client, _) = try await harness.client()
        defer { client.stop() }
        harness.ingest.requestReload()
        var slowest = Duration.zero
        var duringTheRead = 0
        var sequence: UInt64 = 0
        let started = ContinuousClock.now
        // While the file is read (seconds in a debug build), and until the new sites are served.
        while ContinuousClock.now - started < .seconds(90), harness.ingest.statistics.sitesServed < 2 {
            sequence += 1
            let sent = ContinuousClock.now
            try client.publish(
                topic: "beaconflow/v1/hq/hq-a1/batch",
                payload: try batchPayload(sequence: sequence, count: 10, start: 1_767_225_600_000_000 + Int64(sequence) * 10_000_000))
            try await harness.eventually("batch \(sequence) commits", timeout: .seconds(60)) {
                harness.ingest.statistics.batchesCommitted == Int(sequence)
            }
            // Only those committed while the file was still being read: the apply that follows is the writer's.
            if harness.ingest.statistics.sitesFileReads == 0 {
                duringTheRead += 1
                slowest = max(slowest, ContinuousClock.now - sent)
            }
        }
        #expect(harness.ingest.statistics.sitesServed >= 2, "the new sites are claimed")
        // Read on the writer thread, no batch could commit before the read ended.
        #expect(duringTheRead >= 2, "batches committed while the file was read: \(duringTheRead)")
        // A bound for a loaded machine (11.6 s seen beside the fault tests on two cores): a batch waits for a commit,
        // never for the read, which the count above shows.
        #expect(slowest < .seconds(20), "the slowest of them took \(slowest)")
        try await harness.stop()
    }
}
