import Foundation
import Glibc
import ScenarioModel
import Testing
import TestSupport

/// `roam import mahimahi`: a profile a scenario can use as it is.
@Suite(.enabled(if: TestEnvironment.roamExecutable != nil, "the roam executable was not built (run `swift build` first)"))
struct ImportCommandTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"

    @Test func anImportedProfileIsOneAScenarioCanUse() throws {
        let directory = try TestEnvironment.scratchDirectory("roam-import")
        try FileManager.default.createDirectory(atPath: directory + "/profiles", withIntermediateDirectories: false)
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
        let directory = try TestEnvironment.scratchDirectory("roam-import-bad")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/bad.trace"
        try "1\n2\nthree\n".write(toFile: path, atomically: true, encoding: .utf8)
        let result = try RunningCommand.run(roam, ["import", "mahimahi", "--up", path, "--down", path, "--name", "x"])
        #expect(result.status == 2)
        #expect(result.error.contains("\(path):3:"))
        let name = try RunningCommand.run(roam, ["import", "mahimahi", "--up", path, "--down", path, "--name", "9lives"])
        #expect(name.status == 2)
        #expect(name.error.contains("start with a letter"))
    }

    /// A trace's file name that holds line breaks cannot write YAML of its own into the profile
    /// (issue 30, item 7): it is escaped in the comment, and the output reads back as one profile.
    @Test func aFileNameCannotInjectYAML() throws {
        let directory = try TestEnvironment.scratchDirectory("roam-import-inject")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let name = directory + "/t\nworkloads:\n  - {name: x, kind: command, from: a, run: [touch, pwned]}\n#.trace"
        try String(repeating: "1\n", count: 100).appending("1000\n").write(toFile: name, atomically: true, encoding: .utf8)
        let result = try RunningCommand.run(roam, ["import", "mahimahi", "--up", name, "--down", name, "--name", "lab", "-o", directory + "/profile.yaml"])
        #expect(result.status == 0, "\(result.error)")
        let yaml = try String(contentsOfFile: directory + "/profile.yaml", encoding: .utf8)
        #expect(!yaml.split(separator: "\n").contains { $0.hasPrefix("workloads:") || $0.hasPrefix("  - {name: x") }, "\(yaml)")
        #expect(yaml.contains("\\nworkloads:"), "the line break is written as an escape: \(yaml)")
        let scenario = "name: s\nduration: 1s\nnodes: {a: {}, b: {}}\nlinks:\n  - {name: l, between: [a, b], profile: lab}\n" + yaml
        let outcome = ScenarioReader.parse(scenario, file: "s.yaml", baseDirectory: directory)
        #expect(outcome.errors.isEmpty, "\(outcome.errors)")
        #expect(outcome.scenario?.workloads.isEmpty == true)
    }
}
