import Foundation
@testable import Simulator
import Testing
import Yams

private let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures").path
private let repository = URL(fileURLWithPath: fixtures).deletingLastPathComponent().deletingLastPathComponent().path

/// The published schemas, vendored in Tests/Fixtures/chaos-mesh (see SOURCE.md there).
private let schemas: [String: StructuralSchema] = {
    var schemas: [String: StructuralSchema] = [:]
    schemas["NetworkChaos"] = try? StructuralSchema(crd: fixtures + "/chaos-mesh/chaos-mesh.org_networkchaos.yaml")
    schemas["Workflow"] = try? StructuralSchema(crd: fixtures + "/chaos-mesh/chaos-mesh.org_workflows.yaml")
    return schemas
}()

/// What Chaos Mesh's admission webhook checks beyond the schema, for the fields Roam writes.
private func webhookViolations(_ document: [String: Any]) -> [String] {
    var problems: [String] = []
    let dns = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    if let name = (document["metadata"] as? [String: Any])?["name"] as? String, name.range(of: dns, options: .regularExpression) == nil || name.count > 63 {
        problems.append("metadata.name '\(name)' is not a DNS label")
    }
    func checkChaos(_ spec: [String: Any], _ path: String) {
        if let rate = (spec["rate"] as? [String: Any])?["rate"] as? String,
           rate.range(of: "^[0-9]+(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$", options: .regularExpression) == nil {
            problems.append("\(path).rate.rate '\(rate)' is not a whole number with a unit")
        }
        for (field, key) in [("loss", "loss"), ("duplicate", "duplicate"), ("corrupt", "corrupt")] {
            if let text = (spec[field] as? [String: Any])?[key] as? String, !(Double(text).map { (0...100).contains($0) } ?? false) {
                problems.append("\(path).\(field) '\(text)' is not a percentage")
            }
        }
        if let direction = spec["direction"] as? String, direction != "to", spec["target"] == nil, spec["action"] as? String != "partition" {
            problems.append("\(path): direction \(direction) needs a target")
        }
    }
    let goDuration = "^([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+$"
    switch document["kind"] as? String {
    case "NetworkChaos":
        checkChaos(document["spec"] as? [String: Any] ?? [:], "spec")
    case "Workflow":
        let spec = document["spec"] as? [String: Any] ?? [:]
        let templates = spec["templates"] as? [[String: Any]] ?? []
        let names = templates.compactMap { $0["name"] as? String }
        if Set(names).count != names.count { problems.append("template names repeat") }
        if let entry = spec["entry"] as? String, !names.contains(entry) { problems.append("entry '\(entry)' is no template") }
        for (index, template) in templates.enumerated() {
            let path = "spec.templates[\(index)]"
            if let name = template["name"] as? String, name.range(of: dns, options: .regularExpression) == nil { problems.append("\(path).name '\(name)'") }
            let type = template["templateType"] as? String ?? ""
            if !["Serial", "Parallel", "Suspend", "NetworkChaos"].contains(type) { problems.append("\(path).templateType '\(type)'") }
            if let deadline = template["deadline"] as? String, deadline.range(of: goDuration, options: .regularExpression) == nil {
                problems.append("\(path).deadline '\(deadline)'")
            }
            if type == "Suspend" || type == "NetworkChaos", template["deadline"] == nil { problems.append("\(path): a \(type) step needs a deadline") }
            for child in template["children"] as? [String] ?? [] where !names.contains(child) { problems.append("\(path).children: no template '\(child)'") }
            if type == "NetworkChaos" { checkChaos(template["networkChaos"] as? [String: Any] ?? [:], "\(path).networkChaos") }
        }
    default:
        problems.append("unexpected kind \(document["kind"] ?? "none")")
    }
    return problems
}

