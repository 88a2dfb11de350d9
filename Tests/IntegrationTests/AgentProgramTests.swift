import Foundation
import LibPQ
import LocalServers
import TestServers
import Testing

/// `beaconflow-agent`, the agent's own executable for gateways: it runs the agent as `beaconflow agent` does, through
/// a real broker into a real ingest and PostgreSQL, and carries none of the rest (no libpq, no simulator).
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowAgentExecutable != nil, "the beaconflow-agent executable is not built"),
    .timeLimit(.minutes(5)))
struct AgentProgramTests {
    @Test func itLoadsNoDatabaseLibrary() async throws {
        let lean = try await runProgram("/usr/bin/ldd", [try #require(beaconflowAgentExecutable)])
        let full = try await runProgram("/usr/bin/ldd", [try #require(beaconflowExecutable)])
        #expect(lean.status == 0 && lean.output.contains("libmosquitto"), "\(lean.output)")
        #expect(!lean.output.contains("libpq"), "\(lean.output)")
        #expect(full.output.contains("libpq"), "the reference: \(full.output)")
    }

    @Test func itReplaysIntoTheIngestFromItsConfigFile() async throws {
        let agentExecutable = try #require(beaconflowAgentExecutable)
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        let work = try makeTemporaryDirectory(prefix: "agent-program")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try testSites.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        let ingest = try ChildProcess(
            try #require(beaconflowExecutable),
            ["ingest", "--sites", work + "/sites.yaml", "--broker", broker.url, "--database", database.conninfo, "--metrics-listen", "none"],
            standardErrorPath: work + "/ingest.log")
        defer { ingest.terminate(SIGKILL) }

        // A misspelt setting is named with the file and the setting it most likely meant.
        try "site: hq\nagnet: hq-a1\n".write(toFile: work + "/typo.yaml", atomically: true, encoding: .utf8)
        let typo = try await runProgram(agentExecutable, ["--config", work + "/typo.yaml"])
        #expect(typo.status == 64 && typo.errors.contains("typo.yaml: unknown setting 'agnet' (did you mean 'agent'?)"), "\(typo.errors)")
        // The simulator's source is `beaconflow agent`'s only.
        let simulated = try await runProgram(agentExecutable, ["--site", "hq", "--agent", "hq-a1", "--source", "sim:deploy/scenarios/demo.yaml"])
        #expect(simulated.status == 64 && simulated.errors.contains("source kind 'sim' is not one of hci:hciN, btsnoop:PATH, pcap:PATH or recording:PATH"), "\(simulated.errors)")
        let help = try await runProgram(agentExecutable, ["--help"])
        #expect(help.status == 0 && help.output.contains("pcap:PATH") && !help.output.contains("simulated site"), "\(help.output)")

        try """
            site: hq
            agent: hq-a1
            source: btsnoop:\(exampleFile("mixed-beacons.btsnoop"))
            speed: max
            broker: \(broker.url)
            spool: \(work)/spool
            ack_timeout: 2
            """.write(toFile: work + "/agent.yaml", atomically: true, encoding: .utf8)
        // It exits 0 only when the ingest has acknowledged every batch, which it does after the commit.
        let replay = try await runProgram(agentExecutable, ["--config", work + "/agent.yaml"])
        let ingestLog = { (try? String(contentsOfFile: work + "/ingest.log", encoding: .utf8)) ?? "" }
        #expect(replay.status == 0, "\(replay.errors)\ningest: \(ingestLog())")
        let connection = try PostgresConnection(database.conninfo)
        let stored = try connection.query("SELECT count(*) FROM beaconflow.sightings WHERE site_id = 'hq' AND agent_id = 'hq-a1'")
        #expect(Int(stored.first?[0] ?? "") ?? 0 > 0, "\(stored)")
    }
}
