import BeaconAgent
import BeaconSimulation
import BeaconWire
import Foundation
import LibPQ
import LocalServers
import Mosquitto
import Logging
import Synchronization
import TestServers
import Testing
import WorkQueue

/// Seeded runs of the whole pipeline (two agents, two brokers, two ingests, PostgreSQL) with randomly timed
/// faults: processes killed or frozen, PostgreSQL stopped at once, brokers restarted, a reader holding a
/// transaction on every view, one credential flooding its site, and (with Debian's faketime) one ingest whose clock
/// is ten minutes behind throughout. After each run every sighting and TLM transmission the agents sent is looked
/// for in the database: none lost, none twice, and the site never unserved for longer than the bound.
///
/// `FAULT_CAMPAIGN_SEEDS` names the seeds (`1-3` by default, as CI runs them; `scripts/fault-campaign` runs more),
/// and `FAULT_CAMPAIGN_RESULTS` a file each run appends its figures to, as one JSON object per line.
@Suite(
    .enabled(if: MosquittoServer.executable != nil && PostgresServer.binaries != nil, "mosquitto or PostgreSQL is not installed"),
    .enabled(if: beaconflowExecutable != nil, "the beaconflow executable is not built"),
    .serialized, .timeLimit(.minutes(60)))
struct RandomFaultTests {
    static let seeds: [UInt64] = {
        let text = ProcessInfo.processInfo.environment["FAULT_CAMPAIGN_SEEDS"] ?? "1-3"
        let bounds = text.split(separator: "-").compactMap { UInt64($0) }
        guard let first = bounds.first else { return [1] }
        return Array(first...(bounds.count > 1 ? max(first, bounds[1]) : first))
    }()

    /// How long the site may go without a live owner in any run: a frozen owner's lease (8 s), the next look
    /// (1 s), and a PostgreSQL restart or a killed instance's restart on top.
    static let unservedBound: Duration = .seconds(30)

    static let sites = """
        sites:
          - id: hq
            zones: [{id: lobby}, {id: lab}]
            agents: [{id: hq-a1, zone: lobby}, {id: hq-a2, zone: lab}]
          - id: flood
            zones: [{id: hall}]
            agents: [{id: flood-a1, zone: hall}]
        """

    /// The kinds of fault a run draws from.
    enum Fault: String, CaseIterable {
        case killIngest = "kill_ingest", freezeIngest = "freeze_ingest", stopDatabase = "stop_database"
        case restartBroker = "restart_broker", killAgent = "kill_agent", readerTransaction = "reader_transaction"
        case flood
    }

