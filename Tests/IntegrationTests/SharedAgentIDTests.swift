import Foundation
import LocalServers
import TestServers
import Testing

/// Agents the ingest cannot take as they are: two started with one id (a gateway's SD card copied to another) take
/// the broker connection from each other, and the ingest names the agent, in its log and a metric, from their
/// statuses' boot ids; an agent of a site the sites file does not have is named by the ingest, and says itself
/// what to check.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"),
    .timeLimit(.minutes(5)))
struct SharedAgentIDTests {
    @Test func twoAgentsWithOneIDAreNamedByTheIngest() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "shared-id")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        let metricsPort = try freeLoopbackPort()
        let (ingest, log) = try await startIngestProcess(
            broker: broker, database: database, work: work, options: ["--metrics-listen", "127.0.0.1:\(metricsPort)"])
        let agents = try ["first", "second"].map { name in
            try ChildProcess(
                executable,
                ["agent", "--site", "hq", "--agent", "hq-a1", "--source", "btsnoop:" + exampleFile("mixed-beacons.btsnoop"),
                 "--speed", "0.05", "--broker", broker.url, "--spool", work + "/spool-" + name],
                standardOutputPath: work + "/\(name).log", standardErrorPath: work + "/\(name).log")
        }
        try await eventuallyTrue("the ingest names the shared id", timeout: .seconds(90)) {
            log().contains("Two running agents use one agent id")
        }
        let line = log().split(separator: "\n").first { $0.contains("Two running agents use one agent id") } ?? ""
        #expect(line.contains("site=hq") && line.contains("agent=hq-a1") && line.contains("boot_ids="), "\(line)")
        let metrics = try httpGet(port: metricsPort, path: "/metrics").body
        let reported = metrics.split(separator: "\n").first { $0.hasPrefix("beaconflow_ingest_agent_ids_shared_total ") }
        #expect(reported.flatMap { Double($0.split(separator: " ")[1]) }.map { $0 >= 1 } == true, "\(metrics.prefix(4000))")
        for agent in agents { agent.terminate() }
        ingest.terminate()
    }

    /// A mistyped `--site`: the ingest says at once which site it does not have and the nearest it has; the agent,
    /// acknowledged nothing since it started, says what to check at its first late acknowledgement, then exits 75.
    @Test func aMistypedSiteIsNamedByTheIngestAndTheAgent() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "unknown-site")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        let (ingest, log) = try await startIngestProcess(broker: broker, database: database, work: work)
        defer { ingest.terminate() }
        let agentLog = work + "/agent.log"
        let agent = try ChildProcess(
            executable,
            ["agent", "--site", "hqq", "--agent", "hq-a1", "--source", "btsnoop:" + exampleFile("mixed-beacons.btsnoop"), "--speed", "max",
             "--broker", broker.url, "--spool", work + "/spool", "--ack-timeout", "2", "--drain-timeout", "6"],
            standardOutputPath: agentLog, standardErrorPath: agentLog)
        try await eventuallyTrue("the ingest names the site it does not have", timeout: .seconds(30)) {
            log().contains("An agent reports for a site the sites file does not have")
        }
        let line = log().split(separator: "\n").first { $0.contains("An agent reports for a site") } ?? ""
        #expect(line.contains("site=hqq") && line.contains("did_you_mean=hq") && line.contains("agent=hq-a1"), "\(line)")
        _ = await agent.exit()
        let said = (try? String(contentsOfFile: agentLog, encoding: .utf8)) ?? ""
        #expect(agent.exitCode == 75, "\(said)")
        #expect(said.contains("No ingest acknowledges this agent's batches") && said.contains("timeouts=1"), "\(said)")
    }
}
