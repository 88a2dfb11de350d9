import ArgumentParser
import Logging
import MetricFamilies
import MetricsEndpoint
import ServiceLifecycle

@main
struct Beaconflow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "beaconflow",
        abstract: "BLE beacon analytics: edge agents, ingest, and decoding tools.",
        discussion: """
            Examples:
              beaconflow decode --hex 0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010002c5
              beaconflow decode --btsnoop examples/mixed-beacons.btsnoop
              beaconflow agent --site hq --agent hq-a1 --source btsnoop:examples/mixed-beacons.btsnoop --broker mqtt://127.0.0.1:1883
            """,
        version: BuildInfo.version,
        subcommands: [
            AgentCommand.self, IngestCommand.self, DecodeCommand.self, MigrateCommand.self, SimulateCommand.self,
            AccuracyCommand.self, ReportCommand.self, DemoCommand.self, ConsoleCommand.self,
        ]
    )
}

extension Beaconflow {
    /// Parses the command line (with the `--config` file of a subcommand that takes one laid under it) and runs it.
    static func main() async {
        let expanded: (arguments: [String], file: ConfigFile?)
        do {
            expanded = try ConfigFile.expanding(Array(CommandLine.arguments.dropFirst()))
        } catch {
            exit(withError: ValidationError(error.message))
        }
        var command: any ParsableCommand
        do {
            command = try parseAsRoot(expanded.arguments)
        } catch {
            if let file = expanded.file, let explained = file.explain(message(for: error)) {
                exit(withError: ValidationError(explained))
            }
            exit(withError: error)
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

/// Logs to standard error at `level` (constant messages, data in metadata).
/// Runs a command's service until it ends or SIGTERM/SIGINT asks it to stop gracefully, with its `/metrics`
/// endpoint when there is one: listed first, the endpoint stops last and answers while the service shuts down.
func runUntilSignalled(_ service: some Service, metrics: MetricsEndpoint?, logger: Logger) async throws {
    var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
    if let metrics {
        services.append(.init(service: MetricsService(endpoint: metrics), successTerminationBehavior: .gracefullyShutdownGroup))
    }
    services.append(.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup))
    let group = ServiceGroup(
        configuration: ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    try await group.run()
}
