import BeaconAgent
import BeaconWire
import Foundation
import LocalServers
import WorkQueue

/// The sightings an agent must deliver for a capture: its reports through the same extraction.
public func expectedSightings(capture path: String, configuration: SightingExtractor.Configuration) throws -> [Sighting] {
    var extractor = SightingExtractor(configuration: configuration)
    var sightings: [Sighting] = []
    try CaptureReplaySource(path: path, speed: .maximum).run(
        deliver: { reports in
            for timed in reports {
                if case .success(let sighting) = extractor.sighting(of: timed.report, timeMicros: timed.timeMicros) {
                    sightings.append(sighting)
                }
            }
        }, stop: StopSignal())
    return sightings
}

/// The repository's root directory.
public let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..")
    .standardized.path

/// A file of the repository's `examples/` (the inputs the README's and the help texts' examples use).
public func exampleFile(_ name: String) -> String { repositoryRoot + "/examples/" + name }

/// The demo's scenario (`scripts/demo` plays it).
public let demoScenarioPath = repositoryRoot + "/deploy/scenarios/demo.yaml"

/// The real captures of the BeaconWire tests.
public func captureFixture(_ name: String) -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../BeaconWireTests/Fixtures/\(name)").standardized.path
}


/// The `beaconflow` executable next to the test bundle (`swift build --build-tests` builds it).
public let beaconflowExecutable: String? = {
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let candidates = [directory, directory.deletingLastPathComponent()].map { $0.appendingPathComponent("beaconflow").path }
    return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
}()

/// The `beaconflow-agent` executable beside `beaconflow`.
public let beaconflowAgentExecutable: String? = beaconflowExecutable.flatMap {
    let path = URL(fileURLWithPath: $0).deletingLastPathComponent().appendingPathComponent("beaconflow-agent").path
    return FileManager.default.isExecutableFile(atPath: path) ? path : nil
}

/// Starts a program, in `currentDirectory` when given (through `env --chdir`: posix_spawn has no portable chdir).
public func startProgram(
    _ executable: String, _ arguments: [String], environment: [String: String]? = nil, currentDirectory: String? = nil,
    standardOutputPath: String, standardErrorPath: String
) throws -> ChildProcess {
    let (program, allArguments) =
        currentDirectory.map { ("/usr/bin/env", ["--chdir=" + $0, executable] + arguments) } ?? (executable, arguments)
    return try ChildProcess(
        program, allArguments, environment: environment, standardOutputPath: standardOutputPath,
        standardErrorPath: standardErrorPath)
}

/// Runs a program to its end: its exit code (nil when a signal ended it), its standard output and its standard
/// error. The output goes through files, not pipes: a server another test starts at the same moment may inherit a
/// pipe's write end and keep it open, and reading to its end would then never return.
public func runProgram(
    _ executable: String, _ arguments: [String], environment: [String: String]? = nil, currentDirectory: String? = nil
) async throws -> (status: Int32?, output: String, errors: String) {
    let work = try makeTemporaryDirectory(prefix: "run")
    defer { try? FileManager.default.removeItem(atPath: work) }
    let process = try startProgram(
        executable, arguments, environment: environment, currentDirectory: currentDirectory,
        standardOutputPath: work + "/output", standardErrorPath: work + "/errors")
    _ = await process.exit()
    func read(_ name: String) -> String { (try? String(contentsOfFile: work + "/" + name, encoding: .utf8)) ?? "" }
    return (process.exitCode, read("output"), read("errors"))
}
