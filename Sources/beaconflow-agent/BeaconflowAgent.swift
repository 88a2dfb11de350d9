import ArgumentParser
import CommandLineSupport
import Foundation
import MetricFamilies

/// The edge agent alone: what `beaconflow agent` runs, less the simulated sites.
@main
struct BeaconflowAgent: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "beaconflow-agent",
        abstract: AgentOptions.abstract,
        discussion: AgentOptions.discussion(command: "beaconflow-agent", simulated: false),
        version: BuildInfo.version
    )

    @OptionGroup var options: AgentOptions

    func run() async throws {
        try await options.run()
    }
}

extension BeaconflowAgent {
    /// Parses the command line (with its `--config` file laid under it) and runs it.
    static func main() async {
        let expanded: (arguments: [String], file: ConfigFile?)
        do {
            expanded = try ConfigFile.expanding(options: Array(CommandLine.arguments.dropFirst()))
        } catch {
            exit(withError: ValidationError(error.message))
        }
        let command: BeaconflowAgent
        do {
            command = try parse(expanded.arguments)
        } catch {
            if let file = expanded.file, let explained = file.explain(message(for: error), known: ConfigFile.optionNames(of: Self.self)) {
                exit(withError: ValidationError(explained))
            }
            exit(withError: error)
        }
        do {
            try await command.run()
        } catch {
            exit(withError: error)
        }
    }
}
