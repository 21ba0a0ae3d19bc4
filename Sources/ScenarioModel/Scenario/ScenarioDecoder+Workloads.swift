import RoamCore
import RoamSystem
import Yams

// Workloads: clients, servers and commands, and what each may name.
extension ScenarioDecoder {
    func workloads(_ node: Node, nodes: [ScenarioNode], links: [LinkSpec], duration: Duration?) -> [Workload]? {
        let roles = Dictionary(nodes.map { ($0.name, $0.role) }, uniquingKeysWith: { first, _ in first })
        let nodes = Set(roles.keys)
        guard let items = list(node, "workloads") else { return nil }
        var workloads: [Workload] = []
        var names: Set<String> = []
        var reachable = ConnectedNodes(links: links)
        var reachableOver = Dictionary(uniqueKeysWithValues: IPFamily.allCases.map { family in
            (family, ConnectedNodes(links: links.filter { $0.families.contains(family) }))
        })
        let common = ["name", "kind", "from", "to", "mode", "prohibit", "family", "start", "stop", "timeout", "host"]
        for item in items {
            guard var workload = fields(item, "a workload") else { continue }
            if let nameNode = workload.pairs.first(where: { $0.key == "name" })?.value, case .scalar(let scalar) = nameNode {
                declaredWorkloads.insert(scalar.string)
            }
            let name = take(&workload, "name", required: true) { self.identifier($0, "workload name", maxLength: 64) }
            if let name, !names.insert(name).inserted {
                error("a workload named '\(name)' is defined already", at: workload.keyNode("name")!)
            }
            let kindName = take(&workload, "kind", required: true) { value -> String? in
                guard let text = self.string(value, "kind") else { return nil }
                let kinds = ["bulk", "requests", "stream", "command"]
                guard kinds.contains(text) else {
                    let guess = suggestion(for: text, among: kinds).map { " (did you mean '\($0)'?)" } ?? ""
                    self.error("kind must be one of \(kinds.joined(separator: ", ")), not '\(escapedForMessage(text))'\(guess)", at: value)
                    return nil
                }
                return text
            }
            let node = { (key: String) -> String? in
                self.take(&workload, key, required: key == "from" || kindName != "command") { value -> String? in
                    guard let name = self.string(value, key) else { return nil }
                    guard nodes.contains(name) else {
                        let guess = suggestion(for: name, among: nodes).map { " (did you mean '\($0)'?)" } ?? ""
                        self.error("no node named '\(escapedForMessage(name))' is defined in nodes\(guess)", at: value)
                        return nil
                    }
                    return name
                }
            }
            let from = node("from")
            let to = node("to")
            let mode = take(&workload, "mode") { self.choice($0, "mode", MultipathMode.self) } ?? .none
            let family = take(&workload, "family") { self.choice($0, "family", FamilyChoice.self) }
            let hostName = take(&workload, "host") { self.string($0, "host") }
            // A server on the internet is reached by name: `host`, or its first name.
            var host: String?
            if let from, case let .server(names, _)? = roles[from], kindName != "command" {
                host = names.first
                if let hostName {
                    if names.contains(hostName.lowercased()) {
                        host = hostName.lowercased()
                    } else {
                        let guess = suggestion(for: hostName, among: names).map { " (did you mean '\($0)'?)" } ?? ""
                        error("'\(escapedForMessage(hostName))' is not a name of node '\(from)'; its names are \(names.joined(separator: ", "))\(guess)",
                              at: workload.keyNode("host")!)
                    }
                }
            } else if hostName != nil, let from, kindName != nil {
                error(kindName == "command"
                      ? "host applies to the bulk, requests and stream workloads Roam runs; a command looks names up itself (the node's resolver works)"
                      : "host names a server on the internet by one of its names, and node '\(from)' is not on the internet (internet: {names: [...]})",
                      at: workload.keyNode("host")!)
            }
            let start = take(&workload, "start") { self.duration($0, "start") } ?? .zero
            let stop = take(&workload, "stop") { self.duration($0, "stop", allowZero: false) }
            let timeout = take(&workload, "timeout") { self.duration($0, "timeout", allowZero: false, minimum: .milliseconds(1)) } ?? Workload.defaultTimeout
            let prohibits = take(&workload, "prohibit") { value -> Set<PathRestriction>? in
                guard let items = self.list(value, "prohibit") else { return nil }
                let restrictions = items.compactMap { self.choice($0, "prohibit", PathRestriction.self) }
                return restrictions.count == items.count ? Set(restrictions) : nil
            } ?? []
            var kind: Workload.Kind?
            var mptcpize = false
            var known = common
            switch kindName {
            case "bulk":
                known += ["size"]
                kind = .bulk(size: take(&workload, "size") { self.size($0, "size") })
            case "requests":
                known += ["size", "requestSize", "interval", "count"]
                let size = take(&workload, "size") { self.size($0, "size (of each response)") } ?? 100_000
                let requestSize = take(&workload, "requestSize") {
                    self.size($0, "requestSize", range: ScenarioLimits.minimumRequestSize...ScenarioLimits.maximumRequestSize)
                } ?? 200
                let interval = take(&workload, "interval") {
                    self.duration($0, "interval", allowZero: false, minimum: ScenarioLimits.minimumInterval)
                } ?? .seconds(1)
                let count = take(&workload, "count") { self.integer($0, "count", range: 1...10_000_000) }
                kind = .requests(requestSize: requestSize, responseSize: size, interval: interval, count: count)
            case "stream":
                known += ["bitrate", "buffer"]
                let bitrate = take(&workload, "bitrate", required: true) { self.rate($0, "bitrate") }
                let buffer = take(&workload, "buffer") {
                    self.duration($0, "buffer", allowZero: false, minimum: .milliseconds(1), maximum: ScenarioLimits.maximumBuffer)
                } ?? .seconds(2)
                kind = bitrate.map { .stream(bitrate: $0, buffer: buffer) }
            case "command":
                known += ["run", "env", "mptcpize"]
                mptcpize = take(&workload, "mptcpize") { self.bool($0, "mptcpize") } ?? false
                let run = take(&workload, "run", required: true) { self.command($0) }
                let environment = take(&workload, "env") { self.environment($0) } ?? [:]
                kind = run.map { .command(run: $0, environment: environment) }
            default:
                known += ["size", "requestSize", "interval", "count", "bitrate", "buffer", "run", "env", "mptcpize"]
            }
            finish(workload, known: known)
            if let stop, stop <= start { error("stop must come after start", at: workload.keyNode("stop")!) }
            if let duration, start >= duration { error("start (\(start.roamDescription)) is not before the scenario ends", at: workload.keyNode("start") ?? item) }
            if let from, let to, from == to { error("a workload runs between two different nodes; from and to are both '\(from)'", at: item) }
            if let from, let to, from != to, !reachable.connected(from, to) {
                error("no link joins '\(from)' and '\(to)', directly or through other nodes; add a link between them", at: workload.keyNode("to") ?? item)
            }
            if !prohibits.isEmpty, kindName == "command" {
                error("prohibit applies to the bulk, requests and stream workloads Roam runs; a command chooses its own paths",
                      at: workload.keyNode("prohibit") ?? item)
            }
            if let from, let to, from != to, kindName != "command", host == nil, reachable.connected(from, to) {
                let choice = family ?? .ipv4
                let served = choice.families.filter { reachableOver[$0]!.connected(from, to) }
                if served.isEmpty {
                    let other = choice == .ipv6 ? "ipv4 or any" : "ipv6 or any"
                    error("no \(choice == .ipv6 ? "IPv6" : "IPv4") link joins '\(from)' and '\(to)' (see the links' families); "
                          + "set family: \(other) on the workload", at: workload.keyNode("family") ?? item)
                }
            }
            if family != nil, kindName == "command" {
                error("family applies to the bulk, requests and stream workloads Roam runs; a command picks its own addresses "
                      + "($ROAM_PEER_ADDR, $ROAM_PEER_ADDR6)", at: workload.keyNode("family") ?? item)
            }
            if let name, let kind, let from {
                var parsed = Workload(name: name, kind: kind, from: from, to: to, mode: mode, start: start, stop: stop, timeout: timeout)
                parsed.prohibits = prohibits
                // By name, as an app: whatever families the lookup gives, unless told otherwise.
                parsed.family = family ?? (host == nil ? .ipv4 : .any)
                parsed.host = host
                parsed.mptcpize = mptcpize
                workloads.append(parsed)
            }
        }
        return workloads
    }

