import BeaconAgent
import BeaconWire
import Foundation

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
        }, shouldStop: { false })
    return sightings
}

/// The fixtures of the BeaconWire tests.
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
