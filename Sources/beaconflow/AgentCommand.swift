import ArgumentParser
import BeaconMessaging
import BeaconSimulation
import CommandLineSupport

/// `beaconflow agent`: the edge agent (as `beaconflow-agent`) with the simulator's `sim:` source.
struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: AgentOptions.abstract,
        discussion: AgentOptions.discussion(command: "beaconflow agent", simulated: true)
    )

    @OptionGroup var options: AgentOptions

    func run() async throws {
        try await options.run(
            extraSource: ExtraSourceKind(kind: "sim", argument: "SCENARIO") { path, site, agent, speed throws(ConfigurationError) in
                SimulatorSource(simulator: try Simulator(try Scenario.load(path: path)), site: site, agent: agent, speed: speed)
            })
    }
}
