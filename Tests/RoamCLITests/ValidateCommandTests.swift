import Foundation
import Glibc
import Testing
import TestSupport

@Suite(.enabled(if: TestEnvironment.roamExecutable != nil, "the roam executable was not built (run `swift build` first)"))
struct ValidateCommandTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"
    let scenarios: [String] = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let directory = root.appendingPathComponent("scenarios").path
        return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".yaml") }.sorted().map { directory + "/" + $0 }
    }()

    @Test func acceptsTheBundledScenarios() throws {
        #expect(scenarios.count >= 7)
        let result = try RunningCommand.run(roam, ["validate"] + scenarios)
        #expect(result.status == 0, "\(result.error)")
        #expect(result.error.isEmpty)
        #expect(result.output.split(separator: "\n").count == scenarios.count)
        #expect(result.output.contains("walk-out-of-home.yaml: valid: 'walk-out-of-home', 40s, 2 nodes, 2 links, 4 events"))
    }

    @Test func reportsEveryErrorWithItsPlaceAndExits2() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("roam-bad-\(getpid()).yaml").path
        try """
            name: broken
            duration: 10s
            nodes: { phone: {}, server: {} }
            links:
              - name: wifi
                between: [phone, server]
                dealy: 8ms
                loss: 140%
            """.write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        let result = try RunningCommand.run(roam, ["validate", scenarios[0], path])
        #expect(result.status == 2)
        #expect(result.error.contains("\(path):7:5: error: unknown key 'dealy' in link 'wifi' (did you mean 'delay'?)\n    dealy: 8ms\n    ^"))
        #expect(result.error.contains("\(path):8:11: error: loss must be between 0% and 100%, not 140%"))
        #expect(result.output.contains(": valid:"), "the valid file is still reported")
    }

    @Test func explainsAMissingFile() throws {
        let result = try RunningCommand.run(roam, ["validate", "/nonexistent/s.yaml"])
        #expect(result.status == 2)
        #expect(result.error == "/nonexistent/s.yaml: error: cannot read the file: No such file or directory")
    }
}
