import Netlink
import PathMonitor
import Yams

extension ScenarioDecoder {
    static let impairmentKeys = ["delay", "jitter", "delayCorrelation", "distribution", "rate", "loss", "duplicate", "reorder", "corrupt", "limit", "trace"]

    func scenario(_ root: Node) -> Scenario? {
        guard var top = fields(root, "the scenario") else { return nil }
        let name = take(&top, "name", required: true) { self.identifier($0, "scenario name", maxLength: Scenario.maximumNameLength) }
        let description = take(&top, "description") { self.string($0, "description") }
        let seed = take(&top, "seed") { self.integer($0, "seed", range: 0...Int.max) }
        let duration = take(&top, "duration", required: true) { self.duration($0, "duration", allowZero: false) }
        let nodes = take(&top, "nodes", required: true) { self.nodes($0) } ?? []
        let nodeNames = Set(nodes.map(\.name))
        definedProfiles = take(&top, "profiles") { self.profileDefinitions($0) } ?? []
        definedProfileIndex = Dictionary(definedProfiles.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let links = take(&top, "links") { self.links($0, nodes: nodeNames) } ?? []
        let timeline = take(&top, "timeline") { self.timeline($0, links: links, duration: duration) } ?? []
        let workloads = take(&top, "workloads") { self.workloads($0, nodes: nodeNames, links: links, duration: duration) } ?? []
        let expectations = take(&top, "expect") {
            self.expectations($0, workloads: workloads, nodes: nodeNames, links: links, timeline: timeline)
        } ?? []
        finish(top, known: ["name", "description", "seed", "duration", "nodes", "profiles", "links", "timeline", "workloads", "expect"])
        if nodes.isEmpty, top.has("nodes") { error("a scenario needs at least one node", at: top.keyNode("nodes")!) }
        guard let name, let duration else { return nil }
        return Scenario(name: name, description: description, seed: UInt64(seed ?? 1), duration: duration, nodes: nodes, links: links,
                        timeline: timeline, workloads: workloads, expectations: expectations, profiles: definedProfiles)
    }

    /// Reads `key` with `read`; reports a missing required key at the mapping.
    func take<T>(_ fields: inout Fields, _ key: String, required: Bool = false, _ read: (Node) -> T?) -> T? {
        guard let node = fields.take(key) else {
            if required { error("\(fields.context) needs '\(key)'", at: fields.node) }
            return nil
        }
        return read(node)
    }

    // MARK: - Nodes and links

    func nodes(_ node: Node) -> [ScenarioNode]? {
        guard let all = fields(node, "nodes") else { return nil }
        var nodes: [ScenarioNode] = []
        for (key, keyNode, value) in all.pairs {
            guard let name = identifier(keyNode, "node name", maxLength: 32) else { continue }
            guard var attributes = fields(value, "node '\(name)'") else { continue }
            let description = take(&attributes, "description") { self.string($0, "description") }
            finish(attributes, known: ["description"])
            _ = key
            nodes.append(ScenarioNode(name: name, description: description))
        }
        return nodes
    }

    func links(_ node: Node, nodes: Set<String>) -> [LinkSpec]? {
        guard let items = list(node, "links") else { return nil }
        var links: [LinkSpec] = []
        var names: Set<String> = []
        for item in items {
            guard var link = fields(item, "a link") else { continue }
            // A link whose name is missing or invalid is still read, so that its other keys are
            // checked (and not all reported as unknown).
            let name = take(&link, "name", required: true, { self.identifier($0, "link name", maxLength: 15) })
            link = Fields(link, context: name.map { "link '\($0)'" } ?? "this link")
            if let name, !names.insert(name).inserted { error("a link named '\(name)' is defined already", at: link.keyNode("name")!) }
            let between = take(&link, "between", required: true) { self.endpoints($0, nodes: nodes) }
            let type = take(&link, "type") { self.interfaceType($0) }
            let expensive = take(&link, "expensive") { self.bool($0, "expensive") }
            let constrained = take(&link, "constrained") { self.bool($0, "constrained") }
            let ultraConstrained = take(&link, "ultraConstrained") { self.bool($0, "ultraConstrained") }
            let capture = take(&link, "capture") { self.bool($0, "capture") }
            let families = take(&link, "families") { self.families($0) }
            let profile = take(&link, "profile") { self.profile($0) }
            let both = impairment(from: &link)
            let context = link.context
            let up = take(&link, "up") { self.impairmentBlock($0, "the up direction of \(context)") } ?? Impairment()
            let down = take(&link, "down") { self.impairmentBlock($0, "the down direction of \(context)") } ?? Impairment()
            finishLink(link)
            guard let name else { continue }
            // A profile is the base; keys on the link override it, and direction blocks override those.
            let resolvedType = type ?? profile?.type ?? .wiredEthernet
            let resolvedUltra = ultraConstrained ?? profile?.isUltraConstrained ?? false
            links.append(LinkSpec(
                name: name, endpoints: between ?? ("", ""), type: resolvedType,
                isExpensive: expensive ?? profile?.isExpensive ?? (resolvedType == .cellular),
                isConstrained: constrained ?? profile?.isConstrained ?? resolvedUltra, isUltraConstrained: resolvedUltra, profile: profile?.name,
                up: (profile?.up ?? Impairment()).overridden(by: both).overridden(by: up),
                down: (profile?.down ?? Impairment()).overridden(by: both).overridden(by: down),
                capture: capture ?? false))
            if let families { links[links.count - 1].families = families }
            let added = links.last!
            if added.up == added.down {
                checkConsistency(added.up, at: item, "link '\(name)'")
            } else {
                checkConsistency(added.up, at: item, "link '\(name)' (up)")
                checkConsistency(added.down, at: item, "link '\(name)' (down)")
            }
        }
        return links
    }

    private func finishLink(_ link: Fields) {
        finish(link, known: ["name", "between", "type", "expensive", "constrained", "ultraConstrained", "capture", "families", "profile", "up", "down"]
            + Self.impairmentKeys)
    }

    /// `families: [ipv4]`, `[ipv6]` or `[ipv4, ipv6]`.
    func families(_ node: Node) -> Set<IPFamily>? {
        guard let items = list(node, "families") else { return nil }
        let families = items.compactMap { self.choice($0, "families", IPFamily.self) }
        guard families.count == items.count else { return nil }
        guard !families.isEmpty else {
            error("families names at least one address family: [ipv4], [ipv6] or [ipv4, ipv6]", at: node)
            return nil
        }
        guard Set(families).count == families.count else {
            error("families names each address family once", at: node)
            return nil
        }
        return Set(families)
    }

    func endpoints(_ node: Node, nodes: Set<String>) -> (String, String)? {
        guard let items = list(node, "between"), items.count == 2 || { error("between must name exactly two nodes: [phone, server]", at: node); return false }() else {
            return nil
        }
        let names = items.compactMap { item -> String? in
            guard let name = string(item, "a node in between") else { return nil }
            guard nodes.contains(name) else {
                let guess = suggestion(for: name, among: nodes).map { " (did you mean '\($0)'?)" } ?? ""
                error("no node named '\(escapedForMessage(name))' is defined in nodes\(guess)", at: item)
                return nil
            }
            return name
        }
        guard names.count == 2 else { return nil }
        if names[0] == names[1] {
            error("a link joins two different nodes; both ends are '\(names[0])'", at: node)
            return nil
        }
        return (names[0], names[1])
    }

    func interfaceType(_ value: Node) -> InterfaceType? {
        guard let text = string(value, "type") else { return nil }
        guard let type = InterfaceType(name: text), type != .loopback else {
            error("type must be one of wifi, cellular, wiredEthernet (or wired), other, not '\(escapedForMessage(text))'", at: value)
            return nil
        }
        return type
    }

    /// `profiles: {NAME: {type, expensive, constrained, ultraConstrained, impairment keys, up: {...}, down: {...}}}`.
    func profileDefinitions(_ node: Node) -> [LinkProfile]? {
        guard let all = fields(node, "profiles") else { return nil }
        var profiles: [LinkProfile] = []
        var names: Set<String> = []
        for (_, keyNode, value) in all.pairs {
            guard let name = identifier(keyNode, "profile name", maxLength: 64) else { continue }
            if LinkProfile.named(name) != nil || !names.insert(LinkProfile.normalized(name)).inserted {
                error("profile '\(name)' is defined already\(LinkProfile.named(name) != nil ? " (a built-in profile)" : "")", at: keyNode)
                continue
            }
            guard var definition = fields(value, "profile '\(name)'") else { continue }
            let summary = take(&definition, "description") { self.string($0, "description") }
            let type = take(&definition, "type") { self.interfaceType($0) }
            let expensive = take(&definition, "expensive") { self.bool($0, "expensive") }
            let constrained = take(&definition, "constrained") { self.bool($0, "constrained") }
            let ultraConstrained = take(&definition, "ultraConstrained") { self.bool($0, "ultraConstrained") }
            let both = impairment(from: &definition)
            let up = take(&definition, "up") { self.impairmentBlock($0, "the up direction of profile '\(name)'") } ?? Impairment()
            let down = take(&definition, "down") { self.impairmentBlock($0, "the down direction of profile '\(name)'") } ?? Impairment()
            finish(definition, known: ["description", "type", "expensive", "constrained", "ultraConstrained", "up", "down"] + Self.impairmentKeys)
            profiles.append(LinkProfile(name: LinkProfile.normalized(name), summary: summary ?? "defined in the scenario", type: type,
                                        isExpensive: expensive, isConstrained: constrained, isUltraConstrained: ultraConstrained,
                                        up: both.overridden(by: up), down: both.overridden(by: down)))
        }
        return profiles
    }

    func profile(_ node: Node) -> LinkProfile? {
        guard let name = string(node, "profile") else { return nil }
        if let profile = definedProfileIndex[LinkProfile.normalized(name)] ?? LinkProfile.named(name) { return profile }
        let names = definedProfiles.map(\.name) + LinkProfile.all.map(\.name)
        let guess = suggestion(for: name, among: names).map { " (did you mean '\($0)'?)" } ?? ""
        let listed = names.count > 40 ? names.prefix(40).joined(separator: ", ") + ", … (\(names.count) in all)" : names.joined(separator: ", ")
        error("no profile named '\(escapedForMessage(name))'\(guess); profiles: \(listed)", at: node)
        return nil
    }

    // MARK: - Impairments

    /// Reads the impairment keys present in `fields` (marking them used).
    func impairment(from fields: inout Fields) -> Impairment {
        var result = Impairment()
        result.delay = take(&fields, "delay") { self.duration($0, "delay", maximum: ScenarioLimits.maximumDelay) }
        result.jitter = take(&fields, "jitter") { self.duration($0, "jitter", maximum: ScenarioLimits.maximumDelay) }
        result.delayCorrelation = take(&fields, "delayCorrelation") { self.fraction($0, "delayCorrelation") }
        result.distribution = take(&fields, "distribution") { self.choice($0, "distribution", DelayDistribution.self) }
        result.rate = take(&fields, "rate") { self.rate($0, "rate") }
        result.loss = take(&fields, "loss") { self.loss($0) }
        result.duplicate = take(&fields, "duplicate") { self.fraction($0, "duplicate") }
        result.reorder = take(&fields, "reorder") { self.fraction($0, "reorder") }
        result.corrupt = take(&fields, "corrupt") { self.fraction($0, "corrupt") }
        result.limit = take(&fields, "limit") { self.integer($0, "limit (packets)", range: 1...1_000_000) }
        result.trace = take(&fields, "trace") { self.trace($0) }
        if result.trace != nil, result.rate != nil, let node = fields.keyNode("trace") {
            error("rate and trace both set the capacity; keep one", at: node)
        }
        return result
    }

    /// `trace: traces/lte-steady.trace`: a mahimahi trace, relative to the scenario's directory.
    func trace(_ node: Node) -> LinkTrace? {
        guard let path = string(node, "trace"), !path.isEmpty else { return nil }
        let resolved = path.hasPrefix("/") ? path : baseDirectory + "/" + path
        let text: String
        do throws(NetlinkError) {
            text = try readTextFile(atPath: resolved, maximumBytes: ScenarioLimits.maximumTraceFileSize)
        } catch {
            self.error("cannot read trace \(escapedForMessage(path)): \(error.explanation)", at: node)
            return nil
        }
        switch DeliveryTrace.parse(text) {
        case .success(let trace):
            return LinkTrace(path: path, trace: trace)
        case .failure(let problem):
            self.error("trace \(escapedForMessage(path)): \(problem)", at: node)
            return nil
        }
    }

    func impairmentBlock(_ node: Node, _ context: String) -> Impairment? {
        guard var block = fields(node, context) else { return nil }
        let result = impairment(from: &block)
        finish(block, known: Self.impairmentKeys)
        return result
    }

    /// `loss: 1%`, or `loss: {model: random, rate: 1%, correlation: 25%}`, or
    /// `loss: {model: gilbert-elliott, p: 1%, r: 30%, lossInBad: 100%, lossInGood: 0%}`.
    func loss(_ node: Node) -> LossModel? {
        if case .scalar = node {
            return fraction(node, "loss").map { .random(rate: $0, correlation: 0) }
        }
        guard var model = fields(node, "loss") else { return nil }
        let kind = take(&model, "model") { self.string($0, "loss model") } ?? "random"
        switch kind {
        case "random":
            let rate = take(&model, "rate", required: true) { self.fraction($0, "loss rate") }
            let correlation = take(&model, "correlation") { self.fraction($0, "loss correlation") } ?? 0
            finish(model, known: ["model", "rate", "correlation"])
            return rate.map { .random(rate: $0, correlation: correlation) }
        case "gilbert-elliott":
            let p = take(&model, "p", required: true) { self.fraction($0, "p (good to bad)") }
            let r = take(&model, "r", required: true) { self.fraction($0, "r (bad to good)") }
            let bad = take(&model, "lossInBad") { self.fraction($0, "lossInBad") } ?? 1
            let good = take(&model, "lossInGood") { self.fraction($0, "lossInGood") } ?? 0
            finish(model, known: ["model", "p", "r", "lossInBad", "lossInGood"])
            guard let p, let r else { return nil }
            return .gilbertElliott(p: p, r: r, lossInBad: bad, lossInGood: good)
        default:
            let guess = suggestion(for: kind, among: ["random", "gilbert-elliott"]).map { " (did you mean '\($0)'?)" } ?? ""
            error("loss model must be random or gilbert-elliott, not '\(escapedForMessage(kind))'\(guess)", at: model.node)
            return nil
        }
    }

    func checkConsistency(_ impairment: Impairment, at node: Node, _ context: String) {
        if impairment.reorder.map({ $0 > 0 }) == true && (impairment.delay ?? .zero) == .zero {
            diagnostics.warning("\(context): reorder has no effect without a delay (reordered packets skip the delay others get)",
                                line: node.line, column: node.column)
        }
        if let jitter = impairment.jitter, jitter > (impairment.delay ?? .zero) {
            diagnostics.warning("\(context): jitter larger than the delay reorders packets; add a delay at least as large",
                                line: node.line, column: node.column)
        }
    }

    // MARK: - Timeline

    func timeline(_ node: Node, links: [LinkSpec], duration: Duration?) -> [TimelineEvent]? {
        guard let items = list(node, "timeline") else { return nil }
        let actions = ["set", "ramp", "down", "up", "blackhole", "flap", "profile"]
        let linkNames = Set(links.map(\.name))
        var events: [(event: TimelineEvent, node: Node)] = []
        for item in items {
            guard var event = fields(item, "a timeline event") else { continue }
            let at = take(&event, "at", required: true) { self.duration($0, "at") }
            let link = take(&event, "link", required: true) { self.linkReference($0, among: linkNames) }
            let direction = take(&event, "direction") { self.choice($0, "direction", LinkDirection.self) } ?? .both
            let present = actions.filter { event.has($0) }
            var action: TimelineEvent.Action?
            if present.count != 1 {
                error(present.isEmpty ? "a timeline event needs one action: \(actions.joined(separator: ", "))"
                                      : "a timeline event takes one action, not \(present.joined(separator: " and "))", at: item)
            }
            for name in present {
                let value = event.take(name)!
                switch name {
                case "set":
                    action = impairmentBlock(value, "set").map { .set($0) }
                case "ramp":
                    action = ramp(value)
                case "down", "up":
                    if let flag = bool(value, name) {
                        if flag { action = name == "down" ? .down : .up } else { error("write \(name == "down" ? "up" : "down"): true instead of \(name): false", at: value) }
                    }
                case "blackhole":
                    action = bool(value, "blackhole").map { .blackhole($0) }
                case "flap":
                    action = flap(value, at: at, duration: duration)
                case "profile":
                    action = profile(value).map { .profile($0.name) }
                default: break
                }
            }
            finish(event, known: ["at", "link", "direction"] + actions)
            if present.count != 1 { action = nil }
            // A carrier has no direction: both ends lose it at once.
            if direction != .both, let name = present.first, ["down", "up", "flap"].contains(name), present.count == 1 {
                error("direction does not apply to '\(name)': a carrier goes \(name == "up" ? "up" : "down") both ways at once; "
                    + "for one direction only, use blackhole with direction", at: event.keyNode("direction")!)
                action = nil
            }
            if let at, let duration, at > duration, let atNode = event.keyNode("at") {
                error("this event is at \(at.roamDescription), after the scenario ends (duration \(duration.roamDescription))",
                      at: event.pairs.first { $0.keyNode == atNode }!.value)
            }
            if case .ramp(_, let over)? = action, let at, let duration, at + over > duration {
                diagnostics.warning("the ramp ends at \((at + over).roamDescription), after the scenario ends; it is cut there",
                                    line: item.line, column: item.column)
            }
            if let at, let link, let action {
                events.append((TimelineEvent(at: at, link: link, direction: direction, action: action, line: item.line), item))
            }
        }
        checkOrder(events)
        // Time order; events at the same time keep file order (the sort is made stable by index).
        let sorted = events.enumerated().sorted { ($0.element.event.at, $0.offset) < ($1.element.event.at, $1.offset) }.map(\.element)
        checkCarrierAndBlackholes(sorted)
        checkExpansion(sorted)
        return sorted.map(\.event)
    }

    /// Events listed out of time order play in time order; say so once, where it first happens.
    private func checkOrder(_ events: [(event: TimelineEvent, node: Node)]) {
        var latest: TimelineEvent?
        for (event, node) in events {
            if let latest, event.at < latest.at {
                diagnostics.warning("this event at \(event.at.roamDescription) is listed after one at \(latest.at.roamDescription) "
                    + "(line \(latest.line)); events play in time order, not in file order", line: node.line, column: node.column)
                return
            }
            latest = event
        }
    }

    /// Refuses what cannot mean anything: a carrier brought up that is not down, cut when it is
    /// cut already, and a blackhole lifted that is not on. A flap leaves the carrier up at its end.
    private func checkCarrierAndBlackholes(_ events: [(event: TimelineEvent, node: Node)]) {
        var downSince: [String: Duration] = [:]
        var flapping: [String: Duration] = [:]
        var blackholed: [String: Set<TrafficDirection>] = [:]
        for (event, node) in events {
            let link = event.link
            if let until = flapping[link], event.at >= until {
                flapping[link] = nil
                downSince[link] = nil
            }
            let inFlap = flapping[link] != nil
            let directions: Set<TrafficDirection> = switch event.direction {
            case .both: [.up, .down]
            case .up: [.up]
            case .down: [.down]
            }
            switch event.action {
            case .down:
                if let since = downSince[link], !inFlap {
                    error("link '\(link)' is down already (since \(since.roamDescription)); remove this down, or add an up before it", at: node)
                }
                downSince[link] = downSince[link] ?? event.at
            case .up:
                if downSince[link] == nil, !inFlap {
                    error("link '\(link)' is up at \(event.at.roamDescription): no down comes before this up; remove it, or add a down before it",
                          at: node)
                }
                downSince[link] = nil
            case .flap(_, _, let until):
                flapping[link] = until
            case .blackhole(true):
                blackholed[link, default: []].formUnion(directions)
            case .blackhole(false):
                if blackholed[link, default: []].isDisjoint(with: directions) {
                    let which = event.direction == .both ? "" : " (\(event.direction.rawValue))"
                    error("no blackhole is on for link '\(link)'\(which) at \(event.at.roamDescription); blackhole: false lifts one that "
                        + "an earlier blackhole: true set", at: node)
                }
                blackholed[link, default: []].subtract(directions)
            default:
                break
            }
        }
    }

    /// Refuses a timeline that expands to more link changes than ``ScenarioLimits/maximumChanges``
    /// (a ramp makes one per step, a flap two per period), at the event that crosses the bound.
    private func checkExpansion(_ events: [(event: TimelineEvent, node: Node)]) {
        var total = 0
        for (event, node) in events {
            let count = TimelineSchedule.changeCount(of: event)
            total += count
            if total > ScenarioLimits.maximumChanges {
                var detail = ""
                if case let .flap(period, _, until) = event.action {
                    detail = " (this flap alone makes \(count): two every \(period.roamDescription) until \(until.roamDescription); use a longer period or end it sooner)"
                }
                error("the timeline makes more than \(ScenarioLimits.maximumChanges) link changes by this event\(detail); "
                    + "Roam plays at most \(ScenarioLimits.maximumChanges) in a scenario", at: node)
                return
            }
        }
    }

    func ramp(_ node: Node) -> TimelineEvent.Action? {
        guard var ramp = fields(node, "ramp") else { return nil }
        let target = take(&ramp, "to", required: true) { self.impairmentBlock($0, "ramp target") }
        let over = take(&ramp, "over", required: true) { self.duration($0, "over", allowZero: false) }
        finish(ramp, known: ["to", "over"])
        if let target, target.isEmpty { error("a ramp needs at least one setting under 'to'", at: node) }
        guard let target, let over else { return nil }
        return .ramp(to: target, over: over)
    }

    func flap(_ node: Node, at: Duration?, duration: Duration?) -> TimelineEvent.Action? {
        guard var flap = fields(node, "flap") else { return nil }
        let period = take(&flap, "period", required: true) {
            self.duration($0, "period", allowZero: false, minimum: ScenarioLimits.minimumFlapPeriod)
        }
        let duty = take(&flap, "duty") { value -> Double? in
            guard let fraction = self.fraction(value, "duty") else { return nil }
            guard fraction > 0, fraction < 1 else {
                self.error("duty is the share of each period the link is up: more than 0% and less than 100%", at: value)
                return nil
            }
            return fraction
        } ?? 0.5
        let until = take(&flap, "until") { self.duration($0, "until") }
        finish(flap, known: ["period", "duty", "until"])
        let end = until ?? duration
        if let until, let at, until <= at {
            error("until (\(until.roamDescription)) must come after the event's at (\(at.roamDescription))", at: node)
            return nil
        }
        if let until, let duration, until > duration {
            error("until (\(until.roamDescription)) is after the scenario ends (\(duration.roamDescription))", at: node)
            return nil
        }
        guard let period, let end else { return nil }
        return .flap(period: period, duty: duty, until: end)
    }

    // MARK: - Workloads

    func workloads(_ node: Node, nodes: Set<String>, links: [LinkSpec], duration: Duration?) -> [Workload]? {
        guard let items = list(node, "workloads") else { return nil }
        var workloads: [Workload] = []
        var names: Set<String> = []
        var reachable = ConnectedNodes(links: links)
        var reachableOver = Dictionary(uniqueKeysWithValues: IPFamily.allCases.map { family in
            (family, ConnectedNodes(links: links.filter { $0.families.contains(family) }))
        })
        let common = ["name", "kind", "from", "to", "mode", "prohibit", "family", "start", "stop", "timeout"]
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
            if let from, let to, from != to, kindName != "command", reachable.connected(from, to) {
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
                parsed.family = family ?? .ipv4
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

    // MARK: - Expectations

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
            }
            happening.insert(event.link + "\u{0}" + name)
        }
        let metrics = ["maxStall", "minThroughput", "maxTimeToFirstByte", "completes", "exitCode", "maxBytesOver"]
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
                    } else {
                        expectations.append(Expectation(subject: workload.name, check: check, line: item.line))
                    }
                }
            }
            finish(expectation, known: ["workload"] + metrics)
        }
        return expectations
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
            let events = ["down", "up", "blackhole", "set", "ramp", "flap", "profile"]
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

extension Duration {
    /// `250ms`, `1.5s`, `2m30s`-free short form used in messages.
    public var roamDescription: String {
        let (seconds, attoseconds) = components
        let milliseconds = Double(seconds) * 1000 + Double(attoseconds) / 1e15
        if milliseconds.magnitude >= 1000 { return "\(trim(milliseconds.rounded() / 1000))s" }
        return "\(trim((milliseconds * 1000).rounded() / 1000))ms"
    }
}

/// Which nodes links join, directly or through other nodes (nodes forward), by union-find.
struct ConnectedNodes {
    private var parent: [String: String] = [:]

    init(links: [LinkSpec]) {
        for link in links { union(link.endpoints.0, link.endpoints.1) }
    }

    private mutating func root(_ node: String) -> String {
        var current = node
        while let next = parent[current], next != current { current = next }
        // Path compression keeps later look-ups short.
        var walk = node
        while let next = parent[walk], next != current {
            parent[walk] = current
            walk = next
        }
        return current
    }

    private mutating func union(_ a: String, _ b: String) {
        let ra = root(a), rb = root(b)
        if ra != rb { parent[ra] = rb }
    }

    mutating func connected(_ a: String, _ b: String) -> Bool { root(a) == root(b) }
}
