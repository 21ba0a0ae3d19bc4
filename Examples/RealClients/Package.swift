// swift-tools-version:6.0
// Code people ship, tested on flaky networks with Roam: a Hummingbird service and an
// AsyncHTTPClient client of it, in a scenario's namespaces (RoamTesting), beside RoamNIO. Depends
// on Roam and RoamNIO by path; AsyncHTTPClient and Hummingbird take minutes to build the first time.
import PackageDescription

let package = Package(
    name: "RealClients",
    platforms: [.macOS(.v15)],
    products: [.library(name: "Catalog", targets: ["Catalog"])],
    dependencies: [
        .package(name: "roam", path: "../.."),
        .package(name: "RoamNIO", path: "../../RoamNIO"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.21.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
    ],
    targets: [
        // The service (Hummingbird) and its client (AsyncHTTPClient): the code under test.
        .target(name: "Catalog", dependencies: [
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
        ]),
        .testTarget(name: "RealClientsTests", dependencies: [
            "Catalog",
            .product(name: "RoamNIO", package: "RoamNIO"),
            .product(name: "RoamTesting", package: "roam"),
            .product(name: "ScenarioModel", package: "roam"),
            .product(name: "Multipath", package: "roam"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Hummingbird", package: "hummingbird"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
