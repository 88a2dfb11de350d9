import BeaconIngest
import BeaconWire
import Foundation
import LibPQ
import LocalServers
import Logging
import Mosquitto
import Synchronization

/// Every acknowledgement as it arrived: agent index, committed-through sequence, wall clock (µs).
final class AcknowledgementLog: Sendable {
    let entries = Mutex<[(agent: Int, through: UInt64, atMicros: Int64)]>([])
}

final class Environment: @unchecked Sendable {
    let broker: MosquittoServer
    let database: PostgresServer
    /// The ingest instances in this process (sharing the sites), or
    let ingests: [Ingest]
    let tasks: [Task<Void, Error>]
    /// a `beaconflow ingest` process.
    let ingestProcess: ChildProcess?
    let publisher: MQTTClient
    /// The publisher's connection, until `stop()` cancels it.
    var connection: Task<Void, Never>!
    let acknowledgements = AcknowledgementLog()
    private let listener: Task<Void, Never>
    var nextSequence = [UInt64](repeating: 1, count: agentCount)
    /// Each agent's batch builder, kept from batch to batch as an agent keeps it (it leaves out the addresses it
    /// sent within the last minute).
    var builders: [BatchBuilder] = []
    let sites: Int

    init(ingestAsProcess: Bool = false, sites: Int = 1, instances: Int = 1) async throws {
        self.sites = sites
        broker = try MosquittoServer()
        database = try await PostgresServer.start()
        var logger = Logger(label: "bench-ingest")
        logger.logLevel = .warning
        if ingestAsProcess {
            let executable = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../../.build/release/beaconflow").standardized.path
            guard FileManager.default.isExecutableFile(atPath: executable) else {
                fatalError("\(executable) is missing: run `swift build -c release` in the main package first")
            }
            let sitesFile = database.directory + "/sites.yaml"
            try sitesText.write(toFile: sitesFile, atomically: true, encoding: .utf8)
            ingestProcess = try ChildProcess(
                executable,
                [
                    "ingest", "--sites", sitesFile, "--broker", "mqtt://127.0.0.1:\(broker.port)", "--database",
                    database.conninfo, "--metrics-listen", "none", "--log-level", "warning",
                ],
                // As a user runs it: without the benchmark's own malloc interposer, which the benchmark's
                // environment preloads.
                environment: ProcessInfo.processInfo.environment.filter { $0.key != "LD_PRELOAD" },
                standardErrorPath: database.directory + "/ingest.log")
            ingests = []
            tasks = []
        } else {
            var made: [Ingest] = []
            for instance in 0..<instances {
                var mqtt = MQTTClient.Configuration(host: "127.0.0.1", port: broker.port, clientID: "bench-ingest-\(instance)")
                mqtt.reconnectDelayMinimum = .milliseconds(50)
                var configuration = IngestConfiguration(
                    mqtt: mqtt, database: database.conninfo, sites: try SitesConfiguration.parse(makeSitesText(sites: sites)))
                configuration.queueCapacity = 4096
                made.append(Ingest(configuration: configuration, logger: logger))
            }
            ingests = made
            tasks = made.map { ingest in Task { try await ingest.run() } }
            ingestProcess = nil
        }
        var publisherConfiguration = MQTTClient.Configuration(host: "127.0.0.1", port: broker.port, clientID: "bench-agents")
        publisherConfiguration.reconnectDelayMinimum = .milliseconds(50)
        publisher = try MQTTClient(publisherConfiguration, logger: logger)
        let events = publisher.events
        let acknowledgements = self.acknowledgements
        listener = Task {
            for await event in events {
                guard case .message(let topic, let payload, _) = event else { continue }
                let parts = topic.split(separator: "/")
                guard parts.count == 5, parts[4] == "ack", let agent = parts[3].split(separator: "-").last.flatMap({ Int($0) }),
                    let text = String(bytes: payload, encoding: .utf8),
                    let through = text.split(whereSeparator: { !$0.isNumber }).last.flatMap({ UInt64($0) })
                else { continue }
                let now = wallClockMicros()
                acknowledgements.entries.withLock { $0.append((agent, through, now)) }
            }
        }
        connection = Task { [publisher] in await publisher.run() }
        try publisher.subscribe(topic: "beaconflow/v1/+/+/ack", qos: 1)
        // Every instance connected and serving its share of the sites.
        let deadline = ContinuousClock.now + .seconds(60)
        while !ingests.allSatisfy({ $0.statistics.mqttConnected && $0.statistics.sitesServed == sites / instances }) {
            guard ContinuousClock.now < deadline else { fatalError("the instances did not share the sites: \(ingests.map(\.statistics))") }
            try await Task.sleep(for: .milliseconds(20))
        }
        if ingestAsProcess {
            // The process subscribes once it has claimed the site.
            let conninfo = database.conninfo
            while (try? PostgresConnection(conninfo).query("SELECT count(*) FROM beaconflow.site_owners").first?[0]) != "1" {
                guard ContinuousClock.now < deadline else { fatalError("the ingest process did not claim the site") }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        try await Task.sleep(for: .milliseconds(300))  // its subscriptions are in place
    }

    /// One sealed batch of `agent`: `sightingsPerBatch` sightings of `beacons` (round robin) from `start`, `step`
    /// apart.
    func batch(agent: Int, beacons: Range<Int>, start: Int64, step: Int64) throws -> [UInt8] {
        if builders.isEmpty { builders = (0..<agentCount).map { makeBuilder(site: site(of: $0, sites: sites), agent: $0) } }
        let sequence = nextSequence[agent]
        nextSequence[agent] += 1
        return try sealedBatch(&builders[agent], beacons: beacons, start: start, step: step, sequence: sequence)
    }

    func publish(agent: Int, _ payload: [UInt8]) throws {
        _ = try publisher.publish(topic: "beaconflow/v1/\(site(of: agent, sites: sites))/agent-\(agent)/batch", payload: payload, qos: 1)
    }

    var committedSightings: Int { ingests.map(\.statistics.sightingsCommitted).reduce(0, +) }

    /// Waits until the ingest instances in this process have committed `sightings` in all.
    func waitForCommitted(_ sightings: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(300)
        while committedSightings < sightings {
            guard ContinuousClock.now < deadline else { fatalError("not committed within 300 s: \(ingests.map(\.statistics))") }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Waits until every agent's last batch is acknowledged (committed).
    func waitForAcknowledgements() async throws {
        let deadline = ContinuousClock.now + .seconds(300)
        while ContinuousClock.now < deadline {
            let acknowledged = acknowledgements.entries.withLock { entries in
                (0..<agentCount).map { agent in entries.filter { $0.agent == agent }.map(\.through).max() ?? 0 }
            }
            if zip(acknowledged, nextSequence).allSatisfy({ $0 + 1 >= $1 }) { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        fatalError("not acknowledged within 300 s")
    }

    /// Stops the ingest, then the servers (the process exits without running deinitialisers).
    func stop() async throws {
        for ingest in ingests { ingest.requestStop() }
        for task in tasks { try await task.value }
        if let ingestProcess {
            ingestProcess.terminate()
        }
        connection.cancel()
        await connection.value
        listener.cancel()
        broker.stop()
        await database.stopAndWait()
    }
}

nonisolated(unsafe) var environment: Environment!
