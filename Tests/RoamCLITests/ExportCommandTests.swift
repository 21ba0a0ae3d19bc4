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
        let scratch = try TestEnvironment.scratchDirectory("roam-export")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let output = scratch + "/manifests.yaml"
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

    @Test func kubernetesModeWritesTheConfigMapAndEachNodesSidecar() throws {
        let scratch = try TestEnvironment.scratchDirectory("roam-export-k8s")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let output = scratch + "/manifests.yaml"
        let result = try RunningCommand.run(roam, ["export", "--format", "kubernetes", walk, "--image", "registry.example/roam:0.4", "--namespace", "qa",
                                                   "--workload", "phone=statefulset/phone-app", "--device", "wifi=net1", "--device", "phone/cell=eth0",
                                                   "--device", "server/cell=net2", "--start-at", "1800000000", "-o", output])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains("3 manifests"))
        let yaml = try String(contentsOfFile: output, encoding: .utf8)
        #expect(yaml.contains("kind: \"ConfigMap\"") && yaml.contains("start-at: \"1800000000\""))
        #expect(yaml.contains("kind: \"StatefulSet\"") && yaml.contains("name: \"phone-app\"") && yaml.contains("name: \"server\""))
        #expect(yaml.contains("--device phone/wifi=net1 --device phone/cell=eth0") && yaml.contains("--device server/wifi=net1 --device server/cell=net2"))
        #expect(yaml.contains("kubectl apply --server-side --field-manager=roam"))

        let removal = try RunningCommand.run(roam, ["export", "--format", "kubernetes", walk, "--image", "roam", "--remove"])
        #expect(removal.status == 0, "\(removal.error)")
        #expect(!removal.output.contains("ConfigMap\"") && !removal.output.contains("initContainers"))
        #expect(removal.output.components(separatedBy: "kind: \"Deployment\"").count == 3)

        // --start-in: time zero that far from now.
        let now = Int(Date().timeIntervalSince1970)
        let later = try RunningCommand.run(roam, ["export", "--format", "kubernetes", walk, "--image", "roam", "--start-in", "10m"])
        let zero = try #require(later.output.split(separator: "\n").first { $0.contains("start-at:") }.flatMap { Int($0.filter(\.isNumber)) })
        #expect((now + 590...now + 620).contains(zero), "\(zero) vs \(now)")
    }

    @Test func chaosMeshBelow280IsRefused() throws {
        let old = try RunningCommand.run(roam, ["export", walk, "--chaos-mesh-version", "2.7.3"])
        #expect(old.status == 2)
        #expect(old.error.contains("Chaos Mesh 2.7.3 gives netem every latency and jitter 1000 times too small"))
        let current = try RunningCommand.run(roam, ["export", walk, "--chaos-mesh-version", "v2.8.3"])
        #expect(current.status == 0, "\(current.error)")
        #expect(current.output.contains("for Chaos Mesh v2.8.3; they need 2.8.0 or later"))
    }

    @Test func kubernetesModeOptionsAreChecked() throws {
        for (arguments, message) in [
            (["--format", "kubernetes", walk], "--format kubernetes needs --image IMAGE"),
            (["--format", "kubernetes", walk, "--image", "a b"], "needs --image IMAGE"),
            (["--format", "kubernetes", walk, "--image", "roam", "--select", "phone=app=x"], "--select is for --format chaos-mesh"),
            (["--format", "chaos-mesh", walk, "--image", "roam"], "--image is for --format kubernetes"),
            (["--format", "kubernetes", walk, "--image", "roam", "--chaos-mesh-rate", "tbf"], "--chaos-mesh-rate is for --format chaos-mesh"),
            (["--format", "kubernetes", walk, "--image", "roam", "--workload", "phone=job/x"], "expected NODE=KIND/NAME"),
            (["--format", "kubernetes", walk, "--image", "roam", "--workload", "tablet=deployment/x"], "one of the nodes phone, server"),
            (["--format", "kubernetes", walk, "--image", "roam", "--workload", "phone=deployment/Phone_1"], "a Kubernetes name"),
            (["--format", "kubernetes", walk, "--image", "roam", "--start-at", "1", "--start-in", "1m"], "give --start-at or --start-in, not both"),
            (["--format", "kubernetes", walk, "--image", "roam", "--start-in", "2d"], "--start-in 2d: expected a duration up to a day"),
            (["--format", "kubernetes", walk, "--image", "roam", "--device", "wifi=eth0", "--device", "cell=eth0"], "would both be the interface 'eth0'"),
            (["--format", "kubernetes", walk, "--image", "roam", "--device", "laptop/wifi=eth0"], "expected LINK=IFACE or NODE/LINK=IFACE"),
            (["--format", "kubernetes", NetemHost.root + "/scenarios/coffee-shop-to-lte.yaml", "--image", "roam"], "cannot be played by roam attach in pods"),
        ] {
            let result = try RunningCommand.run(roam, ["export"] + arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.error.contains(message), "\(arguments): \(result.error)")
        }
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
        let shaping = try RunningCommand.run(roam, ["export", walk, "--chaos-mesh-rate", "htb"])
        #expect(shaping.status == 2 && shaping.error.contains("--chaos-mesh-rate htb: expected netem or tbf"), "\(shaping.error)")
        let tbf = try RunningCommand.run(roam, ["export", walk, "--chaos-mesh-rate", "tbf"])
        #expect(tbf.status == 0 && tbf.output.contains("action: \"bandwidth\"") && tbf.output.contains("(--chaos-mesh-rate tbf)"))
        let netem = try RunningCommand.run(roam, ["export", walk])
        #expect(netem.status == 0 && !netem.output.contains("bandwidth") && netem.output.contains("(--chaos-mesh-rate netem)"))
        let missing = try RunningCommand.run(roam, ["export", "/nonexistent.yaml"])
        #expect(missing.status == 2)
        #expect(missing.error.contains("cannot read the file"))
    }
}
