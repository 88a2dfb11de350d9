import Foundation
import LibPQ
import LocalServers
import TestServers
import Testing

/// A site run as an operator runs it: `beaconflow ingest` and a simulated `beaconflow agent` per agent on
/// `work`/scenario.yaml and `work`/sites.yaml, on the test's broker and database.
struct LivePipeline {
    let ingest: ChildProcess
    let agents: [ChildProcess]

    static func start(
        broker: MosquittoServer, database: PostgresServer, work: String, agents: [String], ingestArguments: [String] = []
    ) throws -> LivePipeline {
        let executable = try #require(beaconflowExecutable)
        let ingest = try ChildProcess(
            executable,
            ["ingest", "--sites", work + "/sites.yaml", "--broker", broker.url, "--database", database.conninfo, "--metrics-listen", "none"]
                + ingestArguments,
            standardErrorPath: work + "/ingest.log")
        let processes = try agents.map { agent in
            try ChildProcess(
                executable,
                [
                    "agent", "--site", "hq", "--agent", agent, "--source", "sim:" + work + "/scenario.yaml", "--broker", broker.url,
                    "--spool", work + "/spool-" + agent, "--ack-timeout", "2",
                ], standardErrorPath: work + "/\(agent).log")
        }
        return LivePipeline(ingest: ingest, agents: processes)
    }

    /// Ends whatever still runs.
    func kill() {
        agents.forEach { $0.terminate(SIGKILL) }
        ingest.terminate(SIGKILL)
    }
}

/// `beaconflow console` as a reader login (`viewer`) on `database`, with `token` and any `options`; returns it and
/// its base URL.
func startConsoleProcess(
    _ database: PostgresServer, work: String, token: String, options: [String] = []
) async throws -> (ChildProcess, String) {
    let connection = try PostgresConnection(database.conninfo)
    try connection.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'viewer') THEN CREATE ROLE viewer LOGIN IN ROLE beaconflow_reader; END IF; END $$")
    try (token + "\n").write(toFile: work + "/console.token", atomically: true, encoding: .utf8)
    let console = try ChildProcess(
        try #require(beaconflowExecutable),
        [
            "console", "--database", database.conninfo.replacingOccurrences(of: "user=postgres", with: "user=viewer"),
            "--listen", "127.0.0.1:0", "--token-file", work + "/console.token", "--refresh", "1",
        ] + options, standardErrorPath: work + "/console.log")
    let log = { (try? String(contentsOfFile: work + "/console.log", encoding: .utf8)) ?? "" }
    try await eventuallyTrue("the console listens") { log().contains("Console listening") }
    let port = try #require(log().firstMatch(of: /http:\/\/127\.0\.0\.1:(\d+)\/login/).flatMap { Int($0.1) })
    return (console, "http://127.0.0.1:\(port)")
}

/// `beaconflow ingest` with the test sites (`testSites`) on `broker` and `database`, its log in `work`, once it
/// serves its sites; returns it and a reader of its log.
func startIngestProcess(
    broker: MosquittoServer, database: PostgresServer, work: String, options: [String] = []
) async throws -> (process: ChildProcess, log: @Sendable () -> String) {
    try testSites.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
    let path = work + "/ingest.log"
    let ingest = try ChildProcess(
        try #require(beaconflowExecutable),
        ["ingest", "--sites", work + "/sites.yaml", "--broker", broker.url, "--database", database.conninfo]
            + (options.contains("--metrics-listen") ? [] : ["--metrics-listen", "none"]) + options,
        standardOutputPath: path, standardErrorPath: path)
    let log: @Sendable () -> String = { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
    try await eventuallyTrue("the ingest serves its sites", timeout: .seconds(60)) { log().contains("Sites claimed") }
    return (ingest, log)
}
