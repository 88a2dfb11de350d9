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
        let pipeline = try await PipelineUnderTest.start(sites: sites, database: server, name: "accuracy_" + method.name, logger: logger)
        defer { pipeline.ingest.requestStop() }
        let address = pipeline.address

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
        try await pipeline.finish()
        var scores: [String: AccuracyScore] = [:]
        for site in scenario.sites {
            let views = try await pipeline.views(site: site.id)
            var score = AccuracyScore(
                scenario: scenario, site: site.id, beaconIDs: simulator.beaconIDs, visits: views.visits, minutes: views.minutes)
            score.phantomBeacons = views.beacons.subtracting(simulator.beaconIDs.values).count
            let beacons = Set(simulator.beaconIDs.values)
            score.addressRows = views.addressRows.filter { !beacons.contains($0.key) }.values.reduce(0, +)
            score.runHours = Double(scenario.durationSeconds) / 3600
            scores[site.id] = score
        }
        return scores
    }
}


public struct HarnessError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}
