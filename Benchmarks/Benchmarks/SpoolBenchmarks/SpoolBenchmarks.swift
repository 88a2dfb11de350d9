import BeaconAgent
import Benchmark
import Foundation
import Logging

/// Appending batches to the spool under each fsync policy. A batch is 5,000 bytes (about 1000 sightings); each
/// iteration appends `batchesPerIteration` of them to a fresh spool in the system's temporary directory, so
/// throughput is batches/s and MB/s = batches/s × 0.005.
let batchesPerIteration = 200
let payload = (0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }

func appendAll(fsync: Spool.FsyncPolicy) throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-bench-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: directory) }
    var configuration = Spool.Configuration(directory: directory)
    configuration.fsync = fsync
    let spool = try Spool(configuration, logger: Logger(label: "bench"))
    for _ in 0..<batchesPerIteration {
        try spool.append(sequence: spool.nextSequence, payload: payload)
    }
    try spool.sync()
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .cpuTotal],
        timeUnits: .milliseconds,
        warmupIterations: 1,
        scalingFactor: .one,
        maxDuration: .seconds(20),
        maxIterations: 10
    )
    for (name, policy) in [("always", Spool.FsyncPolicy.always), ("periodic", .periodic), ("never", .never)] {
        Benchmark("Spool append 200 × 5 kB batches, fsync \(name)") { benchmark in
            for _ in benchmark.scaledIterations { try appendAll(fsync: policy) }
        }
    }
}
