// swift-tools-version:6.0
// libFuzzer targets for every decoder entry point. Kept out of the main package: they only link with
// -sanitize=fuzzer (see scripts/fuzz).
import PackageDescription

let package = Package(
    name: "beaconflow-fuzz",
    dependencies: [.package(name: "beaconflow", path: "..")],
    targets: [
        .target(name: "CLibFuzzer"),
        .executableTarget(name: "FuzzAdvertisingData", dependencies: ["CLibFuzzer", .product(name: "BeaconWire", package: "beaconflow")]),
        .executableTarget(name: "FuzzHCIEvent", dependencies: ["CLibFuzzer", .product(name: "BeaconWire", package: "beaconflow")]),
        .executableTarget(name: "FuzzCapture", dependencies: ["CLibFuzzer", .product(name: "BeaconWire", package: "beaconflow")]),
        .executableTarget(name: "FuzzCharacteristic", dependencies: ["CLibFuzzer", .product(name: "BeaconWire", package: "beaconflow")]),
        .executableTarget(name: "FuzzBatch", dependencies: ["CLibFuzzer", .product(name: "BeaconWire", package: "beaconflow")]),
        .executableTarget(
            name: "FuzzIngestInput",
            dependencies: [
                "CLibFuzzer", .product(name: "BeaconWire", package: "beaconflow"),
                .product(name: "BeaconIngest", package: "beaconflow"), .product(name: "BeaconAgent", package: "beaconflow"),
                .product(name: "BeaconMessaging", package: "beaconflow"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
