// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "roam",
    platforms: [.macOS(.v15)],
    products: [
        // The leaf every other module shares: interface types, link quality, the ordered JSON
        // value, text helpers. No C library, no system calls.
        .library(name: "RoamCore", targets: ["RoamCore"]),
        // The OS layer over swift-system (descriptors, polling, spawning, safe paths, the run
        // registry), for RoamNIO and other packages' tools.
        .library(name: "RoamSystem", targets: ["RoamSystem"]),
        .library(name: "Netlink", targets: ["Netlink"]),
        .library(name: "PathMonitor", targets: ["PathMonitor"]),
        .library(name: "ScenarioModel", targets: ["ScenarioModel"]),
        .library(name: "Simulator", targets: ["Simulator"]),
        .library(name: "RoamReport", targets: ["RoamReport"]),
        .library(name: "LinkEmulation", targets: ["LinkEmulation"]),
        .library(name: "RoamDecisions", targets: ["RoamDecisions"]),
        .library(name: "Multipath", targets: ["Multipath"]),
        // For other packages' tests: scenarios around code under test (not linked by `roam`).
        .library(name: "RoamTesting", targets: ["RoamTesting"]),
        // The fuzz targets of Roam's input readers, for Fuzz/ (libFuzzer) and the regression tests.
        .library(name: "RoamFuzzTargets", targets: ["RoamFuzzTargets"]),
        .executable(name: "roam", targets: ["roam"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        // The control API's HTTP server and `roam ctl`'s client (SwiftNIO's HTTP/1 codec).
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        // `swift package generate-documentation` (make docs): a plugin, never linked.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    ],
    targets: [
        // libnl-3 and libnl-route-3 as a system library: a modulemap and a header shim, nothing else.
        .systemLibrary(
            name: "CNetlink",
            pkgConfig: "libnl-route-3.0",
            providers: [.apt(["libnl-3-dev", "libnl-route-3-dev", "libnl-genl-3-dev"])]
        ),
        // The rest of Linux that Roam uses (eventfd, ppoll, namespaces, MPTCP socket options,
        // posix_spawn, TUN): header-only, no library.
        .systemLibrary(name: "CRoamLinux"),
        // The one OS layer over it, on swift-system: event signals, the deadline wait, the
        // spawner, whole writes, the monotonic clock; errors as `Errno`.
        // Rootless: entering a user namespace of the process's own, in C because it must run
        // while the process has one thread; and RoamTesting's constructor that does it before main.
        .target(name: "CRoamRootless"),
        // A run's watchdog: a child that kills the run's command process groups if roam dies
        // without warning; in C because it runs between fork and _exit.
        .target(name: "CRoamProcess"),
        // D-Bus for `roam daemon` through sd-bus, loaded at run time from libsystemd.so.0 (no
        // build dependency; a machine without it serves the socket only).
        .target(name: "CRoamBus", linkerSettings: [.linkedLibrary("dl")]),
        .target(name: "CRoamTestingRootless", dependencies: ["CRoamRootless"]),
        .target(name: "RoamCore"),
        .target(name: "RoamSystem", dependencies: ["RoamCore", "CRoamLinux", "CRoamRootless", "CRoamProcess", .product(name: "SystemPackage", package: "swift-system")]),
        .target(name: "Netlink", dependencies: ["CNetlink", "CRoamLinux", "RoamCore", "RoamSystem", .product(name: "SystemPackage", package: "swift-system")]),
        .target(name: "PathMonitor", dependencies: [.product(name: "SystemPackage", package: "swift-system"), "RoamCore", "Netlink", "RoamSystem", .product(name: "Logging", package: "swift-log")]),
        // The decisions of racing, handover and subflows: pure (RoamCore's value types only; no
        // libnl, no system calls), driven by Multipath's sockets, the simulator and RoamNIO.
        .target(name: "RoamDecisions", dependencies: ["RoamCore"]),
        .target(name: "Multipath", dependencies: ["CRoamLinux", "Netlink", "PathMonitor", "RoamCore", "RoamDecisions", "RoamSystem", .product(name: "SystemPackage", package: "swift-system")]),
        // Scenarios as data: the model, the YAML reader and its validation, units, the timeline's
        // expansion, the Chaos Mesh export and the mahimahi import. Pure: never needs root, and
        // never links libnl (nor does RoamReport, nor the fuzz targets).
        .target(name: "ScenarioModel", dependencies: ["RoamCore", "RoamSystem", .product(name: "Yams", package: "Yams")]),
        // Roam's userspace link emulator: TUN interfaces, the per-direction pipeline (delay,
        // loss, rate, traces) and the one-thread event loop that moves packets between them.
        .target(name: "LinkEmulation", dependencies: ["RoamCore", "ScenarioModel", "Netlink", "RoamSystem", "CRoamLinux",
                                                      .product(name: "SystemPackage", package: "swift-system"),
                                                      .product(name: "Logging", package: "swift-log")]),
        // A run's record read back: the typed timeline events, `RecordedRun`, the HTML report.
        // Pure: never needs root.
        .target(name: "RoamReport", dependencies: [.product(name: "SystemPackage", package: "swift-system"), "RoamCore", "ScenarioModel", "RoamSystem"]),
        // Plays scenarios on real Linux networking: topology, link backends, workloads, runner.
        .target(name: "Simulator", dependencies: ["CRoamLinux", "Netlink", "RoamCore", "ScenarioModel", "RoamReport", "LinkEmulation", "PathMonitor", "Multipath", "RoamSystem", .product(name: "SystemPackage", package: "swift-system"), .product(name: "Yams", package: "Yams")]),
        // A run's control API (`roam run --control`, `roam ctl`): its routes, its listeners, its
        // HTTP server and client on SwiftNIO.
        .target(name: "RoamControl", dependencies: ["RoamCore", "RoamSystem", "CRoamLinux", "CRoamBus", "Netlink", "ScenarioModel", "RoamReport", "Simulator", "PathMonitor",
                                                    .product(name: "NIOCore", package: "swift-nio"),
                                                    .product(name: "NIOPosix", package: "swift-nio"),
                                                    .product(name: "NIOHTTP1", package: "swift-nio"),
                                                    .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                                                    .product(name: "SystemPackage", package: "swift-system")]),
        .target(name: "RoamTesting", dependencies: ["Netlink", "PathMonitor", "ScenarioModel", "Simulator", "RoamSystem", "CRoamRootless", "CRoamTestingRootless", .product(name: "SystemPackage", package: "swift-system")]),
        .target(name: "RoamFuzzTargets", dependencies: ["CRoamLinux", "RoamCore", "ScenarioModel", "RoamReport", "RoamSystem", "PathMonitor", "LinkEmulation", "Simulator", "RoamControl",
                                                       .product(name: "Yams", package: "Yams"),
                                                       .product(name: "SystemPackage", package: "swift-system")]),
        .executableTarget(
            name: "roam",
            dependencies: ["CRoamLinux", 
                "RoamCore",
                "Netlink",
                "PathMonitor",
                "ScenarioModel",
                "RoamReport",
                "Simulator",
                "Multipath",
                "RoamSystem",
                "RoamControl",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "PathMonitorBenchmark",
            dependencies: ["Netlink", "PathMonitor", "TestSupport"],
            path: "Benchmarks/PathMonitorBenchmark"
        ),
        .executableTarget(
            name: "SimulatorBenchmark",
            dependencies: ["Netlink", "PathMonitor", "ScenarioModel", "Simulator", .product(name: "Yams", package: "Yams"), "RoamSystem"],
            path: "Benchmarks/SimulatorBenchmark"
        ),
        .executableTarget(
            name: "NetworkBenchmark",
            dependencies: ["ScenarioModel", "Simulator", "PathMonitor", "Netlink", "RoamSystem",
                           .product(name: "SystemPackage", package: "swift-system")],
            path: "Benchmarks/NetworkBenchmark"
        ),
        .executableTarget(
            name: "EmulatorBenchmark",
            dependencies: ["Netlink", "ScenarioModel", "Simulator", "RoamSystem", "LinkEmulation"],
            path: "Benchmarks/EmulatorBenchmark"
        ),
        .executableTarget(
            name: "MultipathBenchmark",
            dependencies: ["ScenarioModel", "Multipath", "PathMonitor", "Netlink", "RoamTesting", "TestSupport"],
            path: "Benchmarks/MultipathBenchmark"
        ),
        .executableTarget(
            name: "SoakBenchmark",
            dependencies: ["TestSupport"],
            path: "Benchmarks/SoakBenchmark"
        ),
        .target(name: "TestSupport", dependencies: ["Netlink", "PathMonitor", .product(name: "Logging", package: "swift-log")], path: "Tests/TestSupport"),
        // Root-free: the OS layer, on real descriptors and child processes.
        .testTarget(name: "RoamSystemTests", dependencies: ["RoamSystem", .product(name: "SystemPackage", package: "swift-system")]),
        .testTarget(name: "NetlinkTests", dependencies: ["Netlink", "TestSupport"]),
        .testTarget(name: "PathMonitorTests", dependencies: ["Netlink", "RoamCore", "PathMonitor", "TestSupport", .product(name: "Logging", package: "swift-log")]),
        // Runs the built `roam` executable; `swift build` must have built it (make test does).
        .testTarget(name: "RoamCLITests", dependencies: ["Netlink", "RoamCore", "PathMonitor", "ScenarioModel", "RoamReport", "Simulator", "TestSupport"]),
        // Root-free: the scenario model, reader, units, timeline expansion, export and import.
        .testTarget(name: "ScenarioModelTests", dependencies: ["RoamCore", "ScenarioModel", "PathMonitor", .product(name: "Yams", package: "Yams")]),
        // Root-free: the emulator's pipeline on a manual clock.
        .testTarget(name: "LinkEmulationTests", dependencies: ["LinkEmulation", "ScenarioModel"]),
        // Root-free: the timeline's events, recorded runs and the HTML report.
        .testTarget(name: "RoamReportTests", dependencies: ["RoamCore", "RoamSystem", .product(name: "SystemPackage", package: "swift-system"), "RoamReport", "PathMonitor"]),
        .testTarget(name: "SimulatorTests", dependencies: ["LinkEmulation", "Multipath", "Netlink", "PathMonitor", "RoamCore", "RoamSystem", "ScenarioModel", "RoamReport", "Simulator", "TestSupport", "RoamFuzzTargets", .product(name: "Yams", package: "Yams")]),
        .testTarget(name: "MultipathTests", dependencies: ["Netlink", "PathMonitor", "RoamSystem", "Multipath", "ScenarioModel", "RoamReport", "Simulator", "TestSupport"]),
        // Root-free: the control API's routes against its OpenAPI document, its answers before and
        // after a run, its HTTP server and client over a Unix socket.
        .testTarget(name: "RoamControlTests", dependencies: ["RoamControl", "RoamCore", "PathMonitor", "RoamSystem", "Netlink", .product(name: "Yams", package: "Yams")]),
        .testTarget(name: "RoamTestingTests", dependencies: ["Netlink", "PathMonitor", "RoamCore", "RoamTesting", "ScenarioModel", "RoamReport", "LinkEmulation", "Simulator", "TestSupport", "RoamSystem", .product(name: "SystemPackage", package: "swift-system")]),
    ],
    swiftLanguageModes: [.v6]
)
