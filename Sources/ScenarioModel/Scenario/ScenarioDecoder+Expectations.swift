import RoamCore
import RoamSystem
import Yams

// Expectations: what a run must show, each checked against what the scenario can produce.
extension ScenarioDecoder {
    func expectations(_ node: Node, workloads: [Workload], nodes: Set<String>, links: [LinkSpec], timeline: [TimelineEvent]) -> [Expectation]? {
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
            }
            happening.insert(event.link + "\u{0}" + name)
        }
        let metrics = ["maxStall", "minThroughput", "maxTimeToFirstByte", "completes", "exitCode", "maxBytesOver"]
        // What each workload is expected to do, where a second answer could contradict the first.
        var outcomes: [String: (check: Expectation.Check, line: Int)] = [:]
        for item in items {
            guard var expectation = fields(item, "an expectation") else { continue }
            if expectation.has("node") {
                if let parsed = pathExpectation(&expectation, nodes: nodes, links: linkNames, happening: happening, at: item) {
                    expectations.append(parsed)
                }
                finish(expectation, known: ["node", "path", "within", "after"])
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
        case (.maxStall, _): return "stalls are measured for stream workloads"
        case (.minThroughput, _): return "throughput is measured for bulk, requests and stream workloads"
        case (.maxTimeToFirstByte, _): return "time to first byte is measured for requests workloads"
        case (.exitCode, _): return "exit codes belong to command workloads"
        case (.path, _): return nil
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

    /// `- node: phone`, `path: expensive`, `within: 1s`, `after: {link: wifi, event: down}`.
    func pathExpectation(_ fields: inout Fields, nodes: Set<String>, links: Set<String>, happening: Set<String>, at item: Node) -> Expectation? {
        let node = take(&fields, "node") { value -> String? in
            guard let name = self.string(value, "node") else { return nil }
            guard nodes.contains(name) else {
                self.error("no node named '\(escapedForMessage(name))' is defined in nodes", at: value)
                return nil
            }
            return name
        }
        let condition = take(&fields, "path", required: true) { self.choice($0, "path", PathCondition.self) }
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
            let events = ["down", "up", "blackhole", "set", "ramp", "flap", "profile", "join", "leave", "renumber", "rebind", "dns", "dns-ok"]
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
