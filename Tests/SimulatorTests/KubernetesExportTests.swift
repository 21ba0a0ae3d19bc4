import Foundation
import RoamCore
@testable import ScenarioModel
@testable import Simulator
import Testing
import Yams

private let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures").path

/// Kubernetes' OpenAPI v3 schemas for the kinds the export writes, vendored in
/// Tests/Fixtures/kubernetes (see SOURCE.md there), checked as the API server checks an object:
/// types, formats, enums, no unknown fields (`kubectl --validate=strict`), and required fields,
/// except at the top of a partial workload (an apply configuration for server-side apply,
/// merged into the workload that exists); what Roam adds (a container, a volume) is checked
/// whole.
struct KubernetesSchemas: @unchecked Sendable {  // immutable after init
    let schemas: [String: [String: Any]]

    static let shared: KubernetesSchemas? = {
        guard let data = FileManager.default.contents(atPath: fixtures + "/kubernetes/openapi-v1.35.json"),
              let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let schemas = (root["components"] as? [String: Any])?["schemas"] as? [String: [String: Any]] else { return nil }
        return KubernetesSchemas(schemas: schemas)
    }()

    static let kinds = ["ConfigMap": "io.k8s.api.core.v1.ConfigMap", "Deployment": "io.k8s.api.apps.v1.Deployment",
                        "StatefulSet": "io.k8s.api.apps.v1.StatefulSet", "DaemonSet": "io.k8s.api.apps.v1.DaemonSet"]

    /// Every violation of `object` (a whole object, or `partial`: an apply configuration).
    func violations(of object: [String: Any], partial: Bool) -> [String] {
        guard let kind = object["kind"] as? String, let name = Self.kinds[kind], let schema = schemas[name] else { return ["unknown kind \(object["kind"] ?? "none")"] }
        var problems: [String] = []
        check(object, schema, path: kind, required: !partial, into: &problems)
        return problems
    }

    private func resolved(_ schema: [String: Any]) -> [String: Any] {
        if let reference = schema["$ref"] as? String, let target = schemas[String(reference.split(separator: "/").last ?? "")] { return resolved(target) }
        if let all = schema["allOf"] as? [[String: Any]], all.count == 1 {
            var merged = resolved(all[0])
            for (key, value) in schema where key != "allOf" { merged[key] = value }
            return merged
        }
        return schema
    }

    private func check(_ value: Any, _ raw: [String: Any], path: String, required: Bool, into problems: inout [String]) {
        let schema = resolved(raw)
        if schema["x-kubernetes-int-or-string"] as? Bool == true {
            if !(value is Int || value is String) { problems.append("\(path): expected an integer or a string") }
            return
        }
        // A Quantity is a string (or a number) in the API's own syntax.
        if schema["type"] as? String == "string", schema["format"] as? String == "quantity" || path.hasSuffix("Quantity") {
            return
        }
        switch schema["type"] as? String {
        case "object":
            guard let object = value as? [String: Any] else { problems.append("\(path): expected an object, got \(type(of: value))"); return }
            if required {
                for key in (schema["required"] as? [String]) ?? [] where object[key] == nil { problems.append("\(path): missing required field '\(key)'") }
            }
            let properties = schema["properties"] as? [String: Any]
            for (key, member) in object {
                if let property = properties?[key] as? [String: Any] {
                    // Below the top of a partial object, what is written is written whole.
                    check(member, property, path: "\(path).\(key)", required: required || !(member is [String: Any]), into: &problems)
                } else if let additional = schema["additionalProperties"] as? [String: Any] {
                    check(member, additional, path: "\(path).\(key)", required: true, into: &problems)
                } else {
                    problems.append("\(path): unknown field '\(key)'")
                }
            }
        case "array":
            guard let array = value as? [Any] else { problems.append("\(path): expected an array"); return }
            if let items = schema["items"] as? [String: Any] {
                for (index, item) in array.enumerated() { check(item, items, path: "\(path)[\(index)]", required: true, into: &problems) }
            }
        case "string":
            guard let string = value as? String else { problems.append("\(path): expected a string, got \(value)"); return }
            if let options = schema["enum"] as? [Any], !options.contains(where: { "\($0)" == string }) {
                problems.append("\(path): '\(string)' is not one of \(options.map { "\($0)" })")
            }
        case "integer":
            guard let integer = value as? Int, !(value is Bool) else { problems.append("\(path): expected an integer, got \(value)"); return }
            if schema["format"] as? String == "int32", !(Int(Int32.min)...Int(Int32.max)).contains(integer) { problems.append("\(path): not an int32") }
            if schema["format"] as? String == "int64", integer < Int(Int64.min) { problems.append("\(path): not an int64") }
        case "boolean":
            if !(value is Bool) { problems.append("\(path): expected a boolean, got \(value)") }
        case "number":
            if !(value is Int || value is Double) { problems.append("\(path): expected a number") }
        default:
            break
        }
    }
}