    @Test(arguments: seeds)
    func aSeededRunOfRandomFaultsLosesAndDuplicatesNothing(seed: UInt64) async throws {
        let executable = try #require(beaconflowExecutable)
        var random = SeededGenerator(seed: seed)
        let scenario = FaultTests.scenario
            .replacingOccurrences(of: "seed: 41", with: "seed: \(100 + seed)")
            .replacingOccurrences(of: "duration_s: 150", with: "duration_s: 90")
        let work = try await FaultTests.simulate(scenario, sites: Self.sites, in: "campaign-\(seed)", executable)
        defer { try? FileManager.default.removeItem(atPath: work) }

        let brokers = try await onThread { [try MosquittoServer(persistence: false), try MosquittoServer(persistence: false)] }
        let database = try await PostgresServer.start()
        let brokerArguments = brokers.flatMap { ["--broker", $0.url] }
        let skewed = faketimeExecutable != nil && seed % 2 == 0
        func ingest(_ index: Int) throws -> ChildProcess {
            let arguments =
                ["ingest", "--sites", work + "/sites.yaml", "--database", database.conninfo, "--client-id", "campaign-ingest-\(index)",
                 "--metrics-listen", "none"] + brokerArguments
            let log = "\(work)/ingest-\(index).log"
            return index == 1 && skewed
                ? try startWithWallClockOffset("-600s", executable, arguments, standardErrorPath: log)
                : try ChildProcess(executable, arguments, standardErrorPath: log)
        }
        func agent(_ name: String) throws -> ChildProcess {
            try ChildProcess(
                executable,
                [
                    "agent", "--site", "hq", "--agent", name, "--source", "btsnoop:\(work)/captures/hq-\(name).btsnoop",
                    "--speed", "3", "--spool", "\(work)/spool-\(name)", "--batch-max-age-ms", "200", "--ack-timeout", "2",
                    "--drain-timeout", "240",
                ] + brokerArguments, standardErrorPath: "\(work)/\(name).log")
        }
        var ingests = [try ingest(0), try ingest(1)]
        let ingestPIDs = Mutex(ingests.map(\.pid))
        var agents = ["hq-a1": try agent("hq-a1"), "hq-a2": try agent("hq-a2")]
        defer {
            for process in ingests + Array(agents.values) {
                process.send(SIGCONT)
                process.terminate()
            }
        }

        // The site's owner and the ingests' memory, watched every 250 ms for the whole run.
        let watching = Task.detached {
            await Self.watch(conninfo: database.conninfo, ingests: { ingestPIDs.withLock { $0 } })
        }
        defer { watching.cancel() }

        // The replay lasts 30 s at three times real speed; a fault every 2-5 s from the third second.
        var faults: [String] = []
        var elapsed = Duration.seconds(3)
        try await Task.sleep(for: .seconds(3))
        while elapsed < .seconds(30) {
            let fault = Fault.allCases[Int(random.next() % UInt64(Fault.allCases.count))]
            let pause = Duration.milliseconds(Int64(500 + random.next() % 1500))
            faults.append(fault.rawValue)
            switch fault {
            case .killIngest:
                let index = Int(random.next() % 2)
                ingests[index].terminate(SIGKILL)
                try await Task.sleep(for: pause)
                ingests[index] = try ingest(index)
                ingestPIDs.withLock { $0[index] = ingests[index].pid }
            case .freezeIngest:
                let index = Int(random.next() % 2)
                ingests[index].send(SIGSTOP)
                try await Task.sleep(for: .milliseconds(Int64(2000 + random.next() % 8000)))
                ingests[index].send(SIGCONT)
            case .stopDatabase:
                await database.stopImmediately()
                try await Task.sleep(for: pause)
                try await database.restart()
            case .restartBroker:
                let broker = brokers[Int(random.next() % 2)]
                broker.kill()
                try await Task.sleep(for: pause)
                try await onThread { try broker.start() }
            case .killAgent:
                let name = random.next() % 2 == 0 ? "hq-a1" : "hq-a2"
                agents[name]?.terminate(SIGKILL)
                try await Task.sleep(for: pause)
                agents[name] = try agent(name)
            case .readerTransaction:
                let seconds = 5 + Int(random.next() % 10)
                Task.detached { try? Self.holdEveryView(conninfo: database.conninfo, seconds: seconds) }
            case .flood:
                try await Self.flood(broker: brokers[0], count: 10)
            }
            let gap = Duration.milliseconds(Int64(2000 + random.next() % 3000))
            try await Task.sleep(for: gap)
            elapsed += gap + pause
        }

        // Each agent exits 0 only once its every batch is acknowledged, after its commit.
        for (name, process) in agents {
            let status = await process.exit()
            let log = (try? String(contentsOfFile: "\(work)/\(name).log", encoding: .utf8)) ?? ""
            #expect(status == 0, "seed \(seed) \(name): exit \(status)\n\(log.suffix(2000))")
        }
        watching.cancel()
        let seen = await watching.value

        struct Key: Hashable { var agent: String; var micros: Int64; var rssi: Int }
        let sent = BatchBuilder.Configuration()
        var expected: [Key: Int] = [:]
        var transmissions = Set<[UInt8]>()
        for name in ["hq-a1", "hq-a2"] {
            for sighting in try expectedSightings(capture: "\(work)/captures/hq-\(name).btsnoop", configuration: .init()) {
                expected[Key(agent: name, micros: sent.sentTime(sighting.timeMicros), rssi: Int(sighting.rssi)), default: 0] += 1
                if case .eddystone(let bytes) = sighting.data, bytes.count >= 14, bytes[0] == 0x20, bytes[1] == 0 {
                    transmissions.insert(Array(bytes[6..<14]))
                }
            }
        }
        let connection = try PostgresConnection(database.conninfo)
        let rows = try connection.query(
            "SELECT agent_id, (extract(epoch FROM ts) * 1000000)::bigint, rssi FROM beaconflow.sightings WHERE site_id = 'hq'")
        var stored: [Key: Int] = [:]
        for row in rows {
            guard let agent = row[0], let micros = row[1].flatMap({ Int64($0) }), let rssi = row[2].flatMap({ Int($0) }) else { continue }
            stored[Key(agent: agent, micros: micros, rssi: rssi), default: 0] += 1
        }
        let lost = expected.reduce(0) { $0 + max(0, $1.value - stored[$1.key, default: 0]) }
        let duplicated = stored.reduce(0) { $0 + max(0, $1.value - expected[$1.key, default: 0]) }
        let telemetry = try connection.query(
            "SELECT count(*), count(DISTINCT (beacon_id, adv_count, uptime_s)) FROM beaconflow.telemetry WHERE site_id = 'hq'")
        let telemetryRows = Int(telemetry.first?[0] ?? "") ?? -1
        let telemetryDistinct = Int(telemetry.first?[1] ?? "") ?? -1
        let figures: [String: Any] = [
            "seed": seed, "faults": faults, "skewed_clock": skewed, "sightings": expected.values.reduce(0, +), "lost": lost,
            "duplicated": duplicated, "telemetry_expected": transmissions.count, "telemetry_rows": telemetryRows,
            "telemetry_lost": max(0, transmissions.count - telemetryDistinct), "telemetry_duplicated": telemetryRows - telemetryDistinct,
            "worst_unserved_s": Double(seen.worstUnserved.components.seconds) + Double(seen.worstUnserved.components.attoseconds) / 1e18,
            "peak_rss_mb": seen.peakRSSKilobytes / 1024,
        ]
        if let path = ProcessInfo.processInfo.environment["FAULT_CAMPAIGN_RESULTS"],
            let line = try? JSONSerialization.data(withJSONObject: figures, options: [.sortedKeys])
        {
            if let handle = FileHandle(forWritingAtPath: path) ?? (FileManager.default.createFile(atPath: path, contents: nil) ? FileHandle(forWritingAtPath: path) : nil) {
                handle.seekToEndOfFile()
                handle.write(line + Data("\n".utf8))
                try? handle.close()
            }
        }
        let logs = (0..<2).map { (try? String(contentsOfFile: "\(work)/ingest-\($0).log", encoding: .utf8)) ?? "" }
        #expect(lost == 0 && duplicated == 0, "seed \(seed) \(faults): \(lost) lost, \(duplicated) duplicated\n\(logs[0].suffix(2000))\n\(logs[1].suffix(2000))")
        #expect(telemetryRows == telemetryDistinct && telemetryDistinct == transmissions.count, "seed \(seed): \(figures)")
        #expect(seen.worstUnserved < Self.unservedBound, "seed \(seed) \(faults): unserved for \(seen.worstUnserved)")
        #expect(expected.values.reduce(0, +) > 1_000)
    }

