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
    /// The site of both scenarios: two rooms with a door, correlated shadowing, a wall, 10 % loss.
    static let site = """
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
        """

    static let scenario = """
        seed: 41
        start_unix_s: 1767261600
        duration_s: 150
        \(site)
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

    /// A directory holding `scenario.yaml`, `sites.yaml` and the scenario's captures (`captures/<site>-<agent>.btsnoop`),
    /// made by `beaconflow simulate`; the caller removes it.
    static func simulate(_ scenario: String, sites: String, in prefix: String, _ executable: String) async throws -> String {
        let work = try makeTemporaryDirectory(prefix: prefix)
        try scenario.write(toFile: work + "/scenario.yaml", atomically: true, encoding: .utf8)
        try sites.write(toFile: work + "/sites.yaml", atomically: true, encoding: .utf8)
        let simulated = try await runProgram(executable, ["simulate", "--scenario", work + "/scenario.yaml", "--out", work + "/captures"])
        #expect(simulated.status == 0, "\(simulated.errors)")
        return work
    }

    /// Kill -9 of the ingest, SIGKILL of the broker (persistence off), an immediate stop of PostgreSQL, kill -9 of an
    /// agent and the same command again, all during one replay: every sighting is stored once with its capture
    /// time to the microsecond (compared key by key with the captures), every TLM transmission once, and every row
    /// under its beacon's identity.
    @Test func everyPartFailsOnceDuringAReplayAndEverySightingIsStoredOnce() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try await Self.simulate(Self.scenario, sites: Self.sites, in: "faults", executable)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let captures = ["hq-a1", "hq-a2"].map { (agent: $0, path: "\(work)/captures/hq-\($0).btsnoop") }

        let broker = try await onThread { try MosquittoServer(persistence: false) }
        let database = try await PostgresServer.start()
        let ingestArguments = [
            "ingest", "--sites", work + "/sites.yaml", "--broker", broker.url, "--database", database.conninfo,
            "--metrics-listen", "none",
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

        // Key by key: agent, capture time as the agents' batches carry it (to the millisecond), RSSI.
        struct Key: Hashable { var agent: String; var micros: Int64; var rssi: Int }
        let sent = BatchBuilder.Configuration()
        var expected: [Key: Int] = [:]
        var transmissions = Set<[UInt8]>()
        for capture in captures {
            for sighting in try expectedSightings(capture: capture.path, configuration: .init()) {
                expected[Key(agent: capture.agent, micros: sent.sentTime(sighting.timeMicros), rssi: Int(sighting.rssi)), default: 0] += 1
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
        // Every beacon of the scenario sends an identity: no row is stored under an address.
        let addressRows = try await onThread {
            try PostgresConnection(database.conninfo).query(
                "SELECT (SELECT count(*) FROM beaconflow.sightings WHERE beacon_id LIKE 'mac:%'), (SELECT count(*) FROM beaconflow.telemetry WHERE beacon_id LIKE 'mac:%')")
        }
        #expect(addressRows.first?.values == ["0", "0"], "rows stored under an address: \(addressRows)")
        // Every fault happened: the ingest lost the broker and PostgreSQL and reconnected, and the agent resumed.
        #expect(ingestLog.contains("Broker connection lost") && ingestLog.contains("PostgreSQL connection lost; reconnecting"), "\(ingestLog.suffix(3000))")
        let againLog = (try? String(contentsOfFile: work + "/a1-again.log", encoding: .utf8)) ?? ""
        #expect(againLog.contains("Replay resumes after what the spool holds"), "\(againLog)")
    }

    /// The zone scenario of the restart test: four minutes of beacons moving between two rooms.
    static let movingScenario = """
        seed: 43
        start_unix_s: 1767265200
        duration_s: 240
        \(site)
        beacons:
          - {name: cart, site: hq, type: eddystone-uid, namespace: 0102030405060708090a, instance: 0000000000c1, interval_ms: 200, path: [{at_s: 0, zone: lobby}, {at_s: 70, zone: lab}, {at_s: 160, zone: lobby}]}
          - {name: bed, site: hq, type: eddystone-uid, namespace: 0102030405060708090a, instance: 0000000000c2, interval_ms: 250, path: [{at_s: 0, zone: lab}]}
          - {name: badge-1, site: hq, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, major: 1, minor: 1, interval_ms: 250, path: [{at_s: 0, zone: lobby}, {at_s: 40, zone: lab}, {at_s: 110, zone: lobby}]}
          - {name: badge-2, site: hq, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, major: 1, minor: 2, interval_ms: 300, path: [{at_s: 0, zone: lab}, {at_s: 90}]}
          - {name: badge-3, site: hq, type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, major: 1, minor: 3, interval_ms: 300, path: [{at_s: 30, zone: lobby}, {at_s: 130, zone: lab}]}
        """

    /// The sites file names a third agent that never sends. The default history over 60 s, so that minutes are
    /// counted (and checkpoints taken) early in the replay.
    static let sitesWithASilentAgent = """
        sites:
          - id: hq
            allowed_lateness_s: 8
            history_lag_s: 60
            zones: [{id: lobby}, {id: lab}]
            agents: [{id: hq-a1, zone: lobby}, {id: hq-a2, zone: lab}, {id: hq-a3, zone: lab}]
        """

    /// The same replay twice at once, each through its own broker, PostgreSQL, ingest and agents: once undisturbed,
    /// once with the ingest stopped gracefully and started again before it has counted a minute, a second ingest
    /// started on the same sites (it stands by), then the first killed (-9) between checkpoints, so that the
    /// second takes over. Both end with the same visits and minute counts, to the microsecond, and the same
    /// sightings; the agent that never sends loses nothing either.
    @Test func anIngestRestartedGracefullyOrKilledGivesTheZonesOfAnUndisturbedRun() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try await Self.simulate(Self.movingScenario, sites: Self.sitesWithASilentAgent, in: "restarts", executable)
        defer { try? FileManager.default.removeItem(atPath: work) }

        struct Run {
            var broker: MosquittoServer
            var database: PostgresServer
            var arguments: [String]
            var ingest: ChildProcess
            var agents: [ChildProcess]
        }
        func start(_ name: String) async throws -> Run {
            let broker = try await onThread { try MosquittoServer(persistence: false) }
            let database = try await PostgresServer.start()
            let arguments = [
                "ingest", "--sites", work + "/sites.yaml", "--broker", broker.url, "--database", database.conninfo,
                // No listener: a port picked free here could be taken by the other run's servers before the
                // ingest binds it.
                "--metrics-listen", "none",
            ]
            let ingest = try ChildProcess(executable, arguments, standardErrorPath: "\(work)/\(name)-ingest.log")
            let agents = try ["hq-a1", "hq-a2"].map { agent in
                try ChildProcess(
                    executable,
                    [
                        "agent", "--site", "hq", "--agent", agent, "--source", "btsnoop:\(work)/captures/hq-\(agent).btsnoop",
                        "--speed", "4", "--broker", broker.url, "--spool", "\(work)/\(name)-spool-\(agent)",
                        "--batch-max-age-ms", "200", "--ack-timeout", "2", "--drain-timeout", "120",
                    ], standardErrorPath: "\(work)/\(name)-\(agent).log")
            }
            return Run(broker: broker, database: database, arguments: arguments, ingest: ingest, agents: agents)
        }
        let undisturbed = try await start("undisturbed")
        var restarted = try await start("restarted")
        defer {
            for run in [undisturbed, restarted] {
                run.ingest.terminate()
                for agent in run.agents { agent.terminate() }
            }
        }

        // 240 s at four times real speed: 60 s. The first minute is counted about 30 s in (its end plus the
        // history lag), and again every 15 s.
        try await Task.sleep(for: .seconds(12))
        restarted.ingest.terminate()
        #expect(await restarted.ingest.exit() == 0)
        restarted.ingest = try ChildProcess(executable, restarted.arguments, standardErrorPath: work + "/restarted-ingest.log")
        try await Task.sleep(for: .seconds(2))
        let standby = try ChildProcess(executable, restarted.arguments, standardErrorPath: work + "/standby-ingest.log")
        defer { standby.terminate() }
        try await Task.sleep(for: .seconds(19))
        // Killed once it has saved a checkpoint (about 30 s in; later on a loaded machine), so that the standby
        // takes over from one.
        let checkpointDeadline = ContinuousClock.now + .seconds(60)
        let restartedDatabase = restarted.database.conninfo
        var checkpoints: Int64 = 0
        while ContinuousClock.now < checkpointDeadline {
            checkpoints = try await onThread {
                try PostgresConnection(restartedDatabase).query("SELECT count(*) FROM beaconflow.zone_checkpoints")
                    .first?.decode(0, as: Int64.self) ?? 0
            }
            if checkpoints > 0 { break }
            try await Task.sleep(for: .milliseconds(500))
        }
        #expect(checkpoints > 0, "the restarted ingest saved no zone checkpoint within 60 s of its first 21")
        restarted.ingest.terminate(SIGKILL)
        _ = await restarted.ingest.exit()

        for (name, run) in [("undisturbed", undisturbed), ("restarted", restarted)] {
            for (agent, process) in zip(["hq-a1", "hq-a2"], run.agents) {
                let status = await process.exit()
                let log = (try? String(contentsOfFile: "\(work)/\(name)-\(agent).log", encoding: .utf8)) ?? ""
                #expect(status == 0, "\(name) \(agent): exit \(status)\n\(log.suffix(2000))")
            }
        }
        // Agents done, they are let go after the allowed lateness and every reading is applied.
        let tables = [
            "SELECT beacon_id, zone_id, (extract(epoch FROM enter_ts) * 1000000)::bigint, (extract(epoch FROM exit_ts) * 1000000)::bigint FROM beaconflow.visits ORDER BY 1, 3",
            "SELECT zone_id, bucket, occupants, occupant_seconds FROM beaconflow.zone_occupancy ORDER BY 2, 1",
            "SELECT agent_id, count(*), sum(rssi) FROM beaconflow.sightings GROUP BY 1 ORDER BY 1",
        ]
        func contents(_ run: Run) async throws -> [[[String?]]] {
            try await onThread {
                let connection = try PostgresConnection(run.database.conninfo)
                return try tables.map { try connection.query($0).map(\.values) }
            }
        }
        var expected: [[[String?]]] = []
        var actual: [[[String?]]] = []
        let deadline = ContinuousClock.now + .seconds(40)
        repeat {
            try await Task.sleep(for: .seconds(1))
            expected = try await contents(undisturbed)
            actual = try await contents(restarted)
        } while (expected != actual || expected[1].count < 6) && ContinuousClock.now < deadline
        let log = (try? String(contentsOfFile: work + "/restarted-ingest.log", encoding: .utf8)) ?? ""
        let standbyLog = (try? String(contentsOfFile: work + "/standby-ingest.log", encoding: .utf8)) ?? ""
        #expect(expected[0].count >= 8, "visits: \(expected[0])")
        #expect(expected[1].count >= 6 && expected[1].contains { $0[2] != "0" }, "minutes: \(expected[1])")
        #expect(actual[0] == expected[0], "visits after restarts:\n\(actual[0])\nundisturbed:\n\(expected[0])")
        #expect(actual[1] == expected[1], "minutes after restarts:\n\(actual[1])\nundisturbed:\n\(expected[1])")
        #expect(actual[2] == expected[2], "sightings after restarts: \(actual[2]), undisturbed: \(expected[2])")
        // The restart happened and read back the sightings; the second instance stood by, then took over from the
        // checkpoint.
        #expect(log.components(separatedBy: "Connected to PostgreSQL").count == 3, "\(log.suffix(3000))")
        let claims = log.split(separator: "\n").filter { $0.contains("Sites claimed") }
        #expect(claims.count == 2 && !claims[1].contains("sightings_replayed=0 "), "\(log.suffix(3000))")
        let standbyClaims = standbyLog.split(separator: "\n").filter { $0.contains("Sites claimed") }
        #expect(
            standbyClaims.count == 1 && standbyClaims[0].contains("sites_from_checkpoints=1")
                && standbyClaims[0].contains("taken_over=1"), "\(standbyLog.suffix(3000))")
    }

    /// Three sites of two rooms each, beacons moving between them, two agents per site.
    static let threeSites: [String] = ["hq", "east", "west"]

    static var threeSiteScenario: String {
        var text = "seed: 47\nstart_unix_s: 1767268800\nduration_s: 240\nsites:\n"
        var beacons = "beacons:\n"
        for (index, site) in threeSites.enumerated() {
            text += """
                  - id: \(site)
                    shadowing_db: 4
                    shadowing_correlation_s: 3
                    wall_loss_db: 6
                    zones:
                      - {id: lobby, rect: [0, 0, 6, 5]}
                      - {id: lab, rect: [6, 0, 12, 5]}
                    doors:
                      - {zones: [lobby, lab], at: [6, 2.5]}
                    agents:
                      - {id: \(site)-a1, zone: lobby, position: [3, 2.5], loss: 0.1}
                      - {id: \(site)-a2, zone: lab, position: [9, 2.5], loss: 0.1}

                """
            let n = index + 1
            beacons += """
                  - {name: cart-\(n), site: \(site), type: eddystone-uid, namespace: 0102030405060708090a, instance: 00000000\(n)0c1, tlm_every: 5, interval_ms: 250, path: [{at_s: 0, zone: lobby}, {at_s: \(60 + 10 * n), zone: lab}, {at_s: 170, zone: lobby}]}
                  - {name: bed-\(n), site: \(site), type: eddystone-uid, namespace: 0102030405060708090a, instance: 00000000\(n)0c2, tlm_every: 5, interval_ms: 300, path: [{at_s: 0, zone: lab}]}
                  - {name: badge-\(n), site: \(site), type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, major: \(n), minor: 1, interval_ms: 300, path: [{at_s: 0, zone: lobby}, {at_s: \(30 + 10 * n), zone: lab}, {at_s: 120, zone: lobby}]}
                  - {name: visitor-\(n), site: \(site), type: ibeacon, uuid: e2c56db5dffb48d2b060d0f5a71096e0, major: \(n), minor: 2, interval_ms: 300, path: [{at_s: 20, zone: lab}, {at_s: \(100 + 10 * n)}]}

                """
        }
        return text + beacons
    }

    static var threeSiteSites: String {
        "sites:\n" + threeSites.map { site in
            """
              - id: \(site)
                allowed_lateness_s: 8
                history_lag_s: 60
                zones: [{id: lobby}, {id: lab}]
                agents: [{id: \(site)-a1, zone: lobby}, {id: \(site)-a2, zone: lab}]

            """
        }.joined()
    }

    /// The same three-site replay twice at once, each through its own broker, PostgreSQL and agents: once with one
    /// ingest, once with an ingest that a second joins (they share the sites), then the first killed (-9) so that
    /// the second takes its sites over, then a third joining. Both runs end with the same visits and per-minute
    /// occupancy to the microsecond, the same sightings, every TLM transmission once.
    @Test func instancesJoiningAndDyingGiveTheResultsOfASingleInstance() async throws {
        let executable = try #require(beaconflowExecutable)
        let work = try await Self.simulate(Self.threeSiteScenario, sites: Self.threeSiteSites, in: "sharing", executable)
        defer { try? FileManager.default.removeItem(atPath: work) }

        struct Run {
            var name: String
            var broker: MosquittoServer
            var database: PostgresServer
            var ingests: [ChildProcess] = []
            var agents: [ChildProcess] = []
        }
        func startIngest(_ run: inout Run, _ instance: String) throws {
            run.ingests.append(
                try ChildProcess(
                    executable,
                    [
                        "ingest", "--sites", work + "/sites.yaml", "--broker", run.broker.url, "--database",
                        run.database.conninfo, "--client-id", instance, "--metrics-listen", "none",
                    ], standardErrorPath: "\(work)/\(run.name)-\(instance).log"))
        }
        func start(_ name: String) async throws -> Run {
            var run = Run(
                name: name, broker: try await onThread { try MosquittoServer(persistence: false) },
                database: try await PostgresServer.start())
            try startIngest(&run, "ingest-1")
            for site in Self.threeSites {
                for agent in ["\(site)-a1", "\(site)-a2"] {
                    run.agents.append(
                        try ChildProcess(
                            executable,
                            [
                                "agent", "--site", site, "--agent", agent, "--source", "btsnoop:\(work)/captures/\(site)-\(agent).btsnoop",
                                "--speed", "4", "--broker", run.broker.url, "--spool", "\(work)/\(name)-spool-\(agent)",
                                "--batch-max-age-ms", "200", "--ack-timeout", "2", "--drain-timeout", "120",
                            ], standardErrorPath: "\(work)/\(name)-\(agent).log"))
                }
            }
            return run
        }
        let single = try await start("single")
        var shared = try await start("shared")
        defer {
            for run in [single, shared] {
                for process in run.ingests + run.agents { process.terminate() }
            }
        }
        func query(_ run: Run, _ sql: String) async throws -> [[String?]] {
            try await onThread { try PostgresConnection(run.database.conninfo).query(sql).map(\.values) }
        }
        func owners(_ run: Run) async throws -> [String: Int] {
            var counts: [String: Int] = [:]
            // Nothing until the first ingest has made the schema.
            for row in (try? await query(run, "SELECT instance FROM beaconflow.site_owners")) ?? [] { counts[row[0] ?? "", default: 0] += 1 }
            return counts
        }
        func waitForOwners(_ run: Run, _ description: String, _ condition: ([String: Int]) -> Bool) async throws -> Duration {
            let started = ContinuousClock.now
            var seen: [String: Int] = [:]
            while ContinuousClock.now - started < .seconds(20) {
                seen = try await owners(run)
                if condition(seen) { return ContinuousClock.now - started }
                try await Task.sleep(for: .milliseconds(100))
            }
            Issue.record("\(description): owners \(seen)")
            return .seconds(20)
        }

        // 240 s at four times real speed: 60 s.
        _ = try await waitForOwners(shared, "the first serves every site") { $0 == ["ingest-1": 3] }
        try await Task.sleep(for: .seconds(8))
        try startIngest(&shared, "ingest-2")
        _ = try await waitForOwners(shared, "the second joins") { $0["ingest-1"] == 2 && $0["ingest-2"] == 1 }
        try await Task.sleep(for: .seconds(10))
        shared.ingests[0].terminate(SIGKILL)
        _ = await shared.ingests[0].exit()
        let takeOver = try await waitForOwners(shared, "the second takes the dead one's sites") { $0 == ["ingest-2": 3] }
        #expect(takeOver < .seconds(15))
        try await Task.sleep(for: .seconds(5))
        try startIngest(&shared, "ingest-3")
        _ = try await waitForOwners(shared, "the third joins") { $0["ingest-2"] == 2 && $0["ingest-3"] == 1 }

        for run in [single, shared] {
            for (index, process) in run.agents.enumerated() {
                let status = await process.exit()
                #expect(status == 0, "\(run.name) agent \(index): exit \(status)")
            }
        }
        // Agents done, they are let go after the allowed lateness and every reading is applied.
        let tables = [
            "SELECT site_id, beacon_id, zone_id, (extract(epoch FROM enter_ts) * 1000000)::bigint, (extract(epoch FROM exit_ts) * 1000000)::bigint FROM beaconflow.visits ORDER BY 1, 2, 4",
            "SELECT site_id, zone_id, bucket, occupants, occupant_seconds FROM beaconflow.zone_occupancy ORDER BY 1, 3, 2",
            "SELECT agent_id, count(*), sum(rssi) FROM beaconflow.sightings GROUP BY 1 ORDER BY 1",
            "SELECT site_id, count(*), count(DISTINCT (beacon_id, adv_count, uptime_s)) FROM beaconflow.telemetry GROUP BY 1 ORDER BY 1",
        ]
        func contents(_ run: Run) async throws -> [[[String?]]] {
            var all: [[[String?]]] = []
            for table in tables { all.append(try await query(run, table)) }
            return all
        }
        var expected: [[[String?]]] = []
        var actual: [[[String?]]] = []
        let deadline = ContinuousClock.now + .seconds(40)
        repeat {
            try await Task.sleep(for: .seconds(1))
            expected = try await contents(single)
            actual = try await contents(shared)
        } while (expected != actual || expected[1].count < 18) && ContinuousClock.now < deadline
        #expect(Set(expected[0].map { $0[0] }).count == 3 && expected[0].count >= 24, "visits: \(expected[0])")
        #expect(expected[1].count >= 18 && expected[1].contains { $0[3] != "0" }, "minutes: \(expected[1])")
        #expect(expected[3].count == 3 && expected[3].allSatisfy { $0[1] == $0[2] && $0[1] != "0" }, "telemetry: \(expected[3])")
        for (index, what) in ["visits", "minutes", "sightings", "telemetry"].enumerated() {
            #expect(actual[index] == expected[index], "\(what) with instances sharing:\n\(actual[index])\none instance:\n\(expected[index])")
        }
    }
}