/// What the API server checks beyond the schema, for the fields Roam writes (apimachinery's
/// validation: DNS names, label syntax, ConfigMap keys and size; core's: container and volume
/// names, mounts of volumes that exist, a sidecar's restart policy, capability names, env names).
func apiServerViolations(_ documents: [[String: Any]]) -> [String] {
    var problems: [String] = []
    func matches(_ text: String, _ pattern: String) -> Bool { text.range(of: pattern, options: .regularExpression) != nil }
    let label = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    var configMaps: [String: Set<String>] = [:]
    for document in documents where document["kind"] as? String == "ConfigMap" {
        let metadata = document["metadata"] as? [String: Any] ?? [:]
        let name = metadata["name"] as? String ?? ""
        let data = document["data"] as? [String: String] ?? [:]
        configMaps[name] = Set(data.keys)
        if !KubernetesExport.isSubdomain(name) { problems.append("ConfigMap name '\(name)'") }
        for key in data.keys where !matches(key, "^[-._a-zA-Z0-9]+$") || key.count > 253 { problems.append("ConfigMap key '\(key)'") }
        if data.reduce(0, { $0 + $1.key.utf8.count + $1.value.utf8.count }) > KubernetesExport.configMapLimit { problems.append("ConfigMap \(name) over 1 MiB") }
        for (key, value) in metadata["labels"] as? [String: String] ?? [:] where !ExportLabels.isKey(key) || !ExportLabels.isValue(value) {
            problems.append("label \(key)=\(value)")
        }
    }
    for document in documents where document["kind"] as? String != "ConfigMap" {
        let metadata = document["metadata"] as? [String: Any] ?? [:]
        if let name = metadata["name"] as? String, !KubernetesExport.isSubdomain(name) { problems.append("workload name '\(name)'") }
        if let namespace = metadata["namespace"] as? String, !matches(namespace, label) || namespace.count > 63 { problems.append("namespace '\(namespace)'") }
        guard let pod = ((document["spec"] as? [String: Any])?["template"] as? [String: Any])?["spec"] as? [String: Any] else { continue }
        let volumes = pod["volumes"] as? [[String: Any]] ?? []
        let volumeNames = volumes.compactMap { $0["name"] as? String }
        for name in volumeNames where !matches(name, label) || name.count > 63 { problems.append("volume name '\(name)'") }
        if Set(volumeNames).count != volumeNames.count { problems.append("volume names repeat") }
        for volume in volumes {
            if let reference = (volume["configMap"] as? [String: Any])?["name"] as? String, configMaps[reference] == nil { problems.append("volume of a ConfigMap not exported: \(reference)") }
        }
        for container in pod["initContainers"] as? [[String: Any]] ?? [] {
            let name = container["name"] as? String ?? ""
            if !matches(name, label) || name.count > 63 { problems.append("container name '\(name)'") }
            if let policy = container["restartPolicy"] as? String, policy != "Always" { problems.append("an init container's restartPolicy is Always or unset") }
            for mount in container["volumeMounts"] as? [[String: Any]] ?? [] where !volumeNames.contains(mount["name"] as? String ?? "") {
                problems.append("mount of a volume that does not exist: \(mount["name"] ?? "")")
            }
            for variable in container["env"] as? [[String: Any]] ?? [] {
                let name = variable["name"] as? String ?? ""
                if !matches(name, "^[-._a-zA-Z][-._a-zA-Z0-9]*$") { problems.append("env name '\(name)'") }
                if let reference = ((variable["valueFrom"] as? [String: Any])?["configMapKeyRef"] as? [String: Any]),
                   configMaps[reference["name"] as? String ?? ""]?.contains(reference["key"] as? String ?? "") != true {
                    problems.append("env \(name) refers to a ConfigMap key not exported")
                }
            }
            let capabilities = (container["securityContext"] as? [String: Any])?["capabilities"] as? [String: Any] ?? [:]
            for capability in (capabilities["add"] as? [String] ?? []) + (capabilities["drop"] as? [String] ?? []) where !matches(capability, "^[A-Z_]+$") {
                problems.append("capability '\(capability)'")
            }
            for (kind, values) in (container["resources"] as? [String: Any] ?? [:]) {
                for (resource, quantity) in values as? [String: Any] ?? [:] where !matches("\(quantity)", "^[0-9]+(\\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$") {
                    problems.append("resources.\(kind).\(resource) '\(quantity)' is not a quantity")
                }
            }
        }
    }
    return problems
}

