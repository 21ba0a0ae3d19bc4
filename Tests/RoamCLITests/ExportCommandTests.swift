import Foundation
import Glibc
import Testing
import TestSupport

/// `roam export --format chaos-mesh`: the command around the exporter (the manifests
/// themselves are checked against Chaos Mesh's schemas in SimulatorTests).
@Suite(.enabled(if: TestEnvironment.roamExecutable != nil, "the roam executable was not built (run `swift build` first)"))
struct ExportCommandTests {
    let roam = TestEnvironment.roamExecutable ?? "roam"
    let walk = NetemHost.root + "/scenarios/walk-out-of-home.yaml"

    @Test func writesTheManifestsAndSaysWhatDidNotMap() throws {
        let output = "/tmp/roam-export-\(getpid()).yaml"
        defer { unlink(output) }
        let result = try RunningCommand.run(roam, ["export", "--format", "chaos-mesh", walk, "--namespace", "qa",
                                                   "--select", "phone=app=phone,tier=client", "--select", "server=app=api",
                                                   "--device", "wifi=net1", "--device", "cell=net2", "-o", output])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains("1 manifest"))
        #expect(result.error.contains("note: carrier loss"))
        #expect(!result.error.contains("join the same two nodes"), "each link has its device")
        let yaml = try String(contentsOfFile: output, encoding: .utf8)
        #expect(yaml.contains("kind: \"Workflow\""))
        #expect(yaml.contains("namespace: \"qa\""))
        #expect(yaml.contains("tier: \"client\""))
        #expect(yaml.contains("device: \"net1\"") && yaml.contains("device: \"net2\""))
        #expect(!yaml.contains("target:"), "every object shapes its own side's device")
    }

    @Test func badOptionsAreRefusedWithTheChoices() throws {
        let node = try RunningCommand.run(roam, ["export", walk, "--select", "tablet=app=x"])
        #expect(node.status == 2)
        #expect(node.error.contains("one of the nodes phone, server"))
        let link = try RunningCommand.run(roam, ["export", walk, "--device", "lte=net1"])
        #expect(link.status == 2)
        #expect(link.error.contains("one of the links cell, wifi"))
        let format = try RunningCommand.run(roam, ["export", "--format", "litmus", walk])
        #expect(format.status == 2)
        #expect(format.error.contains("chaos-mesh"))
        let stacked = try RunningCommand.run(roam, ["export", walk, "--device", "wifi=eth0", "--device", "cell=eth0"])
        #expect(stacked.status == 2)
        #expect(stacked.error.contains("links 'wifi' and 'cell' would both be the device 'eth0'"), "\(stacked.error)")
        #expect(stacked.output.isEmpty, "nothing is written for a refused export")
        let missing = try RunningCommand.run(roam, ["export", "/nonexistent.yaml"])
        #expect(missing.status == 2)
        #expect(missing.error.contains("cannot read the file"))
    }
}
