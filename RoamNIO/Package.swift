// swift-tools-version:6.0
// RoamNIO: Roam's racer, policy and path events for SwiftNIO channels. A package of its own,
// beside Roam's and depending on it by path, so that Roam's default build does not compile
// SwiftNIO (minutes on a small machine).
import PackageDescription

let package = Package(
    name: "RoamNIO",
    platforms: [.macOS(.v15)],
    products: [.library(name: "RoamNIO", targets: ["RoamNIO"])],
    dependencies: [
        .package(name: "roam", path: ".."),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
    ],
    targets: [
        .target(name: "RoamNIO", dependencies: [
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Multipath", package: "roam"),
            .product(name: "PathMonitor", package: "roam"),
            .product(name: "Netlink", package: "roam"),
        ]),
        .testTarget(name: "RoamNIOTests", dependencies: [
            "RoamNIO",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "RoamTesting", package: "roam"),
            .product(name: "ScenarioModel", package: "roam"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
