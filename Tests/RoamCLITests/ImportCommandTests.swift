import Foundation
import Glibc
import Testing
import TestSupport

/// `roam import mahimahi`: a profile a scenario can use as it is.
@Suite(.enabled(if: TestEnvironment.roamExecutable != nil, "the roam executable was not built (run `swift build` first)"))
struct ImportCommandTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    @Test func anImportedProfileIsOneAScenarioCanUse() throws {
        let directory = "/tmp/roam-import-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory + "/profiles", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try RunningCommand.run(roam, ["import", "mahimahi", "--up", NetemHost.root + "/traces/lte-steady.trace",
                                                   "--down", NetemHost.root + "/traces/fading.trace", "--name", "lab-lte", "--type", "cellular",
                                                   "--delay", "20ms", "-o", directory + "/profiles/lab-lte.yaml"])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.error.contains("up:") && result.error.contains("mean"))
        let profile = try String(contentsOfFile: directory + "/profiles/lab-lte.yaml", encoding: .utf8)
        #expect(profile.contains("lab-lte:") && profile.contains("type: cellular") && profile.contains("delay: 20ms"))
        // The block goes into a scenario written next to it, whose relative paths start where the profile's do.
        let scenario = """
            name: imported
            duration: 10s
            nodes: { phone: {}, server: {} }
            \(profile)
            links:
              - { name: cell, between: [phone, server], profile: lab-lte }
            """
        try scenario.write(toFile: directory + "/profiles/scenario.yaml", atomically: true, encoding: .utf8)
        let validated = try RunningCommand.run(roam, ["validate", directory + "/profiles/scenario.yaml"])
        #expect(validated.status == 0, "\(validated.error)\n\(scenario)")
    }

    @Test func aBrokenTraceIsNamedWithItsLine() throws {
        let path = "/tmp/roam-import-bad-\(getpid()).trace"
        try "1\n2\nthree\n".write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        let result = try RunningCommand.run(roam, ["import", "mahimahi", "--up", path, "--down", path, "--name", "x"])
        #expect(result.status == 2)
        #expect(result.error.contains("\(path):3:"))
        let name = try RunningCommand.run(roam, ["import", "mahimahi", "--up", path, "--down", path, "--name", "9lives"])
        #expect(name.status == 2)
        #expect(name.error.contains("start with a letter"))
    }
}
