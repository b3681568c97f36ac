// swift-tools-version:6.1
//
// One source tree, two builds:
//   host    `swift build` / `swift test` (full Swift 6, x86_64)
//   device  `Scripts/build-device` (Embedded Swift, static aarch64 ELF via a generated toolset)
// The manifest stays plain; everything device-specific lives in the toolset the script writes.
import PackageDescription

/// `@_noAllocation` is enforced where generics are specialized: every optimized build (the
/// Embedded device builds, `swift build -c release`, the benchmarks). At -Onone the compiler's
/// performance diagnostics reject every unspecialized stdlib generic (Optional comparison,
/// Range iteration), so debug builds skip that pass; the allocation-counting tests still run there.
///
/// Release builds run without the runtime's dynamic exclusivity checks, as the Embedded device
/// build does (there `swift_beginAccess` is an empty stub): the host's release binaries and
/// benchmarks then measure the code the gateway runs. Debug builds, where `swift test` runs,
/// keep the checks, so an overlapping access still traps in the tests.
let hotPathChecks: [SwiftSetting] = [
    .unsafeFlags(["-Xllvm", "-sil-disable-pass=performance-diagnostics"], .when(configuration: .debug)),
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

let package = Package(
    name: "Locus",
    products: [
        .executable(name: "locus", targets: ["locus"]),
        // Full Swift only (Foundation, concurrency): never part of the device binary.
        .library(name: "LocusMonitor", targets: ["LocusMonitor"]),
        // Core Location's names over LocusMonitor: a CLMonitor program ported by its import.
        .library(name: "LocusCoreLocation", targets: ["LocusCoreLocation"]),
    ],
    dependencies: [
        // Test oracle only: never linked into the device binary.
        .package(url: "https://github.com/LebJe/TOMLKit", exact: "0.6.0"),
    ],
    targets: [
        .target(
            name: "CLocus",
            // mbedTLS (Debian's libmbedtls-dev): the uplink's TLS; the device build links its static archives.
            linkerSettings: [.linkedLibrary("gpiod"), .linkedLibrary("m"), .linkedLibrary("mbedtls"), .linkedLibrary("mbedx509"),
                             .linkedLibrary("mbedcrypto")]
        ),
        .target(name: "LocusCore", swiftSettings: hotPathChecks),
        .target(name: "LocusDevices", dependencies: ["LocusCore", "CLocus"], swiftSettings: hotPathChecks),
        .target(name: "LocusAgent", dependencies: ["LocusCore", "LocusDevices"], swiftSettings: hotPathChecks),
        .executableTarget(name: "locus", dependencies: ["LocusAgent"]),
        .target(name: "LocusMonitor"),
        .target(name: "LocusCoreLocation", dependencies: ["LocusMonitor", "LocusCore"]),
        .executableTarget(name: "monitor-greeter", dependencies: ["LocusMonitor"], path: "Examples/MonitorGreeter",
                          exclude: ["monitor-greeter.socket", "monitor-greeter.service"]),
        .executableTarget(name: "relay-controller", dependencies: ["LocusMonitor"], path: "Examples/RelayController"),
        .executableTarget(name: "live-updates-logger", dependencies: ["LocusMonitor"], path: "Examples/LiveUpdatesLogger"),
        .executableTarget(name: "location-request", dependencies: ["LocusMonitor"], path: "Examples/LocationRequest"),
        .executableTarget(name: "beacon-ranger", dependencies: ["LocusMonitor"], path: "Examples/BeaconRanger"),
        .executableTarget(name: "visit-logger", dependencies: ["LocusMonitor"], path: "Examples/VisitLogger"),

        // The fleet's PostgreSQL side (docs/fleet.md): full Swift, host only, never in the device
        // binary. libpq is Debian's libpq-dev; only these targets see it.
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .target(name: "LocusFleet", dependencies: ["LocusCore", "LocusDevices", "CLocus", "CLibPQ"]),
        .executableTarget(name: "locus-fleet", dependencies: ["LocusFleet"]),
        .executableTarget(name: "locus-store-bench", dependencies: ["LocusFleet", "LocusCore", "LocusDevices"], path: "Benchmarks/StoreBench"),
        // The deterministic simulator (docs/simulator.md): host only, like the fleet's tools.
        .executableTarget(name: "locus-sim", dependencies: ["LocusAgent", "LocusDevices", "LocusCore", "TestSupport"]),

        .executableTarget(name: "locus-bench", dependencies: ["LocusCore", "LocusAgent", "AllocCounter", "TestSupport"], path: "Benchmarks/LocusBench", swiftSettings: hotPathChecks),

        .target(name: "CAllocCounter", path: "Tests/AllocCounter/C"),
        .target(name: "AllocCounter", dependencies: ["CAllocCounter"], path: "Tests/AllocCounter/Swift"),
        // Test-only helpers shared by the test targets and locus-bench (SplitMix64).
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        .testTarget(
            name: "LocusCoreTests",
            dependencies: ["LocusCore", "AllocCounter", "TestSupport", .product(name: "TOMLKit", package: "TOMLKit")],
            swiftSettings: hotPathChecks
        ),
        .testTarget(
            name: "LocusDevicesTests",
            dependencies: ["LocusDevices", "LocusCore", "AllocCounter", "TestSupport"],
            swiftSettings: hotPathChecks,
            linkerSettings: [.linkedLibrary("util")]
        ),
        .testTarget(
            name: "LocusAgentTests",
            dependencies: ["locus", "locus-sim", "LocusAgent", "LocusDevices", "LocusCore", "AllocCounter", "LocusMonitor", "LocusCoreLocation", "TestSupport"],
            swiftSettings: hotPathChecks
        ),
        .testTarget(
            name: "LocusFleetTests",
            dependencies: ["LocusFleet", "LocusCore", "LocusDevices", "LocusAgent", "TestSupport", "locus", "locus-fleet"]
        ),
    ]
)
