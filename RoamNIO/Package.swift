// swift-tools-version:6.0
// RoamNIO: Roam's racer, policy and path events for SwiftNIO channels. A package of its own,
// beside Roam's and depending on it by path, so that Roam's default build does not compile
// SwiftNIO (minutes on a small machine).
import PackageDescription

/// What the tests and the benchmark use: NIO's HTTP/1 codec, and scenarios to play.
let httpAndScenarios: [Target.Dependency] = [
    .product(name: "NIOCore", package: "swift-nio"),
    .product(name: "NIOPosix", package: "swift-nio"),
    .product(name: "NIOHTTP1", package: "swift-nio"),
    .product(name: "RoamTesting", package: "roam"),
    .product(name: "ScenarioModel", package: "roam"),
]

let package = Package(
    name: "RoamNIO",
    platforms: [.macOS(.v15)],
    products: [.library(name: "RoamNIO", targets: ["RoamNIO"])],
    dependencies: [
        .package(name: "roam", path: ".."),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        // `swift package generate-documentation` (make docs): a plugin, never linked.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    ],
    targets: [
        .target(name: "RoamNIO", dependencies: [
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Multipath", package: "roam"),
            .product(name: "PathMonitor", package: "roam"),
            .product(name: "Netlink", package: "roam"),
            .product(name: "RoamSystem", package: "roam"),
        ]),
        // An HTTP/1 server and client on swift-nio's codec, and the scenario, for the tests and the benchmark.
        .target(name: "NIOTestSupport", dependencies: ["RoamNIO"] + httpAndScenarios, path: "Tests/NIOTestSupport"),
        .testTarget(name: "RoamNIOTests", dependencies: ["RoamNIO", "NIOTestSupport"] + httpAndScenarios),
        // Time to the first response on a blackholed Wi-Fi, beside a plain ClientBootstrap.
        .executableTarget(name: "RoamNIOBenchmark", dependencies: ["RoamNIO", "NIOTestSupport"] + httpAndScenarios, path: "Benchmarks/RoamNIOBenchmark"),
    ],
    swiftLanguageModes: [.v6]
)
