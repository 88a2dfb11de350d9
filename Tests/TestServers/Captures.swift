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

