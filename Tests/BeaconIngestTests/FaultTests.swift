import BeaconAgent
import BeaconWire
import Foundation
import LibPQ
import LocalServers
import TestServers
import Testing
import WorkQueue

/// One replay of two agents through the real processes while every part fails once.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"),
    .timeLimit(.minutes(5)))
struct FaultTests {
    static let scenario = """
        seed: 41
        start_unix_s: 1767261600
        duration_s: 150
        sites:
          - id: hq
            shadowing_db: 4
            shadowing_correlation_s: 3
            wall_loss_db: 6
            zones:
              - {id: lobby, rect: [0, 0, 6, 5]}
              - {id: lab, rect: [6, 0, 12, 5]}
            doors:
              - {zones: [lobby, lab], at: [6, 2.5]}
            agents:
              - {id: hq-a1, zone: lobby, position: [3, 2.5], loss: 0.1}
              - {id: hq-a2, zone: lab, position: [9, 2.5], loss: 0.1}
        beacons:
          - {name: cart, site: hq, type: eddystone-uid, namespace: 0102030405060708090a, instance: 0000000000c1, tlm_every: 4, interval_ms: 200, path: [{at_s: 0, zone: lobby}, {at_s: 70, zone: lab}]}
          - {name: bed, site: hq, type: eddystone-uid, namespace: 0102030405060708090a, instance: 0000000000c2, tlm_every: 5, interval_ms: 250, path: [{at_s: 0, zone: lab}]}
          - {name: badge-1, site: hq, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, major: 1, minor: 1, interval_ms: 250, path: [{at_s: 0, zone: lobby}, {at_s: 40, zone: lab}, {at_s: 110, zone: lobby}]}
          - {name: badge-2, site: hq, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, major: 1, minor: 2, interval_ms: 300, path: [{at_s: 0, zone: lab}, {at_s: 90}]}
          - {name: tag, site: hq, type: altbeacon, uuid: 00112233445566778899aabbccddeeff, major: 3, minor: 4, interval_ms: 500, path: [{at_s: 0, zone: lobby}]}
        """

    static let sites = """
        sites:
          - id: hq
            zones: [{id: lobby}, {id: lab}]
            agents: [{id: hq-a1, zone: lobby}, {id: hq-a2, zone: lab}]
        """

    /// Kill -9 of the ingest, SIGKILL of the broker (persistence off), an immediate stop of PostgreSQL, kill -9 of an
    /// agent and the same command again, all during one replay: every sighting is stored once with its capture
    /// time to the microsecond (compared key by key with the captures), and every TLM transmission once.
    @Test func everyPartFailsOnceDuringAReplayAndEverySightingIsStoredOnce() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try makeTemporaryDirectory(prefix: "faults")
        defer { try? FileManager.default.removeItem(atPath: work) }
        try Self.scenario.write(toFile: work + "/scenario.yaml", atomically: true, encoding: .utf8)
        try Self.sites.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        let simulated = try await runProgram(executable, ["simulate", "--scenario", work + "/scenario.yaml", "--out", work + "/captures"])
        #expect(simulated.status == 0, "\(simulated.errors)")
        let captures = ["hq-a1", "hq-a2"].map { (agent: $0, path: "\(work)/captures/hq-\($0).btsnoop") }

        let broker = try await onThread { try MosquittoServer(persistence: false) }
        let database = try await PostgresServer.start()
        let port = try freeLoopbackPort()
        let ingestArguments = [
            "ingest", "--sites", work + "/sites.yaml", "--broker", broker.url, "--database", database.conninfo,
            "--metrics-listen", "127.0.0.1:\(port)",
        ]
        var ingest = try ChildProcess(executable, ingestArguments, standardErrorPath: work + "/ingest.log")
        defer { ingest.terminate() }
        func agent(_ name: String, log: String) throws -> ChildProcess {
            try ChildProcess(
                executable,
                [
                    "agent", "--site", "hq", "--agent", name, "--source", "btsnoop:\(work)/captures/hq-\(name).btsnoop",
                    "--speed", "3", "--broker", broker.url, "--spool", "\(work)/spool-\(name)", "--batch-max-age-ms", "200",
                    "--ack-timeout", "2", "--drain-timeout", "120",
                ], standardErrorPath: "\(work)/\(log).log")
        }
        var first = try agent("hq-a1", log: "a1-first")
        let second = try agent("hq-a2", log: "a2")
        defer {
            first.terminate()
            second.terminate()
        }

