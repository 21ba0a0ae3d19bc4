// swift-tools-version:6.0
// An app's HTTP client tested against spotty Wi-Fi with Roam: the package depends on Roam by
// path and uses its RoamTesting library in its tests only.
import PackageDescription

let package = Package(
    name: "SpottyWiFi",
    platforms: [.macOS(.v15)],
    products: [.library(name: "TinyHTTP", targets: ["TinyHTTP"])],
    dependencies: [.package(name: "roam", path: "../..")],
    targets: [
        .target(name: "TinyHTTP"),
        .testTarget(name: "TinyHTTPTests", dependencies: [
            "TinyHTTP", .product(name: "RoamTesting", package: "roam"), .product(name: "ScenarioModel", package: "roam"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
