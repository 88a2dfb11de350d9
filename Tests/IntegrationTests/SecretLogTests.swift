import Foundation
import LocalServers
import TestServers
import Testing

/// No secret in any log line at any level: each long-running command runs at `--log-level debug` with a database
/// password, an MQTT password and a console token, and none of them appears in what it prints.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"),
    .timeLimit(.minutes(5)))
struct SecretLogTests {
    @Test func noCommandLogsADatabasePasswordBrokerPasswordOrTokenAtDebugLevel() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "secret-log")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let broker = try MosquittoServer()
        let database = try await PostgresServer.start()
        // The test's server trusts loopback logins, so the passwords are sent nowhere but are in every option.
        let databasePassword = "db-secret-5f2e9a"
        let brokerPassword = "mqtt-secret-8c41d7"
        let token = "console-token-secret-3b9e0f"
        let conninfo = database.conninfo + " password=\(databasePassword)"
        try testSites.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        try (brokerPassword + "\n").write(toFile: work + "/mqtt.pw", atomically: true, encoding: .utf8)
        try (token + "\n").write(toFile: work + "/console.token", atomically: true, encoding: .utf8)
        let commands: [(name: String, arguments: [String])] = [
            (
                "ingest",
                [
                    "ingest", "--sites", work + "/sites.yaml", "--broker", broker.url, "--password-file", work + "/mqtt.pw",
                    "--database", conninfo, "--metrics-listen", "127.0.0.1:\(try freeLoopbackPort())", "--log-level", "debug",
                ]
            ),
            (
                "console",
                [
                    "console", "--database", conninfo, "--listen", "127.0.0.1:0", "--token-file", work + "/console.token",
                    "--log-level", "debug",
                ]
            ),
            (
                "agent",
                [
                    "agent", "--site", "hq", "--agent", "hq-a1", "--source", "btsnoop:" + exampleFile("mixed-beacons.btsnoop"),
                    "--broker", broker.url, "--password-file", work + "/mqtt.pw", "--spool", work + "/spool",
                    "--metrics-listen", "127.0.0.1:\(try freeLoopbackPort())", "--log-level", "debug",
                ]
            ),
        ]
        for command in commands {
            let logPath = "\(work)/\(command.name).log"
            let process = try ChildProcess(executable, command.arguments, standardOutputPath: logPath, standardErrorPath: logPath)
            let log = { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
            // The line that once printed a service's fields, token and connection string included.
            try await eventuallyTrue("\(command.name) starts its services", timeout: .seconds(30)) { log().contains("Starting service") }
            try await Task.sleep(for: .seconds(2))
            process.terminate(SIGTERM)
            _ = await process.exit()
            let text = log()
            #expect(text.contains("debug"), "\(command.name) logged no debug line: \(text.prefix(2000))")
            for secret in [databasePassword, brokerPassword, token] {
                #expect(!text.contains(secret), "\(command.name) logged a secret: \(text)")
            }
        }
    }
}