        // The 150 s capture lasts 50 s at three times real speed; a fault every 7 s.
        try await Task.sleep(for: .seconds(7))
        ingest.terminate(SIGKILL)
        try await Task.sleep(for: .seconds(1))
        ingest = try ChildProcess(executable, ingestArguments, standardErrorPath: work + "/ingest.log")

        try await Task.sleep(for: .seconds(7))
        broker.kill()
        try await Task.sleep(for: .seconds(1))
        try await onThread { try broker.start() }

        try await Task.sleep(for: .seconds(7))
        await database.stopImmediately()
        try await Task.sleep(for: .seconds(1))
        try await database.restart()

        try await Task.sleep(for: .seconds(7))
        first.terminate(SIGKILL)
        first = try agent("hq-a1", log: "a1-again")

        // Each agent exits 0 only once the ingest has acknowledged every batch, after committing it.
        for (process, log) in [(first, "a1-again"), (second, "a2")] {
            let status = await process.exit()
            let text = (try? String(contentsOfFile: "\(work)/\(log).log", encoding: .utf8)) ?? ""
            #expect(status == 0, "\(log): exit \(status)\n\(text)")
        }
        let ingestLog = (try? String(contentsOfFile: work + "/ingest.log", encoding: .utf8)) ?? ""

        // Key by key: agent, capture time to the µs, RSSI.
        struct Key: Hashable { var agent: String; var micros: Int64; var rssi: Int }
        var expected: [Key: Int] = [:]
        var transmissions = Set<[UInt8]>()
        for capture in captures {
            for sighting in try expectedSightings(capture: capture.path, configuration: .init()) {
                expected[Key(agent: capture.agent, micros: sighting.timeMicros, rssi: Int(sighting.rssi)), default: 0] += 1
                // An unencrypted TLM: its advertising count and uptime identify the transmission.
                if case .eddystone(let bytes) = sighting.data, bytes.count >= 14, bytes[0] == 0x20, bytes[1] == 0 {
                    transmissions.insert(Array(bytes[6..<14]))
                }
            }
        }
        #expect(expected.values.reduce(0, +) > 4_000)
        #expect(transmissions.count > 100)
        let rows = try await onThread {
            try PostgresConnection(database.conninfo).query(
                "SELECT agent_id, (extract(epoch FROM ts) * 1000000)::bigint, rssi FROM beaconflow.sightings")
        }
        var stored: [Key: Int] = [:]
        for row in rows {
            guard let agent = row[0], let micros = row[1].flatMap({ Int64($0) }), let rssi = row[2].flatMap({ Int($0) }) else { continue }
            stored[Key(agent: agent, micros: micros, rssi: rssi), default: 0] += 1
        }
        let missing = expected.filter { stored[$0.key, default: 0] < $0.value }.count
        let extra = stored.filter { expected[$0.key, default: 0] < $0.value }.count
        #expect(rows.count == expected.values.reduce(0, +) && missing == 0 && extra == 0,
                "\(rows.count) rows for \(expected.values.reduce(0, +)) sightings: \(missing) keys missing, \(extra) extra\n\(ingestLog.suffix(3000))")

        let telemetry = try await onThread {
            try PostgresConnection(database.conninfo).query(
                "SELECT count(*), count(DISTINCT (beacon_id, adv_count, uptime_s)) FROM beaconflow.telemetry")
        }
        #expect(telemetry.first?[0] == telemetry.first?[1], "a TLM transmission stored twice: \(telemetry)")
        #expect(telemetry.first?[0] == String(transmissions.count), "\(telemetry) rows for \(transmissions.count) transmissions")
        // Every fault happened: the ingest lost the broker and PostgreSQL and reconnected, and the agent resumed.
        #expect(ingestLog.contains("Broker connection lost") && ingestLog.contains("PostgreSQL connection lost; reconnecting"), "\(ingestLog.suffix(3000))")
        let againLog = (try? String(contentsOfFile: work + "/a1-again.log", encoding: .utf8)) ?? ""
        #expect(againLog.contains("Replay resumes after what the spool holds"), "\(againLog)")
    }
}
