import RoamCore
import RoamSystem
import Yams

// Expectations: what a run must show, each checked against what the scenario can produce.
extension ScenarioDecoder {
    func expectations(_ node: Node, workloads: [Workload], nodes: Set<String>, links: [LinkSpec], timeline: [TimelineEvent],
                      networks: [NetworkSpec] = []) -> [Expectation]? {
        guard let items = list(node, "expect") else { return nil }
        var expectations: [Expectation] = []
        let byName = Dictionary(workloads.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let linkNames = Set(links.map(\.name))
        // The (link, event) pairs the timeline holds, as path expectations name them.
        var happening: Set<String> = []
        for event in timeline {
            let name: String = switch event.action {
            case .set: "set"
            case .ramp: "ramp"
            case .down: "down"
            case .up: "up"
            case .blackhole(let on): on ? "blackhole" : "blackhole-off"
            case .flap: "flap"
            case .profile: "profile"
            case .membership(let joins): joins ? "join" : "leave"
            case .renumber: "renumber"
            case .rebind: "rebind"
            case .dns(let fault): fault == nil ? "dns-ok" : "dns"
            case .dnsDelay: "dns"
            case .portal(let login): login ? "login" : "logout"
            case .reset: "reset"
            }
            happening.insert(event.link + "\u{0}" + name)
        }
        let metrics = ["maxStall", "minThroughput", "maxTimeToFirstByte", "completes", "exitCode", "maxBytesOver", "maxBytesWhilePortal"]
        // What each workload is expected to do, where a second answer could contradict the first.
        var outcomes: [String: (check: Expectation.Check, line: Int)] = [:]
        for item in items {
            guard var expectation = fields(item, "an expectation") else { continue }
            if expectation.has("node") {
                if let parsed = pathExpectation(&expectation, nodes: nodes, links: linkNames, happening: happening, at: item) {
                    expectations.append(parsed)
                }
                finish(expectation, known: ["node", "path", "within", "after", "at"])
                continue
            }
            let workload = take(&expectation, "workload", required: true) { value -> Workload? in
                guard let name = self.string(value, "workload") else { return nil }
                guard let workload = byName[name] else {
                    if self.declaredWorkloads.contains(name) { return nil } // reported where it is defined
                    let guess = suggestion(for: name, among: self.declaredWorkloads).map { " (did you mean '\($0)'?)" } ?? ""
                    self.error("no workload named '\(escapedForMessage(name))' is defined in workloads\(guess)", at: value)
                    return nil
                }
                return workload
            }
            let present = metrics.filter { expectation.has($0) }
            if present.isEmpty { error("an expectation needs one of \(metrics.joined(separator: ", "))", at: item) }
            for metric in present {
                let value = expectation.take(metric)!
                let check: Expectation.Check?
                switch metric {
                case "maxStall": check = duration(value, "maxStall").map { .maxStall($0) }
                case "minThroughput": check = rate(value, "minThroughput").map { .minThroughput($0) }
                case "maxTimeToFirstByte": check = duration(value, "maxTimeToFirstByte", allowZero: false).map { .maxTimeToFirstByte($0) }
                case "completes": check = bool(value, "completes").map { .completes($0) }
                case "maxBytesOver": check = bytesOver(value, links: linkNames)
                case "maxBytesWhilePortal": check = bytesWhilePortal(value, workload: workload, networks: networks)
                default: check = integer(value, "exitCode", range: 0...255).map { .exitCode($0) }
                }
                if let workload, let check {
                    if let problem = Self.mismatch(check, workload.kind) {
                        error("\(metric) does not apply to workload '\(workload.name)': \(problem)", at: expectation.keyNode(metric)!)
                    } else if let earlier = contradiction(check, outcomes["\(workload.name)\u{0}\(metric)"]) {
                        error("this contradicts the expectation at line \(earlier.line) for workload '\(workload.name)' "
                            + "(\(metric): \(earlier.check.value)); keep one", at: expectation.keyNode(metric)!)
                    } else {
                        expectations.append(Expectation(subject: workload.name, check: check, line: item.line))
                        if case .completes = check { outcomes["\(workload.name)\u{0}\(metric)"] = (check, item.line) }
                        if case .exitCode = check { outcomes["\(workload.name)\u{0}\(metric)"] = (check, item.line) }
                    }
                }
            }
            finish(expectation, known: ["workload"] + metrics)
        }
        return expectations
    }

    /// The earlier expectation `check` contradicts: `completes: true` after `completes: false`,
    /// an exit code after another.
    private func contradiction(_ check: Expectation.Check, _ earlier: (check: Expectation.Check, line: Int)?) -> (check: Expectation.Check, line: Int)? {
        guard let earlier, earlier.check != check else { return nil }
        return earlier
    }

    static func mismatch(_ check: Expectation.Check, _ kind: Workload.Kind) -> String? {
        switch (check, kind) {
        case (.maxStall, .stream), (.minThroughput, .bulk), (.minThroughput, .stream), (.minThroughput, .requests),
             (.maxTimeToFirstByte, .requests), (.completes, _), (.exitCode, .command):
            return nil
        case (.maxBytesOver, .command): return "bytes per link are counted for bulk, requests and stream workloads"
        case (.maxBytesOver, _): return nil
        case (.maxBytesWhilePortal, .command):
            return "a portal counts the bytes of bulk, requests and stream workloads (by their server's port); a command's are not told apart"
        case (.maxBytesWhilePortal, _): return nil
        case (.maxStall, _): return "stalls are measured for stream workloads"
        case (.minThroughput, _): return "throughput is measured for bulk, requests and stream workloads"
        case (.maxTimeToFirstByte, _): return "time to first byte is measured for requests workloads"
        case (.exitCode, _): return "exit codes belong to command workloads"
        case (.path, _), (.connectivity, _): return nil
        }
    }

    /// A link's name where the file refers to one, or nil (and an error naming the closest
    /// link) when no link has it.
    func linkReference(_ node: Node, among links: Set<String>) -> String? {
        guard let name = string(node, "link") else { return nil }
        guard links.contains(name) else {
            let guess = suggestion(for: name, among: links).map { " (did you mean '\($0)'?)" } ?? ""
            error("no link named '\(escapedForMessage(name))' is defined in links\(guess)", at: node)
            return nil
        }
        return name
    }

    /// `maxBytesOver: {link: sat, bytes: 0b}`.
    func bytesOver(_ value: Node, links: Set<String>) -> Expectation.Check? {
        guard var fields = fields(value, "maxBytesOver") else { return nil }
        let link = take(&fields, "link", required: true) { self.linkReference($0, among: links) }
        let bytes = take(&fields, "bytes", required: true) { self.size($0, "bytes", range: 0...ScenarioLimits.maximumSize) }
        finish(fields, known: ["link", "bytes"])
        guard let link, let bytes else { return nil }
        return .maxBytesOver(link: link, bytes: bytes)
    }

    /// `maxBytesWhilePortal: {network: hotel, bytes: 0b}`: the network has a portal, and the
    /// workload's client is one of its members.
    func bytesWhilePortal(_ value: Node, workload: Workload?, networks: [NetworkSpec]) -> Expectation.Check? {
        guard var fields = fields(value, "maxBytesWhilePortal") else { return nil }
        let network = take(&fields, "network", required: true) { node -> NetworkSpec? in
            guard let name = self.string(node, "network") else { return nil }
            guard let network = networks.first(where: { $0.name == name }) else {
                let guess = suggestion(for: name, among: networks.map(\.name)).map { " (did you mean '\($0)'?)" } ?? ""
                self.error("no network named '\(escapedForMessage(name))' is defined in networks\(guess)", at: node)
                return nil
            }
            guard network.portal != nil else {
                self.error("network '\(name)' has no captive portal (portal: true), so nothing is counted while one holds a phone", at: node)
                return nil
            }
            if let client = workload?.to, !network.members.contains(client) {
                self.error("workload '\(workload!.name)' runs its client in node '\(client)', which is not a member of network '\(name)'", at: node)
                return nil
            }
            return network
        }
        let bytes = take(&fields, "bytes", required: true) { self.size($0, "bytes", range: 0...ScenarioLimits.maximumSize) }
        finish(fields, known: ["network", "bytes"])
        guard let network, let bytes else { return nil }
        return .maxBytesWhilePortal(network: network.name, bytes: bytes)
    }

    /// `- node: phone`, `path: expensive`, `within: 1s`, `after: {link: wifi, event: down}`;
    /// `path: {connectivity: portal, interface: hotel}` with `at: 10s` or the same `within` and `after`.
    func pathExpectation(_ fields: inout Fields, nodes: Set<String>, links: Set<String>, happening: Set<String>, at item: Node) -> Expectation? {
        let node = take(&fields, "node") { value -> String? in
            guard let name = self.string(value, "node") else { return nil }
            guard nodes.contains(name) else {
                self.error("no node named '\(escapedForMessage(name))' is defined in nodes", at: value)
                return nil
            }
            return name
        }
        // `path: {connectivity: STATE, interface: NAME}`, or a condition's name.
        var connectivity: (state: ConnectivityExpectation.State, interface: String?)?
        var pathIsMapping = false
        let condition = take(&fields, "path", required: true) { value -> PathCondition? in
            guard case .mapping = value else { return self.choice(value, "path", PathCondition.self) }
            pathIsMapping = true
            guard var form = self.fields(value, "path") else { return nil }
            let state = self.take(&form, "connectivity", required: true) { self.choice($0, "connectivity", ConnectivityExpectation.State.self) }
            let interface = self.take(&form, "interface") { self.identifier($0, "interface", maxLength: 15) }
            self.finish(form, known: ["connectivity", "interface"])
            if let state { connectivity = (state, interface) }
            return nil
        }
        if fields.has("at") {
            let at = take(&fields, "at") { self.duration($0, "at") }
            if !pathIsMapping {
                error("at: applies to path: {connectivity: ...}; a path condition is checked within a time after an event", at: fields.keyNode("path") ?? item)
                return nil
            }
            if fields.has("within") || fields.has("after") {
                error("an expectation holds at a time (at) or within a time after an event (within, after), not both", at: item)
                return nil
            }
            guard let node, let at, let connectivity else { return nil }
            return Expectation(subject: node, check: .connectivity(ConnectivityExpectation(state: connectivity.state, interface: connectivity.interface,
                                                                                              timing: .at(at))), line: item.line)
        }
        let within = take(&fields, "within", required: true) { self.duration($0, "within", allowZero: false) }
        let after = take(&fields, "after", required: true) { value -> (String, String)? in
            guard var trigger = self.fields(value, "after") else { return nil }
            let link = self.take(&trigger, "link", required: true) { linkNode -> String? in
                guard let name = self.string(linkNode, "link") else { return nil }
                guard links.contains(name) else {
                    self.error("no link named '\(escapedForMessage(name))' is defined in links", at: linkNode)
                    return nil
                }
                return name
            }
            let events = ["down", "up", "blackhole", "set", "ramp", "flap", "profile", "join", "leave", "renumber", "rebind", "dns", "dns-ok",
                          "login", "logout"]
            let event = self.take(&trigger, "event", required: true) { eventNode -> String? in
                guard let text = self.string(eventNode, "event"), events.contains(text) else {
                    self.error("event must be one of \(events.joined(separator: ", "))", at: eventNode)
                    return nil
                }
                return text
            }
            self.finish(trigger, known: ["link", "event"])
            guard let link, let event else { return nil }
            guard happening.contains(link + "\u{0}" + event) else {
                let what = event == "blackhole" ? "blackhole: true" : event
                self.error("the timeline has no \(what) event on link '\(link)', so this expectation could never be checked; "
                    + "name an event the timeline holds", at: value)
                return nil
            }
            return (link, event)
        }
        if let connectivity, let node, let within, let after {
            return Expectation(subject: node, check: .connectivity(ConnectivityExpectation(
                state: connectivity.state, interface: connectivity.interface, timing: .after(link: after.0, event: after.1, within: within))), line: item.line)
        }
        guard let node, let condition, let within, let after else { return nil }
        return Expectation(subject: node, check: .path(condition: condition, within: within, afterLink: after.0, afterEvent: after.1), line: item.line)
    }
}

extension Expectation.Check {
    /// The value an outcome expectation holds, as written (`true`, `0`).
    fileprivate var value: String {
        switch self {
        case .completes(let flag): "\(flag)"
        case .exitCode(let code): "\(code)"
        default: "\(self)"
        }
    }
}