/// Label syntax, as the export command checks it.
enum ExportLabels {
    static func isValue(_ text: String) -> Bool {
        text.isEmpty || (text.count <= 63 && text.range(of: "^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", options: .regularExpression) != nil)
    }
    static func isKey(_ text: String) -> Bool {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count <= 2, let name = parts.last, !name.isEmpty, isValue(name) else { return false }
        return parts.count == 1 || KubernetesExport.isSubdomain(parts[0])
    }
}

@Suite struct KubernetesExportTests {
    let schemas = KubernetesSchemas.shared

    func exported(_ path: String, _ configure: (inout KubernetesExport.Options) -> Void = { _ in }, remove: Bool = false) throws -> (KubernetesExport.Result, [[String: Any]], String) {
        let source = try String(contentsOfFile: path, encoding: .utf8)
        let scenario = try #require(ScenarioReader.parse(source, file: path).scenario)
        var options = KubernetesExport.Options(image: "registry.example/roam:0.4", startAt: 1_800_000_000)
        configure(&options)
        let result = try KubernetesExport.export(scenario, source: source, options: options, remove: remove)
        let documents = try Yams.load_all(yaml: result.yaml).compactMap { $0 as? [String: Any] }
        return (result, documents, source)
    }

    @Test func theVendoredSchemasLoad() throws {
        let schemas = try #require(schemas)
        for name in KubernetesSchemas.kinds.values { #expect(schemas.schemas[name] != nil, "\(name)") }
        #expect(schemas.schemas.count > 100)
    }

    /// roam attach plays a trace, but the ConfigMap holds the scenario file alone (below).
    static let exportable = AttachTests.attachable.filter { path in ScenarioReader.read(contentsOf: path).scenario?.firstTracedLink == nil }

    @Test(arguments: exportable)
    func everyAttachableScenarioExportsToValidManifests(_ path: String) throws {
        let schemas = try #require(schemas)
        for variant in 0..<3 {
            let (result, documents, source) = try exported(path) { options in
                if variant == 1 { options.devices = ["wifi": "net1", "cell": "net2", "phone/wifi": "eth0"] }
                if variant == 2 { options.namespace = "mobility-tests"; options.workloads = ["phone": .init(kind: .statefulset, name: "phone-app")] }
            }
            #expect(result.manifests == documents.count)
            let configMap = try #require(documents.first)
            #expect(configMap["kind"] as? String == "ConfigMap")
            #expect(schemas.violations(of: configMap, partial: false).isEmpty, "\(schemas.violations(of: configMap, partial: false))")
            // The ConfigMap holds the file as written, and it reads back as the same scenario.
            let data = try #require(configMap["data"] as? [String: String])
            #expect(data["scenario.yaml"] == source)
            #expect(ScenarioReader.parse(data["scenario.yaml"]!, file: path).scenario == ScenarioReader.parse(source, file: path).scenario)
            #expect(data["start-at"] == "1800000000")
            for workload in documents.dropFirst() {
                let problems = schemas.violations(of: workload, partial: true)
                #expect(problems.isEmpty, "\(path) variant \(variant): \(problems)")
            }
            #expect(apiServerViolations(documents).isEmpty, "\(apiServerViolations(documents))")
            // Removal: the same workloads, with nothing of Roam's (server-side apply then takes it out).
            let (_, removal, _) = try exported(path, remove: true)
            #expect(removal.allSatisfy { $0["kind"] as? String != "ConfigMap" && $0["spec"] == nil })
            for workload in removal { #expect(schemas.violations(of: workload, partial: true).isEmpty) }
        }
    }

    @Test func theSidecarPlaysItsNodeWithNetAdminAloneAndKeepsItsReport() throws {
        let path = try #require(bundledScenarios.first { $0.hasSuffix("walk-out-of-home.yaml") })
        let (_, documents, _) = try exported(path) { $0.devices = ["wifi": "net1", "cell": "net2"] }
        let phone = try #require(documents.first { ($0["metadata"] as? [String: Any])?["name"] as? String == "phone" })
        #expect(phone["kind"] as? String == "Deployment")
        let pod = try #require((((phone["spec"] as? [String: Any])?["template"] as? [String: Any])?["spec"]) as? [String: Any])
        #expect(pod["containers"] == nil, "the app's containers are the workload's own")
        // Roam owns `hostNetwork: false`: a workload on the node's network is refused by server-side
        // apply as a conflict, rather than having its sidecar shape the node's interfaces.
        #expect(pod["hostNetwork"] as? Bool == false)
        let sidecar = try #require((pod["initContainers"] as? [[String: Any]])?.first)
        #expect(sidecar["restartPolicy"] as? String == "Always")
        let security = try #require(sidecar["securityContext"] as? [String: Any])
        let capabilities = try #require(security["capabilities"] as? [String: Any])
        #expect(capabilities["add"] as? [String] == ["NET_ADMIN"] && capabilities["drop"] as? [String] == ["ALL"])
        #expect(security["privileged"] == nil && security["allowPrivilegeEscalation"] as? Bool == false)
        let command = try #require(sidecar["command"] as? [String])
        #expect(command.prefix(2) == ["/bin/sh", "-c"])
        let script = command[2]
        #expect(script.contains("roam attach /etc/roam/scenario.yaml --node phone --start-at \"$ROAM_START_AT\" --report /var/roam/report/phone --quiet --device phone/wifi=net1 --device phone/cell=net2 &"))
        // Stopped (the pod ends): roam is stopped and its status noted; ended: noted, and the report kept.
        #expect(script.contains("trap 'if [ -z \"$ended\" ]; then kill -TERM \"$roam\" 2>/dev/null; wait \"$roam\"; echo $? > /var/roam/report/exit; fi; exit 0' TERM INT"))
        #expect(script.contains("wait \"$roam\"; echo $? > /var/roam/report/exit; ended=1"))
        // The script is sh: it parses.
        let parsed = try shCheck(script)
        #expect(parsed.status == 0, "\(parsed.error)")
    }

    func shCheck(_ script: String) throws -> (status: Int32, error: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-n", "-c", script]
        let error = Pipe()
        process.standardError = error
        try process.run()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    @Test func theValidatorSeesWhatTheAPIServerWouldRefuse() throws {
        let schemas = try #require(schemas)
        let path = try #require(bundledScenarios.first { $0.hasSuffix("walk-out-of-home.yaml") })
        let (_, documents, _) = try exported(path)
        var workload = documents[1]
        func mutate(_ body: (inout [String: Any]) -> Void) -> [String: Any] {
            var copy = workload
            var spec = copy["spec"] as! [String: Any], template = spec["template"] as! [String: Any], pod = template["spec"] as! [String: Any]
            var sidecar = (pod["initContainers"] as! [[String: Any]])[0]
            body(&sidecar)
            pod["initContainers"] = [sidecar]
            template["spec"] = pod; spec["template"] = template; copy["spec"] = spec
            return copy
        }
        #expect(!schemas.violations(of: mutate { $0["restartPolicyy"] = "Always" }, partial: true).isEmpty, "an unknown field")
        #expect(!schemas.violations(of: mutate { $0.removeValue(forKey: "name") }, partial: true).isEmpty, "a container without a name")
        #expect(!schemas.violations(of: mutate { $0["command"] = "sh" }, partial: true).isEmpty, "a string for a list")
        #expect(!schemas.violations(of: mutate { $0["securityContext"] = ["runAsUser": "0"] }, partial: true).isEmpty, "a string for an integer")
        #expect(!apiServerViolations([documents[0], mutate { $0["name"] = "Roam_Sidecar" }]).isEmpty, "a container name")
        #expect(!apiServerViolations([mutate { $0["image"] = "x" }]).isEmpty, "a ConfigMap that is not exported")
        workload["metadata"] = ["name": "phone-"]
        #expect(!apiServerViolations([documents[0], workload]).isEmpty, "a name ending in '-'")
        var configMap = documents[0]
        configMap["data"] = ["scenario yaml": "x"]
        #expect(!apiServerViolations([configMap]).isEmpty, "a key with a space")
        #expect(!schemas.violations(of: ["kind": "ConfigMap", "apiVersion": "v1", "metadata": ["name": "x"], "data": ["a": 1]], partial: false).isEmpty)
    }

    @Test func namesStayKubernetesNames() throws {
        // A 64-character scenario name whose 58th character is '-' must not give a name ending in '-'.
        let name = String(repeating: "a", count: 57) + "-" + String(repeating: "b", count: 6)
        var scenario = try walkOutOfHome()
        scenario.name = name
        let source = try String(contentsOfFile: try #require(bundledScenarios.first { $0.hasSuffix("walk-out-of-home.yaml") }), encoding: .utf8)
        let result = try KubernetesExport.export(scenario, source: source, options: .init(image: "roam", startAt: 1))
        let documents = try Yams.load_all(yaml: result.yaml).compactMap { $0 as? [String: Any] }
        let configMap = try #require((documents[0]["metadata"] as? [String: Any])?["name"] as? String)
        #expect(configMap.count <= 63 && !configMap.hasSuffix("-") && KubernetesExport.isSubdomain(configMap), "\(configMap)")
        #expect(apiServerViolations(documents).isEmpty)
    }

    @Test func whatAPodCannotPlayIsRefused() throws {
        let networks = try #require(bundledScenarios.first { $0.hasSuffix("coffee-shop-to-lte.yaml") })
        #expect(throws: KubernetesExport.Refusal.self) { try exported(networks) }
        let traced = try #require(bundledScenarios.first { $0.hasSuffix("commuter-train.yaml") })
        let tracedScenario = try #require(ScenarioReader.read(contentsOf: traced).scenario)
        let trace = #expect(throws: KubernetesExport.Refusal.self) {
            try KubernetesExport.export(tracedScenario, source: try String(contentsOfFile: traced, encoding: .utf8), options: .init(image: "roam", startAt: 1))
        }
        #expect(trace?.message.contains("link 'cell' takes its capacity from a trace file, which the ConfigMap") == true, "\(String(describing: trace))")
        #expect(Self.exportable.count == AttachTests.attachable.count - 1)
        let path = try #require(bundledScenarios.first { $0.hasSuffix("walk-out-of-home.yaml") })
        let sameInterface = #expect(throws: KubernetesExport.Refusal.self) { try exported(path) { $0.devices = ["wifi": "eth0", "cell": "eth0"] } }
        #expect(sameInterface?.message.contains("links 'wifi' and 'cell' would both be the interface 'eth0' in the pods of node 'phone'") == true)
        let badName = #expect(throws: KubernetesExport.Refusal.self) { try exported(path) { $0.workloads = ["phone": .init(kind: .deployment, name: "Phone_1")] } }
        #expect(badName?.message.contains("is not a Kubernetes name") == true)
    }
}
