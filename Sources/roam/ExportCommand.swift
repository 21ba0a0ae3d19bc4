import ArgumentParser
import Glibc
import Netlink
import RoamReport
import RoamCore
import RoamSystem
import ScenarioModel
import Simulator

/// `roam export --format chaos-mesh FILE`: a scenario as manifests for another tool.
struct ExportCommand: ParsableCommand {
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case chaosMesh = "chaos-mesh"
        case kubernetes
    }

    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Turn a scenario's links and timeline into Kubernetes manifests: Roam itself as a sidecar, or Chaos Mesh.",
        discussion: """
            --format kubernetes (exact: Roam plays the scenario): a ConfigMap with the scenario and a common time zero \
            (--start-at SECONDS since the epoch, or --start-in DURATION from now, default 2m), and for each node its \
            workload (--workload NODE=deployment|statefulset|daemonset/NAME; default deployment/NODE), partial, for \
            `kubectl apply --server-side --field-manager=roam`: a native sidecar running `roam attach --node NODE` from \
            --image with only NET_ADMIN, on the pods' interfaces (--device LINK=IFACE or NODE/LINK=IFACE); --remove \
            writes what takes it out again. \
            --format chaos-mesh (Chaos Mesh's own engine, with its limits): each node is a set of pods (--select NODE=KEY=VALUE[,KEY=VALUE]; default app=NODE); each link is a \
            network device of its own in both nodes' pods (default: named after the link, e.g. a Multus \
            attachment; --device LINK=DEVICE), and each direction shapes the sending side's device: netem for \
            delay and loss, a bandwidth (tbf) object for the rate and its queue, 100% loss for carrier loss and \
            blackholes. Without a timeline: NetworkChaos manifests; with one: a Workflow that plays it. What \
            Chaos Mesh cannot express is exported as closely as it allows and listed as notes, on standard \
            error and as comments in the output; two links on one device of a node's pods are refused.
            """
    )

    @Option(help: "The output format.")
    var format: Format = .chaosMesh

    @Argument(help: ArgumentHelp("The scenario file.", valueName: "file"))
    var file: String

    @Option(help: "The Kubernetes namespace of the manifests and the pods.")
    var namespace = "default"

    @Option(name: .customLong("select"), help: ArgumentHelp("A node's pods: NODE=KEY=VALUE[,KEY=VALUE...] (repeatable).", valueName: "node=labels"))
    var selectors: [String] = []

    @Option(name: .customLong("device"), help: ArgumentHelp("A link's network device in its nodes' pods: LINK=DEVICE (repeatable; default: the link's name).", valueName: "link=device"))
    var devices: [String] = []

    @Option(help: ArgumentHelp("Merge ramp steps closer than this (a duration, default 1s).", valueName: "duration"))
    var resolution = "1s"

    @Option(name: [.short, .long], help: ArgumentHelp("Write the manifests here instead of standard output.", valueName: "file"))
    var output: String?

    @Option(name: .customLong("chaos-mesh-version"), help: ArgumentHelp("chaos-mesh: the Chaos Mesh release the cluster runs (2.8.0 or later; default \(ChaosMeshExport.defaultVersion)).", valueName: "version"))
    var chaosMeshVersion: String?

    @Option(name: .customLong("chaos-mesh-rate"), help: ArgumentHelp("chaos-mesh: how rates are shaped: netem (netem's own rate in each side's one object: a fixed qdisc order, netem's 1000-packet queue; the default) or tbf (a bandwidth object with Roam's queue, which holds only where Chaos Mesh applies netem first).", valueName: "netem|tbf"))
    var chaosMeshRate: String?

    @Option(help: ArgumentHelp("kubernetes: the image with roam in its PATH and /bin/sh (see docs/cli.md).", valueName: "image"))
    var image: String?

    @Option(name: .customLong("workload"), help: ArgumentHelp("kubernetes: a node's workload, NODE=KIND/NAME (KIND: deployment, statefulset or daemonset; default deployment/NODE).", valueName: "node=kind/name"))
    var workloads: [String] = []

    @Option(name: .customLong("start-at"), help: ArgumentHelp("kubernetes: time zero in seconds since the epoch (`date +%s`).", valueName: "seconds"))
    var startAt: Int64?

    @Option(name: .customLong("start-in"), help: ArgumentHelp("kubernetes: time zero this long from now (default 2m).", valueName: "duration"))
    var startIn: String?

    @Flag(help: "kubernetes: the manifests that take Roam's sidecar out of the workloads again.")
    var remove = false

    /// A label value: empty, or at most 63 of `[A-Za-z0-9_.-]`, starting and ending alphanumeric.
    static func isLabelValue(_ text: String) -> Bool {
        if text.isEmpty { return true }
        let scalars = Array(text.unicodeScalars)
        func alphanumeric(_ scalar: Unicode.Scalar) -> Bool { scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)) }
        return scalars.count <= 63 && alphanumeric(scalars.first!) && alphanumeric(scalars.last!)
            && scalars.allSatisfy { alphanumeric($0) || $0 == "-" || $0 == "_" || $0 == "." }
    }

    /// A label key: an optional DNS-subdomain prefix and `/`, then a name as a value (not empty).
    static func isLabelKey(_ text: String) -> Bool {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let name = parts.last, !name.isEmpty, isLabelValue(String(name)) else { return false }
        if parts.count == 2 {
            let prefix = parts[0]
            guard !prefix.isEmpty, prefix.utf8.count <= 253 else { return false }
            return prefix.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
                !label.isEmpty && isLabelValue(String(label)) && !label.contains("_")
            }
        }
        return true
    }

    func run() throws {
        if format == .kubernetes { return try runKubernetes() }
        for (flag, given) in [("--image", image != nil), ("--workload", !workloads.isEmpty), ("--start-at", startAt != nil), ("--start-in", startIn != nil), ("--remove", remove)] where given {
            throw ValidationError("\(flag) is for --format kubernetes")
        }
        let scenario = try ScenarioCommand.read(file)
        var options = ChaosMeshExport.Options()
        let scalars = Array(namespace.unicodeScalars)
        func labelCharacter(_ scalar: Unicode.Scalar) -> Bool { ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) }
        guard (1...63).contains(scalars.count), labelCharacter(scalars.first!), labelCharacter(scalars.last!),
              scalars.allSatisfy({ labelCharacter($0) || $0 == "-" }) else {
            throw ValidationError("--namespace \(escapedForMessage(namespace)): a Kubernetes namespace is 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit")
        }
        options.namespace = namespace
        let nodes = Set(scenario.nodes.map(\.name)), links = Set(scenario.links.map(\.name))
        for selector in selectors {
            let parts = selector.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, nodes.contains(parts[0]) else {
                throw ValidationError("--select \(escapedForMessage(selector)): expected NODE=KEY=VALUE with one of the nodes \(nodes.sorted().joined(separator: ", "))")
            }
            var labels: [String: String] = [:]
            for pair in parts[1].split(separator: ",") {
                let keyValue = pair.split(separator: "=", maxSplits: 1).map(String.init)
                guard keyValue.count == 2, !keyValue[0].isEmpty else {
                    throw ValidationError("--select \(escapedForMessage(selector)): '\(escapedForMessage(pair))' is not KEY=VALUE")
                }
                guard Self.isLabelKey(keyValue[0]), Self.isLabelValue(keyValue[1]) else {
                    throw ValidationError("--select \(escapedForMessage(selector)): '\(escapedForMessage(pair))' is not a Kubernetes label: keys and values are "
                        + "at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit (a key may have a DNS prefix and '/')")
                }
                labels[keyValue[0]] = keyValue[1]
            }
            options.selectors[parts[0]] = labels
        }
        for device in devices {
            let parts = device.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, links.contains(parts[0]), !parts[1].isEmpty else {
                throw ValidationError("--device \(escapedForMessage(device)): expected LINK=DEVICE with one of the links \(links.sorted().joined(separator: ", "))")
            }
            // An interface name: 1 to 15 bytes, no '/', ':' or white space (as the kernel's dev_valid_name).
            guard parts[1].utf8.count <= 15, parts[1] != ".", parts[1] != "..",
                  parts[1].unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value != 0x7F && $0 != "/" && $0 != ":" }) else {
                throw ValidationError("--device \(escapedForMessage(device)): '\(escapedForMessage(parts[1]))' is not an interface name (1 to 15 characters, no '/', ':' or spaces)")
            }
            options.devices[parts[0]] = parts[1]
        }
        guard case .success(let step) = Units.duration(resolution), step > .zero, step <= ScenarioLimits.maximumDuration else {
            throw ValidationError("--resolution \(escapedForMessage(resolution)): expected a duration from 1ns to \(ScenarioLimits.maximumDuration.roamDescription), such as 500ms or 1s")
        }
        options.resolution = step
        if let chaosMeshVersion { options.version = chaosMeshVersion }
        if let chaosMeshRate {
            guard let shaping = ChaosMeshExport.RateShaping(rawValue: chaosMeshRate) else {
                throw ValidationError("--chaos-mesh-rate \(escapedForMessage(chaosMeshRate)): expected netem or tbf")
            }
            options.rateShaping = shaping
        }
        let result: ChaosMeshExport.Result
        do throws(ChaosMeshExport.Refusal) {
            result = try ChaosMeshExport.export(scenario, options: options)
        } catch {
            printError("roam export: \(error.message)")
            throw ExitCode.badInput
        }
        try emit(result.yaml, notes: result.notes, summary: "\(result.manifests) manifest\(result.manifests == 1 ? "" : "s")\(result.steps > 0 ? ", \(result.steps) workflow steps" : "")")
    }

    /// The namespace, checked: a DNS label.
    func checkedNamespace() throws -> String {
        let scalars = Array(namespace.unicodeScalars)
        func labelCharacter(_ scalar: Unicode.Scalar) -> Bool { ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) }
        guard (1...63).contains(scalars.count), labelCharacter(scalars.first!), labelCharacter(scalars.last!),
              scalars.allSatisfy({ labelCharacter($0) || $0 == "-" }) else {
            throw ValidationError("--namespace \(escapedForMessage(namespace)): a Kubernetes namespace is 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit")
        }
        return namespace
    }

    func runKubernetes() throws {
        for (flag, given) in [("--select", !selectors.isEmpty), ("--resolution", resolution != "1s"), ("--chaos-mesh-version", chaosMeshVersion != nil),
                              ("--chaos-mesh-rate", chaosMeshRate != nil)] where given {
            throw ValidationError("\(flag) is for --format chaos-mesh (with --format kubernetes, each node's pods are its workload's: --workload)")
        }
        guard let image, !image.isEmpty, image.utf8.count <= 1024, !image.contains(where: { $0.isWhitespace || $0.isNewline }) else {
            throw ValidationError("--format kubernetes needs --image IMAGE: an image with roam in its PATH and /bin/sh (docs/cli.md shows how to build one)")
        }
        if startAt != nil && startIn != nil { throw ValidationError("give --start-at or --start-in, not both") }
        let bytes: [UInt8]
        do throws(SafePathError) {
            bytes = try readRegularFileAndOwner(atPath: file, maximumBytes: ScenarioLimits.maximumFileSize).bytes
        } catch {
            printError("\(escapedForMessage(file, maximumLength: 256)): error: cannot read the file: \(error.reason)")
            throw ExitCode.badInput
        }
        let source = String(decoding: bytes, as: UTF8.self)
        let directory = file.contains("/") ? String(file[..<file.lastIndex(of: "/")!]) : "."
        // The text the ConfigMap holds is exactly the text checked here.
        let outcome = ScenarioReader.parse(source, file: file, baseDirectory: directory.isEmpty ? "/" : directory)
        for diagnostic in outcome.diagnostics { printError(diagnostic.description) }
        guard let scenario = outcome.scenario else { throw ExitCode.badInput }
        var zero: Int64
        if let startAt {
            zero = startAt
        } else {
            guard case .success(let delay) = Units.duration(startIn ?? "2m"), delay >= .zero, delay <= .seconds(86_400) else {
                throw ValidationError("--start-in \(escapedForMessage(startIn ?? "")): expected a duration up to a day, such as 90s or 5m")
            }
            zero = Int64(time(nil)) + delay.components.seconds
        }
        guard zero > 0 else { throw ValidationError("--start-at \(zero) is not a time: seconds since the epoch, as `date +%s` prints") }
        var options = KubernetesExport.Options(image: image, startAt: zero)
        options.namespace = try checkedNamespace()
        let nodes = Set(scenario.nodes.map(\.name)), links = Set(scenario.links.map(\.name))
        for text in workloads {
            let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
            let target = parts.count == 2 ? parts[1].split(separator: "/", maxSplits: 1).map(String.init) : []
            guard parts.count == 2, nodes.contains(parts[0]), target.count == 2, let kind = KubernetesExport.WorkloadKind(rawValue: target[0].lowercased()),
                  KubernetesExport.isSubdomain(target[1]) else {
                throw ValidationError("--workload \(escapedForMessage(text)): expected NODE=KIND/NAME with one of the nodes \(nodes.sorted().joined(separator: ", ")), "
                    + "KIND deployment, statefulset or daemonset, and NAME a Kubernetes name (lower-case letters, digits, '-' and '.')")
            }
            options.workloads[parts[0]] = KubernetesExport.Workload(kind: kind, name: target[1])
        }
        for device in devices {
            let parts = device.split(separator: "=", maxSplits: 1).map(String.init)
            let key = parts.first ?? "", link = key.split(separator: "/", maxSplits: 1).last.map(String.init) ?? key
            let node = key.contains("/") ? String(key.split(separator: "/", maxSplits: 1)[0]) : nil
            guard parts.count == 2, links.contains(link), node.map(nodes.contains) ?? true, !parts[1].isEmpty else {
                throw ValidationError("--device \(escapedForMessage(device)): expected LINK=IFACE or NODE/LINK=IFACE with one of the links \(links.sorted().joined(separator: ", "))")
            }
            guard parts[1].utf8.count <= 15, parts[1] != ".", parts[1] != "..",
                  parts[1].unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value != 0x7F && $0 != "/" && $0 != ":" && $0 != "'" }) else {
                throw ValidationError("--device \(escapedForMessage(device)): '\(escapedForMessage(parts[1]))' is not an interface name (1 to 15 characters, no '/', ':' or spaces)")
            }
            options.devices[key] = parts[1]
        }
        let result: KubernetesExport.Result
        do throws(KubernetesExport.Refusal) {
            result = try KubernetesExport.export(scenario, source: source, options: options, remove: remove)
        } catch {
            printError("roam export: \(error.message)")
            throw ExitCode.badInput
        }
        try emit(result.yaml, notes: result.notes, summary: "\(result.manifests) manifest\(result.manifests == 1 ? "" : "s")")
    }

    /// The notes on standard error, and the manifests on standard output or in `--output`
    /// (then a line saying what was written).
    func emit(_ yaml: String, notes: [String], summary: String) throws {
        for note in notes { printError("note: \(note)") }
        guard let output else {
            writeLine(yaml)
            return
        }
        do throws(ReportError) {
            try writeTextFile(yaml, to: output)
        } catch {
            printError("roam export: \(error.message)")
            throw ExitCode.badInput
        }
        writeLine("\(output): \(summary)")
    }
}
