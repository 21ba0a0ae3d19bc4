import Foundation
@testable import ScenarioModel
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
        for field in ["rate", "bandwidth"] {
            if let rate = (spec[field] as? [String: Any])?["rate"] as? String,
               rate.range(of: "^[0-9]+(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$", options: .regularExpression) == nil {
                problems.append("\(path).\(field).rate '\(rate)' is not a whole number with a unit")
            }
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

    static let all = ((try? FileManager.default.contentsOfDirectory(atPath: repository + "/scenarios")) ?? []).filter { $0.hasSuffix(".yaml") }.sorted()
    static let bundled = all
    static let withNetworks = all.filter { !(ScenarioReader.read(contentsOf: repository + "/scenarios/" + $0).scenario?.networks.isEmpty ?? true) }

    /// A scenario with networks exports its links (radios, uplinks, attachments) as any link;
    /// what the gateways do and every event Chaos Mesh cannot play are in the notes.
    @Test(arguments: withNetworks)
    func aScenarioWithNetworksSaysWhatItLeavesOut(_ file: String) throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/" + file).scenario)
        let result = try ChaosMeshExport.export(scenario)
        for network in scenario.networks {
            #expect(result.notes.contains { $0.hasPrefix("network '\(network.name)': its links are exported as any link, with the pods of node '\(network.gateway)'") },
                    "\(result.notes)")
        }
        let expected: [String: String] = [
            "coffee-shop-to-lte.yaml": "leave on cafe.phone at 9s is exported as the radio's carrier lost (100% loss on its device)",
            "carrier-nat-rebind.yaml": "rebind on lte.uplink at 8s is not exported: Chaos Mesh has no NAT",
            "hotel-dns.yaml": "the dns faults on hotel.uplink are not exported",
        ]
        if let note = expected[file] { #expect(result.notes.contains { $0.hasPrefix(note) }, "\(result.notes)") }
        #expect(result.yaml.contains("\(scenario.networks[0].name)-gw"))
    }

    @Test(arguments: bundled)
    func everyBundledScenarioExportsToValidManifests(_ file: String) throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/" + file).scenario)
        var options = ChaosMeshExport.Options()
        options.namespace = "mobile-tests"
        options.selectors = Dictionary(uniqueKeysWithValues: scenario.nodes.map { ($0.name, ["app.kubernetes.io/name": $0.name]) })
        options.devices = Dictionary(uniqueKeysWithValues: scenario.links.enumerated().map { ($1.name, "net\($0 + 1)") })
        let result = try ChaosMeshExport.export(scenario, options: options)
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

    /// Per link and direction, what a packet meets on the sending side's device over the run,
    /// by Chaos Mesh's semantics (``ChaosMeshSemantics``), is what Roam plays: exactly, at every
    /// change but a ramp's inner steps; during a ramp, values Roam had within the resolution
    /// before (never values still to come). Nothing else in the pods is touched, and no device
    /// gets two objects of a kind at once.
    @Test(arguments: bundled)
    func everyBundledScenarioPlaysOnAClusterAsRoamPlaysIt(_ file: String) throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/" + file).scenario)
        for shaping in ChaosMeshExport.RateShaping.allCases {
            var options = ChaosMeshExport.Options()
            options.rateShaping = shaping
            let result = try ChaosMeshExport.export(scenario, options: options)
            #expect(try violations(result.yaml) == [])
            let mismatches = Self.mismatches(scenario, result, options: options)
            #expect(mismatches.isEmpty, "\(shaping): \(mismatches.prefix(8).joined(separator: "\n"))")
        }
    }

    /// With the rate in netem (the default), a side has one object at a time, so no apply order
    /// can put netem under a tbf, and its pods are updated (every device rebuilt) less often:
    /// strictly less in walk-out-of-home, whose Wi-Fi's netem and rate change at different
    /// times. The rebuild notes give the model's counts, and each side with a rate names its
    /// queue. Shaping with tbf again fails the first expectation (the order) wherever a side's
    /// netem and rate change apart, as in walk-out-of-home (checked below).
    @Test(arguments: bundled)
    func theRateInNetemFixesTheOrderAndUpdatesPodsLessOften(_ file: String) throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/" + file).scenario)
        let labels = Dictionary(uniqueKeysWithValues: scenario.nodes.map { ($0.name, ["app": $0.name]) })
        var updates: [ChaosMeshExport.RateShaping: [String: [Duration]]] = [:]
        var results: [ChaosMeshExport.RateShaping: ChaosMeshExport.Result] = [:]
        var disordered: [ChaosMeshExport.RateShaping: Int] = [:]
        for shaping in ChaosMeshExport.RateShaping.allCases {
            var options = ChaosMeshExport.Options()
            options.rateShaping = shaping
            let result = try ChaosMeshExport.export(scenario, options: options)
            let activations = ChaosMeshSemantics.activations(try documents(result.yaml), duration: scenario.duration)
            var time = Duration.milliseconds(50)
            while time < scenario.duration {
                for egress in ChaosMeshSemantics.egress(at: time, activations, labels: labels).values where egress.order != nil || egress.netemObjects > 1 {
                    disordered[shaping, default: 0] += 1
                }
                time += .milliseconds(250)
            }
            updates[shaping] = ChaosMeshSemantics.podUpdates(activations, labels: labels, duration: scenario.duration)
            results[shaping] = result
        }
        #expect(disordered[.netem, default: 0] == 0, "\(file): a side with two objects at once")
        let netem = updates[.netem] ?? [:], tbf = updates[.tbf] ?? [:]
        for node in scenario.nodes.map(\.name) {
            #expect(netem[node, default: []].count <= tbf[node, default: []].count, "\(file) \(node): \(netem[node, default: []].count) updates, tbf \(tbf[node, default: []].count)")
            // The note counts what the model counts.
            let devices = scenario.links.filter { $0.endpoints.0 == node || $0.endpoints.1 == node }.count
            let count = netem[node, default: []].count
            let note = results[.netem]?.notes.contains { $0.hasPrefix("node '\(node)''s pods: their chaos changes \(count) times") } == true
            let capped = results[.netem]?.notes.last?.contains("more notes of the kinds above not shown") == true
            #expect(devices < 2 || count == 0 || note || capped, "\(file) \(node): no note of \(count) rebuilds")
        }
        if file == "walk-out-of-home.yaml" {
            #expect(netem["phone", default: []].count < tbf["phone", default: []].count)
            #expect(disordered[.tbf, default: 0] > 0, "the model sees tbf's order trap")
            #expect(results[.netem]?.notes.contains { $0.hasPrefix("wifi up: the rate is netem's own") && $0.contains("1000 packets (12.112s at 1mbit)") } == true,
                    "\(results[.netem]?.notes ?? [])")
        }
    }

    /// Where the export and Roam part, one line each.
    static func mismatches(_ scenario: Scenario, _ result: ChaosMeshExport.Result, options: ChaosMeshExport.Options) -> [String] {
        guard let parsed = try? documents(result.yaml) else { return ["the export does not parse"] }
        let activations = ChaosMeshSemantics.activations(parsed, duration: scenario.duration)
        let labels = Dictionary(uniqueKeysWithValues: scenario.nodes.map { ($0.name, options.selectors[$0.name] ?? ["app": $0.name]) })
        var roam: [ChaosMeshSemantics.Side: (link: String, points: [(at: Duration, egress: ChaosMeshSemantics.Egress, ramp: Bool)])] = [:]
        var times: Set<Duration> = [.zero]
        for link in scenario.links {
            for direction in TrafficDirection.allCases {
                let sender = direction == .up ? link.endpoints.0 : link.endpoints.1
                let points = ChaosMeshSemantics.roam(scenario, link: link.name, direction: direction, shaping: options.rateShaping)
                roam[ChaosMeshSemantics.Side(node: sender, device: options.device(of: link.name))] = ("\(link.name) \(direction)", points)
                for point in points { times.insert(point.at) }
            }
        }
        for activation in activations { times.insert(activation.start); times.insert(activation.end) }
        let boundaries = times.filter { $0 < scenario.duration }.sorted()
        var samples = boundaries
        for (index, time) in boundaries.enumerated() {
            let next = index + 1 < boundaries.count ? boundaries[index + 1] : scenario.duration
            samples.append(time + (next - time) / 2)
        }
        var problems: [String] = []
        for time in samples.sorted() {
            let sides = ChaosMeshSemantics.egress(at: time, activations, labels: labels)
            for side in sides.keys where roam[side] == nil {
                problems.append("\(time): \(side.node)'s \(side.device) is shaped, and no link is there")
            }
            for (side, expected) in roam {
                let got = sides[side] ?? ChaosMeshSemantics.Egress()
                if got.netemObjects > 1 || got.tbfObjects > 1 {
                    problems.append("\(time): \(expected.link): \(got.netemObjects) netem and \(got.tbfObjects) tbf objects at once")
                }
                guard let current = expected.points.last(where: { $0.at <= time }) else { continue }
                if got.conditions == current.egress { continue }
                // Within a ramp, a value Roam had within the resolution before is fine.
                let window = expected.points.filter { $0.at > time - options.resolution && $0.at <= time }.map(\.egress)
                    + [expected.points.last { $0.at <= time - options.resolution }?.egress].compactMap { $0 }
                if current.ramp && window.contains(got.conditions) { continue }
                problems.append("\(time): \(expected.link): Chaos Mesh plays \(got), Roam \(current.egress)")
            }
        }
        return problems
    }

    /// Chaos Mesh chains a device's objects in the order it applies them (entry 0 the root), so a
    /// netem applied after the tbf of its side has tbf above it and takes the place of tbf's
    /// queue. The model sees the order; the export names every span where it happens (or may,
    /// when both are applied at once), side by side, and nothing else.
    @Test(arguments: bundled)
    func theNotesNameEverySpanWhereNetemIsUnderTbf(_ file: String) throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/" + file).scenario)
        var options = ChaosMeshExport.Options()
        options.rateShaping = .tbf
        let result = try ChaosMeshExport.export(scenario, options: options)
        var notes = Notes()
        let orders = applyOrder(Track.build(scenario, options: options, notes: &notes))
        let activations = ChaosMeshSemantics.activations(try documents(result.yaml), duration: scenario.duration)
        let labels = Dictionary(uniqueKeysWithValues: scenario.nodes.map { ($0.name, ["app": $0.name]) })
        var time = Duration.milliseconds(50)
        var seen = 0
        while time < scenario.duration {
            for (side, egress) in ChaosMeshSemantics.egress(at: time, activations, labels: labels) {
                guard let order = egress.order else { continue }
                let link = try #require(scenario.links.first { $0.name == side.device })
                let direction: TrafficDirection = side.node == link.endpoints.0 ? .up : .down
                let listed = orders.first { $0.link == link.name && $0.direction == direction }?.spans.first { $0.start <= time && time < $0.end }
                switch order {
                case .netemAboveTbf: #expect(listed == nil, "\(file) \(time): \(link.name) \(direction) is in order and listed")
                case .tbfAboveNetem: #expect(listed.map { !$0.raced } == true, "\(file) \(time): \(link.name) \(direction) has netem under tbf, not listed")
                case .either: #expect(listed?.raced == true, "\(file) \(time): \(link.name) \(direction) races, not listed")
                }
                if order != .netemAboveTbf { seen += 1 }
            }
            time += .milliseconds(250)
        }
        // Each side has its note (past the first 100 notes, counted in the last: crowd's 60 links).
        let capped = result.notes.last?.contains("more notes of the kinds above not shown") == true
        for order in orders {
            let noted = result.notes.contains { $0.hasPrefix("\(order.link) \(order.direction.rawValue) (device ") && $0.contains("netem's 1000 packets") }
            #expect(noted || capped, "\(file): \(order.link) \(order.direction)")
        }
        if file == "walk-out-of-home.yaml" {
            // The Wi-Fi's netem changes at 5 s while its rate goes on: certain, not a race.
            let wifi = try #require(orders.first { $0.link == "wifi" && $0.direction == .up })
            #expect(wifi.spans.contains { $0.start == .seconds(5) && !$0.raced })
            #expect(seen > 0)
        }
    }

    @Test func versionsBelow280AreRefusedAndTheVersionIsInTheOutput() throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/walk-out-of-home.yaml").scenario)
        for version in ["2.7.3", "v2.6.7", "1.9.0", "2.7.99"] {
            var options = ChaosMeshExport.Options()
            options.version = version
            let refusal = #expect(throws: ChaosMeshExport.Refusal.self) { try ChaosMeshExport.export(scenario, options: options) }
            #expect(refusal?.message.contains("1000 times too small (chaos-mesh/chaos-mesh#4545") == true)
        }
        for version in ["2.8", "x.y.z", "2.8.0-rc1", ""] {
            var options = ChaosMeshExport.Options()
            options.version = version
            let refusal = #expect(throws: ChaosMeshExport.Refusal.self) { try ChaosMeshExport.export(scenario, options: options) }
            #expect(refusal?.message.contains("is not MAJOR.MINOR.PATCH") == true)
        }
        var options = ChaosMeshExport.Options()
        options.version = "v2.8.0"
        #expect(try ChaosMeshExport.export(scenario, options: options).yaml.contains("for Chaos Mesh v2.8.0; they need 2.8.0 or later"))
        #expect(try ChaosMeshExport.export(scenario).yaml.contains("for Chaos Mesh \(ChaosMeshExport.defaultVersion)"))
    }

    /// A valid 3000 s scenario with a 2 s flap was one 1.68 MB Workflow, over etcd's 1.5 MiB: now
    /// Workflows of at most 512 KiB. And split, they play what one Workflow plays, started together
    /// (checked on a shorter timeline split at a lower limit).
    @Test func aLongTimelineIsSplitBelowEtcdsLimitAndPlaysTheSame() throws {
        func scenario(_ seconds: Int) throws -> Scenario {
            try #require(ScenarioReader.parse("""
                name: long-flap-\(String(repeating: "x", count: 50))
                duration: \(seconds)s
                nodes: { phone: {}, server: {} }
                links:
                  - { name: wifi, between: [phone, server], delay: 20ms, rate: 10mbit, loss: 1% }
                  - { name: cell, between: [phone, server], delay: 50ms }
                timeline:
                  - { at: 1s, link: wifi, flap: { period: 2s, duty: 50%, for: \(seconds - 2)s } }
                """, file: "long.yaml").scenario)
        }
        let long = try ChaosMeshExport.export(try scenario(3000))
        let workflows = long.yaml.components(separatedBy: "\n---\n").dropFirst()
        #expect(long.yaml.utf8.count > 1_500_000 && long.manifests >= 3 && workflows.count == long.manifests)
        for workflow in workflows { #expect(workflow.utf8.count <= 512 << 10 + 4096, "\(workflow.utf8.count)") }
        #expect(long.notes.contains { $0.contains("Workflows of at most 512 KiB") })

        let short = try scenario(300)
        var whole = ChaosMeshExport.Options()
        whole.maximumWorkflowBytes = Int.max
        var small = ChaosMeshExport.Options()
        small.maximumWorkflowBytes = 48 << 10
        let one = try ChaosMeshExport.export(short, options: whole)
        let split = try ChaosMeshExport.export(short, options: small)
        #expect(one.manifests == 1 && split.manifests >= 3, "\(split.manifests)")
        #expect(try violations(split.yaml) == [])
        let names = try documents(split.yaml).compactMap { ($0["metadata"] as? [String: Any])?["name"] as? String }
        #expect(Set(names).count == names.count && names.allSatisfy { $0.count <= 63 && !$0.hasSuffix("-") }, "\(names)")
        let labels = ["phone": ["app": "phone"], "server": ["app": "server"]]
        let a = ChaosMeshSemantics.activations(try documents(one.yaml), duration: short.duration)
        let b = ChaosMeshSemantics.activations(try documents(split.yaml), duration: short.duration)
        var time = Duration.milliseconds(250)
        while time < short.duration {
            let x = ChaosMeshSemantics.egress(at: time, a, labels: labels).mapValues(\.conditions)
            let y = ChaosMeshSemantics.egress(at: time, b, labels: labels).mapValues(\.conditions)
            #expect(x == y, "\(time)")
            if x != y { break }
            time += .milliseconds(700)
        }
    }

    @Test func aLongNameNeverEndsInADash() throws {
        // 63 characters whose last is '-' once cut: the Workflow's name was refused by the API server.
        let name = String(repeating: "a", count: 62) + "-b"
        let scenario = try #require(ScenarioReader.parse("""
            name: \(name)
            duration: 10s
            nodes: { phone: {}, server: {} }
            links:
              - { name: wifi, between: [phone, server], delay: 20ms }
            timeline:
              - { at: 2s, link: wifi, down: true }
            """, file: "dash.yaml").scenario)
        let result = try ChaosMeshExport.export(scenario)
        let metadata = try #require(try documents(result.yaml).first?["metadata"] as? [String: Any])
        let workflow = try #require(metadata["name"] as? String)
        #expect(workflow == String(repeating: "a", count: 62), "\(workflow)")
        #expect(((metadata["labels"] as? [String: Any])?["roam/scenario"] as? String)?.hasSuffix("-") == false)
        #expect(try violations(result.yaml) == [])
        #expect(result.notes.contains { $0.contains("a selector that matches no pod makes Chaos Mesh do nothing") && $0.contains("kubectl get pods -n default -l app=phone") })
    }

    @Test func walkOutOfHomeKeepsCellularUntouchedWhileWiFiDegradesAndGoes() throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/walk-out-of-home.yaml").scenario)
        let result = try ChaosMeshExport.export(scenario, options: Self.tbf)
        let parsed = try documents(result.yaml)
        let workflow = try #require(parsed.first)
        #expect(workflow["kind"] as? String == "Workflow")
        let activations = ChaosMeshSemantics.activations(parsed, duration: scenario.duration)
        let labels = ["phone": ["app": "phone"], "server": ["app": "server"]]
        let wifiUp = ChaosMeshSemantics.Side(node: "phone", device: "wifi"), cellUp = ChaosMeshSemantics.Side(node: "phone", device: "cell")
        let cell = try #require(scenario.links.first { $0.name == "cell" })
        let cellPlays = ChaosMeshSemantics.expected(true, LinkConditions(impairment: cell.up))
        for tenth in 0..<400 {
            let time = Duration.milliseconds(100 * tenth + 50)
            let sides = ChaosMeshSemantics.egress(at: time, activations, labels: labels)
            #expect(sides[cellUp]?.conditions == cellPlays, "cellular at \(time): \(sides[cellUp]?.description ?? "clear")")
            let wifi = sides[wifiUp]
            if time > .seconds(15) && time < .seconds(30) { #expect(wifi?.loss == 100, "Wi-Fi gone at \(time)") }
            if time < .seconds(5) { #expect(wifi?.loss == 0.1 && wifi?.latency == .milliseconds(8) && wifi?.rate == 50_000_000) }
        }
        // The ramp's spans hold their starting values: the span from 10.1 s has Roam's 10.1 s
        // values (5.7% loss), not those of its end; the final 40% and 1 Mbit/s hold from 15 s.
        let roam = ChaosMeshSemantics.roam(scenario, link: "wifi", direction: .up)
        let roamAt10_1 = try #require(roam.first { $0.at == .milliseconds(10_100) }).egress
        #expect(roamAt10_1.loss == 5.7)
        let atRampStart = ChaosMeshSemantics.egress(at: .milliseconds(10_500), activations, labels: labels)[wifiUp]
        #expect(atRampStart?.conditions == roamAt10_1, "\(atRampStart?.description ?? "")")
        let beforeEnd = ChaosMeshSemantics.egress(at: .milliseconds(14_950), activations, labels: labels)[wifiUp]
        #expect(beforeEnd.map { $0.loss < 40 && ($0.rate ?? 0) > 1_000_000 } == true, "\(beforeEnd?.description ?? "")")
        let atEnd = ChaosMeshSemantics.egress(at: .milliseconds(15_000), activations, labels: labels)[wifiUp]
        #expect(atEnd?.loss == 100 && atEnd?.rate == 1_000_000, "carrier lost at 15 s, when the ramp ends")
        let back = ChaosMeshSemantics.egress(at: .milliseconds(30_500), activations, labels: labels)[wifiUp]
        #expect(back?.loss == 40 && back?.rate == 1_000_000)
        #expect(result.notes.contains { $0.contains("carrier loss") && $0.contains("path monitor") })
    }

    @Test func queuesAreRoamsTbfNotNetemsThousandPackets() throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/airplane-wifi.yaml").scenario)
        let result = try ChaosMeshExport.export(scenario, options: Self.tbf)
        let parsed = try documents(result.yaml)
        let activations = ChaosMeshSemantics.activations(parsed, duration: scenario.duration)
        let up = ChaosMeshSemantics.egress(at: .milliseconds(500), activations, labels: ["phone": ["app": "phone"], "server": ["app": "server"]])
        let link = try #require(scenario.links.first { $0.profile == "airplane-wifi" })
        let side = try #require(up[ChaosMeshSemantics.Side(node: "phone", device: link.name)])
        let roam = try #require(LinkConditions(impairment: link.up).queuePlan.tokenBucket)
        #expect(side.rate == 512_000 && side.limit == roam.limit && side.buffer == roam.bucket)
        #expect(side.netemRate == nil)
        // By default the rate is netem's, in the same object, and the note gives both queues.
        let byNetem = try ChaosMeshExport.export(scenario)
        let netemSide = ChaosMeshSemantics.egress(at: .milliseconds(500), ChaosMeshSemantics.activations(try documents(byNetem.yaml), duration: scenario.duration),
                                                  labels: ["phone": ["app": "phone"], "server": ["app": "server"]])[ChaosMeshSemantics.Side(node: "phone", device: link.name)]
        #expect(netemSide?.netemRate == "512kbit" && netemSide?.rate == nil && netemSide?.netemObjects == 1)
        #expect(byNetem.notes.contains { $0.hasPrefix("\(link.name) up: the rate is netem's own") && $0.contains("not Roam's \(roam.limit) bytes") }, "\(byNetem.notes)")
    }

    @Test func jitterWithoutDelayKeepsALatencySoChaosMeshWritesIt() throws {
        let scenario = try #require(ScenarioReader.parse("""
            name: jitter
            duration: 10s
            nodes: { a: {}, b: {} }
            links: [{ name: l, between: [a, b], jitter: 5ms }]
            """, file: "jitter.yaml").scenario)
        let result = try ChaosMeshExport.export(scenario)
        let sides = ChaosMeshSemantics.egress(at: .seconds(1), ChaosMeshSemantics.activations(try documents(result.yaml), duration: .seconds(10)),
                                              labels: ["a": ["app": "a"], "b": ["app": "b"]])
        #expect(sides[ChaosMeshSemantics.Side(node: "a", device: "l")]?.jitter == .milliseconds(5))
        #expect(result.notes.contains { $0.contains("jitter without delay") })
    }

    @Test func namesNeverCollideAndOutagesAreOneStep() throws {
        let longName = "a" + String(repeating: "b", count: 63 - 1)
        let scenario = try #require(ScenarioReader.parse("""
            name: \(longName)
            duration: 20s
            nodes: { phone: {}, server: {} }
            links:
              - { name: cell, between: [phone, server], profile: lte }
              - { name: cell-2, between: [phone, server], profile: lte }
              - { name: entry, between: [phone, server], profile: wifi }
              - { name: Cell_3, between: [phone, server], profile: 3g, loss: 0.0000001% }
            timeline:
              - { at: 2s, link: cell, down: true }
              - { at: 3s, link: cell, ramp: { to: { loss: 20% }, over: 2s } }
              - { at: 4s, link: cell-2, blackhole: true }
              - { at: 8s, link: cell, up: true }
            """, file: "names.yaml").scenario)
        let result = try ChaosMeshExport.export(scenario)
        #expect(try violations(result.yaml) == [], "unique template names, DNS labels")
        let templates = ((try documents(result.yaml).first?["spec"] as? [String: Any])?["templates"] as? [[String: Any]]) ?? []
        // The outage on cell (down, a ramp while down, up) is one step of 100% loss.
        let cellUp = templates.filter { ($0["name"] as? String)?.hasPrefix("l0-cell-up-netem-") == true }
        let outages = cellUp.filter { (($0["networkChaos"] as? [String: Any])?["loss"] as? [String: Any])?["loss"] as? String == "100" }
        #expect(outages.count == 1 && outages.first?["deadline"] as? String == "6s", "\(cellUp.map { $0["deadline"] ?? "" })")
        // A loss too small for Chaos Mesh's six decimals is its smallest, not zero.
        #expect(result.yaml.contains("loss: \"0.000001\""))
        #expect(result.notes.contains { $0.contains("smallest") })
        let mismatches = Self.mismatches(scenario, result, options: ChaosMeshExport.Options())
        #expect(mismatches.isEmpty, "\(mismatches.prefix(8).joined(separator: "\n"))")

        let flat = try #require(ScenarioReader.parse("""
            name: \(longName)
            duration: 20s
            nodes: { phone: {}, server: {} }
            links:
              - { name: cell, between: [phone, server], profile: lte }
              - { name: cell-2, between: [phone, server], profile: lte }
            """, file: "flat.yaml").scenario)
        let manifests = try documents(try ChaosMeshExport.export(flat, options: Self.tbf).yaml)
        let names = manifests.compactMap { ($0["metadata"] as? [String: Any])?["name"] as? String }
        #expect(Set(names).count == names.count && names.count == 8 && names.allSatisfy { $0.count <= 63 }, "\(names)")
        #expect(try violations(try ChaosMeshExport.export(flat, options: Self.tbf).yaml) == [])
        #expect(try documents(try ChaosMeshExport.export(flat).yaml).count == 4, "one object per side with the rate in netem")
    }

    @Test func twoLinksOnOneDeviceOfAPodAreRefused() throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/walk-out-of-home.yaml").scenario)
        var options = ChaosMeshExport.Options()
        options.devices = ["wifi": "eth0", "cell": "eth0"]
        let refusal = try #require(throws: ChaosMeshExport.Refusal.self) { try ChaosMeshExport.export(scenario, options: options) }
        #expect(refusal.message.contains("'wifi' and 'cell'") && refusal.message.contains("eth0") && refusal.message.contains("--device"))
        // One link on the pods' primary interface, the other on its own device, is faithful.
        options.devices = ["wifi": "eth0"]
        let result = try ChaosMeshExport.export(scenario, options: options)
        let mismatches = Self.mismatches(scenario, result, options: options)
        #expect(mismatches.isEmpty, "\(mismatches.prefix(8).joined(separator: "\n"))")
    }

    /// The semantics model catches what the old export did: a partition filtered by the
    /// peer's primary IP cuts every link between two pods, and a target on a second device
    /// shapes nothing.
    @Test func theModelSeesWhatAPartitionAndATargetDo() {
        let labels = ["phone": ["app": "phone"], "server": ["app": "server"]]
        let partition: [String: Any] = ["action": "partition", "direction": "to", "selector": ["labelSelectors": ["app": "phone"]],
                                        "target": ["selector": ["labelSelectors": ["app": "server"]]]]
        let onEth0 = ChaosMeshSemantics.egress(at: .zero, [.init(start: .zero, end: .seconds(1), spec: partition)], labels: labels)
        #expect(onEth0[ChaosMeshSemantics.Side(node: "phone", device: "eth0")]?.dropped == true)
        var targeted = partition
        targeted["device"] = "net1"
        targeted["action"] = "netem"
        targeted["delay"] = ["latency": "10ms"]
        let onNet1 = ChaosMeshSemantics.egress(at: .zero, [.init(start: .zero, end: .seconds(1), spec: targeted)], labels: labels)
        #expect(onNet1.isEmpty, "a target filter on a second device matches nothing")
        let jitterOnly: [String: Any] = ["action": "netem", "selector": ["labelSelectors": ["app": "phone"]], "delay": ["latency": "0ms", "jitter": "5ms"]]
        let dropped = ChaosMeshSemantics.egress(at: .zero, [.init(start: .zero, end: .seconds(1), spec: jitterOnly)], labels: labels)
        #expect(dropped[ChaosMeshSemantics.Side(node: "phone", device: "eth0")]?.jitter == .zero)
    }

    @Test func withoutATimelineEachSideAndKindIsOneNetworkChaos() throws {
        let scenario = try #require(ScenarioReader.parse("""
            name: Asymmetric-DSL
            duration: 10s
            nodes: { home: {}, isp: {} }
            links:
              - { name: dsl, between: [home, isp], profile: dsl, loss: { model: gilbert-elliott, p: 1%, r: 30% }, distribution: pareto, jitter: 1ms, limit: 50 }
            """, file: "dsl.yaml").scenario)
        let result = try ChaosMeshExport.export(scenario, options: Self.tbf)
        #expect(try violations(result.yaml) == [])
        let manifests = try documents(result.yaml)
        #expect(manifests.map { $0["kind"] as? String } == Array(repeating: "NetworkChaos", count: 4))
        #expect(manifests.map { ($0["metadata"] as? [String: Any])?["name"] as? String }
            == ["asymmetric-dsl-l0-dsl-up-netem", "asymmetric-dsl-l0-dsl-up-rate", "asymmetric-dsl-l0-dsl-down-netem", "asymmetric-dsl-l0-dsl-down-rate"])
        let specs = manifests.map { $0["spec"] as? [String: Any] ?? [:] }
        #expect(specs.allSatisfy { $0["direction"] as? String == "to" && $0["target"] == nil && $0["device"] as? String == "dsl" })
        #expect(((specs[0]["selector"] as? [String: Any])?["labelSelectors"] as? [String: String]) == ["app": "home"])
        #expect(((specs[2]["selector"] as? [String: Any])?["labelSelectors"] as? [String: String]) == ["app": "isp"])
        #expect((specs[1]["bandwidth"] as? [String: Any])?["rate"] as? String == "256kbit")
        #expect((specs[1]["bandwidth"] as? [String: Any])?["limit"] as? Int == 50 * 1514, "the scenario's queue limit in packets")
        #expect((specs[3]["bandwidth"] as? [String: Any])?["rate"] as? String == "2mbit")
        #expect((specs[0]["loss"] as? [String: Any])?["loss"] as? String == "3.225806", "Gilbert-Elliott's long-run loss, 1/31")
        for expected in ["Gilbert-Elliott", "distributions"] {
            #expect(result.notes.contains { $0.contains(expected) }, "a note on \(expected)")
        }
        let mismatches = Self.mismatches(scenario, result, options: Self.tbf)
        #expect(mismatches.isEmpty, "\(mismatches.prefix(8).joined(separator: "\n"))")
        // With the rate in netem: one object per side, carrying both.
        let byNetem = try documents(try ChaosMeshExport.export(scenario).yaml)
        #expect(byNetem.map { ($0["metadata"] as? [String: Any])?["name"] as? String } == ["asymmetric-dsl-l0-dsl-up-netem", "asymmetric-dsl-l0-dsl-down-netem"])
        #expect(((byNetem[0]["spec"] as? [String: Any])?["rate"] as? [String: Any])?["rate"] as? String == "256kbit")
    }

    static var tbf: ChaosMeshExport.Options {
        var options = ChaosMeshExport.Options()
        options.rateShaping = .tbf
        return options
    }

    @Test func traceDrivenCapacityIsItsMeanRateAndSaysSo() throws {
        let scenario = try #require(ScenarioReader.read(contentsOf: repository + "/scenarios/commuter-train.yaml").scenario)
        let result = try ChaosMeshExport.export(scenario)
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
        #expect(ChaosMeshExport.percent(1.0 / 31) == "3.225806")
        #expect(ChaosMeshExport.percent(1e-12) == "0.000001", "never zero")
        #expect(ChaosMeshExport.percent(0) == "0")
        #expect(ChaosMeshExport.dnsName("Walk Out_Of-Home!") == "walk-out-of-home")
    }
}
