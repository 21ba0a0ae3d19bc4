// swift-tools-version:6.0
// Roam's fuzz targets as libFuzzer binaries. Kept out of the main package: they link only when
// built with the fuzzer runtime, whose driver each one's main calls. `make fuzz` builds and runs them:
//
//   swift build --package-path Fuzz -c debug -Xswiftc -sanitize=fuzzer,address
//   ROAM_FUZZ_TARGET=scenario Fuzz/.build/debug/RoamFuzz Fuzz/Corpus/scenario -max_total_time=60
import PackageDescription

let package = Package(
    name: "RoamFuzz",
    platforms: [.macOS(.v15)],
    products: [.executable(name: "RoamFuzz", targets: ["RoamFuzz"])],
    dependencies: [.package(name: "roam", path: "..")],
    targets: [
        .target(name: "CFuzzerDriver"),
        .executableTarget(name: "RoamFuzz", dependencies: ["CFuzzerDriver", .product(name: "RoamFuzzTargets", package: "roam")]),
    ],
    swiftLanguageModes: [.v6]
)
