// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "beaconflow",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "beaconflow", targets: ["beaconflow"]),
        .library(name: "BeaconWire", targets: ["BeaconWire"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
    ],
    targets: [
        // System libraries: a module map and a shim header each, nothing else.
        .systemLibrary(
            name: "CBlueZ",
            pkgConfig: "bluez",
            providers: [.apt(["libbluetooth-dev"])]
        ),
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),

        // Pure Swift, no I/O: advertising data, beacon frames, GATT formats, HCI events, capture files.
        .target(
            name: "BeaconWire",
            dependencies: [
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),

        .executableTarget(
            name: "beaconflow",
            dependencies: [
                "BeaconWire",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        .testTarget(
            name: "BeaconWireTests",
            dependencies: ["BeaconWire"],
            resources: [.copy("Fixtures")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
