// swift-tools-version:6.1
// Benchmarks, kept apart from the main build. Run: swift package --package-path Benchmarks benchmark
import PackageDescription

let package = Package(
    name: "beaconflow-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "beaconflow", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // The reference: a small C decoder of the same frames, built -O2.
        .target(name: "CReferenceDecoder", cSettings: [.unsafeFlags(["-O2"])]),
        .target(name: "BenchmarkCorpus", dependencies: [.product(name: "BeaconWire", package: "beaconflow")]),
        // Writes the busy-site capture that scripts/bench-agent replays.
        .executableTarget(name: "ReplayLoad", dependencies: [.product(name: "BeaconWire", package: "beaconflow")]),
        .executableTarget(
            name: "DecodeBenchmarks",
            dependencies: [
                "CReferenceDecoder", "BenchmarkCorpus",
                .product(name: "BeaconWire", package: "beaconflow"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/DecodeBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "IngestBenchmarks",
            dependencies: [
                .product(name: "BeaconIngest", package: "beaconflow"),
                .product(name: "BeaconPositions", package: "beaconflow"),
                .product(name: "BeaconWire", package: "beaconflow"),
                .product(name: "LibPQ", package: "beaconflow"),
                .product(name: "LocalServers", package: "beaconflow"),
                .product(name: "Mosquitto", package: "beaconflow"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/IngestBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "StorageBenchmarks",
            dependencies: [
                .product(name: "BeaconIngest", package: "beaconflow"),
                .product(name: "BeaconWire", package: "beaconflow"),
                .product(name: "LibPQ", package: "beaconflow"),
                .product(name: "LocalServers", package: "beaconflow"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/StorageBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "ConsoleBenchmarks",
            dependencies: [
                .product(name: "BeaconIngest", package: "beaconflow"),
                .product(name: "LibPQ", package: "beaconflow"),
                .product(name: "LocalServers", package: "beaconflow"),
                .product(name: "WebConsole", package: "beaconflow"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/ConsoleBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "SpoolBenchmarks",
            dependencies: [
                .product(name: "BeaconAgent", package: "beaconflow"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/SpoolBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
