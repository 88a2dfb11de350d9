import ArgumentParser
import CommandLineSupport
import Foundation
import Logging
import MetricFamilies

@main
struct Beaconflow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "beaconflow",
        abstract: "BLE beacon analytics: edge agents, ingest, and decoding tools.",
        discussion: """
            Examples:
              beaconflow decode \\
                --hex 0201061aff4c000215e2c56db5dffb48d2b060d0f5a71096e000010002c5
              beaconflow decode --btsnoop examples/mixed-beacons.btsnoop
              beaconflow agent --site hq --agent hq-a1 \\
                --source btsnoop:examples/mixed-beacons.btsnoop \\
                --broker mqtt://127.0.0.1:1883
            """,
        version: BuildInfo.version,
        subcommands: [
            AgentCommand.self, IngestCommand.self, DecodeCommand.self, MigrateCommand.self, SimulateCommand.self,
            AccuracyCommand.self, CalibrateCommand.self, RecordingCommand.self, ReportCommand.self, DemoCommand.self,
            ConsoleCommand.self, BridgeCommand.self,
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
        // Errors come with the usage of the subcommand they are about, not the root's.
        let subcommand = configuration.subcommands.first { $0._commandName == expanded.arguments.first }
        var command: any ParsableCommand
        do {
            command = try parseAsRoot(expanded.arguments)
        } catch {
            if let file = expanded.file, let subcommand,
                let explained = file.explain(message(for: error), known: ConfigFile.optionNames(of: subcommand))
            {
                exit(withError: ValidationError(explained), about: subcommand)
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
            exit(withError: error, about: subcommand)
        }
    }

    /// As `exit(withError:)`, with the subcommand's usage (`beaconflow ingest [<options>] --sites <sites>`) under a
    /// validation error instead of the root's.
    static func exit(withError error: any Error, about subcommand: ParsableCommand.Type?) -> Never {
        guard let subcommand, error is ValidationError else { exit(withError: error) }
        let name = subcommand._commandName
        FileHandle.standardError.write(
            Data(
                """
                Error: \(message(for: error))
                Usage: \(usageString(for: subcommand))
                  See 'beaconflow \(name) --help' for more information.

                """.utf8))
        Foundation.exit(exitCode(for: error).rawValue)
    }
}
