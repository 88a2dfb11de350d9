import BeaconAgent
import BeaconIngest
import BeaconMessaging
import BeaconSimulation
import Foundation
import LibPQ
import LocalServers
import Logging
import Mosquitto
import WorkQueue

/// Plays a scenario through the real pipeline — one simulated agent per scenario agent, a mosquitto broker, the
/// ingest and PostgreSQL — and scores the views against the scenario's ground truth.
///
/// Each run gets a broker of its own (no retained acknowledgement or session crosses runs) and a database of its
/// own on the given server. Agents replay at full speed: the ingest decides zones in event time, so the tables are
/// the ones a live run would give.
public struct AccuracyRun: Sendable {
    public var scenario: Scenario
    public var method: ZoneMethod
    /// How long the agents may take to deliver everything.
    public var timeLimit: Duration = .seconds(600)

    public init(scenario: Scenario, method: ZoneMethod) {
        self.scenario = scenario
        self.method = method
    }

    /// The score per site.
    public func run(database server: PostgresServer, logger: Logger) async throws -> [String: AccuracyScore] {
        let simulator = try Simulator(scenario)
        let sites = try SitesConfiguration.forScenario(scenario, beaconIDs: simulator.beaconIDs, method: method)
        let broker = try MosquittoServer()
        let databaseName = "accuracy_\(method.name.replacingOccurrences(of: "-", with: "_"))_\(UInt32.random(in: 0...UInt32.max))"
        try await onThread { try PostgresConnection(server.conninfo).execute("CREATE DATABASE \(databaseName)") }
        let conninfo = "host=127.0.0.1 port=\(server.port) user=postgres dbname=\(databaseName) connect_timeout=5"

        let address = BrokerAddress(host: "127.0.0.1", port: broker.port)
        var mqtt = address.clientConfiguration(clientID: "accuracy-ingest", tls: nil)
        mqtt.reconnectDelayMinimum = .milliseconds(50)
        var configuration = IngestConfiguration(mqtt: mqtt, database: conninfo, sites: sites)
        // The scenario ends with the run: its last minutes are counted at stop, whatever the method's history lag.
        configuration.finishZonesAtStop = true
        let ingest = Ingest(configuration: configuration, logger: logger)
        let ingestTask = Task { try await ingest.run() }
        defer { ingest.requestStop() }
        let connected = ContinuousClock.now + .seconds(30)
        while !ingest.statistics.mqttConnected || !ingest.statistics.databaseConnected {
            guard ContinuousClock.now < connected else { throw HarnessError("the ingest did not connect within 30 s") }
            try await Task.sleep(for: .milliseconds(20))
        }

        var spools: [String] = []
        defer { for spool in spools { try? FileManager.default.removeItem(atPath: spool) } }
        try await withThrowingTaskGroup(of: (String, Agent.Outcome).self) { group in
            for site in scenario.sites {
                for agent in site.agents {
                    let spool = try makeTemporaryDirectory(prefix: "accuracy-spool")
                    spools.append(spool)
                    var configuration = try AgentConfiguration(
                        siteID: site.id, agentID: agent.id,
                        broker: address, spoolDirectory: spool)
                    configuration.acknowledgementTimeout = .seconds(5)
                    configuration.drainTimeout = timeLimit
                    let source = SimulatorSource(simulator: simulator, site: site.id, agent: agent.id, speed: .maximum)
                    let instance = Agent(configuration: configuration, source: source, logger: logger)
                    group.addTask { (agent.id, try await instance.run()) }
                }
            }
            for try await (agent, outcome) in group where outcome != .finished {
                throw HarnessError("agent \(agent) ended with \(outcome) before delivering everything")
            }
        }
        ingest.requestStop()
        try await ingestTask.value

        return try await onThread {
            let connection = try PostgresConnection(conninfo)
            var scores: [String: AccuracyScore] = [:]
            for site in scenario.sites {
                let visits = try connection.query(
                    """
                    SELECT beacon_id, zone_id, extract(epoch FROM enter_ts), extract(epoch FROM exit_ts)
                    FROM beaconflow.visits WHERE site_id = $1
                    """, [site.id]
                ).map { row in
                    AccuracyScore.Visit(
                        beaconID: try row.decode(0), zone: try row.decode(1), enter: try row.decode(2),
                        exit: try row.decode(3, as: Double?.self))
                }
                let minutes = try connection.query(
                    "SELECT zone_id, extract(epoch FROM bucket), occupants FROM beaconflow.zone_occupancy WHERE site_id = $1",
                    [site.id]
                ).map { row in
                    AccuracyScore.ZoneMinute(zone: try row.decode(0), minuteStart: try row.decode(1), occupants: try row.decode(2))
                }
                var score = AccuracyScore(
                    scenario: scenario, site: site.id, beaconIDs: simulator.beaconIDs, visits: visits, minutes: minutes)
                // Every beacon the site stored (sightings, telemetry, visits), not only those with visits.
                let stored = try connection.query("SELECT beacon_id FROM beaconflow.beacons WHERE site_id = $1", [site.id])
                    .map { try $0.decode(0, as: String.self) }
                score.phantomBeacons = Set(stored).subtracting(simulator.beaconIDs.values).count
                scores[site.id] = score
            }
            return scores
        }
    }
}


public struct HarnessError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}
