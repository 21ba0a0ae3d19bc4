// swift-tools-version:6.0
// Roam's fuzz targets as libFuzzer binaries. Kept out of the main package: they link only when
// built with the fuzzer runtime, whose driver each one's main calls. `make fuzz` builds and runs them:
//
//   swift build --package-path Fuzz -c debug -Xswiftc -sanitize=fuzzer,address
//   Fuzz/.build/debug/FuzzScenario Fuzz/Corpus/scenario -max_total_time=60
import PackageDescription

let targets = ["Scenario", "Trace", "Interfaces", "JSON", "Report"]

let package = Package(
    name: "RoamFuzz",
    platforms: [.macOS(.v15)],
    products: targets.map { .executable(name: "Fuzz\($0)", targets: ["Fuzz\($0)"]) },
    dependencies: [.package(name: "roam", path: "..")],
    targets: [.target(name: "CFuzzerDriver")] + targets.map {
        .executableTarget(name: "Fuzz\($0)", dependencies: ["CFuzzerDriver", .product(name: "RoamFuzzTargets", package: "roam")],
                          path: "Sources/Fuzz\($0)")
    },
    swiftLanguageModes: [.v6]
)
