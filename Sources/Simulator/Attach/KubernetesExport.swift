import RoamCore
import ScenarioModel

/// A scenario as Kubernetes manifests that play it with Roam itself: `roam attach` as a sidecar
/// in each pod of each node, on the pod's own interfaces, with the netem backend and timeline
/// player `roam run` uses (so what a pod's links do is what `roam run` does to the same links).
/// Kubernetes does the distribution; Roam does not invent its own.
///
/// The output, for `kubectl apply --server-side --field-manager=roam -f`:
/// - a `ConfigMap` `roam-NAME` holding the scenario file as written and the common time zero
///   (`start-at`, seconds since the epoch);
/// - for each node that is an end of a link, its workload (a Deployment by default), partial:
///   only what Roam adds to its pod template, a native sidecar (an init container with
///   `restartPolicy: Always`, Kubernetes 1.29 and later) named `roam` that runs `roam attach
///   --node NODE`, as uid 0 with the capability `NET_ADMIN` and no other, the ConfigMap mounted,
///   and an `emptyDir` for its report. Server-side apply merges it into the workload, which must
///   exist; applied again without these fields (``remove``), it takes them out.
///
/// Each pod plays its node's ends of its links: what the pod sends on each. The report of each
/// pod is in its sidecar: its log (`kubectl logs POD -c roam`) and its report directory, which
/// stays until the pod ends (`kubectl cp NS/POD:/var/roam/report ./DIR -c roam`).
package enum KubernetesExport {
    package enum WorkloadKind: String, Sendable, CaseIterable {
        case deployment, statefulset, daemonset

        var kind: String {
            switch self {
            case .deployment: "Deployment"
            case .statefulset: "StatefulSet"
            case .daemonset: "DaemonSet"
            }
        }
    }

    package struct Workload: Sendable, Hashable {
        package var kind: WorkloadKind
        package var name: String
        package init(kind: WorkloadKind, name: String) {
            self.kind = kind
            self.name = name
        }
    }

    package struct Options: Sendable {
        /// The Kubernetes namespace of the manifests and the workloads.
        package var namespace = "default"
        /// The image with `roam` in its `PATH`, and `/bin/sh` (see docs/cli.md).
        package var image: String
        /// Each node's workload; a node without one is the Deployment named after it.
        package var workloads: [String: Workload] = [:]
        /// Interface names in the pods, by `LINK` or `NODE/LINK` (as `roam attach --device`).
        package var devices: [String: String] = [:]
        /// Time zero, in seconds since the epoch.
        package var startAt: Int64
        /// Where the report is written in the sidecar.
        package static let reportDirectory = "/var/roam/report"

        package init(image: String, startAt: Int64) {
            self.image = image
            self.startAt = startAt
        }

        func workload(of node: String) -> Workload { workloads[node] ?? Workload(kind: .deployment, name: node) }
        func device(link: String, node: String) -> String { devices["\(node)/\(link)"] ?? devices[link] ?? link }
    }

    package struct Result: Sendable {
        package var yaml: String
        package var notes: [String]
        package var manifests: Int
    }

    package struct Refusal: Error, Sendable, CustomStringConvertible {
        package var message: String
        package var description: String { message }
    }

    /// The most a ConfigMap may hold (the API server's limit on its data).
    package static let configMapLimit = 1 << 20

    /// The manifests for `scenario`, read from `source` (the file's text, which the ConfigMap
    /// holds as written). `remove` gives the manifests that take Roam out again.
    package static func export(_ scenario: Scenario, source: String, options: Options, remove: Bool = false) throws(Refusal) -> Result {
        var problems = ScenarioAttacher.problems(scenario)
        // roam attach steps a trace's rate, but reads the trace's file beside the scenario: the
        // ConfigMap holds the scenario file alone.
        if let link = scenario.firstTracedLink {
            problems.append("link '\(link.name)' takes its capacity from a trace file, which the ConfigMap (the scenario file alone) does not carry; "
                + "give the link a rate (its mean is in `roam import mahimahi`'s comments), or run roam attach where the trace is")
        }
        guard problems.isEmpty else {
            throw Refusal(message: "the scenario cannot be played by roam attach in pods: " + problems.joined(separator: "; "))
        }
        guard source.utf8.count < configMapLimit - 4096 else {
            throw Refusal(message: "the scenario file is \(source.utf8.count) bytes; a ConfigMap holds at most 1 MiB")
        }
        var notes: [String] = []
        // Two links on one interface of a node's pods would shape the same traffic twice.
        var seen: [String: String] = [:]
        for link in scenario.links {
            for node in [link.endpoints.0, link.endpoints.1] {
                let key = node + "\u{0}" + options.device(link: link.name, node: node)
                if let other = seen[key] {
                    throw Refusal(message: "links '\(other)' and '\(link.name)' would both be the interface '\(options.device(link: link.name, node: node))' "
                        + "in the pods of node '\(node)'; give each link an interface of its own (--device \(link.name)=IFACE, e.g. a Multus attachment)")
                }
                seen[key] = link.name
            }
            if options.devices[link.name] == nil && options.devices["\(link.endpoints.0)/\(link.name)"] == nil {
                notes.append("link '\(link.name)' is the interface '\(link.name)' in the pods of \(link.endpoints.0) and \(link.endpoints.1): name the pods' "
                    + "interface with --device \(link.name)=IFACE (eth0, or a Multus attachment such as net1)")
            }
        }
        let base = ChaosMeshExport.dnsName(scenario.name)
        let configMap = "roam-" + trimmed(base, to: 58)
        let nodes = scenario.nodes.map(\.name).filter { node in scenario.links.contains { $0.endpoints.0 == node || $0.endpoints.1 == node } }
        var documents: [JSONValue] = []
        if !remove {
            documents.append(.object([
                ("apiVersion", "v1"), ("kind", "ConfigMap"),
                ("metadata", metadata(configMap, options)),
                ("data", .object([("scenario.yaml", .string(source)), ("start-at", .string(String(options.startAt)))])),
            ]))
        }
        for node in nodes {
            let workload = options.workload(of: node)
            guard isSubdomain(workload.name) else {
                throw Refusal(message: "node '\(escapedForMessage(node))' would be the \(workload.kind.kind) '\(escapedForMessage(workload.name))', which is not a "
                    + "Kubernetes name (lower-case letters, digits, '-' and '.', at most 253); name its workload with --workload \(node)=deployment/NAME")
            }
            var object: [(String, JSONValue)] = [
                ("apiVersion", "apps/v1"), ("kind", .string(workload.kind.kind)),
                ("metadata", .object([("name", .string(workload.name)), ("namespace", .string(options.namespace))])),
            ]
            if !remove {
                object.append(("spec", .object([("template", .object([("spec", .object([
                    // A pod on the node's network has no namespace of its own to play: Roam owns
                    // `hostNetwork: false`, so server-side apply refuses a workload that sets it
                    // true as a conflict on this field (and the sidecar refuses the node's
                    // namespace at run time).
                    ("hostNetwork", false),
                    ("initContainers", .array([sidecar(node: node, scenario: scenario, configMap: configMap, options: options)])),
                    ("volumes", .array([
                        .object([("name", "roam-scenario"), ("configMap", .object([("name", .string(configMap))]))]),
                        .object([("name", "roam-report"), ("emptyDir", .object([]))]),
                    ])),
                ]))]))])))
            }
            documents.append(.object(object))
        }
        var yaml = "# Kubernetes manifests for the Roam scenario '\(escapedForMessage(scenario.name))' (roam export --format kubernetes\(remove ? " --remove" : "")).\n"
        if remove {
            yaml += "# Apply with the same field manager to take Roam's sidecar out of each workload:\n"
            yaml += "#   kubectl apply --server-side --field-manager=roam -f THIS_FILE; kubectl delete configmap -n \(options.namespace) \(configMap)\n"
        } else {
            yaml += "# Apply with server-side apply, which merges the sidecar into each workload (they must exist; Kubernetes 1.29+):\n"
            yaml += "#   kubectl apply --server-side --field-manager=roam -f THIS_FILE\n"
            yaml += "# Time zero: \(options.startAt) (seconds since the epoch); pods that start later wait for it, pods that start after it\n"
            yaml += "# refuse to play (change start-at in the ConfigMap, then kubectl rollout restart the workloads).\n"
            yaml += "# Each pod's report: kubectl logs POD -n \(options.namespace) -c roam; kubectl cp \(options.namespace)/POD:\(Options.reportDirectory) ./report -c roam\n"
        }
        for note in notes { yaml += "# note: \(escapedForMessage(note, maximumLength: 4096))\n" }
        yaml += documents.map { "---\n" + YAMLEmitter.document($0) }.joined()
        return Result(yaml: yaml, notes: notes, manifests: documents.count)
    }

    /// The `roam` sidecar of `node`'s pods.
    static func sidecar(node: String, scenario: Scenario, configMap: String, options: Options) -> JSONValue {
        var attach = ["roam", "attach", "/etc/roam/scenario.yaml", "--node", shellQuoted(node), "--start-at", "\"$ROAM_START_AT\"",
                      "--report", shellQuoted(Options.reportDirectory + "/" + node), "--quiet"]
        for link in scenario.links where link.endpoints.0 == node || link.endpoints.1 == node {
            let device = options.device(link: link.name, node: node)
            if device != link.name { attach += ["--device", shellQuoted("\(node)/\(link.name)=\(device)")] }
        }
        // sh is the container's first process: it passes SIGTERM on to roam (which then restores
        // the interfaces and writes its report), notes roam's exit status, and keeps the report
        // readable until the pod ends.
        let exit = Options.reportDirectory + "/exit"
        let script = """
            trap 'if [ -z "$ended" ]; then kill -TERM "$roam" 2>/dev/null; wait "$roam"; echo $? > \(exit); fi; exit 0' TERM INT
            \(attach.joined(separator: " ")) &
            roam=$!
            wait "$roam"; echo $? > \(exit); ended=1
            while :; do sleep 3600 & wait $!; done
            """
        return .object([
            ("name", "roam"),
            ("image", .string(options.image)),
            ("imagePullPolicy", "IfNotPresent"),
            ("restartPolicy", "Always"),
            ("command", .array(["/bin/sh", "-c", .string(script)])),
            ("env", .array([.object([("name", "ROAM_START_AT"), ("valueFrom", .object([("configMapKeyRef", .object([
                ("name", .string(configMap)), ("key", "start-at")]))]))])])),
            ("securityContext", .object([
                ("runAsUser", .int(0)), ("runAsNonRoot", false), ("allowPrivilegeEscalation", false), ("readOnlyRootFilesystem", true),
                ("capabilities", .object([("drop", .array(["ALL"])), ("add", .array(["NET_ADMIN"]))])),
            ])),
            ("resources", .object([("requests", .object([("cpu", "10m"), ("memory", "32Mi")])), ("limits", .object([("memory", "256Mi")]))])),
            ("volumeMounts", .array([
                .object([("name", "roam-scenario"), ("mountPath", "/etc/roam"), ("readOnly", true)]),
                .object([("name", "roam-report"), ("mountPath", .string(Options.reportDirectory))]),
            ])),
        ])
    }

    static func metadata(_ name: String, _ options: Options) -> JSONValue {
        .object([("name", .string(name)), ("namespace", .string(options.namespace)),
                 ("labels", .object([("app.kubernetes.io/managed-by", "roam")]))])
    }

    /// A DNS-1123 subdomain, as Kubernetes names most objects.
    package static func isSubdomain(_ text: String) -> Bool {
        guard (1...253).contains(text.utf8.count) else { return false }
        return text.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            let scalars = Array(label.unicodeScalars)
            func alphanumeric(_ scalar: Unicode.Scalar) -> Bool { ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) }
            return (1...63).contains(scalars.count) && alphanumeric(scalars.first!) && alphanumeric(scalars.last!)
                && scalars.allSatisfy { alphanumeric($0) || $0 == "-" }
        }
    }

    /// `text` cut to `length`, without a trailing `-` (a DNS label ends alphanumeric).
    static func trimmed(_ text: String, to length: Int) -> String {
        var head = String(text.prefix(length))
        while head.hasSuffix("-") { head.removeLast() }
        return head
    }

    /// `text` as one word for sh: in single quotes unless it needs none.
    static func shellQuoted(_ text: String) -> String {
        if !text.isEmpty, text.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "/=._-".unicodeScalars.contains($0)) }) {
            return text
        }
        return "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