    /// `run: "shell text"` (run by `/bin/sh -c`) or `run: [program, arg, ...]` (run as is).
    func command(_ node: Node) -> [String]? {
        if case .scalar = node {
            guard let text = string(node, "run") else { return nil }
            guard !text.allSatisfy(\.isWhitespace) else {
                error("run is empty; write the command to run, e.g. run: \"curl -sS http://$ROAM_SERVER_ADDR/\"", at: node)
                return nil
            }
            guard commandText(text, "run", at: node) else { return nil }
            return ["/bin/sh", "-c", text]
        }
        guard let items = list(node, "run") else { return nil }
        if items.isEmpty {
            error("run needs a command: [program, arguments...]", at: node)
            return nil
        }
        var words: [String] = []
        for (index, item) in items.enumerated() {
            guard let word = string(item, "an argument of run") else { continue }
            if index == 0, word.isEmpty {
                error("the program to run is empty; the first item of run names it", at: item)
                continue
            }
            if commandText(word, "an argument of run", at: item) { words.append(word) }
        }
        return words.count == items.count ? words : nil
    }

    /// Whether `text` can reach `execve`: no NUL (C strings end there), bounded length.
    private func commandText(_ text: String, _ what: String, at node: Node) -> Bool {
        if text.utf8.contains(0) {
            error("\(what) holds a NUL character, which no program can receive; remove it", at: node)
            return false
        }
        if text.utf8.count > ScenarioLimits.maximumCommandLength {
            error("\(what) is longer than \(byteCountDescription(ScenarioLimits.maximumCommandLength))", at: node)
            return false
        }
        return true
    }

    /// `env: {NAME: value}`; a name is what `execve` can pass: not empty, no `=`, no NUL.
    func environment(_ node: Node) -> [String: String]? {
        guard let variables = fields(node, "env") else { return nil }
        var result: [String: String] = [:]
        var valid = true
        for (key, keyNode, value) in variables.pairs {
            if key.isEmpty || key.contains("=") || key.utf8.contains(0) {
                error("environment variable name '\(escapedForMessage(key))' cannot be passed to a program: a name is not empty and has no '=' "
                    + "or NUL (write NAME: value)", at: keyNode)
                valid = false
                continue
            }
            if let text = string(value, "env \(escapedForMessage(key))") {
                if commandText(text, "env \(escapedForMessage(key))", at: value) { result[key] = text } else { valid = false }
            } else {
                valid = false
            }
        }
        return valid ? result : nil
    }
}