/// Every violation of every document in `yaml`.
private func violations(_ yaml: String) throws -> [String] {
    var problems: [String] = []
    for document in try Yams.load_all(yaml: yaml) {
        guard let object = document as? [String: Any], let kind = object["kind"] as? String, let schema = schemas[kind] else {
            problems.append("a document without a known kind")
            continue
        }
        problems += schema.violations(of: object).map { "\(kind): \($0)" }
        problems += webhookViolations(object).map { "\(kind): \($0)" }
    }
    return problems
}

private func documents(_ yaml: String) throws -> [[String: Any]] {
    try Yams.load_all(yaml: yaml).compactMap { $0 as? [String: Any] }
}

@Suite("Chaos Mesh export")
struct ChaosMeshExportTests {
    @Test func theVendoredSchemasLoad() {
        #expect(schemas.count == 2)
    }

    static let bundled = ((try? FileManager.default.contentsOfDirectory(atPath: repository + "/scenarios")) ?? []).filter { $0.hasSuffix(".yaml") }.sorted()

    @Test(arguments: bundled)
    func everyBundledScenarioExportsToValidManifests(_ file: String) throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/" + file).scenario)
        var options = ChaosMeshExport.Options()
        options.namespace = "mobile-tests"
        options.selectors = Dictionary(uniqueKeysWithValues: scenario.nodes.map { ($0.name, ["app.kubernetes.io/name": $0.name]) })
        options.devices = Dictionary(uniqueKeysWithValues: scenario.links.enumerated().map { ($1.name, "net\($0 + 1)") })
        let result = ChaosMeshExport.export(scenario, options: options)
        #expect(try violations(result.yaml) == [])
        #expect(result.manifests >= 1)
        // Every track covers the scenario exactly.
        for document in try documents(result.yaml) where document["kind"] as? String == "Workflow" {
            let templates = (document["spec"] as? [String: Any])?["templates"] as? [[String: Any]] ?? []
            let byName = Dictionary(uniqueKeysWithValues: templates.map { ($0["name"] as! String, $0) })
            for track in templates where track["templateType"] as? String == "Serial" {
                let total = (track["children"] as? [String] ?? []).reduce(Duration.zero) { sum, child in
                    sum + ((byName[child]?["deadline"] as? String).flatMap { try? Units.duration($0).get() } ?? .zero)
                }
                #expect(total == scenario.duration, "track \(track["name"] ?? "")")
            }
        }
    }

    @Test func walkOutOfHomeBecomesAWorkflowWithAPartitionForTheOutage() throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/walk-out-of-home.yaml").scenario)
        let result = ChaosMeshExport.export(scenario)
        let workflow = try #require(try documents(result.yaml).first)
        #expect(workflow["kind"] as? String == "Workflow")
        let templates = (workflow["spec"] as? [String: Any])?["templates"] as? [[String: Any]] ?? []
        let wifiSteps = templates.filter { ($0["name"] as? String)?.hasPrefix("wifi-") == true }
        // 0-5 s as set up, 5-10.1 s after the set, the 5 s ramp in steps of at least 1 s,
        // 15-30 s partitioned, then back with the ramp's end state.
        let partition = try #require(wifiSteps.first { ($0["networkChaos"] as? [String: Any])?["action"] as? String == "partition" })
        #expect(partition["deadline"] as? String == "15s")
        #expect((6...9).contains(wifiSteps.count), "\(wifiSteps.count) steps")
        let first = try #require(wifiSteps.first?["networkChaos"] as? [String: Any])
        #expect((first["delay"] as? [String: Any])?["latency"] as? String == "8ms")
        #expect((first["rate"] as? [String: Any])?["rate"] as? String == "50mbit")
        #expect((first["loss"] as? [String: Any])?["loss"] as? String == "0.1")
        #expect(first["direction"] as? String == "both")
        #expect(result.notes.contains { $0.contains("partition") })
        #expect(result.notes.contains { $0.contains("join the same two nodes") }, "two links, no devices")
    }

    @Test func withoutATimelineEachDirectionIsOneNetworkChaos() throws {
        let scenario = try #require(ScenarioReader.parse("""
            name: Asymmetric-DSL
            duration: 10s
            nodes: { home: {}, isp: {} }
            links:
              - { name: dsl, between: [home, isp], profile: dsl, loss: { model: gilbert-elliott, p: 1%, r: 30% }, distribution: pareto, jitter: 1ms, limit: 50 }
            """, file: "dsl.yaml").scenario)
        let result = ChaosMeshExport.export(scenario)
        #expect(try violations(result.yaml) == [])
        let manifests = try documents(result.yaml)
        #expect(manifests.map { $0["kind"] as? String } == ["NetworkChaos", "NetworkChaos"])
        #expect(manifests.map { ($0["metadata"] as? [String: Any])?["name"] as? String } == ["asymmetric-dsl-dsl-up", "asymmetric-dsl-dsl-down"])
        let up = manifests[0]["spec"] as? [String: Any] ?? [:], down = manifests[1]["spec"] as? [String: Any] ?? [:]
        #expect(up["direction"] as? String == "to" && down["direction"] as? String == "from")
        #expect((up["rate"] as? [String: Any])?["rate"] as? String == "256kbit")
        #expect((down["rate"] as? [String: Any])?["rate"] as? String == "2mbit")
        #expect((up["loss"] as? [String: Any])?["loss"] as? String == "3.2258", "Gilbert-Elliott's long-run loss, 1/31")
        for expected in ["Gilbert-Elliott", "distributions", "queue limits"] {
            #expect(result.notes.contains { $0.contains(expected) }, "a note on \(expected)")
        }
    }

    @Test func traceDrivenCapacityIsItsMeanRateAndSaysSo() throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/commuter-train.yaml").scenario)
        let result = ChaosMeshExport.export(scenario)
        #expect(result.notes.contains { $0.contains("trace-driven capacity") && $0.contains("mean rate") })
        #expect(try violations(result.yaml) == [])
    }

    @Test func theValidatorCatchesWhatTheAPIServerWouldRefuse() throws {
        let good = """
            apiVersion: chaos-mesh.org/v1alpha1
            kind: NetworkChaos
            metadata: { name: ok, namespace: default }
            spec: { action: netem, mode: all, selector: { namespaces: [default] }, delay: { latency: 10ms }, rate: { rate: 5mbit } }
            """
        #expect(try violations(good) == [])
        let cases = [
            ("action: netem", "action: slow", "is not one of"),
            ("latency: 10ms", "latency: ten", "does not match"),
            ("mode: all, ", "", "missing required field 'mode'"),
            ("delay: {", "delays: {", "unknown field 'delays'"),
            ("rate: 5mbit", "rate: 1.5mbit", "not a whole number"),
            ("namespaces: [default]", "namespaces: default", "expected an array"),
        ]
        for (original, replacement, expected) in cases {
            let broken = good.replacingOccurrences(of: original, with: replacement)
            #expect(try violations(broken).contains { $0.contains(expected) }, "\(replacement) → \(expected)")
        }
    }

    @Test func unitsAreWrittenAsChaosMeshReadsThem() {
        #expect(ChaosMeshExport.rate(.mbit(50)) == "50mbit")
        #expect(ChaosMeshExport.rate(Rate(bitsPerSecond: 1_500_000)) == "1500kbit")
        #expect(ChaosMeshExport.rate(Rate(bitsPerSecond: 1234.4)) == "1234bit")
        #expect(ChaosMeshExport.goDuration(.milliseconds(5100)) == "5100ms")
        #expect(ChaosMeshExport.goDuration(.seconds(40)) == "40s")
        #expect(ChaosMeshExport.percent(0.001) == "0.1")
        #expect(ChaosMeshExport.percent(0.4) == "40")
        #expect(ChaosMeshExport.dnsName("Walk Out_Of-Home!") == "walk-out-of-home")
    }
}
