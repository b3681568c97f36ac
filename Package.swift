// swift-tools-version:6.1
//
// One source tree, two builds:
//   host    `swift build` / `swift test` (full Swift 6, x86_64)
//   device  `Scripts/build-device` (Embedded Swift, static aarch64 ELF via a generated toolset)
// The manifest stays plain; everything device-specific lives in the toolset the script writes.
import PackageDescription

let package = Package(
    name: "Locus",
    products: [
        .executable(name: "locus", targets: ["locus"]),
    ],
    dependencies: [
        // Test oracle only: never linked into the device binary.
        .package(url: "https://github.com/LebJe/TOMLKit", exact: "0.6.0"),
    ],
    targets: [
        .target(
            name: "CLocus",
            linkerSettings: [.linkedLibrary("gpiod"), .linkedLibrary("bluetooth")]
        ),
        .target(name: "LocusCore"),
        .target(name: "LocusDevices", dependencies: ["LocusCore", "CLocus"]),
        .target(name: "LocusAgent", dependencies: ["LocusCore", "LocusDevices"]),
        .executableTarget(name: "locus", dependencies: ["LocusAgent"]),

        .target(name: "CAllocCounter", path: "Tests/AllocCounter/C"),
        .target(name: "AllocCounter", dependencies: ["CAllocCounter"], path: "Tests/AllocCounter/Swift"),
        .testTarget(
            name: "LocusCoreTests",
            dependencies: ["LocusCore", "AllocCounter", .product(name: "TOMLKit", package: "TOMLKit")]
        ),
        .testTarget(
            name: "LocusAgentTests",
            dependencies: ["locus", "LocusAgent", "LocusDevices", "LocusCore"]
        ),
    ]
)
