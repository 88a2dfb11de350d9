import ArgumentParser
import CommandLineSupport
import Dispatch
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
    /// Parses the command line (with its `--config` file laid under it) and runs it on the cooperative pool while the
    /// main thread waits. An `async` main would park the main thread in `dispatch_main`, whose `pthread_exit` unwinds
    /// that thread's stack through the executable's unwind tables: half a megabyte of pages read once and kept
    /// resident (BENCHMARKS.md, "The agent's code in run order").
    static func main() {
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
        let finished = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let running = command
        nonisolated(unsafe) var failure: (any Error)?
        Task.detached {
            do {
                try await running.run()
            } catch {
                failure = error
            }
            finished.signal()
        }
        finished.wait()
        if let failure {
            exit(withError: failure)
        }
    }
}