    struct Watch: Sendable {
        var unservedSince: ContinuousClock.Instant?
        var worstUnserved: Duration = .zero
        var peakRSSKilobytes = 0
    }

    /// Polls which instance serves hq and the ingests' resident memory until cancelled, and returns what it saw. A
    /// look that cannot reach PostgreSQL (it is being restarted) counts as unserved, as the agents see it.
    static func watch(conninfo: String, ingests: @Sendable () -> [pid_t]) async -> Watch {
        var watch = Watch()
        var connection: PostgresConnection?
        while !Task.isCancelled {
            let now = ContinuousClock.now
            if connection == nil { connection = try? PostgresConnection(conninfo) }
            let served = (try? connection?.query("SELECT count(*) FROM beaconflow.site_owners WHERE site_id = 'hq'"))??.first?[0] == "1"
            if !served, (try? connection?.query("SELECT 1")) == nil { connection = nil }
            let resident = ingests().compactMap(residentKilobytes).max() ?? 0
            watch.peakRSSKilobytes = max(watch.peakRSSKilobytes, resident)
            if served {
                watch.unservedSince = nil
            } else {
                let since = watch.unservedSince ?? now
                watch.unservedSince = since
                watch.worstUnserved = max(watch.worstUnserved, now - since)
            }
            try? await Task.sleep(for: .milliseconds(250))
        }
        return watch
    }

    /// VmRSS of a process, in kB.
    static func residentKilobytes(_ pid: pid_t) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        return status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Int($0.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") }
    }

    /// A reader login holds one transaction open over every view for `seconds`.
    static func holdEveryView(conninfo: String, seconds: Int) throws {
        let owner = try PostgresConnection(conninfo)
        try owner.execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'campaign_reader') THEN CREATE ROLE campaign_reader LOGIN IN ROLE beaconflow_reader; END IF; END $$")
        let reader = try PostgresConnection(conninfo.replacingOccurrences(of: "user=postgres", with: "user=campaign_reader"))
        try reader.execute("BEGIN")
        for row in try reader.query("SELECT table_name FROM information_schema.views WHERE table_schema = 'beaconflow'") {
            if let view = row[0] { _ = try reader.query("SELECT * FROM beaconflow.\(view) LIMIT 1") }
        }
        Thread.sleep(forTimeInterval: Double(seconds))
        try reader.execute("COMMIT")
    }

    /// One credential (the flood site's agent) sends `count` batches of 10,000 sightings each as fast as it can.
    static func flood(broker: MosquittoServer, count: Int) async throws {
        var configuration = MQTTClient.Configuration(host: "127.0.0.1", port: broker.port, clientID: "campaign-flood-\(UInt32.random(in: 0...UInt32.max))")
        configuration.reconnectDelayMinimum = .milliseconds(50)
        let client = try MQTTClient(configuration, logger: Logger(label: "flood"))
        client.start()
        defer { client.stop() }
        let base = UInt64.random(in: 1...(1 << 40))
        for index in 0..<UInt64(count) {
            let payload = try batchPayload(
                site: "flood", agent: "flood-a1", sequence: base + index, count: 10_000, start: 1_767_261_600_000_000)
            try? client.publish(topic: "beaconflow/v1/flood/flood-a1/batch", payload: payload)
        }
        try await Task.sleep(for: .milliseconds(200))
    }
}
